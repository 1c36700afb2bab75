"""Replication status and drain proofs read from a real HBase 2.6 pair (hot → cold, peer 1):
the queues in the hot cluster's ZooKeeper, the WALs on its HDFS (WebHDFS), its region server's /jmx."""

from __future__ import annotations

import threading
import time

import pytest

from dr_toolkit.hbase.status import fs_wal_length, replication_status

pytestmark = pytest.mark.integration


def status(zk, hot, fs, **kw):
    return replication_status(zk, hot.znode_parent, wal_length=fs_wal_length(fs, hot.rootdir), **kw)


def wait_proven(zk, hot, fs, timeout: float = 120):
    deadline = time.monotonic() + timeout
    st = status(zk, hot, fs)
    while not st.proven and time.monotonic() < deadline:
        time.sleep(0.3)
        st = status(zk, hot, fs)
    assert st.proven, st.to_json()
    return st


def in_sync(hot, cold, timeout: float = 120) -> int:
    """Wait until cold has every row hot has; returns the count."""
    n = hot.count()
    cold.wait_rows(n, timeout=timeout)
    return n


_next = [0]


def rows(n: int) -> int:
    """First row number of a fresh range of n rows (tests share the session's table)."""
    first = 1_000_000 + _next[0]
    _next[0] += n
    return first


def test_real_queue_layout_and_a_drained_peer_is_proven_by_the_wal_length(hot_zk, hbase_hot, hbase_cold, hot_fs) -> None:
    hot, cold = hbase_hot, hbase_cold
    hot.put(rows(100), 100)
    in_sync(hot, cold)
    st = wait_proven(hot_zk, hot, hot_fs)
    servers = [r.server_name for r in hot.region_servers]
    assert st.live_servers == servers and st.peers == {"1": "ENABLED"} and st.znode_parent == hot.znode_parent
    (q,) = st.queues
    assert (q.server, q.queue_id, q.wals, q.basis) == (servers[0], "1", 1, "wal-length")
    host, port, code = servers[0].split(",")
    assert q.current_wal.startswith(f"{host}%2C{port}%2C{code}.") and q.position > 0
    # HBase's own replication manager counts the WAL being read: its queue size is 1 with one WAL
    # queued and nothing left to ship (the toolkit's size_of_log_queue counts only the WALs waiting
    # behind it). Read from the region server's /rs-status, not the JVM-wide `source.1.*` JMX keys:
    # a region server restarted in the same JVM by an earlier test (test_hbase_live_evidence) removes
    # those keys when its old source closes.
    from dr_toolkit.hbase.live import live_region_servers, replication_sources

    (rs,) = [s for s in live_region_servers(hot_zk, hot.znode_parent) if s.name == servers[0]]
    groups = replication_sources(rs)["1"]
    assert [g["Queue Size"] for g in groups] == ["1"] and q.wals == 1 and q.size_of_log_queue == 0, groups


def test_open_wal_edits_not_shipped_are_never_proven_drained(hot_zk, hbase_hot, hbase_cold, hot_fs) -> None:
    """The known false GO: the WAL being written is open, and the NameNode reports only its completed
    blocks (0 inside the first block), so `position >= NameNode length` held with edits unshipped."""
    hot, cold = hbase_hot, hbase_cold
    in_sync(hot, cold)
    wait_proven(hot_zk, hot, hot_fs)
    hot.disable_peer("1")
    hot.put(rows(50), 50)
    st = status(hot_zk, hot, hot_fs)
    (q,) = st.queues
    wal = f"{hot.rootdir}/WALs/{q.server}/{q.current_wal}"
    namenode_length = hot_fs.stat(wal).size
    assert namenode_length <= q.position  # what the old proof compared with: "drained"
    assert not st.proven and not st.caught_up and q.basis == "wal-length" and not q.drained
    assert "bytes left to ship" in q.reason and any("peer 1 is DISABLED" in r for r in st.reasons)
    # a roll closes that WAL (its NameNode length becomes exact): still not drained
    hot.roll_wal()
    st = status(hot_zk, hot, hot_fs)
    assert not st.caught_up and not st.proven, st.to_json()
    print("after the roll:", st.reasons)
    hot.enable_peer("1")
    in_sync(hot, cold)
    st = wait_proven(hot_zk, hot, hot_fs)
    assert [q.wals for q in st.queues] == [1]


def test_peer_filter_and_missing_peer(hot_zk, hbase_hot, hot_fs) -> None:
    st = status(hot_zk, hbase_hot, hot_fs, peers=["9"])
    assert not st.caught_up and st.queues == [] and any("peer 9 is not configured" in r for r in st.reasons)


