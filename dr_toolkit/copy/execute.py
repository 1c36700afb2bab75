"""Execution: one per-file copy function shared by the two engines.

:func:`copy_one` streams a file (bounded memory: one chunk in flight) to a temporary name on
the target, verifies length and checksum, renames it into place, and detects a source that
changed while it was being read (re-copied, then reported as failed). ``append`` tasks check
that the target is a verified prefix of the source and send only the tail.

Engines: :func:`run_local` (a thread pool) here, :func:`dr_toolkit.copy.processes.run_processes`
(local to local: copy processes, each its own interpreter) and
:func:`dr_toolkit.copy.spark_engine.run_spark` (``mapPartitions`` over groups of files balanced by
bytes and by file count, like DistCp's dynamic strategy); those two run a
:class:`dr_toolkit.copy.job.CopyJob` per group of files.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from dr_toolkit.copy.plan import FileTask
from dr_toolkit.errors import ConfigError, DrtError
from dr_toolkit.fs.base import (
    CHUNK,
    CONTENT_ALGO,
    DIGEST_ALGO,
    Checksum,
    ContentHash,
    FileSystem,
    UnderConstruction,
    same_bytes,
    tmp_name,
)
from dr_toolkit.fs.hdfs_checksum import Md5Md5Crc32c
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.retry import Retry

log = logging.getLogger(__name__)
ATTEMPTS = 3
PER_FILE_COST = 256 << 10  # bytes a file "costs" beyond its size when balancing groups
SMALL = 1 << 20  # local to local: files up to this size are copied through one buffer (_local_small)


class SourceChanged(Exception):
    """The source file moved (size, mtime or content) while it was being copied."""


class StillOpen(Exception):
    """The source file was under construction when its bytes were read live: open for write, or a
    truncate or append whose block the NameNode is recovering. Its NameNode length is then not a
    length the file ever had for sure — during a truncate's recovery it is the old end of the block
    being cut (3 MiB truncated to 1,234,567 reads as 2,097,152 bytes), and GETFILESTATUS and
    GET_BLOCK_LOCATIONS answer exactly as for a writer's open file — so the bytes read are no
    proven version of it: nothing is placed (not retried), the file is reported open and pending."""


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


class ReadBackMismatch(OSError):
    """The bytes read back from the target are not the source's."""


class Cancelled(Exception):
    """The run was asked to stop (SIGTERM): in-flight copies stop and remove their temp files."""


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
    live_root: str | None = None  # the live source root, when reading from a snapshot of it
    cancel: threading.Event = field(default_factory=threading.Event)
    #: the fencing check of the target's lease: raises (stopping the run) when this run lost it;
    #: called before every rename into place and every write to a live target file
    fence: Callable[[], None] | None = None
    #: "content": every written file is read back and its SHA-256 compared with the source bytes
    #: read, whatever the target (see :func:`proof_basis`)
    proof: str = "checksum"


def proof_basis(proof: str, src_kind: str, tgt_kind: str) -> str:
    """What proves a target file equal to its source in a run of this ``proof`` between these
    filesystems (the run's JSON ``proof_basis``, the gate's HDFS basis)."""
    if proof == "content":
        return ("content: every file kept read on both sides and compared byte for byte; every file copied "
                "read back from the target, its SHA-256 equal to the source bytes read")
    if tgt_kind == "local":
        return ("checksum: files copied read back, SHA-256 equal to the source bytes read; files kept by "
                "the recorded SHA-256 of their bytes, the sources' own checksums, or a byte compare")
    if src_kind == tgt_kind == "webhdfs":
        return ("checksum: the DataNodes' MD5-of-MD5-of-CRC32C on both sides (a function of each 512-byte "
                "chunk's CRC32C: a chunk rewritten with other bytes of the same CRC32C passes; --proof "
                "content compares the bytes)")
    if tgt_kind == "webhdfs":
        return ("checksum: the target's MD5-of-MD5-of-CRC32C against the same checksum of the bytes streamed "
                "(per 512-byte chunk CRC32C; --proof content compares the bytes)")
    return (f"checksum: {tgt_kind} target: the CRC32C of the bytes streamed checked by the target (32 bits; "
            "--proof content compares the bytes)")


def _fence(ctx: CopyContext) -> None:
    if ctx.fence is not None:
        ctx.fence()


