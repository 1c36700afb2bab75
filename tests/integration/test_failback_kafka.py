"""Kafka failback (issue 40) on the real brokers and real MirrorMaker 2: the divergence of the old
hot cluster, keeping it aside, and re-protect (the reverse flow's evidence, the groups' offsets
remapped back with the never-skip guarantee).

The story each test plays: a forward MM2 (IdentityReplicationPolicy) mirrors hot → cold, a group
commits on hot, the forward flow stops (the failover), the group's offsets are remapped onto
cold, records land on the old hot after that (the divergence) while producers write on cold (the
new active) and the group reads on there. Ground truth is the clusters' own records.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from dr_toolkit.access import Access
from dr_toolkit.errors import ProblemFound
from dr_toolkit.failback import kafka as fk
from dr_toolkit.kafka.checkpoint import checkpoint_groups
from dr_toolkit.kafka.holdings import record_proven
from dr_toolkit.kafka.lag import mirror_lag
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.kafka.offsets import apply_offsets, remap_groups
from dr_toolkit.kafka.rows import offsets_of
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import Topology, load_topology
from drt_servers.kafka import MirrorMaker2
from tests.support.fixtures_kafka import (
    QUIET,
    T0,
    Rec,
    commit_after_consuming,
    committed,
    create_topic,
    mirror,
    produce,
    read_all,
    unique,
)

pytestmark = pytest.mark.integration

N = 30  # records each partition held before the failover (all mirrored)
DIVERGENT = {0: 5, 1: 3}  # records that land on the old hot after the failover
ACTIVE = {0: 12, 1: 7}  # records producers write on the active cluster after the failover


def _recs(tag: str, p: int, n: int, t0: int) -> list[Rec]:
    return [Rec(f"{tag}-{p}-{i}".encode(), t0 + 10 * i, f"k{i % 3}".encode(), [("src", tag.encode())])
            for i in range(n)]


def _topology(path: Path, hot: str, cold: str, topic: str, groups: list[str], ledger: str,
              aliases: tuple[str, str], reverse_policy: str = "identity") -> Topology:
    """Both directions described: the cold endpoint's cold-role fields are the forward mirror's,
    the old hot endpoint's describe the reverse mirror (its checkpoints on the old hot, its offset
    syncs on the active cluster)."""
    h, c = aliases
    doc = {
        "version": 1,
        "clusters": {
            "hot": {"role": "hot", "kafka": {"bootstrap_servers": hot, "timeout_s": 5.0, "max_clock_skew_s": 0.0,
                                             "replication_policy": reverse_policy, "source_alias": c,
                                             "mm2_offset_syncs_topic": f"mm2-offset-syncs.{c}.internal",
                                             "mm2_checkpoints_topic": f"{c}.checkpoints.internal"}},
            "cold": {"role": "cold", "kafka": {"bootstrap_servers": cold, "timeout_s": 5.0, "max_clock_skew_s": 0.0,
                                               "replication_policy": "identity", "source_alias": h,
                                               "mm2_offset_syncs_topic": f"mm2-offset-syncs.{h}.internal",
                                               "mm2_checkpoints_topic": f"{h}.checkpoints.internal"}},
        },
        "policies": {"kafka": [{"name": "stream", "topics": [topic], "groups": groups}]},
        "ledger": {"url": ledger},
    }
    path.write_text(yaml.safe_dump(doc))
    return load_topology(path)


def _wait_copied(src: str, dst: str, topic: str, parts: list[int], timeout: float = 120.0) -> None:
    """Until ``dst`` holds, as its newest record of each partition, ``src``'s newest one."""
    deadline = time.monotonic() + timeout
    while True:
        ok = all((lambda a, b: bool(a) and bool(b) and (a[-1].value, a[-1].timestamp) == (b[-1].value, b[-1].timestamp))(
            read_all(src, topic, p), read_all(dst, topic, p)) for p in parts)
        if ok:
            return
        assert time.monotonic() < deadline, f"the reverse flow did not copy {topic} within {timeout:.0f}s"
        time.sleep(0.5)


