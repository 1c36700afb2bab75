"""distcp, replicate_policy, pending: the public entry points of file replication.

**The invariant.** After a run that ends without failed files (exit 0), with ``update`` (the
policies' default and ``drt distcp --update``) or ``overwrite``, every regular file of the
source is a file of the target at the same relative path with the same bytes, and — with
``delete`` — the target holds no other file. Directories exist exactly as parents of files.
A file the tool cannot prove equal is compared by content; nothing is skipped on a guess.

A run: validate the URIs (refusing overlaps by real path, before anything is written), take
the target's lease, clean temporary files and multipart uploads of killed runs and snapshots
of killed runs, find the base manifest in the state location, decide the mode (bootstrap /
fast-forward / reconcile, with the reason), plan, execute (staged moves, type-change and
``--delete`` deletions, copies), write the new manifest to the state location (never under
the target), apply retention, index it in the ledger.
"""

from __future__ import annotations

import bisect
import logging
import os
import posixpath
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy.execute import (
    EXTRA_ATTRIBUTES,
    Cancelled,
    CopyContext,
    Outcome,
    Throttle,
    proof_basis,
    run_local,
)
from dr_toolkit.copy.job import CopyJob
from dr_toolkit.copy.plan import (
    FileTask,
    Plan,
    _parents,
    apply_diff,
    chain_break,
    copy_mode,
    fast_forward,
    filters_key,
    filters_of,
    reconcile,
    relist_diff,
)
from dr_toolkit.copy.processes import PROCESS_MIN_FILES, run_processes
from dr_toolkit.copy.state import (
    Fence,
    LeaseLost,
    StateStore,
    check_outside,
    default_state_uri,
    release_fence,
    take_fence,
    target_lock,
)
from dr_toolkit.errors import ConfigError, LeaseHeld, UnreachableError
from dr_toolkit.fs import credentials_for, open_fs
from dr_toolkit.fs.base import (
    Checksum,
    FileStatus,
    FileSystem,
    SnapshotInfo,
    run_tag,
    stage_name,
    tmp_run_tag,
)
from dr_toolkit.fs.uri import Location, parse_uri
from dr_toolkit.ledger.rows import ManifestRow
from dr_toolkit.topology import CopyOptions, HdfsPolicy

if TYPE_CHECKING:
    import threading

    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)
SNAP_PREFIX = "drt-"
#: progress(kind, n): kind is "plan" (n = bytes to copy), "bytes" (n bytes sent) or "file" (n = 1)
Progress = Callable[[str, int], None]


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


@dataclass
class _Side:
    loc: Location
    fs: FileSystem
    root: str
    single: str | None = None  # a source that is one file: list only it
    fence: Callable[[], None] | None = None  # target: the lease's fencing check (before destructive steps)
    list_threads: int = 1  # -numListstatusThreads: the root's subtrees listed on this many threads
    marker: Fence | None = None  # target: the fencing token this run holds (checked by Spark executors too)

    def check(self) -> None:
        if self.fence is not None:
            self.fence()


def _resolve(source: str, target: str, topology: Topology | None, access: Access) -> tuple[_Side, _Side]:
    """Parse and check both ends; raise ConfigError (exit 2) before anything is written."""
    src = parse_uri(source, topology)
    tgt = parse_uri(target, topology)
    if src.contains(tgt):
        raise ConfigError(f"the target {target} lies inside the source {source}",
                          hint="choose a target outside the source tree")
    if tgt.contains(src):
        raise ConfigError(f"the source {source} lies inside the target {target}",
                          hint="choose a target that does not contain the source")
    sfs = open_fs(src, access)
    st = sfs.stat(src.path)
    if st is None:
        raise ConfigError(f"the source {source} does not exist", hint="check the path (nothing was copied)")
    tfs = open_fs(tgt, access)
    t = tfs.stat(tgt.path) if tgt.path else None
    if t is not None and not t.is_dir:
        raise ConfigError(f"the target {target} is a file", hint="name a directory to copy into")
    troot = tgt.path
    if tgt.kind == "local":
        # a local target is written under its real path only: the root named by the user is
        # resolved once, and no write, rename or delete below it goes through a symlink
        from dr_toolkit.paths import real_path

        troot = real_path(tgt.path)
        tfs.confine = troot  # type: ignore[attr-defined]
    if not st.is_dir:  # a single file: copy it into the target directory under its name
        return _Side(src, sfs, posixpath.dirname(src.path.rstrip("/")) or "/", src.path), _Side(tgt, tfs, troot)
    return _Side(src, sfs, src.path), _Side(tgt, tfs, troot)


class _Skips:
    def __init__(self) -> None:
        self.entries: list[dict[str, str]] = []
        self.reasons: dict[str, int] = {}
        self.count = 0
        self.paths: set[str] = set()

    def __call__(self, path: str, reason: str) -> None:
        if path in self.paths:  # a directory read again while proving the listing
            return
        self.paths.add(path)
        self.count += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        if len(self.entries) < 1000:
            self.entries.append({"path": path, "reason": reason})


def _listing(side: _Side, only: str | None = None, skipped: Callable[[str, str], None] | None = None,
             dirs: dict[str, Any] | None = None, recursive: bool = True) -> dict[str, FileStatus]:
    if side.list_threads > 1 and recursive and only is None and side.single is None:
        return _listing_threads(side, skipped, dirs)
    fs = side.fs
    root = side.root.rstrip("/")
    cut = len(root) + 1 if root else 0
    prefix = root + "/" if root else ""
    out = {}
    seen: dict[str, Any] | None = {} if dirs is not None else None
    for s in fs.list_files(only or side.single or side.root, skipped, dirs=seen, recursive=recursive):
        p = s.path
        rel = p[cut:] if p.startswith(prefix) else fs.relative(side.root, p)
        if rel:
            out[rel] = s
    if dirs is not None and seen:
        for p, token in seen.items():
            dirs[fs.relative(side.root, p) if p != root else ""] = token
    return out


def _listing_threads(side: _Side, skipped: Callable[[str, str], None] | None,
                     dirs: dict[str, Any] | None) -> dict[str, FileStatus]:
    """-numListstatusThreads N: the root read one level (its files, its subdirectories' tokens),
    then each subdirectory's tree walked on one of N threads; the same files and tokens as one
    walk (each directory's token still recorded before its entries are read)."""
    import threading

    one = _Side(side.loc, side.fs, side.root)
    lock = threading.Lock()

    def skip(path: str, reason: str) -> None:
        if skipped is not None:
            with lock:
                skipped(path, reason)

    level: dict[str, Any] = {}
    out = _listing(one, side.root, skip, dirs=level, recursive=False)
    subs = sorted(d for d in level if d)

    def walk(d: str) -> tuple[dict[str, FileStatus], dict[str, Any]]:
        tokens: dict[str, Any] = {}
        n = [0]

        def count(path: str, reason: str) -> None:
            n[0] += 1
            skip(path, reason)

        path = side.fs.join(side.root, d)
        got = _listing(one, path, count, dirs=tokens)
        if not got and not n[0] and set(tokens) <= {d}:  # a walk from d does not report d itself
            skip(path, "empty directory")
        return got, tokens

    with ThreadPoolExecutor(min(side.list_threads, max(1, len(subs)))) as pool:
        for got, tokens in pool.map(walk, subs):
            out.update(got)
            level.update(tokens)
    if dirs is not None:
        dirs.update(level)
    return out


PROOF_ROUNDS = 3  # times the directories that changed during a listing are read again


def _under(rel: str, d: str) -> bool:
    return not d or rel == d or rel.startswith(d + "/")


