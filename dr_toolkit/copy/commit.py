"""The commit stage (DistCp's CopyCommitter): what happens around the files placed.

Before the copy: what killed runs left is cleaned (:func:`clean_tmp`: temporary files and S3
multipart uploads on the target; :func:`clean_snapshots`: their source snapshots). After it: the
outcomes are accounted into the new state (:func:`account`: each file placed by its atomic
rename — see :mod:`dr_toolkit.copy.execute` — becomes a manifest entry, each failed or open one
pending), directories emptied are pruned (:func:`prune`), the manifest is written and indexed
(:func:`record_manifest`), the ledger row finished (:func:`finish_run`) and the ``-log`` file
written (:func:`write_log`).
"""

from __future__ import annotations

import json
import logging
from itertools import chain
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy.execute import Outcome
from dr_toolkit.copy.listing import Side
from dr_toolkit.copy.plan import Plan, _parents, filters_key
from dr_toolkit.copy.request import Opener
from dr_toolkit.copy.run import SNAP_PREFIX, Base, CopyResult, CopyRun
from dr_toolkit.copy.state import StateStore
from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.base import FileSystem, run_tag, tmp_run_tag
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.ledger.rows import ManifestRow

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.topology import Topology

#: the copy's log lines keep the name they had before the stages had modules of their own (stderr)
log = logging.getLogger("dr_toolkit.copy.api")


def clean_tmp(tgt: Side, run_id: str, found: list[str] | None = None) -> int:
    """Remove what killed runs left on the target: temp files (``found`` by the target listing,
    else a walk) and (S3) multipart uploads. Runs only under the target's lease, so no other
    live run has temp files there."""
    mine = run_tag(run_id)
    n = 0
    for p in list(tgt.fs.list_tmp(tgt.root)) if found is None else found:
        tgt.check()
        if tgt.marker is not None and p == tgt.marker.path:
            continue  # this run's fencing token, not a killed run's temp file
        if tmp_run_tag(p) != mine and tgt.fs.delete(p):
            n += 1
    abort = getattr(tgt.fs, "abort_stale_uploads", None)
    if abort is not None:
        n += int(abort(tgt.root))
    return n


def clean_snapshots(src: Side, state: StateStore, base: Base, result: CopyResult) -> None:
    """Delete the source snapshots this pair created and no longer needs (killed runs)."""
    keep = str(base.header.get("source_snapshot")) if base.header and base.header.get("source_snapshot") else None
    for name in state.noted_snapshots():
        if name == keep:
            continue
        try:
            if src.fs.snapshot_exists(src.root, name):
                src.fs.delete_snapshot(src.root, name)
                result.snapshots_cleaned.append(name)
            state.forget_snapshot(name)
        except (OSError, UnreachableError) as exc:
            log.warning("could not delete the orphaned snapshot %s of %s: %s", name, src.root, exc)


def drop_snapshot(src: Side, state: StateStore, name: str) -> None:
    try:
        if src.fs.snapshot_exists(src.root, name):
            src.fs.delete_snapshot(src.root, name)
        state.forget_snapshot(name)
    except Exception:  # noqa: BLE001 - best effort; it is noted and cleaned by the next run
        log.warning("could not delete snapshot %s of %s", name, src.root)


class LogDir:
    """The -log directory of a run (its filesystem, closed by the front door)."""

    def __init__(self, fs: FileSystem, root: str) -> None:
        self.fs, self.root = fs, root


def open_log_dir(uri: str, src: Side, tgt: Side, topology: Topology | None, access: Access,
                 open_fs: Opener) -> LogDir:
    """The -log directory (a path or URI), made now: a bad one is refused before anything is copied
    (one inside the source or target too: the logs would be copied, or deleted by --delete)."""
    loc = parse_uri(uri, topology)
    for side, what in ((src, "source"), (tgt, "target")):
        if side.loc.contains(loc):
            raise ConfigError(f"-log {uri} lies inside the {what} {side.loc.uri}",
                              hint="write the logs outside the source and target")
    fs = open_fs(loc, access)
    st = fs.stat(loc.path)
    if st is not None and not st.is_dir:
        raise ConfigError(f"-log {uri}: is a file", hint="name a directory for the run logs")
    try:
        if fs.kind != "s3":
            fs.mkdirs(loc.path)
    except (OSError, UnreachableError) as exc:
        raise ConfigError(f"-log {uri}: cannot make the directory ({exc})",
                          hint="name a directory this user can write") from None
    return LogDir(fs, loc.path)


