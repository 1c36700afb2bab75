"""The planner: per file copy / append-tail / skip / delete / move, with DistCp's rules.

Never a guess: a file is skipped only when the plan can *prove* the target holds the source's
bytes, and every proof names its basis (reported per file and counted per basis):

- the two sides' own checksums, when their algorithm names are equal (``COMPOSITE-CRC32C`` on
  both, or the same ``MD5-of-xMD5-of-yCRC32C`` layout on two HDFS clusters);
- the state recorded when the bytes were copied: the source's checksum now equals the one
  recorded beside the manifest (same algorithm, same file) and the target still holds the
  recorded bytes (the SHA-256 of its bytes, read here, equals the recorded one);
- the content: both sides read here and compared byte for byte (never a 32-bit CRC alone).
- fast-forward: the target holds the base manifest exactly, and the source file's size,
  mtime *and* change token (inode+ctime, HDFS fileId, S3 ETag) are those recorded — or a
  snapshot diff says the file did not change.

Renames are never inferred from (size, mtime). They come only from an HDFS snapshot diff,
applied with DistCpSync's semantics (:func:`apply_diff`).

Options: ``update`` compares and replaces differing files (the invariant holds); ``overwrite``
rewrites every file; neither copies only files missing at the target (DistCp's default).
``delete`` removes target files the source does not have. Type changes (a file where the
target has a directory or the reverse) are resolved in favour of the source in every mode.
"""

from __future__ import annotations

import bisect
import fnmatch
import re
from collections.abc import Callable, Collection, Container, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.manifest import Entries, Entry, entries_map
from dr_toolkit.copy.spill import Files, SpillMap, files_map
from dr_toolkit.fs.base import (
    DIGEST_ALGO,
    Checksum,
    FileStatus,
    FileSystem,
    UnderConstruction,
    is_internal,
    same_bytes,
)

if TYPE_CHECKING:
    from dr_toolkit.topology import CopyOptions

MTIME_EPS = 1e-3  # HDFS and S3 keep milliseconds


@dataclass
class FileTask:
    rel: str
    size: int
    mtime: float
    action: str = "copy"  # copy | append
    offset: int = 0  # append: the target's verified length
    prefix_checksum: str | None = None  # append: checksum the first `offset` source bytes must have
    permission: str | None = None
    reason: str = ""
    version: str | None = None  # the source's change token as listed
    block_size: int | None = None  # the source's block size (HDFS → HDFS: preserved)


@dataclass
class Plan:
    mode: str
    mode_reason: str
    copies: list[FileTask] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)  # target files the source no longer has (--delete)
    blockers: list[str] = field(default_factory=list)  # target files in the way of a type change
    moves: list[tuple[str, str]] = field(default_factory=list)  # (old rel, new rel) from a snapshot diff
    keep: Entries = field(default_factory=entries_map)  # entries of the new manifest that need no work (spills)
    fallbacks: list[dict[str, str]] = field(default_factory=list)  # files kept without a proof (never with --update)
    basis: dict[str, int] = field(default_factory=dict)  # how each skipped file was proven equal, counted
    basis_samples: list[dict[str, str]] = field(default_factory=list)
    open_files: list[dict[str, Any]] = field(default_factory=list)
    empty_dirs: list[str] = field(default_factory=list)  # empty target directories (pruned with --delete)
    # target entries that are not regular files (symlinks, FIFOs, sockets) to remove, (rel, what):
    # in the way of the source's tree (always) or not the source's (--delete)
    odd: list[tuple[str, str]] = field(default_factory=list)
    prune_dirs: list[str] = field(default_factory=list)  # directories that held only killed runs' temp files
    # kept files whose target attributes drifted from the source's under --preserve:
    # (rel, permission to set or None, mtime to set or None), re-applied like DistCp -p
    fixups: list[tuple[str, str | None, float | None]] = field(default_factory=list)
    # kept files whose owner/group/ACL/xattrs (-p u g a x) differ: (rel, the source's attributes)
    attr_fixups: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    files_total: int = 0
    bytes_total: int = 0
    files_read: list[str] = field(default_factory=list)  # source files read while planning

    @property
    def bytes_to_copy(self) -> int:
        return sum(t.size - t.offset for t in self.copies)

    @property
    def files_skipped(self) -> int:
        return self.files_total - len(self.copies)

    def proven(self, rel: str, basis: str) -> None:
        self.basis[basis] = self.basis.get(basis, 0) + 1
        if len(self.basis_samples) < 50:
            self.basis_samples.append({"path": rel, "basis": basis})

    def record(self, rel: str, out: FileTask | Entry, basis: str | None, read: bool) -> None:
        """One source file decided (:func:`reconcile_entry`): a task, or an entry kept with its basis."""
        if isinstance(out, FileTask):
            self.copies.append(out)
        else:
            self.keep[rel] = out
            if basis and basis.startswith("="):
                self.proven(rel, basis[1:])
            elif basis:
                self.fallbacks.append({"path": rel, "reason": basis, "used": "name only"})
        if read:
            self.files_read.append(rel)


