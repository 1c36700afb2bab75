"""One DAG per policy of the topology, scheduled by Airflow on the policy's own ``schedule``.

This is the one place where a policy's ``schedule`` becomes an Airflow schedule
(:func:`policy_schedule`): a cron expression or preset (``@hourly``, ``@daily``, …) is handed
to Airflow as it is — Airflow's ``CronTriggerTimetable`` decides when a run is due, the UI
shows the next run — and ``schedule: null`` means "manual only". Nothing in dr-toolkit
evaluates cron by hand.

Each policy gets a DAG whose id names the kind and the policy:

====================================  ============================================================
``dr_hdfs_replication__<policy>``     replicate (outlet ``x-drt://hdfs/<policy>``), then a report
``dr_kafka_offsets__<policy>``        checkpoint the policy's groups (outlet ``x-drt://kafka/<policy>``),
                                      then the mirror lag of its topics
``dr_hbase_replication__<policy>``    converge the policy's peer, sweep its tables' scopes,
                                      queue status (outlet ``x-drt://hbase/<policy>``)
``dr_verify__<policy>``               verify (outlet ``x-drt://verify/<policy>``)
====================================  ============================================================

Lineage: a verify policy whose ``source`` and ``target`` lie at the same relative path under
an HDFS policy's ``source`` and one of its ``targets`` is *linked* to it (:func:`linked_hdfs_policy`)
and also runs after every successful replication of that policy (Asset-triggered); with its
own ``schedule`` set it runs on that too (``AssetOrTimeSchedule``), so the gate's
``max_verify_age_s`` holds even while replication is stalled.

The per-kind DAGs (``dr_hdfs_replication``, ``dr_kafka_offsets``, ``dr_hbase_replication``,
``dr_verify``) stay as manual "run now" DAGs over every policy (or the ones named in a param).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pendulum

from dr_toolkit.errors import ConfigError

if TYPE_CHECKING:
    from airflow.sdk import DAG, Asset

    from dr_toolkit.topology import HBasePolicy, HdfsPolicy, KafkaPolicy, Topology, VerifyPolicy

START = pendulum.datetime(2024, 1, 1, tz="UTC")
KINDS = {"hdfs": "dr_hdfs_replication", "kafka": "dr_kafka_offsets", "hbase": "dr_hbase_replication",
         "verify": "dr_verify"}
_DAG_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def dag_id(kind: str, policy: str) -> str:
    """The DAG id of one policy (``dr_hdfs_replication__warehouse``)."""
    if not _DAG_ID.match(policy):
        raise ConfigError(f"policy name {policy!r} cannot name an Airflow DAG",
                          hint="use letters, digits, '_', '-' and '.' only")
    return f"{KINDS[kind]}__{policy}"


def policy_asset(kind: str, policy: str) -> Asset:
    """The Asset a policy's run updates: ``x-drt://<kind>/<policy>`` (the ``x-`` prefix is Airflow's
    convention for a scheme no provider handles: no URI normalizer is looked up, so building the
    DAGs loads no provider — and no boto3 — at parse time)."""
    from airflow.sdk import Asset

    return Asset(f"x-drt://{kind}/{policy}", group="dr-toolkit")


def policy_schedule(kind: str, policy: str, schedule: str | None) -> str | None:
    """The Airflow schedule of a policy: its cron expression or preset, or None (manual only).
    An expression Airflow's cron timetable cannot read is a ConfigError naming the policy."""
    if schedule is None:
        return None
    from croniter import croniter

    if not croniter.is_valid(schedule):
        raise ConfigError(f"policies.{kind}[{policy}].schedule {schedule!r} is not a cron expression",
                          hint="use five cron fields ('*/15 * * * *'), a preset (@hourly, @daily, @weekly, "
                               "@monthly, @yearly) or null for manual runs only")
    return schedule


def _under(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` when it lies under it (or is it), else None."""
    p, r = path.rstrip("/"), root.rstrip("/")
    if p == r:
        return ""
    return p[len(r) + 1:] if p.startswith(r + "/") else None


def linked_hdfs_policy(topology: Topology, policy: VerifyPolicy) -> HdfsPolicy | None:
    """The HDFS policy that replicates what ``policy`` verifies, if the topology has one."""
    for hp in topology.policies.hdfs:
        rel = _under(policy.source, hp.source)
        if rel is None:
            continue
        for t in hp.targets:
            if _under(policy.target, t) == rel:
                return hp
    return None


def _dag(kind: str, name: str, schedule: Any, doc: str, retry_delay_s: float = 60.0) -> DAG:
    from airflow.sdk import DAG

    return DAG(dag_id=dag_id(kind, name), schedule=schedule, start_date=START, catchup=False,
               max_active_runs=1, tags=["dr-toolkit", kind, "policy"], doc_md=doc,
               default_args={"retries": 1, "retry_delay": pendulum.duration(seconds=retry_delay_s)})


def _when(schedule: str | None) -> str:
    return f"`{schedule}` (the policy's `schedule`)" if schedule else "manual only (`schedule: null`)"


def hdfs_dag(policy: HdfsPolicy, retry_delay_s: float = 60.0) -> DAG:
    from airflow.providers.standard.operators.python import PythonOperator

    from drt_airflow.hdfs import HdfsReplicationOperator, summarize

    sched = policy_schedule("hdfs", policy.name, policy.schedule)
    doc = (f"### HDFS policy `{policy.name}`\n\n`{policy.source}` → {', '.join(f'`{t}`' for t in policy.targets)}"
           f"\n\nRuns {_when(sched)}. **replicate** is `drt replicate {policy.name}` (incremental, atomic, "
           f"under the ledger lease `policy:{policy.name}`) and updates the Asset `x-drt://hdfs/{policy.name}` "
           "(linked verify DAGs run after it); **report** sums the copy.")
    with _dag("hdfs", policy.name, sched, doc, retry_delay_s) as dag:
        rep = HdfsReplicationOperator(task_id="replicate", policy=policy.name,
                                      outlets=[policy_asset("hdfs", policy.name)])
        rep >> PythonOperator(task_id="report", python_callable=summarize, op_args=[rep.output])
    return dag


