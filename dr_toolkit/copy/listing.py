"""The listing stage (DistCp's CopyListing): the source's and the target's trees walked.

Each end of a run is a :class:`Side` (its location, filesystem and root), checked once by
:func:`resolve` before anything is written. :func:`entries` walks one side and yields its files
as ``(relative path, FileStatus)`` one at a time (what a streaming planner consumes);
:func:`list_tree` gathers them by path. :func:`proven_listing` proves a live listing to be the
tree at one moment (every directory's token taken before its entries are read, then read again),
:func:`target_listing` is the target's walk, which also finds temporary files of killed runs,
empty directories and entries that are not regular files. Nothing here writes.
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.plan import Filters
from dr_toolkit.copy.request import Opener
from dr_toolkit.copy.state import Fence
from dr_toolkit.errors import ConfigError
from dr_toolkit.fs.base import FileStatus, FileSystem, tmp_run_tag
from dr_toolkit.fs.uri import Location, parse_uri
from dr_toolkit.paths import real_path

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.topology import Topology

#: a listing's report of an entry it passes over: (path, reason)
Skipped = Callable[[str, str], None]


@dataclass
class Side:
    """One end of a run: where it is, its filesystem (open for the run) and the root read or
    written (a local target's real path); the target's also carries the run's fence."""

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


def resolve(source: str, target: str, topology: Topology | None, access: Access,
            open_fs: Opener) -> tuple[Side, Side]:
    """Parse and check both ends, opened by ``open_fs``; raise ConfigError (exit 2) before anything
    is written."""
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
        troot = real_path(tgt.path)
        tfs.confine = troot  # type: ignore[attr-defined]
    if not st.is_dir:  # a single file: copy it into the target directory under its name
        return Side(src, sfs, posixpath.dirname(src.path.rstrip("/")) or "/", src.path), Side(tgt, tfs, troot)
    return Side(src, sfs, src.path), Side(tgt, tfs, troot)


class Skips:
    """The source entries a run passes over (symlinks, empty directories, ...): counted by reason,
    the first 1,000 kept."""

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


def entries(side: Side, only: str | None = None, skipped: Skipped | None = None,
            dirs: dict[str, Any] | None = None, recursive: bool = True) -> Iterator[tuple[str, FileStatus]]:
    """The files of ``side`` (below ``only`` when given; one level without ``recursive``) as
    ``(path relative to the side's root, status)``, one at a time as the walk finds them. With
    ``dirs``, every directory's token (relative path -> token, taken before its entries were read)
    is put in it once the walk is over. -numListstatusThreads (``side.list_threads``): the
    subtrees are walked on threads and their files yielded once all are read."""
    if side.list_threads > 1 and recursive and only is None and side.single is None:
        yield from _listing_threads(side, skipped, dirs).items()
        return
    fs = side.fs
    root = side.root.rstrip("/")
    cut = len(root) + 1 if root else 0
    prefix = root + "/" if root else ""
    seen: dict[str, Any] | None = {} if dirs is not None else None
    for s in fs.list_files(only or side.single or side.root, skipped, dirs=seen, recursive=recursive):
        p = s.path
        rel = p[cut:] if p.startswith(prefix) else fs.relative(side.root, p)
        if rel:
            yield rel, s
    if dirs is not None and seen:
        for p, token in seen.items():
            dirs[fs.relative(side.root, p) if p != root else ""] = token


def list_tree(side: Side, only: str | None = None, skipped: Skipped | None = None,
              dirs: dict[str, Any] | None = None, recursive: bool = True) -> dict[str, FileStatus]:
    """:func:`entries` by relative path."""
    return dict(entries(side, only, skipped, dirs, recursive))


def _listing_threads(side: Side, skipped: Skipped | None,
                     dirs: dict[str, Any] | None) -> dict[str, FileStatus]:
    """-numListstatusThreads N: the root read one level (its files, its subdirectories' tokens),
    then each subdirectory's tree walked on one of N threads; the same files and tokens as one
    walk (each directory's token still recorded before its entries are read)."""
    one = Side(side.loc, side.fs, side.root)
    lock = threading.Lock()

    def skip(path: str, reason: str) -> None:
        if skipped is not None:
            with lock:
                skipped(path, reason)

    level: dict[str, Any] = {}
    out = list_tree(one, side.root, skip, dirs=level, recursive=False)
    subs = sorted(d for d in level if d)

    def walk(d: str) -> tuple[dict[str, FileStatus], dict[str, Any]]:
        tokens: dict[str, Any] = {}
        n = [0]

        def count(path: str, reason: str) -> None:
            n[0] += 1
            skip(path, reason)

        path = side.fs.join(side.root, d)
        got = list_tree(one, path, count, dirs=tokens)
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


def _relist(side: Side, d: str, files: dict[str, FileStatus], tokens: dict[str, Any],
            skipped: Skipped | None) -> None:
    """Read directory ``d`` (relative) again, one level: its files replace the ones listed in it,
    a subdirectory gone drops what was listed under it, a new one is listed whole."""
    fs = side.fs
    path = fs.join(side.root, d)
    level: dict[str, Any] = {}
    now = list_tree(side, path, skipped, dirs=level, recursive=False)
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
        files.update(list_tree(side, fs.join(side.root, new), skipped, dirs=tokens))


def proven_listing(side: Side, skipped: Skipped | None
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
    files = list_tree(side, skipped=skipped, dirs=tokens)
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


def utf8_only(files: dict[str, FileStatus], skips: Skips) -> dict[str, FileStatus]:
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


def wanted_only(files: dict[str, FileStatus], f: Filters) -> dict[str, FileStatus]:
    if not f.active:
        return files  # listings already pass over temporary names
    return {r: s for r, s in files.items() if f.wanted(r)}


ODD = frozenset({"symlink", "dangling symlink", "not a regular file"})


@dataclass
class Found:
    """What the target's walk finds besides its files: temporary files of killed runs (removed
    after the listing: one walk, not two), empty directories (pruned with --delete) and entries
    that are not regular files (symlinks, FIFOs, ...: never followed, removed when in the way)."""

    tmp: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    odd: list[tuple[str, str]] = field(default_factory=list)


def target_listing(src: Side, tgt: Side, found: Found | None = None) -> dict[str, FileStatus]:
    """The target's files (a single-file source: that one name, nothing else looked at)."""
    if src.single:  # a single file: the target is that one name, nothing else is looked at (or deleted)
        name = posixpath.basename(src.single.rstrip("/"))
        t = tgt.fs.stat(tgt.fs.join(tgt.root, name))
        return {name: t} if t is not None and not t.is_dir else {}

    def skipped(path: str, reason: str) -> None:
        if found is None:
            return
        if tmp_run_tag(path) is not None:
            found.tmp.append(path)  # temp files of killed runs: removed after the listing (one walk, not two)
        elif reason == "empty directory":
            found.empty.append(path)  # e.g. emptied behind our back: pruned with --delete
        elif reason in ODD:
            found.odd.append((path, reason))  # a symlink, FIFO, ...: never followed, removed when in the way

    return list_tree(tgt, skipped=skipped)
