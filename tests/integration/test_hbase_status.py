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
