"""Execution: one per-file copy function shared by the two engines.

:func:`copy_one` streams a file (bounded memory: one chunk in flight) to a temporary name on
the target, verifies length and checksum, renames it into place, and detects a source that
changed while it was being read (re-copied, then reported as failed). ``append`` tasks check
that the target is a verified prefix of the source and send only the tail.

Engines: :func:`run_local` (a thread pool) here, and :func:`dr_toolkit.copy.spark_engine.run_spark` (``mapPartitions`` over
groups of files balanced by bytes and by file count, like DistCp's dynamic strategy).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.plan import FileTask
from dr_toolkit.errors import DrtError
from dr_toolkit.fs.base import CHUNK, CONTENT_ALGO, ContentHash, FileStatus, FileSystem, tmp_name

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)
ATTEMPTS = 3
PER_FILE_COST = 256 << 10  # bytes a file "costs" beyond its size when balancing groups


class SourceChanged(Exception):
    """The source file moved (size, mtime or content) while it was being copied."""


class Throttle:
    """A token bucket shared by the workers of one process (bytes per second)."""

    def __init__(self, bytes_per_s: float | None) -> None:
        self.rate = bytes_per_s
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.sent = 0

    def take(self, n: int) -> None:
        if not self.rate:
            return
        now = time.monotonic()
        with self.lock:
            idle_credit = now - (self.t0 + self.sent / self.rate)
            if idle_credit > 1.0:  # a bucket of one second: idle time does not buy an unlimited burst
                self.t0 += idle_credit - 1.0
            self.sent += n
            due = self.t0 + self.sent / self.rate
        delay = due - now
        if delay > 0:
            time.sleep(delay)


@dataclass
class CopyContext:
    src_fs: FileSystem
    tgt_fs: FileSystem
    src_root: str  # where the source is read (a snapshot path when copying from a snapshot)
    tgt_root: str
    run_id: str
    preserve: tuple[str, ...] = ()
    throttle: Throttle = field(default_factory=lambda: Throttle(None))
    on_bytes: Callable[[int], None] | None = None
    stable_source: bool = False  # a snapshot: cannot change under us


@dataclass
class Outcome:
    rel: str
    ok: bool
    bytes: int = 0
    size: int = 0
    mtime: float = 0.0
    checksum: str | None = None
    tmtime: float | None = None
    action: str = "copy"
    attempts: int = 0
    changed: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stream(ctx: CopyContext, chunks: Iterator[bytes], crc: Any, counter: list[int]) -> Iterator[bytes]:
    for c in chunks:
        crc.update(c)
        counter[0] += len(c)
        ctx.throttle.take(len(c))
        if ctx.on_bytes:
            ctx.on_bytes(len(c))
        yield c


def _finish(ctx: CopyContext, task: FileTask, path: str) -> float | None:
    tgt = ctx.tgt_fs
    if "permissions" in ctx.preserve and task.permission and tgt.supports_permissions:
        tgt.set_permission(path, task.permission)
    if "times" in ctx.preserve and tgt.supports_times:
        tgt.set_times(path, task.mtime)
    return None


def _verify_written(ctx: CopyContext, path: str, n: int, digest: str) -> None:
    t = ctx.tgt_fs.stat(path)
    if t is None or t.size != n:
        raise OSError(f"verification failed: {path} has {None if t is None else t.size} bytes, wrote {n}")
    if ctx.tgt_fs.cheap_checksum:
        c = ctx.tgt_fs.checksum(path)
        if c is not None and c.algorithm == CONTENT_ALGO and c.value != digest:
            raise OSError(f"verification failed: checksum of {path} is {c.value}, streamed {digest}")


def _check_source(ctx: CopyContext, src: str, size: int, mtime: float, n: int, digest: str) -> None:
    if ctx.stable_source:
        return
    s = ctx.src_fs.stat(src)
    if s is None:
        raise SourceChanged(f"{src} vanished while being copied")
    if (s.size, round(s.mtime, 3)) != (size, round(mtime, 3)) or n != size:
        raise SourceChanged(f"{src} changed while being copied ({size}→{s.size} bytes)")
    if ctx.src_fs.cheap_checksum:
        c = ctx.src_fs.checksum(src)
        if c is not None and c.algorithm == CONTENT_ALGO and c.value != digest:
            raise SourceChanged(f"{src} content changed while being copied")


def _kernel_copy(ctx: CopyContext, src: str, tmp: str) -> tuple[int, str] | None:
    """Local to local: copy in the kernel (copy_file_range), then checksum what was written
    (read back from the page cache — this verifies the target's bytes too). None: not possible."""
    if not (ctx.src_fs.kind == ctx.tgt_fs.kind == "local" and hasattr(os, "copy_file_range")):
        return None
    os.makedirs(os.path.dirname(tmp) or "/", exist_ok=True)
    n = 0
    step = CHUNK if (ctx.throttle.rate or ctx.on_bytes) else 64 * CHUNK
    with open(src, "rb") as fi, open(tmp, "wb") as fo:
        while True:
            try:
                k = os.copy_file_range(fi.fileno(), fo.fileno(), step)
            except OSError:
                if n == 0:
                    return None  # e.g. across filesystems on an old kernel: stream instead
                raise
            if k == 0:
                break
            n += k
            ctx.throttle.take(k)
            if ctx.on_bytes:
                ctx.on_bytes(k)
    crc = ContentHash()
    for c in ctx.tgt_fs.read(tmp):
        crc.update(c)
    return n, crc.hexdigest()


def _copy_full(ctx: CopyContext, task: FileTask, src: str, dst: str, size: int, mtime: float) -> Outcome:
    tmp = tmp_name(dst, ctx.run_id)
    crc = ContentHash()
    counter = [0]
    try:
        fast = _kernel_copy(ctx, src, tmp)
        if fast is not None:  # length and checksum were read back from the written file
            n, digest = fast
            _check_source(ctx, src, size, mtime, n, digest)
        else:
            n = ctx.tgt_fs.write(tmp, _stream(ctx, ctx.src_fs.read(src, chunk_size=CHUNK), crc, counter))
            digest = crc.hexdigest()
            _check_source(ctx, src, size, mtime, n, digest)
            _verify_written(ctx, tmp, n, digest)
        _finish(ctx, task, tmp)
        ctx.tgt_fs.rename(tmp, dst)
    except BaseException:
        try:
            ctx.tgt_fs.delete(tmp)
        except Exception:  # noqa: BLE001 - clean-up is retried by the next run
            pass
        raise
    if "times" in ctx.preserve and ctx.tgt_fs.supports_times:
        tmtime: float | None = mtime
    else:
        t = ctx.tgt_fs.stat(dst)
        tmtime = t.mtime if t else None
    return Outcome(task.rel, True, n, n, mtime, f"{CONTENT_ALGO}:{digest}", tmtime, "copy")


def _copy_tail(ctx: CopyContext, task: FileTask, src: str, dst: str, size: int, mtime: float) -> Outcome | None:
    """Append the source's tail when the target is a verified prefix; None when it is not."""
    t = ctx.tgt_fs.stat(dst)
    if t is None or t.size != task.offset or not task.prefix_checksum or size < task.offset:
        return None
    algo, _, want = task.prefix_checksum.rpartition(":")
    if algo != CONTENT_ALGO:
        return None
    crc = ContentHash()
    reader = ctx.src_fs.read(src, chunk_size=CHUNK)
    left = task.offset
    pending = b""
    for c in reader:  # hash the prefix, keep what lies beyond it
        if left >= len(c):
            crc.update(c)
            left -= len(c)
            if left == 0:
                break
            continue
        crc.update(c[:left])
        pending = c[left:]
        left = 0
        break
    if crc.hexdigest() != want:
        return None

    def tail() -> Iterator[bytes]:
        if pending:
            yield pending
        yield from reader

    counter = [0]
    n = ctx.tgt_fs.write(dst, _stream(ctx, tail(), crc, counter), append=True)
    digest = crc.hexdigest()
    _check_source(ctx, src, size, mtime, task.offset + n, digest)
    _verify_written(ctx, dst, task.offset + n, digest)
    _finish(ctx, task, dst)
    t2 = ctx.tgt_fs.stat(dst)
    return Outcome(task.rel, True, n, task.offset + n, mtime, f"{CONTENT_ALGO}:{digest}", t2.mtime if t2 else None, "append")


def copy_one(ctx: CopyContext, task: FileTask) -> Outcome:
    """Copy (or append) one file with retries and backoff; never raises for a per-file failure."""
    src = ctx.src_fs.join(ctx.src_root, task.rel)
    dst = ctx.tgt_fs.join(ctx.tgt_root, task.rel)
    changed = False
    err = ""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            s = FileStatus(src, task.size, task.mtime)  # as planned; checked again after the copy
            if attempt > 1:  # after a failure: copy the file as it is now
                fresh = ctx.src_fs.stat(src)
                if fresh is None or fresh.is_dir:
                    return Outcome(task.rel, False, attempts=attempt, changed=changed,
                                   error=f"{src} vanished before it was copied")
                if (fresh.size, round(fresh.mtime, 3)) != (task.size, round(task.mtime, 3)):
                    changed = True
                s = fresh
            out = None
            if task.action == "append" and not changed:
                out = _copy_tail(ctx, task, src, dst, s.size, s.mtime)
            if out is None:
                out = _copy_full(ctx, task, src, dst, s.size, s.mtime)
            out.attempts, out.changed = attempt, changed
            return out
        except SourceChanged as exc:
            changed, err = True, str(exc)
        except (OSError, DrtError) as exc:
            err = f"{type(exc).__name__}: {exc}"
        log.warning("copy of %s failed (attempt %d/%d): %s", task.rel, attempt, ATTEMPTS, err)
        if attempt < ATTEMPTS:
            time.sleep(min(0.2 * 2 ** attempt, 5.0))
    return Outcome(task.rel, False, attempts=ATTEMPTS, changed=changed, error=err)


def run_local(ctx: CopyContext, tasks: list[FileTask], workers: int,
              on_done: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    out: list[Outcome] = []
    if not tasks:
        return out
    if ctx.src_fs.kind == ctx.tgt_fs.kind == "local":
        # disk to disk is bound by CPU and the disk, not by latency: more threads than cores only contend
        workers = min(workers, max(2, os.cpu_count() or 2))
    with ThreadPoolExecutor(max(1, min(workers, len(tasks)))) as pool:
        futs = [pool.submit(copy_one, ctx, t) for t in sorted(tasks, key=lambda t: -t.size)]
        for f in as_completed(futs):
            o = f.result()
            out.append(o)
            if on_done:
                on_done(o)
    return out