def _read_from(address: str, topic: str, p: int, offset: int) -> list[Rec]:
    """What a consumer positioned at ``offset`` reads to the partition's end."""
    c = Consumer({"bootstrap.servers": address, "group.id": unique("rd"), "enable.auto.commit": False,
                  "enable.partition.eof": True, **QUIET})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
    out: list[Rec] = []
    if offset < hi:
        c.assign([TopicPartition(topic, p, offset)])
        deadline = time.monotonic() + 30
        done = False
        while not done and time.monotonic() < deadline:
            msgs: list[Any] = c.consume(500, timeout=0.3)
            for m in msgs:
                if m.error():
                    done = True
                    break
                out.append(Rec(m.value(), m.timestamp()[1], m.key(), list(m.headers() or [])))
                if m.offset() >= hi - 1:
                    done = True
    c.close()
    return out


def _failover(topo: Topology, ledger: Ledger, access: Access, group: str) -> None:
    """What the runbook does to Kafka at a failover: checkpoint on hot, remap onto cold, apply."""
    mirror = Mirror.of(topo, access)
    ck = checkpoint_groups(mirror, ledger, [group])
    with mirror.client("cold") as cold:
        done = remap_groups(mirror, cold, {group: ck.partitions})
        apply_offsets(cold, group, offsets_of(done.groups[group].rows), ledger=ledger)


def _scenario(hot: str, cold: str, tmp: Path, *, gate_proof: bool, forward_mm2: bool = True,
              reverse_policy: str = "identity") -> dict[str, Any]:
    """Forward flow, a group on hot, the failover, writes on both sides, the group reading on the
    active cluster. Returns what the tests need. ``forward_mm2`` False: the records are copied by
    the test (:func:`mirror`), the same records in the same order."""
    uid = uuid.uuid4().hex[:6]
    topic, group, group2 = unique("fb-orders"), unique("fbgrp"), unique("fbidle")
    aliases = (f"fbh{uid}", f"fbc{uid}")
    create_topic(hot, topic, 2)
    for p in (0, 1):
        produce(hot, topic, p, _recs("pre", p, N, T0))
    if forward_mm2:
        fwd = MirrorMaker2(tmp / "mm2-fwd", hot, cold, topics=topic, policy="identity", aliases=aliases,
                           heap="256m")
        fwd.start()
        try:
            fwd.wait_mirrored([topic])
        finally:
            fwd.kill()  # the failover: the forward flow stops
    else:
        create_topic(cold, topic, 2)
        for p in (0, 1):
            assert mirror(hot, cold, topic, p) == N
    commit_after_consuming(hot, group, topic, {0: 20, 1: N})
    commit_after_consuming(hot, group2, topic, {0: 20, 1: 25})  # reads nothing more after the failover
    topo = _topology(tmp / "drt.yaml", hot, cold, topic, [group, group2], f"sqlite:///{tmp}/ledger.db", aliases,
                     reverse_policy)
    ledger, access = Ledger.open(topo.ledger.url), Access.from_env()
    if gate_proof:  # the gate's check before the failover: it keeps the proven position per partition
        report = mirror_lag(Mirror.of(topo, access), [topic])
        assert all(r.records_behind == 0 for r in report.partitions), report.to_json()
        record_proven(ledger, report, {topic: 2})
    for g in (group, group2):
        _failover(topo, ledger, access, g)
    assert committed(cold, group, topic, 2) == {0: 20, 1: N}
    assert committed(cold, group2, topic, 2) == {0: 20, 1: 25}
    for p in (0, 1):
        produce(hot, topic, p, _recs("div", p, DIVERGENT[p], T0 + 10_000))  # the old hot's loss window
        produce(cold, topic, p, _recs("act", p, ACTIVE[p], T0 + 20_000))  # the new active's writes
    # the group reads on on the active cluster: 6 of the new records of p0, none of p1's (it sits at
    # the last mirrored record: remapped back, it must not point into the divergent ones)
    commit_after_consuming(cold, group, topic, {0: N + 6, 1: N})
    return {"topic": topic, "group": group, "group2": group2, "topo": topo, "ledger": ledger, "access": access, "aliases": aliases}


