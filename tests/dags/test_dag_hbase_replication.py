"""The dr_hbase_replication DAG (dag.test()) against the test ZooKeeper, and the HBase sensor against
the real hot HBase cluster."""

from __future__ import annotations

import pytest

from dr_toolkit.hbase.encoding import Layout

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

COLD_KEY = "cold-zk1.example.com,cold-zk2.example.com:2181:/hbase"
ZK_TIMEOUTS = {"connect_timeout_s": 5, "call_timeout_s": 5}


def _sensor_topology(tmp_path, hot, cold):  # type: ignore[no-untyped-def]
    """A topology over the real hot and cold HBase clusters with one policy, peer 1."""
    import yaml

    path = tmp_path / "drt.yaml"
    path.write_text(yaml.safe_dump({
        "version": 1,
        "clusters": {
            "hot": {"role": "hot", "local_root": str(tmp_path / "hot"),
                    "zookeeper": {"quorum": hot.zk_quorum, "hbase_znode_parent": hot.znode_parent, **ZK_TIMEOUTS}},
            "cold": {"role": "cold", "local_root": str(tmp_path / "cold"),
                     "zookeeper": {"quorum": cold.zk_quorum, "hbase_znode_parent": cold.znode_parent,
                                   **ZK_TIMEOUTS}}},
        "policies": {"hbase": [{"name": "orders", "peer_id": "1", "tables": ["default:orders"]}]},
        "ledger": {"url": f"sqlite:///{tmp_path}/ledger.db"}}))
    return path


@pytest.mark.slow
def test_dag_converges_peers_and_reports_status(airflow_home, hbase_topology, hbase_parent, zk, monkeypatch
                                                ) -> None:
    from tests.support.airflow import load_dag

    monkeypatch.setenv("DRT_CONFIG", str(hbase_topology))
    run = load_dag("dr_hbase_replication").test()
    assert run.state == "success"
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    peers = tis["peers"].xcom_pull(task_ids="peers")
    assert peers["peers"][0]["peer_id"] == "1" and peers["peers"][0]["changed"] is True
    assert zk.exists(Layout(hbase_parent).peer_state("1")) is not None
    sweep = tis["table_sweep"].xcom_pull(task_ids="table_sweep")
    assert sweep["skipped"] == "no hbase_shell configured" and sweep["namespaces"] == ["shop"]
    status = tis["queue_status"].xcom_pull(task_ids="queue_status")
    # a peer in a ZooKeeper with no HBase behind it: no queue, and no running HBase to say it ships —
    # "no queue" is never "caught up" (issue 38 #1); the DAG reports it, it does not fail on it
    assert status["caught_up"] is False and status["peers"] == {"1": "ENABLED"}
    assert any("cannot ask the running HBase master" in r for r in status["reasons"]), status["reasons"]

    from dr_toolkit.hbase.peers import read_peer
    from dr_toolkit.topology import load_topology
    from dr_toolkit.zk.client import connect

    topo = load_topology(hbase_topology)
    with connect(topo.hot.zookeeper, credentials=None) as z:
        p = read_peer(z, "1", hbase_parent)
    assert p is not None and p.cluster_key == COLD_KEY and p.state == "ENABLED"

    # the policy's own DAG (scheduled by Airflow on the policy's schedule): its peer only, idempotent
    dag = load_dag("dr_hbase_replication__orders")
    assert dag.timetable.expression == "0 0 * * *"  # the policy's default @daily
    run2 = dag.test()
    assert run2.state == "success"
    tis2 = {ti.task_id: ti for ti in run2.get_task_instances()}
    assert tis2["peers"].xcom_pull(task_ids="peers")["peers"] == [{"peer_id": "1", "changed": False, "changes": []}]
    assert tis2["queue_status"].xcom_pull(task_ids="queue_status")["caught_up"] is False


def test_sensor_follows_the_real_queues(airflow_home, tmp_path, hbase_hot, hbase_cold, monkeypatch) -> None:
    """The sensor on the real hot HBase: a rolled WAL waiting behind a disabled peer keeps it down;
    once the peer is enabled and cold has the rows, it pokes True."""
    import time

    import airflow  # noqa: F401 - its settings put plugins/ on sys.path
    from drt_airflow.hbase import HBaseReplicationCaughtUpSensor

    hot, cold = hbase_hot, hbase_cold
    monkeypatch.setenv("DRT_CONFIG", str(_sensor_topology(tmp_path, hot, cold)))
    sensor = HBaseReplicationCaughtUpSensor(task_id="hbase_caught_up", peers=["1"])
    hot.disable_peer("1")
    hot.put(8_000_000, 10)
    hot.roll_wal()
    deadline = time.monotonic() + 60
    while sensor.poke({}) and time.monotonic() < deadline:  # HBase queues the new WAL a moment later
        time.sleep(0.5)
    assert sensor.poke({}) is False
    hot.enable_peer("1")
    cold.wait_rows(hot.count())
    deadline = time.monotonic() + 60
    while not sensor.poke({}) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sensor.poke({}) is True


def test_sensor_never_reads_a_peer_hbase_does_not_run_as_caught_up(airflow_home, tmp_path, hbase_hot, hbase_cold,
                                                                    monkeypatch) -> None:
    """A peer written into hot's ZooKeeper behind HBase's back (as the old `peers sync` did on 2.x) has
    no replication source and no queue: "no queue" is not drained. The sensor asks the running HBase
    (hbase.signals.checked_status, as `drt hbase status` does) and stays down (issue 38 #1)."""
    import airflow  # noqa: F401 - its settings put plugins/ on sys.path
    from drt_airflow.hbase import HBaseReplicationCaughtUpSensor, run_status

    from dr_toolkit.hbase.encoding import Layout, PeerConfig, encode_peer, encode_state
    from dr_toolkit.topology import ZooKeeperEndpoint
    from dr_toolkit.zk.client import zk_session

    hot, cold = hbase_hot, hbase_cold
    monkeypatch.setenv("DRT_CONFIG", str(_sensor_topology(tmp_path, hot, cold)))
    lay = Layout(hot.znode_parent)
    ghost = "77"
    endpoint = ZooKeeperEndpoint(quorum=hot.zk_quorum, hbase_znode_parent=hot.znode_parent, **ZK_TIMEOUTS)
    with zk_session(endpoint, credentials=None) as z:
        z.create(lay.peer(ghost), encode_peer(PeerConfig(cold.cluster_key), "2.6"))
        z.create(lay.peer_state(ghost), encode_state(True, "2.6"))
        try:
            assert ghost not in hot.list_peers()  # HBase does not run it
            sensor = HBaseReplicationCaughtUpSensor(task_id="hbase_caught_up", peers=[ghost])
            assert sensor.poke({}) is False
            out = run_status(peers=[ghost])
            assert out["caught_up"] is False
            assert any(f"peer {ghost} is not a peer the running HBase master" in r for r in out["reasons"]), out
        finally:
            z.delete(lay.peer(ghost), recursive=True)
