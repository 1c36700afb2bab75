"""The gate's incremental Kafka proof (issue 42, ``lag.Incremental``; its trust argument in
``dr_toolkit/kafka/lag.py``'s module doc), on the real broker pair (MirrorMaker 2 for the random
appends, the direct copier where a test must control exactly what cold holds). A partition whose
brokers' evidence (topic id, log start, end offset, leader epoch, both sides) is what the last
proof was made on keeps it without a record read; one that grew has it extended from the records
appended since; everything else takes the full path. Each test compares the incremental rows
with the full path's (``mirror_lag_many`` without a base) at the same state.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from dr_toolkit.access import Access
from dr_toolkit.kafka.lag import Incremental, mirror_lag_many
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.kafka.rows import LagReport, LagRow
from dr_toolkit.kafka.signals import PROOFS, kafka_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import QUIET, T0, Rec, create_topic, mirror, produce, unique, write_topology

pytestmark = pytest.mark.integration

FACTS = ("hot_end", "cold_end", "records_behind", "oldest_unmirrored_ts", "method", "proof")


def _mirror(tmp_path: Path, hot: str, cold: str, topics: list[str], policy: str = "identity") -> Mirror:
    path = write_topology(tmp_path / f"drt-{policy}.yaml", hot=hot, cold=cold, topics=topics, groups=[],
                          ledger_url=f"sqlite:///{tmp_path}/ledger.db", replication_policy=policy)
    return Mirror.of(load_topology(path), Access.from_env())


def _rows(reports: dict[str, Any]) -> dict[tuple[str, int], LagRow]:
    out: dict[tuple[str, int], LagRow] = {}
    for t, r in reports.items():
        assert isinstance(r, LagReport), (t, r)
        out.update({(x.topic, x.partition): x for x in r.partitions})
    return out


def _check(m: Mirror, topics: list[str], previous: dict[tuple[str, int], Any]) -> tuple[dict[tuple[str, int], LagRow],
                                                                                       Incremental]:
    """The gate's lag with the previous proofs as its base; the fresh proofs merged into ``previous``
    (as the ledger keeps them)."""
    inc = Incremental(dict(previous))
    reports, _ = mirror_lag_many(m, topics, incremental=inc)
    previous.update(inc.fresh)
    return _rows(reports), inc


def _full(m: Mirror, topics: list[str]) -> dict[tuple[str, int], LagRow]:
    return _rows(mirror_lag_many(m, topics)[0])


def _same(inc: dict[tuple[str, int], LagRow], full: dict[tuple[str, int], LagRow]) -> None:
    assert inc.keys() == full.keys()
    for k in full:
        a, b = inc[k], full[k]
        assert {f: getattr(a, f) for f in FACTS} == {f: getattr(b, f) for f in FACTS}, (k, a, b)
        assert (a.safe_time is None) == (b.safe_time is None), (k, a, b)


def _carried(row: LagRow) -> bool:
    return "unchanged since the check" in row.basis


def _extended(row: LagRow) -> bool:
    return "extended" in row.basis


def _recs(tag: str, n: int, start: int, base: int = T0) -> list[Rec]:
    return [Rec(f"{tag}-{i}".encode(), base + 1000 * i, f"k{i % 3}".encode()) for i in range(start, start + n)]


def test_incremental_rows_equal_the_full_paths_on_random_appends_mirrored_by_mm2(mm2, kafka_env,
                                                                                    tmp_path: Path) -> None:
    """Rounds of random appends on hot, MirrorMaker 2 either caught up or paused (cold behind):
    every round's incremental rows equal the full path's, partitions untouched are carried,
    partitions that grew are extended (no search)."""
    hot, cold = kafka_env
    rng = random.Random(42)
    topic = unique("mm-inc")
    create_topic(hot, topic, 4)
    sent = dict.fromkeys(range(4), 0)
    for p in range(4):
        n = rng.randrange(3, 12)
        produce(hot, topic, p, _recs(f"{p}", n, 0))
        sent[p] = n
    mm2.wait_mirrored([topic])
    m = _mirror(tmp_path, hot, cold, [topic], policy="default")
    assert m.cold_topic(topic) == mm2.remote_topic(topic)
    previous: dict[tuple[str, int], Any] = {}
    rows, inc = _check(m, [topic], previous)
    assert inc.counts["carried"] == 0 and len(previous) == 4, inc.counts
    _same(rows, _full(m, [topic]))
    carried = extended = 0
    assert mm2.proc is not None
    for rnd in range(4):
        paused = rnd % 2 == 1
        if paused:
            os.kill(mm2.proc.pid, signal.SIGSTOP)
            time.sleep(0.5)
        try:
            grown = rng.sample(range(4), rng.randrange(1, 3))
            for p in grown:
                n = rng.randrange(1, 6)
                produce(hot, topic, p, _recs(f"{p}", n, sent[p]))
                sent[p] += n
            if not paused:
                mm2.wait_mirrored([topic])
            rows, inc = _check(m, [topic], previous)
            full = _full(m, [topic])
            _same(rows, full)
            if paused:
                assert any(full[(topic, p)].records_behind for p in grown), full
            carried += sum(_carried(rows[(topic, p)]) for p in range(4) if p not in grown)
            extended += sum(_extended(rows[(topic, p)]) for p in grown)
            assert inc.counts["full"] == 0, inc.counts  # nothing searched: carried or extended
        finally:
            if paused:
                os.kill(mm2.proc.pid, signal.SIGCONT)
    assert carried >= 8 and extended >= 4, (carried, extended)


def test_a_topic_deleted_and_created_again_is_never_carried_over(kafka_env, tmp_path: Path) -> None:
    """Hot's topic deleted and created again under its name with as many records (same end offset,
    log start 0, leader epoch 0 again — only its topic id differs), none of them on cold: the old
    proof is not carried (cold holds copies of the old topic's records, not of these)."""
    hot, cold = kafka_env
    topic = unique("inc-re")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    produce(hot, topic, 0, _recs("old", 5, 0))
    mirror(hot, cold, topic, 0)
    m = _mirror(tmp_path, hot, cold, [topic])
    previous: dict[tuple[str, int], Any] = {}
    rows, _ = _check(m, [topic], previous)
    assert rows[(topic, 0)].records_behind == 0
    admin = AdminClient({"bootstrap.servers": hot, **QUIET})
    for f in admin.delete_topics([topic], operation_timeout=10).values():
        f.result(timeout=15)
    deadline = time.monotonic() + 30
    while True:
        try:
            create_topic(hot, topic, 1)
            break
        except Exception:  # the deletion is still under way
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    produce(hot, topic, 0, _recs("new", 5, 0, base=T0 + 500))
    old_hot = previous[(topic, 0)]["h"]
    rows, inc = _check(m, [topic], previous)
    row = rows[(topic, 0)]
    assert not _carried(row) and row.records_behind == 5 and inc.counts["carried"] == 0, row
    _same(rows, _full(m, [topic]))
    assert previous[(topic, 0)]["h"][0] != old_hot[0] and previous[(topic, 0)]["h"][1:] == old_hot[1:], \
        (old_hot, previous[(topic, 0)]["h"])  # the same offsets and epoch: only the topic id tells


def test_a_record_produced_on_cold_after_a_proof_is_never_counted_as_mirrored(kafka_env, tmp_path: Path) -> None:
    """After a proof, a record produced on cold directly, then hot's 3 new records copied after it:
    the extension stops at that record (no copy of a hot record) and the full path says 3 behind —
    the copies after a record hot never had prove nothing."""
    hot, cold = kafka_env
    topic = unique("inc-cold")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    produce(hot, topic, 0, _recs("r", 6, 0))
    mirror(hot, cold, topic, 0)
    m = _mirror(tmp_path, hot, cold, [topic])
    previous: dict[tuple[str, int], Any] = {}
    rows, _ = _check(m, [topic], previous)
    assert rows[(topic, 0)].records_behind == 0
    new = _recs("r", 3, 6)
    produce(hot, topic, 0, new)
    produce(cold, topic, 0, [Rec(b"written-on-cold", T0 + 6500, b"k0")])
    produce(cold, topic, 0, new)
    rows, inc = _check(m, [topic], previous)
    row = rows[(topic, 0)]
    assert row.records_behind == 3 and not _extended(row) and not _carried(row), row
    _same(rows, _full(m, [topic]))


def test_delete_records_moving_a_log_start_is_proven_again(kafka_env, tmp_path: Path) -> None:
    """DeleteRecords on cold (its copies of hot's first 3 records gone) and on hot (its first 2):
    neither partition keeps its proof; each row is the full path's (cold's: the 8-record window
    before its newest copy is gone, so it is no longer caught up)."""
    hot, cold = kafka_env
    topic = unique("inc-del")
    create_topic(hot, topic, 2)
    create_topic(cold, topic, 2)
    for p in range(2):
        produce(hot, topic, p, _recs(f"{p}", 6, 0))
        mirror(hot, cold, topic, p)
    m = _mirror(tmp_path, hot, cold, [topic])
    previous: dict[tuple[str, int], Any] = {}
    rows, _ = _check(m, [topic], previous)
    assert all(rows[(topic, p)].records_behind == 0 for p in range(2))
    rows, inc = _check(m, [topic], previous)
    assert all(_carried(rows[(topic, p)]) for p in range(2)), rows  # nothing changed yet: carried
    for address, p, upto in ((cold, 0, 3), (hot, 1, 2)):
        admin = AdminClient({"bootstrap.servers": address, **QUIET})
        for f in admin.delete_records([TopicPartition(topic, p, upto)], request_timeout=10).values():
            f.result(timeout=15)
    rows, inc = _check(m, [topic], previous)
    assert not any(_carried(rows[(topic, p)]) or _extended(rows[(topic, p)]) for p in range(2)), rows
    assert rows[(topic, 0)].records_behind, rows[(topic, 0)]
    _same(rows, _full(m, [topic]))


def test_the_gate_keeps_its_proofs_in_the_ledger_and_a_missing_or_stale_row_is_the_full_path(
        kafka_env, tmp_path: Path) -> None:
    """Through the gate's signals and the ledger: the first check writes one row per partition
    (its evidence: topic ids, starts, ends, epochs); the second carries them; with the rows gone,
    or older than the bound, the next check proves from the records again (and says so)."""
    hot, cold = kafka_env
    topic = unique("inc-gate")
    create_topic(hot, topic, 2)
    create_topic(cold, topic, 2)
    for p in range(2):
        produce(hot, topic, p, _recs(f"{p}", 4, 0))
        mirror(hot, cold, topic, p)
    path = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                          ledger_url=f"sqlite:///{tmp_path}/ledger.db")
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    access = Access.from_env()

    def sig() -> Any:
        [s] = [s for s in kafka_signals(topo, ledger, access, time.time()) if s.name == topic]
        return s

    first = sig()
    assert first.caught_up and "unchanged since" not in first.basis, first
    rows = {w["name"]: w["detail"] for w in ledger.watermarks(PROOFS)}
    assert set(rows) == {f"{topic}[0]", f"{topic}[1]"}, rows
    assert all(len(d["h"][0]) == 32 and d["h"][1:3] == [0, 4] and d["c"][1:3] == [0, 4] for d in rows.values()), rows
    second = sig()
    assert second.caught_up and "unchanged since the check" in second.basis, second
    with ledger._tx() as conn:
        from sqlalchemy import text

        conn.execute(text("DELETE FROM watermarks WHERE component = :c"), {"c": PROOFS})
    third = sig()
    assert third.caught_up and "unchanged since" not in third.basis, third
    assert len(ledger.watermarks(PROOFS)) == 2
    old = time.time() - 7 * 3600
    ledger.set_watermarks(PROOFS, [(w["name"], old, {**w["detail"], "at": old}) for w in ledger.watermarks(PROOFS)])
    fourth = sig()
    assert fourth.caught_up and "unchanged since" not in fourth.basis, fourth