@dataclass
class Outcome:
    rel: str
    ok: bool
    bytes: int = 0
    size: int = 0
    mtime: float = 0.0
    checksum: str | None = None  # SHA-256 of the bytes written ("SHA-256:hex")
    tmtime: float | None = None
    action: str = "copy"
    attempts: int = 0
    changed: bool = False
    error: str | None = None
    version: str | None = None  # the source's change token when read
    schecksum: str | None = None  # the source's own checksum of the bytes copied
    tversion: str | None = None  # the target's change token after commit
    tchecksum: str | None = None  # the target's own checksum after commit (token not a content token)
    #: the source was open for write: ok — copied from a snapshot as the snapshot holds it; not ok —
    #: read live under construction, nothing placed (StillOpen), pending
    open: bool = False
    verified: str = ""  # how the written bytes were checked

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stream(ctx: CopyContext, chunks: Iterator[bytes], crc: Any, counter: list[int]) -> Iterator[bytes]:
    for c in chunks:
        if ctx.cancel.is_set():
            raise Cancelled("the run was interrupted")
        crc.update(c)
        counter[0] += len(c)
        ctx.throttle.take(len(c))
        if ctx.on_bytes:
            ctx.on_bytes(len(c))
        yield c


EXTRA_ATTRIBUTES = frozenset({"owner", "group", "acl", "xattr"})  # DistCp -p u, g, a, x


def _finish(ctx: CopyContext, task: FileTask, path: str) -> None:
    """``--preserve`` on the written file (the temporary, before its rename, when there is one):
    permission, then owner/group/ACL/xattrs read from the source file (an ACL's base entries
    are the permission), then times last (each other call may move them)."""
    tgt = ctx.tgt_fs
    if "permissions" in ctx.preserve and task.permission and tgt.supports_permissions:
        tgt.set_permission(path, task.permission)
    extra = EXTRA_ATTRIBUTES.intersection(ctx.preserve)
    if extra:
        attrs = ctx.src_fs.attributes(ctx.src_fs.join(ctx.src_root, task.rel), frozenset(extra))
        if attrs:
            tgt.set_attributes(path, attrs, task.permission)
    if "times" in ctx.preserve and tgt.supports_times:
        tgt.set_times(path, task.mtime)


@dataclass
class _Source:
    """What the source said after its bytes were read."""

    checksum: str | None = None
    version: str | None = None
    open: bool = False
    matched: str | None = None  # the source's own checksum algorithm that matched the bytes read


class _Hashes:
    """SHA-256 and CRC32C of the bytes streamed, plus HDFS's MD5MD5CRC32C of them when the
    source is HDFS (so the source's own checksum can be compared with what was read: like with
    like). The SHA-256 is what proves the target's bytes equal (a CRC32C only detects accidents)."""

    def __init__(self, ctx: CopyContext, task: FileTask) -> None:
        self.crc = ContentHash()
        self.sha = hashlib.sha256()
        self.hdfs: Any = None
        if ctx.src_fs.kind == "webhdfs" and task.block_size and task.block_size % 512 == 0:
            self.hdfs = Md5Md5Crc32c(task.block_size, 512)

    def update(self, data: bytes) -> None:
        self.crc.update(data)
        self.sha.update(data)
        if self.hdfs is not None:
            self.hdfs.update(data)

    def hexdigest(self) -> str:
        return self.crc.hexdigest()


