"""The never-skip invariant of the Kafka remap and lag, attacked on the real Kafka brokers.

Invariant (docs/design.md, Kafka consumer offsets): the position p applied on a cold partition is such that every
record at an offset < p is a copy of a record the group had consumed on hot; ``exact`` means
p is the copy of the first unconsumed record. Each test builds hot and cold partitions with
explicit CreateTimes, commits a group on hot, checkpoints and remaps, and checks p against
the records themselves (read back from cold). The broker's ``offsets_for_times`` answers from
its time index (the largest timestamp so far, not the record order when CreateTimes go back):
the code must use it only as a hint it checks. Cold's records are copied directly (not by
MirrorMaker 2): each test needs exactly these records on cold (offset shifts, cold-only
records, partial copies); the real-MirrorMaker-2 tests are in test_kafka_mm2.py.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from dr_toolkit.access import Access
from dr_toolkit.kafka import api
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import Topology, load_topology
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
MIN = 60_000


def _setup(kafka_env: tuple[str, str], tmp_path: Path, hot_recs: list[Rec], cold_recs: list[Rec],
           commit: int | None, *, skew_s: float, cold_name: str | None = None,
           **kw: Any) -> tuple[Topology, Ledger, str, str]:
    hot, cold = kafka_env
    topic, group = unique("ns"), unique("grp")
    create_topic(hot, topic, 1)
    create_topic(cold, cold_name.format(topic) if cold_name else topic, 1)
    produce(hot, topic, 0, hot_recs)
    produce(cold, cold_name.format(topic) if cold_name else topic, 0, cold_recs)
    if commit is not None:
        with KafkaCluster(hot) as c:
            assert c.commit(group, {(topic, 0): commit}) == {(topic, 0): None}
    cfg = write_topology(tmp_path / f"{topic}.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                         ledger_url=f"sqlite:///{tmp_path}/ledger.db", skew_s=skew_s, **kw)
    topo = load_topology(cfg)
    return topo, Ledger.open(topo.ledger.url), topic, group


def _check(cold_addr: str, cold_topic: str, hot_recs: list[Rec], consumed: int, target: int) -> int:
    """Assert never skip; return the offset of the first unconsumed copy (exactness check)."""
    cold = read_all(cold_addr, cold_topic, 0)
    ident = Counter((r.value, r.timestamp) for r in hot_recs[:consumed])
    below = Counter((r.value, r.timestamp) for r in cold[:target] if not (r.value or b"").startswith(b"cold-only"))
    over = {k: n for k, n in below.items() if n > ident.get(k, 0)}
    assert not over, f"skipped: cold records below {target} not consumed on hot: {list(over)[:3]}"
    seen: Counter[tuple[bytes | None, int]] = Counter()
    for off, r in enumerate(cold):
        k = (r.value, r.timestamp)
        if not (r.value or b"").startswith(b"cold-only"):
            seen[k] += 1
            if seen[k] > ident.get(k, 0):
                return off
    return len(cold)


def _remap_one(topo: Topology, ledger: Ledger, group: str) -> dict[str, Any]:
    api.checkpoint(topo, ledger, access=Access.from_env())
    res = api.remap(topo, ledger, group, access=Access.from_env())
    (part,) = res["partitions"]
    return part  # type: ignore[no-any-return]


def _skewed(n: int, rng: random.Random, spacing_ms: int, offsets_ms: list[int]) -> list[Rec]:
    """Producers on hosts whose clocks are off by ``offsets_ms`` (e.g. 0, +5 min, +10 min),
    interleaved; CreateTime = true time + the host's offset."""
    return [Rec(f"v{i}".encode(), T0 + i * spacing_ms + rng.choice(offsets_ms), b"k") for i in range(n)]