def test_an_unchanged_proof_is_confirmed_not_rewritten_and_the_unplanned_window_reads_it(
        kafka_env, tmp_path: Path) -> None:
    """The unplanned loss window's evidence (``holdings.record_proven``) at the second of two gate
    checks with nothing changed: no partition's row rewritten, the confirmation row naming both
    with the second check's safe time, and ``holdings.loss_rows`` (cold and the ledger only)
    stating that later safe time, cold still holding the proving records."""
    from dr_toolkit.kafka.holdings import COMPONENT, CONFIRMED, loss_rows

    hot, cold = kafka_env
    topic = unique("inc-held")
    create_topic(hot, topic, 2)
    create_topic(cold, topic, 2)
    for p in range(2):
        produce(hot, topic, p, _recs(f"{p}", 4, 0))
        mirror(hot, cold, topic, p)
    path = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                          ledger_url=f"sqlite:///{tmp_path}/ledger.db")
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    access = Access.from_env()

    def check() -> tuple[Any, dict[str, tuple[float, float]]]:
        [s] = [s for s in kafka_signals(topo, ledger, access, time.time()) if s.name == topic]
        return s, {w["name"]: (w["watermark"], w["updated_at"]) for w in ledger.watermarks(COMPONENT)
                   if w["name"].startswith(topic)}

    first, rows1 = check()
    second, rows2 = check()
    assert first.caught_up and second.caught_up and second.safe_time > first.safe_time, (first, second)
    assert len(rows1) == 2 and rows2 == rows1  # the proofs are the same: their rows not rewritten
    [conf] = [w for w in ledger.watermarks(COMPONENT) if w["name"] == CONFIRMED]
    assert conf["watermark"] == second.safe_time and sorted(conf["detail"]["partitions"][topic]) == ["0", "1"]
    [row] = [r for r in loss_rows(Mirror.of(topo, access), ledger) if r["name"] == topic]
    assert row["safe_time"] == second.safe_time, row
    assert "confirmed at the check of" in row["basis"], row