def _check_source(ctx: CopyContext, src: str, size: int, mtime: float, version: str | None, n: int,
                  digest: str, streamed: Checksum | None = None, sha: str | None = None) -> _Source:
    """The source still is the file we read (else SourceChanged); its own checksum of those bytes."""
    out = _Source(version=version)
    if ctx.src_fs.cheap_checksum:
        try:
            c = ctx.src_fs.checksum(src)
        except UnderConstruction:
            s = ctx.src_fs.stat(src)
            if s is None or s.size < n or n != size:
                raise SourceChanged(f"{src} changed while being copied (open for write)") from None
            if not ctx.stable_source:
                # a live file under construction: a writer's, or a truncate/append being recovered
                # (nothing over WebHDFS tells them apart): its bytes are no proven version
                raise StillOpen(f"open on the source (under construction: open for write, or a truncate or "
                                f"append being recovered): its length ({s.size} bytes now) is not final and the "
                                "bytes read are no proven version of it, so it was not copied (the target keeps "
                                "what it held); the first run after it is closed copies it") from None
            return _Source(None, s.version, True)
        if c is not None:
            if c.algorithm == CONTENT_ALGO and c.value != digest:
                raise SourceChanged(f"{src} content changed while being copied")
            if streamed is not None and c.comparable(streamed):
                if c != streamed:
                    raise SourceChanged(f"{src}: its {c.algorithm} differs from the bytes read (changed while copied)")
                out.matched = c.algorithm
            out.checksum = str(c)
    else:
        # the source has no checksum of its own: the digest of the bytes read from it stands for it
        out.checksum = f"{DIGEST_ALGO}:{sha}" if sha else f"{CONTENT_ALGO}:{digest}"
    if ctx.stable_source:
        if n != size:
            raise SourceChanged(f"{src}: read {n} bytes of a snapshot file of {size}")
        if ctx.live_root is not None:
            # the snapshot of a file open for write reads as a closed file of the length the
            # NameNode knew, and later hflushed bytes change neither the snapshot diff nor the
            # length or mtime: the copy is of an open file (so the next run looks again). The
            # snapshot is asked which inode it holds, and that inode whether it is open
            # (WebHdfsFileSystem.is_open) — never the live path, which may hold another file or
            # not be reachable (a parent now a file: "is not a directory")
            out.open = ctx.src_fs.is_open(src)
            if out.open:
                # ... and a snapshot taken while a truncate of a file no earlier snapshot held is
                # being recovered holds the torn state (the old end of the block being cut, closed,
                # with a checksum that matches it): nothing tells it from a writer's prefix
                raise StillOpen("open on the source (under construction: open for write, or a truncate or append "
                                f"being recovered): the snapshot's {n} bytes may be a state it never had (a "
                                "truncate's old block end), so it was not copied (the target keeps what it "
                                "held); the first run after it is closed copies it")
        return out
    s = ctx.src_fs.stat(src)
    if s is None:
        raise SourceChanged(f"{src} vanished while being copied")
    if s.size != size or not abs(s.mtime - mtime) <= 1e-3 or n != size or (
            version is not None and s.version is not None and s.version != version):
        raise SourceChanged(f"{src} changed while being copied ({size}→{s.size} bytes)")
    return out


def _read_back(ctx: CopyContext, path: str, sha: str) -> str:
    """A local target: its bytes read back and their SHA-256 compared with the SHA-256 of the
    source bytes taken while they were read."""
    got = ctx.tgt_fs.content_digest(path)
    if got.value != sha:
        raise ReadBackMismatch(f"verification failed: the bytes read back from {path} differ from the source bytes read "
                      f"({DIGEST_ALGO})")
    return f"{DIGEST_ALGO} read back = {DIGEST_ALGO} of the source bytes read"


def _verify_written(ctx: CopyContext, path: str, n: int, digest: str, src: _Source,
                    sha: str | None = None) -> tuple[str, str | None]:
    """Check the written file: its length, and its checksum where the target offers one
    comparable with the streamed CRC32C or with the source's own; a local target is read back
    and compared with the SHA-256 of the source bytes read. Returns the basis and the target's
    own checksum when one was read (a rename keeps it: the committed file's checksum)."""
    t = ctx.tgt_fs.stat(path)
    if t is None or t.size != n:
        raise OSError(f"verification failed: {path} has {None if t is None else t.size} bytes, wrote {n}")
    if (ctx.tgt_fs.kind == "local" or ctx.proof == "content") and sha is not None:
        return _read_back(ctx, path, sha), None
    if not ctx.tgt_fs.cheap_checksum:
        return "length; CRC32C streamed", None
    c = ctx.tgt_fs.checksum(path)
    if c is None:
        return "length; CRC32C streamed", None
    if c.algorithm == CONTENT_ALGO:
        if c.value != digest:
            raise OSError(f"verification failed: checksum of {path} is {c.value}, streamed {digest}")
        return f"target {CONTENT_ALGO}", str(c)
    sc = Checksum.parse(src.checksum)
    if sc is not None and sc.comparable(c):
        if sc != c:
            raise OSError(f"verification failed: {c.algorithm} of {path} differs from the source's")
        return f"target {c.algorithm} = source {c.algorithm}", str(c)
    return f"length; target offers {c.algorithm} only (not comparable)", str(c)


