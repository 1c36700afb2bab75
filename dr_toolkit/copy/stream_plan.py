"""Streamed planning: the listing and reconcile modes in memory O(batch), not O(files) (issue 42).

The in-memory planner (:func:`~dr_toolkit.copy.plan.reconcile`,
:func:`~dr_toolkit.copy.plan.fast_forward`) holds the source listing, the target listing, the
base manifest and the plan as dictionaries: about 1.15 KiB a file. Here each input is a
:class:`SortedStream` — ``(rel, value)`` pairs in *tree order* (:func:`tree_key`: a path directly
followed by everything below it), sorted in runs of ``batch`` entries, each run spilled to a
temporary directory when the input is larger than one batch, and merged back with
:func:`heapq.merge` (an external sort) — and one merge pass over the streams decides every path,
calling :mod:`~dr_toolkit.copy.plan`'s per-entry rules (:func:`~dr_toolkit.copy.plan.reconcile_entry`,
:func:`~dr_toolkit.copy.plan.unchanged` and :func:`~dr_toolkit.copy.plan.forward_task`,
:func:`~dr_toolkit.copy.plan.target_kept`, :func:`~dr_toolkit.copy.plan.entry_break`,
:func:`~dr_toolkit.copy.plan.in_the_way`), never copies of them. The decisions come out as
batches of :class:`Decision` in tree order — except a path only the target (or base) holds: it
waits until the next path shows whether a path new on the source lies below it (a type change:
then it is a ``blocker``); in a real namespace (no file has entries below it) that is the very
next path, so the delay is bounded by the tree's depth.

What stays in memory: one batch per sorter while it reads its input, ``CHUNK`` entries per run
while merging (runs are merged ``FANIN`` at a time), one batch of decisions, and two stacks as
deep as the tree. :func:`to_plan` gathers the decisions into a :class:`~dr_toolkit.copy.plan.Plan`
(the oracle test compares that with the in-memory planner's, entry by entry); a consumer that
writes them to disk (:func:`write_manifest`) stays O(batch).

The copy run (:mod:`dr_toolkit.copy.planning`) decides through this module: the chain check,
every reconcile, a listing's fast-forward. Not covered here: the snapshot-diff fast-forward
(O(changes) rules over the base: :func:`~dr_toolkit.copy.plan.fast_forward`) and planning.py's
steps after the rules (``--preserve`` drift, the checksum confirmation of an HDFS source's kept
files, filtered-out target files in the way, odd entries), which still look files up in the
listings' dictionaries (planning.py's docstring says what is still O(files) and why).
"""

from __future__ import annotations

import gc
import gzip
import heapq
import io
import json
import os
import pickle
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import IO, TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from dr_toolkit.copy.manifest import CHUNK_ENTRIES, Entry
from dr_toolkit.copy.plan import (
    FileTask,
    Filters,
    Plan,
    Prover,
    entry_break,
    filters_of,
    forward_task,
    in_the_way,
    reconcile_entry,
    target_kept,
    unchanged,
)
from dr_toolkit.fs.base import FileStatus, FileSystem

if TYPE_CHECKING:
    from dr_toolkit.topology import CopyOptions

# Memory: a sorter holds up to BATCH entries (~450-600 bytes each as tuples), and a stream below
# one batch stays in memory while the next input is sorted: ~2 x BATCH entries at the peak of the
# sort phase; the merge holds CHUNK entries + READ_BUFFER bytes per run (runs = entries / BATCH
# per input, at most FANIN: 100,000,000 entries make 400 runs an input, one merge level).
BATCH = 250_000  # entries a sorter holds before it spills a sorted run
CHUNK = 512  # entries per pickled chunk of a run: what one run holds in memory while merged
FANIN = 512  # runs merged at once: more are first merged into longer runs (open files, buffers)
READ_BUFFER = 64 * 1024  # bytes buffered per run while merged
#: runs' chunks compressed (zlib level 1): a listing's run takes ~300 bytes an entry as pickled
#: tuples, so 100,000,000 entries would take ~60 GB of runs for two inputs uncompressed
COMPRESS = False

#: the basis of files a listing fast-forward keeps (counted, no samples: as plan.fast_forward)
SAME = "size, mtime and change token as recorded"

V = TypeVar("V")


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a pass allocates entries by the million (keys,
    tuples, decisions: none in a cycle, all freed by their reference counts): every young
    collection would otherwise walk the listings' objects again as they age (a 41,000-file re-run
    spent a fifth of its planning there)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def tree_key(rel: str) -> str:
    """The sort key of a relative path: ``/`` as NUL (no name holds one), so a path is followed
    directly by the paths below it ("a", "a/x", "a-b"; plain string order puts "a-b" between)."""
    return rel.replace("/", "\0")


