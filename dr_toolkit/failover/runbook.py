"""The manual hot-to-cold failover runbook.

Steps, in order (:data:`STEPS`):

1. ``fence_hot``     bump the fencing epoch (fenced cluster = hot) and mark the hot cluster read-only
2. ``wait_drain``    wait (up to ``failover.drain_timeout_s``) until HBase queues and the Kafka
                     mirror have shipped everything the hot cluster took before the fence
3. ``final_copy``    one last incremental copy of every HDFS policy
4. ``final_verify``  verify every verification policy; BADROWS > 0 stops the run
5. ``kafka_offsets`` checkpoint the hot groups (when the hot brokers still answer), remap the
                     offsets onto the cold cluster and apply them
6. ``final_gate``    the gate must say GO: every signal caught up past the fence
7. ``metadata_lint`` hot-cluster values (namenodes, hosts, buckets) left in the replicated
                     metadata and configuration, shown to the approver (it does not block)
8. ``approval``      a human approves (typed confirmation in the CLI, Airflow's approval
                     operator in the DAG)
9. ``promote_cold``  the active-cluster znode names the cold cluster (written under the epoch)
10. ``report``       the final report, JSON and HTML, in ``failover.reports_dir``

Nothing changes unless ``execute`` is true (dry run: every step says what it would do). Each
step is idempotent and recorded in the ledger's audit events (who, what, when,
before/after); ``resume(run_id)`` skips the steps recorded done for that run and redoes the
rest. Writer steps run under the fencing epoch taken in ``fence_hot`` and stop with
FencedError if someone fenced again since.
"""

from __future__ import annotations

import html
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, DrtError, ProblemFound
from dr_toolkit.failover.gate import iso
from dr_toolkit.ledger.store import actor
from dr_toolkit.secrets import redact

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)

STEPS = ("fence_hot", "wait_drain", "final_copy", "final_verify", "kafka_offsets", "final_gate", "metadata_lint",
         "approval", "promote_cold", "report")
COMPONENT = "failover"
DONE, PLANNED, FAILED, SKIPPED, WAITING, REJECTED = "done", "planned", "failed", "skipped", "waiting", "rejected"

Approver = Callable[[dict[str, Any]], bool]


@dataclass
class StepResult:
    name: str
    status: str
    detail: dict[str, Any] = field(default_factory=dict)
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "message": self.message, "detail": self.detail}


class StepFailed(ProblemFound):
    """A runbook step could not complete; the run stops here and can be resumed."""


def _scrub(value: Any) -> Any:
    """Round-trip through JSON with every string redacted (no secret reaches the ledger or a report)."""
    return json.loads(redact(json.dumps(value, default=str)))


def _jsonable(obj: Any) -> Any:
    to_json = getattr(obj, "to_json", None)
    return to_json() if callable(to_json) else obj


