"""dr_reprotect: after a failover, protect the active cluster onto the old hot one (issue 40)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

DOC = """
### Re-protect: replication the other way after a failover

**Manual only** (no schedule). Run it after `dr_failover` promoted the cold cluster. With
**dry_run** on (the default) every step only says what it would do and nothing changes.

Steps: preflight (ZooKeeper names the cold cluster active; the recovery point it was promoted at)
→ **divergence report** (what the old hot cluster took after the recovery point: files changed
after the common snapshot or the last copy's manifest, Kafka records the active cluster never
mirrored, HBase cells written after the recovery point) → **human approval** (this DAG waits in
*Required actions*; approving acknowledges every item the question lists) → set aside (each item
kept on the old hot cluster, moved aside, never deleted) → lift the standby's fence and record the
new direction → HDFS (rolled back to the common base, then the delta from the active cluster),
Kafka (the reverse MirrorMaker 2 flow checked on its records, the groups' offsets remapped back),
HBase (the reverse peer, the gap since the recovery point copied) → the gate in the new direction
→ report (`reprotect-<run>.json` in `failover.reports_dir`).

After it, every DAG, the DR page and `drt status` describe the new direction. Switching back is a
planned failover in the new direction (`dr_failover`) and another re-protect — or
`drt failover switchover` at the command line.
"""

RUN_ID = "{{ ti.xcom_pull(task_ids='start') }}"


@dag(
    dag_id="dr_reprotect",
    schedule=None,
    catchup=False,
    tags=["dr-toolkit", "failover"],
    doc_md=DOC,
    max_active_runs=1,
    params={
        "reason": Param(type="string", minLength=3, title="Reason",
                        description="Why re-protect now (recorded in the audit log)."),
        "dry_run": Param(True, type="boolean", title="Dry run",
                         description="On: only say what each step would do. Off: really re-protect."),
    },
    render_template_as_native_obj=False,
)
def dr_reprotect():  # type: ignore[no-untyped-def]
    from airflow.providers.standard.operators.hitl import HITLOperator
    from drt_airflow.reprotect import ReprotectStepOperator, start_run

    from dr_toolkit.failback.runbook import STEPS, Step

    cut = STEPS.index(Step.APPROVAL)
    before, after = STEPS[:cut], [s for s in STEPS[cut + 1:] if s != Step.REPORT]

    @task
    def start(**context) -> str:  # type: ignore[no-untyped-def]
        """Record the re-protect run in the ledger (reason, who, dry run or not)."""
        p = context["params"]
        return start_run(context, reason=str(p["reason"]), dry_run=bool(p["dry_run"]))

    @task.branch
    def execute_or_dry_run(**context) -> str:  # type: ignore[no-untyped-def]
        """A dry run plans every step without asking (nothing to approve)."""
        return after[0].value if context["params"]["dry_run"] else "approval"

    @task
    def approval_question(run: str) -> str:
        """The divergence report the approver acknowledges."""
        from drt_airflow.reprotect import approval_question as question

        return question(run)

    prev: Any = start()
    for step in before:
        op = ReprotectStepOperator(task_id=str(step), step=str(step), run_id=RUN_ID)
        prev >> op
        prev = op
    question = approval_question(RUN_ID)
    branch = execute_or_dry_run()
    prev >> question >> branch
    approval = HITLOperator(
        task_id="approval",
        options=["Approve", "Reject"],
        subject="Re-protect onto the old hot cluster? (run {{ ti.xcom_pull(task_ids='start') }})",
        body="{{ ti.xcom_pull(task_ids='approval_question') }}\n\nApproving acknowledges every divergence item "
             "above: each is moved aside on the old hot cluster, which is then brought up to date.",
        response_timeout=timedelta(hours=12),
    )
    last: Any = None
    for i, step in enumerate(after):  # set_aside (records the decision first), lift_standby, ...
        nxt = ReprotectStepOperator(task_id=str(step), step=str(step), run_id=RUN_ID,
                                    approval_task_id="approval" if i == 0 else None,
                                    trigger_rule="none_failed_min_one_success" if i == 0 else "all_success")
        if last is None:
            branch >> [approval, nxt]
            approval >> nxt
        else:
            last >> nxt
        last = nxt
    report = ReprotectStepOperator(task_id=str(Step.REPORT), step=str(Step.REPORT), run_id=RUN_ID)
    last >> report


dr_reprotect()
