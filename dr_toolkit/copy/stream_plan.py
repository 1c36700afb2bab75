"""Streamed planning: the listing and reconcile modes in memory O(batch), not O(files) (issue 42).

The in-memory planner (:func:`~dr_toolkit.copy.plan.reconcile`,
:func:`~dr_toolkit.copy.plan.fast_forward`) holds the source listing, the target listing, the
base manifest and the plan as dictionaries: about 1.15 KiB a file. Here each input is a
:class:`SortedStream` — ``(rel, value)`` pairs in *tree order* (:func:`tree_key`: a path directly
followed by everything below it), sorted in runs of ``batch`` entries, each run spilled to a
temporary directory when the input is larger than one batch, and merged back with
:func:`merge_blocks` (an external sort) — and one merge pass over the streams decides every path,
calling :mod:`~dr_toolkit.copy.plan`'s per-entry rules (:func:`~dr_toolkit.copy.plan.reconcile_entry`,
:func:`~dr_toolkit.copy.plan.unchanged` and :func:`~dr_toolkit.copy.plan.forward_task`,
:func:`~dr_toolkit.copy.plan.target_kept`, :func:`~dr_toolkit.copy.plan.entry_break`,
:func:`~dr_toolkit.copy.plan.in_the_way`), never copies of them. The decisions come out as
batches of :class:`Decision` in tree order — except a path only the target (or base) holds: it
waits until the next path shows whether a path new on the source lies below it (a type change:
then it is a ``blocker``); in a real namespace (no file has entries below it) that is the very
next path, so the delay is bounded by the tree's depth.

Speed (figures in benchmarks/README.md): a run is written in chunks of ``CHUNK`` entries stored in columns (the
keys, then the values' fields in one flat list: :class:`Codec`) and marshalled, so encoding and
decoding are C loops; the merge takes every run's entries up to the smallest last key in hand and
sorts them with one ``list.sort`` (:func:`merge_blocks`) instead of a heap operation an entry; a
spilled listing comes back as :class:`Listed` tuples (FileStatus's fields by name) rather than
frozen dataclasses; the passes pause the cyclic garbage collector (:func:`gc_paused`); the
manifest written compresses on a thread of its own; and :func:`sorted_in_process` sorts one input
(the benchmark's base manifest) in a forked process on the other core.

Disk: each chunk of a spilled run is zlib-compressed at level 1 (:data:`COMPRESS`: ~6x smaller — a
listing's entry ~15 bytes, a manifest's ~27 — for ~1.3 µs of CPU an entry of both), and each run
keeps an index of its chunks' first keys and offsets.

Split by key range (issue 42): :func:`split_ranges` cuts the key space between top-level names
(:func:`top_cut`: no subtree crosses such a cut, so each range's stacks start empty and every
type change, blocker and pending path lies inside one range), about equal in entries by the runs'
chunk index; :meth:`SortedStream.part` reads one range of every run from the chunk where it
starts; each range is planned by the same pass, on its own (:func:`in_processes`: one forked
process a range, for a caller with no other threads — the benchmark; :func:`joined` chains the
ranges' decisions and adds their counts), and writes its part of the manifest (gzip members
concatenate: :func:`write_manifest` with no header). A namespace under a single top-level
directory is one range: no speed-up, the same decisions (a cut below the top would first need the
cut's ancestors looked up: not built).

What stays in memory: one batch per sorter while it reads its input, ``CHUNK`` entries per run
while merging (runs are merged ``FANIN`` at a time) and one merged block, one batch of decisions,
and two stacks as deep as the tree. :func:`to_plan` gathers the decisions into a :class:`~dr_toolkit.copy.plan.Plan`
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
import io
import json
import marshal
import os
import shutil
import tempfile
import zlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import chain, islice
from operator import attrgetter, itemgetter
from typing import IO, TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

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

# Memory: a sorter holds up to BATCH entries (~450-600 bytes each), and a stream below one batch
# stays in memory while the next input is sorted: ~2 x BATCH entries at the peak of the sort
# phase; the merge holds one chunk per run (CHUNK entries, decoded) and one merged block (at most
# a chunk per run): runs = entries / BATCH per input, at most FANIN (100,000,000 entries make 200
# runs an input, one merge level: ~2 x 400 x CHUNK entries in memory while merging).
BATCH = 500_000  # entries a sorter holds before it spills a sorted run
CHUNK = 2048  # entries per marshalled chunk of a run: what one run holds in memory while merged
TOP_UP_RUNS = 16  # merge_blocks tops every run up to a chunk in hand past this many runs
FANIN = 512  # runs merged at once: more are first merged into longer runs (open files, buffers)
READ_BUFFER = 64 * 1024  # bytes buffered per run while merged
#: runs' chunks compressed (zlib level 1): a listing's entry takes ~100 bytes marshalled, a manifest's ~150
#: (100,000,000 of each: ~24 GiB of runs); compressed ~15 and ~27 (~4 GiB), for ~1.3 µs of CPU an entry of both
COMPRESS = True

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
    """How a stream's values are written to its runs and read back: each value as ``width``
    plain fields (``fields``: a value's fields in order; None when the value is a tuple of them
    already), ``make`` the value again from them. A chunk is stored in columns — its keys, then
    every value's fields in one flat list — so both ways are C loops (map, chain, zip), no
    Python frame an entry."""

    width: int
    fields: Callable[[V], Iterable[Any]] | None
    make: Callable[[tuple[Any, ...]], V]


class Listed(NamedTuple):
    """A listed file's status as read back from a run: :class:`~dr_toolkit.fs.base.FileStatus`'s
    fields by name and in order — all the per-entry rules read — made by one C call (a frozen
    dataclass costs ~2.7 µs an entry to build: 2.9 s of a 1,000,000-entry plan)."""

    path: str
    size: int
    mtime: float
    is_dir: bool = False
    permission: str | None = None
    version: str | None = None
    block_size: int | None = None


_STATUS_FIELDS = Listed._fields
_new_tuple = tuple.__new__

STATUS: Codec[FileStatus] = Codec(len(_STATUS_FIELDS), attrgetter(*_STATUS_FIELDS),
                                  cast(Callable[[tuple[Any, ...]], FileStatus], partial(_new_tuple, Listed)))
ENTRY: Codec[Entry] = Codec(len(Entry._fields), None, partial(_new_tuple, Entry))
_key = itemgetter(0)
_value = itemgetter(1)


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
        #: per run, its chunks' first keys, their offsets in the file (where a key range starts: :meth:`part`)
        #: and their last keys (with the first keys: where the entries lie, :func:`split_ranges`)
        self.index: dict[str, tuple[list[str], list[int], list[str]]] = {}
        self.mem: list[tuple[str, V]] = []  # the input when it holds at most one batch: never encoded
        self.count = 0
        self._made = 0
        it = iter(items)
        while True:
            buf = [(rel.replace("/", "\0"), v) for rel, v in islice(it, batch)]
            self.count += len(buf)
            buf.sort(key=_key)
            if len(buf) < batch and not self.runs:
                self.mem = buf
                return
            if buf:
                self._spill([buf])
                if len(self.runs) >= FANIN:
                    self._collapse()
            if len(buf) < batch:
                return

    def _spill(self, blocks: Iterable[list[tuple[str, V]]]) -> None:
        """Sorted blocks of entries written as one run, CHUNK entries a chunk."""
        self._made += 1
        path = os.path.join(self.workdir, f"{self.name}-{self._made:06d}.run")
        firsts: list[str] = []
        offsets: list[int] = []
        lasts: list[str] = []
        at = 0
        with open(path, "wb") as f:
            rest: list[tuple[str, V]] = []
            for block in blocks:
                if rest:
                    block = rest + block
                n = len(block) - len(block) % CHUNK
                for i in range(0, n, CHUNK):
                    firsts.append(block[i][0])
                    lasts.append(block[i + CHUNK - 1][0])
                    offsets.append(at)
                    at += _write_chunk(f, block[i:i + CHUNK], self.codec, self.compress)
                rest = block[n:]
            if rest:
                firsts.append(rest[0][0])
                lasts.append(rest[-1][0])
                offsets.append(at)
                _write_chunk(f, rest, self.codec, self.compress)
        self.runs.append(path)
        self.index[path] = (firsts, offsets, lasts)

    def adopt(self, runs: list[str], count: int, index: dict[str, tuple[list[str], list[int], list[str]]]) -> None:
        """Runs another process sorted and spilled for this stream (see :func:`sorted_in_process`)."""
        self.runs, self.count, self.mem, self.index = runs, count, [], index

    def _collapse(self) -> None:
        """FANIN runs merged into one (an external merge of runs: fewer open files and buffers)."""
        runs, self.runs = self.runs, []
        self._spill(merge_blocks([_read_run(p, self.codec, self.compress) for p in runs]))
        for p in runs:
            os.unlink(p)
            del self.index[p]

    def part(self, lo: str | None, hi: str | None) -> Part[V]:
        """The pairs with ``lo <= key < hi`` (None: no bound), read from every run from the chunk
        where ``lo`` falls (the runs' index) up to the first chunk past ``hi``: what one worker of a
        split merge reads (:func:`split_ranges`)."""
        return Part(self, lo, hi)

    def sample(self) -> list[str]:
        """Where the entries lie: every chunk's first and last key (each chunk weighs the same), or
        every CHUNK-th key of a stream in memory."""
        if not self.runs:
            return [k for k, _ in self.mem[::CHUNK]]
        return [k for p in self.runs for k in chain(self.index[p][0], self.index[p][2])]

    def blocks(self) -> Iterator[list[tuple[str, V]]]:
        """The pairs in tree order, a sorted block at a time."""
        if not self.runs:
            yield self.mem
            return
        yield from merge_blocks([_read_run(p, self.codec, self.compress) for p in self.runs])

    def __iter__(self) -> Iterator[tuple[str, V]]:
        if not self.runs:
            return iter(self.mem)
        return chain.from_iterable(self.blocks())


class Part(Generic[V]):
    """A key range of a :class:`SortedStream` (:meth:`SortedStream.part`), iterable as often as needed."""

    def __init__(self, stream: SortedStream[V], lo: str | None, hi: str | None) -> None:
        self.stream, self.lo, self.hi = stream, lo, hi

    def blocks(self) -> Iterator[list[tuple[str, V]]]:
        s, lo, hi = self.stream, self.lo, self.hi
        if not s.runs:
            i = 0 if lo is None else bisect_left(s.mem, lo, key=_key)
            j = len(s.mem) if hi is None else bisect_left(s.mem, hi, key=_key)
            if j > i:
                yield s.mem[i:j]
            return
        yield from merge_blocks([_read_range(p, s.codec, s.compress, s.index[p], lo, hi) for p in s.runs])

    def __iter__(self) -> Iterator[tuple[str, V]]:
        return chain.from_iterable(self.blocks())


def top_cut(key: str) -> str:
    """The top-level name a key lies under: a cut there splits no subtree. Any key without NUL is
    such a cut: every key below it is under a top-level name that sorts below it (a path and all
    below it sort together), every key from it on under one that does not."""
    return key.split("\0", 1)[0]


def split_ranges(streams: Iterable[SortedStream[Any]], parts: int) -> list[tuple[str | None, str | None]]:
    """Key ranges ``[lo, hi)`` that together cover every key once, about equal in entries (by the
    runs' chunk index), cut only between top-level names (:func:`top_cut`): every path's
    ancestors fall in its range, so each range is planned alone with empty stacks (its type
    changes, blockers and pending paths all inside it). A namespace under fewer top-level names
    than ``parts`` gives fewer ranges — one directory at the top: one range, planned whole."""
    keys = sorted(k for s in streams for k in s.sample())
    cuts: list[str] = []
    if keys and parts > 1:
        low = top_cut(keys[0])
        for i in range(1, parts):
            c = top_cut(keys[len(keys) * i // parts])
            if c > low and (not cuts or c > cuts[-1]):
                cuts.append(c)
    bounds: list[str | None] = [None, *cuts, None]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


T = TypeVar("T")


def in_processes(fn: Callable[[int], T], n: int) -> list[T]:
    """``fn(0) ... fn(n - 1)``: ``fn(0)`` here, each other one in a forked process of its own (on
    another core), its result sent back pickled. For a process with no other threads (a fork
    copies only the calling thread) — the benchmark's split merge; the copy run does not fork."""
    if n <= 1:
        return [fn(0)] if n == 1 else []
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = []
    for i in range(1, n):
        recv, send = ctx.Pipe(duplex=False)

        def child(i: int = i, send: Any = send) -> None:
            send.send(fn(i))

        proc = ctx.Process(target=child, name=f"part-{i}")
        proc.start()
        send.close()
        procs.append((proc, recv))
    out = [fn(0)]
    for i, (proc, recv) in enumerate(procs, 1):
        try:
            got = recv.recv()
        except EOFError:
            got = None
        proc.join()
        if got is None or proc.exitcode:
            raise OSError(f"part {i} of the split merge failed in its process (exit code {proc.exitcode})")
        out.append(got)
    return out


def sorted_in_process(make: Callable[[], Iterable[tuple[str, V]]], codec: Codec[V], workdir: str, *,
                      batch: int = BATCH, name: str = "s") -> Callable[[], SortedStream[V]]:
    """A :class:`SortedStream` built in a forked process (its input read, sorted and spilled
    there, on the other core) while this one does something else; the function returned waits
    for it and gives the stream, read from the runs it left under ``workdir``. For a process
    with no other threads (a fork copies only the calling thread: a lock another one holds would
    stay held in the child) — the benchmark's manifest read; the copy run does not fork."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child() -> None:
        s = SortedStream(make(), codec, workdir, batch=batch, name=name)
        if s.mem:
            s._spill([s.mem])
        send.send((s.runs, s.count, s.index))

    proc = ctx.Process(target=child, name=f"sort-{name}")
    proc.start()
    send.close()

    def result() -> SortedStream[V]:
        try:
            runs, count, index = recv.recv()
        except EOFError:
            runs = None
        proc.join()
        if runs is None or proc.exitcode:
            raise OSError(f"sorting {name} in a process of its own failed (exit code {proc.exitcode})")
        s: SortedStream[V] = SortedStream((), codec, workdir, batch=batch, name=name)
        s.adopt(runs, count, index)
        return s

    return result


def merge_blocks(runs: list[Iterator[list[tuple[str, Any]]]]) -> Iterator[list[tuple[str, Any]]]:
    """Sorted runs, each read a chunk at a time, merged into sorted blocks. Each round takes from
    every run its entries up to the smallest of the last keys in hand (all smaller keys of every
    run are then in hand: the block is complete up to there) and one ``list.sort`` puts them in
    order — Timsort merges the sorted pieces in C — instead of one heap operation an entry in
    Python (:func:`heapq.merge`: 1.8 µs an entry). With many runs (more than :data:`TOP_UP_RUNS`)
    every run is topped up to a chunk in hand before each round, so a round takes about a chunk
    from every run (one refilled only when empty would leave the others a sliver each: rounds of
    about one chunk in all, each costing a pass over every run and a sort of slivers)."""
    want = CHUNK if len(runs) > TOP_UP_RUNS else 1
    heads: list[list[Any]] = [[[], 0, r] for r in runs]  # [entries in hand, position, iterator or None: all in hand]
    while True:
        live = []
        for h in heads:
            c, pos, r = h
            n = len(c) - pos
            if r is not None and n < want:
                got = [c[pos:]] if n else []
                while n < want:
                    nxt = next(r, None)
                    if nxt is None:
                        r = None
                        break
                    got.append(nxt)
                    n += len(nxt)
                h[0], h[1], h[2] = got[0] if len(got) == 1 else list(chain.from_iterable(got)), 0, r
            if n:
                live.append(h)
        heads = live
        if len(heads) <= 1:
            break
        bound = min([h[0][-1][0] for h in heads if h[2] is not None], default=None)
        out: list[tuple[str, Any]] = []
        for h in heads:
            c, pos, _r = h
            if bound is None or c[-1][0] <= bound:
                out += c[pos:] if pos else c
                h[1] = len(c)
            else:
                j = bisect_right(c, bound, pos, key=_key)
                if j > pos:
                    out += c[pos:j]
                    h[1] = j
        out.sort(key=_key)
        yield out
    if heads:
        c, pos, r = heads[0]
        yield c[pos:] if pos else c
        if r is not None:
            yield from r


def _write_chunk(f: IO[bytes], chunk: list[tuple[str, V]], codec: Codec[V], compress: bool) -> int:
    """One chunk of a run: its length (4 bytes), then the marshal (version 2: no references to
    track, the fastest here) of its keys and its values' fields in one flat list (zlib level 1
    when ``compress``)."""
    values = map(_value, chunk)
    flat = list(chain.from_iterable(values if codec.fields is None else map(codec.fields, values)))
    data = marshal.dumps((list(map(_key, chunk)), flat), 2)
    if compress:
        data = zlib.compress(data, 1)
    f.write(len(data).to_bytes(4, "little"))
    f.write(data)
    return 4 + len(data)


def _read_run(path: str, codec: Codec[V], compress: bool) -> Iterator[list[tuple[str, V]]]:
    """A run's chunks, one list of ``(key, value)`` at a time (the files are this process's own:
    marshal, not an exchange format)."""
    make, width = codec.make, codec.width
    with open(path, "rb", buffering=READ_BUFFER) as f:
        loads = marshal.loads
        while True:
            head = f.read(4)
            if not head:
                return
            data = f.read(int.from_bytes(head, "little"))
            keys, flat = loads(zlib.decompress(data) if compress else data)
            it = iter(flat)
            yield list(zip(keys, map(make, zip(*[it] * width, strict=True)), strict=True))


def _read_range(path: str, codec: Codec[V], compress: bool, index: tuple[list[str], list[int], list[str]], lo: str | None,
                hi: str | None) -> Iterator[list[tuple[str, V]]]:
    """A run's chunks holding keys in ``[lo, hi)``, cut to them (never an empty chunk: that would
    end the run in :func:`merge_blocks`)."""
    firsts, offsets, _lasts = index
    start = 0 if lo is None else max(0, bisect_right(firsts, lo) - 1)
    stop = len(firsts) if hi is None else bisect_left(firsts, hi)
    if start >= stop:
        return
    make, width = codec.make, codec.width
    with open(path, "rb", buffering=READ_BUFFER) as f:
        f.seek(offsets[start])
        loads = marshal.loads
        for _ in range(stop - start):
            head = f.read(4)
            data = f.read(int.from_bytes(head, "little"))
            keys, flat = loads(zlib.decompress(data) if compress else data)
            it = iter(flat)
            c = list(zip(keys, map(make, zip(*[it] * width, strict=True)), strict=True))
            i = bisect_left(keys, lo) if lo is not None and keys[0] < lo else 0
            j = bisect_left(keys, hi) if hi is not None and keys[-1] >= hi else len(keys)
            if i or j < len(keys):
                c = c[i:j]
            if c:
                yield c


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


def joined(runs: list[Streamed]) -> Streamed:
    """The plans of consecutive key ranges (:func:`split_ranges`) as one: their decisions in order,
    their counts added."""

    def gen(run: Streamed) -> Iterator[list[Decision]]:
        for r in runs:
            yield from r.batches()
        run.files_total = sum(r.files_total for r in runs)
        run.bytes_total = sum(r.bytes_total for r in runs)

    return Streamed(runs[0].mode, runs[0].reason, gen)


def _count(run: Streamed, s: FileStatus) -> None:
    run.files_total += 1
    run.bytes_total += s.size


def stream_reconcile(src_fs: FileSystem, src_root: str, src: Iterable[tuple[str, FileStatus]], tgt_fs: FileSystem,
                     tgt_root: str, tgt: Iterable[tuple[str, FileStatus]], options: CopyOptions, *, mode: str,
                     reason: str, recorded: Iterable[tuple[str, Entry]] | None = None, batch: int = BATCH) -> Streamed:
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


def stream_fast_forward(src: Iterable[tuple[str, FileStatus]], base: Iterable[tuple[str, Entry]],
                        options: CopyOptions, *,
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
        add = out.append
        files = size = 0
        new = tuple.__new__  # a Decision without its Python-level __new__: ~1,000,000 a plan
        ia, ib = iter(src), iter(base)
        na, nb = next(ia, None), next(ib, None)
        s: FileStatus | None
        e: Entry | None
        while True:  # align(src, base), inlined: one generator frame less an entry
            if na is None:
                if nb is None:
                    break
                key, e = nb
                s, nb = None, next(ib, None)
            elif nb is None or na[0] < nb[0]:
                key, s = na
                e, na = None, next(ia, None)
            elif na[0] == nb[0]:
                key, s = na
                e, na, nb = nb[1], next(ia, None), next(ib, None)
            else:
                key, e = nb
                s, nb = None, next(ib, None)
            rel = key.replace("\0", "/")
            if s is None:
                ways.gone(rel, e, out)
            else:
                files += 1
                size += s.size
                if e is None:
                    ways.new(rel, out)
                    add(new(Decision, (rel, "copy", forward_task(rel, s, None, f), None, False)))
                else:
                    if ways.new_files or ways.pending:  # (nothing to leave: no call)
                        ways.both(rel, out)
                    if unchanged(e, s):
                        add(new(Decision, (rel, "keep", e, SAME, False)))
                    else:
                        add(new(Decision, (rel, "copy", forward_task(rel, s, e, f), None, False)))
            if len(out) >= batch:
                run.files_total, run.bytes_total = files, size
                yield out
                out = []
                add = out.append
        ways.end(out)
        run.files_total, run.bytes_total = files, size
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
    """The decisions gathered into a :class:`~dr_toolkit.copy.plan.Plan` (its ``keep`` a
    :class:`~dr_toolkit.copy.spill.SpillMap`, on disk past a batch; the copies, deletions and
    blockers O(changes)): what the copy and commit stages take, and the oracle test's."""
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


