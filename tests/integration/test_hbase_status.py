"""Replication status read from a real ZooKeeper, following the region-server simulator."""

from __future__ import annotations

import pytest

from dr_toolkit.hbase.status import replication_status

pytestmark = pytest.mark.integration


def test_status_follows_simulator_from_lagging_to_caught_up(zkc, rs_cluster, hbase_parent) -> None:
    c = rs_cluster(["1", "2"])
    a = c.add_server("rs-a.example.com")
    b = c.add_server("rs-b.example.com")
    for rs in (a, b):
        rs.write(1000)
        rs.roll()
        rs.write(500)

    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    assert not st.caught_up
    assert len(st.queues) == 4
    assert all(q.wals == 2 and q.size_of_log_queue == 1 and not q.dead for q in st.queues)
    assert any("SizeOfLogQueue=1" in r for r in st.reasons)

    # ship part of everything: first WALs done, current WAL half shipped
    for rs in (a, b):
        for q in rs.queues():
            rs.ship(q, 1200)
    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    assert not st.caught_up
    assert all(q.wals == 1 and q.position == 200 for q in st.queues)
    assert any("300 bytes left to ship" in r for r in st.reasons)

    for rs in (a, b):
        rs.drain()
    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    assert st.caught_up, st.reasons
    assert {q.basis for q in st.queues} == {"wal-length"}
    doc = st.to_json()
    assert doc["caught_up"] is True
    assert {"server", "peer", "wals", "size_of_log_queue", "position", "dead"} <= set(doc["queues"][0])


def test_dead_server_unclaimed_queue_is_not_caught_up_until_claimed_and_shipped(zkc, rs_cluster, hbase_parent) -> None:
    c = rs_cluster(["1"])
    a = c.add_server("rs-a.example.com")
    b = c.add_server("rs-b-with-dash.example.com")
    a.write(100)
    b.write(300)
    b.roll()
    b.write(50)
    a.drain()
    b.die()

    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    assert not st.caught_up
    dead = [q for q in st.queues if q.dead]
    assert len(dead) == 1 and dead[0].server == b.name and dead[0].claimed_by is None
    assert any("unclaimed queue of dead server" in r for r in st.reasons)

    # a claims b's queues but has not cleaned up yet: lock + copy visible
    new = a.claim(b, finish=False)
    assert new == [f"1-{b.name}"]
    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    dead = [q for q in st.queues if q.dead]
    assert dead and dead[0].claimed_by == a.name
    rec = [q for q in st.queues if q.recovered]
    assert len(rec) == 1 and rec[0].server == a.name and rec[0].peer == "1" and rec[0].wals == 2
    assert not st.caught_up

    # a second claimer loses the race on the lock
    other = c.add_server("rs-c.example.com")
    assert other.claim(b) == []

    c.admin.delete(f"{c.lay.queues}/{b.name}", recursive=True)  # a finishes the transfer
    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    assert not st.caught_up and any("recovered queue" in r for r in st.reasons)
    a.drain()
    other.drain()
    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    assert st.caught_up, st.reasons
    assert all(not q.recovered for q in st.queues)  # the recovered queue was deleted when done


def test_peer_filter_disabled_and_missing_peers(zkc, rs_cluster, hbase_parent) -> None:
    from dr_toolkit.hbase.peers import add_peer, disable_peer

    c = rs_cluster(["1", "2"])
    a = c.add_server("rs-a.example.com")
    a.write(10)
    add_peer(zkc, "1", "cold1,cold2:2181:/hbase", znode_parent=hbase_parent)
    add_peer(zkc, "2", "cold3:2181:/hbase", znode_parent=hbase_parent)
    disable_peer(zkc, "2", znode_parent=hbase_parent)
    for q in a.queues():
        if q == "1":
            a.ship(q)
    assert replication_status(zkc, hbase_parent, peers=["1"], wal_length=c.wal_length).caught_up
    st = replication_status(zkc, hbase_parent, peers=["2"], wal_length=c.wal_length)
    assert not st.caught_up and any("DISABLED" in r for r in st.reasons)
    st = replication_status(zkc, hbase_parent, peers=["9"])
    assert not st.caught_up and any("peer 9 is not configured" in r for r in st.reasons)