class Filters:
    """Which relative paths a run copies: ``include``/``exclude`` globs, and DistCp's ``-filters``
    regexes (``exclude_regex``, RegexCopyFilter's rule: a path that one of them matches *whole*
    is not copied). A regex is matched against ``"/" + rel`` (DistCp's form of a path relative to
    the source root in its snapshot-diff sync) and against each parent directory of it the same
    way (DistCp's listing does not descend into a directory it filters out)."""

    def __init__(self, include: Iterable[str] = (), exclude: Iterable[str] = (), append_only: Iterable[str] = (),
                 exclude_regex: Iterable[str] = ()) -> None:
        self.include, self.exclude, self.append_only = list(include), list(exclude), list(append_only)
        self.exclude_regex = [re.compile(r) for r in exclude_regex]

    @property
    def active(self) -> bool:
        """Whether any file can be filtered out (beyond the toolkit's own temporary names)."""
        return bool(self.include or self.exclude or self.exclude_regex)

    def _regex_out(self, rel: str) -> bool:
        if not self.exclude_regex:
            return False
        parts = rel.split("/")
        for i in range(len(parts), 0, -1):
            p = "/" + "/".join(parts[:i])
            if any(r.fullmatch(p) for r in self.exclude_regex):
                return True
        return False

    @staticmethod
    def _match(rel: str, globs: list[str]) -> bool:
        base = rel.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(rel, g) or ("/" not in g and fnmatch.fnmatchcase(base, g)) for g in globs)

    def wanted(self, rel: str) -> bool:
        if is_internal(rel):
            return False
        if self.include and not self._match(rel, self.include):
            return False
        return not self._match(rel, self.exclude) and not self._regex_out(rel)

    def appendable(self, rel: str) -> bool:
        return bool(self.append_only) and self._match(rel, self.append_only)


def filters_of(options: CopyOptions) -> Filters:
    return Filters(options.include, options.exclude, options.append_only, options.exclude_regex)


def filters_key(options: CopyOptions) -> dict[str, list[str]]:
    """The filters a run planned with, as recorded in its manifest's header: a snapshot-diff run
    whose base was planned under other filters lists the source instead. (``exclude_regex`` only
    when set: a manifest written before it existed still matches a run without it.)"""
    key = {"include": list(options.include), "exclude": list(options.exclude)}
    if options.exclude_regex:
        key["exclude_regex"] = list(options.exclude_regex)
    return key


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= MTIME_EPS


def unchanged(e: Entry, s: FileStatus) -> bool:
    """The source file is provably the one recorded: size, mtime and change token equal."""
    return (not e.open and e.size == s.size and _same(e.mtime, s.mtime) and e.version is not None
            and e.version == s.version)


def _try_checksum(fs: FileSystem, path: str) -> Checksum | None:
    try:
        return fs.checksum(path)
    except UnderConstruction:
        raise
    except (FileNotFoundError, IsADirectoryError):
        return None