@gc_paused()
def write_manifest(out: IO[bytes], header: dict[str, Any] | None, entries: Iterable[tuple[str, Entry]]) -> int:
    """A manifest written as its entries come (``manifest.encode``'s format, CHUNK_ENTRIES to a
    line); returns the number of entries. ``header`` None: no header line — a later part of a
    manifest written by parts (gzip members concatenated are one gzip stream: the parts of a split
    merge, the first with the header, appended in key order make the manifest). The compression runs on a thread of its own (zlib
    lets go of the interpreter lock): it overlaps the encoding of the next lines (and whatever
    produces the entries) on a second core."""
    n = 0
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1, mtime=0) as gz, ThreadPoolExecutor(1) as writer:
        pending: list[Future[int]] = []
        buf: list[bytes] = [] if header is None else [(json.dumps({"header": header}) + "\n").encode()]
        size = 0

        def put(data: bytes) -> None:
            nonlocal buf, size
            buf.append(data)
            size += len(data)
            if size >= 1 << 20:
                while len(pending) >= 2:
                    pending.pop(0).result()
                pending.append(writer.submit(gz.write, b"".join(buf)))
                buf, size = [], 0

        dumps = json.JSONEncoder(separators=(",", ":")).encode
        rows: list[tuple[Any, ...]] = []
        add = rows.append
        for p, e in entries:
            add((p, *e))
            if len(rows) >= CHUNK_ENTRIES:
                put(dumps(rows).encode() + b"\n")
                n += len(rows)
                rows = []
                add = rows.append
        if rows:
            put(dumps(rows).encode() + b"\n")
            n += len(rows)
        for fut in pending:
            fut.result()
        if buf:
            gz.write(b"".join(buf))
    return n


def read_manifest(f: IO[bytes]) -> Iterator[tuple[str, Entry]]:
    """A manifest's entries one at a time (``manifest.decode``'s rows, without the dictionary)."""
    new = tuple.__new__  # Entry._make without its Python frame
    with gzip.GzipFile(fileobj=f) as gz:
        for line in io.BufferedReader(gz, buffer_size=1 << 20):
            d = json.loads(line)
            if isinstance(d, list):
                yield from [(r[0], new(Entry, r[1:]) if len(r) == 10 else Entry(*r[1:])) for r in d]
            elif "header" not in d:
                yield d["p"], Entry(d["s"], d["m"], d.get("c"), d.get("tm"), d.get("v"), d.get("sc"), d.get("tv"),
                                    bool(d.get("o")))
