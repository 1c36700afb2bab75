"""Verification on demand: every verify policy of the topology (or those named), compared with its
replica. Scheduled and Asset-triggered runs are the per-policy DAGs of dags/dr_policies.py."""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

DOC = """
### Verification — verifyrep on Spark (dr-toolkit capability 1.4)

**Manual** ("run now"), for each dataset in the topology's `policies.verify`. Each policy's
own `schedule` is run by Airflow in its own DAG, `dr_verify__<policy>`, which also runs after
every replication of the HDFS policy that copies its data (Asset `x-drt://hdfs/<policy>`):

1. **policies** — list the verify policies (or only those named in the `policies` param when
   triggered by hand).
2. **verify** (one mapped task per policy) — read the source and its replica with Spark,
   compare per-bucket digests of row hashes, row-compare only the buckets that differ, and
   count HBase VerifyReplication's counters: `GOODROWS`, `BADROWS`,
   `ONLY_IN_SOURCE_TABLE_ROWS`, `ONLY_IN_PEER_TABLE_ROWS`, `CONTENT_DIFFERENT_ROWS`. With a
   `ts_column`, only rows written before the run started are compared; with
   `recompare_sleep_s`, differing keys are checked again after the pause. The HTML report
   (counters, a per-bucket chart, samples) is kept in the policy's `report_dir` (default
   `failover.reports_dir`) and the result goes to the ledger. **The task fails when
   BADROWS > 0** — open its report.
3. **summary** — the newest report of each policy (runs even when a verify failed).

Spark runs in the task process (the hot cluster's `spark.master`, default `local[2]`); for a
cluster, submit `dr_toolkit/cli/spark_submit.py verify-policy NAME` with spark-submit instead.
The topology comes from the Variable `drt_config` (or `$DRT_CONFIG`).
"""


@dag(
    dag_id="dr_verify",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["dr-toolkit", "verify"],
    doc_md=DOC,
    params={"policies": Param([], type="array", description="Verify only these policies (empty: all).")},
)
def dr_verify():  # type: ignore[no-untyped-def]
    from drt_airflow.verify import VerifyOperator

    @task
    def policies(params: dict | None = None) -> list[str]:  # type: ignore[type-arg]
        from drt_airflow.verify import policy_names

        return policy_names(list((params or {}).get("policies") or []))

    @task(trigger_rule="all_done")
    def summary(names: list[str]) -> dict:  # type: ignore[type-arg]
        from drt_airflow.verify import latest_reports

        return latest_reports(list(names))

    names = policies()
    verified = VerifyOperator.partial(task_id="verify", map_index_template="{{ task.policy }}").expand(
        policy=names)
    verified >> summary(names)  # type: ignore[arg-type]  # an XComArg, resolved at run time


dr_verify()
