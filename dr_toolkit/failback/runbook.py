"""Re-protect after a failover, and the planned switchover (issue 40).

``Reprotect`` runs on the topology of the direction that was failed over (its ``hot`` is the old
active cluster, now fenced; its ``cold`` the active one). Steps, in order (:data:`STEPS`):

1. ``preflight``     the fencing ZooKeeper names this topology's cold cluster active (a failover
                     promoted it); the recovery point it was promoted at, read from that znode
2. ``divergence``    what the old hot cluster took after the recovery point, per capability
                     (:mod:`dr_toolkit.failback.hdfs`, ``.kafka``, ``.hbase``): the divergence report
3. ``approval``      a human approves, each divergence item acknowledged one by one (as metadata-lint
                     findings are); only ``failover.approvers`` may decide when that list is set
4. ``set_aside``     every divergence item kept on the old hot cluster, moved aside (never deleted)
5. ``lift_standby``  one ZooKeeper transaction (:meth:`~dr_toolkit.zk.fencing.Fence.reprotect`): the
                     direction recorded active → old hot, a new epoch that fences nothing, the old
                     hot's read-only flag and the mirrors-paused flag removed
6. ``hdfs``, ``kafka``, ``hbase``  each capability brings the old hot cluster up to date by the delta
                     and makes its replication run the other way
7. ``gate``          the gate in the new direction, recorded (its verdict is reported, not required:
                     a fresh re-protect may still be catching up)
8. ``report``        ``reprotect-<run>.json`` (the divergence report with where each item was kept)

Audit, resume and dry run as the failover runbook: each step's events (component ``reprotect``)
are the run's state; ``resume`` skips the steps done; a dry run changes nothing.

The switchover (:func:`switchover`) is the planned failover runbook in the current direction
followed by a re-protect: zero loss, since the planned runbook's gate says GO only when every
write the active cluster took before its fence is on the other side.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, DrtError
from dr_toolkit.failback import direction
from dr_toolkit.failback import hbase as fb_hbase
from dr_toolkit.failback import hdfs as fb_hdfs
from dr_toolkit.failback import kafka as fb_kafka
from dr_toolkit.failback.direction import oriented
from dr_toolkit.failback.divergence import Divergence
from dr_toolkit.failover.gate import check as gate_check
from dr_toolkit.failover.report import reports_dir, scrub
from dr_toolkit.failover.runbook import (
    DONE,
    FAILED,
    PLANNED,
    REJECTED,
    WAITING,
    Approver,
    FenceSession,
    Runbook,
    RunState,
    StepResult,
    may_decide,
    run_steps,
)
from dr_toolkit.ledger.store import actor, new_id
from dr_toolkit.signal import iso

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)
COMPONENT = "reprotect"


class Step(StrEnum):
    PREFLIGHT = "preflight"
    DIVERGENCE = "divergence"
    APPROVAL = "approval"
    SET_ASIDE = "set_aside"
    LIFT_STANDBY = "lift_standby"
    HDFS = "hdfs"
    KAFKA = "kafka"
    HBASE = "hbase"
    GATE = "gate"
    REPORT = "report"


STEPS: tuple[Step, ...] = tuple(Step)

#: each capability's module (divergence, set_aside, reprotect) and whether the topology has its policies
CAPABILITIES: Mapping[str, tuple[Any, Callable[[Topology], bool]]] = MappingProxyType({
    "hdfs": (fb_hdfs, lambda t: bool(t.policies.hdfs)),
    "kafka": (fb_kafka, lambda t: bool(t.policies.kafka)),
    "hbase": (fb_hbase, lambda t: bool(t.policies.hbase)),
})


class Reprotect:
    """One re-protect run. Create with :meth:`start` or :meth:`resume`."""

    def __init__(self, topology: Topology, ledger: Ledger, run_id: str, *, execute: bool, access: Access,
                 who: str | None = None, approver: Approver | None = None) -> None:
        self.topology = topology  # the direction failed over: hot = the old active, cold = the active now
        self.ledger = ledger if execute else ledger.dry_run()
        self.run_id, self.execute, self.access = run_id, execute, access
        self.who = who or actor()
        self.approver = approver
        self.results: dict[str, StepResult] = {}
        self.state = RunState(execute=execute)

    # -- creation ----------------------------------------------------------------------------------
    @classmethod
    def start(cls, topology: Topology, ledger: Ledger, *, access: Access, reason: str, execute: bool = False,
              run_id: str | None = None, **kw: Any) -> Reprotect:
        if not reason.strip():
            raise ConfigError("a re-protect needs a reason", hint="pass --reason TEXT (it goes to the audit log)")
        rid = ledger.start_failover_run(reason=f"re-protect: {reason}", execute=execute,
                                        run_id=run_id or new_id("reprotect"), who=kw.get("who"))
        ledger.audit(component=COMPONENT, action="run", dry_run=not execute, status="started", run_id=rid,
                     target=topology.hot_name,
                     after={"reason": reason, "execute": execute, "hot": topology.hot_name,
                            "cold": topology.cold_name},
                     message=f"re-protect {topology.cold_name} -> {topology.hot_name}", who=kw.get("who"))
        return cls(topology, ledger, rid, execute=execute, access=access, **kw)

    @classmethod
    def resume(cls, configured: Topology, ledger: Ledger, run_id: str, *, access: Access, **kw: Any) -> Reprotect:
        """Resume ``run_id`` in the direction it started in (``configured``: the topology file as
        written; the run's first event names which cluster was hot)."""
        row = ledger.failover_run(run_id)
        events = ledger.audit_events(run_id=run_id, component=COMPONENT)
        if row is None or not events:
            raise ConfigError(f"no re-protect run {run_id!r} in the ledger", where=ledger.url,
                              hint="list runs with `drt status`")
        first = events[0].get("after_state") or {}
        topo = oriented(configured, {"hot": first.get("hot"), "cold": first.get("cold")})
        rb = cls(topo, ledger, run_id, execute=bool(row["execute"]), access=access, **kw)
        rb.state = RunState.fold(events, execute=rb.execute)
        if rb.state.aborted:
            raise ConfigError(f"re-protect run {run_id} was aborted", hint="start a new run")
        for step in STEPS:
            if step in rb.state.done:
                rb.results[step] = StepResult(step, DONE, {"earlier": True}, "done earlier in this run")
        return rb

    # -- ledger state ------------------------------------------------------------------------------
    def _audit(self, name: str, status: str, *, after: Any = None, message: str | None = None,
               who: str | None = None) -> None:
        after = scrub(after)
        self.ledger.audit(component=COMPONENT, action=str(name), dry_run=not self.execute, status=status,
                          run_id=self.run_id, target=self.topology.hot_name, after=after, message=message,
                          who=who or self.who)
        self.state = self.state.with_event({"action": str(name), "status": status, "dry_run": not self.execute,
                                            "after_state": after, "message": message})

    def _result(self, step: Step, after: dict[str, Any], message: str) -> StepResult:
        return StepResult(step, DONE if self.execute else PLANNED, {"after": after}, message)

    @property
    def items(self) -> list[Divergence]:
        """The divergence report's items (after set_aside: with where each was kept)."""
        src = self.state.after.get(Step.SET_ASIDE) or self.state.after.get(Step.DIVERGENCE) or {}
        return [Divergence.from_json(d) for d in src.get("items") or []]

    @property
    def recovery_point(self) -> float | None:
        rp = (self.state.after.get(Step.PREFLIGHT) or {}).get("recovery_point_epoch")
        return None if rp is None else float(rp)

    # -- running -----------------------------------------------------------------------------------
    def run(self, *, until: str | None = None) -> dict[str, Any]:
        """Run every step not yet done (up to and including ``until``); stop at the first failure."""
        status = run_steps([s.value for s in STEPS], self.results, lambda name: self.run_step(Step(name)),
                           execute=self.execute, until=until)
        if status != "running":
            self.ledger.set_failover_status(self.run_id, status, detail=self.summary())
        return {**self.summary(), "status": status}

    def run_step(self, step: Step) -> StepResult:
        self.state = RunState.fold(self.ledger.audit_events(run_id=self.run_id, component=COMPONENT),
                                   execute=self.execute)
        if step in self.state.done:
            res = StepResult(step, DONE, {"earlier": True}, "done earlier in this run")
        elif step == Step.APPROVAL and self.state.rejected:
            res = StepResult(step, REJECTED, {}, "rejected earlier in this run")
        else:
            self.ledger.set_failover_status(self.run_id, "running")
            self._audit(step, "started")
            try:
                with ExitStack() as stack:
                    res = _STEP_FUNCTIONS[step](self, FenceSession(self.topology, self.access, stack))
            except DrtError as exc:
                res = StepResult(step, FAILED, {"error": exc.message}, exc.message)
            except Exception as exc:  # one line in the report; the traceback at -v
                log.debug("re-protect step %s crashed", step, exc_info=True)
                res = StepResult(step, FAILED, {"error": f"{type(exc).__name__}: {exc}"},
                                 f"{type(exc).__name__}: {exc}")
            res.detail = scrub(res.detail)
            if res.status != WAITING and not res.detail.get("recorded"):
                final = DONE if res.status in (DONE, PLANNED) else res.status
                self._audit(step, final, after=res.detail.get("after", res.detail), message=res.message,
                            who=res.detail.get("decided_by"))
        self.results[step] = res
        return res

    def summary(self) -> dict[str, Any]:
        steps = [{"name": s.value, "status": self.results[s].status if s in self.results else "pending",
                  **({"message": self.results[s].message} if s in self.results and self.results[s].message else {})}
                 for s in STEPS]
        return {"run_id": self.run_id, "kind": "reprotect", "execute": self.execute, "dry_run": not self.execute,
                "active": self.topology.cold_name, "standby": self.topology.hot_name, "steps": steps,
                "divergence": [d.to_json() for d in self.items]}

    # -- the steps ---------------------------------------------------------------------------------
    def _step_preflight(self, fence: FenceSession) -> StepResult:
        f = fence()
        snap = f.snapshot()
        active = snap.get("active") or {}
        if active.get("cluster") != self.topology.cold_name:
            return StepResult(Step.PREFLIGHT, FAILED, {"after": snap},
                              f"{self.topology.cold_name} is not the active cluster (ZooKeeper names "
                              f"{active.get('cluster')!r}): re-protect follows a failover that promoted it")
        recovery = dict(active.get("recovery") or {})
        rp = recovery.get("recovery_point_epoch")
        after = {"fence": snap, "active": self.topology.cold_name, "standby": self.topology.hot_name,
                 "recovery_point_epoch": rp, "recovery_point": iso(rp) if rp is not None else None,
                 "promoted_at": active.get("at"), "promoted_by": active.get("by")}
        return self._result(Step.PREFLIGHT, after,
                            f"{self.topology.cold_name} active since {iso(active.get('at'))}; recovery point "
                            f"{after['recovery_point'] or 'unknown'}; {self.topology.hot_name} to be protected")

    def _capabilities(self) -> list[tuple[str, Any]]:
        return [(name, mod) for name, (mod, has) in CAPABILITIES.items() if has(self.topology)]

    def _step_divergence(self, _fence: FenceSession) -> StepResult:
        items: list[Divergence] = []
        counts: dict[str, int] = {}
        for name, mod in self._capabilities():
            got = mod.divergence(self.topology, self.ledger, self.access, recovery_point=self.recovery_point)
            counts[name] = len(got)
            items += got
        msg = (f"{len(items)} item(s) the old hot cluster {self.topology.hot_name} took after the recovery point "
               f"({', '.join(f'{k} {v}' for k, v in counts.items())}); each must be acknowledged" if items else
               f"nothing on {self.topology.hot_name} after the recovery point "
               f"({', '.join(f'{k} checked' for k in counts) or 'no policies'})")
        return self._result(Step.DIVERGENCE, {"items": [d.to_json() for d in items], "counts": counts}, msg)

    def approval_request(self) -> dict[str, Any]:
        pre = self.state.after.get(Step.PREFLIGHT) or {}
        return {"run_id": self.run_id, "kind": "reprotect", "active": self.topology.cold_name,
                "standby": self.topology.hot_name, "recovery_point": pre.get("recovery_point"),
                "findings": [{"id": d.id, "kind": f"{d.capability} divergence", "value": d.where,
                              "excerpt": json.dumps(d.detail, sort_keys=True, default=str)[:300]}
                             for d in self.items],
                "approvers": list(self.topology.failover.approvers)}

    def record_decision(self, approved: bool, who: str, comment: str | None = None, *,
                        acknowledged: list[str] | tuple[str, ...] = ()) -> StepResult:
        """A human decision; ConfigError (nothing recorded) when ``who`` may not decide or an item
        of the divergence report is left unacknowledged."""
        approvers = self.topology.failover.approvers
        if approvers and not may_decide(who, approvers):
            raise ConfigError(f"{who!r} may not decide on this re-protect", where=self.topology.source_file,
                              hint=f"failover.approvers lists who may: {', '.join(approvers)}")
        if not self.execute:
            raise ConfigError(f"run {self.run_id} is a dry run: there is nothing to decide")
        if self.state.decided:
            raise ConfigError(f"run {self.run_id} already has a decision", hint="start a new run to decide again")
        ack = set(acknowledged)
        left = [d.id for d in self.items if d.id not in ack]
        if approved and left:
            raise ConfigError(f"{len(left)} divergence item(s) not acknowledged: {', '.join(left[:5])}"
                              + (" …" if len(left) > 5 else ""),
                              hint="acknowledge each item of the divergence report (--acknowledge ID, or 'all')")
        after = {"approved": approved, "by": who, "at": time.time(), "comment": comment,
                 "acknowledged": sorted(ack)}
        status = DONE if approved else REJECTED
        message = (comment or "") + (" — " if comment else "") + f"{'approved' if approved else 'rejected'} by {who}"
        self._audit(Step.APPROVAL, status, after=after, message=message, who=who)
        res = StepResult(Step.APPROVAL, status, {"after": after, "decided_by": who, "recorded": True}, message)
        self.results[Step.APPROVAL] = res
        return res

    def _step_approval(self, _fence: FenceSession) -> StepResult:
        if not self.execute:
            return StepResult(Step.APPROVAL, PLANNED, {}, f"would ask a human to approve ({len(self.items)} "
                                                          "divergence item(s) to acknowledge)")
        req = self.approval_request()
        if self.approver is None:
            return StepResult(Step.APPROVAL, WAITING, req, "waiting for a human approval")
        answer = self.approver(req)
        d: dict[str, Any] = answer if isinstance(answer, dict) else {"approved": bool(answer)}
        try:
            return self.record_decision(bool(d.get("approved")), str(d.get("who") or self.who), d.get("comment"),
                                        acknowledged=list(d.get("acknowledged") or ()))
        except ConfigError as exc:
            return StepResult(Step.APPROVAL, FAILED, {"error": exc.message}, exc.message)

    def _step_set_aside(self, _fence: FenceSession) -> StepResult:
        items = self.items
        if not self.execute:
            return self._result(Step.SET_ASIDE, {"items": [d.to_json() for d in items]},
                                f"would move {len(items)} item(s) aside on {self.topology.hot_name}")
        kept: list[Divergence] = []
        for name, mod in self._capabilities():
            mine = [d for d in items if d.capability == name]
            kept += mod.set_aside(self.topology, self.ledger, self.access, mine, run_id=self.run_id) if mine else []
        # each capability raises when it cannot keep an item; an item left without kept_at holds
        # nothing to keep (a file the old hot deleted: its base bytes are on the active cluster)
        n = sum(1 for d in kept if d.kept_at)
        return self._result(Step.SET_ASIDE, {"items": [d.to_json() for d in kept]},
                            f"{n} item(s) kept aside on {self.topology.hot_name}"
                            + (f", {len(kept) - n} with nothing to keep (deletions)" if len(kept) > n else ""))

    def _step_lift_standby(self, fence: FenceSession) -> StepResult:
        active, standby = self.topology.cold_name, self.topology.hot_name
        if not self.execute:
            return self._result(Step.LIFT_STANDBY, {"would": f"protect {active} onto {standby}"},
                                f"would record the direction {active} -> {standby} and lift {standby}'s fence")
        f = fence()
        st = f.reprotect(active=active, standby=standby, by=f"{self.who} reprotect {self.run_id}", run_id=self.run_id)
        direction.record(self.ledger, {"hot": active, "cold": standby, "epoch": st.epoch, "run_id": self.run_id},
                         run_id=self.run_id, who=self.who)
        return self._result(Step.LIFT_STANDBY, {"fence": f.snapshot(), "epoch": st.epoch},
                            f"direction {active} -> {standby} recorded at epoch {st.epoch}; {standby} writable by "
                            "replication only")

    def _capability_step(self, step: Step) -> StepResult:
        mod, has = CAPABILITIES[step.value]
        if not has(self.topology):
            return StepResult(step, "skipped", {}, f"no {step.value} policies")
        extra: dict[str, Any] = {}
        if step == Step.HDFS:  # the copies into the old hot hold the epoch lift_standby raised
            extra["fence_epoch"] = (self.state.after.get(Step.LIFT_STANDBY) or {}).get("epoch")
        res = mod.reprotect(self.topology, self.ledger, self.access, run_id=self.run_id, dry_run=not self.execute,
                            progress=lambda line: log.info("re-protect %s: %s", step.value, line), **extra)
        ok = res.get("status") in ("done", "planned")
        return StepResult(step, (DONE if self.execute else PLANNED) if ok else FAILED, {"after": res},
                          str(res.get("message") or res.get("status")))

    def _step_hdfs(self, _fence: FenceSession) -> StepResult:
        return self._capability_step(Step.HDFS)

    def _step_kafka(self, _fence: FenceSession) -> StepResult:
        return self._capability_step(Step.KAFKA)

    def _step_hbase(self, _fence: FenceSession) -> StepResult:
        return self._capability_step(Step.HBASE)

    def _step_gate(self, _fence: FenceSession) -> StepResult:
        back = self.topology.reversed()
        res = gate_check(back, self.ledger, access=self.access, who=self.who,
                         record=f"reprotect:{self.run_id}" if self.execute else None)
        doc = res.to_json()
        return self._result(Step.GATE, {"gate": {k: doc.get(k) for k in ("verdict", "recovery_point", "reasons")}},
                            f"gate {back.hot_name} -> {back.cold_name}: {doc['verdict']}"
                            + (f" ({'; '.join(res.reasons[:3])})" if res.reasons else ""))

    def _step_report(self, _fence: FenceSession) -> StepResult:
        out = reports_dir(self.topology)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"reprotect-{self.run_id}.json"
        doc = {**self.summary(), "recovery_point": (self.state.after.get(Step.PREFLIGHT) or {}).get("recovery_point"),
               "approval": self.state.after.get(Step.APPROVAL), "written_at": iso(time.time())}
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(scrub(doc), indent=2, sort_keys=True, default=str), encoding="utf-8")
        tmp.replace(path)
        return self._result(Step.REPORT, {"json": str(path)}, f"report {path}")