def test_skewed_producer_clocks_never_skip_and_are_exact_where_provable(kafka_env, tmp_path: Path) -> None:
    rng = random.Random(7)
    hot_recs = _skewed(120, rng, MIN, [0, 5 * MIN, 10 * MIN])  # one record a minute, hosts +5/+10 min
    shift = [Rec(f"cold-only-{i}".encode(), 5 + i) for i in range(3)]
    exact = 0
    for consumed in (1, 30, 77, 119, 120):
        topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, shift + hot_recs, consumed, skew_s=600)
        part = _remap_one(topo, ledger, group)
        first = _check(kafka_env[1], topic, hot_recs, consumed, part["target_offset"])
        assert part["target_offset"] <= first
        if part["method"] == "exact":
            exact += 1
            assert part["target_offset"] == first
        else:
            assert part["method"] == "skew_bound" and part["may_reread"] >= first - part["target_offset"]
    assert exact >= 3


def test_skew_larger_than_the_data_falls_back_to_a_safe_position(kafka_env, tmp_path: Path) -> None:
    """All records within the skew bound of each other: nothing is provable; the answer is safe
    and says how many records may be re-read (the old code reported a wrong ``exact``)."""
    rng = random.Random(3)
    hot_recs = _skewed(60, rng, 10, [0, 30_000])  # hosts 30 s apart, 10 ms between records
    topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, hot_recs, 40, skew_s=30)
    part = _remap_one(topo, ledger, group)
    first = _check(kafka_env[1], topic, hot_recs, 40, part["target_offset"])
    assert part["method"] == "skew_bound" and part["target_offset"] <= first and part["may_reread"] > 0


def test_identical_heartbeats_around_the_anchor(kafka_env, tmp_path: Path) -> None:
    beat = [Rec(b"heartbeat", T0 + 5000) for _ in range(6)]
    hot_recs = [Rec(f"a{i}".encode(), T0 + 100 * i) for i in range(20)] + beat + \
        [Rec(f"b{i}".encode(), T0 + 6000 + 100 * i) for i in range(10)]
    shift = [Rec(b"cold-only-x", 1)]
    for consumed in (20, 21, 23, 26, 27):
        topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, shift + hot_recs, consumed, skew_s=0.5)
        part = _remap_one(topo, ledger, group)
        first = _check(kafka_env[1], topic, hot_recs, consumed, part["target_offset"])
        assert (part["method"], part["target_offset"]) == ("exact", first), (consumed, part)


def test_equal_timestamp_run_longer_than_the_scan_window(kafka_env, tmp_path: Path) -> None:
    run = [Rec(f"same{i}".encode(), T0 + 1000) for i in range(300)]  # > the 64-record window
    hot_recs = [Rec(b"before", T0)] + run + [Rec(b"after", T0 + 2000)]
    topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, hot_recs, 250, skew_s=0)
    part = _remap_one(topo, ledger, group)
    assert (part["method"], part["target_offset"]) == ("exact", 250)


def test_partition_empty_at_checkpoint_that_later_receives_records(kafka_env, tmp_path: Path) -> None:
    """The group committed 0 on an empty partition: resume at the first record mirrored after
    the checkpoint (0), not at cold's end."""
    topo, ledger, topic, group = _setup(kafka_env, tmp_path, [], [], 0, skew_s=1)
    api.checkpoint(topo, ledger, access=Access.from_env())
    import time as _t

    now = int(_t.time() * 1000)
    later = [Rec(f"late{i}".encode(), now + 5000 + i) for i in range(5)]
    produce(kafka_env[0], topic, 0, later)
    produce(kafka_env[1], topic, 0, later)
    (part,) = api.remap(topo, ledger, group, access=Access.from_env())["partitions"]
    assert (part["method"], part["target_offset"]) == ("time", 0)