class Prover:
    """Proves (or disproves) that a target file holds a source file's bytes; see the module doc."""

    def __init__(self, src_fs: FileSystem, src_root: str, tgt_fs: FileSystem, tgt_root: str,
                 recorded: Entries | None, content: bool = False) -> None:
        self.src_fs, self.src_root, self.tgt_fs, self.tgt_root = src_fs, src_root, tgt_fs, tgt_root
        self.recorded = recorded or {}
        self.content = content  # CopyOptions.proof == "content": the bytes themselves, always

    def equal(self, rel: str, s: FileStatus, t: FileStatus
              ) -> tuple[bool, str, bool, str | None, str | None, str | None]:
        """(equal, basis, source bytes were read, source checksum, the target's checksum: the
        recorded algorithm's, or SHA-256 of its bytes when read, the target's own checksum)."""
        if s.size != t.size:
            return False, "size", False, None, None, None
        sp, tp = self.src_fs.join(self.src_root, rel), self.tgt_fs.join(self.tgt_root, rel)
        sc = _try_checksum(self.src_fs, sp) if self.src_fs.cheap_checksum else None
        tc = _try_checksum(self.tgt_fs, tp) if self.tgt_fs.cheap_checksum else None
        if not self.content and sc is not None and sc.comparable(tc):  # --proof content: only the bytes
            assert tc is not None
            return sc == tc, sc.algorithm, False, str(sc), str(tc) if tc.layout_independent else None, str(tc)
        rec = self.recorded.get(rel) if not self.content else None
        want = Checksum.parse(rec.checksum) if rec is not None else None
        if rec is not None and sc is not None and want is not None and rec.schecksum and rec.size == s.size \
                and Checksum.parse(rec.schecksum) == sc:  # the source holds the bytes recorded at copy time
            # the target must still hold them: its own checksum when it answers one of the recorded
            # algorithm (a server's, not read here), else the SHA-256 of its bytes read here; a
            # recorded CRC32C of bytes read here proves nothing (32 bits can be forged): compared below
            got = tc if want.comparable(tc) else \
                self.tgt_fs.content_digest(tp) if want.algorithm == DIGEST_ALGO else None
            if got is not None:
                return (got == want, f"recorded {sc.algorithm} + target {want.algorithm}", False, str(sc), str(got),
                        str(tc) if tc is not None else None)
        # the content itself: both sides read here and compared byte for byte
        eq, digest = same_bytes(self.src_fs.read(sp, length=s.size), self.tgt_fs.read(tp))
        got_d = f"{DIGEST_ALGO}:{digest}" if digest else None
        return (eq, "content (read on both sides, compared byte for byte)", True, str(sc) if sc else got_d, got_d,
                str(tc) if tc is not None else None)


def reconcile_entry(rel: str, s: FileStatus, t: FileStatus | None, options: CopyOptions, f: Filters,
                    prover: Prover, tgt_fs: FileSystem, tgt_root: str
                    ) -> tuple[str, FileTask | Entry, str | None, bool]:
    """One source file of a full comparison against the target's file at its path (``t``, None
    when the target lacks it): (rel, a task or the entry kept, the basis — ``"=<proof>"`` or why
    it was kept unproven — and whether source bytes were read)."""
    task = FileTask(rel, s.size, s.mtime, permission=s.permission, version=s.version, block_size=s.block_size)
    if t is None:
        task.reason = "new"
        return rel, task, None, False
    if options.overwrite:
        task.reason = "overwrite"
        return rel, task, None, False
    if not options.update:
        # kept unproven: no change token recorded, so a later --update run compares it
        return rel, Entry(t.size, s.mtime, None, t.mtime, None, None, t.version), "exists (no --update)", False
    if f.appendable(rel) and t.size < s.size:
        # the target's bytes: the server's composite CRC32C, else their SHA-256 read here (the
        # source's prefix is hashed alike while it is read, and must match)
        tc = _try_checksum(tgt_fs, tgt_fs.join(tgt_root, rel)) if tgt_fs.cheap_checksum else \
            tgt_fs.content_digest(tgt_fs.join(tgt_root, rel))
        if tc is not None and tc.algorithm in ("COMPOSITE-CRC32C", DIGEST_ALGO):
            task.action, task.offset, task.prefix_checksum, task.reason = "append", t.size, str(tc), "grew"
            return rel, task, None, False
    try:
        eq, basis, read, sc, tcrc, town = prover.equal(rel, s, t)
    except UnderConstruction:
        task.reason = "open for write"
        return rel, task, None, False
    if eq:
        return rel, Entry(s.size, s.mtime, tcrc, t.mtime, s.version, sc, t.version, False,
                          town if not tgt_fs.content_token else None), "=" + basis, read
    task.reason = f"differs ({basis})"
    return rel, task, None, read


