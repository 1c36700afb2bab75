"""Checkpoint on hot, remap onto a shifted mirror on cold, against the real test brokers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.kafka import api
from dr_toolkit.kafka.remap import probe_budget
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import T0, Rec, create_topic, produce, read_all, unique, write_topology

pytestmark = pytest.mark.integration
def test_remap_points_at_the_next_unconsumed_record_on_every_partition(kafka_mirror) -> None:
    topo, ledger, topic, group, idle, scen = kafka_mirror
    ck = api.checkpoint(topo, ledger, access=Access.from_env())
    assert set(ck["groups"]) == {group, idle}
    rows = {(r["group_id"], r["partition_id"]): r for r in ck["partitions"]}
    assert rows[(group, 3)]["committed_offset"] == 100 and rows[(group, 3)]["timestamp_type"] == "create"
    assert rows[(group, 2)]["fingerprint"] is None  # empty partition: nothing to fingerprint
    assert all(rows[(idle, p)]["committed_offset"] is None for p in scen)  # a group with no commits
    assert [r["partition_id"] for r in ledger.latest_checkpoint(group)] == sorted(scen)

    res = api.remap(topo, ledger, group, access=Access.from_env())
    assert res["applied"] is False
    by_p = {r["partition"]: r for r in res["partitions"]}
    for p, (recs, consumed, shift) in scen.items():
        r = by_p[p]
        if p == 3:
            # All 100 records lie within 2x the 70 ms skew bound of the anchor and cold holds nothing
            # older: nothing proves the copy's position (cold's head could have been trimmed), so the
            # answer is the safe one, re-reading the partition — never skipping.
            assert (r["method"], r["target_offset"], r["may_reread"]) == ("skew_bound", 0, 100), r
            continue
        assert r["target_offset"] == shift + consumed, (p, r)
        assert r["source_offset"] == consumed
        if recs:
            n = shift + len(recs)
            assert r["probes"] <= probe_budget(n), (p, r)
    assert by_p[0]["method"] == by_p[1]["method"] == by_p[5]["method"] == "exact"
    assert by_p[4]["method"] == "exact"
    assert by_p[2]["method"] == "time"  # empty at checkpoint time: by the checkpoint's time, not cold's end
    # Five identical records, two consumed: the count of identical records before the anchor
    # picks the second copy exactly.
    assert by_p[6]["method"] == "exact" and by_p[6]["duplicate_window"] is None

    # The record each target points at is the hot record the group would have read next.
    cold = topo.cold.kafka.bootstrap_servers
    for p in (0, 1, 5):
        recs, consumed, _ = scen[p]
        got = read_all(cold, topic, p)[by_p[p]["target_offset"]]
        assert (got.value, got.timestamp) == (recs[consumed].value, recs[consumed].timestamp)

    audit = ledger.audit_events(component="kafka")
    assert audit and audit[-1]["dry_run"] == 1 and audit[-1]["status"] == "planned"
    none = api.remap(topo, ledger, idle, apply=True, access=Access.from_env())
    assert {r["method"] for r in none["partitions"]} == {"none"}
    assert all(r["target_offset"] is None for r in none["partitions"])
    assert none["applied"] is True and none["written"] == 0  # nothing to carry over, nothing written


def test_lag_reports_records_and_seconds_behind_then_caught_up(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic = unique("lag")
    create_topic(hot, topic, 2)
    create_topic(cold, topic, 2)
    recs = [Rec(f"r{i}".encode(), T0 + 1000 * i) for i in range(10)]
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, [Rec(b"other", 5)] + recs[:6])  # shifted by one, 4 records behind
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                         ledger_url=f"sqlite:///{tmp_path}/l.db")
    before = time.time()
    out = api.lag(load_topology(cfg), access=Access.from_env())
    p0, p1 = out["partitions"]
    assert p0["records_behind"] == 4 and p0["method"] == "exact"
    assert (p0["hot_end"], p0["cold_end"]) == (10, 7)
    # The safe time is the oldest unmirrored record's time (skew bound 0 here), not the check's.
    assert p0["oldest_unmirrored_ts"] == p0["safe_time"] == (T0 + 6000) / 1000
    assert p0["seconds_behind"] >= before - p0["safe_time"]
    assert p1["records_behind"] == 0 and p1["safe_time"] >= before  # empty: the time hot's end was read
    assert out["caught_up"] is False and out["safe_time"] == p0["safe_time"]
    produce(cold, topic, 0, recs[6:])
    before = time.time()
    out = api.lag(load_topology(cfg), access=Access.from_env())
    assert out["caught_up"] is True and out["partitions"][0]["records_behind"] == 0
    assert before <= out["partitions"][0]["safe_time"] <= out["checked_at"]


def test_lag_is_not_fooled_by_identical_records_at_the_end(kafka_env, tmp_path: Path) -> None:
    """Newest records equal on both sides normally means caught up (the fast path), but not when
    hot ends with a repeat of the same record and the mirror has only one copy of it."""
    hot, cold = kafka_env
    topic = unique("lagdup")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    recs = [Rec(f"r{i}".encode(), T0 + 1000 * i) for i in range(6)]
    dup = Rec(b"again", T0 + 9000)
    produce(hot, topic, 0, [*recs, dup, dup])
    produce(cold, topic, 0, [*recs, dup])
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                         ledger_url=f"sqlite:///{tmp_path}/l.db")
    out = api.lag(load_topology(cfg), access=Access.from_env())
    assert out["caught_up"] is False and out["partitions"][0]["records_behind"] == 1
    produce(cold, topic, 0, [dup])
    out = api.lag(load_topology(cfg), access=Access.from_env())
    assert out["caught_up"] is True and out["partitions"][0]["method"] == "exact"


def test_dry_run_writes_no_checkpoint_and_apply_names_who(kafka_mirror) -> None:
    topo, ledger, topic, group, _idle, scen = kafka_mirror
    res = api.remap(topo, ledger, group, who="alice", access=Access.from_env())  # no checkpoint yet: a fresh one, not stored
    assert res["applied"] is False and ledger.latest_checkpoint(group) == []
    planned = ledger.audit_events(component="kafka")[-1]
    assert (planned["status"], planned["actor"]) == ("planned", "alice")
    api.remap(topo, ledger, group, apply=True, who="bob", run_id="r-who", access=Access.from_env())
    assert ledger.latest_checkpoint(group)  # applying keeps the checkpoint it used
    assert [e["actor"] for e in ledger.audit_events(run_id="r-who")] == ["bob"]


def test_partitions_read_whole_give_the_answers_the_searches_give(kafka_mirror, tmp_path: Path) -> None:
    """Many groups at many positions of one partition: ``remap_many`` reads such a partition once
    and answers every target from memory (issue 22: one read instead of a search per position).
    The answers — target, method, duplicate window — must be those of the live searches, on every
    partition of the scenario (runs of equal timestamps, timestamps going back, identical records,
    an empty partition, cold-only records first)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from dr_toolkit.kafka import batch
    from dr_toolkit.kafka.mirror import Mirror
    from dr_toolkit.kafka.offsets import anchor_of
    from dr_toolkit.kafka.remap import LogTraits, MemoryPartition, remap_partition, worth_reading_whole
    from dr_toolkit.kafka.rows import NONE, Checkpoint, Position

    topo0, _ledger, topic, _group, _idle, scen = kafka_mirror
    hot, cold = topo0.hot.kafka.bootstrap_servers, topo0.cold.kafka.bootstrap_servers
    groups = [unique(f"many{i}") for i in range(0, 301, 6)]
    admin = AdminClient({"bootstrap.servers": hot, "log_level": 0})
    for i, g in zip(range(0, 301, 6), groups, strict=True):
        tps = [TopicPartition(topic, p, min(i, len(recs))) for p, (recs, _, _) in scen.items()]
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)])[g].result(timeout=60)
    cfg = write_topology(tmp_path / "many.yaml", hot=hot, cold=cold, topics=[topic], groups=groups,
                         ledger_url=f"sqlite:///{tmp_path}/many.db", skew_s=0.07)
    topo = load_topology(cfg)
    from dr_toolkit.ledger import Ledger

    ledger = Ledger.open(topo.ledger.url)
    api.checkpoint(topo, ledger, groups=groups, access=Access.from_env())
    assert worth_reading_whole(len(groups) - 10, 300) and not worth_reading_whole(3, 10_000_000)
    loads: list[tuple[str, int]] = []
    real_load = MemoryPartition.load.__func__  # type: ignore[attr-defined]

    def counting_load(cls, reader, t, p, lo, hi):  # type: ignore[no-untyped-def]
        loads.append((t, p))
        return real_load(cls, reader, t, p, lo, hi)

    MemoryPartition.load = classmethod(counting_load)  # type: ignore[method-assign,assignment]
    try:
        many = batch.remap_many(topo, ledger, groups, access=Access.from_env())
    finally:
        MemoryPartition.load = classmethod(real_load)  # type: ignore[method-assign,assignment]
    assert {p for _t, p in loads} >= {0, 1, 5}, loads  # the partitions with many targets were read whole
    mirror = Mirror.of(topo, Access.from_env())
    with mirror.client("cold") as c:  # the live searches, one by one on one client
        for g in groups:
            live: dict[int, Position] = {}
            for ck in map(Checkpoint.from_row, ledger.latest_checkpoint(g)):
                ct, p = mirror.cold_topic(ck.topic), ck.partition_id
                live[p] = NONE if ck.committed_offset is None else remap_partition(
                    c, ct, p, anchor_of(ck.fingerprint, ck.record_timestamp), *c.watermarks(ct, p),
                    skew_ms=mirror.skew_ms, log=LogTraits(compacted=c.compacted(ct)),
                    taken_at_ms=None if ck.taken_at is None else int(ck.taken_at * 1000)).position()
            for r in many["groups"][g]:
                want = live[r["partition"]]
                got = (r["target_offset"], r["method"], r["duplicate_window"])
                assert got == (want.target_offset, want.method,
                               list(want.duplicate_window) if want.duplicate_window else None), (g, r, want)
                _recs, _, shift = scen[r["partition"]]
                consumed = r["source_offset"]
                if r["target_offset"] is not None:
                    assert r["target_offset"] <= shift + consumed, (g, r)  # never past the next unconsumed
                    if r["method"] == "exact":
                        assert r["target_offset"] == shift + consumed, (g, r)