def test_transactional_topic_committed_and_aborted(kafka_env, tmp_path: Path) -> None:
    """Transactions with commit and abort markers on the real broker. The mirror copies committed
    records only (read_committed, as MirrorMaker 2 does); the broker never returns the aborted
    record to a read_committed reader, so markers and the aborted record are offsets without a
    record on hot that the remap must step over."""
    hot, cold = kafka_env
    topic, group = unique("tx"), unique("grp")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    p = Producer({"bootstrap.servers": hot, "transactional.id": unique("tid"), "linger.ms": 0,
                  "batch.num.messages": 1, **QUIET})
    p.init_transactions(10)
    layout = [("commit", [b"c1", b"c2"]), ("abort", [b"a1"]), ("commit", [b"c3"])]
    ts = {b"c1": T0, b"c2": T0 + 10, b"a1": T0 + 20, b"c3": T0 + 30}
    for end, vals in layout:
        p.begin_transaction()
        for v in vals:
            p.produce(topic, v, partition=0, timestamp=ts[v])
            p.flush(10)
        (p.commit_transaction if end == "commit" else p.abort_transaction)(10)
    committed_recs = [Rec(v, ts[v]) for v in (b"c1", b"c2", b"c3")]
    produce(cold, topic, 0, [Rec(b"cold-only-0", 1)] + committed_recs)
    # hot offsets: c1 0, c2 1, marker 2, a1 3, marker 4, c3 5, marker 6 -> end 7
    cfg = write_topology(tmp_path / "tx.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                         ledger_url=f"sqlite:///{tmp_path}/tx.db", skew_s=0)
    topo = load_topology(cfg)
    ledger = Ledger.open(topo.ledger.url)
    for committed_at, expected in ((7, 4), (5, 3), (2, 3), (1, 2)):
        with KafkaCluster(hot) as c:
            c.commit(group, {(topic, 0): committed_at})
        part = _remap_one(topo, ledger, group)
        assert part["target_offset"] == expected, (committed_at, part)


def test_compacted_topic_is_checkpointed_and_remapped(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = unique("compact"), unique("grp")
    for addr in (hot, cold):
        admin = AdminClient({"bootstrap.servers": addr, **QUIET})
        for f in admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})]).values():
            f.result(timeout=15)
    recs = [Rec(f"v{i}".encode(), T0 + 10 * i, f"key{i % 4}".encode()) for i in range(40)]
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, [Rec(b"cold-only", 1, b"x")] + recs)
    with KafkaCluster(hot) as c:
        c.commit(group, {(topic, 0): 25})
    cfg = write_topology(tmp_path / "c.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                         ledger_url=f"sqlite:///{tmp_path}/c.db", skew_s=0)
    topo = load_topology(cfg)
    part = _remap_one(topo, Ledger.open(topo.ledger.url), group)
    assert (part["method"], part["target_offset"]) == ("exact", 26)


def test_retention_trimmed_head_on_cold(kafka_env, tmp_path: Path) -> None:
    """Cold lacks hot's first 30 records (trimmed, or mirrored from later on): a group that
    stopped inside the missing part resumes at cold's start; one after it exactly."""
    hot_recs = [Rec(f"v{i}".encode(), T0 + 100 * i) for i in range(60)]
    for consumed, want in ((10, 0), (45, 15)):
        topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, hot_recs[30:], consumed, skew_s=0.2)
        part = _remap_one(topo, ledger, group)
        assert part["target_offset"] == want, (consumed, part)


def test_renamed_topics_default_replication_policy(kafka_env, tmp_path: Path) -> None:
    hot_recs = [Rec(f"v{i}".encode(), T0 + 100 * i) for i in range(30)]
    topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, [Rec(b"cold-only", 1)] + hot_recs[:25], 12,
                                        skew_s=0, cold_name="hot.{}", replication_policy="default")
    part = _remap_one(topo, ledger, group)
    assert (part["cold_topic"], part["method"], part["target_offset"]) == (f"hot.{topic}", "exact", 13)
    (lag,) = api.lag(topo, access=Access.from_env())["partitions"]
    assert lag["records_behind"] == 5 and lag["oldest_unmirrored_ts"] == (T0 + 2500) / 1000