def key_rel(key: str) -> str:
    return key.replace("\0", "/")


@dataclass(frozen=True)
class Codec(Generic[V]):
    """How a stream's values are written to its runs: as plain tuples (pickled fast)."""

    encode: Callable[[V], tuple[Any, ...]]
    decode: Callable[[tuple[Any, ...]], V]


def _status_tuple(s: FileStatus) -> tuple[Any, ...]:
    return s.path, s.size, s.mtime, s.is_dir, s.permission, s.version, s.block_size


_STATUS_FIELDS = tuple(f.name for f in fields(FileStatus))
_new = object.__new__
_set = object.__setattr__


def _status(t: tuple[Any, ...]) -> FileStatus:
    """``FileStatus(*t)`` at two thirds of its cost (a frozen dataclass's __init__ sets each field
    through object.__setattr__; here its __dict__ is set once)."""
    s = _new(FileStatus)
    _set(s, "__dict__", dict(zip(_STATUS_FIELDS, t, strict=True)))
    return s


def _entry(t: tuple[Any, ...]) -> Entry:
    return tuple.__new__(Entry, t)  # Entry._make without the classmethod call


STATUS: Codec[FileStatus] = Codec(_status_tuple, _status)
ENTRY: Codec[Entry] = Codec(tuple, _entry)


class SortedStream(Generic[V]):
    """``(tree key, value)`` pairs of one input in tree order, iterable as often as needed (one
    pass to prove the base manifest, one to plan). Keys must be unique (a listing, a manifest).
    Inputs longer than ``batch`` are sorted in runs spilled under ``workdir``, then merged."""

    @gc_paused()
    def __init__(self, items: Iterable[tuple[str, V]], codec: Codec[V], workdir: str, *, batch: int = BATCH,
                 name: str = "s", compress: bool | None = None) -> None:
        self.codec, self.workdir, self.name = codec, workdir, name
        self.compress = COMPRESS if compress is None else compress
        self.runs: list[str] = []
        self.mem: list[tuple[str, V]] = []  # the input when it holds at most one batch: never encoded
        self.count = 0
        self._made = 0
        enc = codec.encode
        buf: list[tuple[str, V]] = []
        for rel, v in items:
            buf.append((rel.replace("/", "\0"), v))
            if len(buf) >= batch:
                self.count += len(buf)
                buf.sort(key=_first)
                self._spill([(k, enc(v)) for k, v in buf])
                buf = []
                if len(self.runs) >= FANIN:
                    self._collapse()
        self.count += len(buf)
        buf.sort(key=_first)
        if self.runs and buf:
            self._spill([(k, enc(v)) for k, v in buf])
        else:
            self.mem = buf

    def _spill(self, items: Iterable[tuple[str, tuple[Any, ...]]]) -> None:
        self._made += 1
        path = os.path.join(self.workdir, f"{self.name}-{self._made:06d}.run")
        with open(path, "wb") as f:
            chunk: list[tuple[str, tuple[Any, ...]]] = []
            for it in items:
                chunk.append(it)
                if len(chunk) >= CHUNK:
                    _write_chunk(f, chunk, self.compress)
                    chunk = []
            if chunk:
                _write_chunk(f, chunk, self.compress)
        self.runs.append(path)

    def _collapse(self) -> None:
        """FANIN runs merged into one (an external merge of runs: fewer open files and buffers)."""
        runs, self.runs = self.runs, []
        self._spill(heapq.merge(*(_read_run(p, self.compress) for p in runs)))
        for p in runs:
            os.unlink(p)

    def __iter__(self) -> Iterator[tuple[str, V]]:
        if not self.runs:
            return iter(self.mem)
        return self._merged()

    def _merged(self) -> Iterator[tuple[str, V]]:
        dec = self.codec.decode
        for k, t in heapq.merge(*(_read_run(p, self.compress) for p in self.runs)):
            yield k, dec(t)


def _first(item: tuple[str, Any]) -> str:
    return item[0]


def _write_chunk(f: IO[bytes], chunk: list[tuple[str, tuple[Any, ...]]], compress: bool) -> None:
    """One chunk of a run: its length (4 bytes), then its pickle (zlib level 1 when ``compress``)."""
    data = pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)
    if compress:
        data = zlib.compress(data, 1)
    f.write(len(data).to_bytes(4, "little"))
    f.write(data)


