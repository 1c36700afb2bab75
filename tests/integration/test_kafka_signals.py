"""The Kafka signals of the failover gate on the real brokers: one per topic (offsets, safe
time) and one per protected group (checkpoint coverage and age)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.kafka import api
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.signals import kafka_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import T0, Rec, create_topic, produce, unique, write_topology

pytestmark = pytest.mark.integration


def test_topic_and_group_signals(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic, other, group = unique("sig"), unique("extra"), unique("grp")
    for t in (topic, other):
        create_topic(hot, t, 2)
        create_topic(cold, t, 2)
    recs = [Rec(f"v{i}".encode(), T0 + 1000 * i) for i in range(10)]
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, recs[:7])
    with KafkaCluster(hot) as c:
        c.commit(group, {(topic, 0): 5, (topic, 1): 0})
    cfg = write_topology(tmp_path / "s.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                         ledger_url=f"sqlite:///{tmp_path}/s.db", skew_s=2)
    topo = load_topology(cfg)
    ledger = Ledger.open(topo.ledger.url)
    access = Access.none()

    now = time.time()
    sigs = {s.name: s for s in kafka_signals(topo, ledger, access, now)}
    t, g = sigs[topic], sigs[f"group:{group}"]
    # 3 unmirrored records: NO_GO, the safe time before the oldest of them minus the skew bound.
    assert not t.caught_up and t.detail["records_behind"] == 3
    assert t.safe_time == (T0 + 7000) / 1000 - 2
    assert not g.caught_up and g.safe_time is None and "never checkpointed" in (g.reason or "")

    produce(cold, topic, 0, recs[7:])
    ck = api.checkpoint(topo, ledger, access=access)
    before = time.time()
    sigs = {s.name: s for s in kafka_signals(topo, ledger, access, time.time())}
    t, g = sigs[topic], sigs[f"group:{group}"]
    assert t.caught_up and t.safe_time is not None and t.safe_time >= before - 0.001 and t.basis
    assert g.caught_up and g.safe_time == ck["taken_at"], g

    # Stale: older than the policy's bound (default 1800 s).
    g_old = {s.name: s for s in kafka_signals(topo, ledger, access, ck["taken_at"] + 3600)}[f"group:{group}"]
    assert not g_old.caught_up and "old" in (g_old.reason or "")

    # The group commits on a topic the checkpoint does not hold: coverage NO_GO until re-checkpointed.
    with KafkaCluster(hot) as c:
        c.commit(group, {(other, 1): 0})
    g = {s.name: s for s in kafka_signals(topo, ledger, access, time.time())}[f"group:{group}"]
    assert not g.caught_up and f"{other}[1]" in (g.reason or "")
    api.checkpoint(topo, ledger, access=access)  # the whole committed set, not only the policy's topics
    g = {s.name: s for s in kafka_signals(topo, ledger, access, time.time())}[f"group:{group}"]
    assert g.caught_up, g.reason


def test_signals_are_no_go_when_hot_is_unreachable(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic, group = unique("sig"), unique("grp")
    create_topic(cold, topic, 1)
    cfg = write_topology(tmp_path / "s.yaml", hot="127.0.0.1:1", cold=cold, topics=[topic], groups=[group],
                         ledger_url=f"sqlite:///{tmp_path}/s.db", timeout_s=1)
    topo = load_topology(cfg)
    sigs = kafka_signals(topo, Ledger.open(topo.ledger.url), Access.none(), time.time())
    assert sigs and all(not s.caught_up and s.safe_time is None and s.reason for s in sigs)