def kafka_dag(policy: KafkaPolicy, retry_delay_s: float = 60.0) -> DAG:
    from drt_airflow.kafka import KafkaCheckpointOperator, KafkaLagOperator

    sched = policy_schedule("kafka", policy.name, policy.schedule)
    doc = (f"### Kafka policy `{policy.name}`\n\nGroups {', '.join(f'`{g}`' for g in policy.groups) or 'none'}"
           f" on topics {', '.join(f'`{t}`' for t in policy.topics)}. Runs {_when(sched)}. **checkpoint** "
           f"records the groups' offsets in the ledger (Asset `x-drt://kafka/{policy.name}`); **lag_report** "
           "reports how far the cold mirror is behind on the policy's topics.")
    with _dag("kafka", policy.name, sched, doc, retry_delay_s) as dag:
        ck = KafkaCheckpointOperator(task_id="checkpoint", groups=policy.groups or None,
                                     outlets=[policy_asset("kafka", policy.name)])
        ck >> KafkaLagOperator(task_id="lag_report", topics=policy.topics)
    return dag


def hbase_dag(policy: HBasePolicy, retry_delay_s: float = 60.0) -> DAG:
    from drt_airflow.hbase import HBasePeersOperator, HBaseStatusOperator, HBaseTableSweepOperator

    sched = policy_schedule("hbase", policy.name, policy.schedule)
    doc = (f"### HBase policy `{policy.name}` (peer `{policy.peer_id}`)\n\nRuns {_when(sched)}: **peers** "
           "adds or repairs the policy's replication peer, **table_sweep** checks REPLICATION_SCOPE of its "
           f"tables, **queue_status** reports the peer's queues (Asset `x-drt://hbase/{policy.name}`).")
    with _dag("hbase", policy.name, sched, doc, retry_delay_s) as dag:
        (HBasePeersOperator(task_id="peers", policies=[policy.name])
         >> HBaseTableSweepOperator(task_id="table_sweep", policies=[policy.name])
         >> HBaseStatusOperator(task_id="queue_status", peers=[policy.peer_id],
                                outlets=[policy_asset("hbase", policy.name)]))
    return dag


def verify_dag(topology: Topology, policy: VerifyPolicy) -> DAG:
    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable

    from drt_airflow.verify import VerifyOperator

    sched = policy_schedule("verify", policy.name, policy.schedule)
    linked = linked_hdfs_policy(topology, policy)
    schedule: Any = sched
    when = _when(sched)
    if linked is not None:
        asset = policy_asset("hdfs", linked.name)
        schedule = (AssetOrTimeSchedule(timetable=CronTriggerTimetable(sched, timezone="UTC"), assets=[asset])
                    if sched else [asset])
        when = (f"after every replication of HDFS policy `{linked.name}` (Asset `x-drt://hdfs/{linked.name}`)"
                + (f" and on `{sched}`" if sched else ""))
    doc = (f"### Verify policy `{policy.name}`\n\n`{policy.source}` vs `{policy.target}`, key "
           f"{', '.join(policy.key)}. Runs {when}. **verify** fails when BADROWS > 0 (open its HTML report); "
           f"it updates the Asset `x-drt://verify/{policy.name}`.")
    with _dag("verify", policy.name, schedule, doc, topology.policies.retry_delay_s) as dag:
        VerifyOperator(task_id="verify", policy=policy.name, outlets=[policy_asset("verify", policy.name)])
    return dag


def load_for_parsing() -> Topology:
    """The topology at DAG-parse time; unreadable → one RuntimeError line (the file's import error)."""
    from dr_toolkit.errors import DrtError
    from drt_airflow.hooks import DrtHook

    hook = DrtHook()
    try:
        topo: Topology = hook.configured_topology()
    except DrtError as exc:
        raise RuntimeError(f"dr-toolkit: no per-policy DAGs: {exc.message} (the topology comes from the "
                           "drt_default connection's extra 'config', the Variable drt_config or $DRT_CONFIG)"
                           ) from None
    return topo


def policy_dags(topology: Topology | None = None) -> dict[str, DAG]:
    """Every per-policy DAG of the topology, by DAG id."""
    topo = topology if topology is not None else load_for_parsing()
    try:
        delay = topo.policies.retry_delay_s
        dags = ([hdfs_dag(p, delay) for p in topo.policies.hdfs] + [kafka_dag(p, delay) for p in topo.policies.kafka]
                + [hbase_dag(p, delay) for p in topo.policies.hbase]
                + [verify_dag(topo, p) for p in topo.policies.verify])
    except ConfigError as exc:
        raise RuntimeError(f"dr-toolkit: no per-policy DAGs: {exc.message}") from None
    return {d.dag_id: d for d in dags}


def dag_ids(topology: Topology) -> list[str]:
    """Every DAG id of the project for this topology: the manual per-kind DAGs, the per-policy
    ones and dr_failover (what the DR view lists under "last runs")."""
    ids = list(KINDS.values())
    for kind, group in (("hdfs", topology.policies.hdfs), ("kafka", topology.policies.kafka),
                        ("hbase", topology.policies.hbase), ("verify", topology.policies.verify)):
        ids += [dag_id(kind, p.name) for p in group]
    return [*ids, "dr_failover"]