def _matched(info: _Source) -> str:
    return f"; source {info.matched} = bytes read" if info.matched else ""


def _local_copy(ctx: CopyContext, src: str, tmp: str, size: int) -> tuple[int, str, str] | None:
    """Local to local, proven: copied in the kernel (copy_file_range), then both files are read
    and compared byte for byte (the SHA-256 taken on the way). Returns (bytes, "", SHA-256); None:
    not local to local. (Small files take :func:`_local_small`.)"""
    if ctx.src_fs.kind != "local" or not isinstance(ctx.tgt_fs, LocalFileSystem):
        return None
    # created relative to its directory, whose real path was checked (no symlink among its
    # parents, nothing written outside the target)
    fd = ctx.tgt_fs.open_confined(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    n = 0
    step = CHUNK if (ctx.throttle.rate or ctx.on_bytes) else 16 * CHUNK
    with open(src, "rb") as fi, open(fd, "wb") as fo:
        while True:
            if ctx.cancel.is_set():
                raise Cancelled("the run was interrupted")
            k = os.copy_file_range(fi.fileno(), fo.fileno(), step)
            if k == 0:
                break
            n += k
            ctx.throttle.take(k)
            if ctx.on_bytes:
                ctx.on_bytes(k)
    eq, got = same_bytes(ctx.src_fs.read(src), ctx.tgt_fs.read(tmp))
    if not eq or got is None:
        raise ReadBackMismatch(f"verification failed: the bytes read back from {tmp} differ from the source's "
                      "(compared byte for byte)")
    return n, "", got


def _local_small(ctx: CopyContext, task: FileTask, src: str, dst: str, size: int, mtime: float,
                 version: str | None) -> Outcome | None:
    """Local to local, a small file (up to :data:`SMALL`), the whole commit through one
    descriptor of the target's directory, checked once (:meth:`LocalFileSystem.dir_fd`): read once
    (SHA-256 and CRC32C of the bytes read), written to the temporary name, read back through the
    same descriptor and compared byte for byte with the bytes read, the source checked unchanged,
    permission and times set on the open file, the fencing token checked, the directory checked
    again to be where it was (:meth:`LocalFileSystem.still_confined`: not moved out of the target,
    no symlink put in its place), renamed into place within it; the token recorded from the open
    file after the rename. None when this
    path does not apply (not local to local, a throttle, owner/group/ACL/xattrs to preserve, no
    /proc): :func:`_copy_full`'s general path."""
    tgt = ctx.tgt_fs
    if (size > SMALL or ctx.src_fs.kind != "local" or not isinstance(tgt, LocalFileSystem) or ctx.throttle.rate
            or EXTRA_ATTRIBUTES.intersection(ctx.preserve)):
        return None
    tmp = tmp_name(dst, ctx.run_id)
    dfd = tgt.dir_fd(tmp)
    if dfd is None:
        return None
    try:
        fi = os.open(src, os.O_RDONLY)
        try:
            data = os.read(fi, size + 1)
        finally:
            os.close(fi)
        with _removed_on_failure(ctx, tmp):
            fd = os.open(os.path.basename(tmp), os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666,
                         dir_fd=dfd)
            try:
                mv = memoryview(data)
                while mv:
                    mv = mv[os.write(fd, mv):]
                if ctx.on_bytes:
                    ctx.on_bytes(len(data))
                crc = ContentHash()
                crc.update(data)
                digest, sha = crc.hexdigest(), hashlib.sha256(data).hexdigest()
                if os.pread(fd, len(data) + 1, 0) != data:  # read back, compared byte for byte
                    _check_source(ctx, src, size, mtime, version, size, "")  # a source that moved says so
                    raise ReadBackMismatch(f"verification failed: the bytes read back from {tmp} differ from the "
                                           "source bytes read (compared byte for byte)")
                info = _check_source(ctx, src, size, mtime, version, len(data), digest, sha=sha)
                if "permissions" in ctx.preserve and task.permission:
                    os.fchmod(fd, int(task.permission, 8))
                if "times" in ctx.preserve:
                    ns = int(round(mtime * 1e9))
                    os.utime(fd, ns=(ns, ns))
                _fence(ctx)
                tgt.still_confined(dfd, tmp)
                try:
                    os.rename(os.path.basename(tmp), os.path.basename(dst), src_dir_fd=dfd, dst_dir_fd=dfd)
                except IsADirectoryError:  # a directory in the way (a type change): the general rule
                    _place(ctx, tmp, dst)
                t = LocalFileSystem._status(dst, os.fstat(fd))  # after the rename (it moves ctime)
            finally:
                os.close(fd)
    finally:
        os.close(dfd)
    return Outcome(task.rel, True, len(data), len(data), mtime, f"{DIGEST_ALGO}:{sha}",
                   mtime if "times" in ctx.preserve else t.mtime, "copy", version=info.version,
                   schecksum=info.checksum, tversion=t.version, open=info.open,
                   verified="read back and compared byte for byte with the source bytes read")


def _place(ctx: CopyContext, tmp: str, dst: str) -> None:
    """Rename into place; a directory in the way (a type change) goes when it is empty."""
    try:
        ctx.tgt_fs.rename(tmp, dst)
    except (IsADirectoryError, ConfigError):
        st = ctx.tgt_fs.stat(dst)
        if st is None or not st.is_dir or any(True for _ in ctx.tgt_fs.list_files(dst)):
            raise IsADirectoryError(f"cannot replace directory {dst} (it still holds files) with a file") from None
        ctx.tgt_fs.delete(dst, recursive=True)  # only empty directories below it
        ctx.tgt_fs.rename(tmp, dst)


def _after(ctx: CopyContext, dst: str, mtime: float) -> tuple[float | None, str | None]:
    t = ctx.tgt_fs.stat(dst)
    if "times" in ctx.preserve and ctx.tgt_fs.supports_times:
        return mtime, t.version if t else None
    return (t.mtime if t else None), (t.version if t else None)


def _own_checksum(ctx: CopyContext, dst: str, known: str | None) -> str | None:
    """The target's own checksum after commit, recorded where its change token is no content
    token (HDFS: a later run checks it, since TRUNCATE + APPEND + SETTIMES keep fileId and mtime).
    ``known``: the one the verification of the written file already read (the rename into place
    keeps it), so the NameNode is not asked twice for the same file."""
    if ctx.tgt_fs.content_token or not ctx.tgt_fs.cheap_checksum:
        return None
    if known is not None:
        return known
    try:
        c = ctx.tgt_fs.checksum(dst)
    except (OSError, DrtError):
        return None
    return str(c) if c is not None else None


def _copy_full(ctx: CopyContext, task: FileTask, src: str, dst: str, size: int, mtime: float,
               version: str | None) -> Outcome:
    small = _local_small(ctx, task, src, dst, size, mtime, version)
    if small is not None:
        return small
    crc = _Hashes(ctx, task)
    counter = [0]
    both_hdfs = ctx.src_fs.kind == ctx.tgt_fs.kind == "webhdfs"
    if ctx.tgt_fs.writes_in_place:  # S3: nothing is visible before before_commit() passed
        got: list[_Source] = []

        def before_commit(n: int) -> None:
            _fence(ctx)
            got.append(_check_source(ctx, src, size, mtime, version, n, crc.hexdigest(),
                                     crc.hdfs.checksum() if crc.hdfs is not None else None, sha=crc.sha.hexdigest()))

        n = ctx.tgt_fs.write_verified(dst, _stream(ctx, ctx.src_fs.read(src, length=size, chunk_size=CHUNK), crc,
                                                   counter), before_commit, size_hint=size)
        digest = crc.hexdigest()
        verified = _verify_written(ctx, dst, n, digest, got[0], crc.sha.hexdigest())[0] + _matched(got[0])
        tm, tv = _after(ctx, dst, mtime)
        return Outcome(task.rel, True, n, n, mtime, f"{DIGEST_ALGO}:{crc.sha.hexdigest()}", tm, "copy",
                       version=version,
                       schecksum=got[0].checksum, tversion=tv, open=got[0].open, verified=verified)
    tmp = tmp_name(dst, ctx.run_id)
    with _removed_on_failure(ctx, tmp):
        try:
            fast = _local_copy(ctx, src, tmp, size)
        except ReadBackMismatch:
            # a source that moved while it was read says so (SourceChanged: re-copied as it is now)
            _check_source(ctx, src, size, mtime, version, size, "")
            raise
        tck: str | None = None
        if fast is not None:  # the written file was read back and matched the source bytes read
            n, digest, sha = fast
            info = _check_source(ctx, src, size, mtime, version, n, digest, sha=sha)
            verified = "read back and compared byte for byte with the source bytes read"
        else:
            n = ctx.tgt_fs.write(tmp, _stream(ctx, ctx.src_fs.read(src, length=size, chunk_size=CHUNK), crc, counter),
                                 block_size=task.block_size if both_hdfs else None, size_hint=size)
            digest = crc.hexdigest()
            sha = crc.sha.hexdigest()
            info = _check_source(ctx, src, size, mtime, version, n, digest,
                                 crc.hdfs.checksum() if crc.hdfs is not None else None, sha=sha)
            basis, tck = _verify_written(ctx, tmp, n, digest, info, sha)
            verified = basis + _matched(info)
        _finish(ctx, task, tmp)
        _fence(ctx)
        _place(ctx, tmp, dst)
    tm, tv = _after(ctx, dst, mtime)
    return Outcome(task.rel, True, n, n, mtime, f"{DIGEST_ALGO}:{sha}", tm, "copy", version=info.version,
                   schecksum=info.checksum, tversion=tv, open=info.open, verified=verified,
                   tchecksum=_own_checksum(ctx, dst, tck))


def _copy_tail(ctx: CopyContext, task: FileTask, src: str, dst: str, size: int, mtime: float,
               version: str | None) -> Outcome | None:
    """Append the source's tail when the target is a verified prefix; None when it is not.

    The prefix is proven by the SHA-256 recorded for (or read from) the target's bytes, matched
    by the SHA-256 of the source's first ``offset`` bytes read here. A local target is appended
    to a temporary copy of it that is read back, verified and renamed into place, so a reader or
    a killed run only ever sees the old or the new version; a WebHDFS target gets the new bytes in
    a temporary file beside it, put on its end by one CONCAT (atomic at the NameNode); other
    targets append in place."""
    t = ctx.tgt_fs.stat(dst)
    if t is None or t.size != task.offset or not task.prefix_checksum or size < task.offset:
        return None
    if not ctx.tgt_fs.supports_append:
        return None
    algo, _, want = task.prefix_checksum.rpartition(":")
    if algo != DIGEST_ALGO:
        return None  # a 32-bit CRC is no proof that the prefix is the same: copied whole
    h = _Hashes(ctx, task)
    reader = ctx.src_fs.read(src, length=size, chunk_size=CHUNK)
    left = task.offset
    pending = b""
    for c in reader:  # hash the prefix, keep what lies beyond it
        if left >= len(c):
            h.update(c)
            left -= len(c)
            if left == 0:
                break
            continue
        h.update(c[:left])
        pending = c[left:]
        left = 0
        break
    if h.sha.hexdigest() != want:
        return None
    if size == task.offset:
        # nothing to append (a file recorded open that was closed, or is still open, with no byte
        # more): the target already holds these bytes — no empty temporary file, no CONCAT (which
        # the NameNode refuses for an empty source: "invalid or empty or underConstruction")
        getattr(reader, "close", lambda: None)()
        digest, sha = h.hexdigest(), h.sha.hexdigest()
        info = _check_source(ctx, src, size, mtime, version, size, digest, sha=sha)
        verified, tck = _verify_written(ctx, dst, size, digest, info, sha)
        tm, tv = _after(ctx, dst, mtime)
        return Outcome(task.rel, True, 0, size, mtime, f"{DIGEST_ALGO}:{sha}", tm, "append", version=info.version,
                       schecksum=info.checksum, tversion=tv, open=info.open,
                       verified=f"{verified}; nothing to append (the target held every byte)",
                       tchecksum=_own_checksum(ctx, dst, tck))

    def tail() -> Iterator[bytes]:
        if pending:
            yield pending
        yield from reader

    counter = [0]
    if ctx.tgt_fs.kind == "local":
        tmp = tmp_name(dst, ctx.run_id)
        with _removed_on_failure(ctx, tmp):
            def whole() -> Iterator[bytes]:
                yield from ctx.tgt_fs.read(dst, length=task.offset)
                yield from _stream(ctx, tail(), h, counter)

            ctx.tgt_fs.write(tmp, whole())
            n = counter[0]
            digest, sha = h.hexdigest(), h.sha.hexdigest()
            info = _check_source(ctx, src, size, mtime, version, task.offset + n, digest, sha=sha)
            verified, tck = _verify_written(ctx, tmp, task.offset + n, digest, info, sha)
            _finish(ctx, task, tmp)
            _fence(ctx)
            _place(ctx, tmp, dst)
    elif ctx.tgt_fs.kind == "webhdfs":
        # the new bytes go to a temporary file beside the target, then one CONCAT puts them on its
        # end: a reader or a killed run sees the old version or the new one, never part of the tail
        tmp = tmp_name(dst, ctx.run_id)
        with _removed_on_failure(ctx, tmp):
            n = ctx.tgt_fs.write(tmp, _stream(ctx, tail(), h, counter), block_size=task.block_size)
            digest, sha = h.hexdigest(), h.sha.hexdigest()
            info = _check_source(ctx, src, size, mtime, version, task.offset + n, digest, sha=sha)
            got = ctx.tgt_fs.stat(tmp)
            if got is None or got.size != n:
                raise OSError(f"{tmp}: {got.size if got else 'no'} bytes written of the {n} appended")
            _fence(ctx)
            ctx.tgt_fs.concat(dst, tmp)  # type: ignore[attr-defined]
        verified, tck = _verify_written(ctx, dst, task.offset + n, digest, info, sha)
        _finish(ctx, task, dst)
    else:
        _fence(ctx)
        n = ctx.tgt_fs.write(dst, _stream(ctx, tail(), h, counter), append=True)
        digest, sha = h.hexdigest(), h.sha.hexdigest()
        info = _check_source(ctx, src, size, mtime, version, task.offset + n, digest, sha=sha)
        verified, tck = _verify_written(ctx, dst, task.offset + n, digest, info, sha)
        _finish(ctx, task, dst)
    tm, tv = _after(ctx, dst, mtime)
    return Outcome(task.rel, True, n, task.offset + n, mtime, f"{DIGEST_ALGO}:{sha}", tm, "append",
                   version=info.version, schecksum=info.checksum, tversion=tv, open=info.open, verified=verified,
                   tchecksum=_own_checksum(ctx, dst, tck))


# per file: 3 tries, 0.4 s then 0.8 s apart (the run's cancel event is the sleep: SIGTERM cuts it short)
RETRY = Retry(tries=ATTEMPTS, backoff_s=0.4, max_backoff_s=5.0, jitter=0.0,
              retry_on=(SourceChanged, OSError, DrtError))


def copy_one(ctx: CopyContext, task: FileTask) -> Outcome:
    """Copy (or append) one file with retries and backoff (:data:`RETRY`, sleeping on the run's
    cancel event); never raises for a per-file failure (a :class:`Cancelled` run and
    KeyboardInterrupt do raise, after removing the temp file)."""
    src = ctx.src_fs.join(ctx.src_root, task.rel)
    dst = ctx.tgt_fs.join(ctx.tgt_root, task.rel)
    changed = False
    n = 0
    try:
        for attempt in RETRY.with_(sleep=ctx.cancel.wait).attempts():
            with attempt:
                n = attempt.number
                if n > 1 and ctx.cancel.is_set():
                    raise Cancelled("the run was interrupted")
                try:
                    size, mtime, version = task.size, task.mtime, task.version  # as planned; checked after
                    if n > 1:  # after a failure: copy the file as it is now
                        fresh = ctx.src_fs.stat(src)
                        if fresh is None or fresh.is_dir:
                            return Outcome(task.rel, False, attempts=n, changed=changed,
                                           error=f"{src} vanished before it was copied")
                        if (fresh.size, round(fresh.mtime, 3)) != (task.size, round(task.mtime, 3)):
                            changed = True
                        size, mtime, version = fresh.size, fresh.mtime, fresh.version
                    out = None
                    if task.action == "append" and not changed:
                        out = _copy_tail(ctx, task, src, dst, size, mtime, version)
                    if out is None:
                        out = _copy_full(ctx, task, src, dst, size, mtime, version)
                    out.attempts, out.changed = n, changed
                    return out
                except RETRY.retry_on as exc:
                    changed = changed or isinstance(exc, SourceChanged)
                    log.warning("copy of %s failed (attempt %d/%d): %s", task.rel, n, ATTEMPTS, _why(exc))
                    raise
    except StillOpen as exc:  # not retried: it stays open for as long as its writer (or recovery) holds it
        return Outcome(task.rel, False, attempts=n, changed=changed, error=str(exc), open=True)
    except RETRY.retry_on as exc:
        if ctx.cancel.is_set():
            raise Cancelled("the run was interrupted") from None
        if _under_construction(ctx, src):  # e.g. a truncate by copy: its new last block unreadable until recovered
            return Outcome(task.rel, False, attempts=n, changed=changed, open=True,
                           error=f"open on the source (under construction: open for write, or a truncate or append "
                                 f"being recovered): not copied, its read failed ({_why(exc)}); the first run after "
                                 "it is closed copies it")
        return Outcome(task.rel, False, attempts=n, changed=changed, error=_why(exc))
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


def _under_construction(ctx: CopyContext, src: str) -> bool:
    """After a failed copy: is the source under construction now (then it is pending, not failed)?"""
    try:
        return ctx.src_fs.is_open(src)
    except Exception:  # noqa: BLE001 - the failure stands as it is
        return False


@contextmanager
def _removed_on_failure(ctx: CopyContext, tmp: str) -> Iterator[None]:
    """A temporary file on the target that must not outlive a failed or interrupted step."""
    try:
        yield
    except BaseException:
        try:
            ctx.tgt_fs.delete(tmp)
        except Exception:  # noqa: BLE001 - clean-up is retried by the next run
            pass
        raise


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, SourceChanged) else f"{type(exc).__name__}: {exc}"


