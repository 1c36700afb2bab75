"""MirrorMaker 2 interop: its offset syncs and checkpoints as second translations (re-read only).

MM2 writes, to its offset-syncs topic (``mm2-offset-syncs.<target>.internal``, on the source
cluster by default), records pairing an upstream offset with the downstream offset of the
same record: key = (topic: int16-length string, partition: int32), value = (upstream offset:
int64, downstream offset: int64), big-endian (Kafka's Struct serialisation). A consumer at
upstream offset U translates, through the newest sync with upstream ≤ U, to the downstream
offset of that sync, plus one when U is past it — a position that can only re-read.

MM2's checkpoint connector writes, to ``<source alias>.checkpoints.internal`` on the target
cluster, each group's translated position: key = (group: string, topic: string — the
*downstream* name, partition: int32), value = (version: int16 = 0, upstream offset: int64,
downstream offset: int64, metadata: string); strings are an int16 length and UTF-8 bytes. A
checkpoint with upstream offset ≤ the group's committed offset we checkpointed is a safe
(re-read-only) position for it.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.rows import Position, RemapRow


def encode_sync(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    """An offset-sync record (key, value) as MM2 writes it (tests and the demo)."""
    t = topic.encode()
    return struct.pack(">h", len(t)) + t + struct.pack(">i", partition), struct.pack(">qq", upstream, downstream)


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _read_string(buf: bytes, at: int) -> tuple[str, int] | None:
    if len(buf) < at + 2:
        return None
    (n,) = struct.unpack_from(">h", buf, at)
    if n < 0 or len(buf) < at + 2 + n:
        return None
    return buf[at + 2:at + 2 + n].decode(errors="replace"), at + 2 + n


def encode_checkpoint(group: str, topic: str, partition: int, upstream: int, downstream: int,
                      metadata: str = "") -> tuple[bytes, bytes]:
    """A checkpoint record (key, value) as MM2's checkpoint connector writes it (tests, the demo)."""
    return (_string(group) + _string(topic) + struct.pack(">i", partition),
            struct.pack(">hqq", 0, upstream, downstream) + _string(metadata))


def decode_checkpoint(key: bytes | None, value: bytes | None) -> tuple[str, str, int, int, int] | None:
    """(group, downstream topic, partition, upstream offset, downstream offset), or None."""
    if not key or not value or len(value) < 18:
        return None
    g = _read_string(key, 0)
    t = _read_string(key, g[1]) if g else None
    if g is None or t is None or len(key) < t[1] + 4:
        return None
    (partition,) = struct.unpack_from(">i", key, t[1])
    version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    if version != 0:
        return None
    return g[0], t[0], partition, upstream, downstream


def decode_sync(key: bytes | None, value: bytes | None) -> tuple[str, int, int, int] | None:
    if not key or not value or len(key) < 6 or len(value) < 16:
        return None
    (n,) = struct.unpack_from(">h", key, 0)
    if n < 0 or len(key) < 2 + n + 4:
        return None
    topic = key[2:2 + n].decode(errors="replace")
    (partition,) = struct.unpack_from(">i", key, 2 + n)
    upstream, downstream = struct.unpack_from(">qq", value, 0)
    return topic, partition, upstream, downstream


@dataclass
class OffsetSyncs:
    """Syncs by (topic, partition), sorted by upstream offset (the newest per upstream offset)."""

    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        syncs = self.by_partition.get((topic, partition))
        if not syncs:
            return None
        i = bisect.bisect_right(syncs, (upstream, 1 << 62)) - 1
        if i < 0:
            return None
        up, down = syncs[i]
        return down + (0 if upstream == up else 1)


def read_offset_syncs(hot: KafkaCluster, topic: str) -> OffsetSyncs:
    """Every sync in MM2's offset-syncs topic (one partition), the newest winning."""
    raw: dict[tuple[str, int], dict[int, int]] = {}
    lo, hi = hot.watermarks(topic, 0)
    for key, value in hot.read_raw(topic, 0, lo, hi):
        s = decode_sync(key, value)
        if s is not None:
            raw.setdefault((s[0], s[1]), {})[s[2]] = s[3]
    return OffsetSyncs({tp: sorted(d.items()) for tp, d in raw.items()})


def read_all_checkpoints(cold: KafkaCluster, topic: str, groups: set[str] | None = None,
                         ) -> dict[str, dict[tuple[str, int], tuple[int, int]]]:
    """Every group's (or ``groups``') newest MM2 checkpoints, read in one pass over the topic."""
    out: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
    for part in range(cold.topics().get(topic, 0)):
        lo, hi = cold.watermarks(topic, part)
        for key, value in cold.read_raw(topic, part, lo, hi):
            c = decode_checkpoint(key, value)
            if c is not None and (groups is None or c[0] in groups):
                out.setdefault(c[0], {})[(c[1], c[2])] = (c[3], c[4])  # log order: the newest wins
    return out


def cross_check_checkpoints(rows: list[RemapRow], cps: dict[tuple[str, int], tuple[int, int]],
                            ) -> tuple[list[RemapRow], int]:
    """As :func:`cross_check`, with MM2's checkpoints of the group: a checkpoint whose upstream
    offset is at most the committed offset we remapped translates it (re-read only)."""

    def translate(r: RemapRow) -> int | None:
        cp = cps.get((r.cold_topic, r.partition))
        if cp is None or r.source_offset is None or cp[0] > r.source_offset:
            return None
        return cp[1]

    return _cross(rows, translate, "mm2_checkpoint")


def cross_check(rows: list[RemapRow], syncs: OffsetSyncs) -> tuple[list[RemapRow], int]:
    """Add MM2's translation to each remapped partition and use it where the search could not
    prove the exact position (MM2's answer only re-reads, so the later of two safe positions is
    safe). An ``exact`` target earlier than MM2's is a disagreement (MM2 would skip records by
    the search's proof): reported, the search's answer kept. Returns the rows and the
    disagreements."""
    return _cross(rows, lambda r: syncs.translate(r.topic, r.partition, int(r.source_offset or 0)), "mm2_target")


def _cross(rows: list[RemapRow], translate: Callable[[RemapRow], int | None], field: str,
           ) -> tuple[list[RemapRow], int]:
    disagreements = 0
    out: list[RemapRow] = []
    for r in rows:
        ours = r.target_offset
        if r.source_offset is None or ours is None:
            out.append(r)
            continue
        m = translate(r)
        r = (replace(r, checked=r.checked | {field}, mm2_target=m) if field == "mm2_target"
             else replace(r, checked=r.checked | {field}, mm2_checkpoint=m))
        if m is not None and m > ours:
            if r.method == "exact":
                disagreements += 1
                r = replace(r, mm2_disagrees=f"MM2 ({field}) translates to {m}, after the proven position {ours}")
            else:
                w = r.position.duplicate_window
                r = replace(r, position=Position(m, "mm2", r.position.probes,
                                                 (m, w[1]) if w is not None and w[1] > m else None))
        out.append(r)
    return out, disagreements
