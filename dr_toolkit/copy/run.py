"""One copy run's values: what it was given (:class:`CopyRun`), what it found to start from
(:class:`Base`: the last manifest; :class:`Snaps`: the source's snapshots) and what it did
(:class:`CopyResult`, the JSON of `drt distcp`). Shared by the stages (listing, planning,
copying, commit) and the front door (:mod:`dr_toolkit.copy.api`)."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy.listing import Side
from dr_toolkit.copy.request import Progress
from dr_toolkit.copy.state import StateStore
from dr_toolkit.fs.base import SnapshotInfo
from dr_toolkit.topology import CopyOptions

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.secrets import Credentials

SNAP_PREFIX = "drt-"


@dataclass
class CopyResult:
    source: str
    target: str
    mode: str
    mode_reason: str
    run_id: str | None = None
    policy: str | None = None
    dry_run: bool = False
    engine: str = "local"
    status: str = "planned"
    files_total: int = 0
    bytes_total: int = 0
    files_copied: int = 0
    files_appended: int = 0
    files_renamed: int = 0
    bytes_copied: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    files_type_changed: int = 0
    attributes_reapplied: int = 0  # --preserve: permission or mtime set again on files kept as they are
    entries_deleted: int = 0  # target entries that are not regular files removed (symlinks, FIFOs, directories)
    files_failed: int = 0
    files_open: int = 0
    # the source listing is the tree at one moment (a snapshot, or directories that held still:
    # see _proven_listing); when not, the run states no safe time, defers deletions, exits 1
    listing_proven: bool = True
    listing_changing: list[str] = field(default_factory=list)
    deletes_deferred: int = 0
    entries_skipped: int = 0  # source entries that are not regular files (symlinks, empty dirs, ...)
    files_read_for_planning: int = 0
    proof: str = "checksum"  # CopyOptions.proof: what proves a file equal (proof_basis says it for this pair)
    proof_basis: str = ""
    manifest_id: str | None = None
    base_manifest_id: str | None = None
    source_snapshot: str | None = None
    source_time: float | None = None
    watermark: float | None = None
    state_location: str | None = None
    duration_s: float = 0.0
    basis: dict[str, int] = field(default_factory=dict)
    basis_samples: list[dict[str, str]] = field(default_factory=list)
    fallbacks: list[dict[str, str]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    skipped_entries: list[dict[str, str]] = field(default_factory=list)
    deleted_entries: list[dict[str, str]] = field(default_factory=list)  # {path, reason}: what they were
    skipped_reasons: dict[str, int] = field(default_factory=dict)
    open_files: list[dict[str, Any]] = field(default_factory=list)
    verified: dict[str, int] = field(default_factory=dict)
    changed_during_copy: list[str] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)  # source files opened (planning and copying)
    manifests_pruned: int = 0
    snapshots_cleaned: list[str] = field(default_factory=list)
    log_file: str | None = None  # -log DIR: where this run's per-file log was written
    file_log: list[dict[str, Any]] = field(default_factory=list)  # its lines (not in the JSON result)

    @property
    def ok(self) -> bool:
        return self.files_failed == 0 and self.listing_proven

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("file_log")
        d["fallback_count"] = len(self.fallbacks)
        d["fallbacks"] = self.fallbacks[:100]
        d["failures"] = self.failures[:100]
        d["skipped_entries"] = self.skipped_entries[:100]
        d["deleted_entries"] = self.deleted_entries[:100]
        d["open_files"] = self.open_files[:100]
        d["files_read"] = self.files_read[:1000]
        d["listing_changing"] = self.listing_changing[:100]
        d["duration_s"] = round(self.duration_s, 3)
        if self.dry_run:
            d["files_to_copy"] = self.files_copied
            d["bytes_to_copy"] = self.bytes_copied
        return d

    def stats(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in ("files_total", "files_copied", "bytes_copied", "files_skipped",
                                                   "files_deleted", "files_failed")}


@dataclass(frozen=True)
class CopyRun:
    """One copy run's inputs, fixed before it plans: built once by :func:`dr_toolkit.copy.api.distcp`
    from its :class:`~dr_toolkit.copy.request.CopyRequest` and handed to every stage (instead of a
    dozen arguments through each)."""

    src: Side
    tgt: Side
    state: StateStore
    options: CopyOptions
    ledger: Ledger | None
    dry_run: bool
    policy: str | None
    progress: Progress | None
    creds: tuple[Credentials | None, Credentials | None]
    spark_master: str | None
    t0: float
    cancel: threading.Event
    named: tuple[str, str, str] | None = None  # -diff/-rdiff: (snapshot read, what the report says, base named)


@dataclass
class Base:
    """The manifest a run starts from (none: ``why_not`` says why)."""

    manifest_id: str | None = None
    header: dict[str, Any] | None = None
    entries: mf.Entries | None = None
    why_not: str = "no earlier manifest: first run"
    digest: str | None = None  # sha256 of the base manifest's bytes


def base_of(ledger: Ledger | None, state: StateStore, src: Side, tgt: Side) -> Base:
    """The last manifest of the pair: the ledger's (its digest checked), else the state location's newest."""
    if ledger is not None:
        row = ledger.last_manifest(source=src.loc.uri, target=tgt.loc.uri)
        if row is None:
            return Base()
        got = state.read_manifest(row["manifest_id"], row["content_digest"])
        if got is None:
            return Base(row["manifest_id"], why_not=f"manifest {row['manifest_id']} is missing from the state "
                                                     f"location or altered")
        return Base(row["manifest_id"], got[0], got[1], "", row["content_digest"])
    latest = state.latest()
    if latest is None:
        return Base()
    return Base(latest[0], latest[1], latest[2], "", latest[3])


@dataclass
class Snaps:
    """The source's snapshots as the NameNode lists them at the start of a snapshot-mode run."""

    read: str  # the snapshot the run reads
    infos: dict[str, SnapshotInfo]
    #: -diff S1 S2 / -rdiff S2 S1: the snapshot the user says the target's last run read (S1 / S2)
    expected: str | None = None


def new_id(prefix: str) -> str:
    """A sortable run id like the ledger's (``<prefix>-<UTC yyyymmddThhmmss>-<8 hex>``), made here
    so a `drt distcp` without a ledger does not load SQLAlchemy."""
    return f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