def test_a_proof_under_a_live_writer_and_wal_rolls_covers_every_write_acknowledged_before_its_read(
        hot_zk, hbase_hot, hbase_cold, hot_fs) -> None:
    """A writer puts rows while WALs roll; every time drain is proven, cold must already hold every row
    whose put was acknowledged before the proof's read began."""
    hot, cold = hbase_hot, hbase_cold
    base = in_sync(hot, cold)
    acked: list[tuple[float, int]] = [(time.time(), 0)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        total = 0
        i = 0
        try:
            while not stop.is_set():
                hot.put(rows(20), 20)
                total += 20
                acked.append((time.time(), total))
                i += 1
                stop.wait(0.05 * (i % 7))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def roller() -> None:
        try:
            while not stop.wait(1.5):
                hot.roll_wal()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=roller)]
    for t in threads:
        t.start()
    proofs = checks = 0
    try:
        deadline = time.monotonic() + 90
        while proofs < 5 and time.monotonic() < deadline and not errors:
            st = status(hot_zk, hot, hot_fs)
            checks += 1
            if st.proven:
                on_cold = cold.count()
                before = max(n for t, n in list(acked) if t < st.read_at)
                assert on_cold >= base + before, (st.to_json(), on_cold, base, before)
                proofs += 1
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    assert proofs, f"no drain proof in {checks} checks while writing: the attack proved nothing"
    in_sync(hot, cold)
    wait_proven(hot_zk, hot, hot_fs)


def test_a_dead_region_servers_queue_is_not_drained_until_claimed_and_shipped(
        hot_zk, hbase_hot, hbase_cold, hot_fs) -> None:
    hot, cold = hbase_hot, hbase_cold
    in_sync(hot, cold)
    hot.disable_peer("1")
    hot.put(rows(30), 30)
    dead = hot.kill_region_server(0)
    st = status(hot_zk, hot, hot_fs)
    assert dead not in st.live_servers and not st.caught_up and not st.proven
    assert any(q.server == dead and q.dead for q in st.queues), st.to_json()
    hot.start_region_server()
    hot.enable_peer("1")
    in_sync(hot, cold, timeout=180)
    st = wait_proven(hot_zk, hot, hot_fs, timeout=180)
    # the dead server's queue was claimed and shipped: what is left of it (HBase may keep the
    # emptied recovered queue's znode a while) holds no WAL
    assert all(q.wals == 0 for q in st.queues if q.dead or q.recovered), st.to_json()
    assert dead not in st.live_servers


def test_real_table_descriptors_carry_the_replication_scope(hbase_hot, hot_fs) -> None:
    """The descriptors HBase writes on HDFS (<rootdir>/data/<ns>/<table>/.tabledesc/.tableinfo.*)."""
    from dr_toolkit.hbase.tabledesc import list_tables, read_table

    hot = hbase_hot
    hot.create_table("shop:unscoped", "a,b", 0)
    root = hot.rootdir
    assert read_table(hot_fs, root, "default", "orders").scopes == {"d": 1}
    d = read_table(hot_fs, root, "shop", "unscoped")
    assert d.scopes == {"a": 0, "b": 0} and d.unscoped == ["a", "b"]
    assert "unscoped" in (list_tables(hot_fs, root, "shop") or [])
    assert read_table(hot_fs, root, "shop", "missing") is None


def test_table_descriptors_round_trip_with_their_replication_scope(tmp_path) -> None:
    from dr_toolkit.fs.local import LocalFileSystem
    from dr_toolkit.hbase.tabledesc import (
        decode_tabledesc,
        encode_tabledesc,
        list_tables,
        read_table,
        tabledesc_path,
    )

    raw = encode_tabledesc("shop", "orders", {"d": 1, "meta": 0})
    d = decode_tabledesc(raw)
    assert d.name == "shop:orders" and d.scopes == {"d": 1, "meta": 0} and d.unscoped == ["meta"]
    fs = LocalFileSystem()
    root = str(tmp_path / "hbase")
    p = tmp_path / "hbase" / "data" / "shop" / "orders" / ".tabledesc"
    p.mkdir(parents=True)
    (p / ".tableinfo.0000000001").write_bytes(raw)
    (p / ".tableinfo.0000000002.123").write_bytes(encode_tabledesc("shop", "orders", {"d": 1, "meta": 1}))
    assert read_table(fs, root, "shop", "orders").unscoped == []  # the newest descriptor wins
    assert list_tables(fs, root, "shop") == ["orders"] and list_tables(fs, root, "nope") is None
    assert read_table(fs, root, "shop", "missing") is None
    assert tabledesc_path(root, "a", "b").endswith("/data/a/b/.tabledesc/.tableinfo.0000000001")