def _read_run(path: str, compress: bool) -> Iterator[tuple[str, tuple[Any, ...]]]:
    with open(path, "rb", buffering=READ_BUFFER) as f:
        loads = pickle.loads
        while True:
            head = f.read(4)
            if not head:
                return
            data = f.read(int.from_bytes(head, "little"))
            yield from loads(zlib.decompress(data) if compress else data)


_A = TypeVar("_A")
_B = TypeVar("_B")


def align(a: Iterable[tuple[str, _A]], b: Iterable[tuple[str, _B]]
          ) -> Iterator[tuple[str, _A | None, _B | None]]:
    """Two streams in key order, side by side: ``(key, a's value or None, b's value or None)``."""
    ia, ib = iter(a), iter(b)
    na, nb = next(ia, None), next(ib, None)
    while na is not None and nb is not None:
        ka, kb = na[0], nb[0]
        if ka == kb:
            yield ka, na[1], nb[1]
            na, nb = next(ia, None), next(ib, None)
        elif ka < kb:
            yield ka, na[1], None
            na = next(ia, None)
        else:
            yield kb, None, nb[1]
            nb = next(ib, None)
    while na is not None:
        yield na[0], na[1], None
        na = next(ia, None)
    while nb is not None:
        yield nb[0], None, nb[1]
        nb = next(ib, None)


class Decision(NamedTuple):
    """One path decided. ``kind``: ``copy`` (``item`` a FileTask: copy or append), ``keep`` (``item``
    the manifest Entry; ``basis`` "=<proof>", :data:`SAME`, why it was kept unproven, or None for a
    target/base file the source lacks), ``delete``, ``blocker`` (a target path in the way of the
    source's tree, removed whatever ``--delete`` says). ``read``: source bytes were read."""

    rel: str
    kind: str
    item: FileTask | Entry | None = None
    basis: str | None = None
    read: bool = False


class _Ways:
    """:func:`~dr_toolkit.copy.plan.in_the_way` over a stream in tree order. ``new_files``: the
    paths new on the source that are ancestors of the current path; ``pending``: paths only the
    other side holds, ancestors of the current path, whose decision waits on whether a new path
    lies below them. Both are as deep as the tree."""

    def __init__(self, default: Callable[[str, Any], Decision]) -> None:
        self.default = default
        self.new_files: list[str] = []
        self.pending: list[tuple[str, Any]] = []

    def _leave(self, rel: str, out: list[Decision]) -> None:
        while self.new_files and not rel.startswith(self.new_files[-1] + "/"):
            self.new_files.pop()
        while self.pending and not rel.startswith(self.pending[-1][0] + "/"):
            p, v = self.pending.pop()  # nothing below it comes later: not in the way
            out.append(self.default(p, v))

    def new(self, rel: str, out: list[Decision]) -> None:
        self._leave(rel, out)
        if self.pending:
            dirs = set(_dirs(rel))
            for p, v in self.pending:
                out.append(Decision(p, "blocker") if in_the_way(p, (), dirs) else self.default(p, v))
            self.pending.clear()
        self.new_files.append(rel)

    def gone(self, rel: str, v: Any, out: list[Decision]) -> None:
        self._leave(rel, out)
        if in_the_way(rel, self.new_files, ()):
            out.append(Decision(rel, "blocker"))
        else:
            self.pending.append((rel, v))

    def both(self, rel: str, out: list[Decision]) -> None:
        self._leave(rel, out)

    def end(self, out: list[Decision]) -> None:
        while self.pending:
            p, v = self.pending.pop()
            out.append(self.default(p, v))
        self.new_files.clear()


def _dirs(rel: str) -> Iterator[str]:
    i = rel.rfind("/")
    while i > 0:
        yield rel[:i]
        i = rel.rfind("/", 0, i)


class Streamed:
    """One streamed plan: :meth:`batches` yields the decisions; ``files_total`` and
    ``bytes_total`` (the source's) are complete once they are all read."""

    def __init__(self, mode: str, reason: str, gen: Callable[[Streamed], Iterator[list[Decision]]]) -> None:
        self.mode, self.reason = mode, reason
        self.files_total = 0
        self.bytes_total = 0
        self._gen = gen

    def batches(self) -> Iterator[list[Decision]]:
        return self._gen(self)

    def __iter__(self) -> Iterator[Decision]:
        for b in self.batches():
            yield from b


