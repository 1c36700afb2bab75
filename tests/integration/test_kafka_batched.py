"""The batched Kafka paths of issue 42 give the per-group / per-topic paths' answers, on the real
brokers: committed offsets of many groups (``KafkaCluster.committed_many``: OffsetFetch v8 with
many groups per request, ``kafka/wire.py``) against one consumer per group; the gate's lag of
every topic in one pass (``lag.mirror_lag_many``) against ``mirror_lag`` per topic; and the gate's
signals both ways. A batch that drops a group is an error (never "no commits": the group's
coverage check would then pass on nothing)."""

from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import DrtError
from dr_toolkit.kafka import api, wire
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.lag import mirror_lag, mirror_lag_many
from dr_toolkit.kafka.mirror import Mirror, Side
from dr_toolkit.kafka.signals import kafka_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import T0, Rec, create_topic, mirror, produce, unique, write_topology

pytestmark = pytest.mark.integration


def _setup(hot: str, cold: str, rng: random.Random) -> tuple[list[str], str, dict[str, dict[tuple[str, int], int]]]:
    """Two mirrored topics (one partition of the second 3 records short on cold), a topic hot has
    and cold lacks, and 40 groups at random positions: some never committed, one on the
    unmirrored topic, the others on random partitions of the mirrored ones."""
    tag = unique("bat")
    topics = [f"{tag}-a", f"{tag}-b"]
    lone = f"{tag}-hot-only"
    for t in topics:
        create_topic(hot, t, 3)
        create_topic(cold, t, 3)
    create_topic(hot, lone, 2)
    for t in topics:
        for p in range(3):
            recs = [Rec(f"{t}-{p}-{i}".encode(), T0 + 1000 * i, f"k{i % 3}".encode()) for i in range(12)]
            produce(hot, t, p, recs)
            if (t, p) == (topics[1], 2):
                produce(cold, t, p, recs[:-3])  # cold 3 records behind
            else:
                mirror(hot, cold, t, p)
    produce(hot, lone, 0, [Rec(b"x", T0)])
    truth: dict[str, dict[tuple[str, int], int]] = {}
    with KafkaCluster(hot, timeout_s=15) as c:
        for i in range(40):
            g = f"{tag}-g{i:02d}"
            if i % 7 == 0:
                truth[g] = {}  # never committed
                continue
            if i == 3:
                offs = {(lone, 0): 1, (topics[0], 1): rng.randrange(0, 13)}
            else:
                offs = {(t, p): rng.randrange(0, 13) for t in topics for p in range(3) if rng.random() < 0.6}
                offs = offs or {(topics[0], 0): 0}
            c.commit(g, offs)
            truth[g] = offs
    return topics, lone, truth


def _per_group(side: Side, creds: Any) -> KafkaCluster:
    c = KafkaCluster(side.bootstrap or "", credentials=creds, timeout_s=side.timeout_s, role=side.role)
    c.force_per_group = True  # the oracle: one consumer per group, every partition asked
    return c


