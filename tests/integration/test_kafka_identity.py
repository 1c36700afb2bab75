"""Cold's position on hot is found by the identity of the records, never by a timestamp alone
(issue 38, Kafka items 4-6), on the real brokers.

- A record produced directly on cold (identity topic names: the same topic as the mirror's) is
  never a proof that hot's unmirrored records are on cold: neither for the gate's lag nor for the
  unplanned loss window (item 4).
- A cold topic with ``message.timestamp.type=LogAppendTime`` restamps every mirrored record: its
  timestamps are the cold broker's, never evidence (item 5); the remap never searches them.
- The unplanned loss window states every Kafka topic the gate gates — by pattern, the protected
  groups' topics — and partitions hot has and cold lacks (item 6).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from dr_toolkit.access import Access
from dr_toolkit.failover.unplanned import loss_window
from dr_toolkit.kafka import api
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.lag import IDENTITY_WINDOW
from dr_toolkit.kafka.signals import kafka_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import QUIET, Rec, create_topic, produce, unique, write_topology

pytestmark = pytest.mark.integration

SKEW_S = 1.0  # the declared producer clock-skew bound


def _history(n: int = 10, age_s: float = 60.0) -> list[Rec]:
    """``n`` records stamped ``age_s`` seconds ago onwards, one second apart: every one older than
    now − 2S, so a timestamp search from "now" passes all of them."""
    base = int((time.time() - age_s) * 1000)
    return [Rec(f"v{i}".encode(), base + 1000 * i, f"k{i % 3}".encode(), [("h", b"1")]) for i in range(n)]


def _topic_signal(topo, ledger, topic):  # type: ignore[no-untyped-def]
    return {s.name: s for s in kafka_signals(topo, ledger, Access.none(), time.time())}[topic]


def _setup(kafka_env, tmp_path: Path, *, cold_config: dict[str, str] | None = None, groups: list[str] | None = None,
           policy: dict | None = None, topics: list[str] | None = None):  # type: ignore[no-untyped-def]
    hot, cold = kafka_env
    topic = unique("ident")
    create_topic(hot, topic, 1)
    admin = AdminClient({"bootstrap.servers": cold, **QUIET})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=cold_config or {})], request_timeout=10).values():
        f.result(timeout=15)
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic] if topics is None else topics,
                         groups=groups or [], ledger_url=f"sqlite:///{tmp_path}/ledger.db", skew_s=SKEW_S,
                         policy=policy)
    topo = load_topology(cfg)
    return topo, Ledger.open(topo.ledger.url), topic


def test_a_record_produced_on_cold_never_hides_hot_records_it_lacks(kafka_env, tmp_path: Path) -> None:
    """Item 4: 10 records on hot, 3 mirrored (identity names). One record written directly on cold
    (its producer's clock: now) made the 7 unmirrored records count as mirrored — NO_GO turned GO
    (the skew bound applied to a record hot never had). A record on cold that is identical (key,
    value, headers, timestamp) to hot's last record but not at its position (cold lacks the 6
    between) made the tails' proof say caught up. Cold's position is now found by the identity of
    its records and their position: 7 behind in every case, the safe time before the oldest."""
    hot, cold = kafka_env
    topo, ledger, topic = _setup(kafka_env, tmp_path)
    recs = _history()
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, recs[:3])
    sig = _topic_signal(topo, ledger, topic)
    assert not sig.caught_up and sig.detail["records_behind"] == 7, sig
    assert sig.safe_time == recs[3].timestamp / 1000 - SKEW_S

    produce(cold, topic, 0, [Rec(b"written on cold", int(time.time() * 1000), b"k1")])
    sig = _topic_signal(topo, ledger, topic)
    assert not sig.caught_up and sig.detail["records_behind"] == 7, sig
    assert sig.safe_time == recs[3].timestamp / 1000 - SKEW_S, sig

    # A copy of hot's last record, out of place (cold lacks hot's records 3..8 before it).
    produce(cold, topic, 0, [recs[-1]])
    (row,) = api.lag(topo, access=Access.none())["partitions"]
    assert row["records_behind"] == 7 and row["oldest_unmirrored_ts"] == recs[3].timestamp / 1000, row

    # The same key and value as hot's next record, from a producer on cold (its own clock): not hot's.
    produce(cold, topic, 0, [Rec(recs[3].value, int(time.time() * 1000), recs[3].key, recs[3].headers)])
    (row,) = api.lag(topo, access=Access.none())["partitions"]
    assert row["records_behind"] == 7, row

    # The mirror copies the rest after the foreign records, and hot's next records: caught up, proven
    # by identity once the window before cold's newest record holds copies only.
    more = [Rec(f"w{i}".encode(), int((time.time() - 30) * 1000) + i, b"k") for i in range(IDENTITY_WINDOW + 2)]
    produce(hot, topic, 0, more)
    produce(cold, topic, 0, recs[3:] + more)
    sig = _topic_signal(topo, ledger, topic)
    assert sig.caught_up and sig.detail["records_behind"] == 0, sig


def test_the_unplanned_recovery_point_never_moves_past_hot_records_cold_lacks(kafka_env, tmp_path: Path) -> None:
    """Item 4, unplanned: with hot gone, cold's newest record (here one produced on cold) is no
    evidence of what hot had. The loss window states, per partition, what a gate check proved by
    identity (recorded in the ledger) while cold still holds that proven record — never the
    newest cold timestamp; without such a proof the topic is unbounded."""
    hot, cold = kafka_env
    topo, ledger, topic = _setup(kafka_env, tmp_path)
    recs = _history()
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, recs[:3])
    lw = loss_window(topo, ledger, Access.none())
    (k,) = [c for c in lw["components"] if c["component"] == "kafka"]
    assert k["safe_time"] is None and f"kafka {topic}" in lw["unbounded"], k  # nothing proven yet

    _topic_signal(topo, ledger, topic)  # a gate check proves cold holds hot's records 0..2
    produce(cold, topic, 0, [Rec(b"written on cold", int(time.time() * 1000), b"k1")])
    lw = loss_window(topo, ledger, Access.none())
    (k,) = [c for c in lw["components"] if c["component"] == "kafka"]
    assert k["safe_time"] is not None and k["safe_time"] <= recs[3].timestamp / 1000 - SKEW_S, k
    assert lw["recovery_point_epoch"] <= recs[3].timestamp / 1000 - SKEW_S


def test_a_log_append_time_cold_topic_is_never_evidence(kafka_env, tmp_path: Path) -> None:
    """Item 5: the cold topic restamps every mirrored record with the cold broker's clock
    (``message.timestamp.type=LogAppendTime``; MirrorMaker 2 never copies that setting). 7 of 10
    records missing read as mirrored (GO) — a CreateTime cold topic said NO_GO. Now NO_GO naming
    the topic and its setting; the unplanned window states no safe time for it."""
    hot, cold = kafka_env
    topo, ledger, topic = _setup(kafka_env, tmp_path, cold_config={"message.timestamp.type": "LogAppendTime"})
    recs = _history()
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, recs[:3])  # the mirror's copies: restamped by the cold broker
    sig = _topic_signal(topo, ledger, topic)
    assert not sig.caught_up and sig.detail["records_behind"] >= 7, sig
    assert sig.safe_time is None or sig.safe_time <= recs[3].timestamp / 1000 - SKEW_S, sig
    assert "LogAppendTime" in (sig.reason or "") and topic in (sig.reason or ""), sig

    produce(cold, topic, 0, recs[3:])  # every record copied: still not provable by timestamps
    sig = _topic_signal(topo, ledger, topic)
    assert not sig.caught_up and "LogAppendTime" in (sig.reason or ""), sig
    lw = loss_window(topo, ledger, Access.none())
    (k,) = [c for c in lw["components"] if c["component"] == "kafka"]
    assert k["safe_time"] is None and "LogAppendTime" in k["basis"], k


def test_the_remap_never_searches_log_append_time_stamps(kafka_env, tmp_path: Path) -> None:
    """Item 5, remap: on a LogAppendTime cold topic the timestamps are the cold broker's; the
    remap never binary-searches them: the position is cold's log start (every record may be
    re-read) unless MirrorMaker 2's own translation narrows it, and the reason is said."""
    hot, cold = kafka_env
    group = unique("grp")
    topo, ledger, topic = _setup(kafka_env, tmp_path, cold_config={"message.timestamp.type": "LogAppendTime"},
                                 groups=[group])
    recs = _history()
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, recs)
    with KafkaCluster(hot) as c:
        c.commit(group, {(topic, 0): 5})
    api.checkpoint(topo, ledger, access=Access.none())
    doc = api.remap(topo, ledger, group=group, access=Access.none())
    (part,) = doc["partitions"]
    assert part["target_offset"] == 0 and part["method"] == "log_append_time", part
    assert part["may_reread"] == 10, part