def write_log(log: LogDir, r: CopyResult) -> None:
    """``<dir>/<run_id>.jsonl``: a first line with the run (ids, mode, status, counts), then one line
    per file (:func:`file_log`); failures of other steps (deletes, --preserve) are in the first line."""
    head = {"run_id": r.run_id, "source": r.source, "target": r.target, "mode": r.mode, "status": r.status,
            "manifest_id": r.manifest_id, **r.stats(), "failures": r.failures[:1000]}
    lines = [json.dumps(head, sort_keys=True)] + [json.dumps(x, sort_keys=True) for x in r.file_log]
    path = log.fs.join(log.root, f"{r.run_id}.jsonl")
    log.fs.write(path, [("\n".join(lines) + "\n").encode()])
    r.log_file = path


def file_log(plan: Plan, outcomes: list[Outcome], deleted: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """-log: one line per file: copied (or appended), skipped (kept as the target has it),
    deleted, failed (with the error)."""
    out: list[dict[str, Any]] = []
    done = set()
    for o in sorted(outcomes, key=lambda o: o.rel):
        done.add(o.rel)
        if o.ok:
            out.append({"path": o.rel, "action": "appended" if o.action == "append" else "copied",
                        "bytes": o.bytes, "size": o.size})
        elif o.open:
            out.append({"path": o.rel, "action": "open", "error": o.error})
        else:
            out.append({"path": o.rel, "action": "failed", "error": o.error, "attempts": o.attempts})
    out += [{"path": rel, "action": "skipped", "size": e.size} for rel, e in sorted(plan.keep.items())
            if rel not in done]
    out += [{"path": rel, "action": "deleted", "reason": why} for rel, why in deleted]
    return out


def prune(fs: FileSystem, root: str, gone: list[str], plan: Plan) -> list[str]:
    """Remove directories emptied by moves and deletions, empty target directories and those
    that held only killed runs' temporary files (deepest first) unless the new state has files
    below them. Linear in the changes. Returns the directories that were found empty and removed
    other than as parents of files this run moved or deleted (reported)."""
    if not (gone or plan.empty_dirs or plan.prune_dirs) or fs.kind == "s3":
        return []
    needed: set[str] = set()
    for rel in chain(plan.keep, [t.rel for t in plan.copies]):
        for p in _parents(rel):
            if p in needed:
                break
            needed.add(p)
    cands: set[str] = set()
    for rel in gone:
        for p in _parents(rel):
            if p in needed or p in cands:
                break
            cands.add(p)
    extra: set[str] = set()
    for d in plan.empty_dirs + plan.prune_dirs:  # empty on the target already (or only temp files)
        for p in [d, *_parents(d)]:
            if p in needed or p in cands:
                break
            cands.add(p)
            extra.add(p)
    removed = []
    for d in sorted(cands, key=lambda p: -p.count("/")):
        try:
            if fs.delete(fs.join(root, d), recursive=False) and d in extra:
                removed.append(d)
        except (OSError, UnreachableError, ConfigError):
            pass  # not empty (a file the plan does not know, e.g. excluded): left alone
    return removed


def account(plan: Plan, result: CopyResult, outcomes: list[Outcome]) -> set[str]:
    read = set(result.files_read)
    pending: set[str] = set()
    for o in outcomes:
        read.add(o.rel)
        if o.changed:
            result.changed_during_copy.append(o.rel)
        if o.ok:
            result.files_copied += 1
            result.files_appended += o.action == "append"
            result.bytes_copied += o.bytes
            if o.verified:
                result.verified[o.verified] = result.verified.get(o.verified, 0) + 1
            if o.open:
                result.files_open += 1
                result.open_files.append({"path": o.rel, "copied_bytes": o.size, "placed": True,
                                          "reason": "open for write: copied as the snapshot holds it (the live "
                                                    "file may hold more); copied again by the next run"})
            plan.keep[o.rel] = mf.Entry(o.size, o.mtime, o.checksum, o.tmtime, o.version, o.schecksum, o.tversion,
                                        o.open, o.tchecksum)
        elif o.open:  # under construction when read live: nothing placed (execute.StillOpen), pending
            result.files_open += 1
            result.open_files.append({"path": o.rel, "copied_bytes": 0, "placed": False, "reason": o.error})
            plan.keep.pop(o.rel, None)
            pending.add(o.rel)
        else:
            result.files_failed += 1
            result.failures.append({"path": o.rel, "error": o.error, "attempts": o.attempts,
                                    "changed_during_copy": o.changed})
            # the target still holds whatever it held before (nothing partial is ever renamed in);
            # the file is recorded as pending so the next run copies it (in every mode)
            plan.keep.pop(o.rel, None)
            pending.add(o.rel)
    result.files_read = sorted(read)
    return pending


def same_entries(keep: mf.Entries, base: mf.Entries) -> bool:
    """Whether the next manifest's entries are the base's (``len`` already equal): every path with
    an equal entry. Read side by side while both give the same paths in the same order (the next
    manifest is kept in the base's order when nothing changed), by lookup from the first path that
    differs. Equal, not identical, entries: a map spilled to disk gives each entry anew as it is
    read, and an entry recorded again with the same values is the same entry."""
    a, b = iter(keep.items()), iter(base.items())
    for (k, v), (bk, bv) in zip(a, b, strict=False):
        if k != bk:
            return all(keep.get(p) == e for p, e in base.items())
        if v != bv:
            return False
    return True


def record_manifest(run: CopyRun, plan: Plan, base: Base, result: CopyResult, pending: set[str],
                    snap_id: str | None) -> None:
    """The new state, after the files are placed: the manifest of what the target holds now (the
    files kept, copied and appended; ``pending`` the ones the next run must copy) written to the
    state location — the base's own entries referenced when nothing changed — and indexed in the
    ledger; the base's own snapshot dropped once no longer needed; retention applied."""
    src, tgt, state, options, ledger = run.src, run.tgt, run.state, run.options, run.ledger
    snapshot, listed_at, policy = result.source_snapshot, result.source_time, run.policy
    assert listed_at is not None  # set by the front door before the copy
    manifest_id = mf.new_manifest_id()
    header_out = {"manifest_id": manifest_id, "source": src.loc.uri, "target": tgt.loc.uri, "run_id": result.run_id,
                  "base_manifest_id": result.base_manifest_id, "source_snapshot": snapshot,
                  "source_snapshot_id": snap_id, "source_time": listed_at, "mode": plan.mode, "policy": policy,
                  "pending": sorted(pending), "ok": result.ok, "filters": filters_key(options)}
    unchanged = (base.entries is not None and base.manifest_id is not None and not pending
                 and not (base.header or {}).get("pending") and len(plan.keep) == len(base.entries)
                 and same_entries(plan.keep, base.entries))
    if unchanged and base.digest:  # nothing changed: no need to write the same entries again
        assert base.manifest_id is not None
        location, digest = state.write_same_as(manifest_id, base.manifest_id, base.digest, header_out)
    else:
        location, digest = state.write_manifest(manifest_id, plan.keep, header_out)
    result.manifest_id = manifest_id
    result.watermark = listed_at if result.ok else None
    if ledger is not None:
        ledger.add_manifest(ManifestRow(
            manifest_id=manifest_id, source=src.loc.uri, target=tgt.loc.uri, location=location,
            entries=len(plan.keep), total_bytes=sum(e.size for e in plan.keep.values()), source_time=listed_at,
            policy=policy, base_manifest_id=result.base_manifest_id, source_snapshot=snapshot,
            content_digest=digest))
    if base.header and base.header.get("source_snapshot"):
        old = str(base.header["source_snapshot"])
        if old != snapshot and old.startswith(SNAP_PREFIX):
            drop_snapshot(src, state, old)
    result.manifests_pruned = len(state.prune(options.keep_manifests, options.keep_manifests_days,
                                              protect={manifest_id}))


def finish_run(run: CopyRun, plan: Plan, result: CopyResult, status: str) -> None:
    """The run's ledger row finished: its status, counters and detail (best effort: a ledger that
    cannot be written is logged, the run's outcome stands)."""
    ledger = run.ledger
    if ledger is None or result.run_id is None:
        return
    try:
        ledger.finish_run(result.run_id, status=status, mode=plan.mode, mode_reason=plan.mode_reason,
                          manifest_id=result.manifest_id, base_manifest_id=result.base_manifest_id,
                          stats=result.stats(), detail={
                              "fallbacks": result.fallbacks[:100], "fallback_count": len(result.fallbacks),
                              "basis": result.basis, "failures": result.failures[:100],
                              "engine": run.options.engine, "files_renamed": result.files_renamed,
                              "proof": result.proof, "proof_basis": result.proof_basis,
                              "files_appended": result.files_appended, "files_open": result.files_open,
                              "listing_proven": result.listing_proven,
                              "listing_changing": result.listing_changing[:100],
                              "deletes_deferred": result.deletes_deferred,
                              "open_files": result.open_files[:100],
                              "files_type_changed": result.files_type_changed,
                              "entries_skipped": result.entries_skipped,
                              "skipped_reasons": result.skipped_reasons,
                              "changed_during_copy": result.changed_during_copy[:100],
                              "source_snapshot": result.source_snapshot, "source_time": result.source_time,
                              "state_location": run.state.loc.uri, "dry_run": False})
    except Exception:
        log.exception("could not record the end of run %s", result.run_id)
