"""Find, on one partition, where a consumer must resume — never skipping a record.

**The invariant (never skip).** The position p returned for a mirror partition is such that
every record at an offset < p is a copy of a record the group had consumed on hot. Where this
cannot be proven exactly, the answer is a position that is provably safe under the declared
producer clock-skew bound S (``kafka.max_clock_skew_s``) and the result says how many records
may be re-read (``duplicate_window``).

**Clock model.** A record's timestamp c (CreateTime, from the producer's clock) differs from
the time a the hot broker appended it by at most S; append times grow with the offset, and the
mirror copies a partition in order (it may copy a record twice, never reorder). Hence, for a
record read at offset m with timestamp c_m < X, every record before m was appended before
X + S and carries a timestamp < X + 2S. That is the only kind of fact the searches below rely
on: a binary search moves its lower bound past m only after reading such a record, so the
bound it returns is *proven* (the record just below it was read), whatever order the
timestamps come in. The broker's timestamp index is used as a guess that one read checks.

**Exact match.** The anchor is the last consumed record (or the first unconsumed one),
identified by timestamp AND fingerprint, plus the number k of identical records (same
timestamp and fingerprint) before it on hot, counted from a proven boundary: identical records
share the timestamp c_A, so none lies before a record whose timestamp is < c_A − 2S. On the
mirror the same boundary B is searched, the records from B read in order, and the (k+1)-th
identical record is the anchor's copy (a mirror that copied a record twice only makes this
earlier: re-reading, never skipping). When B cannot be proven (the mirror's head was trimmed),
the run is longer than :data:`MAX_SCAN`, or the copy is not there, the answer falls back to the
skew-safe position: the first offset after a record proven older than c_A − 4S.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from dr_toolkit.errors import DrtError
from dr_toolkit.kafka.client import Record
from dr_toolkit.kafka.rows import Position

# Records read in one sequential scan at most (runs of identical timestamps, the skew window).
MAX_SCAN = 20_000
WINDOW = 64  # records read before a committed offset at checkpoint time

# Prefix of a checkpoint fingerprint taken from the record AT the committed offset (the first
# unconsumed one) — used when no record was consumed before it (offset 0, log start).
NEXT_PREFIX = "@next:"
DUP_SEP = "#k="  # fingerprint column: "<fp>#k=<identical records before it>" (or "#k=?" unknown)


class PartitionReader(Protocol):
    fetches: int

    def read(self, topic: str, partition: int, start: int, end: int, *, max_records: int | None = None,
             batch: int = 500) -> Iterator[Record]: ...

    def record_at(self, topic: str, partition: int, offset: int, end: int) -> Record | None: ...

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None: ...


class MemoryPartition:
    """A partition's records ``[lo, hi)``, read once in order, answering the searches' probes from
    memory — the same records a probe would fetch (the reads are the proofs; only where they come
    from changes). Worth it when one partition has many targets (:func:`worth_reading_whole`):
    ``k`` searches cost about k·(⌈log2 n⌉ + 3) fetches, one sequential read about n / 500.
    ``fetches`` counts probes answered, as a live reader counts the fetches it sends."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.offsets = [r.offset for r in records]
        self.fetches = 0

    @classmethod
    def load(cls, reader: PartitionReader, topic: str, partition: int, lo: int, hi: int) -> MemoryPartition:
        return cls(list(reader.read(topic, partition, lo, hi, batch=500)))

    def read(self, topic: str, partition: int, start: int, end: int, *, max_records: int | None = None,
             batch: int = 500) -> Iterator[Record]:
        self.fetches += 1
        i = bisect.bisect_left(self.offsets, start)
        n = 0
        while i < len(self.records) and self.records[i].offset < end and (max_records is None or n < max_records):
            yield self.records[i]
            i += 1
            n += 1

    def record_at(self, topic: str, partition: int, offset: int, end: int) -> Record | None:
        self.fetches += 1
        i = bisect.bisect_left(self.offsets, offset)
        return self.records[i] if i < len(self.records) and self.records[i].offset < end else None

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None:
        return None  # no index: the binary search over memory costs nothing