def test_the_unplanned_window_states_every_gated_topic_and_partition(kafka_env, tmp_path: Path) -> None:
    """Item 6: the loss window read only the policies' literal ``topics``: a topic chosen by
    ``topics_regex`` (7 of 10 records missing on cold), a topic the protected group committed
    outside the policy (4 records, cold's copy empty — the remap moves the group's offset 4 → 0
    there anyway) and a topic whose second partition cold lacks got no safe time and were not
    listed as unbounded, while the statement said every component states one. The window now
    reads the same topics as the gate (one reader), per partition."""
    hot, cold = kafka_env
    group, prefix = unique("grp"), unique("rx")
    lit, by_rx, committed_only, fewer = unique("lit"), f"{prefix}-b", unique("gtopic"), f"{prefix}-d"
    for t in (lit, by_rx, committed_only):
        create_topic(hot, t, 1)
        create_topic(cold, t, 1)
    create_topic(hot, fewer, 2)
    create_topic(cold, fewer, 1)  # cold lacks partition 1
    recs = _history()
    for t in (lit, by_rx, fewer):
        produce(hot, t, 0, recs)
    produce(hot, fewer, 1, recs[:2])
    produce(cold, lit, 0, recs)
    produce(cold, by_rx, 0, recs[:3])
    produce(cold, fewer, 0, recs)
    produce(hot, committed_only, 0, recs[:4])
    with KafkaCluster(hot) as c:
        c.commit(group, {(lit, 0): 5, (committed_only, 0): 4})
    policy = {"topics_regex": [f"{prefix}-.*"]}
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[lit], groups=[group],
                         ledger_url=f"sqlite:///{tmp_path}/ledger.db", skew_s=SKEW_S, policy=policy)
    topo = load_topology(cfg)
    ledger = Ledger.open(topo.ledger.url)
    api.checkpoint(topo, ledger, access=Access.none())
    resolved_before = time.time()
    sigs = {s.name: s for s in kafka_signals(topo, ledger, Access.none(), time.time())}
    assert {lit, by_rx, committed_only, fewer} <= set(sigs), sorted(sigs)  # the gate gates all four
    assert not sigs[fewer].caught_up and "partition count mismatch" in (sigs[fewer].reason or ""), sigs[fewer]
    # the lag per partition, including the partition hot has and cold lacks
    rows = {r["partition"]: r for r in api.lag(topo, access=Access.none(), topics=[fewer])["partitions"]}
    assert rows[0]["records_behind"] == 0 and rows[1]["method"] == "cold_lacks_partition", rows
    assert rows[1]["records_behind"] == 2 and rows[1]["safe_time"] == recs[0].timestamp / 1000 - SKEW_S, rows

    # hot is gone: the window comes from cold and the ledger only
    gone = load_topology(write_topology(tmp_path / "gone.yaml", hot="127.0.0.1:1", cold=cold, topics=[lit],
                                        groups=[group], ledger_url=f"sqlite:///{tmp_path}/ledger.db",
                                        skew_s=SKEW_S, policy=policy))
    lw = loss_window(gone, ledger, Access.none())
    kafka = {c["name"]: c for c in lw["components"] if c["component"] == "kafka"}
    assert {lit, by_rx, committed_only, fewer, "topics_regex:stream"} <= set(kafka), sorted(kafka)
    for c in kafka.values():  # each states a safe time or is listed as unbounded
        assert c["safe_time"] is not None or f"kafka {c['name']}" in lw["unbounded"], c
    assert kafka[lit]["safe_time"] is not None and kafka[lit]["safe_time"] >= resolved_before - 0.001, kafka[lit]
    assert kafka[by_rx]["safe_time"] == recs[3].timestamp / 1000 - SKEW_S, kafka[by_rx]
    assert kafka[committed_only]["safe_time"] == recs[0].timestamp / 1000 - SKEW_S, kafka[committed_only]
    assert kafka[fewer]["safe_time"] is None and "partition(s) 1" in (kafka[fewer]["known_missing"] or ""), kafka[fewer]
    assert kafka["topics_regex:stream"]["safe_time"] is not None
    assert kafka["topics_regex:stream"]["safe_time"] >= resolved_before, kafka["topics_regex:stream"]
    assert lw["recovery_point_epoch"] == recs[0].timestamp / 1000 - SKEW_S  # bounded by the group's topic
    assert "every component states a safe time" not in lw["statement"]