def target_kept(t: FileStatus) -> Entry:
    """The manifest entry of a target file the source lacks, kept without ``--delete``."""
    return Entry(t.size, t.mtime, None, t.mtime, None, None, t.version)


def reconcile(src_fs: FileSystem, src_root: str, src: Files, tgt_fs: FileSystem, tgt_root: str,
              tgt: Files, options: CopyOptions, *, mode: str, reason: str,
              recorded: Entries | None = None) -> Plan:
    """Full comparison of a source listing with a target listing (bootstrap or reconcile), on
    ``options.workers`` threads.

    The oracle only: the copy run plans by :func:`~dr_toolkit.copy.stream_plan.stream_reconcile`
    (the same :func:`reconcile_entry` over sorted streams, memory O(batch)); the tests compare
    the two on random namespaces, entry by entry."""
    f = filters_of(options)
    plan = Plan(mode, reason)
    plan.files_total = len(src)
    plan.bytes_total = sum(s.size for s in src.values())
    prover = Prover(src_fs, src_root, tgt_fs, tgt_root, recorded, content=options.proof == "content")

    def decide(item: tuple[str, FileStatus]) -> tuple[str, FileTask | Entry, str | None, bool]:
        return reconcile_entry(item[0], item[1], tgt.get(item[0]), options, f, prover, tgt_fs, tgt_root)

    items = sorted(src.items())
    # files the target lacks need no comparison: decided here; only the others go to the pool
    quick = [it for it in items if it[0] not in tgt or options.overwrite]
    slow = [it for it in items if not (it[0] not in tgt or options.overwrite)]
    with ThreadPoolExecutor(max(1, min(options.workers, len(slow) or 1))) as pool:
        for rel, out, basis, read in list(map(decide, quick)) + list(pool.map(decide, slow)):
            plan.record(rel, out, basis, read)
    for rel, t in tgt.items():
        if rel in src:
            continue
        if options.delete:
            plan.deletes.append(rel)
        else:
            plan.keep[rel] = target_kept(t)
    resolve_type_changes(plan, src, tgt)
    return plan


def entry_break(rel: str, e: Entry, t: FileStatus | None) -> str | None:
    """Why the target's file ``t`` at ``rel`` is not the one the base manifest recorded (None when it is)."""
    if t is None:
        return f"target changed: {rel} is missing"
    if t.size != e.size:
        return f"target changed: {rel} has {t.size} bytes, the manifest says {e.size}"
    if e.tmtime is not None and abs(t.mtime - e.tmtime) > MTIME_EPS:
        return f"target changed: {rel} was modified after the last run"
    if e.tversion is not None and t.version is not None and e.tversion != t.version:
        return f"target changed: {rel} was rewritten after the last run"
    return None


def chain_break(base: Entries, tgt: Files, wanted: Callable[[str], bool]) -> str | None:
    """Why the target no longer holds the base manifest exactly (None when it does). The oracle
    only: the copy run asks :func:`~dr_toolkit.copy.stream_plan.stream_chain_break`."""
    for rel, e in base.items():
        why = entry_break(rel, e, tgt.get(rel))
        if why:
            return why
    if len(tgt) != len(base):
        for rel in tgt:
            if rel not in base and wanted(rel):
                return f"target changed: {rel} is not in the last manifest"
    return None