def _batches(tasks: list[FileTask]) -> list[list[FileTask]]:
    """Largest first; small files in batches (up to 64 files or 16 MiB) so a tree of many small
    files does not pay a future per file."""
    out: list[list[FileTask]] = []
    cur: list[FileTask] = []
    cur_bytes = 0
    for t in sorted(tasks, key=lambda t: -t.size):
        if t.size >= 16 << 20:
            out.append([t])
            continue
        cur.append(t)
        cur_bytes += t.size
        if len(cur) >= 64 or cur_bytes >= 16 << 20:
            out.append(cur)
            cur, cur_bytes = [], 0
    if cur:
        out.append(cur)
    return out


def _copy_batch(ctx: CopyContext, batch: list[FileTask]) -> list[Outcome]:
    return [copy_one(ctx, t) for t in batch]


def uniform_lists(tasks: list[FileTask], n: int) -> list[list[FileTask]]:
    """DistCp's ``-strategy uniformsize``: the files split up front into ``n`` lists of about
    equal bytes (largest first, each onto the lightest list), one per worker, none shared."""
    lists: list[list[FileTask]] = [[] for _ in range(max(1, n))]
    load = [0] * len(lists)
    for t in sorted(tasks, key=lambda t: (-t.size, t.rel)):
        i = load.index(min(load))
        lists[i].append(t)
        load[i] += max(t.size, 1)
    return [x for x in lists if x]


