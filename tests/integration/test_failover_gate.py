"""The gate on the real test services (a real HBase 2.6 pair hot → cold with WALs on real HDFS, and
ZooKeeper): lag or a fault injected per component → NO_GO naming the reason, with a recovery point
before the injected write; drained → GO; ZooKeeper stopped → NO_GO, never GO."""

from __future__ import annotations

import json
import time

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.gate import check
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import RealHBaseWorld, add_verify_report, drt, write_topology
from tests.support.procs import free_port

pytestmark = pytest.mark.integration

# The HBase signal trusts a region server's count of mutations without WAL only up to two metrics
# periods (hbase.regionserver.metrics.period, 1 s in the test clusters) before it read it (issue 38 #3):
# a drain proven now states a safe time that much earlier. Checks that need a safe time past a
# moment wait this long after it.
METRICS_LAG_S = 2.5


class World:
    """A topology with an HBase peer and a verified dataset, caught up; lag is injected per test."""

    def __init__(self, tmp_path, zk_address: str, clusters, *, tables: list[str] | None = None) -> None:
        self.path = write_topology(tmp_path, zk=zk_address,
                                   hbase=[{"name": "hb", "peer_id": "1", "namespaces": ["default"],
                                           "tables": tables or []}],
                                   verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                            "key": ["id"]}], hbase_clusters=clusters)
        self.topo = load_topology(self.path)
        self.ledger = open_ledger(self.topo, Access.from_env())
        add_verify_report(self.ledger, "orders")
        self.hot, self.cold = clusters
        self.hb = RealHBaseWorld(self.topo, *clusters)

    def check(self, **kw):
        return check(self.topo, self.ledger, access=Access.from_env(), **kw)

    def close(self) -> None:
        self.hb.close()


@pytest.fixture
def world(tmp_path, zk_server, hbase_clusters):
    if not zk_server.running:
        zk_server.start()
    w = World(tmp_path, zk_server.address, hbase_clusters)
    yield w
    w.close()


def reasons(res) -> str:
    return " | ".join(res.reasons)


def hbase(res):
    return next(s for s in res.signals if s.component == "hbase")


def test_go_when_every_component_is_caught_up_and_drain_is_proven_by_wal_lengths(world) -> None:
    t0 = time.time()
    time.sleep(METRICS_LAG_S)
    res = world.check()
    assert res.verdict == "GO", reasons(res)
    assert {(s.component, s.name) for s in res.signals} == {("hbase", "1"), ("verify", "orders")}
    hb = hbase(res)
    assert hb.safe_time is not None and hb.safe_time >= t0 and hb.basis.startswith("drain proven")
    assert hb.detail["basis"] == "wal-length" and hb.detail["proven"] is True
    assert res.recovery_point is not None and res.recovery_point <= time.time()
    doc = res.to_json()
    assert doc["recovery_point"] and all(s["safe_time"] and s["basis"] for s in doc["signals"])


def test_wal_position_short_of_the_wal_length_is_no_go_with_a_recovery_point_before_the_write(world) -> None:
    proven = hbase(world.check())
    assert proven.caught_up
    written_at = time.time()
    world.hb.lag(10)  # written on hot, not shipped (the open WAL: its NameNode length is still 0)
    res = world.check()
    assert res.verdict == "NO_GO"
    assert "hbase 1:" in reasons(res) and "bytes left to ship" in reasons(res)
    hb = hbase(res)
    assert hb.safe_time is not None and hb.safe_time < written_at  # the last proven drain, from the ledger
    assert "last proven drain" in hb.basis
    assert res.recovery_point is not None and res.recovery_point < written_at
    world.hb.drain()
    time.sleep(METRICS_LAG_S)  # the drain proven next states a safe time two metrics periods before its read
    res = world.check()
    assert res.verdict == "GO", reasons(res)
    assert hbase(res).safe_time > written_at


def test_a_whole_wal_waiting_is_no_go_then_go_after_draining(world) -> None:
    world.hb.lag_whole_wal()
    res = world.check()
    assert res.verdict == "NO_GO" and "hbase 1:" in reasons(res)
    world.hb.drain()
    assert world.check().verdict == "GO"


