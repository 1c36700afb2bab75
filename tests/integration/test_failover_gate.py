"""The gate on the real test services (ZooKeeper, the region-server simulator writing real WAL files):
lag or a fault injected per component → NO_GO naming the reason, with a recovery point before the
injected write; drained → GO; ZooKeeper stopped → NO_GO, never GO."""

from __future__ import annotations

import json
import time

import pytest

from dr_toolkit.failover.gate import check
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import HBaseWorld, add_verify_report, drt, write_topology

pytestmark = pytest.mark.integration


class World:
    """A topology with an HBase peer and a verified dataset, caught up; lag is injected per test."""

    def __init__(self, tmp_path, zk_address: str, *, tables: list[str] | None = None) -> None:
        self.path = write_topology(tmp_path, zk=zk_address,
                                   hbase=[{"name": "hb", "peer_id": "1", "namespaces": ["default"],
                                           "tables": tables or []}],
                                   verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                            "key": ["id"]}])
        self.topo = load_topology(self.path)
        self.ledger = open_ledger(self.topo)
        add_verify_report(self.ledger, "orders")
        self.hb = HBaseWorld(self.topo)

    def check(self, **kw):
        return check(self.topo, self.ledger, **kw)

    def close(self) -> None:
        self.hb.close()


@pytest.fixture
def world(tmp_path, zk_server):
    if not zk_server.running:
        zk_server.start()
    w = World(tmp_path, zk_server.address)
    yield w
    w.close()


def reasons(res) -> str:
    return " | ".join(res.reasons)


def hbase(res):
    return next(s for s in res.signals if s.component == "hbase")


def test_go_when_every_component_is_caught_up_and_drain_is_proven_by_wal_lengths(world) -> None:
    t0 = time.time()
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
    world.hb.lag(123)  # written on hot, not shipped: the WAL file is 123 bytes longer than the position
    res = world.check()
    assert res.verdict == "NO_GO"
    assert "hbase 1:" in reasons(res) and "123 bytes left to ship" in reasons(res)
    hb = hbase(res)
    assert hb.safe_time is not None and hb.safe_time < written_at  # the last proven drain, from the ledger
    assert "last proven drain" in hb.basis
    assert res.recovery_point is not None and res.recovery_point < written_at
    world.hb.drain()
    res = world.check()
    assert res.verdict == "GO", reasons(res)
    assert hbase(res).safe_time > written_at


def test_a_whole_wal_waiting_is_no_go_then_go_after_draining(world) -> None:
    world.hb.lag_whole_wal()
    res = world.check()
    assert res.verdict == "NO_GO" and "SizeOfLogQueue=1" in reasons(res)
    world.hb.drain()
    assert world.check().verdict == "GO"


def test_queue_size_alone_never_gives_go_after_the_fence(world) -> None:
    """Without WAL files nothing proves drain: before the fence the last proven drain counts
    (within the lag bound); after the fence only a drain proven after it does."""
    from dr_toolkit.zk.fencing import open_fence

    assert world.check().verdict == "GO"  # proven now: recorded in the ledger
    wals = world.hb.rootdir / "WALs"
    hidden = world.hb.rootdir.parent / "WALs-hidden"
    wals.rename(hidden)  # the WAL lengths cannot be read any more
    try:
        res = world.check()
        hb = hbase(res)
        assert hb.detail["basis"] == "queue-size" and "queue size only" in hb.basis
        assert res.verdict == "GO", reasons(res)  # before the fence: last proven drain within max_lag_s
        with open_fence(world.topo) as fence:
            fence.bump(fenced_cluster="hot", by="test")
        res = world.check()
        assert res.verdict == "NO_GO" and "before the fence" in reasons(res)
    finally:
        hidden.rename(wals)
    add_verify_report(world.ledger, "orders")  # a verification that read its data after the fence
    res = world.check()
    assert res.verdict == "GO", reasons(res)  # proven again, after the fence
    assert hbase(res).safe_time >= res.fenced_at


def test_a_disabled_peer_is_no_go_even_when_its_queues_are_empty(world) -> None:
    from dr_toolkit.hbase.peers import disable_peer, enable_peer

    with world.hb.zk() as zk:
        disable_peer(zk, "1", znode_parent=world.hb.parent)
    res = world.check()
    assert res.verdict == "NO_GO" and "peer 1 is DISABLED" in reasons(res)
    with world.hb.zk() as zk:
        enable_peer(zk, "1", znode_parent=world.hb.parent)
    assert world.check().verdict == "GO"


def test_a_missing_peer_is_no_go_without_a_safe_time(world) -> None:
    from dr_toolkit.hbase.peers import remove_peer

    with world.hb.zk() as zk:
        remove_peer(zk, "1", znode_parent=world.hb.parent)
    res = world.check()
    assert res.verdict == "NO_GO" and "peer 1 is not configured" in reasons(res)
    assert hbase(res).safe_time is None and res.recovery_point is None