def run_local(ctx: CopyContext, tasks: list[FileTask], workers: int,
              on_done: Callable[[Outcome], None] | None = None, strategy: str = "dynamic") -> list[Outcome]:
    """Copy ``tasks`` on ``workers`` threads. ``strategy`` "dynamic" (DistCp's dynamic
    strategy): small files in chunks, each thread takes the next chunk when it is done;
    "uniformsize": :func:`uniform_lists`, one list per thread. Either way every file is tried:
    a file that fails (after its retries) is an Outcome with ``ok=False`` and the run goes on."""
    out: list[Outcome] = []
    if not tasks:
        return out
    if ctx.src_fs.kind == ctx.tgt_fs.kind == "local":
        # disk to disk is bound by this process's CPU (copy, read-back, digests, Python per file):
        # threads beyond the cores only contend for the interpreter lock. Measured on 2 cores, 40,936
        # files on tmpfs: 8 threads 24.6 s, 2 threads 17.1 s, 1 thread 16.8 s
        # (`git show c7ce6e0:benchmarks/README.md`, "Local copies after profiling")
        workers = min(workers, max(2, os.cpu_count() or 2))
    batches = uniform_lists(tasks, workers) if strategy == "uniformsize" else _batches(tasks)
    pool = ThreadPoolExecutor(max(1, min(workers, len(batches))))
    try:
        futs = [pool.submit(_copy_batch, ctx, b) for b in batches]
        for f in as_completed(futs):
            for o in f.result():
                out.append(o)
                if on_done:
                    on_done(o)
    except BaseException:
        ctx.cancel.set()  # in-flight copies stop at their next chunk and remove their temp files
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return out