def test_lag_never_reads_zero_when_the_newest_cold_record_came_from_a_fast_clock(kafka_env,
                                                                                 tmp_path: Path) -> None:
    """Hot holds 100 unmirrored records; cold's newest came from a host 10 min ahead. The safe
    time lies before the oldest unmirrored record (minus the skew bound)."""
    rng = random.Random(11)
    hot_recs = _skewed(150, rng, 1000, [0, 10 * MIN])
    hot_recs[49] = Rec(b"fast", T0 + 49_000 + 10 * MIN, b"k")  # cold's newest: from the fast host
    topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, hot_recs[:50], None, skew_s=600)
    (p,) = api.lag(topo, access=Access.from_env())["partitions"]
    assert p["records_behind"] >= 100
    oldest_true = min(T0 + 1000 * i for i in range(50, 150)) / 1000  # true (append) time of the unmirrored
    assert p["safe_time"] is not None and p["safe_time"] <= oldest_true
    assert p["seconds_behind"] > 0


def test_mm2_offset_syncs_are_used_and_cross_checked(kafka_env, tmp_path: Path) -> None:
    """MM2-style offset-sync records on hot. Where the search cannot prove the position (skew
    bound larger than the data), MM2's re-read-only translation narrows the duplicate window;
    where the search is exact, a sync claiming a later position is reported, never followed."""
    from dr_toolkit.kafka.mm2 import encode_sync

    hot, cold = kafka_env
    rng = random.Random(5)
    hot_recs = _skewed(50, rng, 10, [0, 20_000])
    shift = [Rec(f"cold-only-{i}".encode(), T0 + i) for i in range(3)]  # nothing older: no proof
    syncs_topic = unique("mm2-offset-syncs.cold.internal")
    create_topic(hot, syncs_topic, 1)
    topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, shift + hot_recs, 30, skew_s=20,
                                        policy=None)
    # MM2 synced upstream 20 -> downstream 23 (the shift of 3), and a bogus one at 30 -> 40.
    produce(hot, syncs_topic, 0, [Rec(encode_sync(topic, 0, 20, 23)[1], T0, encode_sync(topic, 0, 20, 23)[0])])
    doc = topo.model_dump()
    doc["clusters"]["hot"]["kafka"]["mm2_offset_syncs_topic"] = syncs_topic
    topo = Topology.model_validate(doc)
    api.checkpoint(topo, ledger, access=Access.from_env())
    res = api.remap(topo, ledger, group, access=Access.from_env())
    (part,) = res["partitions"]
    first = _check(cold, topic, hot_recs, 30, part["target_offset"])
    # upstream 30 is past the sync at 20: MM2 says 23 + 1 = 24, safe (the true position is 33).
    assert (part["method"], part["target_offset"], part["mm2_target"]) == ("mm2", 24, 24)
    assert part["target_offset"] <= first == 33 and res["mm2"]["disagreements"] == 0

    hot_exact = [Rec(f"e{i}".encode(), T0 + 10 * i) for i in range(50)]
    old = [Rec(f"cold-only-{i}".encode(), 5 + i) for i in range(3)]
    topo0, ledger0, topic0, group0 = _setup(kafka_env, tmp_path, hot_exact, old + hot_exact, 30, skew_s=0)
    doc0 = topo0.model_dump()
    doc0["clusters"]["hot"]["kafka"]["mm2_offset_syncs_topic"] = syncs_topic
    b = encode_sync(topic0, 0, 30, 40)
    produce(hot, syncs_topic, 0, [Rec(b[1], T0, b[0])])
    topo0 = Topology.model_validate(doc0)
    api.checkpoint(topo0, ledger0, access=Access.from_env())
    res = api.remap(topo0, ledger0, group0, access=Access.from_env())
    (part,) = res["partitions"]
    assert (part["method"], part["target_offset"], part["mm2_target"]) == ("exact", 33, 40)
    assert res["mm2"]["disagreements"] == 1 and "after the proven position" in part["mm2_disagrees"]


