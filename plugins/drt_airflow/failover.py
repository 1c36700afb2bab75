"""Airflow face of the failover runbook: one thin operator per step, the human approval, the report.

Each operator builds the topology and ledger in ``execute`` (never in the constructor), runs
one step of :class:`dr_toolkit.failover.runbook.Runbook` for the failover run started by the
``start`` task, and returns only ``{name, status, message}`` to XCom (no secrets, no detail:
the detail is in the ledger's audit events and the final report).
"""

from __future__ import annotations

import re
from typing import Any

from airflow.sdk import BaseOperator, BaseSensorOperator

from drt_airflow.links import DrPageLink

TERMINAL_FAILURES = ("failed", "rejected")


def _hook() -> Any:
    from drt_airflow.hooks import DrtHook

    return DrtHook()


def _who(context: Any) -> str:
    dr = context.get("dag_run")
    user = getattr(dr, "triggering_user_name", None) if dr is not None else None
    return f"airflow:{user or 'unknown'}"


def failover_run_id(airflow_run_id: str) -> str:
    """A failover run id derived from the DAG run, so a retried ``start`` task finds its run again."""
    return "failover-" + re.sub(r"[^A-Za-z0-9_.\-]", "_", airflow_run_id)[:120]


def start_run(context: Any, *, reason: str, dry_run: bool) -> str:
    """Start (or find again, on retry) the failover run of this DAG run; return its id."""
    from dr_toolkit.failover.runbook import Runbook

    hook = _hook()
    topo, access, ledger = hook.get_conn()
    rid = failover_run_id(str(context["dag_run"].run_id))
    if ledger.failover_run(rid) is None:
        Runbook.start(topo, ledger, reason=reason, execute=not dry_run, run_id=rid, who=_who(context),
                      access=access)
    return rid