WHOLE_READ_MAX = 100_000  # records of one partition held in memory at most


def worth_reading_whole(targets: int, n: int) -> bool:
    """Read the partition's ``n`` records once for ``targets`` searches, instead of searching?
    Never for one search (one group's remap): the bound overstates what a search costs (the
    index's guess usually ends it in a few fetches), and a whole read fetches every record."""
    return targets > 1 and 0 < n <= WHOLE_READ_MAX and 4 + n / 500 < targets * probe_budget(n)


@dataclass(frozen=True)
class Anchor:
    """The checkpointed record to look for. ``after`` is True when it was the last consumed
    record (target = its copy's offset + 1), False when it was the first unconsumed one
    (target = its copy's offset). ``dup_before``: identical records (same timestamp and
    fingerprint) before it on hot, counted from a proven boundary; None when unknown."""

    timestamp: int
    fingerprint: str
    after: bool = True
    dup_before: int | None = 0


@dataclass(frozen=True)
class LogTraits:
    """What is known of the log a search reads. ``use_index``: the reader has the broker's
    timestamp index (a guess one read checks); ``lo_proves``: the log start may serve as a boundary
    of an identical-record count (true on the hot cluster only, see
    :func:`dr_toolkit.kafka.lag.hot_start_proves`); ``compacted``: the topic is compacted
    (``cleanup.policy`` compact: an offset gap before a match is no proof)."""

    use_index: bool = True
    lo_proves: bool = False
    compacted: bool = False


@dataclass(frozen=True)
class _Bound:
    """A skew-safe position's rule: resume after a record proven older than ts − ``lower``·S;
    records up to the first one proven newer than ts + ``upper``·S may be re-read."""

    lower: int
    upper: int
    method: str


_BY_TIME = _Bound(3, 2, "time")  # no anchor: records appended after taken_at are stamped ≥ taken_at − S
_BY_SKEW = _Bound(4, 2, "skew_bound")  # the first unconsumed record is stamped ≥ c_A − 2S


@dataclass
class RemapResult:
    target_offset: int | None
    method: str  # exact | skew_bound | time | empty | none
    probes: int
    duplicate_window: tuple[int, int] | None = None  # [first, last) offsets that may be re-read
    matched_offset: int | None = None
    proven_by: int | None = None  # the offset whose record proves the target safe (None: log start)

    def position(self) -> Position:
        return Position(self.target_offset, self.method, self.probes, self.duplicate_window)


def probe_budget(n: int) -> int:
    """The most probes an exact remap of a partition of ``n`` records may cost: ⌈log2 n⌉ + 3."""
    return (math.ceil(math.log2(n)) if n > 1 else 0) + 3


def safe_floor(reader: PartitionReader, topic: str, partition: int, threshold: int, lo: int, hi: int,
               *, use_index: bool = False) -> int:
    """Binary search for an offset p in [lo, hi] such that p == lo or the record at p − 1 was
    read and has timestamp < ``threshold`` (so, by the clock model, every record before p has a
    timestamp < threshold + 2S). The lower bound only moves past a record actually read."""
    a, b = lo, hi
    if use_index:
        guess = reader.offset_for_time(topic, partition, threshold)
        if guess is not None and a < guess < b:
            rec = reader.record_at(topic, partition, guess, b)
            if rec is None or rec.timestamp >= threshold:
                b = guess
                prev = reader.record_at(topic, partition, guess - 1, b)  # a right index: one more read ends it
                if prev is not None and prev.timestamp < threshold:
                    a = prev.offset + 1
            else:
                a = rec.offset + 1
    while a < b:
        mid = (a + b) // 2
        rec = reader.record_at(topic, partition, mid, b)
        if rec is None or rec.timestamp >= threshold:
            b = mid
        else:
            a = rec.offset + 1
    return a


