"""MirrorMaker 2 interop: its offset syncs as a second translation (re-read only).

MM2 writes, to its offset-syncs topic (``mm2-offset-syncs.<target>.internal``, on the source
cluster by default), records pairing an upstream offset with the downstream offset of the
same record: key = (topic: int16-length string, partition: int32), value = (upstream offset:
int64, downstream offset: int64), big-endian (Kafka's Struct serialisation). A consumer at
upstream offset U translates, through the newest sync with upstream ≤ U, to the downstream
offset of that sync, plus one when U is past it — a position that can only re-read.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from typing import Any

from dr_toolkit.kafka.client import KafkaCluster


def encode_sync(topic: str, partition: int, upstream: int, downstream: int) -> tuple[bytes, bytes]:
    """An offset-sync record (key, value) as MM2 writes it (tests and the demo)."""
    t = topic.encode()
    return struct.pack(">h", len(t)) + t + struct.pack(">i", partition), struct.pack(">qq", upstream, downstream)


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


def cross_check(parts: list[dict[str, Any]], syncs: OffsetSyncs) -> int:
    """Add MM2's translation to each remapped partition and use it where the search could not
    prove the exact position (MM2's answer only re-reads, so the later of two safe positions is
    safe). An ``exact`` target earlier than MM2's is a disagreement (MM2 would skip records by
    the search's proof): reported, the search's answer kept. Returns the disagreements."""
    disagreements = 0
    for r in parts:
        off = r.get("source_offset")
        if off is None or r.get("target_offset") is None:
            continue
        m = syncs.translate(r["topic"], r["partition"], int(off))
        r["mm2_target"] = m
        if m is None:
            continue
        ours = int(r["target_offset"])
        if r["method"] == "exact":
            if m > ours:
                disagreements += 1
                r["mm2_disagrees"] = f"MM2 translates to {m}, after the proven position {ours}"
        elif m > ours:
            window = r.get("duplicate_window")
            r.update(target_offset=m, method="mm2", probes=r.get("probes", 0))
            if window:
                r["duplicate_window"] = [m, window[1]] if window[1] > m else None
                r["may_reread"] = max(0, window[1] - m) if window[1] > m else 0
    return disagreements
