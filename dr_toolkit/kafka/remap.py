"""Find, on the mirror, the offset of the first record after a checkpointed one.

The search (DESIGN §1.2): the broker's timestamp index is asked first, but only as a guess
that one fetch checks; then a binary search over record timestamps with fetches (seek, read
one record) between the partition's beginning and end offsets; then one sequential read of
the window around the found position, where records share the checkpoint's timestamp (or
timestamps went backwards), matching fingerprints to find the exact record.

When the fingerprint is not in the window, the answer falls back to the earliest position
that is safe (at-least-once: never skip a record) and reports the duplicate window.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from dr_toolkit.kafka.client import Record

# Records read on each side of the binary search's answer when looking for the fingerprint:
# covers runs of records sharing one timestamp and local disorder of CreateTime timestamps.
WINDOW = 64
MAX_SCAN = 20_000

# Prefix of a checkpoint fingerprint taken from the record AT the committed offset (the first
# unconsumed one) — used when no record was consumed before it (offset 0, log start).
NEXT_PREFIX = "@next:"


class PartitionReader(Protocol):
    fetches: int

    def read(self, topic: str, partition: int, start: int, end: int, *, max_records: int | None = None,
             batch: int = 500) -> Iterator[Record]: ...

    def record_at(self, topic: str, partition: int, offset: int, end: int) -> Record | None: ...

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None: ...


@dataclass(frozen=True)
class Anchor:
    """The checkpointed record to look for: its timestamp and fingerprint. ``after`` is True
    when it was the last consumed record (target = its offset + 1), False when it was the first
    unconsumed one (target = its offset)."""

    timestamp: int
    fingerprint: str
    after: bool = True


@dataclass
class RemapResult:
    target_offset: int | None
    method: str  # exact | timestamp | empty | end | none
    probes: int
    duplicate_window: tuple[int, int] | None = None  # [first, last) offsets that may be re-read
    matched_offset: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"target_offset": self.target_offset, "method": self.method, "probes": self.probes,
                "duplicate_window": list(self.duplicate_window) if self.duplicate_window else None}


def probe_budget(n: int) -> int:
    """The most probes a partition of ``n`` records may cost: ⌈log2 n⌉ + 3."""
    return (math.ceil(math.log2(n)) if n > 1 else 0) + 3


def first_at_or_after(reader: PartitionReader, topic: str, partition: int, ts: int, lo: int, hi: int,
                      *, use_index: bool = True) -> int:
    """Binary search: the first offset in [lo, hi) whose record has timestamp >= ``ts``
    (``hi`` when none), assuming timestamps mostly grow. The broker's index answer narrows
    the range only after a fetch confirmed which side of it we are on."""
    a, b = lo, hi
    if use_index:
        guess = reader.offset_for_time(topic, partition, ts)
        if guess is not None and a < guess < b:
            rec = reader.record_at(topic, partition, guess, b)
            if rec is None or rec.timestamp >= ts:
                b = guess
            else:
                a = rec.offset + 1
    while a < b:
        mid = (a + b) // 2
        rec = reader.record_at(topic, partition, mid, b)
        if rec is None or rec.timestamp >= ts:
            b = mid
        else:
            a = rec.offset + 1
    return a


@dataclass
class _Seen:
    matches: list[int]
    first_same: int | None = None
    last_same: int | None = None
    start: int = 0
    end: int = 0  # [start, end) read so far

    def add(self, rec: Record, anchor: Anchor) -> None:
        if rec.timestamp == anchor.timestamp:
            self.first_same = rec.offset if self.first_same is None else min(self.first_same, rec.offset)
            self.last_same = rec.offset if self.last_same is None else max(self.last_same, rec.offset)
        if rec.fingerprint == anchor.fingerprint:
            self.matches.append(rec.offset)


def _scan(reader: PartitionReader, topic: str, partition: int, anchor: Anchor, pos: int, lo: int, hi: int,
          window: int) -> _Seen:
    """One sequential read around ``pos``: ``window`` records before it, then on while records
    still carry the anchor's timestamp (a run of equal timestamps), at least ``window`` after."""
    seen = _Seen([], start=max(lo, pos - window), end=max(lo, pos - window))
    first_batch = pos - seen.start + window + 1
    for rec in reader.read(topic, partition, seen.start, hi, max_records=MAX_SCAN, batch=first_batch):
        seen.add(rec, anchor)
        seen.end = rec.offset + 1
        if rec.offset >= pos + window and rec.timestamp != anchor.timestamp:
            break
    return seen