class FailoverStepOperator(BaseOperator):
    """Run one runbook step (a :class:`dr_toolkit.failover.runbook.Step`) of the run ``run_id``.

    With ``approval_task_id`` (the first step after the human approval) the approval
    operator's answer is recorded first through ``Runbook.record_decision``: approve *or
    reject*, audited with who responded and when. Approving in Airflow acknowledges the
    metadata-lint findings listed in the approval request (the request shows each of them)."""

    template_fields = ("run_id",)
    ui_color = "#fde2e2"
    operator_extra_links = (DrPageLink(),)

    def __init__(self, *, step: str, run_id: str, approval_task_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.run_id = run_id
        self.approval_task_id = approval_task_id

    def execute(self, context: Any) -> dict[str, Any]:
        from dr_toolkit.failover.runbook import Runbook

        topo, access, ledger = _hook().get_conn()
        rb = Runbook.resume(topo, ledger, self.run_id, who=_who(context), access=access)
        answer = (context["ti"].xcom_pull(task_ids=self.approval_task_id) or {}) if self.approval_task_id else {}
        if rb.execute and answer.get("chosen_options"):  # a human answered (approve or reject)
            chosen = list(answer.get("chosen_options") or [])
            who = str(answer.get("responded_by_user") or {}).strip() or "unknown"
            if isinstance(answer.get("responded_by_user"), dict):
                u = answer["responded_by_user"]
                who = str(u.get("name") or u.get("id") or "unknown")
            if not rb.state.decided:
                rb.record_decision(chosen == ["Approve"], f"airflow:{who}", "answered in Airflow",
                                   acknowledged=[f["id"] for f in rb.state.lint_findings])
            if chosen != ["Approve"]:
                from airflow.sdk.exceptions import AirflowSkipException

                raise AirflowSkipException(f"failover run {self.run_id} rejected by airflow:{who}: nothing promoted")
        res = rb.run_step(self.step)
        if self.step == "report":
            statuses = rb.state.statuses
            final = ("aborted" if statuses.get("approval") == "rejected" else
                     "failed" if any(s == "failed" for s in statuses.values()) else
                     "succeeded" if statuses.get("promote_cold") == "done" or not rb.execute else "aborted")
            ledger.set_failover_status(self.run_id, final, detail=rb.summary())
        self.log.info("failover run %s step %s: %s — %s", self.run_id, self.step, res.status, res.message or "")
        if res.status in TERMINAL_FAILURES:
            from airflow.sdk.exceptions import AirflowException

            raise AirflowException(f"failover step {self.step} {res.status}: {res.message}")
        return {"name": res.name, "status": res.status, "message": res.message}


class DrainedSensor(BaseSensorOperator):
    """Wait until the HBase queues and the Kafka mirror shipped everything taken before the fence.

    ``poke`` returns the library's answer (nothing is recorded while waiting); once drained,
    the ``wait_drain`` step is recorded done in the audit log. A dry run records what it saw
    and passes at once. The sensor's ``timeout`` bounds the wait (then the task fails).

    ``deferrable=True`` (what dr_failover uses): one poke in the worker; when not drained the
    task is *deferred* to the triggerer (:class:`drt_airflow.triggers.DrainedTrigger` asks the
    same library call every ``poke_interval`` seconds, holding no worker slot) and resumes in
    ``execute_complete``, which pokes again — that poke records the step.
    """

    template_fields = ("run_id",)

    def __init__(self, *, run_id: str, deferrable: bool = False, **kwargs: Any) -> None:
        if not deferrable:
            kwargs.setdefault("mode", "reschedule")  # a long wait frees its worker slot between pokes
        super().__init__(**kwargs)
        self.run_id = run_id
        self.deferrable = deferrable

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if not self.poke(context):
            self._defer()
        return None

    def _defer(self) -> None:
        from datetime import timedelta

        from drt_airflow.triggers import DrainedTrigger

        self.defer(trigger=DrainedTrigger(run_id=self.run_id, poll_s=float(self.poke_interval)),
                   method_name="execute_complete", timeout=timedelta(seconds=float(self.timeout)))

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> None:
        """Back from the triggerer: record the step (a new poke); deferred again if it is not drained after all."""
        self.log.info("trigger fired: %s", event)
        if not self.poke(context):
            self._defer()

    def poke(self, context: Any) -> bool:
        from dr_toolkit.failover.runbook import Runbook

        topo, access, ledger = _hook().get_conn()
        rb = Runbook.resume(topo, ledger, self.run_id, who=_who(context), drain_timeout_s=0, access=access)
        if rb.execute:
            _sigs, reasons, _detail = rb.drain_state()
            if reasons:
                self.log.info("not drained yet: %s", "; ".join(reasons))
                return False
        res = rb.run_step("wait_drain")
        self.log.info("wait_drain: %s — %s", res.status, res.message or "")
        return res.status in ("done", "planned")


def _off(v: Any) -> str:
    return "none" if v is None else str(v)


def approval_question(run_id: str, *, max_rows: int = 20) -> str:
    """What the approver approves, as Markdown for the HITL body: the recovery point, its age (RPO)
    and the signal that limits it, each signal's safe time and basis, the loss window of an
    unplanned run, the Kafka offsets that will be applied on cold, and the metadata lint."""
    from dr_toolkit.failover.runbook import Runbook

    topo, access, ledger = _hook().get_conn()
    rb = Runbook.resume(topo, ledger, run_id, access=access)
    req = rb.approval_request()
    gate = dict(rb.state.after.get("final_gate") or {})
    out = [f"**Promote {req['cold']}** (failover run `{run_id}`, "
           + ("UNPLANNED" if req.get("unplanned") else "planned: hot fenced first") + f"). Reason: {req['reason']}."]
    rpo = gate.get("rpo_s")
    out.append(f"**Recovery point {req.get('recovery_point') or gate.get('recovery_point') or 'none'}**"
               + (f" — RPO {rpo:.0f}s" if isinstance(rpo, (int, float)) else "")
               + (f", limited by **{gate['recovery_point_from']}**" if gate.get("recovery_point_from") else "")
               + (f"; gate verdict {gate['verdict']}" if gate.get("verdict") else "") + ".")
    window = req.get("loss_window") or {}
    if window:
        out.append("**Loss window** (writes on hot after these times are not on cold):")
        out += [f"- {c.get('component')} {c.get('name')}: safe time {c.get('safe_time_iso') or 'none'} — "
                f"{c.get('window')}" for c in window.get("components", [])]
    signals = gate.get("signals") or []
    if signals:
        out.append("| signal | safe time | basis |\n|---|---|---|")
        out[-1] += "".join(f"\n| {s['component']} {s['name']} | {s.get('safe_time') or 'none'} | "
                           f"{(s.get('basis') or '').replace('|', '/')} |" for s in signals[:max_rows])
    plan = dict(rb.state.after.get("kafka_offsets") or {})
    rows = [(g["group"], p) for g in plan.get("groups") or [] for p in g.get("partitions") or []]
    if rows:
        out.append(f"**Kafka offsets applied on cold after approval** ({len(rows)} partition(s)):")
        out += [f"- {grp}: {p.get('topic')}[{p.get('partition')}] offset {_off(p.get('source_offset'))} on hot → "
                f"{_off(p.get('target_offset'))} on cold ({p.get('method')}"
                + (f", may re-read {p['may_reread']}" if p.get("may_reread") else "") + ")"
                for grp, p in rows[:max_rows]]
        if len(rows) > max_rows:
            out.append(f"- … {len(rows) - max_rows} more (see `drt status` / the audit log)")
    elif plan.get("groups") == []:
        out.append("**Kafka offsets**: no consumer groups to carry over.")
    out.append(f"**Metadata lint**: {req.get('metadata_lint') or 'not run'}")
    return "\n\n".join(out)