class Runbook:
    """One failover run. Create with :meth:`start` or :meth:`resume`."""

    def __init__(self, topology: Topology, ledger: Ledger, run_id: str, *, execute: bool,
                 reason: str = "", who: str | None = None, approver: Approver | None = None,
                 poll_s: float = 1.0, drain_timeout_s: float | None = None,
                 zk_credentials: Credentials | None = None) -> None:
        self.topology = topology
        self.ledger = ledger
        self.run_id = run_id
        self.execute = execute
        self.reason = reason
        self.who = who or actor()
        self.approver = approver
        self.poll_s = poll_s
        self.drain_timeout_s = topology.failover.drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        self.results: dict[str, StepResult] = {}
        # credentials of the fencing ZooKeeper (resolved by Airflow); None: secrets.lookup(conn_id)
        self.zk_credentials = zk_credentials

    # -- creation ----------------------------------------------------------------------------------
    @classmethod
    def start(cls, topology: Topology, ledger: Ledger, *, reason: str, execute: bool = False,
              run_id: str | None = None, **kw: Any) -> Runbook:
        if not reason.strip():
            raise ConfigError("a failover needs a reason", hint="pass --reason TEXT (it goes to the audit log)")
        rid = ledger.start_failover_run(reason=reason, execute=execute, run_id=run_id, who=kw.get("who"))
        ledger.audit(component=COMPONENT, action="run", dry_run=not execute, status="started", run_id=rid,
                     target=topology.cold_name, after={"reason": reason, "execute": execute},
                     message=f"failover {topology.hot_name} -> {topology.cold_name}", who=kw.get("who"))
        return cls(topology, ledger, rid, execute=execute, reason=reason, **kw)

    @classmethod
    def resume(cls, topology: Topology, ledger: Ledger, run_id: str, *, execute: bool | None = None,
               **kw: Any) -> Runbook:
        row = ledger.failover_run(run_id)
        if row is None:
            raise ConfigError(f"no failover run {run_id!r} in the ledger", where=ledger.url,
                              hint="list runs with `drt status`")
        was = bool(row["execute"])
        if execute is not None and execute != was:
            raise ConfigError(f"run {run_id} was started {'with' if was else 'without'} --execute",
                              hint="resume it the same way, or start a new run")
        rb = cls(topology, ledger, run_id, execute=was, reason=row["reason"] or "", **kw)
        for name in rb.done_steps():
            rb.results[name] = StepResult(name, DONE, {"earlier": True}, "done earlier in this run")
        ledger.set_failover_status(run_id, "running")
        return rb

    # -- ledger state ------------------------------------------------------------------------------
    def events(self) -> list[dict[str, Any]]:
        return self.ledger.audit_events(run_id=self.run_id, component=COMPONENT)

    def done_steps(self) -> list[str]:
        done = {e["action"] for e in self.events() if e["status"] == DONE and bool(e["dry_run"]) != self.execute}
        return [s for s in STEPS if s in done]

    def step_event(self, name: str, status: str) -> dict[str, Any] | None:
        for e in reversed(self.events()):
            if e["action"] == name and e["status"] == status:
                return dict(e)
        return None

    @property
    def epoch(self) -> int | None:
        e = self.step_event("fence_hot", DONE)
        if e and e["after_state"] and self.execute:
            return int(e["after_state"]["fencing"]["epoch"])
        return None

    def _audit(self, name: str, status: str, *, before: Any = None, after: Any = None,
               message: str | None = None, who: str | None = None) -> None:
        self.ledger.audit(component=COMPONENT, action=name, dry_run=not self.execute, status=status,
                          run_id=self.run_id, target=self.topology.cold_name, before=_scrub(before),
                          after=_scrub(after), message=message, who=who or self.who)

    # -- running -----------------------------------------------------------------------------------
    def run(self, *, until: str | None = None) -> dict[str, Any]:
        """Run every step not yet done (up to and including ``until``); stop at the first failure."""
        status = "succeeded"
        for name in STEPS:
            if name in self.results and self.results[name].status == DONE:
                continue
            res = self.run_step(name)
            if res.status == FAILED and not self.execute:
                status = "failed"  # a dry run goes on: the operator sees every step's answer
                continue
            if res.status in (FAILED, REJECTED):
                status = "failed" if res.status == FAILED else "aborted"
                break
            if res.status == WAITING:
                status = "waiting_approval"
                break
            if until == name:
                status = "running"
                break
        if status != "running":
            self.ledger.set_failover_status(self.run_id, status, detail=self.summary())
        out = self.summary()
        out["status"] = status
        return out

    def run_step(self, name: str) -> StepResult:
        if name not in STEPS:
            raise ConfigError(f"unknown runbook step {name!r}", hint=f"steps: {', '.join(STEPS)}")
        done = self.step_event(name, DONE)
        if done is not None and bool(done["dry_run"]) != self.execute:
            res = StepResult(name, DONE, {"earlier": True}, "done earlier in this run")
            self.results[name] = res
            return res
        self._audit(name, "started")
        fn: Callable[[], StepResult] = getattr(self, f"_step_{name}")
        try:
            res = fn()
        except DrtError as exc:
            res = StepResult(name, FAILED, {"error": exc.message}, exc.message)
        except Exception as exc:
            log.debug("step %s crashed", name, exc_info=True)
            res = StepResult(name, FAILED, {"error": f"{type(exc).__name__}: {exc}"}, f"{type(exc).__name__}: {exc}")
        res.detail = _scrub(res.detail)
        if res.status != WAITING:
            final = DONE if res.status in (DONE, PLANNED) else res.status
            self._audit(name, final, before=res.detail.get("before"), after=res.detail.get("after", res.detail),
                        message=res.message, who=res.detail.get("approved_by"))
        self.results[name] = res
        return res

    def summary(self) -> dict[str, Any]:
        steps = [{"name": s, "status": self.results[s].status if s in self.results else "pending",
                  **({"message": self.results[s].message} if s in self.results and self.results[s].message else {})}
                 for s in STEPS]
        return {"run_id": self.run_id, "execute": self.execute, "dry_run": not self.execute,
                "hot": self.topology.hot_name, "cold": self.topology.cold_name, "steps": steps}

    def _writer_guard(self) -> None:
        """Writer steps: refuse to write when someone fenced again since this run's fence."""
        if not self.execute or self.epoch is None:
            return
        from dr_toolkit.zk.fencing import open_fence

        with open_fence(self.topology, credentials=self.zk_credentials) as fence:
            fence.check_epoch(self.epoch)

    # -- the steps -------------------------------------------------------------------------------
    def _step_fence_hot(self) -> StepResult:
        from dr_toolkit.zk.fencing import open_fence

        hot = self.topology.hot_name
        by = f"{self.who} run {self.run_id}"
        with open_fence(self.topology, credentials=self.zk_credentials) as fence:
            before = fence.snapshot()
            st = fence.state()
            if not self.execute:
                return StepResult("fence_hot", PLANNED, {"before": before, "after": {
                    "would": f"bump the fencing epoch {st.epoch} -> {st.epoch + 1} and mark {hot} read-only"}})
            if st.fenced_cluster == hot and self.run_id in (st.by or ""):
                pass  # fenced by this run already (killed before the audit record): keep that epoch
            else:
                st = fence.bump(fenced_cluster=hot, by=by)
            fence.set_read_only(hot, True, epoch=st.epoch, by=by)
            after = fence.snapshot()
        return StepResult("fence_hot", DONE, {"before": before, "after": after},
                          f"{hot} fenced at epoch {st.epoch}")

    def _fenced_at(self) -> float | None:
        e = self.step_event("fence_hot", DONE)
        if e and e["after_state"] and self.execute:
            return float(e["after_state"]["fencing"]["at"])
        return None

    def drain_state(self) -> tuple[list[Any], list[str], dict[str, Any]]:
        """HBase queues and the Kafka mirror: (signals, reasons not drained, detail); nothing is recorded."""
        from dr_toolkit.failover.gate import decide
        from dr_toolkit.failover.signals import read_signals

        fenced_at = self._fenced_at()
        sigs = read_signals(self.topology, self.ledger, components=("hbase", "kafka"))
        reasons = decide(self.topology, sigs, fenced_at=fenced_at).reasons if sigs else []
        return sigs, reasons, {"signals": [s.to_json() for s in sigs], "reasons": reasons,
                               "fenced_at": iso(fenced_at)}

    def _step_wait_drain(self) -> StepResult:
        deadline = time.monotonic() + self.drain_timeout_s
        while True:
            sigs, reasons, detail = self.drain_state()
            if not reasons:
                return StepResult("wait_drain", DONE if self.execute else PLANNED, detail,
                                  "HBase queues and the Kafka mirror are drained" if sigs else "nothing to drain")
            if not self.execute:
                return StepResult("wait_drain", PLANNED, detail, "would wait for: " + "; ".join(reasons))
            if time.monotonic() >= deadline:
                return StepResult("wait_drain", FAILED, detail,
                                  f"not drained after {self.drain_timeout_s:g}s: " + "; ".join(reasons))
            time.sleep(self.poll_s)

    def _step_final_copy(self) -> StepResult:
        policies = self.topology.policies.hdfs
        if not policies:
            return StepResult("final_copy", DONE if self.execute else PLANNED, {"policies": []}, "no HDFS policies")
        from dr_toolkit.copy import api  # type: ignore[attr-defined, unused-ignore]

        self._writer_guard()
        out: list[Any] = []
        failed = 0
        for p in policies:
            results = api.replicate_policy(self.topology, p.name, self.ledger, dry_run=not self.execute,
                                           fence_epoch=self.epoch)
            for r in results:
                j = _jsonable(r)
                out.append({"policy": p.name, **j})
                failed += int(j.get("files_failed") or 0)
        if failed:
            return StepResult("final_copy", FAILED, {"results": out}, f"{failed} files failed to copy")
        return StepResult("final_copy", DONE if self.execute else PLANNED, {"results": out},
                          f"{len(out)} policy targets copied" if self.execute else "dry-run copy plan")

    def _step_final_verify(self) -> StepResult:
        policies = self.topology.policies.verify
        if not policies:
            return StepResult("final_verify", DONE if self.execute else PLANNED, {}, "no verification policies")
        if not self.execute:
            return StepResult("final_verify", PLANNED, {"policies": [p.name for p in policies]},
                              "would verify " + ", ".join(p.name for p in policies))
        from dr_toolkit.verify import api  # type: ignore[attr-defined, unused-ignore]

        out = []
        bad = 0
        for p in policies:
            r = api.verify_policy(self.topology, p.name, self.ledger)
            counters = dict(r.counters)
            bad += int(counters.get("BADROWS", 0))
            out.append({"policy": p.name, **counters})
        if bad:
            return StepResult("final_verify", FAILED, {"results": out}, f"verification found {bad} bad rows")
        return StepResult("final_verify", DONE, {"results": out}, "every dataset verified with BADROWS 0")

    def _step_kafka_offsets(self) -> StepResult:
        groups = [g for p in self.topology.policies.kafka for g in p.groups]
        if not groups:
            return StepResult("kafka_offsets", DONE if self.execute else PLANNED, {}, "no Kafka groups")
        from dr_toolkit.kafka import api  # type: ignore[attr-defined, unused-ignore]

        self._writer_guard()
        detail: dict[str, Any] = {}
        try:
            cp = api.checkpoint(self.topology, self.ledger)
            detail["checkpoint"] = _jsonable(cp) if not isinstance(cp, str) else {"checkpoint_id": cp}
        except DrtError as exc:  # the hot brokers may be gone: remap from the last checkpoint
            detail["checkpoint"] = {"error": exc.message, "using": "the last checkpoint in the ledger"}
        remaps = []
        for g in dict.fromkeys(groups):
            r = api.remap(self.topology, self.ledger, g, apply=self.execute, run_id=self.run_id)
            remaps.append(r)
        detail["groups"] = remaps
        if self.execute:
            not_applied = [r["group"] for r in remaps if not r.get("applied")]
            if not_applied:
                return StepResult("kafka_offsets", FAILED, detail,
                                  f"offsets not applied for group(s) {', '.join(map(str, not_applied))}")
        return StepResult("kafka_offsets", DONE if self.execute else PLANNED, detail,
                          f"offsets {'applied' if self.execute else 'remapped (dry run)'} for {len(remaps)} group(s)")

    def _step_final_gate(self) -> StepResult:
        from dr_toolkit.failover.gate import check

        res = check(self.topology, self.ledger, fence_credentials=self.zk_credentials)
        detail = res.to_json()
        if res.go:
            return StepResult("final_gate", DONE if self.execute else PLANNED, detail,
                              f"GO; recovery point {detail['recovery_point']}")
        if not self.execute:
            return StepResult("final_gate", PLANNED, detail, "NO_GO now: " + "; ".join(res.reasons))
        return StepResult("final_gate", FAILED, detail, "NO_GO: " + "; ".join(res.reasons))

    def _step_metadata_lint(self) -> StepResult:
        from dr_toolkit.failover.lint import lint

        res = lint(self.topology)
        n = len(res["findings"])
        msg = (f"{n} hot-cluster value(s) in replicated metadata, e.g. {res['findings'][0]['path']}:"
               f"{res['findings'][0]['line']} ({res['findings'][0]['value']})" if n else
               f"no hot-cluster values in {res['files_scanned']} metadata/config files")
        return StepResult("metadata_lint", DONE if self.execute else PLANNED,
                          {"after": {"clean": res["clean"], "files_scanned": res["files_scanned"],
                                     "findings": res["findings"][:50]}}, msg)

    def approval_request(self) -> dict[str, Any]:
        gate = self.step_event("final_gate", DONE)
        lint = self.step_event("metadata_lint", DONE)
        return {"run_id": self.run_id, "hot": self.topology.hot_name, "cold": self.topology.cold_name,
                "reason": self.reason, "recovery_point": (gate["after_state"] or {}).get("recovery_point")
                if gate else None, "metadata_lint": lint["message"] if lint else None}

    def record_approval(self, *, approved: bool, who: str, note: str | None = None) -> StepResult:
        """Record a human decision taken outside the runbook (the Airflow approval operator)."""
        res = StepResult("approval", DONE if approved else REJECTED,
                         {"approved": approved, "approved_by": who, "after": {"approved": approved, "by": who}},
                         note or ("approved" if approved else "rejected") + f" by {who}")
        self._audit("approval", res.status, after=res.detail["after"], message=res.message, who=who)
        self.results["approval"] = res
        return res

    def _step_approval(self) -> StepResult:
        if not self.execute:
            return StepResult("approval", PLANNED, {}, "would ask a human to approve the promotion")
        req = self.approval_request()
        if self.approver is None:
            return StepResult("approval", WAITING, req, "waiting for a human approval")
        ok = self.approver(req)
        return StepResult("approval", DONE if ok else REJECTED,
                          {**req, "approved": ok, "approved_by": self.who, "after": {"approved": ok, "by": self.who}},
                          f"{'approved' if ok else 'rejected'} by {self.who}")

    def _step_promote_cold(self) -> StepResult:
        from dr_toolkit.zk.fencing import open_fence

        cold = self.topology.cold_name
        if not self.execute:
            return StepResult("promote_cold", PLANNED, {"after": {"would": f"set the active cluster to {cold}"}},
                              f"would promote {cold}")
        if self.step_event("approval", DONE) is None:
            return StepResult("promote_cold", FAILED, {}, "no human approval recorded for this run")
        epoch = self.epoch
        if epoch is None:
            return StepResult("promote_cold", FAILED, {}, "the hot cluster was not fenced by this run")
        by = f"{self.who} run {self.run_id}"
        with open_fence(self.topology, credentials=self.zk_credentials) as fence:
            before = fence.snapshot()
            active = before.get("active") or {}
            if not (active.get("cluster") == cold and active.get("epoch") == epoch):
                fence.set_active(cold, epoch=epoch, by=by)
            if fence.is_read_only(cold):
                fence.set_read_only(cold, False, epoch=epoch, by=by)
            after = fence.snapshot()
        return StepResult("promote_cold", DONE, {"before": before, "after": after},
                          f"{cold} is the active cluster (epoch {epoch})")

    def _step_report(self) -> StepResult:
        summary = self.summary()
        for st in summary["steps"]:  # the report is this step's own output: show it as done
            if st["name"] == "report":
                st["status"] = DONE if self.execute else PLANNED
        paths = write_report(self.topology, self.ledger, self.run_id, summary)
        return StepResult("report", DONE if self.execute else PLANNED, {"after": paths}, f"report {paths['html']}")