def test_without_wal_lengths_current_wal_basis_is_reported(zkc, rs_cluster, hbase_parent) -> None:
    c = rs_cluster(["1"])
    a = c.add_server("rs-a.example.com")
    a.write(10)
    st = replication_status(zkc, hbase_parent)
    assert st.caught_up and st.queues[0].basis == "queue-size"
    st = replication_status(zkc, hbase_parent, settle_s=0.2)
    assert st.caught_up and st.queues[0].basis == "settled"


def test_chained_claims_like_the_reference_example(zkc, rs_cluster, hbase_parent) -> None:
    """1.1.1.2 dies, 1.1.1.3 claims it and dies too; 1.1.1.1 ends up with 2-<1.1.1.2>-<1.1.1.3>."""
    c = rs_cluster(["2"])
    r1, r2, r3 = (c.add_server(h, 60020) for h in ("1.1.1.1", "1.1.1.2", "1.1.1.3"))
    for rs in (r1, r2, r3):
        rs.write(10)
    r2.roll()
    r2.die()
    assert r3.claim(r2) == [f"2-{r2.name}"]
    r3.die()
    got = sorted(r1.claim(r3))
    assert got == sorted(["2-" + r3.name, f"2-{r2.name}-{r3.name}"])
    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    chained = next(q for q in st.queues if q.queue_id == f"2-{r2.name}-{r3.name}")
    assert chained.peer == "2" and chained.dead_servers == [r2.name, r3.name] and chained.recovered
    assert not chained.dead and chained.wals == 2 and not st.caught_up
    r1.drain()
    st = replication_status(zkc, hbase_parent, wal_length=c.wal_length)
    assert st.caught_up, st.reasons
    assert [q.queue_id for q in st.queues] == ["2"]


def test_drain_proven_by_the_wal_files_on_the_hot_filesystem(zkc, rs_cluster, hbase_parent, tmp_path) -> None:
    """The simulator writes real WAL files; positions are compared with the files' lengths read through
    the filesystem (WALs/<server>/<wal>, then oldWALs/ once archived)."""
    from dr_toolkit.fs.local import LocalFileSystem
    from dr_toolkit.hbase.status import fs_wal_length

    root = tmp_path / "hbase"
    c = rs_cluster(["1", "2"], rootdir=root)
    a = c.add_server("rs-a.example.com")
    a.write(700)
    length = fs_wal_length(LocalFileSystem(), str(root))
    wal = a.current_wal
    assert (root / "WALs" / a.name / wal).stat().st_size == 700 and length(a.name, wal) == 700

    st = replication_status(zkc, hbase_parent, wal_length=length)
    assert not st.caught_up and not st.proven
    assert any("700 bytes left to ship" in r for r in st.reasons)
    a.ship("1", 650)
    st = replication_status(zkc, hbase_parent, wal_length=length)
    assert any("50 bytes left to ship" in r for r in st.reasons)
    a.drain()
    st = replication_status(zkc, hbase_parent, wal_length=length)
    assert st.caught_up and st.proven and st.basis == "wal-length" and st.read_at > 0

    # roll: the old WAL is archived to oldWALs once no queue needs it; lengths still resolve there
    a.write(10)
    a.roll()
    a.ship("1")
    assert (root / "WALs" / a.name / wal).exists()  # queue 2 still holds it
    a.ship("2")
    assert not (root / "WALs" / a.name / wal).exists() and (root / "oldWALs" / wal).stat().st_size == 710
    assert length(a.name, wal) == 710
    st = replication_status(zkc, hbase_parent, wal_length=length)
    assert st.proven, st.reasons

    # a WAL whose file cannot be found: queue size only, never proven
    (root / "WALs" / a.name / a.current_wal).unlink()
    st = replication_status(zkc, hbase_parent, wal_length=length)
    assert st.caught_up and not st.proven and st.basis == "queue-size"


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