def _count(run: Streamed, s: FileStatus) -> None:
    run.files_total += 1
    run.bytes_total += s.size


def stream_reconcile(src_fs: FileSystem, src_root: str, src: SortedStream[FileStatus], tgt_fs: FileSystem,
                     tgt_root: str, tgt: SortedStream[FileStatus], options: CopyOptions, *, mode: str, reason: str,
                     recorded: SortedStream[Entry] | None = None, batch: int = BATCH) -> Streamed:
    """:func:`~dr_toolkit.copy.plan.reconcile` streamed: each source file decided by
    :func:`~dr_toolkit.copy.plan.reconcile_entry` against the target's file at its path (those
    both sides hold on ``options.workers`` threads, one batch at a time), with the base entry at
    its path as the recorded state its proof may use."""
    f = filters_of(options)
    content = options.proof == "content"
    quick = Prover(src_fs, src_root, tgt_fs, tgt_root, None, content=content)  # asked nothing: no comparison

    def default(rel: str, t: FileStatus) -> Decision:
        return Decision(rel, "delete") if options.delete else Decision(rel, "keep", target_kept(t))

    def gen(run: Streamed) -> Iterator[list[Decision]]:
        ways = _Ways(default)
        pairs: Iterable[tuple[str, FileStatus | None, FileStatus | None]] = align(src, tgt)
        rec: Iterable[tuple[str, Entry]] = recorded if recorded is not None else ()
        with ThreadPoolExecutor(max(1, options.workers)) as pool:
            out: list[Decision | None] = []
            slow: list[tuple[int, str, FileStatus, FileStatus, Entry | None]] = []

            def decide(job: tuple[int, str, FileStatus, FileStatus, Entry | None]) -> Decision:
                _i, rel, s, t, e = job
                prover = Prover(src_fs, src_root, tgt_fs, tgt_root, {rel: e} if e is not None else None,
                                content=content)
                _rel, got, basis, read = reconcile_entry(rel, s, t, options, f, prover, tgt_fs, tgt_root)
                return Decision(rel, "copy" if isinstance(got, FileTask) else "keep", got, basis, read)

            def flush() -> list[Decision]:
                for job, d in zip(slow, pool.map(decide, slow), strict=True):
                    out[job[0]] = d
                slow.clear()
                done = [d for d in out if d is not None]
                out.clear()
                return done

            for key, pair, e in align(pairs_keyed(pairs), rec):
                if pair is None:
                    continue  # a recorded entry neither side holds
                s, t = pair
                rel = key_rel(key)
                tail: list[Decision] = []
                if s is None:
                    ways.gone(rel, t, tail)
                    out.extend(tail)
                else:
                    _count(run, s)
                    if t is None:
                        ways.new(rel, tail)
                    else:
                        ways.both(rel, tail)
                    out.extend(tail)
                    if t is None or options.overwrite:  # no comparison: decided here, as reconcile's "quick"
                        _r, got, basis, read = reconcile_entry(rel, s, t, options, f, quick, tgt_fs, tgt_root)
                        out.append(Decision(rel, "copy" if isinstance(got, FileTask) else "keep", got, basis,
                                            read))
                    else:
                        slow.append((len(out), rel, s, t, e))
                        out.append(None)
                if len(out) >= batch:
                    yield flush()
            end: list[Decision] = []
            ways.end(end)
            out.extend(end)
            if out:
                yield flush()

    return Streamed(mode, reason, gen)


def pairs_keyed(pairs: Iterable[tuple[str, _A | None, _B | None]]
                ) -> Iterator[tuple[str, tuple[_A | None, _B | None]]]:
    for k, a, b in pairs:
        yield k, (a, b)


def stream_fast_forward(src: SortedStream[FileStatus], base: SortedStream[Entry], options: CopyOptions, *,
                        reason: str, batch: int = BATCH) -> Streamed:
    """:func:`~dr_toolkit.copy.plan.fast_forward` of a listing (no snapshot diff: no moves, no
    ``changed``) streamed: a source file is kept when :func:`~dr_toolkit.copy.plan.unchanged`
    proves it the base's, else :func:`~dr_toolkit.copy.plan.forward_task` copies (or appends) it."""
    f: Filters = filters_of(options)

    def default(rel: str, e: Entry) -> Decision:
        return Decision(rel, "delete") if options.delete else Decision(rel, "keep", e)

    def gen(run: Streamed) -> Iterator[list[Decision]]:
        ways = _Ways(default)
        out: list[Decision] = []
        for key, s, e in align(src, base):
            rel = key_rel(key)
            if s is None:
                ways.gone(rel, e, out)
            else:
                run.files_total += 1
                run.bytes_total += s.size
                if e is None:
                    ways.new(rel, out)
                    out.append(Decision(rel, "copy", forward_task(rel, s, None, f)))
                else:
                    if ways.new_files or ways.pending:  # (nothing to leave: no call)
                        ways.both(rel, out)
                    if unchanged(e, s):
                        out.append(Decision(rel, "keep", e, SAME))
                    else:
                        out.append(Decision(rel, "copy", forward_task(rel, s, e, f)))
            if len(out) >= batch:
                yield out
                out = []
        ways.end(out)
        if out:
            yield out

    return Streamed("fast-forward", reason, gen)