def _widen(reader: PartitionReader, topic: str, partition: int, anchor: Anchor, pos: int, lo: int, hi: int,
           seen: _Seen, window: int) -> None:
    """CreateTime far out of order: read outwards from ``pos`` in growing steps (each step two
    sequential reads) until the fingerprint shows up or the partition is read (MAX_SCAN cap)."""
    reach = 4 * window
    while not seen.matches and (seen.start > lo or seen.end < hi) and seen.end - seen.start < MAX_SCAN:
        a, b = max(lo, pos - reach), min(hi, max(seen.end, pos + reach))
        for rng in ((a, seen.start), (seen.end, b)):
            if rng[0] < rng[1]:
                for rec in reader.read(topic, partition, rng[0], rng[1], batch=min(500, rng[1] - rng[0])):
                    seen.add(rec, anchor)
        seen.start, seen.end = min(a, seen.start), max(b, seen.end)
        reach *= 4


def remap_partition(reader: PartitionReader, topic: str, partition: int, anchor: Anchor | None,
                    lo: int, hi: int, *, window: int = WINDOW, use_index: bool = True,
                    widen: bool = True) -> RemapResult:
    """Where on the mirror partition [lo, hi) should a consumer resume after ``anchor``?

    - ``anchor`` None: nothing to anchor on (the source partition was empty): resume at the
      mirror's end (``empty``), re-reading nothing.
    - the mirror partition is empty: ``empty`` at ``lo``.
    - fingerprint found: ``exact``.
    - not found, but records with the timestamp exist: ``timestamp`` at the earliest of them,
      with the duplicate window.
    - the checkpoint is newer than everything on the mirror: ``end`` (the mirror is behind).

    Probes: the index guess costs one fetch and, when consistent, one window read that usually
    ends the search; otherwise a binary search (⌈log2 n⌉ fetches) and one window read. Only when
    timestamps are far out of order (the fingerprint is not near any timestamp crossing) does
    ``widen`` read outwards, costing more probes (reported) rather than a wrong answer.
    """
    start_fetches = reader.fetches
    if anchor is None:
        return RemapResult(hi, "empty", 0)
    if lo >= hi:
        return RemapResult(lo, "empty", 0)
    scanned_at: int | None = None
    found = _Seen([])
    if use_index:
        guess = reader.offset_for_time(topic, partition, anchor.timestamp)
        if guess is not None and lo < guess < hi:
            rec = reader.record_at(topic, partition, guess, hi)
            if rec is not None and rec.timestamp >= anchor.timestamp:
                found = _scan(reader, topic, partition, anchor, rec.offset, lo, hi, window)
                scanned_at = rec.offset
    if found.matches and scanned_at is not None:
        pos = scanned_at
    else:
        pos = first_at_or_after(reader, topic, partition, anchor.timestamp, lo, hi, use_index=False)
        if pos != scanned_at:
            found = _scan(reader, topic, partition, anchor, pos, lo, hi, window)
        if widen and not found.matches:
            _widen(reader, topic, partition, anchor, pos, lo, hi, found, window)
    matches, first_same_ts, last_same_ts = sorted(found.matches), found.first_same, found.last_same
    probes = reader.fetches - start_fetches
    if matches:
        hit = matches[0]  # identical records: resume at the first one (re-reading, never skipping)
        target = hit + 1 if anchor.after else hit
        dup = (target, matches[-1] + (1 if anchor.after else 0)) if len(matches) > 1 else None
        return RemapResult(target, "exact", probes, dup if dup and dup[0] < dup[1] else None, hit)
    if first_same_ts is not None and last_same_ts is not None:
        # The record is not on the mirror as fingerprinted (re-encoded headers, say): resume at the
        # first record sharing its timestamp — every record of that run may be read twice.
        return RemapResult(first_same_ts, "timestamp", probes, (first_same_ts, last_same_ts + 1))
    if pos >= hi:
        return RemapResult(hi, "end", probes)
    return RemapResult(pos, "timestamp", probes)
