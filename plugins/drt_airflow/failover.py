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

TERMINAL_FAILURES = ("failed", "rejected")


def _ledger(topology: Any) -> Any:
    from dr_toolkit.ledger import Ledger
    from drt_airflow.connections import credentials

    creds = credentials(topology.ledger.conn_id)
    return Ledger.open(topology.ledger.url, password=creds.password if creds else None)


def _zk_credentials(topology: Any) -> Any:
    """The fencing ZooKeeper's credentials through Airflow's connections (DB, secrets backend, env)."""
    from dr_toolkit.zk.fencing import fencing_endpoint
    from drt_airflow.connections import credentials

    try:
        return credentials(fencing_endpoint(topology).conn_id)
    except Exception:  # noqa: BLE001 - no ZooKeeper configured: the fence step says so
        return None


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
    from drt_airflow.connections import topology as load

    topo = load()
    ledger = _ledger(topo)
    rid = failover_run_id(str(context["dag_run"].run_id))
    if ledger.failover_run(rid) is None:
        Runbook.start(topo, ledger, reason=reason, execute=not dry_run, run_id=rid, who=_who(context))
    return rid


class FailoverStepOperator(BaseOperator):
    """Run one runbook step (``fence_hot``, ``wait_drain``, ``final_copy``, ``final_verify``,
    ``kafka_offsets``, ``final_gate``, ``promote_cold``, ``report``) of the run ``run_id``."""

    template_fields = ("run_id",)
    ui_color = "#fde2e2"

    def __init__(self, *, step: str, run_id: str, approval_task_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.run_id = run_id
        self.approval_task_id = approval_task_id

    def execute(self, context: Any) -> dict[str, Any]:
        from dr_toolkit.failover.runbook import Runbook
        from drt_airflow.connections import topology as load

        topo = load()
        ledger = _ledger(topo)
        rb = Runbook.resume(topo, ledger, self.run_id, who=_who(context),
                            zk_credentials=_zk_credentials(topo))
        if self.approval_task_id and rb.execute:
            answer = context["ti"].xcom_pull(task_ids=self.approval_task_id) or {}
            chosen = list(answer.get("chosen_options") or [])
            who = str(answer.get("responded_by_user") or {}).strip() or "unknown"
            if isinstance(answer.get("responded_by_user"), dict):
                u = answer["responded_by_user"]
                who = str(u.get("name") or u.get("id") or "unknown")
            if rb.step_event("approval", "done") is None:
                rb.record_approval(approved=chosen == ["Approve"], who=f"airflow:{who}")
        res = rb.run_step(self.step)
        if self.step == "report":
            statuses = {e["action"]: e["status"] for e in rb.events() if e["status"] != "started"}
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
    """

    template_fields = ("run_id",)

    def __init__(self, *, run_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_id = run_id

    def poke(self, context: Any) -> bool:
        from dr_toolkit.failover.runbook import Runbook
        from drt_airflow.connections import topology as load

        topo = load()
        rb = Runbook.resume(topo, _ledger(topo), self.run_id, who=_who(context), drain_timeout_s=0,
                            zk_credentials=_zk_credentials(topo))
        if rb.execute:
            _sigs, reasons, _detail = rb.drain_state()
            if reasons:
                self.log.info("not drained yet: %s", "; ".join(reasons))
                return False
        res = rb.run_step("wait_drain")
        self.log.info("wait_drain: %s — %s", res.status, res.message or "")
        return res.status in ("done", "planned")