def copy_mode(options: CopyOptions, *, manifest_id: int | str | None, has_base: bool, why_no_base: str,
              target_files: int, how: str, chain_broken: Callable[[], str | None]) -> tuple[str, str]:
    """The run's mode and why, decided in this one place.

    ``bootstrap``/``reconcile``: a full comparison of source and target (every file proven by
    size, mtime, change token or content); ``fast-forward``: only what changed since the base
    manifest (``how``: the snapshot diff or the listing against it). A full comparison when
    ``--overwrite`` asks for it, when there is no usable base (``has_base`` false; ``why_no_base``
    says why — bootstrap when no manifest was ever written), without ``--update`` (only missing
    files are copied), or when ``chain_broken()`` (asked last: it may read the target) finds the
    target no longer holds what the base manifest recorded."""
    if options.overwrite:
        return "reconcile", "--overwrite rewrites every file"
    if not has_base:
        why = why_no_base
        if target_files:
            why += f"; the target already holds {target_files} files: compared by content"
        return ("bootstrap" if manifest_id is None else "reconcile"), why
    if not options.update:
        return "reconcile", "without --update only missing files are copied"
    if options.proof == "content":
        return "reconcile", "--proof content: every file compared by its bytes (read on both sides)"
    broken = chain_broken()
    if broken:
        return "reconcile", broken
    return "fast-forward", f"target holds manifest {manifest_id}; {how}"


def fast_forward(src: Files, base: Entries, options: CopyOptions, *, reason: str,
                 moves: dict[str, str] | None = None, changed: set[str] | None = None) -> Plan:
    """Apply only the changes between the base manifest and the new source state.

    Without a snapshot diff (``changed`` None) a file is unchanged only when size, mtime and
    change token equal the manifest's; a file without a change token is copied. With one,
    ``changed`` lists every file the diff touched and ``moves`` (new rel -> old rel) the files
    it moved.

    The copy run uses it for snapshot diffs (``changed`` given: work in proportion to the diff);
    a listing against the manifest is planned by
    :func:`~dr_toolkit.copy.stream_plan.stream_fast_forward`, for which this is the tests' oracle."""
    f = filters_of(options)
    plan = Plan("fast-forward", reason)
    plan.files_total = len(src)
    plan.bytes_total = sum(s.size for s in src.values())
    moves = moves or {}
    same = 0  # files proven by size, mtime and change token (counted once at the end)
    consumed: set[str] = set()
    move_sources = {o for o in moves.values() if o in base}
    for rel, s in src.items():
        old = moves.get(rel)
        e = base.get(rel) if rel not in move_sources else None
        if old is not None and old in base:
            # the file moved on the source: move it on the target too (then copy over it if it changed)
            consumed.add(old)
            plan.moves.append((old, rel))
            e = base[old]
        if e is not None:
            if changed is not None and rel not in changed and not e.open:
                plan.keep[rel] = e
                plan.proven(rel, "snapshot diff: unchanged" if old is None else "snapshot diff: moved")
                continue
            if (not e.open and e.size == s.size and e.version is not None and e.version == s.version
                    and abs(e.mtime - s.mtime) <= MTIME_EPS):  # unchanged(e, s), inlined: a million a plan
                plan.keep[rel] = e
                same += 1
                continue
        plan.copies.append(forward_task(rel, s, e, f))
    if same:
        plan.basis["size, mtime and change token as recorded"] = same
    for rel in sorted(base.keys() - src.keys()) if len(base) else []:
        if rel in consumed:
            continue
        if options.delete:
            plan.deletes.append(rel)
        else:
            plan.keep[rel] = base[rel]
    resolve_type_changes(plan, src, base.keys() - consumed if consumed else base.keys())
    return plan