@pytest.mark.parametrize("seed", [20261122, 7, 4711])
def test_random_write_ship_roll_die_claim_sequences_never_prove_an_undrained_queue(
        zkc, rs_cluster, hbase_parent, tmp_path, seed) -> None:
    """Attack the drain proof: random writes, partial ships, rolls, deaths and claims on simulated
    region servers writing real WAL files. Whenever the status says *proven*, every byte written to
    every queued WAL has been shipped; once everything is shipped and HBase removed the finished WALs
    (one current WAL per queue, no dead server's queue), it is proven."""
    import random

    from dr_toolkit.fs.local import LocalFileSystem
    from dr_toolkit.hbase.encoding import decode_position
    from dr_toolkit.hbase.status import fs_wal_length

    rnd = random.Random(seed)
    root = tmp_path / "hbase"
    c = rs_cluster(["1"], rootdir=root)
    live = [c.add_server(f"rs{i}.example.com") for i in range(3)]
    dead: list = []
    length = fs_wal_length(LocalFileSystem(), str(root))

    def truth() -> tuple[bool, bool]:
        """(everything shipped, no dead server's queue left) from ZooKeeper and the WAL files."""
        shipped, no_dead = True, True
        for server in c.admin.get_children(c.lay.queues):
            for q in c.admin.get_children(f"{c.lay.queues}/{server}"):
                if q == "lock":
                    continue
                wals = c.admin.get_children(f"{c.lay.queues}/{server}/{q}")
                if wals and server in {d.name for d in dead}:
                    no_dead = False
                for w in wals:
                    pos = decode_position(c.admin.get(f"{c.lay.queues}/{server}/{q}/{w}")[0])
                    if pos < c.lengths[w]:
                        shipped = False
        return shipped, no_dead

    proven_seen = 0
    for _ in range(80):
        op = rnd.choice(["write", "write", "ship", "ship", "ship", "roll", "drain", "die", "claim"])
        rs = rnd.choice(live)
        if op == "write":
            rs.write(rnd.randint(1, 500))
        elif op == "ship":
            for q in rs.queues():
                rs.ship(q, rnd.randint(1, 400))
        elif op == "roll":
            rs.roll()
        elif op == "drain":
            rs.drain()
        elif op == "die" and len(live) > 1:
            live.remove(rs)
            rs.die()
            dead.append(rs)
        elif op == "claim" and dead:
            d = rnd.choice(dead)
            if rs.claim(d):
                dead.remove(d)
        st = replication_status(zkc, hbase_parent, wal_length=length)
        shipped, no_dead = truth()
        if st.proven:
            proven_seen += 1
            assert shipped and no_dead, st.to_json()
        settled = all(q.wals <= 1 and not (q.recovered and q.wals) for q in st.queues)
        if shipped and no_dead and settled:  # HBase has also removed every finished WAL
            assert st.proven, st.reasons
    for rs in live:
        rs.drain()
    for d in list(dead):
        live[0].claim(d)
        dead.remove(d)
    for rs in live:
        rs.drain()
    st = replication_status(zkc, hbase_parent, wal_length=length)
    assert st.proven, st.reasons
    assert proven_seen > 0


def test_a_proof_under_concurrent_writes_and_shipping_covers_every_write_before_its_read_time(
        zkc, rs_cluster, hbase_parent, tmp_path) -> None:
    """The read order (``read_at``, then positions, then WAL lengths) is what makes the proof sound while
    the region server keeps writing and shipping: every write completed before ``read_at`` is covered
    by the shipped position the status read."""
    import bisect
    import random
    import threading
    import time as _time

    from dr_toolkit.fs.local import LocalFileSystem
    from dr_toolkit.hbase.status import fs_wal_length

    root = tmp_path / "hbase"
    c = rs_cluster(["1"], rootdir=root)
    rs = c.add_server("rs-a.example.com")
    length = fs_wal_length(LocalFileSystem(), str(root))
    written: list[tuple[float, int]] = [(0.0, 0)]  # (time the write completed, WAL length after it)
    stop = threading.Event()
    lock = threading.Lock()

    def writer() -> None:
        rnd = random.Random(1)
        while not stop.is_set():
            with lock:
                rs.write(rnd.randint(1, 200))
                written.append((_time.time(), c.lengths[rs.current_wal]))
            stop.wait(rnd.uniform(0, 0.03))

    def shipper() -> None:
        rnd = random.Random(2)
        while not stop.is_set():
            rs.ship("1", rnd.choice([None, rnd.randint(50, 400)]))
            stop.wait(rnd.uniform(0, 0.01))

    threads = [threading.Thread(target=writer), threading.Thread(target=shipper)]
    for t in threads:
        t.start()
    proofs = 0
    try:
        for _ in range(600):
            st = replication_status(zkc, hbase_parent, wal_length=length)
            if st.proven:
                proofs += 1
                with lock:
                    log = list(written)
                before = log[bisect.bisect_right([w[0] for w in log], st.read_at) - 1][1]
                assert st.queues[0].position >= before, (st.read_at, before, st.queues[0].position)
            if proofs >= 10:
                break
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert proofs, "no proof happened while writing: the attack proved nothing"
    rs.drain()
    assert replication_status(zkc, hbase_parent, wal_length=length).proven
