"""Issue 38 #1-#3 on the real HBase 2.6 pair: the HBase signal reads what the running HBase does —
the peers its active master holds (``/master-status``), the replication sources its live region
servers run and their count of mutations written without a WAL (``/jmx``), each table's DURABILITY —
never a peer value in ZooKeeper, and never an empty set of queues as proof of drain.

Each test first brings the replication queues to a state the old check called "drain proven"
(positions >= WAL lengths), so the NO_GO it asserts comes from the live evidence alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.gate import check
from dr_toolkit.hbase.encoding import Layout, PeerConfig, encode_peer, encode_state
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import RealHBaseWorld, add_verify_report, drt, write_topology

pytestmark = pytest.mark.integration

_ROW = [40_000_000]


def _rows(n: int) -> int:
    first = _ROW[0]
    _ROW[0] += n
    return first


class World:
    """A topology protecting ``tables`` through peer 1 on the session's real pair, drained first."""

    def __init__(self, tmp_path: Any, clusters: tuple[Any, Any], tables: list[str]) -> None:
        self.hot, self.cold = clusters
        self.path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1", "tables": tables}],
                                   verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                            "key": ["id"]}], hbase_clusters=clusters)
        self.topo = load_topology(self.path)
        self.ledger = open_ledger(self.topo, Access.from_env())
        add_verify_report(self.ledger, "orders")
        self.hb = RealHBaseWorld(self.topo, *clusters)
        self.lay = Layout(self.hot.znode_parent)

    def check(self) -> Any:
        return check(self.topo, self.ledger, access=Access.from_env())

    def hbase(self, res: Any) -> Any:
        return next(s for s in res.signals if s.component == "hbase")

    def queues_proven(self, timeout: float = 120) -> None:
        """Wait until the replication queues alone say "drain proven" (what the old check trusted)."""
        from dr_toolkit.hbase.signals import hot_fs
        from dr_toolkit.hbase.status import fs_wal_length, replication_status

        fs, root = hot_fs(self.topo, Access.from_env(), self.topo.policies.hbase[0].hbase_rootdir)
        deadline = time.monotonic() + timeout
        with self.hb.zk() as zk:
            while not replication_status(zk, self.hot.znode_parent, peers=["1"],
                                         wal_length=fs_wal_length(fs, root)).proven:
                assert time.monotonic() < deadline, "the queues never read as drained"
                time.sleep(0.3)

    def wait_no_source(self, peer_id: str, timeout: float = 60) -> None:
        """Until the region server has closed its replication source for the peer (asynchronously)."""
        from dr_toolkit.hbase.live import live_region_servers, replication_sources

        deadline = time.monotonic() + timeout
        with self.hb.zk() as zk:
            while any(peer_id in replication_sources(rs) for rs in live_region_servers(zk, self.hot.znode_parent)):
                assert time.monotonic() < deadline, f"the region server kept a source for peer {peer_id}"
                time.sleep(0.3)

    def without_wal(self) -> int:
        """The live region server's own mutationsWithoutWALCount (the reader the gate uses)."""
        from dr_toolkit.hbase.live import live_region_servers, server_counters

        with self.hb.zk() as zk:
            (rs,) = live_region_servers(zk, self.hot.znode_parent)
        return server_counters(rs).mutations_without_wal

    def close(self) -> None:
        self.hb.close()


@pytest.fixture
def world_for(tmp_path: Any, hbase_clusters: tuple[Any, Any]) -> Iterator[Any]:
    made: list[World] = []

    def make(tables: list[str]) -> World:
        w = World(tmp_path, hbase_clusters, tables)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


def _reasons(res: Any) -> str:
    return " | ".join(res.reasons)