def test_batched_answers_equal_the_per_group_and_per_topic_paths(kafka_env, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    hot, cold = kafka_env
    monkeypatch.setattr(wire, "GROUPS_PER_REQUEST", 7)  # 40 groups: 6 OffsetFetch requests, the last one short
    topics, lone, truth = _setup(hot, cold, random.Random(42))
    groups = sorted(truth)

    with KafkaCluster(hot, timeout_s=15) as batched, KafkaCluster(hot, timeout_s=15) as oracle:
        oracle.force_per_group = True
        have = batched.topics()
        got = batched.committed_many(groups, have)
        want = oracle.committed_many(groups, have)
        assert got == want  # group by group, partition by partition
        assert batched.batched is True and oracle.batched is False  # the batched path answered (PLAINTEXT)
        # 1 FindCoordinator + ⌈40 / 7⌉ = 6 OffsetFetch requests
        assert batched.offset_fetch_requests == 7, batched.offset_fetch_requests
    with KafkaCluster(hot, timeout_s=15) as batched, KafkaCluster(hot, timeout_s=15) as oracle:
        oracle.force_per_group = True  # librdkafka's admin ListOffsets
        parts = [(t, p) for t in [*topics, lone] for p in range(2 if t == lone else 3)]
        batched.topics()  # the leaders of the partitions
        assert batched.watermarks_many(parts) == oracle.watermarks_many(parts)
        assert batched.stable_ends(parts) == oracle.stable_ends(parts)
        assert batched.list_offsets_requests == 3 and oracle.list_offsets_requests == 0  # the batched path answered
    assert got == truth  # and both are what was committed (empty for the groups that never did)

    cfg = write_topology(tmp_path / "b.yaml", hot=hot, cold=cold, topics=topics, groups=groups,
                         ledger_url=f"sqlite:///{tmp_path}/b.db", skew_s=2)
    topo = load_topology(cfg)
    ledger = Ledger.open(topo.ledger.url)
    access = Access.none()
    m = Mirror.of(topo, access)

    # the gate's lag in one pass == mirror_lag topic by topic (rows and their proofs)
    many, stats = mirror_lag_many(m, [*topics, lone])
    assert isinstance(many[lone], DrtError) and lone in many[lone].message  # missing on cold: its own error
    assert stats["metadata"] == 2  # once per cluster, whatever the number of topics
    for t in topics:
        one = mirror_lag(m, [t])
        rep = many[t]
        assert not isinstance(rep, DrtError)
        key = [(r.partition, r.hot_end, r.cold_end, r.records_behind, r.method, r.error) for r in one.partitions]
        assert [(r.partition, r.hot_end, r.cold_end, r.records_behind, r.method, r.error)
                for r in rep.partitions] == key
    assert [r.records_behind for r in many[topics[1]].partitions] == [0, 0, 3]  # type: ignore[union-attr]

    # the gate's signals, batched vs the per-group path: the same verdicts and reasons
    api.checkpoint(topo, ledger, groups=[g for g in groups if truth[g]], access=access)
    now = time.time()
    a = {s.name: (s.caught_up, s.reason) for s in kafka_signals(topo, ledger, access, now)}
    b = {s.name: (s.caught_up, s.reason) for s in kafka_signals(topo, ledger, access, now,
                                                                mirror=replace(m, clients=_per_group))}
    assert a == b
    assert a[f"group:{groups[0]}"][0] is False  # never committed -> never checkpointed -> NO_GO
    assert a[topics[1]][0] is False and a[topics[0]][0] is True
    assert a[lone][0] is False  # a committed topic cold lacks is gated: NO_GO
    assert sum(ok for ok, _ in a.values()) == len([g for g in groups if truth[g]]) + 1  # checkpointed groups + topic a


def test_a_batch_that_drops_a_group_never_reads_as_no_commits(kafka_env, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    hot, cold = kafka_env
    topic, group, other = unique("drop"), unique("grp"), unique("grp")
    create_topic(hot, topic, 2)
    create_topic(cold, topic, 2)
    for p in range(2):
        produce(hot, topic, p, [Rec(f"v{i}".encode(), T0 + 1000 * i) for i in range(5)])
        mirror(hot, cold, topic, p)
    with KafkaCluster(hot, timeout_s=15) as c:
        c.commit(group, {(topic, 0): 2})
        c.commit(other, {(topic, 1): 5})
    cfg = write_topology(tmp_path / "d.yaml", hot=hot, cold=cold, topics=[topic], groups=[group, other],
                         ledger_url=f"sqlite:///{tmp_path}/d.db", skew_s=2)
    topo = load_topology(cfg)
    ledger = Ledger.open(topo.ledger.url)
    access = Access.none()
    api.checkpoint(topo, ledger, groups=[group, other], access=access)
    with KafkaCluster(hot, timeout_s=15) as c:
        c.commit(group, {(topic, 0): 2, (topic, 1): 3})  # a partition committed after the checkpoint

    real = wire.parse_offset_fetch

    def dropping(body: bytes) -> dict[str, Any]:
        out = real(body)
        out.pop(group, None)  # the broker's answer lacks one group
        return out

    monkeypatch.setattr(wire, "parse_offset_fetch", dropping)
    with KafkaCluster(hot, timeout_s=5) as c, pytest.raises(DrtError, match="lacks group"):
        c.committed_many([group, other])
    sigs = {s.name: s for s in kafka_signals(topo, ledger, access, time.time())}
    # coverage cannot be checked: NO_GO with the reason, never GO on an empty committed set
    assert not sigs[f"group:{group}"].caught_up
    assert "lacks group" in (sigs[f"group:{group}"].reason or ""), sigs[f"group:{group}"].reason
    monkeypatch.setattr(wire, "parse_offset_fetch", real)
    sigs = {s.name: s for s in kafka_signals(topo, ledger, access, time.time())}
    assert not sigs[f"group:{group}"].caught_up and "not in its checkpoint" in (sigs[f"group:{group}"].reason or "")
    assert sigs[f"group:{other}"].caught_up