PROOF_WINDOW = 64  # records before a proving record checked against the clock model
FLOOR_RETRIES = 8


def consistent_floor(reader: PartitionReader, topic: str, partition: int, threshold: int, lo: int, hi: int,
                     skew_ms: int) -> int:
    """:func:`safe_floor`, whose proving record (at p − 1) is also consistent with the clock model:
    on a mirror of hot, a record is never stamped more than 2S before any record before it
    (ts_b ≥ append_b − S ≥ append_a − S ≥ ts_a − 2S). A record that is — one produced on cold
    directly with an old timestamp, never a copy of a hot record — proves nothing about the records
    before it (they may be unconsumed copies); the search is then repeated below it, and after
    :data:`FLOOR_RETRIES` such records the log start is the answer (re-read, never skip). Checked over
    the :data:`PROOF_WINDOW` records before the proving one (issue 38: records on cold hot never had)."""
    for _ in range(FLOOR_RETRIES):
        p = safe_floor(reader, topic, partition, threshold, lo, hi)
        if p <= lo:
            return lo
        window = list(reader.read(topic, partition, max(lo, p - 1 - PROOF_WINDOW), p))
        if window and window[-1].offset == p - 1 and all(
                r.timestamp <= window[-1].timestamp + 2 * skew_ms for r in window[:-1]):
            return p
        hi = p - 1  # the proving record lies about the records before it: search below it
    return lo