def test_mm2_checkpoints_are_used_and_cross_checked(kafka_env, tmp_path: Path) -> None:
    """MM2's checkpoints topic on cold (records in MM2's own Checkpoint format). Where the
    search cannot prove the position, MM2's checkpoint for the same upstream offset narrows the
    duplicate window; a checkpoint of a later upstream offset is not used; where the search is
    exact, a checkpoint claiming a later position is reported, never followed."""
    from dr_toolkit.kafka.mm2 import decode_checkpoint, encode_checkpoint

    assert decode_checkpoint(*encode_checkpoint("g", "hot.t", 3, 10, 12, "meta")) == ("g", "hot.t", 3, 10, 12)
    hot, cold = kafka_env
    rng = random.Random(6)
    hot_recs = _skewed(50, rng, 10, [0, 20_000])
    shift = [Rec(f"cold-only-{i}".encode(), T0 + i) for i in range(3)]  # nothing older: no proof
    cps_topic = unique("hot.checkpoints.internal")
    create_topic(cold, cps_topic, 1)
    topo, ledger, topic, group = _setup(kafka_env, tmp_path, hot_recs, shift + hot_recs, 30, skew_s=20,
                                        policy=None)
    doc = topo.model_dump()
    doc["clusters"]["cold"]["kafka"]["mm2_checkpoints_topic"] = cps_topic

    def checkpoint_record(g: str, up: int, down: int) -> Rec:
        k, v = encode_checkpoint(g, topic, 0, up, down)
        return Rec(v, T0, k)

    # MM2 checkpointed the group at upstream 30 -> downstream 33 (the true position), another group elsewhere
    produce(cold, cps_topic, 0, [checkpoint_record("other", 30, 49), checkpoint_record(group, 30, 33)])
    topo = Topology.model_validate(doc)
    api.checkpoint(topo, ledger, access=Access.from_env())
    res = api.remap(topo, ledger, group, access=Access.from_env())
    (part,) = res["partitions"]
    first = _check(cold, topic, hot_recs, 30, part["target_offset"])
    assert (part["method"], part["target_offset"], part["mm2_checkpoint"]) == ("mm2", 33, 33) and first == 33
    assert res["mm2_checkpoints"] == {"topic": cps_topic, "partitions_checkpointed": 1, "disagreements": 0}

    # a newer MM2 checkpoint of a later upstream offset (the group moved on): not a translation of 30
    produce(cold, cps_topic, 0, [checkpoint_record(group, 40, 43)])
    (part,) = api.remap(topo, ledger, group, access=Access.from_env())["partitions"]
    assert part["mm2_checkpoint"] is None and part["method"] == "skew_bound"
    assert _check(cold, topic, hot_recs, 30, part["target_offset"]) >= part["target_offset"]

    hot_exact = [Rec(f"e{i}".encode(), T0 + 10 * i) for i in range(50)]
    old = [Rec(f"cold-only-{i}".encode(), 5 + i) for i in range(3)]
    topo0, ledger0, topic0, group0 = _setup(kafka_env, tmp_path, hot_exact, old + hot_exact, 30, skew_s=0)
    doc0 = topo0.model_dump()
    doc0["clusters"]["cold"]["kafka"]["mm2_checkpoints_topic"] = cps_topic
    k, v = encode_checkpoint(group0, topic0, 0, 30, 40)  # wrong: would skip 7 records
    produce(cold, cps_topic, 0, [Rec(v, T0, k)])
    topo0 = Topology.model_validate(doc0)
    api.checkpoint(topo0, ledger0, access=Access.from_env())
    res = api.remap(topo0, ledger0, group0, access=Access.from_env())
    (part,) = res["partitions"]
    assert (part["method"], part["target_offset"], part["mm2_checkpoint"]) == ("exact", 33, 40)
    assert res["mm2_checkpoints"]["disagreements"] == 1 and "after the proven position" in part["mm2_disagrees"]
