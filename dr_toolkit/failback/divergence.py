"""What the old hot cluster took after the recovery point: one :class:`Divergence` per item.

Before anything on the old hot cluster is rolled back or overwritten by re-protect, each
capability lists what it holds that the new active cluster does not (files changed after the
common snapshot, Kafka records after the position cold held, HBase cells written after the
recovery point). The operator acknowledges each item (as metadata-lint findings are) and each is
kept — moved aside on the old hot cluster, never deleted; ``kept_at`` says where.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Capability = Literal["hdfs", "kafka", "hbase"]


@dataclass(frozen=True)
class Divergence:
    """One item the old hot cluster holds that the active cluster lacks.

    ``where``: a path (hdfs), ``topic:partition`` (kafka) or ``table`` / ``table:row`` (hbase);
    ``detail``: what it is (change kind, sizes, offsets and counts, timestamps);
    ``kept_at``: where it was moved aside on the old hot cluster (None until set aside)."""

    capability: Capability
    policy: str
    where: str
    detail: dict[str, Any] = field(default_factory=dict)
    kept_at: str | None = None

    @property
    def id(self) -> str:
        """Stable across runs and resumes: what an operator acknowledges (``--acknowledge ID``)."""
        raw = json.dumps([self.capability, self.policy, self.where], separators=(",", ":"))
        return f"{self.capability}:{hashlib.sha256(raw.encode()).hexdigest()[:12]}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Divergence:
        return cls(capability=d["capability"], policy=d["policy"], where=d["where"],
                   detail=dict(d.get("detail") or {}), kept_at=d.get("kept_at"))
