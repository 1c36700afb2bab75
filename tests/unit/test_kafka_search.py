"""The remap search on in-memory partitions: correctness and the probe bound, whatever the
broker's timestamp index answers (right, always 0, or wrong). The same search runs against the
real Kafka brokers in tests/integration/test_kafka_remap.py and test_kafka_never_skip.py."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from dr_toolkit.kafka.client import Record, client_config, fingerprint
from dr_toolkit.kafka.remap import Anchor, probe_budget, remap_partition
from dr_toolkit.kafka.rows import Position
from dr_toolkit.secrets import Credentials


class ListPartition:
    """A partition held in a list, counting positioned reads like the real client does."""

    def __init__(self, records: list[tuple[int, str]], start: int = 0, index: str = "right") -> None:
        self.recs = [Record(start + i, ts, "create", fp) for i, (ts, fp) in enumerate(records)]
        self.lo, self.hi = start, start + len(records)
        self.index = index
        self.fetches = 0

    def read(self, topic: str, partition: int, start: int, end: int, *, max_records: int | None = None,
             batch: int = 500) -> Iterator[Record]:
        want = min(max_records or end - start, end - start)
        for n, i in enumerate(range(max(start, self.lo), min(end, self.hi))):
            if n >= want:
                return
            if n % batch == 0:
                self.fetches += 1
            yield self.recs[i - self.lo]

    def record_at(self, topic: str, partition: int, offset: int, end: int, *, committed: bool = True
                  ) -> Record | None:
        return next(iter(self.read(topic, partition, offset, end, max_records=1)), None)

    def compacted(self, topic: str) -> bool:
        return False  # no transaction, no cleaner: every offset holds its record

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None:
        if self.index == "zero":
            return 0
        if self.index == "wrong":
            return random.Random(ts_ms).randrange(self.lo, self.hi + 1)
        return next((r.offset for r in self.recs if r.timestamp >= ts_ms), None)


def _partition(rng: random.Random, n: int, back: int = 3) -> list[tuple[int, str]]:
    """Runs of up to 50 equal timestamps; every tenth run CreateTime goes back by < ``back`` ms."""
    out, ts = [], 1_000_000
    while len(out) < n:
        run = rng.choice([1, 1, 2, 3, 50, rng.randrange(1, 50)])
        if rng.random() < 0.1:
            ts -= rng.randrange(1, back)  # CreateTime going backwards
        for _ in range(min(run, n - len(out))):
            out.append((ts, f"fp{len(out)}"))
        ts += rng.randrange(1, 20)
    return out


def test_fingerprint_covers_key_value_headers() -> None:
    base = fingerprint(b"k", b"v", [("h", b"1")])
    assert base == fingerprint(b"k", b"v", [("h", b"1")])
    others = {fingerprint(None, b"v", [("h", b"1")]), fingerprint(b"", b"v", [("h", b"1")]),
              fingerprint(b"k", b"v2", [("h", b"1")]), fingerprint(b"k", b"v", [("h", b"2")]),
              fingerprint(b"k", b"v", []), fingerprint(b"kv", b"", [("h", b"1")])}
    assert base not in others and len(others) == 6


def test_probe_budget() -> None:
    assert [probe_budget(n) for n in (1, 2, 1000, 1024, 2000)] == [3, 4, 13, 13, 14]


@pytest.mark.parametrize("index", ["right", "zero", "wrong"])
def test_remap_is_exact_within_the_probe_budget(index: str) -> None:
    rng = random.Random(index)
    for _ in range(30):
        n, shift = rng.randrange(1, 3000), rng.randrange(0, 40)
        recs = [(rng.randrange(0, 500), f"other{i}") for i in range(shift)] + _partition(rng, n)
        part = ListPartition(recs, start=rng.randrange(0, 5), index=index)
        for k in rng.sample(range(shift, len(recs)), min(5, n)):
            ts, fp = recs[k]
            res = remap_partition(part, "t", 0, Anchor(ts, fp), part.lo, part.hi, skew_ms=3)
            assert (res.method, res.target_offset) == ("exact", part.lo + k + 1)
            assert res.probes <= probe_budget(len(recs)) + 1, (index, n, res)
            nxt = remap_partition(part, "t", 0, Anchor(ts, fp, after=False), part.lo, part.hi, skew_ms=3)
            assert nxt.target_offset == part.lo + k


def test_remap_stays_exact_when_timestamps_are_far_out_of_order() -> None:
    """Backward jumps of up to 60 ms across runs of 50: the fingerprint is not always near the
    binary search's crossing; the widened read still finds it (with more probes, reported)."""
    rng = random.Random(5)
    for _ in range(20):
        recs = _partition(rng, rng.randrange(100, 3000), back=60)
        part = ListPartition(recs, index="zero")
        for k in rng.sample(range(len(recs)), 5):
            res = remap_partition(part, "t", 0, Anchor(*recs[k]), part.lo, part.hi, skew_ms=60)
            assert res.target_offset is not None and res.target_offset <= k + 1  # never skips
            if res.method == "exact":
                assert res.target_offset == k + 1


def test_a_right_index_answers_in_two_probes() -> None:
    part = ListPartition(_partition(random.Random(1), 2000), index="right")
    ts, fp = part.recs[1234].timestamp, part.recs[1234].fingerprint
    res = remap_partition(part, "t", 0, Anchor(ts, fp), part.lo, part.hi)
    assert res.target_offset == 1235 and res.probes <= 3


