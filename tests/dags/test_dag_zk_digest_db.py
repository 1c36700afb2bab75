"""A fencing ZooKeeper that requires digest auth, reached only through a connection held in
Airflow's metadata DB (issue 23: access is required, built once at the edge).

The fencing znode carries a digest ACL (``drt:<password>`` may do everything, nobody else may
even read it); the topology's ZooKeeper endpoints name the connection ``zk_digest_db_<tag>``,
which exists in the metadata DB only — no ``AIRFLOW_CONN_*`` variable. Both the scheduled
replication (the policy's DAG, its ``replicate`` task through ``DrtHook``) and the runbook's
final copy (the ``dr_failover`` DAG up to ``final_copy``, executed) check the fence before
copying: that check must use the hook's access value, or it cannot read the fencing znode.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.secrets import env_name
from dr_toolkit.topology import load_topology
from tests.support.airflow import REPO
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("copy_state_dir")]

PASSWORD = "zk-digest-from-the-db-5150"


@pytest.fixture
def digest_world(airflow_home: Path, zk_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                 ) -> dict[str, Any]:
    """A topology (hot → cold HDFS policy ``wh`` on local roots, both clusters' ZooKeeper the test
    server's, ``conn_id`` = a DB-only connection) and its fencing znode under a digest-only ACL."""
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl

    if not zk_server.running:
        zk_server.start()
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    conn_id = f"zk_digest_db_{uuid.uuid4().hex[:8]}"
    with create_session() as session:  # a row of the metadata DB's connection table
        session.add(Connection(conn_id=conn_id, conn_type="generic", login="drt", password=PASSWORD,
                               host="127.0.0.1"))
    for var in ("AIRFLOW_CONN_" + conn_id.upper(), env_name(conn_id)):
        monkeypatch.delenv(var, raising=False)
    assert not [k for k in os.environ if k.startswith("AIRFLOW_CONN_") and "ZK" in k.upper()]
    path = write_topology(tmp_path, zk=zk_server.address, zk_conn_id=conn_id,
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"],
                                 "schedule": "@hourly"}])
    topo = load_topology(path)
    src = tmp_path / "hot" / "warehouse"
    src.mkdir(parents=True)
    for i in range(3):
        (src / f"part-{i}.txt").write_text(f"row {i}\n")
    ep = topo.cold.zookeeper
    assert ep is not None and ep.conn_id == conn_id
    only_drt = [make_digest_acl("drt", PASSWORD, all=True)]
    zk = KazooClient(hosts=ep.quorum, timeout=5, auth_data=[("digest", f"drt:{PASSWORD}")])
    zk.start(timeout=15)
    try:
        zk.create(ep.dr_root, b"", acl=only_drt, makepath=True)
        zk.create(f"{ep.dr_root}/fencing", json.dumps({"epoch": 0}).encode(), acl=only_drt)
    finally:
        zk.stop()
        zk.close()
    monkeypatch.setenv("DRT_CONFIG", str(path))
    return {"path": path, "topo": topo, "conn_id": conn_id, "cold": tmp_path / "cold" / "warehouse"}


def _fence_without_credentials_is_refused(topo: Any) -> None:
    """The ZooKeeper really requires the digest identity: without it the fencing znode is unreadable."""
    from dr_toolkit.zk.client import ZkNoAuth, connect

    ep = topo.cold.zookeeper
    with connect(ep, credentials=None) as z, pytest.raises(ZkNoAuth):
        z.get(f"{ep.dr_root}/fencing")


def _dag(file: str, dag_id: str) -> Any:
    """The DAG ``dag_id`` of ``dags/<file>``, parsed as the DAG processor does (one file, not the folder)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags" / file)).dags[dag_id]


def _failed_tasks(run: Any) -> list[str]:
    return [f"{ti.task_id}: {ti.state}" for ti in run.get_task_instances() if ti.state != "success"]


def test_scheduled_replication_reads_the_fence_with_the_db_connection(digest_world: dict[str, Any]) -> None:
    topo = digest_world["topo"]
    _fence_without_credentials_is_refused(topo)
    run = _dag("dr_policies.py", "dr_hdfs_replication__wh").test()
    assert run.state == "success", _failed_tasks(run)
    assert sorted(p.name for p in digest_world["cold"].iterdir()) == ["part-0.txt", "part-1.txt", "part-2.txt"]
    assert [r["status"] for r in Ledger.open(topo.ledger.url).runs(policy="wh")] == ["succeeded"]


def test_runbook_final_copy_reads_the_fence_with_the_db_connection(digest_world: dict[str, Any]) -> None:
    """The executed failover DAG up to ``final_copy``: fence_hot bumps the epoch on the digest-only
    znode, then the final copy checks that epoch (as the fence holder) and copies hot → cold."""
    topo = digest_world["topo"]
    _fence_without_credentials_is_refused(topo)
    dag = _dag("dr_failover.py", "dr_failover").partial_subset(task_ids=["final_copy"], include_upstream=True,
                                                 include_downstream=False)
    run = dag.test(run_conf={"reason": "digest drill", "dry_run": False})
    assert run.state == "success", _failed_tasks(run)
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["fence_hot"].xcom_pull(task_ids="fence_hot")["status"] == "done"
    assert tis["final_copy"].xcom_pull(task_ids="final_copy")["status"] == "done"
    assert sorted(p.name for p in digest_world["cold"].iterdir()) == ["part-0.txt", "part-1.txt", "part-2.txt"]
    run_id = tis["start"].xcom_pull(task_ids="start")
    events = Ledger.open(topo.ledger.url).audit_events(run_id=run_id)
    assert [e["status"] for e in events if e["action"] == "final_copy" and e["status"] != "started"] == ["done"]