def test_a_peer_only_in_zookeeper_is_no_go_and_peers_sync_never_writes_one(world_for) -> None:
    """#1: `drt hbase peers sync` without clusters.<hot>.hbase_shell refuses (exit 2, one line, nothing
    written). A peer that exists only in ZooKeeper (as the old sync wrote it) has no replication
    source and no queue — "0 queues" was read as drained: GO with 0 of 30 rows on cold. Now NO_GO,
    no safe time, naming the region server that runs no source for it."""
    w = world_for(["default:orders"])
    hot, cold = w.hot, w.cold
    hot.remove_peer("1")  # HBase's own removal: no peer, no source, no queue (the fixture adds it back)
    w.wait_no_source("1")
    with w.hb.zk() as zk:
        try:
            r = drt("hbase", "peers", "sync", config=w.path)
            assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
            lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
            assert len(lines) == 1 and "hbase_shell" in lines[0] and "never writes a peer into ZooKeeper" in lines[0]
            assert "Traceback" not in r.stderr
            assert zk.get_many([w.lay.peer("1")])[0] is None  # nothing written
            # what the old `peers sync` wrote: the peer and its state, in ZooKeeper only
            zk.create(w.lay.peer("1"), encode_peer(PeerConfig(cold.cluster_key), "2.6"))
            zk.create(w.lay.peer_state("1"), encode_state(True, "2.6"))
            assert "1" not in hot.list_peers()  # HBase does not run it
            first = _rows(30)
            hot.put(first, 30)
            w.queues_proven()  # no queue at all for peer 1: the old "drain proven"
            res = w.check()
            hb = w.hbase(res)
            assert res.verdict == "NO_GO", _reasons(res)
            assert "peer 1 is not configured on the hot cluster (the running HBase master" in _reasons(res)
            assert "ZooKeeper has a peer of that id, which HBase never loaded" in _reasons(res)
            server = hot.region_servers[0].server_name
            assert f"region server {server} runs no replication source for peer 1" in _reasons(res)
            assert hb.safe_time is None and res.recovery_point is None
            assert cold.count_range(first, 30) == 0  # what a GO would have promoted without
            # `drt hbase status` no longer reads "no queue" as caught up either
            r = drt("--json", "hbase", "status", "--peer", "1", config=w.path)
            doc = json.loads(r.stdout)
            assert r.returncode == 1 and doc["caught_up"] is False, (r.returncode, r.stdout, r.stderr)
            assert any("peer 1 is not a peer the running HBase master" in x for x in doc["reasons"]), doc["reasons"]
        finally:
            zk.delete(w.lay.peer("1"), recursive=True)  # HBase's own peer 1 comes back through its Admin API


def test_a_peer_value_rewritten_in_zookeeper_is_not_what_hbase_ships(world_for) -> None:
    """#2: the running HBase's peer 1 leaves the protected table's family out; ZooKeeper's value (rewritten
    outside HBase, as the old `peers sync` did) ships everything. The gate read ZooKeeper: GO with 0
    of 40 rows on cold. Now the peer is read from the running master: NO_GO, no safe time."""
    w = world_for(["default:orders"])
    hot, cold = w.hot, w.cold
    hot.remove_peer("1")
    try:
        hot.add_peer_filtered("1", cold.cluster_key, replicate_all=True, exclude_table_cfs="default:orders:d")
        hot.enable_peer("1")
        with w.hb.zk() as zk:
            zk.set(w.lay.peer("1"), encode_peer(PeerConfig(cold.cluster_key), "2.6"))  # replicate_all, no exclusion
        first = _rows(40)
        hot.put(first, 40)
        w.queues_proven()  # the source read past the rows (filtered out): the old "drain proven"
        res = w.check()
        hb = w.hbase(res)
        assert res.verdict == "NO_GO", _reasons(res)
        assert "peer 1 does not ship column families d of protected table default:orders" in _reasons(res)
        assert "peer 1: ZooKeeper holds another value" in _reasons(res)
        assert hb.safe_time is None and res.recovery_point is None
        assert cold.count_range(first, 40) == 0
    finally:
        hot.remove_peer("1")  # through HBase (its znode goes too); the fixture adds the plain peer 1 back


def test_a_table_whose_durability_is_skip_wal_is_no_go(world_for) -> None:
    """#3: DURABILITY => SKIP_WAL in the protected table's descriptor: its writes never enter the WAL
    that replication ships — NO_GO naming the table, no safe time (no write needed to see it)."""
    table = "default:nowal"
    w = world_for(["default:orders", table])
    for c in (w.hot, w.cold):
        c.create_table(table, "d", 1)
    try:
        w.hot.set_durability(table, "SKIP_WAL")
        w.hb.drain()  # altering the table reopened its region: the markers went through the WAL
        w.queues_proven()
        res = w.check()
        assert res.verdict == "NO_GO", _reasons(res)
        assert f"table {table}: DURABILITY => SKIP_WAL" in _reasons(res)
        assert w.hbase(res).safe_time is None
        w.hot.set_durability(table, "USE_DEFAULT")
        w.hb.drain()
        res = w.check()
        assert res.verdict == "GO", _reasons(res)
    finally:
        for c in (w.hot, w.cold):
            c.drop_table(table)