def forward_task(rel: str, s: FileStatus, e: Entry | None, f: Filters) -> FileTask:
    """A fast-forward's task for a source file not proven unchanged (``e``: its base entry, None
    when new): its tail appended when it grew (or was open) under ``append_only``, else copied."""
    task = FileTask(rel, s.size, s.mtime, permission=s.permission, reason="new" if e is None else "changed",
                    version=s.version, block_size=s.block_size)
    if e is not None and f.appendable(rel) and s.size > e.size and e.checksum and not e.open:
        task.action, task.offset, task.prefix_checksum, task.reason = "append", e.size, e.checksum, "grew"
    elif e is not None and e.open and f.appendable(rel) and s.size >= e.size and e.checksum:
        task.action, task.offset, task.prefix_checksum, task.reason = "append", e.size, e.checksum, "was open"
    return task


def _parents(rel: str) -> Iterable[str]:
    i = rel.rfind("/")
    while i > 0:
        rel = rel[:i]
        yield rel
        i = rel.rfind("/")


def in_the_way(rel: str, new_files: Container[str], new_dirs: Container[str]) -> bool:
    """Whether a target path the source lacks is in the way of the source's tree: a directory of
    a path new on the source (``new_dirs``), or below a path the source has newly as a file."""
    if rel in new_dirs:
        return True
    i = rel.rfind("/")
    while i > 0:
        if rel[:i] in new_files:
            return True
        i = rel.rfind("/", 0, i)
    return False


def resolve_type_changes(plan: Plan, src: Collection[str], tgt: Collection[str]) -> None:
    """Target files in the way of the source's tree go first, whatever ``--delete`` says: a
    target file where the source has a directory, and target files under a path the source
    has as a file. Only paths new on the source can conflict, and only target files the source
    lacks can be in the way: linear in the changes (a run that changed nothing pays two set
    differences)."""
    new = [r for r in src if r not in tgt]
    if not new:
        return
    gone = [r for r in tgt if r not in src]
    if not gone:
        return
    new_files = set(new)
    new_dirs: set[str] = set()
    for rel in new:
        i = rel.rfind("/")
        while i > 0:
            d = rel[:i]
            if d in new_dirs:
                break
            new_dirs.add(d)
            i = rel.rfind("/", 0, i)
    block = [rel for rel in gone if in_the_way(rel, new_files, new_dirs)]
    if not block:
        return
    bs = set(block)
    plan.blockers = sorted(bs)
    plan.deletes = [d for d in plan.deletes if d not in bs]
    for rel in bs:
        plan.keep.pop(rel, None)


# --- snapshot diffs (DistCpSync semantics) ---------------------------------------------------------


def _norm(p: str | None) -> str:
    """A diff path relative to the snapshot root. Only slashes and ``./`` are taken off: spaces
    are legal in HDFS names, leading and trailing ones included, and are kept exactly."""
    p = p or ""
    while p.startswith("./"):
        p = p[2:]
    p = p.strip("/")
    return "" if p == "." else p


def _depth(p: str) -> int:
    return p.count("/") + 1 if p else 0


