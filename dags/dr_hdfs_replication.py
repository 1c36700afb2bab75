"""File replication on demand: every HDFS policy (or one), one mapped task each. Scheduled runs
are the per-policy DAGs of dags/dr_policies.py."""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task
from drt_airflow.hdfs import HdfsReplicationOperator

DOC = """
### HDFS file replication (dr-toolkit capability 1.1)

**Manual** ("run now"): trigger it to replicate every HDFS policy of the topology's
`policies.hdfs`, or only the one named in the `policy` param. Each policy's own `schedule` is
run by Airflow in its own DAG, `dr_hdfs_replication__<policy>`.
Each policy is one **mapped task** (dynamic task mapping): a distcp-style copy of the
policy's `source` to each of its `targets` — incremental (fast-forward from the last
manifest, or an HDFS snapshot diff), atomic (temporary names, renamed after the checksum is
verified), under the ledger lease `policy:<name>`. The task fails when any file failed.

Each run writes a manifest in the state location (outside the replica: `options.state_dir`,
`$DRT_STATE_DIR` or beside the ledger), a ledger row, and the
policy's watermark (the source listing or snapshot time the target now holds), which the
failover gate reads. The same copy by hand: `drt replicate <policy>`.

The topology comes from the Variable `drt_config` (or `$DRT_CONFIG`); HDFS/S3 credentials
from the connections named by `clusters.<name>.hdfs.conn_id` / `s3.conn_id`.
"""


@dag(
    dag_id="dr_hdfs_replication",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["dr-toolkit", "hdfs"],
    doc_md=DOC,
    params={
        "policy": Param("", type="string", description="Run only this policy (empty or 'all': every policy)."),
        "dry_run": Param(False, type="boolean", description="Only count what would be copied."),
        "engine": Param("", type="string", description="Override the policies' engine: local or spark."),
    },
    default_args={"retries": 1, "retry_delay": pendulum.duration(minutes=2)},
)
def dr_hdfs_replication():  # type: ignore[no-untyped-def]
    @task
    def policies(params: dict | None = None) -> list[str]:  # type: ignore[type-arg]
        from drt_airflow.hdfs import policy_names

        only = (params or {}).get("policy") or None
        return policy_names(None if only == "all" else only)

    @task
    def report(results: list[dict]) -> dict:  # type: ignore[type-arg]
        from drt_airflow.hdfs import summarize

        # by index up to its length: iterating the lazy XCom sequence asks for one past the end
        # and Airflow logs that 404 as an error ("XCom not found") in the task log
        return summarize([results[i] for i in range(len(results))])

    replicate = HdfsReplicationOperator.partial(
        task_id="replicate", engine="{{ params.engine }}", dry_run="{{ params.dry_run }}",
        max_active_tis_per_dagrun=2,
    ).expand(policy=policies())
    report(replicate.output)  # type: ignore[arg-type]  # an XComArg, resolved at run time


dr_hdfs_replication()
