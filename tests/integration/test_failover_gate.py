"""The gate on the real test services: lag injected in each component in turn → NO_GO naming
the reason; drained → GO; ZooKeeper or a broker stopped → NO_GO, never GO."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from dr_toolkit.failover.gate import check
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import add_verify_report, drt, write_topology

pytestmark = pytest.mark.integration

SERVER = "rs1.example,16020,1700000000000"
WAL_OLD = "rs1.example%2C16020%2C1700000000000.1700000000001"
WAL_NEW = "rs1.example%2C16020%2C1700000000000.1700000000002"


def have(mod: str) -> bool:
    try:
        return importlib.util.find_spec(mod) is not None
    except ModuleNotFoundError:
        return False


class World:
    """A topology with an HBase peer and a verified dataset, caught up; lag is injected per test."""

    def __init__(self, tmp_path: Path, zk_address: str) -> None:
        self.path = write_topology(tmp_path, zk=zk_address,
                                   hbase=[{"name": "hb", "peer_id": "1", "namespaces": ["default"]}],
                                   verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                            "key": ["id"]}])
        self.topo = load_topology(self.path)
        self.ledger = Ledger.open(self.topo.ledger.url)
        add_verify_report(self.ledger, "orders")
        from dr_toolkit.hbase.encoding import Layout
        from dr_toolkit.hbase.peers import add_peer
        from dr_toolkit.zk.client import connect

        ep = self.topo.hot.zookeeper
        assert ep is not None and self.topo.cold.zookeeper is not None
        self.zk = connect(ep)
        add_peer(self.zk, "1", self.topo.cold.zookeeper.cluster_key, znode_parent=ep.hbase_znode_parent)
        self.lay = Layout(ep.hbase_znode_parent)
        self.zk.ensure_path(f"{self.lay.rs}/{SERVER}")
        self.queue = f"{self.lay.queues}/{SERVER}/1"
        self.zk.ensure_path(self.queue)
        self.zk.create(f"{self.queue}/{WAL_NEW}", self._pos(100))

    @staticmethod
    def _pos(n: int) -> bytes:
        from dr_toolkit.hbase.encoding import encode_position

        return encode_position(n)

    def hbase_lag(self) -> None:
        """A whole WAL waits to be shipped (SizeOfLogQueue = 1), as HBase leaves it."""
        self.zk.create(f"{self.queue}/{WAL_OLD}", self._pos(10))

    def hbase_drain(self) -> None:
        self.zk.delete(f"{self.queue}/{WAL_OLD}")

    def close(self) -> None:
        self.zk.close()


@pytest.fixture
def world(tmp_path, zk_server):
    if not zk_server.running:
        zk_server.start()
    w = World(tmp_path, zk_server.address)
    yield w
    w.close()


def reasons(res) -> str:
    return " | ".join(res.reasons)


@pytest.mark.skipif(not have("dr_toolkit.hbase.status"), reason="HBase status capability not built")
def test_go_when_every_component_is_caught_up(world) -> None:
    res = check(world.topo, world.ledger)
    assert res.verdict == "GO", reasons(res)
    assert {(s.component, s.name) for s in res.signals} == {("hbase", "1"), ("verify", "orders")}
    assert res.recovery_point is not None and res.recovery_point <= time.time()


@pytest.mark.skipif(not have("dr_toolkit.hbase.status"), reason="HBase status capability not built")
def test_hbase_queue_with_wals_is_no_go_then_go_after_draining(world) -> None:
    world.hbase_lag()
    res = check(world.topo, world.ledger)
    assert res.verdict == "NO_GO"
    assert "hbase 1:" in reasons(res) and "SizeOfLogQueue=1" in reasons(res)
    world.hbase_drain()
    assert check(world.topo, world.ledger).verdict == "GO"


@pytest.mark.skipif(not have("dr_toolkit.hbase.status"), reason="HBase status capability not built")
def test_verification_with_bad_rows_is_no_go_then_go_after_a_clean_one(world) -> None:
    add_verify_report(world.ledger, "orders", bad=3)
    res = check(world.topo, world.ledger)
    assert res.verdict == "NO_GO" and "verify orders: last verification found 3 bad rows" in res.reasons
    add_verify_report(world.ledger, "orders", bad=0)
    assert check(world.topo, world.ledger).verdict == "GO"


@pytest.mark.skipif(not have("dr_toolkit.hbase.status"), reason="HBase status capability not built")
def test_zookeeper_stopped_is_no_go_with_the_reason_and_cli_exits_1(world, zk_server) -> None:
    zk_server.stop()
    try:
        res = check(world.topo, world.ledger, timeout_s=30)
        assert res.verdict == "NO_GO"
        hb = next(s for s in res.signals if s.component == "hbase")
        assert not hb.caught_up and "zookeeper" in (hb.reason or "").lower()
        assert any("fencing state unreadable" in r for r in res.reasons)
        r = drt("--json", "failover", "check", config=world.path)
        assert r.returncode == 1, r.stderr
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "NO_GO" and doc["reasons"]
    finally:
        zk_server.start()
    assert check(world.topo, world.ledger).verdict == "GO"


def test_empty_ledger_is_no_go_and_an_unreachable_ledger_exits_3(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address,
                          verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}])
    r = drt("--json", "failover", "check", config=path)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "NO_GO"
    assert doc["reasons"] == ["verify orders: no verification report in the ledger"]
    assert {"component", "name", "caught_up", "lag_s", "detail"} <= set(doc["signals"][0])
    r = drt("--json", "failover", "check", config=path,
            env={"DRT_LEDGER_URL": "postgresql+psycopg2://drt@127.0.0.1:1/drt"})
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "ledger database unreachable" in r.stderr