def safe_ceiling(reader: PartitionReader, topic: str, partition: int, threshold: int, lo: int, hi: int) -> int:
    """Binary search for an offset u in [lo, hi] such that u == hi or the record at u was read
    and has timestamp > ``threshold`` (every record from u on was appended after threshold − S)."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        rec = reader.record_at(topic, partition, mid, b)
        if rec is None or rec.timestamp > threshold:
            b = mid  # the first record at or after mid (if any) is newer than the threshold
        else:
            a = rec.offset + 1
    return b


def identical_offsets(reader: PartitionReader, topic: str, partition: int, ts: int, fp: str, start: int,
                      end: int, *, stop_after: int | None = None, gaps: list[int] | None = None) -> list[int] | None:
    """Offsets of records identical to (ts, fp) in [start, end), in order; stops after
    ``stop_after`` matches; None when more than :data:`MAX_SCAN` records would be read.
    ``gaps`` (when given) receives the offsets read past without a record (compacted away,
    transaction markers, aborted records): where each gap starts."""
    out: list[int] = []
    if start >= end:
        return out
    if end - start > MAX_SCAN and stop_after is None:
        return None
    expect = start
    for n, rec in enumerate(reader.read(topic, partition, start, end, batch=min(500, max(1, end - start))), 1):
        if gaps is not None and rec.offset > expect:
            gaps.append(expect)
        expect = rec.offset + 1
        if rec.timestamp == ts and rec.fingerprint == fp:
            out.append(rec.offset)
            if stop_after is not None and len(out) >= stop_after:
                return out
        if n >= MAX_SCAN:
            return None
    return out


def count_identical_before(reader: PartitionReader, topic: str, partition: int, rec: Record, lo: int,
                           skew_ms: int, *, lo_proves: bool) -> int | None:
    """How many records identical to ``rec`` lie before it, counted from a proven boundary (a
    record older than rec.timestamp − 2S; the log start too when ``lo_proves``); None when it
    cannot be counted within :data:`MAX_SCAN` records."""
    b = safe_floor(reader, topic, partition, rec.timestamp - 2 * skew_ms, lo, rec.offset)
    if b == lo and not lo_proves and lo < rec.offset:
        return None
    found = identical_offsets(reader, topic, partition, rec.timestamp, rec.fingerprint, b, rec.offset)
    return None if found is None else len(found)


def _fallback(reader: PartitionReader, topic: str, partition: int, ts: int, lo: int, hi: int, skew_ms: int,
              start_fetches: int, bound: _Bound) -> RemapResult:
    """The skew-safe position (``bound``): the first offset after a record proven older than
    ts − lower·S; records up to the first one proven newer than ts + upper·S may be re-read."""
    p = consistent_floor(reader, topic, partition, ts - bound.lower * skew_ms, lo, hi, skew_ms)
    u = safe_ceiling(reader, topic, partition, ts + bound.upper * skew_ms, p, hi)
    _check_proven(reader, topic, partition, p, lo, ts - bound.lower * skew_ms)
    return RemapResult(p, bound.method, reader.fetches - start_fetches, (p, u) if u > p else None,
                       proven_by=p - 1 if p > lo else None)


def _check_proven(reader: PartitionReader, topic: str, partition: int, p: int, lo: int, threshold: int) -> None:
    """A target past the point the search proved is a bug, never a result."""
    if p > lo:
        rec = reader.record_at(topic, partition, p - 1, p)
        if rec is None or rec.timestamp >= threshold:
            raise DrtError(f"internal error: remap target {p} on {topic}[{partition}] is not proven safe "
                           f"(record {p - 1} does not predate the bound)")


def remap_partition(reader: PartitionReader, topic: str, partition: int, anchor: Anchor | None,
                    lo: int, hi: int, *, skew_ms: int = 0, taken_at_ms: int | None = None,
                    log: LogTraits = LogTraits()) -> RemapResult:
    """Where on the mirror partition [lo, hi) should a consumer resume after ``anchor``?

    - ``anchor`` None (no record to anchor on: the partition was empty at checkpoint time, or
      the committed offset lies after every record): every record appended after
      ``taken_at_ms`` is unconsumed, so resume after the last record proven older than
      taken_at − 3S (``time``); without ``taken_at_ms``, at the log start (re-read everything).
    - the mirror partition is empty: ``empty`` at ``lo``.
    - the (k+1)-th identical copy found from a proven boundary: ``exact``.
    - otherwise: ``skew_bound`` — provably safe, with the duplicate window.
    ``log`` (:class:`LogTraits`): ``use_index`` — ask the broker's timestamp index first;
    ``lo_proves`` — the log start may serve as a boundary (true on the hot cluster only);
    ``compacted`` — the partition's topic is compacted (``cleanup.policy`` compact): the cleaner
    removes a record whose key comes again later, so a copy of the anchor may be gone while an
    identical record after it remains — the (k+1)-th identical record found is then a later
    one, and resuming after it would skip the records in between. A match with an offset gap
    (a removed record) before it is therefore not proof: the skew-safe position is used.
    """
    start_fetches = reader.fetches
    if lo >= hi:
        return RemapResult(lo, "empty", 0)
    if anchor is None:
        if taken_at_ms is None:
            return RemapResult(lo, "time", 0, (lo, hi))
        return _fallback(reader, topic, partition, taken_at_ms, lo, hi, skew_ms, start_fetches, _BY_TIME)
    if anchor.dup_before is not None:
        k = anchor.dup_before
        b = safe_floor(reader, topic, partition, anchor.timestamp - 2 * skew_ms, lo, hi, use_index=log.use_index)
        if b > lo or log.lo_proves:
            gaps: list[int] = []
            found = identical_offsets(reader, topic, partition, anchor.timestamp, anchor.fingerprint, b, hi,
                                      stop_after=k + 1, gaps=gaps if log.compacted else None)
            if found is not None and len(found) > k and not (gaps and gaps[0] < found[k]):
                hit = found[k]
                return RemapResult(hit + 1 if anchor.after else hit, "exact", reader.fetches - start_fetches,
                                   None, hit, proven_by=b - 1 if b > lo else None)
    # Not provable: the first unconsumed record has timestamp >= c_A − 2S, so resume after the
    # last record proven older than c_A − 4S. Consumed records have timestamp <= c_A + 2S.
    return _fallback(reader, topic, partition, anchor.timestamp, lo, hi, skew_ms, start_fetches, _BY_SKEW)
