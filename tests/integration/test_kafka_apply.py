"""Applying remapped offsets on the cold cluster: one request or nothing, only to an empty group,
never backwards unless forced, and fully old or fully new across a broker restart."""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Consumer

from dr_toolkit.access import Access
from dr_toolkit.errors import ProblemFound, UnreachableError
from dr_toolkit.kafka import api
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.offsets import apply_offsets
from tests.support.fixtures_kafka import QUIET, committed, create_topic, unique

pytestmark = pytest.mark.integration


def _expected(scen) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {p: shift + consumed for p, (_, consumed, shift) in scen.items() if p != 3}


def test_apply_writes_every_partition_and_audits_before_after(kafka_mirror) -> None:
    topo, ledger, topic, group, _idle, scen = kafka_mirror
    api.checkpoint(topo, ledger, access=Access.from_env())
    res = api.remap(topo, ledger, group, apply=True, run_id="failover-test-1", access=Access.from_env())
    assert res["applied"] is True
    cold = topo.cold.kafka.bootstrap_servers
    got = committed(cold, group, topic, len(scen))
    want = {r["partition"]: r["target_offset"] for r in res["partitions"]}
    assert got == want
    assert all(got[p] == o for p, o in _expected(scen).items())
    ev = ledger.audit_events(run_id="failover-test-1")
    assert [(e["action"], e["status"], e["dry_run"]) for e in ev] == [("apply_offsets", "done", 0)]
    assert ev[0]["before_state"] == {} and ev[0]["after_state"][f"{topic}[0]"] == want[0]
    # Applying again is a no-op move (same offsets), not a backward one.
    assert api.remap(topo, ledger, group, apply=True, access=Access.from_env())["applied"] is True


def test_apply_refuses_a_group_with_members_and_writes_nothing(kafka_mirror) -> None:
    topo, ledger, topic, group, _idle, scen = kafka_mirror
    cold = topo.cold.kafka.bootstrap_servers
    member = Consumer({"bootstrap.servers": cold, "group.id": group, "enable.auto.commit": False,
                       "session.timeout.ms": 6000, **QUIET})
    member.subscribe([topic])
    deadline = time.monotonic() + 20
    while not member.assignment() and time.monotonic() < deadline:
        member.poll(0.2)
    try:
        with pytest.raises(ProblemFound, match="not empty on the cold cluster"):
            api.remap(topo, ledger, group, apply=True, access=Access.from_env())
    finally:
        member.close()
    assert all(o < 0 for o in committed(cold, group, topic, len(scen)).values())
    assert ledger.audit_events(component="kafka")[-1]["status"] == "failed"


def test_apply_refuses_a_backward_move_unless_forced(kafka_mirror) -> None:
    topo, ledger, topic, group, _idle, scen = kafka_mirror
    cold = topo.cold.kafka.bootstrap_servers
    c = KafkaCluster(cold)
    ahead = {(topic, 0): 10_000, (topic, 1): 1}  # partition 0 is ahead of the remap, 1 behind it
    assert c.commit(group, ahead) == {k: None for k in ahead}
    with pytest.raises(ProblemFound, match=r"backwards \(.*\[0\] 10000→"):
        api.remap(topo, ledger, group, apply=True, access=Access.from_env())
    assert committed(cold, group, topic, len(scen)) == {p: ahead.get((topic, p), -1001) for p in scen}
    res = api.remap(topo, ledger, group, apply=True, force=True, access=Access.from_env())
    assert res["applied"] and committed(cold, group, topic, len(scen))[0] == _expected(scen)[0]
    c.close()


def test_broker_refusing_the_commit_leaves_every_partition_unchanged(kafka_env) -> None:
    """A member joins between the checks and the commit: the one request is refused whole."""
    _, cold = kafka_env
    topic, group = unique("race"), unique("g")
    create_topic(cold, topic, 3)
    c = KafkaCluster(cold, timeout_s=5)
    joined: list[Consumer] = []

    def join() -> None:
        m = Consumer({"bootstrap.servers": cold, "group.id": group, "session.timeout.ms": 6000, **QUIET})
        m.subscribe([topic])
        deadline = time.monotonic() + 20
        while not m.assignment() and time.monotonic() < deadline:
            m.poll(0.2)
        joined.append(m)

    try:
        with pytest.raises(ProblemFound, match="unchanged"):
            apply_offsets(c, group, {(topic, p): 5 for p in range(3)}, on_commit=join)
    finally:
        for m in joined:
            m.close()
        c.close()
    assert all(o < 0 for o in committed(cold, group, topic, 3).values())