def test_queue_size_alone_never_gives_go_after_the_fence(world) -> None:
    """Without WAL files nothing proves drain: before the fence the last proven drain counts
    (within the lag bound); after the fence only a drain proven after it does."""
    from dr_toolkit.zk.fencing import open_fence

    assert world.check().verdict == "GO"  # proven now: recorded in the ledger
    # the WAL lengths cannot be read any more: the policy's rootdir on a NameNode that is not there
    good = world.path.read_text()
    url = world.hot.webhdfs_url
    dead = f"webhdfs://127.0.0.1:{free_port()}"
    world.path.write_text(good.replace(url, dead))
    world.topo = load_topology(world.path)
    try:
        res = world.check()
        hb = hbase(res)
        assert hb.detail["basis"] == "queue-size" and "queue size only" in hb.basis
        assert res.verdict == "NO_GO" and "cannot read table descriptors" in reasons(res)
        assert hb.safe_time is not None  # the last proven drain (ledger)
        with open_fence(world.topo, access=Access.from_env()) as fence:
            fence.bump(fenced_cluster="hot", by="test")
        res = world.check()
        assert res.verdict == "NO_GO" and "before the fence" in reasons(res)
    finally:
        world.path.write_text(good)
        world.topo = load_topology(world.path)
    add_verify_report(world.ledger, "orders")  # a verification that read its data after the fence
    time.sleep(METRICS_LAG_S)
    res = world.check()
    assert res.verdict == "GO", reasons(res)  # proven again, after the fence
    assert hbase(res).safe_time >= res.fenced_at


def test_a_disabled_peer_is_no_go_even_when_its_queues_are_empty(world) -> None:
    world.hot.disable_peer("1")  # HBase's Admin API (a state written into ZooKeeper is ignored by HBase 2.x)
    res = world.check()
    assert res.verdict == "NO_GO" and "peer 1 is DISABLED" in reasons(res)
    world.hot.enable_peer("1")
    assert world.check().verdict == "GO"


def test_a_missing_peer_is_no_go_without_a_safe_time(world) -> None:
    world.hot.remove_peer("1")  # re-added by the fixture
    res = world.check()
    assert res.verdict == "NO_GO" and "peer 1 is not configured" in reasons(res)
    assert hbase(res).safe_time is None and res.recovery_point is None


@pytest.mark.parametrize("filters,expected", [
    ({"replicate_all": False, "table_cfs": "shop:payments:d"}, "does not ship protected table default:orders"),
    ({"replicate_all": False, "namespaces": "shop"}, "does not ship namespace default"),
    ({"replicate_all": True, "exclude_namespaces": "default"}, "does not ship namespace default"),
    ({"replicate_all": True, "exclude_table_cfs": "default:orders:d"},
     "does not ship column families d of protected table default:orders"),
])
def test_a_peer_whose_filters_leave_a_protected_table_out_is_no_go_and_proves_nothing(world, filters, expected
                                                                                     ) -> None:
    """Issue 20 #1 and #10: peer 1's filters (HBase 2.x: replicate_all, namespaces, table-CFs, excludes)
    leave out a table of the protected namespace: its writes never reach cold, so no safe time — and a
    drained queue of that peer is not recorded as a proven drain (it would be the HBase safe time of
    later checks)."""
    from dr_toolkit.hbase.signals import last_proven

    before = last_proven(world.ledger, "1")
    world.hot.remove_peer("1")
    try:
        world.hot.add_peer_filtered("1", world.cold.cluster_key, **filters)
        world.hot.enable_peer("1")
        res = world.check()
        assert res.verdict == "NO_GO" and expected in reasons(res), reasons(res)
        assert hbase(res).safe_time is None and res.recovery_point is None
        assert last_proven(world.ledger, "1") == before  # nothing recorded from this peer's drained queues
    finally:
        world.hot.remove_peer("1")  # the fixture adds the unfiltered peer 1 back