def test_the_gate_asks_each_clusters_metadata_once_and_its_lag_uses_it(kafka_env, tmp_path: Path) -> None:
    """Hot's Metadata (asked beside the groups' committed offsets) and cold's (asked meanwhile) are the
    lag's too: one topics() per cluster per check, the lag's clients taking the partition leaders
    from them (the batched ListOffsets then still answers: the second check carries the proofs)."""
    import collections
    from dataclasses import replace

    from dr_toolkit.kafka.client import KafkaCluster
    from tests.support.fixtures_kafka import commit_after_consuming

    hot, cold = kafka_env
    topic, group = unique("inc-meta"), unique("inc-meta-g")
    create_topic(hot, topic, 2)
    create_topic(cold, topic, 2)
    for p in range(2):
        produce(hot, topic, p, _recs(f"{p}", 3, 0))
        mirror(hot, cold, topic, p)
    commit_after_consuming(hot, group, topic, {0: 3, 1: 1})
    path = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                          ledger_url=f"sqlite:///{tmp_path}/ledger.db")
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    asked: collections.Counter[str] = collections.Counter()

    class Counted(KafkaCluster):
        def topics(self) -> dict[str, int]:
            asked[self.role] += 1
            return super().topics()

    m = replace(Mirror.of(topo, Access.from_env()),
                clients=lambda side, creds: Counted(side.bootstrap, credentials=creds, timeout_s=side.timeout_s,
                                                    role="hot" if side.bootstrap == hot else "cold"))
    for n in range(2):
        asked.clear()
        sigs = {s.name: s for s in kafka_signals(topo, ledger, Access.from_env(), time.time(), mirror=m)}
        assert sigs[topic].caught_up, sigs[topic]
        assert ("unchanged since the check" in sigs[topic].basis) == (n == 1), sigs[topic].basis
        assert dict(asked) == {"hot": 1, "cold": 1}, (n, dict(asked))
