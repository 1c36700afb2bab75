"""The manual hot-to-cold failover runbook: planned (hot answers) and unplanned (hot is gone).

Planned steps, in order (:data:`STEPS`):

1. ``fence_hot``     bump the fencing epoch (fenced cluster = hot) and mark the hot cluster read-only
2. ``wait_drain``    wait (up to ``failover.drain_timeout_s``) until HBase queues and the Kafka
                     mirror have shipped everything the hot cluster took before the fence
3. ``final_copy``    one last incremental copy of every HDFS policy
4. ``final_verify``  verify every verification policy; BADROWS > 0 stops the run
5. ``kafka_offsets`` checkpoint the hot groups (when the hot brokers still answer) and remap the
                     offsets onto the cold cluster — a plan only: nothing is written on cold yet
6. ``final_gate``    the gate must say GO: every signal caught up past the fence
7. ``metadata_lint`` hot-cluster values (namenodes, hosts, buckets) left in the replicated
                     metadata and configuration; each finding must be acknowledged by the approver
8. ``approval``      a human approves or rejects (typed confirmation in the CLI, Airflow's approval
                     operator in the DAG, :meth:`Runbook.record_decision` for both); only the users
                     in ``failover.approvers`` may decide when that list is set
9. ``kafka_apply``   re-run the gate (never trust an earlier GO), then apply the remapped offsets
10. ``promote_cold`` refused unless ``kafka_apply`` is done (offsets are applied there only); re-run the
                     gate unless ``kafka_apply`` just did, then the active-cluster znode
                     names the cold cluster (written under the epoch)
11. ``report``       the final report, JSON and HTML, in ``failover.reports_dir``
                     (:mod:`dr_toolkit.failover.report`; its audit trail ends with this step's event)

Unplanned steps (:data:`UNPLANNED_STEPS`, ``start(..., unplanned=True)``): ``fence_hot`` (refused
while the hot cluster still answers), ``pause_mirrors`` (record and flag what still mirrors into
cold), ``recovery_point`` (from what cold holds, with the data-loss window per component, see
:mod:`dr_toolkit.failover.unplanned`), ``kafka_offsets`` (from the last checkpoint), ``metadata_lint``,
``approval`` (the typed acceptance of the loss window is required), ``kafka_apply``,
``promote_cold`` (the recovery point is recomputed and must not be earlier than the accepted one),
``report``.

**State.** What the run did is its audit events in the ledger (who, what, when, before/after). A
step reads them once, at its start, and folds them into a :class:`RunState` (an immutable value:
the steps done, the fencing epoch taken, the approval, the lint findings, ...); the runbook
decides from that value, and folds each event it records into it. ``resume(run_id)`` skips the
steps recorded done for that run and redoes the rest. Steps are dispatched by a table
(:class:`Step` → function).

**Dry run.** Nothing changes unless ``execute`` is true: every step says what it would do, and the
runbook and every capability it calls write through the ledger's dry-run view
(:meth:`dr_toolkit.ledger.store.Ledger.dry_run`), where every transaction except the journal's
(the run's record and audit events) is rolled back — whatever method wrote it.

**Fencing.** Each step opens at most one ZooKeeper session of its own on the fencing znodes (on
first use; shared by every fencing call of the step, closed when the step ends). Writer steps run
under the fencing epoch taken in ``fence_hot`` and stop with FencedError if someone fenced again
since. ``abort(reason)`` ends a run that did not promote and lifts its fence (audited), so
scheduled replication runs again.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy import api as copy_api
from dr_toolkit.errors import ConfigError, DrtError, UnreachableError
from dr_toolkit.failover import report
from dr_toolkit.failover.gate import check, decide
from dr_toolkit.failover.lint import lint
from dr_toolkit.failover.report import scrub
from dr_toolkit.failover.signals import read_signals
from dr_toolkit.failover.unplanned import loss_window, probe_hot
from dr_toolkit.kafka import api as kafka_api
from dr_toolkit.kafka.api import protected_groups
from dr_toolkit.kafka.batch import apply_many, remap_many
from dr_toolkit.ledger.store import actor
from dr_toolkit.secrets import redact
from dr_toolkit.signal import iso
from dr_toolkit.verify import api as verify_api
from dr_toolkit.zk import fencing as zk_fencing  # open_fence through the module: a test counts the sessions
from dr_toolkit.zk.client import ZkUnreachable

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.failover.gate import GateResult
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology
    from dr_toolkit.zk.fencing import Fence

log = logging.getLogger(__name__)


class Step(StrEnum):
    FENCE_HOT = "fence_hot"
    PAUSE_MIRRORS = "pause_mirrors"
    WAIT_DRAIN = "wait_drain"
    FINAL_COPY = "final_copy"
    FINAL_VERIFY = "final_verify"
    RECOVERY_POINT = "recovery_point"
    KAFKA_OFFSETS = "kafka_offsets"
    FINAL_GATE = "final_gate"
    METADATA_LINT = "metadata_lint"
    APPROVAL = "approval"
    KAFKA_APPLY = "kafka_apply"
    PROMOTE_COLD = "promote_cold"
    REPORT = "report"


class StepStatus(StrEnum):
    DONE = "done"
    PLANNED = "planned"
    FAILED = "failed"
    SKIPPED = "skipped"
    WAITING = "waiting"
    REJECTED = "rejected"
    PENDING = "pending"


STEPS: tuple[Step, ...] = (Step.FENCE_HOT, Step.WAIT_DRAIN, Step.FINAL_COPY, Step.FINAL_VERIFY, Step.KAFKA_OFFSETS,
                           Step.FINAL_GATE, Step.METADATA_LINT, Step.APPROVAL, Step.KAFKA_APPLY, Step.PROMOTE_COLD,
                           Step.REPORT)
UNPLANNED_STEPS: tuple[Step, ...] = (Step.FENCE_HOT, Step.PAUSE_MIRRORS, Step.RECOVERY_POINT, Step.KAFKA_OFFSETS,
                                     Step.METADATA_LINT, Step.APPROVAL, Step.KAFKA_APPLY, Step.PROMOTE_COLD,
                                     Step.REPORT)
COMPONENT = "failover"
DONE, PLANNED, FAILED, SKIPPED, WAITING, REJECTED = (StepStatus.DONE.value, StepStatus.PLANNED.value,
                                                     StepStatus.FAILED.value, StepStatus.SKIPPED.value,
                                                     StepStatus.WAITING.value, StepStatus.REJECTED.value)

Approver = Callable[[dict[str, Any]], "bool | dict[str, Any]"]
"""``approver(request) -> bool`` or ``{"approved": bool, "acknowledged": [finding ids], "comment": str,
"accept_loss": bool}``; ``request`` is :meth:`Runbook.approval_request`."""

_NONE: Mapping[str, Any] = MappingProxyType({})


@dataclass
class StepResult:
    name: str
    status: str
    detail: dict[str, Any] = field(default_factory=dict)
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "message": self.message, "detail": self.detail}


@dataclass(frozen=True)
class RunRecord:
    """The run as it was started: its id, whether it executes, why, planned or unplanned."""

    run_id: str
    execute: bool
    reason: str = ""
    unplanned: bool = False


@dataclass(frozen=True)
class RunState:
    """What a run's audit events say, folded once (:meth:`fold`); the runbook decides from this.

    ``after`` holds each step's after-state from its newest ``done`` event (recorded in the run's
    mode), ``statuses`` each action's last status other than ``started``. A value: extending it
    (:meth:`with_event`) makes a new one."""

    execute: bool
    unplanned: bool = False
    events: tuple[Mapping[str, Any], ...] = ()
    after: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _NONE)
    messages: Mapping[str, str | None] = field(default_factory=lambda: _NONE)
    statuses: Mapping[str, str] = field(default_factory=lambda: _NONE)
    rejected: bool = False  # the approval was rejected
    aborted: bool = False  # an abort was recorded
    epoch: int | None = None  # the fencing epoch fence_hot took (executed runs)
    fenced_at: float | None = None  # when fence_hot fenced hot (executed runs)

    @classmethod
    def fold(cls, events: Iterable[Mapping[str, Any]], *, execute: bool, unplanned: bool = False) -> RunState:
        """The state after ``events`` (a run's failover audit events, oldest first)."""
        evs = tuple(MappingProxyType(dict(e)) for e in events)
        after: dict[str, Mapping[str, Any]] = {}
        messages: dict[str, str | None] = {}
        statuses: dict[str, str] = {}
        rejected = aborted = False
        for e in evs:
            action, status, state = str(e["action"]), str(e["status"]), e.get("after_state")
            if action == "run" and status == "started":
                unplanned = bool((state or {}).get("unplanned"))
            aborted = aborted or action == "abort"
            rejected = rejected or (action == Step.APPROVAL and status == REJECTED)
            if status != "started":
                statuses[action] = status
            if status == DONE and bool(e["dry_run"]) != execute:
                after[action] = state if isinstance(state, dict) else {}
                messages[action] = e.get("message")
        fencing = (after.get(Step.FENCE_HOT) or {}).get("fencing") if execute else None
        return cls(execute=execute, unplanned=unplanned, events=evs, after=MappingProxyType(after),
                   messages=MappingProxyType(messages), statuses=MappingProxyType(statuses), rejected=rejected,
                   aborted=aborted, epoch=int(fencing["epoch"]) if fencing else None,
                   fenced_at=float(fencing["at"]) if fencing else None)

    def with_event(self, event: Mapping[str, Any]) -> RunState:
        """This state with one more event (one the runbook just recorded): no ledger read."""
        return RunState.fold((*self.events, event), execute=self.execute, unplanned=self.unplanned)

    @property
    def done(self) -> frozenset[str]:
        """The steps (and actions) recorded done in this run."""
        return frozenset(self.after)

    @property
    def decided(self) -> bool:
        """A human approved or rejected."""
        return Step.APPROVAL in self.after or self.rejected

    @property
    def approval(self) -> Mapping[str, Any] | None:
        """The approval's record (by, at, acknowledged, accept_loss, ...); None unless approved."""
        return self.after.get(Step.APPROVAL)

    @property
    def lint_findings(self) -> list[dict[str, Any]]:
        """The metadata lint's findings (each with its ``id``, as the approver acknowledges it)."""
        return list((self.after.get(Step.METADATA_LINT) or {}).get("findings") or [])


def run_steps(steps: Iterable[str], results: Mapping[str, StepResult], run_step: Callable[[str], StepResult], *,
              execute: bool, until: str | None = None) -> str:
    """The runbooks' one loop: every step not done yet, in order (up to and including ``until``),
    stopping at the first failure, rejection or wait for approval — a dry run goes on past a
    failure so the operator sees every step's answer. Returns the run's status: ``succeeded``,
    ``failed``, ``aborted``, ``waiting_approval`` or ``running`` (stopped at ``until``)."""
    status = "succeeded"
    for name in steps:
        if name in results and results[name].status == DONE:
            continue
        res = run_step(name)
        if res.status == FAILED and not execute:
            status = "failed"
            continue
        if res.status in (FAILED, REJECTED):
            return "failed" if res.status == FAILED else "aborted"
        if res.status == WAITING:
            return "waiting_approval"
        if until == name:
            return "running"
    return status


def _jsonable(obj: Any) -> Any:
    to_json = getattr(obj, "to_json", None)
    return to_json() if callable(to_json) else obj


class FenceSession:
    """One step's ZooKeeper session on the fencing znodes: opened on first use, shared by every
    fencing call of the step, closed when the step ends (``stack``)."""

    def __init__(self, topology: Topology, access: Access, stack: ExitStack) -> None:
        self._topology, self._access, self._stack = topology, access, stack
        self._fence: Fence | None = None

    def __call__(self) -> Fence:
        if self._fence is None:
            self._fence = self._stack.enter_context(zk_fencing.open_fence(self._topology, access=self._access))
        return self._fence


def lint_id(finding: dict[str, Any]) -> str:
    """A finding's id, as the approver acknowledges it: ``path:line``."""
    return f"{finding['path']}:{finding['line']}"


def os_identity() -> str:
    """The operating-system user running this process, as the kernel knows it (the effective uid's
    passwd entry — not ``$USER``/``$LOGNAME``/``$DRT_ACTOR``, which anyone can set): ``os:<name>``."""
    import pwd

    uid = os.geteuid()
    try:
        return f"os:{pwd.getpwuid(uid).pw_name}"
    except KeyError:  # no passwd entry (some containers)
        return f"os:uid={uid}"


def may_decide(who: str, approvers: list[str] | tuple[str, ...]) -> bool:
    """Whether the identity ``who`` is one of ``failover.approvers``.

    Identities come from the edges that authenticated them: ``airflow:<user>`` (the Airflow user who
    answered the approval), ``os:<user>`` (the login of the process at the CLI, :func:`os_identity`).
    An entry ``airflow:alice`` or ``os:alice`` matches only that identity; a plain entry ``alice``
    matches ``alice`` (a library caller's own name), ``airflow:alice`` and ``os:alice``."""
    for entry in approvers:
        if who == entry:
            return True
        if ":" not in entry and who.split(":", 1)[0] in ("airflow", "os") and who.split(":", 1)[-1] == entry:
            return True
    return False


class Runbook:
    """One failover run. Create with :meth:`start` or :meth:`resume`."""

    def __init__(self, topology: Topology, ledger: Ledger, run: RunRecord, *, access: Access,
                 who: str | None = None, approver: Approver | None = None, poll_s: float = 1.0,
                 drain_timeout_s: float | None = None) -> None:
        self.topology = topology
        # the dry run is decided here, once: every write but the journal's is rolled back in the ledger
        self.ledger = ledger if run.execute else ledger.dry_run()
        self.run_id, self.execute, self.reason, self.unplanned = run.run_id, run.execute, run.reason, run.unplanned
        self.access = access
        self.who = who or actor()
        self.approver = approver
        self.poll_s = poll_s
        self.drain_timeout_s = topology.failover.drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        self.results: dict[str, StepResult] = {}
        self.state = RunState(execute=run.execute, unplanned=run.unplanned)
        self._gate: GateResult | None = None  # the gate re-run after approval, in this process
        self._window: dict[str, Any] | None = None  # unplanned: the loss window read at promotion
        self._unreachable: ZkUnreachable | None = None  # set by run_step when ZooKeeper did not answer

    @property
    def steps(self) -> tuple[Step, ...]:
        return UNPLANNED_STEPS if self.unplanned else STEPS

    # -- creation ----------------------------------------------------------------------------------
    @classmethod
    def start(cls, topology: Topology, ledger: Ledger, *, access: Access, reason: str, execute: bool = False,
              run_id: str | None = None, unplanned: bool = False, **kw: Any) -> Runbook:
        if not reason.strip():
            raise ConfigError("a failover needs a reason", hint="pass --reason TEXT (it goes to the audit log)")
        rid = ledger.start_failover_run(reason=reason, execute=execute, run_id=run_id, who=kw.get("who"))
        kind = "unplanned failover" if unplanned else "failover"
        ledger.audit(component=COMPONENT, action="run", dry_run=not execute, status="started", run_id=rid,
                     target=topology.cold_name, after={"reason": reason, "execute": execute, "unplanned": unplanned},
                     message=f"{kind} {topology.hot_name} -> {topology.cold_name}", who=kw.get("who"))
        return cls(topology, ledger, RunRecord(rid, execute, reason, unplanned), access=access, **kw)

    @classmethod
    def resume(cls, topology: Topology, ledger: Ledger, run_id: str, *, access: Access,
               execute: bool | None = None, **kw: Any) -> Runbook:
        row = ledger.failover_run(run_id)
        if row is None:
            raise ConfigError(f"no failover run {run_id!r} in the ledger", where=ledger.url,
                              hint="list runs with `drt status`")
        was = bool(row["execute"])
        if execute is not None and execute != was:
            raise ConfigError(f"run {run_id} was started {'with' if was else 'without'} --execute",
                              hint="resume it the same way, or start a new run")
        state = RunState.fold(ledger.audit_events(run_id=run_id, component=COMPONENT), execute=was)
        if state.aborted:  # its abort event (a rejected run is 'aborted' too, and resumes to its end)
            raise ConfigError(f"run {run_id} was aborted", hint="start a new run")
        rb = cls(topology, ledger, RunRecord(run_id, was, row["reason"] or "", state.unplanned), access=access, **kw)
        rb.state = state
        for step in rb.steps:
            if step in state.done:
                rb.results[step] = StepResult(step, DONE, {"earlier": True}, "done earlier in this run")
        # nothing is written here: a resume that only reads (a refused abort, the approval question)
        # changes nothing in the ledger; the run is marked running when a step really runs (run_step)
        return rb

    # -- ledger state ------------------------------------------------------------------------------
    def _audit(self, name: str, status: str, *, before: Any = None, after: Any = None,
               message: str | None = None, who: str | None = None) -> None:
        """Record one event of this run and fold it into :attr:`state`."""
        before, after = scrub(before), scrub(after)
        self.ledger.audit(component=COMPONENT, action=str(name), dry_run=not self.execute, status=status,
                          run_id=self.run_id, target=self.topology.cold_name, before=before,
                          after=after, message=message, who=who or self.who)
        self.state = self.state.with_event({"action": str(name), "status": status, "dry_run": not self.execute,
                                            "after_state": after, "message": redact(message) if message else None})

    def _result(self, step: Step, detail: dict[str, Any], message: str | None = None) -> StepResult:
        """A step that went through: done, or in a dry run planned."""
        return StepResult(step, DONE if self.execute else PLANNED, detail, message)

    # -- running -----------------------------------------------------------------------------------
    def run(self, *, until: str | None = None) -> dict[str, Any]:
        """Run every step not yet done (up to and including ``until``); stop at the first failure."""
        def one(step: str) -> StepResult:
            self._unreachable = None
            res = self.run_step(step)
            if self._unreachable is not None:  # ZooKeeper gone: every later step would wait it out again
                self.ledger.set_failover_status(self.run_id, "failed", detail=self.summary())
                exc = self._unreachable
                raise UnreachableError(f"failover run {self.run_id} stopped at {step}: {exc.what}",
                                       where=exc.where, hint=exc.hint)
            return res

        status = run_steps([s.value for s in self.steps], self.results, one, execute=self.execute, until=until)
        if status != "running":
            self.ledger.set_failover_status(self.run_id, status, detail=self.summary())
        out = self.summary()
        out["status"] = status
        return out

    def run_step(self, name: str) -> StepResult:
        """Run the step ``name`` (a :class:`Step`) unless this run recorded it done: the run's audit
        events are read once, here, into :attr:`state`; the step's fencing calls share one session."""
        try:
            step: Step | None = Step(name)
        except ValueError:
            step = None
        if step is None or step not in self.steps:
            raise ConfigError(f"unknown runbook step {name!r}",
                              hint=f"steps: {', '.join(s.value for s in self.steps)}")
        self.state = RunState.fold(self.ledger.audit_events(run_id=self.run_id, component=COMPONENT),
                                   execute=self.execute, unplanned=self.unplanned)
        if step in self.state.done:
            res = StepResult(step, DONE, {"earlier": True}, "done earlier in this run")
            self.results[step] = res
            return res
        if step == Step.APPROVAL and self.state.rejected:
            res = StepResult(step, REJECTED, {}, "rejected earlier in this run")
            self.results[step] = res
            return res
        if not self.state.aborted:  # a step really runs (resume alone writes nothing); an aborted run stays so
            self.ledger.set_failover_status(self.run_id, "running")
        self._audit(step, "started")
        try:
            with ExitStack() as stack:
                res = STEP_FUNCTIONS[step](self, FenceSession(self.topology, self.access, stack))
        except ZkUnreachable as exc:  # the fencing state cannot be read or written: no step can go on
            res = StepResult(step, FAILED, {"error": exc.message, "where": exc.where}, exc.message)
            self._unreachable = exc
        except DrtError as exc:
            res = StepResult(step, FAILED, {"error": exc.message}, exc.message)
        except Exception as exc:
            log.debug("step %s crashed", step, exc_info=True)
            res = StepResult(step, FAILED, {"error": f"{type(exc).__name__}: {exc}"}, f"{type(exc).__name__}: {exc}")
        res.detail = scrub(res.detail)
        if res.status != WAITING and not res.detail.get("recorded"):
            final = DONE if res.status in (DONE, PLANNED) else res.status
            self._audit(step, final, before=res.detail.get("before"), after=res.detail.get("after", res.detail),
                        message=res.message, who=res.detail.get("decided_by"))
        self.results[step] = res
        return res

    def summary(self) -> dict[str, Any]:
        steps = [{"name": s.value, "status": self.results[s].status if s in self.results else StepStatus.PENDING.value,
                  **({"message": self.results[s].message} if s in self.results and self.results[s].message else {})}
                 for s in self.steps]
        return {"run_id": self.run_id, "execute": self.execute, "dry_run": not self.execute,
                "unplanned": self.unplanned, "hot": self.topology.hot_name, "cold": self.topology.cold_name,
                "steps": steps}

    def _writer_guard(self, fence: FenceSession) -> None:
        """Writer steps: refuse to write when someone fenced again since this run's fence."""
        if not self.execute or self.state.epoch is None:
            return
        fence().check_epoch(self.state.epoch)

    # -- abort -------------------------------------------------------------------------------------
    def abort(self, reason: str, *, who: str | None = None) -> dict[str, Any]:
        """End a run that has not promoted: lift its fence (a new epoch that fences nothing, the hot
        read-only flag removed), audited with who and why. Refused after promotion (that is a failback)."""
        if not reason.strip():
            raise ConfigError("an abort needs a reason", hint="pass --reason TEXT (it goes to the audit log)")
        who = who or self.who
        if Step.PROMOTE_COLD in self.state.done and self.execute:
            raise ConfigError(f"run {self.run_id} already promoted {self.topology.cold_name}",
                              hint="undoing a promotion is a failback: run a failover in the other direction")
        before: dict[str, Any] = {}
        after: dict[str, Any] = {}
        message = f"aborted by {who}: {reason}"
        epoch = self.state.epoch
        if self.execute and epoch is not None:
            with zk_fencing.open_fence(self.topology, access=self.access) as fence:
                before = fence.snapshot()
                st = fence.state()
                active = before.get("active") or {}
                if active.get("cluster") == self.topology.cold_name:
                    # promoted, though the ledger may not say so (killed between the znode and the
                    # audit row): the active-cluster znode is the truth
                    raise ConfigError(f"{self.topology.cold_name} is already the active cluster (epoch "
                                      f"{active.get('epoch')}, by {active.get('by')})",
                                      hint="undoing a promotion is a failback: run a failover in the other "
                                           "direction")
                if st.epoch == epoch and st.fenced_cluster == self.topology.hot_name:
                    fence.lift(epoch=epoch, cluster=self.topology.hot_name, by=f"{who} abort {self.run_id}")
                    message += f"; fence of epoch {epoch} lifted"
                else:
                    message += (f"; fence left as is (epoch {st.epoch}, fenced {st.fenced_cluster!r}: "
                                f"not this run's epoch {epoch})")
                after = fence.snapshot()
        self._audit("abort", DONE, before=before, after={**after, "reason": reason}, message=message, who=who)
        self.ledger.set_failover_status(self.run_id, "aborted", detail=self.summary())
        return {"run_id": self.run_id, "status": "aborted", "message": message, "fence": after}

    # -- the steps -------------------------------------------------------------------------------
    def _step_fence_hot(self, fence: FenceSession) -> StepResult:
        hot = self.topology.hot_name
        by = f"{self.who} run {self.run_id}"
        probe: dict[str, Any] | None = None
        if self.unplanned:
            probe = probe_hot(self.topology, self.access)
            up = list(probe.get("answered") or [])  # every hot component the topology names
            if up:
                return StepResult(Step.FENCE_HOT, FAILED, {"probe": probe},
                                  f"the hot cluster still answers ({', '.join(up)}): use the planned failover "
                                  "(`drt failover run` without --unplanned), which drains and proves it")
        f = fence()
        before = f.snapshot()
        st = f.state()
        if not self.execute:
            return StepResult(Step.FENCE_HOT, PLANNED, {"before": before, "probe": probe, "after": {
                "would": f"bump the fencing epoch {st.epoch} -> {st.epoch + 1} and mark {hot} read-only"}})
        if st.fenced_cluster == hot and self.run_id in (st.by or ""):
            pass  # fenced by this run already (killed before the audit record): keep that epoch
        else:
            st = f.bump(fenced_cluster=hot, by=by)
        f.set_read_only(hot, True, epoch=st.epoch, by=by)
        after = f.snapshot()
        return StepResult(Step.FENCE_HOT, DONE, {"before": before, "after": after, "probe": probe},
                          f"{hot} fenced at epoch {st.epoch}: the toolkit's writers now refuse hot; stop hot's own "
                          "clients (HDFS writers, Kafka producers, HBase clients) — the gate counts whatever they "
                          "still write, so the drain waits for it")

    def _step_pause_mirrors(self, fence: FenceSession) -> StepResult:
        """Stop and flag what still mirrors into cold: the toolkit's replication refuses to run once
        hot is fenced; external mirrors (MirrorMaker, HBase's sink) are flagged for the operator."""
        topo = self.topology
        paused: dict[str, dict[str, Any]] = {
            "hdfs": {"policies": [p.name for p in topo.policies.hdfs],
                     "how": "stopped: scheduled replication refuses to run while hot is fenced"},
            "kafka": {"topics": sorted({t for p in topo.policies.kafka for t in p.topics}),
                      "how": "flagged: stop the mirror (MirrorMaker) into cold before consumers start there"},
            "hbase": {"peers": [p.peer_id for p in topo.policies.hbase],
                      "how": "flagged: hot's region servers would resume shipping into cold if they came back; "
                             "disable the peers on hot (`drt hbase peers disable`) before it rejoins"},
        }
        if not self.execute:
            return StepResult(Step.PAUSE_MIRRORS, PLANNED, {"after": {"would_pause": paused}},
                              "would flag the mirrors into cold as paused")
        epoch = self.state.epoch
        if epoch is None:
            return StepResult(Step.PAUSE_MIRRORS, FAILED, {}, "the hot cluster was not fenced by this run")
        rec = {"epoch": epoch, "at": time.time(), "by": f"{self.who} run {self.run_id}", "paused": paused}
        f = fence()
        f.guarded_set(f"{f.root}/mirrors-paused", json.dumps(rec, sort_keys=True).encode(), epoch)
        return StepResult(Step.PAUSE_MIRRORS, DONE, {"after": rec},
                          "mirrors into cold paused/flagged (" + "; ".join(
                              f"{k}: {str(v['how']).split(':')[0]}" for k, v in paused.items()) + ")")

    def _step_recovery_point(self, _fence: FenceSession) -> StepResult:
        lw = loss_window(self.topology, self.ledger, self.access)
        msg = (f"recovery point {lw['recovery_point'] or 'unknown'} (from what cold holds)"
               + (f"; unbounded: {', '.join(lw['unbounded'])}" if lw["unbounded"] else ""))
        return self._result(Step.RECOVERY_POINT, {"after": lw}, msg)

    def drain_state(self) -> tuple[list[Any], list[str], dict[str, Any]]:
        """HBase queues and the Kafka mirror: (signals, reasons not drained, detail); nothing is recorded."""
        fenced_at = self.state.fenced_at
        sigs = read_signals(self.topology, self.ledger, self.access, components=("hbase", "kafka"))
        # Drain is about data in flight: the consumer groups' checkpoint coverage (group:<g>
        # signals) is not, and the kafka_offsets step checkpoints them after the drain.
        sigs = [s for s in sigs if not (s.component == "kafka" and s.detail.get("kind") == "group")]
        reasons = decide(self.topology, sigs, fenced_at=fenced_at).reasons if sigs else []
        return sigs, reasons, {"signals": [s.to_json() for s in sigs], "reasons": reasons,
                               "fenced_at": iso(fenced_at)}

    def _step_wait_drain(self, _fence: FenceSession) -> StepResult:
        deadline = time.monotonic() + self.drain_timeout_s
        while True:
            sigs, reasons, detail = self.drain_state()
            if not reasons:
                return self._result(Step.WAIT_DRAIN, detail,
                                    "HBase queues and the Kafka mirror are drained" if sigs else "nothing to drain")
            if not self.execute:
                return StepResult(Step.WAIT_DRAIN, PLANNED, detail, "would wait for: " + "; ".join(reasons))
            if time.monotonic() >= deadline:
                return StepResult(Step.WAIT_DRAIN, FAILED, detail,
                                  f"not drained after {self.drain_timeout_s:g}s: " + "; ".join(reasons))
            time.sleep(self.poll_s)

    def _step_final_copy(self, fence: FenceSession) -> StepResult:
        policies = self.topology.policies.hdfs
        if not policies:
            return self._result(Step.FINAL_COPY, {"policies": []}, "no HDFS policies")
        self._writer_guard(fence)
        out: list[Any] = []
        failed = 0
        changing: list[str] = []
        for p in policies:
            results = copy_api.replicate_policy(self.topology, p.name, self.ledger, dry_run=not self.execute,
                                                fence_epoch=self.state.epoch, access=self.access)
            for r in results:
                j = _jsonable(r)
                out.append({"policy": p.name, **j})
                failed += int(j.get("files_failed") or 0)
                if j.get("listing_proven") is False:
                    changing.append(f"{p.name}:{j.get('target')}")
        if failed:
            return StepResult(Step.FINAL_COPY, FAILED, {"results": out}, f"{failed} files failed to copy")
        if changing:  # hot is still being written: the final copy proves nothing about what cold holds
            return StepResult(Step.FINAL_COPY, FAILED, {"results": out},
                              "the source kept changing while it was listed (" + ", ".join(changing[:5])
                              + "): stop hot's writers, then resume")
        return self._result(Step.FINAL_COPY, {"results": out},
                            f"{len(out)} policy targets copied" if self.execute else "dry-run copy plan")

    def _step_final_verify(self, _fence: FenceSession) -> StepResult:
        policies = self.topology.policies.verify
        if not policies:
            return self._result(Step.FINAL_VERIFY, {}, "no verification policies")
        if not self.execute:
            return StepResult(Step.FINAL_VERIFY, PLANNED, {"policies": [p.name for p in policies]},
                              "would verify " + ", ".join(p.name for p in policies))
        out = []
        bad = 0
        for p in policies:
            r = verify_api.verify_policy(self.topology, p.name, self.ledger, access=self.access)
            counters = dict(r.counters)
            bad += int(counters.get("BADROWS", 0))
            out.append({"policy": p.name, **counters})
        if bad:
            return StepResult(Step.FINAL_VERIFY, FAILED, {"results": out}, f"verification found {bad} bad rows")
        return StepResult(Step.FINAL_VERIFY, DONE, {"results": out}, "every dataset verified with BADROWS 0")

    def _groups(self) -> list[str]:
        # groups_regex: hot's live groups, or (hot gone) the checkpointed ones the patterns select
        return protected_groups(self.topology, ledger=self.ledger, access=self.access)[0]

    def _step_kafka_offsets(self, _fence: FenceSession) -> StepResult:
        """Checkpoint (executed, planned runs: hot still answers) and remap — a plan; nothing on cold."""
        groups = self._groups()
        if not groups:
            return self._result(Step.KAFKA_OFFSETS, {}, "no Kafka groups")
        detail: dict[str, Any] = {}
        if self.execute and not self.unplanned:
            try:
                cp = kafka_api.checkpoint(self.topology, self.ledger, groups=groups, access=self.access)
                detail["checkpoint"] = {"checkpoint_id": cp.get("checkpoint_id"), "taken_at": cp.get("taken_at")} \
                    if isinstance(cp, dict) else {"checkpoint_id": str(cp)}
            except DrtError as exc:  # the hot brokers may be gone: remap from the last checkpoint
                detail["checkpoint"] = {"error": exc.message, "using": "the last checkpoint in the ledger"}
        newest = self.ledger.latest_checkpoints(groups)
        missing = [g for g in groups if not newest.get(g)]
        planned = remap_many(self.topology, self.ledger, [g for g in groups if g not in missing],
                             access=self.access, audit=True, run_id=self.run_id,
                             who=self.who)  # every group at once, shared searches; only audit rows written
        remaps = [{"group": g, "checkpoint_id": newest[g][0]["checkpoint_id"],
                   # before (hot's committed offset) and after (cold's), so the approval and the
                   # report show what the remap does and how many records may be read again
                   "partitions": [{k: p.get(k) for k in ("topic", "cold_topic", "partition", "source_offset",
                                                         "target_offset", "method", "may_reread")}
                                  for p in parts][:200]} for g, parts in planned["groups"].items()][:500]
        detail["groups"] = remaps
        detail["remap"] = {k: planned.get(k) for k in ("duration_s", "distinct_searches", "mm2", "mm2_checkpoints")
                           if planned.get(k) is not None}
        detail["not_checkpointed"] = missing
        if missing and self.execute and not self.unplanned:
            return StepResult(Step.KAFKA_OFFSETS, FAILED, detail,
                              f"group(s) {', '.join(missing)} were never checkpointed: their position on cold "
                              "cannot be stated")
        msg = f"offsets remapped for {len(remaps)} group(s) (applied after approval)"
        if missing:
            msg += f"; never checkpointed (not carried over): {', '.join(missing)}"
        return self._result(Step.KAFKA_OFFSETS, detail, msg)

    def _step_final_gate(self, _fence: FenceSession) -> StepResult:
        res = check(self.topology, self.ledger, access=self.access, who=self.who,
                    record=f"runbook:{self.run_id}" if self.execute else None)  # a dry run records nothing
        self._gate = res  # the approval in this process is asked on this answer
        detail = res.to_json()
        if res.go:
            return self._result(Step.FINAL_GATE, detail, f"GO; recovery point {detail['recovery_point']}")
        if not self.execute:
            return StepResult(Step.FINAL_GATE, PLANNED, detail, "NO_GO now: " + "; ".join(res.reasons))
        return StepResult(Step.FINAL_GATE, FAILED, detail, "NO_GO: " + "; ".join(res.reasons))

    def _step_metadata_lint(self, _fence: FenceSession) -> StepResult:
        res = lint(self.topology)
        findings = [{**f, "id": lint_id(f)} for f in res["findings"][:200]]
        n = len(res["findings"])
        msg = (f"{n} hot-cluster value(s) in replicated metadata, e.g. {findings[0]['path']}:"
               f"{findings[0]['line']} ({findings[0]['value']}); each must be acknowledged at approval" if n else
               f"no hot-cluster values in {res['files_scanned']} metadata/config files")
        return self._result(Step.METADATA_LINT, {"after": {"clean": res["clean"], "files_scanned": res["files_scanned"],
                                                           "findings": findings}}, msg)

    def approval_request(self) -> dict[str, Any]:
        st = self.state
        gate = self._gate.to_json() if self._gate is not None else (st.after.get(Step.FINAL_GATE) or None)
        window = st.after.get(Step.RECOVERY_POINT)
        return {"run_id": self.run_id, "hot": self.topology.hot_name, "cold": self.topology.cold_name,
                "reason": self.reason, "unplanned": self.unplanned,
                "recovery_point": (window or {}).get("recovery_point") if self.unplanned
                else (gate or {}).get("recovery_point"),
                "gate": None if gate is None else {k: gate.get(k) for k in ("verdict", "recovery_point", "reasons",
                                                                             "fenced_at", "checked_at")},
                "loss_window": window, "metadata_lint": st.messages.get(Step.METADATA_LINT),
                "findings": st.lint_findings, "approvers": list(self.topology.failover.approvers)}

    def record_decision(self, approved: bool, who: str, comment: str | None = None, *,
                        acknowledged: list[str] | tuple[str, ...] = (), accept_loss: bool = False) -> StepResult:
        """Record a human decision (the CLI's typed confirmation, Airflow's approval operator).

        Audited with who, when (the event's time), the comment and the acknowledged lint findings.
        ConfigError (nothing recorded) when ``who`` is not an approver, when an approval leaves a
        metadata-lint finding unacknowledged, or when an unplanned run is approved without
        ``accept_loss`` (the typed acceptance of the data-loss window)."""
        approvers = self.topology.failover.approvers
        if approvers and not may_decide(who, approvers):
            raise ConfigError(f"{who!r} may not decide on this failover", where=self.topology.source_file,
                              hint=f"failover.approvers lists who may: {', '.join(approvers)} (the CLI decides as "
                                   "os:<login user>, Airflow as airflow:<user>; $DRT_ACTOR is only a label)")
        if not self.execute:
            raise ConfigError(f"run {self.run_id} is a dry run: there is no promotion to decide on")
        if self.state.decided:
            raise ConfigError(f"run {self.run_id} already has a decision", hint="start a new run to decide again")
        findings = self.state.lint_findings
        ack = set(acknowledged)
        if approved:
            left = [f["id"] for f in findings if f["id"] not in ack]
            if left:
                raise ConfigError(f"{len(left)} metadata-lint finding(s) not acknowledged: {', '.join(left[:5])}"
                                  + (" …" if len(left) > 5 else ""),
                                  hint="acknowledge each finding (its id is path:line), or fix the metadata and "
                                       "re-run the step")
            if self.unplanned and not accept_loss:
                raise ConfigError("an unplanned failover needs the typed acceptance of its data-loss window",
                                  hint=f"type {ACCEPT_PHRASE_HINT}")
        req = self.approval_request()
        after = {"approved": approved, "by": who, "at": time.time(), "comment": comment,
                 "acknowledged": sorted(ack), "accept_loss": accept_loss if self.unplanned else None,
                 "recovery_point": req.get("recovery_point")}
        status = DONE if approved else REJECTED
        message = (comment or "") + (" — " if comment else "") + f"{'approved' if approved else 'rejected'} by {who}"
        self._audit(Step.APPROVAL, status, after=after, message=message, who=who)
        res = StepResult(Step.APPROVAL, status, {**req, "decided_by": who, "after": after, "recorded": True}, message)
        self.results[Step.APPROVAL] = res
        return res

    def _step_approval(self, _fence: FenceSession) -> StepResult:
        if not self.execute:
            return StepResult(Step.APPROVAL, PLANNED, {}, "would ask a human to approve the promotion")
        if not self.unplanned:
            if self._gate is None:
                self._regate()
            assert self._gate is not None
            if not self._gate.go:
                return StepResult(Step.APPROVAL, FAILED, {"gate": self._gate.to_json()},
                                  "NO_GO now (nothing asked): " + "; ".join(self._gate.reasons))
        req = self.approval_request()
        if self.approver is None:
            return StepResult(Step.APPROVAL, WAITING, req, "waiting for a human approval")
        answer = self.approver(req)
        d: dict[str, Any] = answer if isinstance(answer, dict) else {"approved": bool(answer)}
        try:
            return self.record_decision(bool(d.get("approved")), str(d.get("who") or self.who), d.get("comment"),
                                        acknowledged=list(d.get("acknowledged") or ()),
                                        accept_loss=bool(d.get("accept_loss")))
        except ConfigError as exc:
            return StepResult(Step.APPROVAL, FAILED, {"error": exc.message}, exc.message)

    def _regate(self) -> GateResult:
        self._gate = check(self.topology, self.ledger, access=self.access, who=self.who,
                           record=f"runbook:{self.run_id}" if self.execute else None)
        return self._gate

    def _pre_promotion_check(self, step: Step, *, fresh: bool) -> StepResult | None:
        """None when promotion may go on; else the FAILED result. Planned: the gate again (never an
        earlier GO); unplanned: the recovery point again (not earlier than the accepted one)."""
        if self.unplanned:
            if not (self.state.approval or {}).get("accept_loss"):
                return StepResult(step, FAILED, {}, "the data-loss window was not accepted")
            lw = loss_window(self.topology, self.ledger, self.access)
            self._window = lw
            was = self.state.after.get(Step.RECOVERY_POINT) or {}
            old, new = was.get("recovery_point_epoch"), lw.get("recovery_point_epoch")
            if old is not None and (new is None or new < old):
                return StepResult(step, FAILED, {"loss_window": lw},
                                  f"the recovery point moved back ({iso(old)} accepted, {iso(new)} now): decide again")
            return None
        if fresh or self._gate is None:
            self._regate()
        assert self._gate is not None
        if not self._gate.go:
            return StepResult(step, FAILED, {"gate": self._gate.to_json()},
                              "NO_GO at promotion time: " + "; ".join(self._gate.reasons))
        return None

    def _step_kafka_apply(self, fence: FenceSession) -> StepResult:
        groups = self._groups()
        if not self.execute:
            return StepResult(Step.KAFKA_APPLY, PLANNED, {"groups": groups},
                              f"would apply the remapped offsets of {len(groups)} group(s) after approval")
        if self.state.approval is None:
            return StepResult(Step.KAFKA_APPLY, FAILED, {}, "no human approval recorded for this run")
        stop = self._pre_promotion_check(Step.KAFKA_APPLY, fresh=True)
        if stop is not None:
            return stop
        gate = None if self._gate is None else {"verdict": self._gate.verdict,
                                                "recovery_point": iso(self._gate.recovery_point)}
        if not groups:
            return StepResult(Step.KAFKA_APPLY, DONE, {"gate": gate}, "no Kafka groups")
        self._writer_guard(fence)
        plan = self.state.after.get(Step.KAFKA_OFFSETS) or {}
        skip = set(plan.get("not_checkpointed") or [])
        todo = [g for g in groups if g not in skip]
        # the same remap as the plan (same checkpoints, same cold data), all groups at once, then
        # each group's offsets written all-or-nothing with its own audit row
        remapped = remap_many(self.topology, self.ledger, todo, access=self.access)["groups"] if todo else {}
        applied = apply_many(self.topology, self.ledger, remapped, access=self.access, run_id=self.run_id,
                             who=self.who)["groups"] if remapped else {}
        out: list[dict[str, Any]] = [{"group": g, "applied": False, "reason": "never checkpointed"} for g in skip]
        for g in todo:
            r = applied.get(g, {"applied": False, "error": "no checkpoint rows"})
            out.append({"group": g, "applied": bool(r.get("applied")), "written": r.get("written"),
                        "reason": r.get("reason") or r.get("error")})
        not_applied = [str(o["group"]) for o in out if not o["applied"] and o["group"] not in skip]
        if not_applied:
            return StepResult(Step.KAFKA_APPLY, FAILED, {"groups": out, "gate": gate},
                              f"offsets not applied for group(s) {', '.join(not_applied)}")
        return StepResult(Step.KAFKA_APPLY, DONE, {"groups": out, "gate": gate},
                          f"offsets applied for {len(out) - len(skip)} group(s) after a fresh "
                          + ("recovery-point check" if self.unplanned else "GO"))

    def _step_promote_cold(self, fence: FenceSession) -> StepResult:
        cold = self.topology.cold_name
        if not self.execute:
            return StepResult(Step.PROMOTE_COLD, PLANNED, {"after": {"would": f"set the active cluster to {cold}"}},
                              f"would promote {cold}")
        if self.state.approval is None:
            return StepResult(Step.PROMOTE_COLD, FAILED, {}, "no human approval recorded for this run")
        epoch = self.state.epoch
        if epoch is None:
            return StepResult(Step.PROMOTE_COLD, FAILED, {}, "the hot cluster was not fenced by this run")
        done = self._promoted_by_this_run(fence)
        if done is not None:  # killed after the active-cluster write, before its audit row: never re-gated
            return done
        self._writer_guard(fence)  # someone fenced again since this run's fence: refused before any gate
        if self._groups() and Step.KAFKA_APPLY not in self.state.done:
            # offsets are applied in one place only (kafka_apply, after approval and a fresh gate)
            return StepResult(Step.PROMOTE_COLD, FAILED, {},
                              "kafka_apply has not completed for this run: run it before promote_cold")
        fresh = not (Step.KAFKA_APPLY in self.results and self.results[Step.KAFKA_APPLY].status == DONE
                     and not self.results[Step.KAFKA_APPLY].detail.get("earlier"))
        stop = self._pre_promotion_check(Step.PROMOTE_COLD, fresh=fresh)
        if stop is not None:
            return stop
        by = f"{self.who} run {self.run_id}"
        recovery = self._promotion_recovery()
        f = fence()
        before = f.snapshot()
        active = before.get("active") or {}
        if not (active.get("cluster") == cold and active.get("epoch") == epoch):
            f.set_active(cold, epoch=epoch, by=by, recovery_point=recovery["recovery_point"], recovery=recovery)
        if f.is_read_only(cold):
            f.set_read_only(cold, False, epoch=epoch, by=by)
        after = f.snapshot()
        rp = recovery["recovery_point"]
        return StepResult(Step.PROMOTE_COLD, DONE, {"before": before, "after": {**after, "recovery": recovery},
                                                    "recovery_point": rp},
                          f"{cold} is the active cluster (epoch {epoch}), recovery point {rp or 'unknown'}")

    def _promoted_by_this_run(self, fence: FenceSession) -> StepResult | None:
        """The promotion already happened when ZooKeeper says so under this run's epoch: the
        active-cluster znode names cold, at this run's fencing epoch, written by this run (a process
        killed between that write and its audit row). Then the step finishes what it began (cold's
        read-only flag cleared) and is recorded done with the recovery point the znode holds — the
        gate is not asked again: cold already is the active cluster, hot's clients may still write,
        and a NO_GO now would leave a promoted run that can neither finish nor be aborted. None when
        this run has not promoted."""
        cold, epoch = self.topology.cold_name, self.state.epoch
        f = fence()
        before = f.snapshot()
        active = before.get("active") or {}
        if not (active.get("cluster") == cold and active.get("epoch") == epoch
                and f"run {self.run_id}" in str(active.get("by") or "")):
            return None
        # finish what the step began, only while this run's epoch is current (after a later fence —
        # a failback fencing cold — nothing is written: the promotion happened, that is all it records)
        if f.state().epoch == epoch and f.is_read_only(cold):
            f.set_read_only(cold, False, epoch=int(epoch or 0), by=f"{self.who} run {self.run_id}")
        after = f.snapshot()
        recovery = dict(active.get("recovery") or {"recovery_point": active.get("recovery_point")})
        recovery["source"] = "the active-cluster znode written at promotion"
        rp = recovery.get("recovery_point")
        return StepResult(Step.PROMOTE_COLD, DONE, {"before": before, "after": {**after, "recovery": recovery},
                                                    "recovery_point": rp, "already_promoted": True},
                          f"{cold} was already made the active cluster by this run (epoch {epoch}, at "
                          f"{iso(active.get('at'))}, by {active.get('by')}): recorded, not re-gated; recovery "
                          f"point {rp or 'unknown'}")

    def _promotion_recovery(self) -> dict[str, Any]:
        """The recovery point cold is promoted at (the gate, or for an unplanned run the loss window,
        read just before promotion), its age and the signal that limits it."""
        now = time.time()
        if self.unplanned:
            lw = self._window or {}
            comps = [c for c in lw.get("components") or [] if c.get("safe_time") is not None]
            lim = min(comps, key=lambda c: c["safe_time"]) if comps else None
            rp = lw.get("recovery_point_epoch")
            return {"recovery_point": iso(rp), "recovery_point_epoch": rp,
                    "rpo_s": None if rp is None else round(max(0.0, now - rp), 3),
                    "limited_by": f"{lim['component']} {lim['name']}" if lim else None, "as_of": iso(now)}
        g = self._gate
        if g is None:
            return {"recovery_point": None, "recovery_point_epoch": None, "rpo_s": None, "limited_by": None,
                    "as_of": iso(now)}
        return {"recovery_point": iso(g.recovery_point), "recovery_point_epoch": g.recovery_point,
                "rpo_s": None if g.rpo_s is None else round(g.rpo_s, 3), "limited_by": g.limiting,
                "as_of": iso(g.checked_at)}

    def _step_report(self, _fence: FenceSession) -> StepResult:
        """Write the report, record this step done, then write it again so its audit trail ends with
        that event (if the second write fails, the first stays and says the event it ends at)."""
        names = [s.value for s in self.steps]
        paths = report.write(self.topology, self.ledger, self.run_id, names)
        message = f"report {paths['html']}"
        self._audit(Step.REPORT, DONE, after=paths, message=message)
        try:
            report.write(self.topology, self.ledger, self.run_id, names)
        except OSError as exc:
            log.warning("failover report %s: the final rewrite failed (%s); it ends at 'report started'",
                        paths["html"], exc)
        return self._result(Step.REPORT, {"after": paths, "recorded": True}, message)


StepFunction = Callable[[Runbook, FenceSession], StepResult]
STEP_FUNCTIONS: Mapping[Step, StepFunction] = MappingProxyType({
    Step.FENCE_HOT: Runbook._step_fence_hot,
    Step.PAUSE_MIRRORS: Runbook._step_pause_mirrors,
    Step.WAIT_DRAIN: Runbook._step_wait_drain,
    Step.FINAL_COPY: Runbook._step_final_copy,
    Step.FINAL_VERIFY: Runbook._step_final_verify,
    Step.RECOVERY_POINT: Runbook._step_recovery_point,
    Step.KAFKA_OFFSETS: Runbook._step_kafka_offsets,
    Step.FINAL_GATE: Runbook._step_final_gate,
    Step.METADATA_LINT: Runbook._step_metadata_lint,
    Step.APPROVAL: Runbook._step_approval,
    Step.KAFKA_APPLY: Runbook._step_kafka_apply,
    Step.PROMOTE_COLD: Runbook._step_promote_cold,
    Step.REPORT: Runbook._step_report,
})
"""What each step does: ``STEP_FUNCTIONS[step](runbook, fence_session)`` (every :class:`Step` has one)."""

ACCEPT_PHRASE_HINT = "the acceptance phrase (CLI: ACCEPT DATA LOSS; library: record_decision(..., accept_loss=True))"
