"""The planner: per file copy / append-tail / skip / delete / rename, with DistCp's rules.

- ``update``: skip when size and a layout-independent checksum match (fallback size+mtime,
  reported, when a side offers no comparable checksum); ``overwrite``: copy every file;
  neither: skip files that exist at the target (DistCp's default).
- ``delete`` (only with update or overwrite): remove target files the source no longer has.
- Fast-forward (the target still holds the base manifest exactly): decide from the base
  manifest against the new source state without reading any file whose size and mtime are
  unchanged; renames are applied on the target (from the snapshot diff, or detected as a
  vanished and a new path with the same size and mtime).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.manifest import Entries, Entry
from dr_toolkit.fs.base import Checksum, FileStatus, FileSystem, is_internal

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


@dataclass
class Plan:
    mode: str
    mode_reason: str
    copies: list[FileTask] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    renames: list[tuple[str, str]] = field(default_factory=list)
    keep: Entries = field(default_factory=dict)  # entries of the new manifest that need no work
    fallbacks: list[dict[str, str]] = field(default_factory=list)
    files_total: int = 0
    bytes_total: int = 0
    files_read: list[str] = field(default_factory=list)  # source files read while planning

    @property
    def bytes_to_copy(self) -> int:
        return sum(t.size - t.offset for t in self.copies)

    @property
    def files_skipped(self) -> int:
        return self.files_total - len(self.copies) - len(self.renames)


class Filters:
    def __init__(self, include: Iterable[str] = (), exclude: Iterable[str] = (), append_only: Iterable[str] = ()
                 ) -> None:
        self.include, self.exclude, self.append_only = list(include), list(exclude), list(append_only)

    @staticmethod
    def _match(rel: str, globs: list[str]) -> bool:
        base = rel.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(rel, g) or ("/" not in g and fnmatch.fnmatchcase(base, g)) for g in globs)

    def wanted(self, rel: str) -> bool:
        if is_internal(rel):
            return False
        if self.include and not self._match(rel, self.include):
            return False
        return not self._match(rel, self.exclude)

    def appendable(self, rel: str) -> bool:
        return bool(self.append_only) and self._match(rel, self.append_only)


def filters_of(options: CopyOptions) -> Filters:
    return Filters(options.include, options.exclude, options.append_only)


def comparable(a: Checksum | None, b: Checksum | None) -> str | None:
    """None when the two checksums can be compared; otherwise why not (for the report)."""
    if a is None:
        return "the source offers no checksum"
    if b is None:
        return "the target offers no checksum"
    if a.algorithm != b.algorithm:
        return f"checksum algorithms differ ({a.algorithm} vs {b.algorithm})"
    if not a.layout_independent:
        return f"{a.algorithm} depends on the block layout"
    return None


def _entry(s: FileStatus, checksum: str | None = None, tmtime: float | None = None) -> Entry:
    return Entry(s.size, s.mtime, checksum, tmtime)


def reconcile(src_fs: FileSystem, src_root: str, src: dict[str, FileStatus], tgt_fs: FileSystem, tgt_root: str,
              tgt: dict[str, FileStatus], options: CopyOptions, *, mode: str, reason: str, workers: int = 8
              ) -> Plan:
    """Full comparison of a source listing with a target listing (bootstrap or reconcile)."""
    f = filters_of(options)
    plan = Plan(mode, reason)
    plan.files_total = len(src)
    plan.bytes_total = sum(s.size for s in src.values())

    def decide(item: tuple[str, FileStatus]) -> tuple[str, FileTask | Entry, dict[str, str] | None, bool]:
        rel, s = item
        t = tgt.get(rel)
        task = FileTask(rel, s.size, s.mtime, permission=s.permission)
        if t is None:
            task.reason = "new"
            return rel, task, None, False
        if options.overwrite:
            task.reason = "overwrite"
            return rel, task, None, False
        if not options.update:
            return rel, _entry(s, None, t.mtime), None, False
        if f.appendable(rel) and t.size < s.size:
            tc = tgt_fs.checksum(tgt_fs.join(tgt_root, rel))
            if tc is not None and tc.layout_independent:
                task.action, task.offset, task.prefix_checksum, task.reason = "append", t.size, str(tc), "grew"
                return rel, task, None, False
        if t.size != s.size:
            task.reason = "size differs"
            return rel, task, None, False
        sc = src_fs.checksum(src_fs.join(src_root, rel))
        read = not src_fs.cheap_checksum
        tc = tgt_fs.checksum(tgt_fs.join(tgt_root, rel))
        why = comparable(sc, tc)
        if why is None:
            if sc == tc:
                return rel, _entry(s, str(sc), t.mtime), None, read
            task.reason = "checksum differs"
            return rel, task, None, read
        fb = {"path": rel, "reason": why, "used": "size+mtime"}
        if t.mtime + MTIME_EPS >= s.mtime:
            return rel, _entry(s, str(sc) if sc and sc.layout_independent else None, t.mtime), fb, read
        task.reason = "target older than source"
        return rel, task, fb, read

    with ThreadPoolExecutor(max(1, workers)) as pool:
        for rel, out, fb, read in pool.map(decide, sorted(src.items())):
            if isinstance(out, FileTask):
                plan.copies.append(out)
            else:
                plan.keep[rel] = out
            if fb:
                plan.fallbacks.append(fb)
            if read:
                plan.files_read.append(rel)
    for rel, t in tgt.items():
        if rel in src:
            continue
        if options.delete:
            plan.deletes.append(rel)
        else:
            plan.keep[rel] = Entry(t.size, t.mtime, None, t.mtime)
    return plan


def chain_break(base: Entries, tgt: dict[str, FileStatus], wanted: Callable[[str], bool]) -> str | None:
    """Why the target no longer holds the base manifest exactly (None when it does)."""
    for rel, e in base.items():
        t = tgt.get(rel)
        if t is None:
            return f"target changed: {rel} is missing"
        if t.size != e.size:
            return f"target changed: {rel} has {t.size} bytes, the manifest says {e.size}"
        if e.tmtime is not None and abs(t.mtime - e.tmtime) > MTIME_EPS:
            return f"target changed: {rel} was modified after the last run"
    for rel in tgt:
        if rel not in base and wanted(rel):
            return f"target changed: {rel} is not in the last manifest"
    return None


def fast_forward(src: dict[str, FileStatus], base: Entries, options: CopyOptions, *, reason: str,
                 renames: dict[str, str] | None = None) -> Plan:
    """Apply only the changes between the base manifest and the new source state."""
    f = filters_of(options)
    plan = Plan("fast-forward", reason)
    plan.files_total = len(src)
    plan.bytes_total = sum(s.size for s in src.values())
    hinted = dict(renames or {})  # new rel -> old rel
    vanished = {rel for rel in base if rel not in src}
    by_shape: dict[tuple[int, float], list[str]] = {}
    for rel in vanished:
        by_shape.setdefault((base[rel].size, round(base[rel].mtime, 3)), []).append(rel)
    for rel in sorted(src):
        s = src[rel]
        e = base.get(rel)
        if e is not None and e.size == s.size and abs(e.mtime - s.mtime) <= MTIME_EPS:
            plan.keep[rel] = e
            continue
        if e is None:
            old = hinted.get(rel)
            if old is None:
                cands = by_shape.get((s.size, round(s.mtime, 3)), [])
                old = cands[0] if len(cands) == 1 else None
            if old is not None and old in vanished:
                oe = base[old]
                if oe.size == s.size and abs(oe.mtime - s.mtime) <= MTIME_EPS:
                    vanished.discard(old)
                    by_shape.get((oe.size, round(oe.mtime, 3)), []).clear()
                    plan.renames.append((old, rel))
                    plan.keep[rel] = oe
                    continue
        task = FileTask(rel, s.size, s.mtime, permission=s.permission, reason="new" if e is None else "changed")
        if e is not None and f.appendable(rel) and s.size > e.size and e.checksum:
            task.action, task.offset, task.prefix_checksum, task.reason = "append", e.size, e.checksum, "grew"
        plan.copies.append(task)
    for rel in sorted(vanished):
        if options.delete:
            plan.deletes.append(rel)
        else:
            plan.keep[rel] = base[rel]
    return plan


def apply_diff(base: Entries, diff: Iterable[Any], stat_tree: Callable[[str, bool], dict[str, FileStatus] | None]
               ) -> tuple[dict[str, FileStatus], dict[str, str]]:
    """The new source state from the base manifest and an HDFS snapshot diff.

    ``stat_tree(rel, recursive)`` lists the files at ``rel`` (under it when ``recursive``) in
    the new snapshot, or None when ``rel`` is a directory and not ``recursive``. Returns the
    state and the renames it saw (new rel -> old rel).
    """
    state: dict[str, FileStatus] = {rel: FileStatus(rel, e.size, e.mtime) for rel, e in base.items()}
    origin: dict[str, str] = {rel: rel for rel in state}
    touched: dict[str, str] = {}

    def under(p: str) -> list[str]:
        return [r for r in state if r == p or r.startswith(p + "/")]

    def resolve(p: str) -> str:
        if p in state or any(r.startswith(p + "/") for r in state):
            return p
        for cur, orig in origin.items():
            if orig == p:
                return cur
        return p

    for d in diff:
        if d.type == "-":
            for r in under(resolve(d.path)):
                state.pop(r, None)
                origin.pop(r, None)
        elif d.type == "R" and d.target:
            src = resolve(d.path)
            for r in under(src):
                nr = d.target + r[len(src):]
                state[nr] = state.pop(r)
                origin[nr] = origin.pop(r, r)
        elif d.type in ("+", "M"):
            p = "" if d.path in (".", "") else d.path
            touched[p] = "+" if "+" in (d.type, touched.get(p)) else "M"
    for p, kind in sorted(touched.items()):
        fresh = stat_tree(p, kind == "+")
        if fresh is None:  # a modified directory: its changed children have their own entries
            continue
        for r in under(p):
            if r not in fresh:
                state.pop(r, None)
        state.update(fresh)
    renames = {cur: orig for cur, orig in origin.items() if cur != orig}
    return state, renames
