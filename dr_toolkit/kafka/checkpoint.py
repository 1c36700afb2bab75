"""Checkpoint consumer groups on the hot cluster (docs/design.md §1.2), any number of them in one pass.

Per partition: the committed offset, the last consumed record's timestamp and fingerprint with
the count of identical records before it (partitions without a record to anchor on are remapped
by time). Every committed partition of each group is recorded (the group's whole committed set
plus its policies' literal topics, minus ``exclude_topics``).

The work is shared: one metadata call, the groups' committed offsets asked concurrently (the
OffsetFetch v8 with many groups per request, :mod:`dr_toolkit.kafka.wire`), watermarks read once per partition, and
each distinct (partition, committed offset) searched once however many groups share it, on a
small pool of probing clients.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError
from dr_toolkit.kafka.client import KafkaCluster, Record
from dr_toolkit.kafka.mirror import WORKERS, ClientPool, Mirror, marks_of, partition_counts, run_all
from dr_toolkit.kafka.remap import DUP_SEP, NEXT_PREFIX, WINDOW, count_identical_before
from dr_toolkit.kafka.rows import TRIMMED, Checkpoint
from dr_toolkit.ledger.store import new_id

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger

@dataclass(frozen=True)
class CheckpointRun:
    checkpoint_id: str
    groups: list[str]
    taken_at: float
    duration_s: float
    partitions: list[Checkpoint]
    stored: bool
    distinct_searches: int
    fetches: int
    records_read: int
    selection_notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint_id": self.checkpoint_id, "groups": self.groups, "taken_at": self.taken_at,
                "duration_s": self.duration_s, "partitions": [r.to_json() for r in self.partitions],
                "stored": self.stored, "distinct_searches": self.distinct_searches, "fetches": self.fetches,
                "records_read": self.records_read, "selection_notes": self.selection_notes}


def _encode_fp(prefix: str, rec: Record, dup_before: int | None) -> str:
    return f"{prefix}{rec.fingerprint}{DUP_SEP}{'?' if dup_before is None else dup_before}"


def _dup_count(c: KafkaCluster, t: str, p: int, window: list[Record], rec: Record, lo: int, skew: int) -> int | None:
    """Identical records before ``rec`` on hot, from a proven boundary: inside the window read
    already when it holds a record older than rec.timestamp − 2S, else by a search."""
    before = [r for r in window if r.offset < rec.offset]
    for i in range(len(before) - 1, -1, -1):
        if before[i].timestamp < rec.timestamp - 2 * skew:
            return sum(1 for r in before[i + 1:] if (r.timestamp, r.fingerprint) == (rec.timestamp, rec.fingerprint))
    if before and before[0].offset <= lo:  # the window reaches the log start: it is complete
        return sum(1 for r in before if (r.timestamp, r.fingerprint) == (rec.timestamp, rec.fingerprint))
    return count_identical_before(c, t, p, rec, lo, skew, lo_proves=True)


def _first_unconsumed(c: KafkaCluster, t: str, p: int, off: int, lo: int, hi: int) -> Record | None:
    """The record at the committed offset (or the next one). An open transaction hides its records
    and every later one from read_committed: the first unconsumed record may lie at or after the
    last stable offset — date it with a read_uncommitted read rather than fall back to the
    checkpoint's time (which would resume after it once the transaction commits and the mirror
    copies it)."""
    nxt = max(off, lo)
    if nxt >= hi:
        return None
    lso = min(hi, c.stable_ends([(t, p)]).get((t, p), hi))
    rec = c.record_at(t, p, nxt, lso) if nxt < lso else None
    if rec is None and lso < hi:
        rec = c.record_at(t, p, max(nxt, lso), hi, committed=False)
    return rec


def checkpoint_row(c: KafkaCluster, group: str, t: str, p: int, off: int | None, taken_at: float,
                   skew: int, *, marks: tuple[int, int] | None = None) -> Checkpoint:
    """One partition's checkpoint: the committed offset, the last consumed data record (control
    records and aborted transactions are never returned: read_committed) with the number of
    identical records before it; where no record was consumed before the committed offset, the
    first unconsumed record (prefix ``@next:``); where neither exists (empty partition,
    committed at or past the end), no fingerprint: the remap then goes by ``taken_at``."""
    lo, hi = marks if marks is not None else c.watermarks(t, p)
    row = Checkpoint(group, t, p, off, log_start_offset=lo, high_watermark=hi, taken_at=taken_at)
    if off is None:
        return row
    if off < lo:
        # The group's next records were removed from hot (retention, DeleteRecords) before it
        # read them, and the record it read last with them: nothing on hot anchors the
        # position. Their copies may still be on cold — the remap resumes at cold's start.
        return replace(row, timestamp_type=TRIMMED)
    end = min(off, hi)
    window = list(c.read(t, p, max(lo, end - WINDOW), end)) if end > lo else []
    if window:
        rec: Record | None = window[-1]
        prefix = ""
        dup = _dup_count(c, t, p, window, window[-1], lo, skew)
    else:
        rec, prefix = _first_unconsumed(c, t, p, off, lo, hi), NEXT_PREFIX
        dup = count_identical_before(c, t, p, rec, lo, skew, lo_proves=True) if rec is not None else None
    if rec is None:
        return row
    return replace(row, record_timestamp=rec.timestamp, timestamp_type=rec.timestamp_type,
                   fingerprint=_encode_fp(prefix, rec, dup))


def checkpoint_groups(mirror: Mirror, ledger: Ledger | None, groups: list[str] | None = None, *,
                      workers: int = WORKERS) -> CheckpointRun:
    """Checkpoint ``groups`` (default: the policies' groups, ``groups_regex`` resolved against the
    hot cluster's live groups) and store the checkpoint when ``ledger`` is given."""
    t0 = time.monotonic()
    taken_at = time.time()
    checkpoint_id = new_id("ckpt")
    notes: list[str] = []
    if groups is None:
        groups, notes = mirror.protected_groups()
    if not groups:
        raise ConfigError("no consumer groups to checkpoint" + (f" ({'; '.join(notes)})" if notes else ""),
                          where=mirror.source_file,
                          hint="list groups under policies.kafka[].groups (or groups_regex) or pass --group")
    with mirror.client("hot") as hot:
        pool = ClientPool(lambda: mirror.client("hot"))
        try:
            have = hot.topics()
            _ = hot.admin  # one admin client shared by the threads
            committed = hot.committed_many(groups, have, workers=workers)  # batched OffsetFetch (wire.py)
            plan: dict[str, list[tuple[str, int]]] = {}
            for g in groups:
                # the policies' literal topics (their partitions recorded even without a commit) and
                # every committed topic; a topics_regex match the group never committed adds no rows
                # (they would say "no commit" for groups × every matched partition, nothing carried)
                topics = [t for t in dict.fromkeys([*mirror.policy_topics(g),
                                                    *sorted({t for t, _ in committed[g]})])
                          if not mirror.topic_excluded(g, t)]
                counts = partition_counts(hot, topics, have)
                plan[g] = [(t, p) for t in topics for p in range(counts[t])]
            marks = marks_of(hot, pool, sorted({tp for tps in plan.values() for tp in tps}), workers)
            keys = {(t, p, committed[g].get((t, p))) for g, tps in plan.items() for t, p in tps}
            shared = run_all(lambda k: checkpoint_row(pool.get(), "", k[0], k[1], k[2], taken_at, mirror.skew_ms,
                                                      marks=marks[(k[0], k[1])]), keys, workers)
            fetches, records = pool.stats()
        finally:
            pool.close()
    rows = [replace(shared[(t, p, committed[g].get((t, p)))], group_id=g) for g in groups for t, p in plan[g]]
    duration = round(time.monotonic() - t0, 3)
    if ledger is not None and rows:
        ledger.add_checkpoint(checkpoint_id, [r.to_json() for r in rows])
        ledger.set_watermark("kafka", "checkpoint", taken_at,
                             {"checkpoint_id": checkpoint_id, "groups": len(groups), "duration_s": duration})
    return CheckpointRun(checkpoint_id, list(groups), taken_at, duration, rows, ledger is not None, len(keys),
                         fetches, records, notes)
