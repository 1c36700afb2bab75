"""Values of the ledger's rows that callers add whole: a manifest, a verification report.

Each is one row of its table (``sql/schema.sql``); the ledger adds what it stamps itself
(``created_at``) and turns ``detail`` into JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ManifestRow:
    """A ``manifests`` row: the manifest a replication run wrote for ``source`` → ``target``
    (``location``: where its entries are; ``source_time``: the listing time it holds)."""

    manifest_id: str
    source: str
    target: str
    location: str
    entries: int
    total_bytes: int
    source_time: float
    policy: str | None = None
    base_manifest_id: str | None = None
    source_snapshot: str | None = None
    content_digest: str | None = None


@dataclass(frozen=True)
class VerifyReportRow:
    """A ``verify_reports`` row: one verification's counters (``GOODROWS``, ``BADROWS``,
    ``ONLY_IN_SOURCE_TABLE_ROWS``, ``ONLY_IN_PEER_TABLE_ROWS``, ``CONTENT_DIFFERENT_ROWS``), row
    counts and times."""

    report_id: str
    source: str
    target: str
    counters: Mapping[str, int]
    source_rows: int
    peer_rows: int
    started_at: float
    finished_at: float
    name: str | None = None
    report_path: str | None = None
    detail: Any = None
