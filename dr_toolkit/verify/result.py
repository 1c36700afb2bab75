"""What one verification found (:class:`VerifyResult`): the CLI's JSON (docs/contracts.md), the report's
input, the ledger row's detail. Below :mod:`dr_toolkit.verify.api` (which computes it) and
:mod:`dr_toolkit.verify.report` (which renders it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dr_toolkit.verify import compare as C


@dataclass
class VerifyResult:
    """What one verification found. ``to_json()`` is the CLI's JSON (docs/contracts.md)."""

    counters: dict[str, int]
    source_rows: int
    peer_rows: int
    source: str
    target: str
    key: list[str]
    duration_s: float
    started_at: float
    finished_at: float
    data_time: float
    report_id: str
    report_path: str | None = None
    name: str | None = None
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    buckets: int = 0
    buckets_compared: int = 0
    buckets_differing: int = 0
    duplicate_keys: dict[str, Any] = field(default_factory=dict)
    null_keys: dict[str, int] = field(default_factory=dict)
    schema: dict[str, Any] = field(default_factory=dict)
    window: dict[str, Any] = field(default_factory=dict)
    recompare: dict[str, Any] = field(default_factory=dict)
    bucket_chart: list[dict[str, int]] = field(default_factory=list, repr=False)
    column_mismatches: dict[str, int] = field(default_factory=dict)
    compare_options: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    trend: list[dict[str, Any]] = field(default_factory=list)
    request: dict[str, Any] = field(default_factory=dict)  # what was asked: VerifyRequest.fingerprint()

    @property
    def ok(self) -> bool:
        return self.counters[C.BAD] == 0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.counters,
            "source_rows": self.source_rows, "peer_rows": self.peer_rows,
            "duration_s": round(self.duration_s, 3), "report_path": self.report_path,
            "samples": self.samples, "buckets": self.buckets, "buckets_compared": self.buckets_compared,
            "buckets_differing": self.buckets_differing, "duplicate_keys": self.duplicate_keys,
            "null_keys": self.null_keys, "schema": self.schema, "window": self.window,
            "recompare": self.recompare, "source": self.source, "target": self.target, "key": self.key,
            "name": self.name, "report_id": self.report_id, "started_at": self.started_at,
            "finished_at": self.finished_at, "data_time": self.data_time,
            "column_mismatches": self.column_mismatches, "compare_options": self.compare_options,
            "provenance": self.provenance, "trend": self.trend, "request": self.request,
        }