_STEP_FUNCTIONS: Mapping[Step, Callable[[Reprotect, FenceSession], StepResult]] = MappingProxyType({
    Step.PREFLIGHT: Reprotect._step_preflight,
    Step.DIVERGENCE: Reprotect._step_divergence,
    Step.APPROVAL: Reprotect._step_approval,
    Step.SET_ASIDE: Reprotect._step_set_aside,
    Step.LIFT_STANDBY: Reprotect._step_lift_standby,
    Step.HDFS: Reprotect._step_hdfs,
    Step.KAFKA: Reprotect._step_kafka,
    Step.HBASE: Reprotect._step_hbase,
    Step.GATE: Reprotect._step_gate,
    Step.REPORT: Reprotect._step_report,
})


def switchover(topology: Topology, ledger: Ledger, *, access: Access, reason: str, execute: bool = False,
               failover_approver: Approver | None = None, reprotect_approver: Approver | None = None,
               who: str | None = None) -> dict[str, Any]:
    """The planned, zero-loss switchover: the planned failover runbook in the current direction
    (fence the active cluster, drain, final copy, verify, gate GO, approval, promote) and then a
    re-protect the other way. Each is its own run in the ledger (resumable on its own: ``drt
    failover run --resume`` / ``drt failover reprotect --resume``); the re-protect starts only
    after the failover succeeded."""
    fo = Runbook.start(topology, ledger, access=access, reason=f"switchover: {reason}", execute=execute,
                       approver=failover_approver, who=who)
    first = fo.run()
    out: dict[str, Any] = {"kind": "switchover", "execute": execute, "failover": first, "reprotect": None,
                           "status": first["status"]}
    if first["status"] != "succeeded" or not execute:
        return out
    rp = Reprotect.start(topology, ledger, access=access, reason=f"switchover: {reason}", execute=execute,
                         approver=reprotect_approver, who=who)
    second = rp.run()
    out.update(reprotect=second, status=second["status"])
    return out
