"""Kafka consumer offsets on demand: checkpoint every protected group, then report mirror lag.
Scheduled runs are the per-policy DAGs of dags/dr_policies.py."""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task

DOC = """
### Kafka consumer offsets (dr-toolkit capability 1.2)

**Manual** ("run now", every Kafka policy at once). Each policy's own `schedule` is run by
Airflow in its own DAG, `dr_kafka_offsets__<policy>` (its groups, then its topics' lag):

1. **checkpoint** — for every consumer group named in the topology's `policies.kafka[].groups`,
   record on the hot cluster the committed offset of each partition and the timestamp and
   fingerprint of the last consumed record, in the ledger (`drt status` lists them).
2. **lag_report** — check that every protected topic exists on the cold cluster with the same
   partition count, and how far the cold mirror is behind (records and seconds, per partition).

At failover, `drt kafka remap --group G --apply` (or the failover runbook) uses the newest
checkpoint to resume each group on the cold cluster at the record it had reached on hot.

The topology comes from the Variable `drt_config` (or `$DRT_CONFIG`); broker credentials
from the Kafka connections named by `clusters.<name>.kafka.conn_id`.
"""


@dag(
    dag_id="dr_kafka_offsets",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["dr-toolkit", "kafka"],
    doc_md=DOC,
    default_args={"retries": 1, "retry_delay": pendulum.duration(minutes=1)},
)
def dr_kafka_offsets():  # type: ignore[no-untyped-def]
    @task
    def checkpoint() -> dict:  # type: ignore[type-arg]
        from drt_airflow.kafka import run_checkpoint

        return run_checkpoint()

    @task
    def lag_report(ck: dict) -> dict:  # type: ignore[type-arg]
        from drt_airflow.kafka import lag_summary, run_lag

        return {"checkpoint_id": ck["checkpoint_id"], **lag_summary(run_lag())}

    lag_report(checkpoint())  # type: ignore[arg-type]  # an XComArg, resolved at run time


dr_kafka_offsets()