def test_puts_without_wal_are_no_go_naming_the_region_server(world_for) -> None:
    """#3: 25 puts with Durability.SKIP_WAL into the protected table: counted by the region server
    (mutationsWithoutWALCount), never replicated. The queues read as drained (there is nothing in the
    WAL) and the old check said GO with 0 of 25 rows on cold; now NO_GO naming the server, no safe
    time. A check right after the puts, before the region server's metrics have summed them, never
    states a safe time past them (the count is trusted only up to two metrics periods before it was
    read). The count is the server's since it started: the region server is restarted to reset it."""
    w = world_for(["default:orders"])
    hot, cold = w.hot, w.cold
    assert w.without_wal() == 0
    first = _rows(25)
    try:
        written_at = time.time()
        hot.put_durability(first, 25, "SKIP_WAL")
        early = w.hbase(w.check())
        assert early.safe_time is None or early.safe_time < written_at, (early.safe_time, written_at, early.basis)
        deadline = time.monotonic() + 60
        while w.without_wal() < 25:
            assert time.monotonic() < deadline, "the region server never counted the puts without WAL"
            time.sleep(0.5)
        w.queues_proven()
        res = w.check()
        hb = w.hbase(res)
        server = hot.region_servers[0].server_name
        assert res.verdict == "NO_GO", _reasons(res)
        assert f"region server {server} took 25 mutation(s) without WAL" in _reasons(res)
        assert hb.safe_time is None and res.recovery_point is None
        assert cold.count_range(first, 25) == 0
    finally:
        for i in range(first, first + 25):  # through the WAL: cold and hot hold the same rows again
            hot.delete("default:orders", f"row-{i:010d}")
        hot.kill_region_server(0)  # a fresh region server: its counts start at 0
        hot.start_region_server()
    w.hb.drain()
    assert w.without_wal() == 0
    res = w.check()
    assert res.verdict == "GO", _reasons(res)


@pytest.fixture
def own_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """A pair of its own: a region server's Bulkload count lives in HBase's JVM-wide metric registry, so
    in the test JVM a restarted region server inherits it (a deployed one starts a JVM of its own)."""
    from drt_servers.hbase import hbase_pair

    hot, cold = hbase_pair(tmp_path_factory.mktemp("hbase-bulk"))
    yield hot, cold
    for c in (hot, cold):
        c.stop()


def test_a_bulk_load_without_bulk_load_replication_is_no_go(tmp_path, own_pair) -> None:
    """#3: 20 rows bulk-loaded (an HFile handed to the region server: no WAL edit carries them) while
    hbase.replication.bulkload.enabled is off on the region server (the test clusters' setting, HBase's
    default): never replicated; the queues read as drained and the old check said GO with 0 of 20 rows
    on cold. Now NO_GO naming the server (its Bulkload count and its own /conf), no safe time."""
    from dr_toolkit.hbase.live import live_region_servers, server_counters

    w = World(tmp_path, own_pair, ["default:orders"])
    hot, cold = w.hot, w.cold

    def counters() -> Any:
        with w.hb.zk() as zk:
            (rs,) = live_region_servers(zk, hot.znode_parent)
        return server_counters(rs)

    assert counters().bulk_loads == 0 and counters().bulkload_replication is False
    first = _rows(20)
    try:
        hot.bulkload(first, 20)
        assert hot.count_range(first, 20) == 20
        deadline = time.monotonic() + 60
        while counters().bulk_loads < 1:
            assert time.monotonic() < deadline, "the region server never counted the bulk load"
            time.sleep(0.5)
        w.queues_proven()
        res = w.check()
        server = hot.region_servers[0].server_name
        assert res.verdict == "NO_GO", _reasons(res)
        assert f"region server {server} took 1 bulk load(s) since it started and " \
               "hbase.replication.bulkload.enabled is off" in _reasons(res)
        assert w.hbase(res).safe_time is None
        assert cold.count_range(first, 20) == 0
    finally:
        w.close()
