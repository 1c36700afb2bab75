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
    sigs = {s.name: s for s in kafka_signals(topo, ledger, access, time.time())}
    assert sigs[f"group:{group}"].caught_up, sigs[f"group:{group}"].reason
    assert sigs[other].caught_up  # its lag is gated too (issue 20 #12): nothing on either side yet

    # A committed topic outside the policy with records hot has and cold lacks: its offsets would be
    # carried over onto a copy missing those records, so the gate says NO_GO for it.
    produce(hot, other, 1, recs[:4])
    sigs = {s.name: s for s in kafka_signals(topo, ledger, access, time.time())}
    assert not sigs[other].caught_up and sigs[other].detail["records_behind"] == 4, sigs[other]


def test_signals_are_no_go_when_hot_is_unreachable(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic, group = unique("sig"), unique("grp")
    create_topic(cold, topic, 1)
    cfg = write_topology(tmp_path / "s.yaml", hot="127.0.0.1:1", cold=cold, topics=[topic], groups=[group],
                         ledger_url=f"sqlite:///{tmp_path}/s.db", timeout_s=1)
    topo = load_topology(cfg)
    sigs = kafka_signals(topo, Ledger.open(topo.ledger.url), Access.none(), time.time())
    assert sigs and all(not s.caught_up and s.safe_time is None and s.reason for s in sigs)


@pytest.mark.slow
def test_live_producer_and_mirror_never_give_a_safe_time_past_an_unmirrored_record(mm2, kafka_env,
                                                                                   tmp_path: Path) -> None:
    """The topic proof under load: a producer writes to hot (stamping its records with a clock
    up to the declared skew bound off, either way) while real MirrorMaker 2 copies hot → cold,
    paused now and then (SIGSTOP/SIGCONT) so it falls behind and catches up, and the lag is
    checked over and over. Whatever the interleaving, every record hot acknowledged before a
    check's safe time must have been on cold by the end of that check (MM2 copies each partition
    in order into a new ``hot.<topic>``, so cold's end offset counts hot's records it holds).
    Taking the time after reading hot's ends, or dropping the skew bound, breaks this."""
    import os
    import random
    import signal
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.support.fixtures_kafka import QUIET

    hot, cold = kafka_env
    topic = unique("mm-live")
    remote = mm2.remote_topic(topic)
    parts, skew_s, n = 2, 0.5, 400
    create_topic(hot, topic, parts)
    produce(hot, topic, 0, [Rec(b"first", int(time.time() * 1000))])  # MM2 creates hot.<topic> on cold
    mm2.wait_mirrored([topic])
    acked: list[tuple[float, int, int]] = [(time.time(), 0, 0)]  # (acknowledged at, partition, hot offset)
    topo = load_topology(write_topology(tmp_path / "s.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                                        ledger_url=f"sqlite:///{tmp_path}/s.db", skew_s=skew_s,
                                        replication_policy="default"))
    rnd = random.Random(20261123)
    stop = threading.Event()
    errors: list[BaseException] = []

    def producer() -> None:
        p = Producer({"bootstrap.servers": hot, "linger.ms": 0, "acks": "all", **QUIET})
        got: list = []
        try:
            for i in range(n):
                part = rnd.randrange(parts)
                stamp = int((time.time() + rnd.uniform(-skew_s, skew_s)) * 1000)
                got.clear()
                p.produce(topic, value=f"v{i}".encode(), partition=part, timestamp=stamp,
                          on_delivery=lambda err, msg: got.append((err, msg)))
                p.flush(10)
                err, msg = got[0]
                assert err is None, err
                acked.append((time.time(), part, msg.offset()))
                if rnd.random() < 0.2:
                    time.sleep(rnd.random() * 0.05)
                if i % 100 == 99:  # a quiet spell: the mirror catches up
                    time.sleep(1.5)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    def pauser() -> None:
        """Uneven mirroring: MirrorMaker 2 frozen for up to 0.8 s at a time."""
        assert mm2.proc is not None
        pid = mm2.proc.pid
        while not stop.is_set():
            os.kill(pid, signal.SIGSTOP)
            time.sleep(rnd.random() * 0.8)
            os.kill(pid, signal.SIGCONT)
            time.sleep(rnd.random() * 0.6)

    cc = Consumer({"bootstrap.servers": cold, "group.id": unique("wm"), **QUIET})

    def on_cold() -> dict[int, int]:
        return {q: cc.get_watermark_offsets(TopicPartition(remote, q), timeout=5, cached=False)[1]
                for q in range(parts)}

    threads = [threading.Thread(target=producer, daemon=True), threading.Thread(target=pauser, daemon=True)]
    for t in threads:
        t.start()
    checks, behind, caught_up = 0, 0, 0
    try:
        while checks < 80 and (threads[0].is_alive() or not caught_up):
            res = api.lag(topo, access=Access.none())
            have = on_cold()  # read after the check: what cold held by the end of it, at most
            writes = list(acked)
            checks += 1
            safe = res["safe_time"]
            assert safe is not None, res
            behind += not res["caught_up"]
            caught_up += res["caught_up"]
            late = [(t, q, o) for t, q, o in writes if t < safe and o >= have[q]]
            assert not late, (f"safe time {safe:.3f} is after {len(late)} acknowledged record(s) not on cold, "
                              f"first {late[0]}; on cold {have}; partitions {res['partitions']}")
            if not threads[0].is_alive():
                stop.set()  # the producer is done: let MirrorMaker 2 catch up
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        if mm2.proc is not None:
            os.kill(mm2.proc.pid, signal.SIGCONT)
        cc.close()
    assert not errors, errors
    assert behind >= 1 and caught_up >= 1, (checks, behind, caught_up)


def test_identical_records_at_the_tail_are_never_taken_for_caught_up(kafka_env, tmp_path: Path) -> None:
    """The tail comparison (hot's last record against cold's newest) counts identical records:
    cold holding the first of two identical records at hot's end is one record behind."""
    hot, cold = kafka_env
    topic = unique("tail")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    twin = Rec(b"same", T0 + 1000, b"k")
    produce(hot, topic, 0, [Rec(b"x", T0), twin, twin])
    produce(cold, topic, 0, [Rec(b"cold-only", 5), Rec(b"x", T0), twin])  # shifted by one record
    topo = load_topology(write_topology(tmp_path / "s.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                                        ledger_url=f"sqlite:///{tmp_path}/s.db", skew_s=0.5))
    row = api.lag(topo, access=Access.none())["partitions"][0]
    assert row["records_behind"] == 1 and row["safe_time"] == (T0 + 1000) / 1000 - 0.5, row

    produce(cold, topic, 0, [twin])
    before = time.time()
    row = api.lag(topo, access=Access.none())["partitions"][0]
    assert row["records_behind"] == 0 and row["safe_time"] >= before - 0.001, row
    assert "newest record is hot's last" in row["basis"], row  # proven from the two tails alone