@gc_paused()
def stream_chain_break(base: Iterable[tuple[str, Entry]], tgt: Iterable[tuple[str, FileStatus]],
                       wanted: Callable[[str], bool]) -> str | None:
    """:func:`~dr_toolkit.copy.plan.chain_break` over the streams: the first break in tree order
    (:func:`~dr_toolkit.copy.plan.entry_break`), else the first target file the base lacks."""
    extra: str | None = None
    for key, e, t in align(base, tgt):
        if e is not None:
            why = entry_break(key_rel(key), e, t)
            if why:
                return why
        elif extra is None:
            rel = key_rel(key)
            if wanted(rel):
                extra = f"target changed: {rel} is not in the last manifest"
    return extra


@gc_paused()
def to_plan(run: Streamed) -> Plan:
    """The decisions gathered into a :class:`~dr_toolkit.copy.plan.Plan` (O(files): for the
    consumers that still take one, and for the oracle test)."""
    plan = Plan(run.mode, run.reason)
    same = 0
    for batch in run.batches():
        for d in batch:
            if d.kind == "copy":
                plan.record(d.rel, d.item, d.basis, d.read)  # type: ignore[arg-type]
            elif d.kind == "keep":
                if d.basis == SAME:
                    plan.keep[d.rel] = d.item  # type: ignore[assignment]
                    same += 1
                elif d.basis is None:
                    plan.keep[d.rel] = d.item  # type: ignore[assignment]
                else:
                    plan.record(d.rel, d.item, d.basis, d.read)  # type: ignore[arg-type]
            elif d.kind == "delete":
                plan.deletes.append(d.rel)
            elif d.kind == "blocker":
                plan.blockers.append(d.rel)
    if same:
        plan.basis[SAME] = same
    plan.blockers.sort()
    plan.files_total, plan.bytes_total = run.files_total, run.bytes_total
    return plan


class Workdir:
    """A temporary directory for the sorted runs, removed on exit."""

    def __init__(self, parent: str | None = None) -> None:
        self.path = tempfile.mkdtemp(prefix="drt-plan-", dir=parent)

    def __enter__(self) -> str:
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


# --- manifests as streams (the format of dr_toolkit.copy.manifest; to move there) ----------------------


def write_manifest(out: IO[bytes], header: dict[str, Any], entries: Iterable[tuple[str, Entry]]) -> int:
    """A manifest written as its entries come (``manifest.encode``'s format, CHUNK_ENTRIES to a
    line); returns the number of entries."""
    n = 0
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as gz:
        w = io.BufferedWriter(gz, buffer_size=1 << 20)
        w.write((json.dumps({"header": header}) + "\n").encode())
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        rows: list[tuple[Any, ...]] = []
        for p, e in entries:
            rows.append((p, *e))
            if len(rows) >= CHUNK_ENTRIES:
                w.write(dumps(rows).encode() + b"\n")
                n += len(rows)
                rows = []
        if rows:
            w.write(dumps(rows).encode() + b"\n")
            n += len(rows)
        w.flush()
    return n


def read_manifest(f: IO[bytes]) -> Iterator[tuple[str, Entry]]:
    """A manifest's entries one at a time (``manifest.decode``'s rows, without the dictionary)."""
    make = Entry._make
    with gzip.GzipFile(fileobj=f) as gz:
        for line in io.BufferedReader(gz, buffer_size=1 << 20):
            d = json.loads(line)
            if isinstance(d, list):
                for r in d:
                    yield r[0], (make(r[1:]) if len(r) == 10 else Entry(*r[1:]))
            elif "header" not in d:
                yield d["p"], Entry(d["s"], d["m"], d.get("c"), d.get("tm"), d.get("v"), d.get("sc"), d.get("tv"),
                                    bool(d.get("o")))