def test_missing_fingerprint_falls_back_to_the_earliest_record_of_the_timestamp() -> None:
    recs = [(100, "a"), (200, "b"), (200, "c"), (200, "d"), (300, "e")]
    part = ListPartition(recs, index="zero")
    res = remap_partition(part, "t", 0, Anchor(200, "not-there"), 0, 5)
    assert (res.method, res.target_offset, res.duplicate_window) == ("skew_bound", 1, (1, 4))
    # With a skew bound of 50 ms, records up to 200 + 2*50 may have been consumed; from 200 - 4*50 on not.
    res = remap_partition(part, "t", 0, Anchor(200, "not-there"), 0, 5, skew_ms=50)
    assert (res.method, res.target_offset, res.duplicate_window) == ("skew_bound", 0, (0, 5))


def test_checkpoint_newer_than_the_mirror_and_empty_cases() -> None:
    part = ListPartition([(100, "a"), (200, "b")])
    res = remap_partition(part, "t", 0, Anchor(999, "z"), 0, 2)
    assert (res.method, res.target_offset) == ("skew_bound", 2)
    # No anchor and no checkpoint time: re-read everything rather than guess.
    pos = remap_partition(part, "t", 0, None, 0, 2).position()
    assert (pos, pos.may_reread) == (Position(0, "time", 0, (0, 2)), 2)
    # No anchor, taken at 150: records proven older than 150 were there and consumed.
    assert remap_partition(part, "t", 0, None, 0, 2, taken_at_ms=150).target_offset == 1
    empty = ListPartition([], start=7)
    assert remap_partition(empty, "t", 0, Anchor(1, "x"), 7, 7).target_offset == 7


def test_client_config_maps_the_kafka_connection_extra_and_keeps_the_topology_bootstrap() -> None:
    creds = Credentials(login="u", password="secret-pw", extra={
        "bootstrap.servers": "ignored:9092", "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
        "group.id": "not-for-probes", "error_cb": "some.module.cb"})
    conf = client_config("b1:9092,b2:9092", creds)
    assert conf["bootstrap.servers"] == "b1:9092,b2:9092"
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.username"] == "u"
    assert conf["sasl.password"] == "secret-pw"
    assert "group.id" not in conf and "error_cb" not in conf
    assert client_config("", creds)["bootstrap.servers"] == "ignored:9092"


def _skewed_log(rng: random.Random, n: int, skew: int) -> tuple[list[tuple[int, str]], list[int]]:
    """Append times grow; each record's CreateTime strays up to ``skew`` ms from its append
    time (producers with disagreeing clocks); one in five is an identical heartbeat (same
    content; CreateTime often equal too: several beats within one millisecond). Returns the
    records and their append times."""
    out, appended, a = [], [], 5_000_000
    beat_ts = a
    for i in range(n):
        a += rng.randrange(0, 3)
        appended.append(a)
        if rng.random() < 0.2:
            if rng.random() < 0.5 or abs(beat_ts - a) > skew:
                beat_ts = a + rng.randrange(-skew, skew + 1)
            out.append((beat_ts, "heartbeat"))
        else:
            out.append((a + rng.randrange(-skew, skew + 1), f"r{i}"))
    return out, appended


@pytest.mark.parametrize("seed", range(12))
def test_never_skip_under_clock_skew_identical_records_and_mirror_duplicates(seed: int) -> None:
    """The invariant, attacked: skewed CreateTimes, identical heartbeats around the anchor, a
    mirror that re-sends a suffix of records (at-least-once, after a restart) and starts after
    unrelated ones. The declared bound S covers the producers' skew plus how far back a re-send
    reaches (docs/design.md, Kafka consumer offsets). Every target must be at or before the first copy of an unconsumed record
    (never skip); an ``exact`` one must be exactly there."""
    from dr_toolkit.kafka.remap import count_identical_before

    rng = random.Random(seed)
    skew = rng.choice([0, 5, 40])
    hot, appended = _skewed_log(rng, rng.randrange(50, 1500), skew)
    cold: list[tuple[int, str]] = [(rng.randrange(0, 1000), f"old{i}") for i in range(rng.randrange(0, 10))]
    copy_of: list[int] = [-1] * len(cold)  # cold offset -> hot offset copied (-1: unrelated)
    bound, newest = skew, 0
    for i, rec in enumerate(hot):
        cold.append(rec)
        copy_of.append(i)
        newest = appended[i]
        if rng.random() < 0.03 and i:  # at-least-once mirror: re-send the last few records
            for j in range(max(0, i - rng.randrange(1, 6)), i + 1):
                cold.append(hot[j])
                copy_of.append(j)
                bound = max(bound, abs(hot[j][0] - newest))
    hot_part, cold_part = ListPartition(hot, index="wrong"), ListPartition(cold, index="zero")
    exact = 0
    for k in rng.sample(range(len(hot)), min(20, len(hot))):
        ts, fp = hot[k]
        dup = count_identical_before(hot_part, "t", 0, hot_part.recs[k], 0, bound, lo_proves=True)
        for after in (True, False):
            res = remap_partition(cold_part, "t", 0, Anchor(ts, fp, after, dup), 0, len(cold), skew_ms=bound)
            assert res.target_offset is not None
            consumed_last = k if after else k - 1
            first_unconsumed = next((o for o in range(len(cold)) if copy_of[o] > consumed_last), len(cold))
            assert res.target_offset <= first_unconsumed, (seed, k, after, res)  # never skip
            if res.method == "exact":
                exact += 1
                # the anchor's copy was found: right after it (re-sent copies may make it an earlier one)
                hit = res.target_offset - 1 if after else res.target_offset
                assert cold[hit] == hot[k]
                if len(cold) - len(hot) == copy_of.count(-1):  # no re-sends: exactly the first unconsumed
                    assert res.target_offset == first_unconsumed
    assert exact > 0  # the proof succeeds where it can