@pytest.mark.slow
def test_real_mm2_onto_a_log_append_time_topic_is_proven_by_its_offset_syncs_checked_on_the_records(
        mm2, kafka_env, tmp_path: Path) -> None:
    """Item 5 with real MirrorMaker 2 onto a cold topic that restamps (LogAppendTime, created before
    MM2 mirrors into it; MM2 never copies that setting): cold's timestamps are never used; MM2's own
    offset syncs (``mm2-offset-syncs.cold.internal`` on hot), each borne out by the fingerprints of
    the records at both ends and the records before them, prove the position — caught up when MM2
    has copied everything, behind by what it has not (MM2 paused)."""
    import os
    import signal

    import yaml

    hot, cold = kafka_env
    topic = unique("mm-lat")
    remote = mm2.remote_topic(topic)
    create_topic(hot, topic, 1)
    admin = AdminClient({"bootstrap.servers": cold, **QUIET})
    for f in admin.create_topics([NewTopic(remote, 1, 1, config={"message.timestamp.type": "LogAppendTime"})],
                                 request_timeout=10).values():
        f.result(timeout=15)
    recs = _history()
    produce(hot, topic, 0, recs)
    mm2.wait_mirrored([topic])
    path = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                          ledger_url=f"sqlite:///{tmp_path}/ledger.db", skew_s=SKEW_S, replication_policy="default")
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    sig = _topic_signal(topo, ledger, topic)  # without MM2's syncs: nothing proves the position
    assert not sig.caught_up and "LogAppendTime" in (sig.reason or "") and remote in (sig.reason or ""), sig

    doc = yaml.safe_load(path.read_text())
    doc["clusters"]["hot"]["kafka"]["mm2_offset_syncs_topic"] = mm2.offset_syncs_topic
    path.write_text(yaml.safe_dump(doc))
    topo = load_topology(path)
    sig = _topic_signal(topo, ledger, topic)
    assert sig.caught_up and "offset sync" in sig.basis, sig

    assert mm2.proc is not None
    os.kill(mm2.proc.pid, signal.SIGSTOP)
    try:
        produce(hot, topic, 0, _history(4, age_s=20))
        (row,) = api.lag(topo, access=Access.none())["partitions"]
        assert row["records_behind"] == 4 and row["method"] == "mm2_sync", row
    finally:
        os.kill(mm2.proc.pid, signal.SIGCONT)
    mm2.wait_mirrored([topic])
    sig = _topic_signal(topo, ledger, topic)
    assert sig.caught_up, sig