def _relist(side: _Side, d: str, files: dict[str, FileStatus], tokens: dict[str, Any],
            skipped: Callable[[str, str], None] | None) -> None:
    """Read directory ``d`` (relative) again, one level: its files replace the ones listed in it,
    a subdirectory gone drops what was listed under it, a new one is listed whole."""
    fs = side.fs
    path = fs.join(side.root, d)
    level: dict[str, Any] = {}
    now = _listing(side, path, skipped, dirs=level, recursive=False)
    if d not in level:  # no longer a directory: everything under it goes (its parent changed too)
        for rel in [r for r in files if _under(r, d) and r != d]:
            del files[rel]
        for sub in [t for t in tokens if _under(t, d)]:
            del tokens[sub]
        files.update({r: s for r, s in now.items() if r == d})
        return
    for rel in [r for r in files if posixpath.dirname(r) == d]:
        del files[rel]
    files.update(now)
    old_children = {t for t in tokens if t and posixpath.dirname(t) == d}
    for gone in old_children - level.keys():
        for rel in [r for r in files if _under(r, gone)]:
            del files[rel]
        for sub in [t for t in tokens if _under(t, gone)]:
            del tokens[sub]
    tokens[d] = level[d]
    for new in sorted(set(level) - old_children - {d}):
        files.update(_listing(side, fs.join(side.root, new), skipped, dirs=tokens))


