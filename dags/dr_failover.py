"""dr_failover: the manual hot-to-cold failover runbook (dr-toolkit capability 1.5)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator, Param, dag, task

DOC = """
### Fail over from the hot cluster to the cold one

**Manual only** (no schedule). Trigger it with a *reason* (it goes to the audit log). With
**dry_run** on (the default) every step only says what it would do and nothing changes.

Steps: fence the hot cluster (fencing epoch + read-only flag in ZooKeeper) → wait until
HBase queues and the Kafka mirror drained (the sensor waits deferred on the triggerer) → final incremental copy of every HDFS policy →
final verification (BADROWS must be 0) → remap Kafka consumer offsets (not applied yet) → the
caught-up gate must say **GO** → metadata lint (hot-cluster namenodes, hosts, buckets left
in replicated metadata, shown to the approver) → **human approval** (this DAG waits in *Required
actions*; approve or reject — both are audited with who and when) → apply the Kafka offsets
(the gate is checked again first) → promote the cold cluster (active-cluster znode; the gate
again) → final report (JSON + HTML in `failover.reports_dir`).

Credentials come from Airflow connections (metadata DB, environment or secrets backend):
every `conn_id` in the topology, resolved by `drt_airflow.hooks.DrtHook`.

Every step is idempotent and recorded in the ledger's audit events (who, what, when,
before/after); clearing a failed task re-runs only that step. The same runbook runs from the
command line: `drt failover run [--execute] [--resume RUN]`.
"""

RUN_ID = "{{ ti.xcom_pull(task_ids='start') }}"


@dag(
    dag_id="dr_failover",
    schedule=None,
    catchup=False,
    tags=["dr-toolkit", "failover"],
    doc_md=DOC,
    max_active_runs=1,
    params={
        "reason": Param(type="string", minLength=3, title="Reason",
                        description="Why fail over now (recorded in the audit log)."),
        "dry_run": Param(True, type="boolean", title="Dry run",
                         description="On: only say what each step would do. Off: really fail over."),
    },
    render_template_as_native_obj=False,
)
def dr_failover():  # type: ignore[no-untyped-def]
    from airflow.providers.standard.operators.hitl import HITLOperator
    from drt_airflow.failover import DrainedSensor, FailoverStepOperator, start_run

    from dr_toolkit.failover.runbook import STEPS, Step

    cut = STEPS.index(Step.APPROVAL)
    before, after = STEPS[:cut], [s for s in STEPS[cut + 1:] if s != Step.REPORT]

    @task
    def start(**context) -> str:  # type: ignore[no-untyped-def]
        """Record the failover run in the ledger (reason, who, dry run or not)."""
        p = context["params"]
        return start_run(context, reason=str(p["reason"]), dry_run=bool(p["dry_run"]))

    @task.branch
    def execute_or_dry_run(**context) -> str:  # type: ignore[no-untyped-def]
        """A dry run skips the approval and the promotion (nothing to approve)."""
        return "report" if context["params"]["dry_run"] else "approval"

    prev: Any = start()  # a task's XComArg, then operators of different classes
    for step in before:
        op: BaseOperator
        if step == Step.WAIT_DRAIN:
            # deferred to the triggerer while it waits (no worker slot held for up to 2 hours); one
            # drain read (HBase queue znodes, Kafka offsets) every 5 s: the failover waits at most that
            # long past the drain (`drt failover run` reads every 1 s)
            op = DrainedSensor(task_id=str(step), run_id=RUN_ID, poke_interval=5, timeout=timedelta(hours=2),
                               deferrable=True)
        else:
            op = FailoverStepOperator(task_id=str(step), step=str(step), run_id=RUN_ID)
        prev >> op
        prev = op
    @task
    def approval_question(failover_run: str) -> str:
        """What is approved: recovery point, RPO, limiting signal, safe times, Kafka offsets, lint."""
        from drt_airflow.failover import approval_question as question

        return question(failover_run)

    question = approval_question(RUN_ID)
    prev >> question
    prev = question
    branch = execute_or_dry_run()
    # A plain HITL question (not ApprovalOperator, which skips everything downstream on "Reject"):
    # the answer either way reaches kafka_apply, which records it (who, when) in the audit log.
    approval = HITLOperator(
        task_id="approval",
        options=["Approve", "Reject"],
        subject="Promote the cold cluster? (failover run {{ ti.xcom_pull(task_ids='start') }})",
        body="{{ ti.xcom_pull(task_ids='approval_question') }}\n\nApproving makes the cold cluster the "
             "active one.",
        response_timeout=timedelta(hours=12),
    )
    report = FailoverStepOperator(task_id=str(Step.REPORT), step=str(Step.REPORT), run_id=RUN_ID,
                                  trigger_rule="none_failed_min_one_success")
    prev >> branch >> [approval, report]
    last: BaseOperator = approval
    for i, step in enumerate(after):  # kafka_apply, promote_cold: the first records the decision
        nxt = FailoverStepOperator(task_id=str(step), step=str(step), run_id=RUN_ID,
                                   approval_task_id="approval" if i == 0 else None)
        last >> nxt
        last = nxt
    last >> report


dr_failover()