def test_an_offset_sync_the_records_do_not_bear_out_proves_nothing(kafka_env, tmp_path: Path) -> None:
    """Anyone who may write to MirrorMaker 2's offset-syncs topic could claim that cold holds hot's
    records: a sync is evidence only where the records at both ends, and those before them, are
    the same. Cold (LogAppendTime) holds copies of hot's records 0..2 and one record produced on
    cold; a forged sync says hot's 9 is cold's 3, a true one says hot's 2 is cold's 2."""
    import yaml

    from dr_toolkit.kafka.mm2 import encode_sync

    hot, cold = kafka_env
    topo, ledger, topic = _setup(kafka_env, tmp_path, cold_config={"message.timestamp.type": "LogAppendTime"})
    recs = _history()
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, [*recs[:3], Rec(b"written on cold", int(time.time() * 1000), b"k1")])
    syncs = unique("mm2-offset-syncs.cold.internal")
    create_topic(hot, syncs, 1)
    path = Path(topo.source_file)
    doc = yaml.safe_load(path.read_text())
    doc["clusters"]["hot"]["kafka"]["mm2_offset_syncs_topic"] = syncs
    path.write_text(yaml.safe_dump(doc))
    topo = load_topology(path)

    key, value = encode_sync(topic, 0, 9, 3)  # forged: cold's 3 is the record produced on cold
    produce(hot, syncs, 0, [Rec(value, int(time.time() * 1000), key)])
    (row,) = api.lag(topo, access=Access.none())["partitions"]
    assert row["records_behind"] == 10 and row["method"] == "log_append_time", row

    key, value = encode_sync(topic, 0, 2, 2)  # true: borne out by the fingerprints of 0..2 on both sides
    produce(hot, syncs, 0, [Rec(value, int(time.time() * 1000), key)])
    (row,) = api.lag(topo, access=Access.none())["partitions"]
    assert row["records_behind"] == 7 and row["method"] == "mm2_sync", row


def test_a_record_produced_on_cold_with_an_old_timestamp_never_makes_the_remap_skip(kafka_env,
                                                                                 tmp_path: Path) -> None:
    """The remap's proofs on cold are records stamped before a bound. A record produced on cold
    directly, stamped long ago, between the copies of hot's records 4 and 5 (the group consumed
    only record 0) was taken as proof that everything before it was consumed: target 6, hot's
    records 1..4 skipped. A proving record stamped more than 2S before a record before it is no
    copy of a hot record (the clock model): the search goes below it — never skip."""
    hot, cold = kafka_env
    group = unique("grp")
    topo, ledger, topic = _setup(kafka_env, tmp_path, groups=[group])
    recs = _history(20)
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, [*recs[:5], Rec(b"replayed on cold", 1, b"k0"), *recs[5:]])
    with KafkaCluster(hot) as c:
        c.commit(group, {(topic, 0): 1})
    api.checkpoint(topo, ledger, access=Access.none())
    (part,) = api.remap(topo, ledger, group=group, access=Access.none())["partitions"]
    assert part["target_offset"] is not None and part["target_offset"] <= 1, part  # cold's copy of hot's record 1
