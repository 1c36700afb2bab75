"""HBase replication: converge the peers, sweep the protected tables' scopes, report the queues."""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

DOC = """
### HBase replication (dr-toolkit capability 1.3)

**Manual** ("run now", every HBase policy; trigger with parameters). Each policy's own
`schedule` is run by Airflow in its own DAG, `dr_hbase_replication__<policy>` (its peer and tables):

1. **peers** — on the hot cluster's ZooKeeper, add or repair one replication peer per
   `policies.hbase[]` entry (`peer_id`, `table_cfs`), pointing at the cold cluster's
   ZooKeeper (`clusters.<cold>.zookeeper` → cluster key). Idempotent: a second run changes
   nothing; a half-written peer is repaired. Every change is in the ledger's audit log.
2. **table_sweep** — every table of the protected `namespaces` and `tables` must have
   `REPLICATION_SCOPE => 1` on every column family (set up *before* data is written). Lists
   the tables that lack it and, with `fix_tables`, runs the generated `hbase shell -n` script.
   Skipped when `clusters.<hot>.hbase_shell` is not set.
3. **queue_status** — replication queues per region server and peer, dead servers' unclaimed
   queues, and whether every peer is caught up (report only; the failover gate decides).

Parameters: `dry_run` (plan the znode changes, write nothing), `fix_tables`.
The topology comes from the Variable `drt_config` (or `$DRT_CONFIG`); ZooKeeper digest
credentials from the connection named by `clusters.<name>.zookeeper.conn_id`.
"""


@dag(
    dag_id="dr_hbase_replication",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["dr-toolkit", "hbase"],
    doc_md=DOC,
    params={
        "dry_run": Param(False, type="boolean", title="Dry run", description="Show peer changes; write nothing."),
        "fix_tables": Param(False, type="boolean", title="Fix tables",
                            description="Set REPLICATION_SCOPE => 1 where missing (hbase shell)."),
    },
    default_args={"retries": 1, "retry_delay": pendulum.duration(minutes=1)},
)
def dr_hbase_replication():  # type: ignore[no-untyped-def]
    @task
    def peers(**context) -> dict:  # type: ignore[no-untyped-def,type-arg]
        from drt_airflow.hbase import run_peers

        return run_peers(dry_run=bool(context["params"]["dry_run"]))

    @task
    def table_sweep(_peers: dict, **context) -> dict:  # type: ignore[no-untyped-def,type-arg]
        from drt_airflow.hbase import run_table_sweep

        p = context["params"]
        return run_table_sweep(fix=bool(p["fix_tables"]), dry_run=bool(p["dry_run"]))

    @task
    def queue_status(_sweep: dict) -> dict:  # type: ignore[type-arg]
        from drt_airflow.hbase import run_status, status_summary

        return status_summary(run_status())

    queue_status(table_sweep(peers()))  # type: ignore[arg-type]  # XComArgs, resolved at run time


dr_hbase_replication()