def _aside(hot: str, name: str, p: int) -> list[Rec]:
    return read_all(hot, name, p)


def test_divergence_set_aside_and_reprotect_never_skip(kafka_env: tuple[str, str], tmp_path: Path) -> None:
    """Every divergent record is in the report and in the aside topic (idempotent); with no reverse
    flow re-protect fails with one line; with the reverse MM2 flow running, the group remapped
    back onto the old hot reads every record the active cluster had after its committed position,
    each once, and none of the divergent ones."""
    hot, cold = kafka_env
    s = _scenario(hot, cold, tmp_path, gate_proof=True)
    topic, group, topo, ledger, access = s["topic"], s["group"], s["topo"], s["ledger"], s["access"]

    items = fk.divergence(topo, ledger, access, recovery_point=None)
    by_where = {i.where: i for i in items}
    assert set(by_where) == {f"{topic}:0", f"{topic}:1"}, [i.to_json() for i in items]
    for p in (0, 1):
        d = by_where[f"{topic}:{p}"].detail
        assert "unproven" not in d, d
        assert (d["first_offset"], d["last_offset"], d["count"]) == (N, N + DIVERGENT[p] - 1, DIVERGENT[p]), d
        assert (d["first_create_time"], d["last_create_time"]) == (T0 + 10_000, T0 + 10_000 + 10 * (DIVERGENT[p] - 1))
        assert d["active_boundary"] == N and d["anchor"]["source"] == "the gate's proof", d

    run_id = "fb-" + uuid.uuid4().hex[:6]
    kept = fk.set_aside(topo, ledger, access, items, run_id=run_id)
    again = fk.set_aside(topo, ledger, access, items, run_id=run_id)  # a resumed run: nothing twice
    name = fk.aside_topic(run_id, topic)
    assert name.startswith("__") and all(k.kept_at and name in k.kept_at for k in kept)
    assert [k.kept_at for k in kept] == [k.kept_at for k in again]
    for p in (0, 1):
        assert _aside(hot, name, p) == _recs("div", p, DIVERGENT[p], T0 + 10_000)

    res = fk.reprotect(topo, ledger, access, run_id=run_id)
    assert res["status"] == "failed" and "no reverse MirrorMaker 2 flow cold -> hot" in res["message"], res
    assert "\n" not in res["message"]

    h, c = s["aliases"]
    rev = MirrorMaker2(tmp_path / "mm2-rev", cold, hot, topics=topic, policy="identity", aliases=(c, h),
                       heap="256m", extra={"sync.group.offsets.enabled": "false"})
    rev.start()
    try:
        _wait_copied(cold, hot, topic, [0, 1])
        res = fk.reprotect(topo, ledger, access, run_id=run_id)
    finally:
        rev.kill()
    assert res["status"] == "done", res
    assert sorted(res["reverse_flow"]["copied_back_partitions"]) == [f"{topic}[0]", f"{topic}[1]"], res
    div = {(r.value, r.timestamp) for p in (0, 1) for r in _recs("div", p, DIVERGENT[p], T0 + 10_000)}
    for g in (group, s["group2"]):
        positions, active_committed = committed(hot, g, topic, 2), committed(cold, g, topic, 2)
        for p in (0, 1):
            want = _read_from(cold, topic, p, active_committed[p])
            got = _read_from(hot, topic, p, positions[p])
            assert not {(r.value, r.timestamp) for r in got} & div, (g, p, positions, res["groups"][g])
            # never skip, never twice: what a consumer of the group reads on the old hot from its
            # remapped position is exactly what the active cluster had after its committed position
            assert got == want, (g, p, positions[p], len(got), len(want), res["groups"][g])
    # With the reverse flow's copies on the old hot and no anchor kept from before it (a fresh ledger),
    # the records' identity is ambiguous: every partition is an unproven item, never "no divergence".
    blind = fk.divergence(topo, Ledger.open(f"sqlite:///{tmp_path}/fresh.db"), access, recovery_point=None)
    assert sorted(i.where for i in blind) == [f"{topic}:0", f"{topic}:1"], [i.to_json() for i in blind]
    assert all(i.detail.get("unproven") for i in blind), [i.to_json() for i in blind]
    # The reverse flow, started with no stored position, copied the active's whole log again (MM2 begins
    # at the log start): its copies of the pre-failover records are told from the divergent ones.
    for p in (0, 1):
        part = res["partitions"][f"{topic}[{p}]"]
        assert (part["reverse_start"], part["divergent"], part["copied_back"], part["copied_again"]) == (
            N, DIVERGENT[p], ACTIVE[p], N), part


