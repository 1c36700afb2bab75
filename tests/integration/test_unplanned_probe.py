"""Issue 38 #7: "unplanned is refused while hot answers" probes every hot component the topology
names — not only hot's ZooKeeper and Kafka.

A hot cluster with HDFS only (the real HA pair of NameNodes, reached through links the test can
cut; no hot ZooKeeper, no hot Kafka): while either NameNode answers — even the standby — the
unplanned run is refused at ``fence_hot`` in one line naming what answered, and nothing is fenced;
once the links are cut (the site is gone) the same run fences. An HBase whose root directory lives
on a NameNode that still answers is refused the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.runbook import Runbook
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.client import connect
from dr_toolkit.zk.fencing import Fence
from tests.support.fixtures_failover import drt, write_topology
from tests.support.netlink import TcpLink

pytestmark = pytest.mark.integration
ACCESS = Access.from_env()


def _fence(topo: Any) -> dict[str, Any]:
    ep = topo.cold.zookeeper
    with connect(ep, credentials=None) as zk:
        return Fence(zk, ep.dr_root).snapshot()


def _links(cluster: Any) -> list[TcpLink]:
    return [TcpLink("127.0.0.1", int(u.rsplit(":", 1)[1])).start() for u in cluster.namenodes]


def test_unplanned_is_refused_while_a_hot_namenode_answers(tmp_path: Path, zk_server: Any, hdfs_hot: Any,
                                                             hdfs_cold: Any, hot_dir: Any, cold_dir: Any) -> None:
    if not zk_server.running:
        zk_server.start()
    links = _links(hdfs_hot)
    try:
        hot_nns = [f"http://{link.address}" for link in links]
        path = write_topology(
            tmp_path, zk=zk_server.address,
            hdfs=[{"name": "wh", "source": f"hdfs://hot{hot_dir.p('/data')}",
                   "targets": [f"hdfs://cold{cold_dir.p('/data')}"]}],
            hot_extra={"zookeeper": None, "hdfs": {"namenodes": hot_nns, "user": "hdfs"}},
            cold_extra={"hdfs": {"namenodes": hdfs_cold.namenodes, "user": "hdfs"}})
        topo = load_topology(path)
        assert topo.hot.zookeeper is None and topo.hot.kafka is None  # HDFS is all hot has
        ledger = open_ledger(topo, ACCESS)
        out = Runbook.start(topo, ledger, access=ACCESS, reason="hot still up", execute=True, unplanned=True).run()
        assert out["status"] == "failed"
        msg = out["steps"][0]["message"]
        assert out["steps"][0]["name"] == "fence_hot" and "the hot cluster still answers" in msg, msg
        for nn in hot_nns:  # both NameNodes of the HA pair, the standby included
            assert f"hdfs NameNode {nn}" in msg, msg
        assert _fence(topo)["fencing"]["epoch"] == 0 and _fence(topo)["active"] is None
        r = drt("failover", "run", "--execute", "--unplanned", "--reason", "cli", "--yes-i-am-sure",
                "--accept-data-loss", config=path)
        assert r.returncode == 1 and "the hot cluster still answers (hdfs NameNode" in r.stdout, (r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and _fence(topo)["fencing"]["epoch"] == 0
        links[1].cut()  # the active NameNode is gone; the standby still answers
        out = Runbook.start(topo, ledger, access=ACCESS, reason="half gone", execute=True, unplanned=True).run()
        assert out["status"] == "failed" and f"hdfs NameNode {hot_nns[0]}" in out["steps"][0]["message"]
        assert hot_nns[1] not in out["steps"][0]["message"] and _fence(topo)["fencing"]["epoch"] == 0
        links[0].cut()  # the whole site is gone
        rb = Runbook.start(topo, ledger, access=ACCESS, reason="site lost", execute=True, unplanned=True)
        out = rb.run(until="fence_hot")
        assert out["steps"][0]["status"] == "done", out["steps"][0]
        assert _fence(topo)["fencing"]["epoch"] == 1 and _fence(topo)["fencing"]["fenced_cluster"] == "hot"
    finally:
        for link in links:
            link.cut()


def test_unplanned_is_refused_while_the_hbase_root_directory_namenode_answers(
        tmp_path: Path, zk_server: Any, hdfs_hot: Any) -> None:
    """HBase named by its peer and root directory only (its ZooKeeper unreachable to the toolkit):
    the NameNode holding hbase.rootdir answering means hot's HBase storage is up."""
    if not zk_server.running:
        zk_server.start()
    link = TcpLink("127.0.0.1", int(hdfs_hot.namenodes[1].rsplit(":", 1)[1])).start()
    try:
        path = write_topology(
            tmp_path, zk=zk_server.address,
            hbase=[{"name": "hb", "peer_id": "1", "hbase_rootdir": f"webhdfs://{link.address}/hbase"}],
            hot_extra={"zookeeper": None})
        topo = load_topology(path)
        ledger = open_ledger(topo, ACCESS)
        out = Runbook.start(topo, ledger, access=ACCESS, reason="hbase up", execute=True, unplanned=True).run()
        msg = out["steps"][0]["message"]
        assert out["status"] == "failed" and "hbase root directory's NameNode (peer 1)" in msg, msg
        assert _fence(topo)["fencing"]["epoch"] == 0
    finally:
        link.cut()