def test_a_protected_table_without_replication_scope_is_no_go(world) -> None:
    world.hb.sim.create_table("default", "audit", {"a": 1, "b": 0})
    res = world.check()
    assert res.verdict == "NO_GO"
    assert "table default:audit: column families b have no REPLICATION_SCOPE" in reasons(res)
    assert hbase(res).safe_time is None  # its writes never reach cold
    world.hb.sim.create_table("default", "audit", {"a": 1, "b": 1})
    assert world.check().verdict == "GO"


def test_verification_with_bad_rows_is_no_go_then_go_after_a_clean_one(world) -> None:
    add_verify_report(world.ledger, "orders", bad=3)
    res = world.check()
    assert res.verdict == "NO_GO" and "verify orders: last verification found 3 bad rows" in res.reasons
    add_verify_report(world.ledger, "orders", bad=0)
    res = world.check()
    assert res.verdict == "GO"
    v = next(s for s in res.signals if s.component == "verify")
    assert v.basis.startswith("report ") and v.safe_time is not None


def test_zookeeper_stopped_is_no_go_with_the_reason_and_cli_exits_1(world, zk_server) -> None:
    zk_server.stop()
    try:
        res = world.check(timeout_s=30)
        assert res.verdict == "NO_GO" and res.recovery_point is None
        hb = hbase(res)
        assert not hb.caught_up and "zookeeper" in (hb.reason or "").lower()
        assert any("fencing state unreadable" in r for r in res.reasons)
        r = drt("--json", "failover", "check", config=world.path)
        assert r.returncode == 1, r.stderr
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "NO_GO" and doc["reasons"]
    finally:
        zk_server.start()
    world.hb.close()
    world.hb = HBaseWorld(world.topo)  # the simulator's sessions died with the server
    assert world.check().verdict == "GO"


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
    """The proof under a live writer: a region server appends to its WAL (rolling now and then) while
    its shipper advances the queue positions, and the gate checks over and over. Whatever the
    interleaving, every write acknowledged before a check's HBase safe time must have been shipped by
    the end of that check. Reading the lengths before the positions, or taking the safe time after
    reading them, breaks this under load (the write lands between the two reads)."""
    import random
    import threading

    from dr_toolkit.hbase.encoding import decode_position

    sim, rs = world.hb.sim, world.hb.rs
    qpath = f"{rs.znode}/1"
    rnd = random.Random(20261123)
    acked: list[tuple[float, str, int]] = []  # (acknowledged at, wal, end offset in that wal)
    lock = threading.Lock()  # the shipper ships and records what it shipped under this lock
    frontier: dict[str, int] = {}  # per WAL: bytes shipped (a WAL gone from the queue: all of it)
    stop = threading.Event()
    errors: list[BaseException] = []

    def record_frontier() -> None:
        queued = set(sim.admin.get_children(qpath))
        for wal, length in list(sim.lengths.items()):
            if wal in queued:
                frontier[wal] = decode_position(sim.admin.get(f"{qpath}/{wal}")[0])
            elif wal in frontier or length == 0:
                frontier[wal] = length  # rolled and fully shipped: the shipper removed it from the queue

    def writer() -> None:
        try:
            for i in range(800):
                if stop.is_set():
                    return
                if i % 60 == 59:
                    with lock:  # a roll and the queue's new entry are one step for the shipper too
                        rs.roll()
                rs.write(rnd.randint(1, 300))
                wal = rs.current_wal
                assert wal is not None
                acked.append((time.time(), wal, sim.lengths[wal]))
                if rnd.random() < 0.3:  # bursts of writes, then quiet spells the shipper can drain in
                    time.sleep(rnd.random() * 0.05)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    def shipper() -> None:
        try:
            while not stop.is_set():
                with lock:
                    rs.ship("1", budget=rnd.randint(1, 1000))
                    record_frontier()
                time.sleep(rnd.random() * 0.002)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    with lock:
        record_frontier()
    threads = [threading.Thread(target=writer, daemon=True), threading.Thread(target=shipper, daemon=True)]
    for t in threads:
        t.start()
    checks = 0
    try:
        while threads[0].is_alive() and checks < 80:
            res = world.check()
            with lock:
                shipped = dict(frontier)
                writes = list(acked)
            checks += 1
            hb = hbase(res)
            if hb.safe_time is None:
                continue
            late = [(t, wal, end) for t, wal, end in writes if t < hb.safe_time and shipped.get(wal, 0) < end]
            assert not late, (f"safe time {hb.safe_time} ({hb.basis}) is after {len(late)} write(s) not shipped, "
                              f"first: {late[0]} shipped {shipped.get(late[0][1])}")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors
    assert checks >= 5
    rs.drain()
    res = world.check()
    assert hbase(res).caught_up, reasons(res)