def _proven_listing(side: _Side, skipped: Callable[[str, str], None] | None
                    ) -> tuple[dict[str, FileStatus], list[str]]:
    """The source listing, proven to be the tree's names at one moment — or the directories that
    kept changing (then it is not: a directory renamed during the walk, from a part not yet read
    into a part already read, is seen nowhere).

    Every directory is recorded with its token (mtime and inode/fileId, which change with every
    entry created, deleted or renamed in or out of it) before its entries are read. After the
    walk each is looked at again; those whose token moved are read again, one level (new
    subdirectories whole), and the check repeated, up to PROOF_ROUNDS times. When a check finds
    every token as recorded, each directory held the entries listed from its reading until that
    check began: the listing is the tree at that moment, and every file hot held before the
    listing began and still holds is in it."""
    tokens: dict[str, Any] = {}
    files = _listing(side, skipped=skipped, dirs=tokens)
    fs = side.fs
    changed: list[str] = []
    for round_ in range(PROOF_ROUNDS + 1):
        if not tokens:  # nothing to watch: a single file, an absent root, a store without directories
            return files, []
        names = list(tokens)
        if fs.kind == "local":  # one stat each: a future per directory would cost more than the stat
            now = {d: fs.dir_token(fs.join(side.root, d)) for d in names}
        else:  # one round trip each: overlapped
            with ThreadPoolExecutor(min(8, max(1, len(names) // 64))) as pool:
                now = dict(zip(names, pool.map(lambda d: fs.dir_token(fs.join(side.root, d)), names), strict=True))
        changed = sorted((d for d in names if now[d] != tokens[d] or not fs.token_settled(tokens[d])),
                         key=lambda d: (d.count("/") if d else -1, d))
        if not changed:
            return files, []
        if round_ == PROOF_ROUNDS:
            break
        if fs.settle_s and any(not fs.token_settled(now[d]) for d in changed):
            time.sleep(fs.settle_s)  # let the coarse time stamp move on before reading again
        for d in changed:
            if d in tokens:  # not dropped with a parent read again just before
                _relist(side, d, files, tokens, skipped)
    return files, changed


def _utf8_only(files: dict[str, FileStatus], skips: _Skips) -> dict[str, FileStatus]:
    """A local source name that is not UTF-8 (its bytes carried as surrogate escapes) cannot be a
    WebHDFS or S3 name: such files are skipped with a reported reason (copied by their bytes
    between local trees)."""
    bad = []
    for rel in files:
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            bad.append(rel)
    if not bad:
        return files
    for rel in bad:
        skips(files[rel].path, "name is not UTF-8 (the target cannot hold it)")
    drop = set(bad)
    return {r: s for r, s in files.items() if r not in drop}


def _wanted(files: dict[str, FileStatus], f: Any) -> dict[str, FileStatus]:
    if not f.active:
        return files  # listings already pass over temporary names
    return {r: s for r, s in files.items() if f.wanted(r)}


ODD = frozenset({"symlink", "dangling symlink", "not a regular file"})


def _target_listing(src: _Side, tgt: _Side, tmp_found: list[str] | None = None,
                    empty_found: list[str] | None = None, odd_found: list[tuple[str, str]] | None = None
                    ) -> dict[str, FileStatus]:
    if src.single:  # a single file: the target is that one name, nothing else is looked at (or deleted)
        name = posixpath.basename(src.single.rstrip("/"))
        t = tgt.fs.stat(tgt.fs.join(tgt.root, name))
        return {name: t} if t is not None and not t.is_dir else {}

    def skipped(path: str, reason: str) -> None:
        if tmp_found is not None and tmp_run_tag(path) is not None:
            tmp_found.append(path)  # temp files of killed runs: removed after the listing (one walk, not two)
        elif empty_found is not None and reason == "empty directory":
            empty_found.append(path)  # e.g. emptied behind our back: pruned with --delete
        elif odd_found is not None and reason in ODD:
            odd_found.append((path, reason))  # a symlink, FIFO, ...: never followed, removed when in the way

    return _listing(tgt, skipped=skipped)


@dataclass
class _Base:
    manifest_id: str | None = None
    header: dict[str, Any] | None = None
    entries: mf.Entries | None = None
    why_not: str = "no earlier manifest: first run"
    digest: str | None = None  # sha256 of the base manifest's bytes


def _base(ledger: Ledger | None, state: StateStore, src: _Side, tgt: _Side) -> _Base:
    if ledger is not None:
        row = ledger.last_manifest(source=src.loc.uri, target=tgt.loc.uri)
        if row is None:
            return _Base()
        got = state.read_manifest(row["manifest_id"], row["content_digest"])
        if got is None:
            return _Base(row["manifest_id"], why_not=f"manifest {row['manifest_id']} is missing from the state "
                                                     f"location or altered")
        return _Base(row["manifest_id"], got[0], got[1], "", row["content_digest"])
    latest = state.latest()
    if latest is None:
        return _Base()
    return _Base(latest[0], latest[1], latest[2], "", latest[3])


def _clean_tmp(tgt: _Side, run_id: str, found: list[str] | None = None) -> int:
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


def _clean_snapshots(src: _Side, state: StateStore, base: _Base, result: CopyResult) -> None:
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


def _drift(plan: Plan, src_files: dict[str, FileStatus], tgt_files: dict[str, FileStatus], fs: FileSystem,
           preserve: Any) -> None:
    """``--preserve``: a kept file whose target permission or mtime is not the source's (changed
    on either side behind our back: a chmod or touch keeps HDFS's fileId) gets them re-applied,
    as DistCp re-applies ``-p`` to the files it skips."""
    perm = "permissions" in preserve and fs.supports_permissions
    times = "times" in preserve and fs.supports_times
    for rel in plan.keep:
        s, t = src_files.get(rel), tgt_files.get(rel)
        if s is None or t is None:
            continue
        p = s.permission if perm and s.permission and t.permission and s.permission != t.permission else None
        m = s.mtime if times and abs(s.mtime - t.mtime) > 1e-3 else None
        if p is not None or m is not None:
            plan.fixups.append((rel, p, m))


def _attr_drift(plan: Plan, src: _Side, read_root: str, tgt: _Side, preserve: Any, workers: int) -> None:
    """``-p u/g/a/x``: the owner, group, ACL and xattrs of every kept file are read on both sides
    (as DistCp reads them for every file it lists with those flags) and re-applied where they
    differ."""
    which = frozenset(EXTRA_ATTRIBUTES.intersection(preserve))
    rels = sorted(plan.keep)
    if not which or not rels:
        return

    def differs(rel: str) -> dict[str, Any] | None:
        a = src.fs.attributes(src.fs.join(read_root, rel), which)
        b = tgt.fs.attributes(tgt.fs.join(tgt.root, rel), which)
        want = {k: v for k, v in a.items() if b.get(k) != v}
        return want or None

    with ThreadPoolExecutor(max(1, min(workers, len(rels)))) as pool:
        for rel, want in zip(rels, pool.map(differs, rels), strict=True):
            if want:
                plan.attr_fixups.append((rel, want))


def _plan(src: _Side, tgt: _Side, options: CopyOptions, base: _Base, snapshot: str | None, skips: _Skips,
          tmp_found: list[str] | None = None, empty_found: list[str] | None = None,
          changing: list[str] | None = None, snaps: _Snaps | None = None) -> tuple[Plan, str]:
    """Decide the mode and plan. Returns the plan and the root the source is read from. With
    ``changing`` given, a live listing (no snapshot) is proven (:func:`_proven_listing`) and the
    directories that kept changing are put in it.

    Target entries that are not regular files (symlinks, FIFOs, ...) are planned here, in every
    mode: one where the source has a directory or a file (a symlink planted where the source has
    a directory) is removed first, whatever ``--delete`` says, so the source's files are written
    into a real directory of the target; with ``--delete`` every other one goes too. Directories
    that held only temporary files of killed runs are pruned with ``--delete``."""
    odd: list[tuple[str, str]] = []
    plan, read_root, src_files, tgt_files = _plan_modes(src, tgt, options, base, snapshot, skips, tmp_found,
                                                         empty_found, odd, changing, snaps)
    if options.preserve:
        _drift(plan, src_files, tgt_files, tgt.fs, options.preserve)
        _attr_drift(plan, src, read_root, tgt, options.preserve, options.workers)
    f = filters_of(options)
    if f.active:
        # target files the filters pass over can still be in the way of the source's tree (a
        # directory of excluded files where the source now has a file): removed like any blocker
        for rel in tgt_files:
            if not f.wanted(rel) and any(p in src_files for p in _parents(rel)) and rel not in plan.blockers:
                plan.blockers.append(rel)
                plan.keep.pop(rel, None)
                if rel in plan.deletes:
                    plan.deletes.remove(rel)
    if odd:
        src_dirs: set[str] = set()
        for rel in src_files:
            for p in _parents(rel):
                if p in src_dirs:
                    break
                src_dirs.add(p)
        for path, why in odd:
            rel = tgt.fs.relative(tgt.root, path)
            if rel in src_dirs or rel in src_files or (options.delete and f.wanted(rel)):
                plan.odd.append((rel, why))
                plan.keep.pop(rel, None)
    if options.delete and tmp_found:
        plan.prune_dirs = sorted({posixpath.dirname(tgt.fs.relative(tgt.root, p)) for p in tmp_found} - {""})
    return plan, read_root


@dataclass
class _Snaps:
    """The source's snapshots as the NameNode lists them at the start of a snapshot-mode run."""

    infos: dict[str, SnapshotInfo]
    #: -diff S1 S2 / -rdiff S2 S1: the snapshot the user says the target's last run read (S1 / S2)
    expected: str | None = None


def _diff_base(src: _Side, header: dict[str, Any], snapshot: str, snaps: _Snaps | None
               ) -> tuple[str | None, str, bool, bool]:
    """Which snapshot to diff from, by identity, never by name alone: the one the base run read
    (its id recorded in the base manifest), under whatever name it has now — with -diff/-rdiff,
    only when that is the snapshot the user named as the base. Returns (its name or None, why
    not, whether the base is gone — a reconcile — rather than just not usable, and whether the
    diff is proven forward: the base snapshot older than the one read, by snapshot id)."""
    rec_name, rec_id = str(header["source_snapshot"]), header.get("source_snapshot_id")
    infos = snaps.infos if snaps is not None else {}
    by_id = {i.identity: n for n, i in infos.items()}
    now = by_id.get(str(rec_id)) if rec_id is not None else None
    if snaps is not None and snaps.expected is not None:
        exp = infos.get(snaps.expected)
        if rec_id is None:
            return None, (f"the target's last run read snapshot {rec_name} and did not record which one it was "
                          f"(its snapshot id): {snapshot} listed"), False, False
        if exp is None or exp.identity != str(rec_id):
            where = f" (now named {now})" if now and now != rec_name else (" (gone)" if now is None else "")
            return None, (f"{snaps.expected} is not the snapshot the target's last run read: that was {rec_name} "
                          f"({rec_id}){where}, {snaps.expected} is "
                          f"{exp.identity if exp else 'not on the source'}: {snapshot} listed"), False, False
        now = snaps.expected
    elif rec_id is None or now is None:
        if rec_id is None and src.fs.snapshot_exists(src.root, rec_name):
            return None, (f"the base manifest does not record which snapshot {rec_name} was (its id): "
                          f"{snapshot} listed"), False, False
        return None, f"the base snapshot {rec_name} is gone (or was re-created)", True, False
    a, b = infos.get(now), infos.get(snapshot)
    forward = a is not None and b is not None and a.id is not None and b.id is not None and a.id < b.id
    return now, "", False, forward


def _plan_modes(src: _Side, tgt: _Side, options: CopyOptions, base: _Base, snapshot: str | None, skips: _Skips,
                tmp_found: list[str] | None, empty_found: list[str] | None, odd: list[tuple[str, str]],
                changing: list[str] | None = None, snaps: _Snaps | None = None
                ) -> tuple[Plan, str, dict[str, FileStatus], dict[str, FileStatus]]:
    """The plan of the mode that applies, the root read, the source and target files planned."""
    read_root = src.fs.snapshot_path(src.root, snapshot) if snapshot else src.root
    reading = _Side(src.loc, src.fs, read_root, src.fs.join(read_root, posixpath.basename(src.single))
                    if src.single else None, list_threads=src.list_threads)
    f = filters_of(options)
    entries = base.entries
    why = base.why_not
    header = base.header or {}
    pending = set(header.get("pending") or [])
    # a remote side's listing waits on the network: the two listings overlap on two threads. Two local
    # listings are CPU work under one interpreter lock: on two threads they take twice as long as one
    # after the other (40,936 files a side, 2 cores: 2.1-2.6 s together, 0.5-0.7 s each alone)
    with ThreadPoolExecutor(2) as pool:
        if src.fs.kind == tgt.fs.kind == "local":
            tgt_future: Future[dict[str, FileStatus]] = Future()
            tgt_future.set_result(_target_listing(src, tgt, tmp_found, empty_found, odd))
        else:
            tgt_future = pool.submit(_target_listing, src, tgt, tmp_found, empty_found, odd)
        diff = None
        how_not = ""
        old: str | None = None
        forward = False
        if entries is not None and snapshot and header.get("source_snapshot") and not src.single:
            if header.get("filters") != filters_key(options):
                # the base was planned under other filters: files newly wanted are in no diff
                how_not = "the filters changed since the base (or it does not say which it used): listed"
                diff = None
            else:
                old, why_not, gone, forward = _diff_base(src, header, snapshot, snaps)
                if old is not None:
                    diff = src.fs.snapshot_diff(src.root, old, snapshot)
                elif gone:
                    why = why_not
                    entries = None
                else:
                    how_not = why_not
        moves: dict[str, str] = {}
        changed: set[str] | None = None

        def stat_read(rel: str, recursive: bool) -> dict[str, FileStatus] | None:
            """``rel`` as the tree read holds it: {} when gone, a directory's files when ``recursive``."""
            s = src.fs.stat(src.fs.join(read_root, rel))
            if s is None:
                return {}
            if s.is_dir:
                return _listing(reading, src.fs.join(read_root, rel), skips) if recursive else None
            return {rel: s}

        if diff is not None and entries is not None and snapshot and not forward:
            # the base snapshot is the newer one (or no snapshot id says which is): the paths the
            # report names are listed in the snapshot read, none replayed (plan.relist_diff)
            state, changed = relist_diff(entries, diff, stat_read)
            for rel in pending:
                fresh = stat_read(rel, False)
                if fresh:
                    state.update(fresh)
                    changed.update(fresh)
            for rel in [r for r, e in entries.items() if e.open]:
                if rel in state and rel not in changed:
                    fresh = stat_read(rel, False)
                    if fresh:
                        state.update(fresh)
                        changed.update(fresh)
            src_files = {r: s for r, s in state.items() if f.wanted(r)}
            how = (f"snapshot diff {old} → {snapshot} ({len(diff)} entries; {old} is not proven the older: "
                   f"the paths it names listed in {snapshot})")
        elif diff is not None and entries is not None:
            pending_sorted = sorted(pending)

            def unknown(old_path: str) -> bool:  # may the base lack files below old_path?
                if f.active:
                    return True
                i = bisect.bisect_left(pending_sorted, old_path)
                return i < len(pending_sorted) and (pending_sorted[i] == old_path
                                                    or pending_sorted[i].startswith(old_path + "/"))

            state, moves, changed = apply_diff(entries, diff, stat_read, unknown)
            for rel in pending:  # files a failed run did not copy: not in any later diff
                fresh = stat_read(rel, False)
                if fresh:
                    state.update(fresh)
                    changed.update(fresh)
            # files open for write at the last run: bytes hflushed since, and even their close,
            # change no inode the NameNode's snapshot diff reports (a real NameNode's diff stays
            # empty): look at them again, under their new name if the diff moved them
            moved_to = {old: new for new, old in moves.items()}
            for rel in [r for r, e in entries.items() if e.open]:
                cur = moved_to.get(rel, rel)
                if cur in state and cur not in changed:
                    fresh = stat_read(cur, False)
                    if fresh:
                        state.update(fresh)
                        changed.update(fresh)
            src_files = {r: s for r, s in state.items() if f.wanted(r)}
            how = f"snapshot diff {old} → {snapshot} ({len(diff)} entries)"
        else:
            if changing is not None and not snapshot and not src.single:
                listed, still = _proven_listing(reading, skips)
                changing.extend(still)
            else:  # a snapshot (atomic by construction), one file, or a dry run
                listed = _listing(reading, skipped=skips)
            src_files = _wanted(listed, f)
            how = "source listing against the manifest (size, mtime, change token)"
            if how_not:
                how = f"{how_not}; {how}"
        tgt_all = tgt_future.result()
        tgt_files = _wanted(tgt_all, f)
    if tgt.fs.kind != "local":
        src_files = _utf8_only(src_files, skips)
    held = {r: e for r, e in (entries or {}).items() if r not in pending}

    def chain_broken() -> str | None:
        broken = chain_break(held, {r: s for r, s in tgt_files.items() if r not in pending}, f.wanted)
        if not broken and not tgt.fs.content_token:
            broken = _target_rewritten(tgt, held, options.workers)
        return broken

    mode, reason = copy_mode(options, manifest_id=base.manifest_id, has_base=entries is not None, why_no_base=why,
                             target_files=len(tgt_files), how=how, chain_broken=chain_broken)
    if mode != "fast-forward":
        return reconcile(src.fs, read_root, src_files, tgt.fs, tgt.root, tgt_files, options, mode=mode,
                         reason=reason, workers=options.workers, recorded=entries), read_root, src_files, tgt_all
    plan = fast_forward(src_files, held, options, reason=reason, moves=moves, changed=changed)
    if changed is None and not src.fs.content_token:  # a listing: the token alone proves nothing
        _confirm_by_checksum(src, read_root, plan, src_files, held, options.workers)
    _compare_unproven(src, read_root, tgt, plan, src_files, tgt_files, held, options, entries)
    for rel in pending:  # the target may hold an older version of a pending file: it is replaced
        if rel not in src_files and rel in tgt_files and options.delete and rel not in plan.deletes:
            plan.deletes.append(rel)
    return plan, read_root, src_files, tgt_all


def _compare_unproven(src: _Side, read_root: str, tgt: _Side, plan: Plan, src_files: dict[str, FileStatus],
                      tgt_files: dict[str, FileStatus], held: mf.Entries, options: CopyOptions,
                      recorded: mf.Entries | None) -> None:
    """Files a run without ``--update`` kept as the target had them (recorded without a change
    token: nothing proved them equal) are compared by content, as a reconcile would, instead of
    being copied again: an ``--update`` after a plain run never re-copies a tree of equal files."""
    redo = {t.rel for t in plan.copies if t.action == "copy" and t.rel in tgt_files and t.rel in held
            and held[t.rel].version is None and held[t.rel].size == t.size}
    if not redo:
        return
    sub = reconcile(src.fs, read_root, {r: src_files[r] for r in redo}, tgt.fs, tgt.root,
                    {r: tgt_files[r] for r in redo}, options, mode=plan.mode, reason=plan.mode_reason,
                    workers=options.workers, recorded=recorded)
    plan.copies = [t for t in plan.copies if t.rel not in redo] + sub.copies
    plan.keep.update(sub.keep)
    for k, v in sub.basis.items():
        plan.basis[k] = plan.basis.get(k, 0) + v
    plan.basis_samples.extend(sub.basis_samples[:max(0, 50 - len(plan.basis_samples))])
    plan.fallbacks.extend(sub.fallbacks)
    plan.files_read.extend(sub.files_read)


def _target_rewritten(tgt: _Side, held: mf.Entries, workers: int) -> str | None:
    """A target whose change token is no content token (HDFS): every file the manifest holds must
    still answer the checksum recorded after its commit (one GETFILECHECKSUM each, as DistCp
    ``-update`` asks); why not, or None."""
    rels = list(held)
    if not rels:
        return None

    def why(rel: str) -> str | None:
        want = Checksum.parse(held[rel].tchecksum)
        if want is None:
            return f"target {rel}: no checksum of its own recorded (its fileId is no content token): compared"
        try:
            got = tgt.fs.checksum(tgt.fs.join(tgt.root, rel))
        except (OSError, UnreachableError) as exc:
            return f"target {rel}: its checksum could not be read ({exc})"
        return None if got == want else f"target changed: {rel} was rewritten in place (its checksum is not the " \
                                         "one recorded)"

    with ThreadPoolExecutor(max(1, min(workers, len(rels)))) as pool:
        for w in pool.map(why, rels):
            if w:
                return w
    return None


def _confirm_by_checksum(src: _Side, read_root: str, plan: Plan, src_files: dict[str, FileStatus],
                         held: mf.Entries, workers: int) -> None:
    """A source whose change token is not a content token (HDFS: ``TRUNCATE`` + ``APPEND`` keep
    the fileId, ``SETTIMES`` puts mtime back): a file kept because size, mtime and token are as
    recorded is kept only when the source's own checksum (GETFILECHECKSUM: computed by the
    DataNodes from the stored CRCs, no data through this process) is still the one recorded for
    the bytes copied; else it is copied. Snapshot-diff fast-forwards trust the NameNode's diff and
    ask nothing per unchanged file (their point: work in proportion to the changes) — and the
    real GETSNAPSHOTDIFF reports nothing for such a rewrite when size and mtime come back (found
    by the randomized test): a documented limit of snapshot mode (docs/design.md)."""
    cands = [r for r in plan.keep if r in src_files and r in held]
    if not cands:
        return

    def same(rel: str) -> bool:
        want = Checksum.parse(held[rel].schecksum)
        if want is None:
            return False
        try:
            got = src.fs.checksum(src.fs.join(read_root, rel))
        except (OSError, UnreachableError):
            return False
        return got == want

    with ThreadPoolExecutor(max(1, min(workers, len(cands)))) as pool:
        verdicts = list(pool.map(same, cands))
    n = 0
    for rel, ok in zip(cands, verdicts, strict=True):
        if ok:
            continue
        s = src_files[rel]
        plan.keep.pop(rel)
        n += 1
        plan.copies.append(FileTask(rel, s.size, s.mtime, permission=s.permission, version=s.version,
                                    block_size=s.block_size, reason="changed (its checksum is not the one recorded)"))
    for key in ("size, mtime and change token as recorded", "snapshot diff: unchanged", "snapshot diff: moved"):
        if key in plan.basis:
            left = plan.basis.pop(key)
            cut = min(n, left)
            n -= cut
            if left - cut > 0:
                plan.basis[f"{key}, and the source's own checksum as recorded"] = left - cut


def distcp(source: str, target: str, *, access: Access, topology: Topology | None = None,
           ledger: Ledger | None = None, options: CopyOptions | None = None, dry_run: bool = False,
           policy: str | None = None, progress: Progress | None = None, spark_master: str | None = None,
           cancel: threading.Event | None = None, fence_epoch: int | None = None,
           diff: tuple[str, str] | None = None, rdiff: tuple[str, str] | None = None) -> CopyResult:
    """Copy the tree at ``source`` to ``target`` (DistCp semantics; see the module doc).

    With a topology, a run that writes (not a dry run) is refused (FencedError) when the target
    cluster is fenced or read-only, and hot → cold once the hot cluster is fenced (unless it
    holds the current ``fence_epoch``: the runbook's final copy) or the cold one was promoted
    (:func:`dr_toolkit.zk.fencing.assert_copy_allowed`).

    ``cancel``: set it (e.g. from a SIGTERM handler) to stop the run: in-flight files are
    abandoned (their temp files removed, nothing half-visible) and the run is recorded
    ``interrupted``. Each endpoint's ``conn_id`` is looked up through ``access`` (the fencing
    ZooKeeper's too).

    ``diff=(S1, S2)`` (DistCp ``-diff S1 S2``, with ``update``): the tree is read from the
    source's existing snapshot S2; when the target's last run was at S1 only the NameNode's diff
    S1 -> S2 is applied (work in proportion to the changes), else S2 is listed and compared.
    ``rdiff=(S2, S1)`` (DistCp ``-rdiff S2 S1``, with ``update``): the target is put back to the
    source's snapshot S1: read from it, target files S1 does not have deleted. Neither creates
    nor deletes a snapshot; both are refused (exit 2) unless the source has them."""
    import threading

    t0 = time.time()
    options = options or CopyOptions()
    if topology is not None and not dry_run:
        from dr_toolkit.zk.fencing import assert_copy_allowed

        # by identity, not spelling: a webhdfs:// address of a cluster's NameNode is that cluster
        assert_copy_allowed(topology, parse_uri(source, topology), parse_uri(target, topology),
                            epoch=fence_epoch, access=access)
    src, tgt = _resolve(source, target, topology, access)
    log_fs: _LogDir | None = None
    try:
        _check_options(src, tgt, options)
        src.list_threads = options.list_threads
        named, options = _named_snapshot(src, options, diff, rdiff)
        if not dry_run and options.log_dir:
            log_fs = _open_log_dir(options.log_dir, topology, access, src, tgt)
        state_uri = default_state_uri(topology, options.state_dir)
        state = StateStore.open(state_uri, src.loc.uri, tgt.loc.uri, topology, access)
        try:
            check_outside(state.loc, src.loc, tgt.loc)
            creds = (credentials_for(src.loc, access), credentials_for(tgt.loc, access))
            run = CopyRun(src, tgt, state, options, ledger=ledger, dry_run=False, policy=policy, progress=progress,
                          creds=creds, spark_master=spark_master, t0=t0, cancel=cancel or threading.Event(),
                          named=named)
            if dry_run:
                return _run(replace(run, dry_run=True))
            try:
                with target_lock(ledger, state, tgt.loc) as lease:
                    marker = take_fence(tgt.fs, tgt.root, lease.holder or new_id("copy"))
                    tgt.marker = marker

                    def fence() -> None:  # the lease still ours (driver clock), the marker still ours (target)
                        lease.check()
                        marker.check(tgt.fs)

                    tgt.fence = fence
                    try:
                        r = _run(run)
                    finally:
                        release_fence(tgt.fs, marker)
                if log_fs is not None:
                    _write_log(log_fs, r)
                return r
            except LeaseLost as exc:
                raise LeaseHeld(str(exc), where=tgt.loc.uri,
                                hint="another run may have written the target since: the next run reconciles it"
                                ) from None
        finally:
            state.close()
    finally:
        src.fs.close()
        tgt.fs.close()
        if log_fs is not None:
            log_fs.fs.close()


def _check_options(src: _Side, tgt: _Side, options: CopyOptions) -> None:
    """Refuse (exit 2, nothing written) a ``--preserve`` the two ends cannot honour: DistCp
    fails such a job too (ACLs and xattrs need both filesystems to support them); and a
    ``DRT_COPY_PROCESSES`` that is not auto, on or off."""
    _processes_mode()
    extra = EXTRA_ATTRIBUTES.intersection(options.preserve)
    for side, what in ((src, "source"), (tgt, "target")):
        missing = sorted(a for a in extra if a not in side.fs.preservable)
        if missing:
            raise ConfigError(f"--preserve {','.join(missing)}: the {what} {side.loc.uri} ({side.fs.kind}) cannot "
                              f"{'read' if what == 'source' else 'set'} {' or '.join(missing)}",
                              hint="owner and group need local or HDFS ends, acl and xattr HDFS on both ends")


#: what a snapshot diff cannot see (said in a -diff/-rdiff run's mode_reason and in --help)
DIFF_BLIND_SPOT = ("a snapshot diff does not report a file rewritten in place (TRUNCATE + APPEND + SETTIMES "
                   "back to the same size and mtime: HDFS's own limit); a run without -diff/-rdiff compares "
                   "every file")


def _named_snapshot(src: _Side, options: CopyOptions, diff: tuple[str, str] | None,
                    rdiff: tuple[str, str] | None) -> tuple[tuple[str, str, str] | None, CopyOptions]:
    """-diff/-rdiff: (the source snapshot read, what the report says, the snapshot named as the
    target's base) and the run's options (-rdiff deletes what the snapshot does not have);
    refused (exit 2) as DistCp refuses them."""
    if diff is None and rdiff is None:
        return None, options
    if diff is not None and rdiff is not None:
        raise ConfigError("-diff and -rdiff do not go together", hint="pick one")
    flag = "-diff" if diff is not None else "-rdiff"
    a, b = diff if diff is not None else rdiff  # type: ignore[misc]
    if not options.update:
        raise ConfigError(f"{flag} needs --update (as DistCp requires)", hint="add --update")
    if not src.fs.supports_snapshots:
        raise ConfigError(f"{flag}: the source {src.loc.uri} is not on HDFS (no snapshots)",
                          hint="name snapshots of an HDFS source directory")
    if src.single:
        raise ConfigError(f"{flag}: the source {src.loc.uri} is a file", hint="name the snapshottable directory")
    if a == b:
        raise ConfigError(f"{flag} {a} {b}: the two snapshots are the same", hint="name two different snapshots")
    for name in (a, b):
        if not name or "/" in name:
            raise ConfigError(f"{flag}: {name!r} is not a snapshot name", hint="give names, not paths")
    # -diff: the source has both; -rdiff S2 S1: the source has S1 (S2 is the target's, in DistCp:
    # here the target's state is read from its manifest and listing, not from a snapshot)
    for name in (a, b) if diff is not None else (b,):
        if not src.fs.snapshot_exists(src.root, name):
            raise ConfigError(f"{flag}: the source {src.loc.uri} has no snapshot {name!r}",
                              hint=f"list them under {src.loc.uri.rstrip('/')}/.snapshot")
    if diff is not None:
        return (b, f"-diff {a} {b}", a), options
    return (b, f"-rdiff {a} {b}", a), options.model_copy(update={"delete": True})


class _LogDir:
    def __init__(self, fs: FileSystem, root: str) -> None:
        self.fs, self.root = fs, root


def _open_log_dir(uri: str, topology: Topology | None, access: Access, src: _Side, tgt: _Side) -> _LogDir:
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
    return _LogDir(fs, loc.path)


def _write_log(log: _LogDir, r: CopyResult) -> None:
    """``<dir>/<run_id>.jsonl``: a first line with the run (ids, mode, status, counts), then one line
    per file (:func:`_file_log`); failures of other steps (deletes, --preserve) are in the first line."""
    import json

    head = {"run_id": r.run_id, "source": r.source, "target": r.target, "mode": r.mode, "status": r.status,
            "manifest_id": r.manifest_id, **r.stats(), "failures": r.failures[:1000]}
    lines = [json.dumps(head, sort_keys=True)] + [json.dumps(x, sort_keys=True) for x in r.file_log]
    path = log.fs.join(log.root, f"{r.run_id}.jsonl")
    log.fs.write(path, [("\n".join(lines) + "\n").encode()])
    r.log_file = path


def distcp_sources(sources: list[str], target: str, **kw: Any) -> list[CopyResult]:
    """DistCp with several sources (``distcp SRC1 SRC2 … DST``): each source is copied under
    ``DST/<its basename>`` (a file: into ``DST`` under its name), one run per source, each with
    its own manifest and lease. Two sources of one basename are refused (ConfigError, exit 2)
    before anything is copied, as DistCp refuses duplicate names."""
    if len(sources) < 2:
        raise ConfigError("distcp_sources needs two or more sources", hint="use distcp() for one")
    names: dict[str, str] = {}
    for s in sources:
        base = posixpath.basename(parse_uri(s, kw.get("topology")).path.rstrip("/"))
        if not base:
            raise ConfigError(f"source {s} has no name to copy it under (a root)",
                              hint="name a directory below the root, or copy it alone")
        if base in names:
            raise ConfigError(f"sources {names[base]} and {s} would both be copied to {target.rstrip('/')}/{base}",
                              hint="copy them in separate runs, to different targets")
        names[base] = s
    dests = []
    for s in sources:  # every source looked at before any is copied
        loc = parse_uri(s, kw.get("topology"))
        sfs = open_fs(loc, kw["access"])
        try:
            st = sfs.stat(loc.path)
        finally:
            sfs.close()
        if st is None:
            raise ConfigError(f"the source {s} does not exist", hint="check the path (nothing was copied)")
        dests.append(target if not st.is_dir else target.rstrip("/") + "/" + posixpath.basename(loc.path.rstrip("/")))
    return [distcp(s, d, **kw) for s, d in zip(sources, dests, strict=True)]


@dataclass(frozen=True)
class CopyRun:
    """One copy run's inputs, fixed before it plans: built once by :func:`distcp` and handed down
    to the planning and executing steps (instead of a dozen arguments through each)."""

    src: _Side
    tgt: _Side
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


def _run(run: CopyRun) -> CopyResult:
    src, tgt, state, options, ledger = run.src, run.tgt, run.state, run.options, run.ledger
    dry_run, policy, t0, named = run.dry_run, run.policy, run.t0, run.named
    run_id = new_id("copy")
    base = _base(ledger, state, src, tgt)
    pre = CopyResult(src.loc.uri, tgt.loc.uri, "", "", state_location=state.loc.uri)
    if not dry_run:
        if src.single:
            _clean_tmp(tgt, run_id)
        if src.fs.supports_snapshots:
            _clean_snapshots(src, state, base, pre)
    snapshot = named[0] if named else None  # -diff/-rdiff: the user's snapshot, never deleted here
    listed_at = time.time()
    if named is None and options.snapshots and src.fs.supports_snapshots and not src.single and not dry_run \
            and src.fs.is_snapshottable(src.root):
        snapshot = SNAP_PREFIX + run_id
        state.note_snapshot(snapshot)  # noted first: a killed run's snapshot is found and deleted later
        src.fs.create_snapshot(src.root, snapshot)
    snaps: _Snaps | None = None
    snap_id: str | None = None
    if snapshot:
        snaps = _Snaps(src.fs.snapshots(src.root), named[2] if named else None)
        info = snaps.infos.get(snapshot)
        snap_id = info.identity if info is not None else None
        if named and info is not None:
            # the tree is the snapshot's: its own time, not the run's (HDFS's time of the snapshot —
            # set at its creation, and again by a renameSnapshot: never earlier than the creation)
            listed_at = min(listed_at, info.mtime)
    skips = _Skips()
    tmp_found: list[str] = []
    empty_found: list[str] = []
    try:
        changing: list[str] | None = None if dry_run else []
        plan, read_root = _plan(src, tgt, options, base, snapshot, skips, tmp_found, empty_found, changing, snaps)
        if options.delete:  # empty target directories the source does not have go too
            plan.empty_dirs = [tgt.fs.relative(tgt.root, p) for p in empty_found]
        if changing:  # a file moved during the listing may be listed nowhere: nothing is deleted on its word
            pre.listing_proven, pre.listing_changing = False, changing
            pre.deletes_deferred = len(plan.deletes) + len(plan.empty_dirs)
            for rel in plan.deletes:  # still on the target: the manifest keeps saying so
                if base.entries is not None and rel in base.entries:
                    plan.keep[rel] = base.entries[rel]
            plan.deletes, plan.empty_dirs = [], []
            log.warning("the source kept changing while it was listed (%d directories, e.g. %s): deletions "
                        "deferred, no safe time from this run; enable snapshots for an atomic listing",
                        len(changing), changing[0] or "/")
        if not dry_run and not src.single:
            _clean_tmp(tgt, run_id, tmp_found)
    except BaseException:
        if snapshot:
            _drop_snapshot(src, state, snapshot)
        raise
    result = pre
    if named:
        plan.mode_reason = f"{named[1]}: read from snapshot {named[0]}; {plan.mode_reason}"
        if "snapshot diff" in plan.mode_reason:
            plan.mode_reason += f"; {DIFF_BLIND_SPOT}"
    result.mode, result.mode_reason = plan.mode, plan.mode_reason
    result.policy, result.dry_run, result.engine = policy, dry_run, options.engine
    result.proof, result.proof_basis = options.proof, proof_basis(options.proof, src.fs.kind, tgt.fs.kind)
    result.files_total, result.bytes_total = plan.files_total, plan.bytes_total
    result.base_manifest_id = base.manifest_id if base.entries is not None else None
    result.source_snapshot, result.source_time = snapshot, listed_at
    result.fallbacks, result.basis, result.basis_samples = plan.fallbacks, plan.basis, plan.basis_samples
    result.files_read_for_planning, result.files_read = len(plan.files_read), list(plan.files_read)
    result.entries_skipped, result.skipped_entries, result.skipped_reasons = skips.count, skips.entries, skips.reasons
    if dry_run:
        result.files_copied = len(plan.copies)
        result.bytes_copied = plan.bytes_to_copy
        result.files_renamed = len(plan.moves)
        result.files_deleted = len(plan.deletes) + len(plan.blockers)
        result.files_type_changed = len(plan.blockers)
        result.files_skipped = plan.files_skipped
        result.duration_s = time.time() - t0
        return result
    result.run_id = run_id
    if ledger is not None:
        ledger.start_run(source=src.loc.uri, target=tgt.loc.uri, policy=policy, base_manifest_id=result.base_manifest_id,
                         run_id=run_id)
    status = "failed"
    try:
        pending = _execute(run, plan, read_root, result, run_id, stable=snapshot is not None)
        manifest_id = mf.new_manifest_id()
        header_out = {"manifest_id": manifest_id, "source": src.loc.uri, "target": tgt.loc.uri, "run_id": run_id,
                      "base_manifest_id": result.base_manifest_id, "source_snapshot": snapshot,
                      "source_snapshot_id": snap_id, "source_time": listed_at, "mode": plan.mode, "policy": policy, "pending": sorted(pending),
                      "ok": result.ok, "filters": filters_key(options)}
        unchanged = (base.entries is not None and base.manifest_id is not None and not pending
                     and not (base.header or {}).get("pending") and len(plan.keep) == len(base.entries)
                     and all(plan.keep.get(k) is v for k, v in base.entries.items()))
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
                _drop_snapshot(src, state, old)
        result.manifests_pruned = len(state.prune(options.keep_manifests, options.keep_manifests_days,
                                                  protect={manifest_id}))
        status = "succeeded" if result.ok else "failed"
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, (KeyboardInterrupt, Cancelled, SystemExit)) else "killed"
        if snapshot:  # the next run must not take a snapshot of an unfinished run as its base
            _drop_snapshot(src, state, snapshot)
        raise
    finally:
        result.status = status
        result.duration_s = time.time() - t0
        if ledger is not None:
            try:
                ledger.finish_run(run_id, status=status, mode=plan.mode, mode_reason=plan.mode_reason,
                                  manifest_id=result.manifest_id, base_manifest_id=result.base_manifest_id,
                                  stats=result.stats(), detail={
                                      "fallbacks": result.fallbacks[:100], "fallback_count": len(result.fallbacks),
                                      "basis": result.basis, "failures": result.failures[:100],
                                      "engine": options.engine, "files_renamed": result.files_renamed,
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
                                      "source_snapshot": snapshot, "source_time": listed_at,
                                      "state_location": state.loc.uri, "dry_run": False})
            except Exception:
                log.exception("could not record the end of run %s", run_id)
    return result


def _drop_snapshot(src: _Side, state: StateStore, name: str) -> None:
    try:
        if src.fs.snapshot_exists(src.root, name):
            src.fs.delete_snapshot(src.root, name)
        state.forget_snapshot(name)
    except Exception:  # noqa: BLE001 - best effort; it is noted and cleaned by the next run
        log.warning("could not delete snapshot %s of %s", name, src.root)


def _execute(run: CopyRun, plan: Plan, read_root: str, result: CopyResult, run_id: str, *,
             stable: bool) -> set[str]:
    """Moves (staged), deletions, copies, pruning. Returns the paths left pending (failed)."""
    src, tgt, options, progress = run.src, run.tgt, run.options, run.progress
    creds, spark_master, cancel = run.creds, run.spark_master, run.cancel
    fs, root = tgt.fs, tgt.root
    pending: set[str] = set()
    gone: list[str] = []  # paths whose parents may now be empty
    deleted: list[tuple[str, str]] = []  # (rel, why) for the -log file
    if progress:
        progress("plan", plan.bytes_to_copy)
    # 1. moves, stage one: every source out of the way (swaps and cycles need it)
    staged: list[tuple[str, str, str]] = []
    for i, (old, new) in enumerate(plan.moves):
        tmp = stage_name(root, run_id, i)  # a counter: no two staged paths share a name
        tgt.check()
        try:
            fs.rename(fs.join(root, old), tmp)
            staged.append((old, new, tmp))
            gone.append(old)
        except (OSError, UnreachableError, ConfigError) as exc:
            log.warning("move %s → %s failed (%s); copying instead", old, new, exc)
            _copy_instead(src, read_root, plan, new)
    # 2. target entries that are not regular files in the way of the source's tree (a symlink where
    # the source has a directory: never followed) or, with --delete, not the source's; then target
    # files in the way of a type change, then --delete
    for rel, what in plan.odd:
        tgt.check()
        try:
            if fs.delete(fs.join(root, rel)):
                result.entries_deleted += 1
                result.deleted_entries.append({"path": rel, "reason": what})
            gone.append(rel)
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": f"remove {what}", "error": str(exc)})
    for rel, why in [(r, "type change") for r in plan.blockers] + [(r, "delete") for r in plan.deletes]:
        tgt.check()
        try:
            if fs.delete(fs.join(root, rel)):
                result.files_deleted += 1
                result.files_type_changed += why == "type change"
                deleted.append((rel, why))
            gone.append(rel)
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": why, "error": str(exc)})
            pending.add(rel)  # still on the target: the next run deletes it
    tgt.check()
    for d in _prune(fs, root, gone, plan):
        result.entries_deleted += 1
        result.deleted_entries.append({"path": d, "reason": "directory the source does not have"})
    # 3. moves, stage two: into place
    for old, new, tmp in staged:
        tgt.check()
        try:
            fs.rename(tmp, fs.join(root, new))
            t = fs.stat(fs.join(root, new))
            e = plan.keep.get(new)  # absent: the file also changed and is copied over below
            if e is not None:
                plan.keep[new] = e.with_target(t.mtime if t else None, t.version if t else None)
            result.files_renamed += 1
        except (OSError, UnreachableError, ConfigError) as exc:
            log.warning("move %s → %s failed (%s); copying instead", old, new, exc)
            try:
                fs.delete(tmp)
            except (OSError, UnreachableError):
                pass
            _copy_instead(src, read_root, plan, new)
    # 4. copies
    bw = options.bandwidth_mb_s * 1e6 if options.bandwidth_mb_s else None
    job = CopyJob(src.loc, tgt.loc, read_root, tgt.root, run_id, tuple(options.preserve), bw, stable,
                  creds[0], creds[1], live_root=src.root if stable else None, fence=tgt.marker, proof=options.proof)
    if options.engine == "spark" and plan.copies:
        from dr_toolkit.copy.spark_engine import run_spark

        tgt.check()  # the executors check the marker; the driver's lease is checked before and after
        outcomes = run_spark(job, plan.copies, options.workers, spark_master)
        for o in outcomes:
            if progress:
                progress("bytes", o.bytes)
                progress("file", 1)
    elif _on_processes(src, tgt, options, len(plan.copies), bw):
        tgt.check()

        def done(o: Outcome) -> None:
            if progress:
                progress("bytes", o.bytes)
                progress("file", 1)

        outcomes = run_processes(job, plan.copies, min(options.workers, os.cpu_count() or 1), cancel=cancel,
                                 check=tgt.check, on_done=done, strategy=options.strategy)
    else:
        ctx = CopyContext(src.fs, tgt.fs, read_root, tgt.root, run_id, tuple(options.preserve), Throttle(bw),
                          on_bytes=(lambda n: progress("bytes", n)) if progress else None, stable_source=stable,
                          cancel=cancel, live_root=src.root if stable else None, fence=tgt.fence,
                          proof=options.proof)
        outcomes = run_local(ctx, plan.copies, options.workers,
                             on_done=(lambda _o: progress("file", 1)) if progress else None,
                             strategy=options.strategy)
    pending |= _account(plan, result, outcomes)
    for rel, perm, mtime in plan.fixups:  # 5. --preserve drift on files kept as they are
        if rel not in plan.keep:
            continue
        tgt.check()
        path = fs.join(root, rel)
        try:
            if perm is not None:
                fs.set_permission(path, perm)
            if mtime is not None:
                fs.set_times(path, mtime)
            t = fs.stat(path)  # a chmod or utime changes a local target's token (ctime): recorded anew
            e = plan.keep[rel]
            plan.keep[rel] = e.with_target(mtime if mtime is not None else (t.mtime if t else None),
                                           t.version if t else None)
            result.attributes_reapplied += 1
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": "preserve", "error": str(exc)})
            pending.add(rel)
    for rel, attrs in plan.attr_fixups:  # -p u/g/a/x drift on files kept as they are
        if rel not in plan.keep:
            continue
        tgt.check()
        try:
            fs.set_attributes(fs.join(root, rel), attrs)
            result.attributes_reapplied += 1
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": "preserve", "error": str(exc)})
            pending.add(rel)
    tgt.check()  # the manifest is recorded only by a run that held the target throughout
    result.files_skipped = max(0, plan.files_total - result.files_copied - result.files_failed)
    if options.log_dir:
        result.file_log = _file_log(plan, outcomes, deleted)
    return pending


def _processes_mode() -> str:
    """``DRT_COPY_PROCESSES``: ``auto`` (the default), ``on`` or ``off`` (checked before anything
    is written: ConfigError, exit 2)."""
    how = os.environ.get("DRT_COPY_PROCESSES", "auto").strip().lower() or "auto"
    if how not in ("auto", "on", "off"):
        raise ConfigError(f"DRT_COPY_PROCESSES={how!r} is not one of auto, on, off", where="environment",
                          hint="unset it for the default (auto)")
    return how


def _on_processes(src: _Side, tgt: _Side, options: CopyOptions, files: int, bw: float | None) -> bool:
    """Local to local is bound by the interpreter (one lock for every thread): on more than one
    core and with no bandwidth limit, the files are copied by processes (:func:`run_processes`)
    when there are enough of them to pay for starting the processes, or always with
    ``DRT_COPY_PROCESSES=on``; never with ``off``."""
    how = _processes_mode()
    return (how != "off" and src.fs.kind == tgt.fs.kind == "local" and bw is None
            and min(options.workers, os.cpu_count() or 1) > 1 and (how == "on" or files >= PROCESS_MIN_FILES))


def _file_log(plan: Plan, outcomes: list[Outcome], deleted: list[tuple[str, str]]) -> list[dict[str, Any]]:
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


def _copy_instead(src: _Side, read_root: str, plan: Plan, new: str) -> None:
    s = src.fs.stat(src.fs.join(read_root, new))
    plan.keep.pop(new, None)
    if s is not None and not s.is_dir:
        plan.copies.append(FileTask(new, s.size, s.mtime, permission=s.permission, reason="move failed",
                                    version=s.version, block_size=s.block_size))


def _prune(fs: FileSystem, root: str, gone: list[str], plan: Plan) -> list[str]:
    """Remove directories emptied by moves and deletions, empty target directories and those
    that held only killed runs' temporary files (deepest first) unless the new state has files
    below them. Linear in the changes. Returns the directories that were found empty and removed
    other than as parents of files this run moved or deleted (reported)."""
    if not (gone or plan.empty_dirs or plan.prune_dirs) or fs.kind == "s3":
        return []
    needed: set[str] = set()
    for rel in list(plan.keep) + [t.rel for t in plan.copies]:
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


def _account(plan: Plan, result: CopyResult, outcomes: list[Outcome]) -> set[str]:
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


def new_id(prefix: str) -> str:
    """A sortable run id like the ledger's (``<prefix>-<UTC yyyymmddThhmmss>-<8 hex>``), made here
    so a `drt distcp` without a ledger does not load SQLAlchemy."""
    import uuid

    return f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def _policy(topology: Topology, name: str) -> HdfsPolicy:
    p = topology.policy(name)
    if not isinstance(p, HdfsPolicy):
        raise ConfigError(f"policy {name!r} is not an HDFS policy", where=topology.source_file,
                          hint="drt replicate runs policies listed under policies.hdfs")
    return p


def replicate_policy(topology: Topology, policy_name: str, ledger: Ledger, *, dry_run: bool = False,
                     access: Access, engine: str | None = None, progress: Progress | None = None,
                     fence_epoch: int | None = None, cancel: threading.Event | None = None) -> list[CopyResult]:
    """Run one HDFS policy: one copy per target (each acknowledged separately) under the
    ledger lease ``policy:<name>`` (and each target's ``copy-target:<uri>`` lease, the one
    `drt distcp` takes); records runs, manifests and each target's watermark.

    Once the hot cluster is fenced, a run is refused (FencedError) unless it holds the current
    ``fence_epoch`` — the failover runbook's final copy. Every endpoint's credentials (the
    fencing ZooKeeper's too) come from ``access``."""
    pol = _policy(topology, policy_name)
    options = pol.options if engine is None else pol.options.model_copy(update={"engine": engine})
    results: list[CopyResult] = []
    with ledger.lease(f"policy:{policy_name}"):
        for target in pol.targets:
            r = distcp(pol.source, target, topology=topology, ledger=ledger, options=options, dry_run=dry_run,
                       policy=policy_name, progress=progress, access=access, cancel=cancel, fence_epoch=fence_epoch)
            if not dry_run and r.ok and r.watermark is not None:
                ledger.set_watermark("hdfs", f"{policy_name}:{target}", r.watermark, {
                    "manifest_id": r.manifest_id, "run_id": r.run_id, "mode": r.mode,
                    "source_snapshot": r.source_snapshot, "source": pol.source, "target": target})
            results.append(r)
    return results


def probe(topology: Topology, policy_name: str, target: str, ledger: Ledger, access: Access) -> CopyResult:
    """What a run of one policy target would do now (a dry run: planned, nothing copied). Whatever the
    policy's ``proof``, the probe asks whether cold still holds the last manifest the way a listing run
    does (size, mtime, change token, the target's own checksum): ``proof: content`` would make every
    probe a reconcile reading every byte of both sides."""
    pol = _policy(topology, policy_name)
    options = pol.options.model_copy(update={"proof": "checksum"}) if pol.options.proof != "checksum" else pol.options
    return distcp(pol.source, target, topology=topology, ledger=ledger, options=options, dry_run=True,
                  policy=policy_name, access=access)


def pending(topology: Topology, policy_name: str, ledger: Ledger, access: Access) -> list[dict[str, Any]]:
    """Per target: what a run would copy now (planned, nothing copied), its watermark and last run."""
    pol = _policy(topology, policy_name)
    marks = {w["name"]: w for w in ledger.watermarks("hdfs")}
    runs = ledger.runs(policy=policy_name, limit=200)
    out = []
    for target in pol.targets:
        r = probe(topology, policy_name, target, ledger, access)
        w = marks.get(f"{policy_name}:{target}")
        last = next((x for x in runs if x["target"] == r.target), None)
        out.append({"target": target, "files_pending": r.files_copied + r.files_deleted + r.files_renamed,
                    "bytes_pending": r.bytes_copied, "watermark": w["watermark"] if w else None,
                    "last_run_status": last["status"] if last else None, "mode": r.mode,
                    "base_manifest_id": r.base_manifest_id})
    return out