def _durable_setup(broker, parts: int = 6):  # type: ignore[no-untyped-def]
    topic, group = unique("dur"), unique("g")
    create_topic(broker.address, topic, parts)
    old = {(topic, p): 1 for p in range(parts)}
    new = {(topic, p): 7 + p for p in range(parts)}
    # the first commit to a (re)started broker waits for its group coordinator to load: a set-up
    # step, given as long as a loaded machine needs; the client under test keeps its 3 s
    with KafkaCluster(broker.address, timeout_s=60) as setup:
        assert setup.commit(group, old) == {k: None for k in old}
    c = KafkaCluster(broker.address, timeout_s=3)
    return topic, group, c, old, new


def _state(broker, group, topic, parts) -> dict[tuple[str, int], int]:  # type: ignore[no-untyped-def]
    """The group's offsets as the (just restarted) broker reports them."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return {(topic, p): o for p, o in committed(broker.address, group, topic, parts).items()}
        except Exception:  # the broker may still be loading after its restart
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.child_process(native_abort_retries=2)  # librdkafka may abort (SIGABRT) while its broker is killed: see tests/support/child.py
def test_broker_restart_during_apply_leaves_group_fully_old_or_fully_new(kafka_durable) -> None:
    broker = kafka_durable
    # 1. The broker dies just before the commit and comes back a second later: the apply retries
    #    the same single request and ends fully new.
    topic, group, c, old, new = _durable_setup(broker)

    def crash_and_restart() -> None:
        broker.kill()
        threading.Timer(1.0, broker.start).start()

    res = apply_offsets(c, group, new, on_commit=crash_and_restart, deadline_s=30)
    assert res.written == len(new)
    assert _state(broker, group, topic, 6) == new
    c.close()

    # 2. The broker dies and stays down: the apply fails with exit 3; after the restart the
    #    group holds its old offsets — nothing half-written.
    topic, group, c, old, new = _durable_setup(broker)
    with pytest.raises(UnreachableError, match=broker.address):
        apply_offsets(c, group, new, on_commit=broker.kill, deadline_s=2)
    c.close()
    broker.start()
    assert _state(broker, group, topic, 6) == old

    # 3. Kills at random moments while the commit is in flight, then a restart.
    rng = random.Random(7)
    for _ in range(3):
        topic, group, c, old, new = _durable_setup(broker)
        killer = threading.Timer(rng.uniform(0.0, 0.03), broker.kill)

        def restart_later(k: threading.Timer) -> None:
            k.join()
            time.sleep(0.5)
            broker.start()

        restarter = threading.Thread(target=restart_later, args=(killer,))
        killer.start()
        restarter.start()
        try:
            apply_offsets(c, group, new, deadline_s=20)
        except (UnreachableError, ProblemFound):
            pass
        restarter.join()
        c.close()
        assert _state(broker, group, topic, 6) in (old, new)


def test_many_groups_share_searches_and_apply_together(kafka_mirror) -> None:
    """The batch path: the same answers as the per-group remap, each distinct search once."""
    from dr_toolkit.kafka import batch

    topo, ledger, topic, group, idle, scen = kafka_mirror
    twin = unique("twin")
    with KafkaCluster(topo.hot.kafka.bootstrap_servers) as hot:
        hot.commit(twin, hot.committed(group))  # a second group at exactly the same offsets
    ck = api.checkpoint(topo, ledger, groups=[group, twin, idle], access=Access.from_env())
    # group and twin share every search; the idle group (no commits) needs no read
    assert ck["distinct_searches"] == 2 * len(scen) and len(ck["partitions"]) == 3 * len(scen)
    rm = batch.remap_many(topo, ledger, [group, twin, idle], access=Access.from_env())
    single = {r["partition"]: r["target_offset"] for r in api.remap(topo, ledger, group, access=Access.from_env())["partitions"]}
    for g in (group, twin):
        assert {r["partition"]: r["target_offset"] for r in rm["groups"][g]} == single
    out = batch.apply_many(topo, ledger, rm["groups"], run_id="many", who="ops", access=Access.from_env())
    assert out["failed"] == []
    cold = topo.cold.kafka.bootstrap_servers
    for g in (group, twin):
        assert committed(cold, g, topic, len(scen)) == single
    assert {e["actor"] for e in ledger.audit_events(run_id="many")} == {"ops"}
