"""Transactions on the real hot broker: a transaction left open before acknowledged records.

Under ``read_committed`` (what MirrorMaker 2 and the toolkit read) nothing at or after the last
stable offset (LSO) of a partition is visible while a transaction there is open — including
non-transactional records acknowledged after it. The mirror cannot copy them yet, so the lag
must count them and must never say caught up (a failover then would lose acknowledged records).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from dr_toolkit.access import Access
from dr_toolkit.kafka import api
from dr_toolkit.kafka.signals import kafka_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import (
    QUIET,
    T0,
    Rec,
    create_topic,
    produce,
    read_all,
    unique,
    write_topology,
)

pytestmark = pytest.mark.integration


def test_open_transaction_before_acknowledged_records_is_never_caught_up(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic = unique("txopen")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    done = [Rec(f"d{i}".encode(), T0 + 10 * i, b"k") for i in range(3)]
    produce(hot, topic, 0, done)
    produce(cold, topic, 0, done)  # cold holds everything committed so far
    tx = Producer({"bootstrap.servers": hot, "transactional.id": unique("tid"), "linger.ms": 0,
                   "transaction.timeout.ms": 120_000, **QUIET})
    tx.init_transactions(15)
    tx.begin_transaction()
    tx.produce(topic, b"open-1", partition=0, timestamp=T0 + 100)
    tx.produce(topic, b"open-2", partition=0, timestamp=T0 + 110)
    assert tx.flush(15) == 0
    late = [Rec(f"acked{i}".encode(), T0 + 200 + i, b"k") for i in range(3)]
    produce(hot, topic, 0, late)  # acknowledged, durable on hot, invisible to read_committed
    try:
        assert read_all(cold, topic, 0) == done
        topo = load_topology(write_topology(tmp_path / "t.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                                            ledger_url=f"sqlite:///{tmp_path}/t.db", skew_s=0.01))
        res = api.lag(topo, access=Access.none())
        (row,) = res["partitions"]
        assert not res["caught_up"], row
        assert (row["records_behind"] or 0) >= 5, row  # the open transaction's 2 and the 3 acknowledged after it
        # the safe time lies before the open transaction's first record (nothing after it is on cold)
        assert row["safe_time"] is not None and row["safe_time"] <= (T0 + 100) / 1000, row
        sig = kafka_signals(topo, Ledger.open(topo.ledger.url), Access.none(), time.time())
        assert not any(s.caught_up for s in sig if s.component == "kafka" and topic in s.name), sig
    finally:
        tx.abort_transaction(15)
    # Aborted: the acknowledged records become readable; not on cold -> still behind, the oldest
    # unmirrored record now the first acknowledged one (the aborted ones are never mirrored).
    deadline = time.monotonic() + 15
    while True:
        (row,) = api.lag(topo, access=Access.none())["partitions"]
        if "open transaction" not in row["basis"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "open transaction" not in row["basis"], row
    assert row["records_behind"] >= 3 and row["oldest_unmirrored_ts"] == (T0 + 200) / 1000, row
    produce(cold, topic, 0, late)
    (row,) = api.lag(topo, access=Access.none())["partitions"]
    assert row["records_behind"] == 0, row


def _wait_compacted(address: str, topic: str, left: int, timeout: float = 60.0) -> list[Rec]:
    """Poll until the cleaner has left ``left`` records in partition 0."""
    deadline = time.monotonic() + timeout
    while True:
        recs = read_all(address, topic, 0)
        if len(recs) <= left or time.monotonic() > deadline:
            return recs
        time.sleep(0.5)


def test_compacted_cold_topic_never_skips_a_record_between_two_identical_ones(kafka_env, tmp_path: Path) -> None:
    """Hot (not compacted) holds Z, A, B, A', C with A' identical to A (same key, value and
    timestamp); the group consumed Z, A. The mirror copied everything onto a compacted cold
    topic whose cleaner then removed A (its key comes again in A'): cold holds Z, B, A', C at
    offsets 0, 2, 3, 4. Matching the last consumed record A by identity finds A' — resuming
    after it would skip B. The remap must resume at or before B (offset 2).

    The cold records are copied directly (not by MirrorMaker 2): the test needs exactly these
    records on cold, in a topic whose config (compaction) differs from hot's."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from dr_toolkit.kafka.client import KafkaCluster

    hot, cold = kafka_env
    topic, group = unique("compact"), unique("grp")
    create_topic(hot, topic, 1)
    admin = AdminClient({"bootstrap.servers": cold, **QUIET})
    cfg = {"cleanup.policy": "compact", "segment.ms": "10", "min.cleanable.dirty.ratio": "0.001",
           "min.compaction.lag.ms": "0", "delete.retention.ms": "100"}
    admin.create_topics([NewTopic(topic, 1, 1, config=cfg)])[topic].result(timeout=15)
    z, a, b = Rec(b"z", T0, b"kz"), Rec(b"a", T0 + 10, b"ka"), Rec(b"b", T0 + 20, b"kb")
    c = Rec(b"c", T0 + 1000, b"kc")  # 1 s after Z by timestamp: rolls the segment (segment.ms counts by record time)
    produce(hot, topic, 0, [z, a, b, a])
    produce(cold, topic, 0, [z, a, b, a])
    produce(hot, topic, 0, [c])
    produce(cold, topic, 0, [c])
    with KafkaCluster(hot) as hc:
        assert hc.commit(group, {(topic, 0): 2}) == {(topic, 0): None}
    topo = load_topology(write_topology(tmp_path / "c.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                                        ledger_url=f"sqlite:///{tmp_path}/c.db", skew_s=0))
    ledger = Ledger.open(topo.ledger.url)
    api.checkpoint(topo, ledger, access=Access.from_env())  # taken before the cleaner ran or after: the same answer is due
    left = _wait_compacted(cold, topic, 4)
    assert [r.value for r in left] == [b"z", b"b", b"a", b"c"], left  # A removed by the real cleaner
    (part,) = api.remap(topo, ledger, group, access=Access.from_env())["partitions"]
    assert part["target_offset"] <= 2, part  # never past B


def test_delete_records_trimming_hots_head(kafka_env, tmp_path: Path) -> None:
    """DeleteRecords on hot (the real broker moves its log start): a group committed past the
    trimmed head remaps exactly and the lag stays exact; a group whose committed offset lies in
    the trimmed part (records it never read are gone from hot) must not skip their copies on
    cold. Cold's records are copied directly, before the trim, with 2 cold-only records first."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from dr_toolkit.kafka.client import KafkaCluster

    hot, cold = kafka_env
    topic, ahead, behind = unique("trim"), unique("ahead"), unique("behind")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    recs = [Rec(f"v{i}".encode(), T0 + 100 * i, b"k") for i in range(12)]
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, [Rec(b"cold-only-0", 1), Rec(b"cold-only-1", 2)] + recs)
    with KafkaCluster(hot) as hc:
        hc.commit(ahead, {(topic, 0): 9})
        hc.commit(behind, {(topic, 0): 4})
    admin = AdminClient({"bootstrap.servers": hot, **QUIET})
    (fut,) = admin.delete_records([TopicPartition(topic, 0, 6)], request_timeout=10).values()
    assert fut.result(timeout=15).low_watermark == 6  # the new log start
    topo = load_topology(write_topology(tmp_path / "d.yaml", hot=hot, cold=cold, topics=[topic],
                                        groups=[ahead, behind], ledger_url=f"sqlite:///{tmp_path}/d.db", skew_s=0.05))
    ledger = Ledger.open(topo.ledger.url)
    api.checkpoint(topo, ledger, access=Access.from_env())
    (a,) = api.remap(topo, ledger, ahead, access=Access.from_env())["partitions"]
    assert (a["method"], a["target_offset"]) == ("exact", 2 + 9), a
    (b,) = api.remap(topo, ledger, behind, access=Access.from_env())["partitions"]
    assert b["target_offset"] <= 2 + 4, b  # the copies of v4, v5 (gone from hot, never read) are not skipped
    assert b["method"] == "trimmed" and b["may_reread"] > 0, b
    (row,) = api.lag(topo, access=Access.none())["partitions"]
    assert row["records_behind"] == 0, row


def test_checkpoint_of_a_group_stopped_before_an_open_transaction(kafka_env, tmp_path: Path) -> None:
    """The group committed offset 0 and the partition starts with an open transaction: nothing
    is visible to read_committed there, so the first unconsumed record is dated with a
    read_uncommitted read (the checkpoint must neither fail nor anchor on time alone, which
    would resume after that record once it is committed and mirrored)."""
    from dr_toolkit.kafka.client import KafkaCluster

    hot, cold = kafka_env
    topic, group = unique("txnext"), unique("grp")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    tx = Producer({"bootstrap.servers": hot, "transactional.id": unique("tid"), "linger.ms": 0,
                   "transaction.timeout.ms": 120_000, **QUIET})
    tx.init_transactions(15)
    tx.begin_transaction()
    tx.produce(topic, b"open-1", b"k", partition=0, timestamp=T0 + 100)
    assert tx.flush(15) == 0
    after = [Rec(f"p{i}".encode(), T0 + 200 + i, b"k") for i in range(3)]
    produce(hot, topic, 0, after)
    with KafkaCluster(hot) as hc:
        assert hc.commit(group, {(topic, 0): 0}) == {(topic, 0): None}
    topo = load_topology(write_topology(tmp_path / "n.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                                        ledger_url=f"sqlite:///{tmp_path}/n.db", skew_s=0))
    ledger = Ledger.open(topo.ledger.url)
    try:
        (row,) = api.checkpoint(topo, ledger, access=Access.from_env())["partitions"]
        assert row["record_timestamp"] == T0 + 100, row  # the open transaction's record, read_uncommitted
    finally:
        tx.commit_transaction(15)
    produce(cold, topic, 0, [Rec(b"cold-only", 5, b"x"), Rec(b"open-1", T0 + 100, b"k"), *after])
    (part,) = api.remap(topo, ledger, group, access=Access.from_env())["partitions"]
    assert (part["method"], part["target_offset"]) == ("exact", 1), part
