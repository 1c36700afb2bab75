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
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.plan import Filters
from dr_toolkit.copy.request import Opener
from dr_toolkit.copy.spill import Files, files_map
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
    list_threads: int = 1  # -numListstatusThreads: directories read on this many threads (every level)
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
    is put in it once the walk is over. -numListstatusThreads (``side.list_threads``): every
    directory is read on one of that many threads (:func:`_parallel_entries`); the same files,
    skip reports and tokens as one walk, in another order."""
    if side.list_threads > 1 and recursive and side.single is None and side.fs.kind not in FLAT:
        yield from _parallel_entries(side, only or side.root, skipped, dirs)
        return
    yield from _serial_entries(side, only, skipped, dirs, recursive)


def _serial_entries(side: Side, only: str | None, skipped: Skipped | None, dirs: dict[str, Any] | None,
                    recursive: bool) -> Iterator[tuple[str, FileStatus]]:
    """One walk on the caller's thread (the filesystem's own :meth:`~FileSystem.list_files`)."""
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
              dirs: dict[str, Any] | None = None, recursive: bool = True) -> Files:
    """:func:`entries` by relative path (a :class:`~dr_toolkit.copy.spill.SpillMap`: on disk past a batch)."""
    return files_map(entries(side, only, skipped, dirs, recursive))


#: filesystems without directories: one flat listing (an S3 prefix is one paged scan in key order)
FLAT = frozenset({"s3"})
BATCH = 512  # entries a listing thread hands over at once
QUEUE_BATCHES = 32  # batches found and not yet taken by the consumer: the listing's memory bound


class _Stop(Exception):
    """The consumer is gone: a listing thread unwinds."""


def _parallel_entries(side: Side, top: str, skipped: Skipped | None,
                      dirs: dict[str, Any] | None) -> Iterator[tuple[str, FileStatus]]:
    """-numListstatusThreads N at every level: each directory is one unit of work on a shared
    stack; N threads take any pending directory at any depth, read it once
    (:meth:`~FileSystem.list_dir`), push its subdirectories and hand its files over in batches
    through a bounded queue; the files are yielded on the caller's thread as they come, the skip
    reports called there too. Memory: the queue (QUEUE_BATCHES x BATCH entries), the directories
    pending and, with ``dirs``, the tokens. Every directory's token is recorded before its entries
    are read (the root's by :meth:`~FileSystem.dir_token`, the others from their parent's read).
    An error in any thread stops the others and is raised here; when the caller stops early (the
    generator closed), the threads are stopped and joined before it returns."""
    fs = side.fs
    root = side.root.rstrip("/")
    cut = len(root) + 1 if root else 0
    prefix = root + "/" if root else ""
    tokens: dict[str, Any] | None = None
    if dirs is not None:
        token = fs.dir_token(top)
        if token is None:  # gone or a file: what one walk does with it
            yield from _serial_entries(side, top, skipped, dirs, True)
            return
        tokens = {top: token}
    else:
        st = fs.stat(top)
        if st is None or not st.is_dir:
            yield from _serial_entries(side, top, skipped, dirs, True)
            return

    lock = threading.Condition()
    pending = [top]  # directories found and not yet read (a stack: depth first, the frontier small)
    busy = 0  # threads reading a directory now
    halt = threading.Event()  # no more directories taken (an error, or the consumer gone)
    gone = threading.Event()  # the consumer is gone: nothing more is handed over
    out: queue.Queue[list[tuple[str, Any]] | BaseException | None] = queue.Queue(QUEUE_BATCHES)

    def put(item: list[tuple[str, Any]] | BaseException | None) -> None:
        while not gone.is_set():
            try:
                out.put(item, timeout=0.05)
                return
            except queue.Full:
                continue
        raise _Stop

    def work() -> None:
        nonlocal busy
        batch: list[tuple[str, Any]] = []
        n = 0

        def emit(item: tuple[str, Any]) -> None:
            nonlocal batch, n
            n += 1
            batch.append(item)
            if len(batch) >= BATCH:
                put(batch)
                batch = []

        def skip(path: str, reason: str) -> None:
            emit((path, reason))

        try:
            while True:
                with lock:
                    while not pending and busy and not halt.is_set():
                        lock.wait()
                    if halt.is_set() or not pending:
                        lock.notify_all()
                        break
                    d = pending.pop()
                    busy += 1
                found: list[str] = []
                level: dict[str, Any] | None = {} if tokens is not None else None
                n = 0
                try:
                    for s in fs.list_dir(d, skip, level):
                        if s.is_dir:
                            n += 1
                            found.append(s.path)
                            continue
                        p = s.path
                        rel = p[cut:] if p.startswith(prefix) else fs.relative(side.root, p)
                        if rel:
                            emit((rel, s))
                    if not n and d != top:  # nothing in it (a walk from ``top`` does not report ``top``)
                        emit((d, "empty directory"))
                finally:
                    with lock:
                        busy -= 1
                        if tokens is not None and level:
                            tokens.update(level)
                        pending.extend(reversed(found))
                        lock.notify_all()
            if batch:
                put(batch)
            put(None)
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised on the consumer's thread
            halt.set()
            with lock:
                lock.notify_all()
            try:
                put(exc)
                put(None)
            except _Stop:
                pass

    threads = [threading.Thread(target=work, name=f"drt-list-{i}", daemon=True)
               for i in range(side.list_threads)]
    for t in threads:
        t.start()
    try:
        done = 0
        while done < len(threads):
            item = out.get()
            if item is None:
                done += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                for rel, x in item:
                    if isinstance(x, str):
                        if skipped is not None:
                            skipped(rel, x)
                    else:
                        yield rel, x
    finally:
        gone.set()
        halt.set()
        with lock:
            lock.notify_all()
        for t in threads:
            t.join()
    if dirs is not None and tokens:
        for p, token in tokens.items():
            dirs[fs.relative(side.root, p) if p != root else ""] = token


PROOF_ROUNDS = 3  # times the directories that changed during a listing are read again


def _under(rel: str, d: str) -> bool:
    return not d or rel == d or rel.startswith(d + "/")


def _relist(side: Side, d: str, files: Files, tokens: dict[str, Any],
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
                    ) -> tuple[Files, list[str]]:
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


def utf8_only(files: Files, skips: Skips) -> Files:
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
    return files_map((r, s) for r, s in files.items() if r not in drop)


def wanted_only(files: Files, f: Filters) -> Files:
    if not f.active:
        return files  # listings already pass over temporary names
    return files_map((r, s) for r, s in files.items() if f.wanted(r))


ODD = frozenset({"symlink", "dangling symlink", "not a regular file"})


@dataclass
class Found:
    """What the target's walk finds besides its files: temporary files of killed runs (removed
    after the listing: one walk, not two), empty directories (pruned with --delete) and entries
    that are not regular files (symlinks, FIFOs, ...: never followed, removed when in the way)."""

    tmp: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    odd: list[tuple[str, str]] = field(default_factory=list)


def target_listing(src: Side, tgt: Side, found: Found | None = None) -> Files:
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