def test_a_protected_table_without_replication_scope_is_no_go(world) -> None:
    world.hot.create_table("default:audit", "a,b", 1)
    try:
        world.hot.alter_scope("default:audit", "b", 0)
        res = world.check()
        assert res.verdict == "NO_GO"
        assert "table default:audit: column families b have no REPLICATION_SCOPE" in reasons(res)
        assert hbase(res).safe_time is None  # its writes never reach cold
        world.hot.alter_scope("default:audit", "b", 1)
        world.hb.drain()  # altering reopened the table's regions: their open/close markers go through the WAL
        res = world.check()
        assert res.verdict == "GO", reasons(res)
    finally:
        world.hot.drop_table("default:audit")


def test_verification_with_bad_rows_is_no_go_then_go_after_a_clean_one(world) -> None:
    add_verify_report(world.ledger, "orders", bad=3)
    res = world.check()
    assert res.verdict == "NO_GO" and "verify orders: last verification found 3 bad rows" in res.reasons
    add_verify_report(world.ledger, "orders", bad=0)
    res = world.check()
    assert res.verdict == "GO"
    v = next(s for s in res.signals if s.component == "verify")
    assert v.basis.startswith("report ") and v.safe_time is not None


def test_zookeeper_stopped_is_no_go_with_the_reason_and_cli_exits_1(tmp_path, zk_server) -> None:
    """The hot ZooKeeper (queues, peers, fencing) down: NO_GO naming it, never GO. (HBase's own
    ZooKeeper runs inside the cluster's JVM: the stand-alone test ZooKeeper plays the hot one here.)"""
    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}],
                          verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}])
    topo = load_topology(path)
    ledger = open_ledger(topo, Access.from_env())
    add_verify_report(ledger, "orders")
    zk_server.stop()
    try:
        res = check(topo, ledger, timeout_s=30, access=Access.from_env())
        assert res.verdict == "NO_GO" and res.recovery_point is None
        hb = hbase(res)
        assert not hb.caught_up and "zookeeper" in (hb.reason or "").lower()
        assert any("fencing state unreadable" in r for r in res.reasons)
        r = drt("--json", "failover", "check", config=path)
        assert r.returncode == 1, r.stderr
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "NO_GO" and doc["reasons"]
    finally:
        zk_server.start()


def test_empty_ledger_is_no_go_and_an_unreachable_ledger_exits_3(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address,
                          verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}])
    r = drt("--json", "failover", "check", config=path)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "NO_GO" and doc["recovery_point"] is None
    assert doc["reasons"] == ["verify orders: no verification report in the ledger"]
    assert {"component", "name", "caught_up", "lag_s", "safe_time", "basis", "detail"} <= set(doc["signals"][0])
    r = drt("--json", "failover", "check", config=path,
            env={"DRT_LEDGER_URL": "postgresql+psycopg2://drt@127.0.0.1:1/drt"})
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_concurrent_writes_shipping_and_rolls_never_give_a_safe_time_past_an_unshipped_write(world) -> None:
    """The proof under a live writer: rows are put on the real hot cluster (its WALs rolling now and
    then) while HBase ships them, and the gate checks over and over. Every row acknowledged before a
    check's HBase safe time must already be on cold when that check returns."""
    import threading

    hot, cold = world.hot, world.cold
    base = hot.count()
    cold.wait_rows(base)
    # (time, rows acknowledged past base): none before the test — a safe time may be older than its
    # start (the HBase signal states one two metrics periods before it read the WAL-less count)
    acked: list[tuple[float, int]] = [(0.0, 0)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        total = i = 0
        try:
            while not stop.is_set() and i < 400:
                world.hb.put(10)
                total += 10
                i += 1
                acked.append((time.time(), total))
                if i % 25 == 0:
                    hot.roll_wal()
                stop.wait(0.03 * (i % 5))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    checks = safe = 0
    try:
        while t.is_alive() and checks < 40:
            res = world.check()
            on_cold = cold.count()
            checks += 1
            hb = hbase(res)
            if hb.safe_time is None:
                continue
            safe += 1
            before = max(n for at, n in list(acked) if at < hb.safe_time)
            assert on_cold >= base + before, (f"safe time {hb.safe_time} ({hb.basis}) is after rows not on cold: "
                                              f"{base + before} acknowledged, {on_cold} on cold")
    finally:
        stop.set()
        t.join(timeout=60)
    assert not errors, errors
    assert checks >= 5 and safe
    world.hb.drain()
    res = world.check()
    assert hbase(res).caught_up, reasons(res)
