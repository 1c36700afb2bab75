"""dr_rpo_watch: every 5 minutes, the recovery point's age against the RPO SLO (alerting)."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag, task

DOC = """
### RPO watch — alert when the recovery point ages past the SLO

Every 5 minutes the task **rpo_slo_breached** runs the caught-up gate (every signal, read
with the topology's connections), records the check in the ledger (the DR view's RPO and lag
history) and sends `dr_toolkit.rpo_seconds` (gauge) through Airflow's metrics. Its HDFS part is the gate's quick
check: what changed since the last recorded full proof (snapshot diffs, the NameNode's counters),
never a listing of either tree; where that proves nothing (no proof of the newest run yet, a change
on cold), the HDFS signal states no safe time and says why.

The task **fails** (no retry) when the recovery point is older than `failover.rpo_slo_s`, or
when no recovery point can be stated, with the reason in one line; it then also counts
`dr_toolkit.rpo_slo_breach`. Attach your alerting to it as to any task: `on_failure_callback`,
email, notifiers. Without an SLO in the topology it only records and measures.
The topology comes from the Variable `drt_config` (or `$DRT_CONFIG`).
"""


@dag(
    dag_id="dr_rpo_watch",
    schedule="*/5 * * * *",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=5),
    tags=["dr-toolkit", "rpo", "alerting"],
    doc_md=DOC,
)
def dr_rpo_watch():  # type: ignore[no-untyped-def]
    @task(task_id="rpo_slo_breached", retries=0, execution_timeout=timedelta(minutes=4))
    def rpo_slo_breached(**context) -> dict:  # type: ignore[no-untyped-def,type-arg]
        from drt_airflow.slo import enforce_rpo_slo

        ti = context["ti"]
        return enforce_rpo_slo(f"dag:{ti.dag_id}.{ti.task_id}", timeout_s=120)

    rpo_slo_breached()


dr_rpo_watch()