# --- the report ---------------------------------------------------------------------------------


def reports_dir(topology: Topology) -> Path:
    p = Path(topology.failover.reports_dir)
    if not p.is_absolute() and topology.source_file:
        p = Path(topology.source_file).resolve().parent / p
    return p


def write_report(topology: Topology, ledger: Ledger, run_id: str, summary: dict[str, Any]) -> dict[str, str]:
    """Write ``<reports_dir>/<run_id>.json`` and ``.html``: steps, audit trail, gate verdict."""
    events = ledger.audit_events(run_id=run_id)
    run = ledger.failover_run(run_id) or {}
    gate = next((e["after_state"] for e in reversed(events) if e["action"] == "final_gate" and e["after_state"]),
                None)
    doc = _scrub({"run": {k: run.get(k) for k in ("run_id", "actor", "reason", "execute", "status", "started_at")},
                  "summary": summary, "gate": gate,
                  "audit": [{k: e[k] for k in ("at", "actor", "action", "status", "dry_run", "message",
                                               "before_state", "after_state")} for e in events]})
    out = reports_dir(topology)
    out.mkdir(parents=True, exist_ok=True)
    jpath, hpath = out / f"{run_id}.json", out / f"{run_id}.html"
    jpath.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str))
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(s['name'])}</td><td class='{esc(s['status'])}'>{esc(s['status'])}</td>"
                   f"<td>{esc(str(s.get('message') or ''))}</td></tr>" for s in summary.get("steps", []))
    audit = "".join(f"<tr><td>{esc(iso(e['at']) or '')}</td><td>{esc(str(e['actor']))}</td>"
                    f"<td>{esc(str(e['action']))}</td><td>{esc(str(e['status']))}</td>"
                    f"<td>{esc(str(e['message'] or ''))}</td></tr>" for e in doc["audit"])
    verdict = esc(str((gate or {}).get("verdict", "not evaluated")))
    rp = esc(str((gate or {}).get("recovery_point") or "unknown"))
    hpath.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>Failover report "
        f"{esc(run_id)}</title><style>body{{font-family:sans-serif}}td,th{{padding:2px 8px;border:1px solid #ccc}}"
        ".done{background:#dfd}.failed,.rejected{background:#fdd}.planned{background:#eef}</style></head><body>"
        f"<h1>Failover {esc(topology.hot_name)} &rarr; {esc(topology.cold_name)}</h1>"
        f"<p>run <code>{esc(run_id)}</code> &middot; {'EXECUTE' if summary.get('execute') else 'DRY RUN'}"
        f" &middot; reason: {esc(str(run.get('reason') or ''))} &middot; by {esc(str(run.get('actor') or ''))}</p>"
        f"<p>gate verdict <b id='verdict'>{verdict}</b>, recovery point <b id='recovery-point'>{rp}</b></p>"
        f"<h2>Steps</h2><table><tr><th>step</th><th>status</th><th>message</th></tr>{rows}</table>"
        f"<h2>Audit trail</h2><table><tr><th>at</th><th>who</th><th>step</th><th>status</th><th>message</th></tr>"
        f"{audit}</table></body></html>")
    return {"json": str(jpath), "html": str(hpath)}