def test_divergence_proven_from_the_records_alone_and_no_reverse_flow_fails(kafka_env: tuple[str, str], tmp_path: Path) -> None:
    """No gate proof in the ledger: cold's position on the old hot is proven from the records'
    identity alone (cold's newest records, written on cold directly, are passed over), the
    divergence is exact; re-protect with no reverse flow fails with one line, and the dry run too."""
    hot, cold = kafka_env
    s = _scenario(hot, cold, tmp_path, gate_proof=False)
    topic, topo, ledger, access = s["topic"], s["topo"], s["ledger"], s["access"]
    items = fk.divergence(topo, ledger, access, recovery_point=None)
    got = {i.where: (i.detail["first_offset"], i.detail["count"], i.detail.get("unproven")) for i in items}
    assert got == {f"{topic}:{p}": (N, DIVERGENT[p], None) for p in (0, 1)}, [i.to_json() for i in items]
    for p in (0, 1):
        assert "identity of the records" in items[p].detail["anchor"]["source"]
    for dry in (True, False):
        res = fk.reprotect(topo, ledger, access, run_id="fb-none", dry_run=dry)
        assert res["status"] == "failed", res
        assert res["message"].startswith("no reverse MirrorMaker 2 flow cold -> hot") and "\n" not in res["message"]


def test_unproven_position_is_an_item_never_no_divergence(kafka_env: tuple[str, str], tmp_path: Path) -> None:
    """The active cluster holds only records of its own (none is a copy of an old hot record) and
    no proof was kept: the partition is an item saying its position is unproven, listing every
    record the old hot holds — never "no divergence"."""
    hot, cold = kafka_env
    topic, group = unique("fb-unproven"), unique("fbgrp")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    produce(hot, topic, 0, _recs("pre", 0, 10, T0))
    produce(cold, topic, 0, _recs("other", 0, 4, T0))
    topo = _topology(tmp_path / "drt.yaml", hot, cold, topic, [group], f"sqlite:///{tmp_path}/l.db", ("x1", "y1"))
    items = fk.divergence(topo, Ledger.open(topo.ledger.url), Access.from_env(), recovery_point=None)
    assert len(items) == 1 and items[0].detail.get("unproven"), [i.to_json() for i in items]
    assert (items[0].detail["first_offset"], items[0].detail["count"]) == (0, 10)


