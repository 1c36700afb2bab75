"""Airflow face of the re-protect runbook (:mod:`dr_toolkit.failback.runbook`): one thin operator
per step, the human approval with the divergence report, XCom holding only ``{name, status,
message}`` (the detail is in the ledger's audit events and the report)."""

from __future__ import annotations

import re
from typing import Any

from airflow.sdk import BaseOperator

from drt_airflow.failover import TERMINAL_FAILURES, _hook, _who
from drt_airflow.links import DrPageLink


def reprotect_run_id(airflow_run_id: str) -> str:
    """A re-protect run id derived from the DAG run, so a retried ``start`` task finds its run again."""
    return "reprotect-" + re.sub(r"[^A-Za-z0-9_.\-]", "_", airflow_run_id)[:120]


def start_run(context: Any, *, reason: str, dry_run: bool) -> str:
    """Start (or find again, on retry) the re-protect run of this DAG run; return its id."""
    from dr_toolkit.failback.runbook import Reprotect

    topo, access, ledger = _hook().get_conn()
    rid = reprotect_run_id(str(context["dag_run"].run_id))
    if ledger.failover_run(rid) is None:
        Reprotect.start(topo, ledger, reason=reason, execute=not dry_run, run_id=rid, who=_who(context),
                        access=access)
    return rid


def _resume(run_id: str, context: Any) -> Any:
    from dr_toolkit.failback.runbook import Reprotect

    hook = _hook()
    return Reprotect.resume(hook.configured_topology(), hook.ledger(hook.configured_topology()), run_id,
                            access=hook.access(), who=_who(context))


class ReprotectStepOperator(BaseOperator):
    """Run one re-protect step of the run ``run_id``. With ``approval_task_id`` (the first step after
    the human approval) the answer is recorded first: approving in Airflow acknowledges every item of
    the divergence report the approval request showed."""

    template_fields = ("run_id",)
    ui_color = "#e2ecfd"
    operator_extra_links = (DrPageLink(),)

    def __init__(self, *, step: str, run_id: str, approval_task_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.run_id = run_id
        self.approval_task_id = approval_task_id

    def execute(self, context: Any) -> dict[str, Any]:
        from dr_toolkit.failback.runbook import Step

        rp = _resume(self.run_id, context)
        answer = (context["ti"].xcom_pull(task_ids=self.approval_task_id) or {}) if self.approval_task_id else {}
        if rp.execute and answer.get("chosen_options"):
            chosen = list(answer.get("chosen_options") or [])
            u = answer.get("responded_by_user")
            who = str((u.get("name") or u.get("id")) if isinstance(u, dict) else (u or "")).strip() or "unknown"
            if not rp.state.decided:
                rp.record_decision(chosen == ["Approve"], f"airflow:{who}", "answered in Airflow",
                                   acknowledged=[d.id for d in rp.items])
            if chosen != ["Approve"]:
                from airflow.sdk.exceptions import AirflowSkipException

                raise AirflowSkipException(f"re-protect run {self.run_id} rejected by airflow:{who}: nothing changed")
        res = rp.run_step(Step(self.step))
        if self.step == Step.REPORT:
            statuses = rp.state.statuses
            final = ("aborted" if statuses.get("approval") == "rejected" else
                     "failed" if any(s == "failed" for s in statuses.values()) else "succeeded")
            rp.ledger.set_failover_status(self.run_id, final, detail=rp.summary())
        self.log.info("re-protect run %s step %s: %s — %s", self.run_id, self.step, res.status, res.message or "")
        if res.status in TERMINAL_FAILURES:
            from airflow.sdk.exceptions import AirflowException

            raise AirflowException(f"re-protect step {self.step} {res.status}: {res.message}")
        return {"name": res.name, "status": res.status, "message": res.message}


def approval_question(run_id: str, *, max_rows: int = 30) -> str:
    """The divergence report as Markdown for the HITL body: every item the old hot cluster took
    after the recovery point (approving acknowledges each) and where it will be kept."""
    rp = _resume(run_id, {})
    req = rp.approval_request()
    out = [f"**Re-protect {req['active']} onto {req['standby']}** (run `{run_id}`). Recovery point "
           f"{req.get('recovery_point') or 'unknown'}."]
    items = req.get("findings") or []
    if not items:
        out.append(f"**Divergence**: nothing on {req['standby']} after the recovery point.")
    else:
        out.append(f"**Divergence** — {len(items)} item(s) {req['standby']} took after the recovery point; each is "
                   "moved aside there (never deleted) before it is brought up to date:")
        out += [f"- `{f['id']}` {f['kind']} {f['value']}" for f in items[:max_rows]]
        if len(items) > max_rows:
            out.append(f"- … {len(items) - max_rows} more (see the run's report)")
    return "\n\n".join(out)
