"""The Kafka capability's values: a checkpointed partition, a remapped partition, a group's apply.

Typed inside the library; turned into the JSON documents of docs/contracts.md (and the ledger's
``kafka_checkpoints`` rows) only at the edges, by ``to_json`` / ``from_row``. The field names
are those of the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

TRIMMED = "trimmed"  # checkpoint rows whose committed offset lay below hot's log start
LOG_APPEND_TIME = "log_append_time"  # a remap onto a cold topic whose broker restamps records


@dataclass(frozen=True)
class Checkpoint:
    """One partition of one group's checkpoint (a ``kafka_checkpoints`` row)."""

    group_id: str
    topic: str
    partition_id: int
    committed_offset: int | None
    record_timestamp: int | None = None
    timestamp_type: str = "none"
    fingerprint: str | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None
    taken_at: float | None = None
    checkpoint_id: str | None = None  # set on rows read back from the ledger

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Checkpoint:
        """A ledger row (or a JSON checkpoint row)."""
        ts, off, taken = row.get("record_timestamp"), row.get("committed_offset"), row.get("taken_at")
        lo, hi = row.get("log_start_offset"), row.get("high_watermark")
        return cls(str(row["group_id"]), str(row["topic"]), int(row["partition_id"]),
                   None if off is None else int(off), None if ts is None else int(ts),
                   str(row.get("timestamp_type") or "none"), row.get("fingerprint"),
                   None if lo is None else int(lo), None if hi is None else int(hi),
                   None if taken is None else float(taken), row.get("checkpoint_id"))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if d["checkpoint_id"] is None:
            del d["checkpoint_id"]
        return d

    @property
    def trimmed(self) -> bool:
        return self.timestamp_type == TRIMMED


@dataclass(frozen=True)
class Position:
    """Where a consumer resumes on one cold partition, and how it was found."""

    target_offset: int | None
    method: str  # exact | skew_bound | time | empty | trimmed | log_append_time | mm2 | none
    probes: int = 0
    duplicate_window: tuple[int, int] | None = None  # [first, last) offsets that may be re-read

    @property
    def may_reread(self) -> int:
        return self.duplicate_window[1] - self.duplicate_window[0] if self.duplicate_window else 0


NONE = Position(None, "none")  # no committed offset on hot: nothing to carry over


@dataclass(frozen=True)
class RemapRow:
    """One partition of a group's remap: its checkpoint and where it resumes on cold; the MM2
    translations when they were read (``checked``: which of them)."""

    topic: str
    cold_topic: str
    partition: int
    source_offset: int | None
    source_timestamp: int | None
    position: Position
    mm2_target: int | None = None
    mm2_checkpoint: int | None = None
    mm2_disagrees: str | None = None
    checked: frozenset[str] = frozenset()  # "mm2_target" / "mm2_checkpoint": a translation was sought

    @property
    def target_offset(self) -> int | None:
        return self.position.target_offset

    @property
    def method(self) -> str:
        return self.position.method

    @property
    def offset(self) -> int | None:
        """The offset to write on cold (None: nothing to carry over)."""
        return None if self.method == "none" else self.target_offset

    def to_json(self) -> dict[str, Any]:
        p = self.position
        d: dict[str, Any] = {"topic": self.topic, "cold_topic": self.cold_topic, "partition": self.partition,
                             "source_offset": self.source_offset, "source_timestamp": self.source_timestamp,
                             "target_offset": p.target_offset, "method": p.method, "probes": p.probes,
                             "duplicate_window": list(p.duplicate_window) if p.duplicate_window else None,
                             "may_reread": p.may_reread}
        for f in ("mm2_target", "mm2_checkpoint"):
            if f in self.checked:
                d[f] = getattr(self, f)
        if self.mm2_disagrees is not None:
            d["mm2_disagrees"] = self.mm2_disagrees
        return d


def offsets_of(rows: list[RemapRow]) -> dict[tuple[str, int], int]:
    """The offsets a remap writes on cold, by (cold topic, partition)."""
    return {(r.cold_topic, r.partition): r.offset for r in rows if r.offset is not None}


def offsets_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, int]:
    return {f"{t}[{p}]": o for (t, p), o in sorted(offsets.items())}


@dataclass(frozen=True)
class LagRow:
    """One partition's mirror lag: hot records not (provably) on cold and the safe time."""

    topic: str
    partition: int
    hot_end: int | None
    cold_end: int | None
    records_behind: int | None = 0
    seconds_behind: float | None = 0.0
    oldest_unmirrored_ts: float | None = None
    safe_time: float | None = None
    basis: str = ""
    method: str = "empty"  # exact | skew_bound | cold_empty | unproven | log_append_time | empty | error
    error: str | None = None
    # cold's record proven to be the copy of hot's at hot_offset: {cold_offset timestamp fingerprint hot_offset}
    proof: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if d["error"] is None:
            del d["error"]
        if d["proof"] is None:
            del d["proof"]
        return d


@dataclass(frozen=True)
class LagReport:
    checked_at: float
    topics: list[str]
    partitions: list[LagRow]
    selection_notes: list[str]
    max_clock_skew_s: float

    @property
    def caught_up(self) -> bool:
        # a partition hot has and cold lacks is never caught up, even empty: the counts differ
        return all(r.records_behind == 0 and r.method != "cold_lacks_partition" for r in self.partitions)

    @property
    def max_seconds_behind(self) -> float:
        behind = [r.seconds_behind for r in self.partitions if r.seconds_behind is not None]
        return max(behind) if behind else 0.0

    @property
    def safe_time(self) -> float | None:
        safe = [r.safe_time for r in self.partitions]
        return None if not safe or any(s is None for s in safe) else min(s for s in safe if s is not None)

    def to_json(self) -> dict[str, Any]:
        return {"checked_at": self.checked_at, "topics": self.topics,
                "partitions": [r.to_json() for r in self.partitions], "selection_notes": self.selection_notes,
                "caught_up": self.caught_up, "max_seconds_behind": self.max_seconds_behind,
                "safe_time": self.safe_time, "max_clock_skew_s": self.max_clock_skew_s}