def test_reprotect_never_points_into_the_divergent_records(kafka_env: tuple[str, str], tmp_path: Path) -> None:
    """A reverse flow that copies the delta only (the active's records since the failover, here
    copied by the test: MirrorMaker 2 as run here always starts at the log start): the group that
    sat at the last mirrored record is remapped exactly onto the old hot's first divergent record;
    re-protect moves it past them, to the copy of its next record — it reads exactly the active's
    records after its committed position, none of the divergent ones."""
    hot, cold = kafka_env
    s = _scenario(hot, cold, tmp_path, gate_proof=True, forward_mm2=False)
    topic, group, topo, ledger, access = s["topic"], s["group"], s["topo"], s["ledger"], s["access"]
    # a set_aside killed after 2 of partition 0's records were acknowledged: the resumed one copies the rest
    name = fk.aside_topic("fb-delta", topic)
    create_topic(hot, name, 2)
    produce(hot, name, 0, _recs("div", 0, 2, T0 + 10_000))
    found = fk.divergence(topo, ledger, access, recovery_point=None)
    items = fk.set_aside(topo, ledger, access, found, run_id="fb-delta")
    assert sorted((i.where, i.detail["count"]) for i in items) == [(f"{topic}:{p}", DIVERGENT[p]) for p in (0, 1)]
    for p in (0, 1):
        assert read_all(hot, name, p) == _recs("div", p, DIVERGENT[p], T0 + 10_000)
    # an aside topic holding anything else is refused, nothing copied
    other = fk.aside_topic("fb-other", topic)
    create_topic(hot, other, 2)
    produce(hot, other, 1, _recs("zzz", 1, 1, T0))
    with pytest.raises(ProblemFound, match="not .*divergent ones in order"):
        fk.set_aside(topo, ledger, access, found, run_id="fb-other")
    assert len(read_all(hot, other, 1)) == 1
    for p in (0, 1):  # the delta: the active's records from the boundary on, after the divergent ones
        produce(hot, topic, p, read_all(cold, topic, p)[N:])
    before = {g: committed(hot, g, topic, 2) for g in (group, s["group2"])}
    plan = fk.reprotect(topo, ledger, access, run_id="fb-delta", dry_run=True)
    assert plan["status"] == "planned" and "applied" not in plan["groups"][group], plan
    assert {g: committed(hot, g, topic, 2) for g in before} == before  # a dry run writes nothing
    res = fk.reprotect(topo, ledger, access, run_id="fb-delta")
    assert res["status"] == "done", res
    assert plan["groups"][group]["offsets"] == res["groups"][group]["offsets"]
    assert res["groups"][group]["moved_past_divergent"] == {f"{topic}[1]": DIVERGENT[1]}, res["groups"][group]
    div = {(r.value, r.timestamp) for p in (0, 1) for r in _recs("div", p, DIVERGENT[p], T0 + 10_000)}
    for g in (group, s["group2"]):
        positions, active_committed = committed(hot, g, topic, 2), committed(cold, g, topic, 2)
        for p in (0, 1):
            want = _read_from(cold, topic, p, active_committed[p])
            got = _read_from(hot, topic, p, positions[p])
            if g == group:
                assert got == want, (g, p, positions[p], res["groups"][g])
            else:  # behind the boundary: it reads on through the divergent records (reported), never skips
                assert [r for r in got if (r.value, r.timestamp) not in div] == want, (g, p, positions[p])
                assert res["groups"][g]["will_read_divergent"][f"{topic}[{p}]"] == DIVERGENT[p]


def test_reprotect_with_a_default_policy_reverse_flow(kafka_env: tuple[str, str], tmp_path: Path) -> None:
    """The reverse flow with MM2's DefaultReplicationPolicy (the old hot endpoint says so): the
    active's records go to ``<alias>.<topic>`` on the old hot, apart from the divergent ones; the
    evidence is MM2's reverse offset syncs borne out by the records; the groups remapped onto that
    topic read exactly the active's records after their committed positions."""
    hot, cold = kafka_env
    s = _scenario(hot, cold, tmp_path, gate_proof=True, reverse_policy="default")
    topic, topo, ledger, access = s["topic"], s["topo"], s["ledger"], s["access"]
    h, c = s["aliases"]
    items = fk.divergence(topo, ledger, access, recovery_point=None)
    assert sorted((i.where, i.detail["count"]) for i in items) == [(f"{topic}:{p}", DIVERGENT[p]) for p in (0, 1)]
    remote = f"{c}.{topic}"
    rev = MirrorMaker2(tmp_path / "mm2-rev-default", cold, hot, topics=topic, policy="default", aliases=(c, h),
                       heap="256m", extra={"sync.group.offsets.enabled": "false"})
    rev.start()
    try:
        rev.wait_mirrored([topic])
        res = fk.reprotect(topo, ledger, access, run_id="fb-default")
    finally:
        rev.kill()
    assert res["status"] == "done" and res["reverse_flow"]["offset_syncs_borne_out"] >= 1, res
    for g in (s["group"], s["group2"]):
        positions, active_committed = committed(hot, g, remote, 2), committed(cold, g, topic, 2)
        for p in (0, 1):
            assert _read_from(hot, remote, p, positions[p]) == _read_from(cold, topic, p, active_committed[p]), (
                g, p, positions[p], res["groups"][g])