class _Sorted:
    """Sorted keys with subtree queries: ``under(p)`` = ``p`` itself and every key below it, in
    sorted order. A spilled map (the base manifest past a batch) is asked through its index
    (:meth:`SpillMap.sorted_keys`): no sorted copy of its keys is made; others are sorted here."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.map = keys if isinstance(keys, SpillMap) and keys.spilled else None
        if self.map is None:
            self.keys = sorted(keys)
            self.set = set(self.keys)

    def under(self, p: str) -> list[str]:
        m = self.map
        if m is not None:
            if not p:
                return list(m.sorted_keys())
            return ([p] if p in m else []) + list(m.sorted_keys(p))
        out = [p] if p in self.set else []
        if not p:
            return list(self.keys)
        lo = bisect.bisect_left(self.keys, p + "/")
        hi = bisect.bisect_left(self.keys, p + "0")  # '0' is the character after '/'
        out.extend(self.keys[lo:hi])
        return out


def apply_diff(base: Entries, diff: Iterable[Any], stat_tree: Callable[[str, bool], Files | None],
               unknown: Callable[[str], bool] | None = None
               ) -> tuple[Files, dict[str, str], set[str]]:
    """The new source state from the base manifest and an HDFS snapshot diff, as DistCpSync
    reads one:

    - DELETE and RENAME sources are paths in the *earlier* snapshot; RENAME targets are paths
      in the later one. They are applied in two stages — every source taken out (deepest
      first), then every rename placed (shallowest target first) — so swaps, cycles and moves
      out of deleted directories come out right in any order of the report.
    - CREATE and MODIFY paths are in the earlier snapshot too: under a renamed directory they
      are translated through the deepest rename whose source is a parent (or the path itself,
      for a MODIFY). Entries under a deleted directory are dropped.

    ``stat_tree(rel, recursive)`` lists the files at ``rel`` (under it when ``recursive``) in
    the new snapshot, or None when ``rel`` is a directory and not ``recursive``. Returns
    (state, moves new rel -> old rel, files the diff touched). Linear in the diff (plus one
    sort of the base).

    **Nothing the base cannot account for is lost**: a RENAME whose source holds no file of the
    base (a file whose copy failed, one published out of an excluded directory), or one for which
    ``unknown(old path)`` says the base may not hold everything below it (pending files there,
    filters that may have excluded some), is also read as a CREATE of its target: the target is
    listed in the later snapshot and every file the state lacks is added as touched.
    """
    renames: list[tuple[str, str]] = []
    deletes: list[str] = []
    touched_in: list[tuple[str, str]] = []
    for d in diff:
        p = _norm(d.path)
        if d.type == "R" and d.target is not None:
            if p:
                renames.append((p, _norm(d.target)))
        elif d.type == "-":
            if p:
                deletes.append(p)
        elif d.type in ("+", "M"):
            touched_in.append((d.type, p))
    base_keys = _Sorted(base)
    taken: set[str] = set()
    staged: dict[int, list[tuple[str, str]]] = {}  # rename index -> [(old rel, suffix)]
    stage = [(p, i) for i, (p, _t) in enumerate(renames)] + [(p, -1) for p in deletes]
    stage.sort(key=lambda x: (-_depth(x[0]), x[0]))
    for p, i in stage:
        got = [r for r in base_keys.under(p) if r not in taken]
        taken.update(got)
        if i >= 0:
            staged.setdefault(i, []).extend((r, r[len(p):]) for r in got)
    state: Files = files_map((r, FileStatus(r, e.size, e.mtime, version=e.version))
                             for r, e in base.items() if r not in taken)
    origin: dict[str, str] = {}
    relist = [t for i, (p, t) in enumerate(renames) if not staged.get(i) or (unknown is not None and unknown(p))]
    for i in sorted(staged, key=lambda i: (_depth(renames[i][1]), renames[i][1])):
        dst = renames[i][1]
        for old, suffix in staged[i]:
            new = dst + suffix
            e = base[old]
            state[new] = FileStatus(new, e.size, e.mtime, version=e.version)
            origin[new] = old
    placed = _Sorted(origin)
    rename_src = {p: t for p, t in renames}
    deleted = set(deletes)
    touched: dict[str, str] = {}
    for kind, p in touched_in:
        if not p:
            continue  # "M ." — the snapshot root itself
        parents = list(_parents(p))
        if (kind == "M" and p in deleted) or any(q in deleted for q in parents):
            continue
        hit = p if kind == "M" and p in rename_src else next((q for q in parents if q in rename_src), None)
        if hit is not None:
            p = rename_src[hit] + p[len(hit):]
        touched[p] = "+" if "+" in (kind, touched.get(p)) else "M"
    changed: set[str] = set()
    for p, kind in sorted(touched.items()):
        fresh = stat_tree(p, kind == "+")
        if fresh is None:  # a modified directory: its changed children have their own entries
            continue
        for r in base_keys.under(p) + placed.under(p):
            if r in state and r not in fresh:
                del state[r]
                origin.pop(r, None)
        for r, s in fresh.items():
            state[r] = s
            changed.add(r)
    for t in sorted(set(relist)):  # renames the base cannot account for: their targets listed
        for r, s in (stat_tree(t, True) or {}).items():
            if r not in state:
                state[r] = s
                changed.add(r)
    return state, origin, changed


def relist_diff(base: Entries, diff: Iterable[Any], stat_tree: Callable[[str, bool], Files | None]
                ) -> tuple[Files, set[str]]:
    """The state of the snapshot read, from the base manifest and an HDFS snapshot diff whose
    direction is not proven forward (the base snapshot is the newer one: ``-rdiff``, a backward
    ``-diff``, or a NameNode that gives no snapshot ids).

    HDFS computes every diff from the earlier snapshot to the later one and, asked the other way,
    reverses the report: CREATE and DELETE swap, a RENAME names the later path first — but every
    other path still names the *earlier* (here: the read, older) snapshot's location, under a
    renamed directory too. No path is replayed here: each path the report names — both ends of
    every rename, every created and deleted path, each translated through every rename whose one
    end is it or a parent, both ways — is dropped from the base and listed in the snapshot read
    (``stat_tree(rel, recursive)``); a MODIFY names one file (a directory's changed children have
    entries of their own). Outside those paths the two snapshots hold the same inodes at the same
    paths, unchanged (else the NameNode would have reported them), so the base stands there.
    Naming more paths than needed only lists more; the result is the snapshot read, whichever way
    the report runs. Moves are copies (no rename is replayed). Returns (state, files listed)."""
    subtree: set[str] = set()
    exact: set[str] = set()
    fwd: dict[str, list[str]] = {}
    bwd: dict[str, list[str]] = {}
    for d in diff:
        p = _norm(d.path)
        if d.type == "R" and d.target is not None:
            t = _norm(d.target)
            subtree.update((p, t))
            fwd.setdefault(p, []).append(t)
            bwd.setdefault(t, []).append(p)
        elif d.type in ("+", "-"):
            subtree.add(p)
        elif d.type == "M":
            exact.add(p)

    def translations(p: str) -> list[str]:
        out = []
        for q in [p, *_parents(p)]:
            for other in [*fwd.get(q, []), *bwd.get(q, [])]:
                out.append(other + p[len(q):])
        return out

    subtree.update([x for p in list(subtree) for x in translations(p)])
    exact.update([x for p in list(exact) for x in translations(p)])
    tops: list[str] = []  # the shallowest paths: one under another is listed with it
    tops_set: set[str] = set()
    for p in [""] if "" in subtree else sorted(subtree, key=lambda x: (_depth(x), x)):
        if not any(q in tops_set for q in _parents(p)):
            tops.append(p)
            tops_set.add(p)
    keys = _Sorted(base)
    gone: set[str] = set()
    for p in tops:
        gone.update(keys.under(p))
    covered = "" in tops_set
    singles = sorted(p for p in exact
                     if p and not covered and p not in tops_set and not any(q in tops_set for q in _parents(p)))
    fresh_of: dict[str, Files] = {}
    for p in singles:
        fresh = stat_tree(p, False)
        if fresh is None:  # a directory in the snapshot read
            if p not in base:
                continue  # a directory on both sides: its changed children have entries of their own
            fresh = stat_tree(p, True) or {}  # the base has a file there: the directory listed whole
        gone.update(keys.under(p))
        fresh_of[p] = fresh
    state: Files = files_map((r, FileStatus(r, e.size, e.mtime, version=e.version))
                             for r, e in base.items() if r not in gone)
    changed: set[str] = set()
    for p in tops:
        for r, s in (stat_tree(p, True) or {}).items():
            state[r] = s
            changed.add(r)
    for fresh in fresh_of.values():
        for r, s in fresh.items():
            state[r] = s
            changed.add(r)
    return state, changed
