"""The filesystem protocol every copy goes through: list, stat, checksum, ranged streaming
read, write (to a temporary name), rename, delete, mkdirs, times/permissions, snapshots.

Paths are absolute within their filesystem and '/'-separated (for S3: the key, no leading
'/'). Listings return regular files only; everything else they pass over (symlinks, dangling
links, empty directories, files named like the toolkit's temporary files ``.drt-tmp.*``) is
reported through the ``skipped(path, reason)`` callback so a run can count and report it.
Nothing of the toolkit's own state lives under a replicated tree (see ``dr_toolkit.copy.state``).

The contract between the copy engine and each filesystem (see docs/design.md, "WebHDFS and Spark's Hadoop client"):

- :class:`FileStatus` ``version``: a change token — a value that changes whenever the file's
  bytes may have changed, even when size and mtime were put back (local: inode + ctime;
  HDFS: the inode ``fileId``, new on every CREATE; S3: the ETag). ``None`` when unknown.
- :meth:`FileSystem.checksum` answers what the server answers, its algorithm named honestly
  (``COMPOSITE-CRC32C``, ``MD5-of-0MD5-of-512CRC32C``, ...). Two checksums are compared only
  when their algorithm names are equal (:meth:`Checksum.comparable`). For a file open for
  write it raises :class:`UnderConstruction`.
- :meth:`FileSystem.write` takes ``block_size`` / ``bytes_per_checksum`` (HDFS: honoured where
  the protocol allows) and ``size_hint`` (S3: part size).
- :meth:`FileSystem.rename` replaces a file ``dst`` atomically (WebHDFS: ``renameoptions=OVERWRITE``)
  and raises :class:`IsADirectoryError` when ``dst`` is a directory.
"""

from __future__ import annotations

import functools
import hashlib
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

INTERNAL_DIR = ".drt"  # kept for old manifests only: nothing is written there any more
TMP_PREFIX = ".drt-tmp."
#: skipped(path, reason): called by a listing for every entry it passes over
Skipped = Callable[[str, str], None]
CHUNK = 4 << 20  # streaming chunk: memory per worker is a few of these
#: checksum algorithms whose value depends only on the bytes (not on block or part sizes)
LAYOUT_INDEPENDENT = frozenset({"MD5", "COMPOSITE-CRC32C", "COMPOSITE-CRC32"})
#: the content checksum this toolkit computes while streaming: CRC32C of the whole content,
#: the value HDFS answers with dfs.checksum.combine.mode=COMPOSITE_CRC (hardware-fast)
CONTENT_ALGO = "COMPOSITE-CRC32C"
#: the collision-resistant digest that proves two byte strings equal when this toolkit reads
#: them (a 32-bit CRC does not: four chosen bytes give any CRC32C)
DIGEST_ALGO = "SHA-256"


class ContentHash:
    """Running CRC32C of a byte stream (``update`` / ``hexdigest``, like hashlib)."""

    __slots__ = ("crc",)

    def __init__(self, crc: int = 0) -> None:
        self.crc = crc

    def update(self, data: bytes) -> None:
        import google_crc32c

        self.crc = google_crc32c.extend(self.crc, data)

    def hexdigest(self) -> str:
        return f"{self.crc:08x}"

    def checksum(self) -> Checksum:
        return Checksum(CONTENT_ALGO, self.hexdigest())


def same_bytes(a: Iterable[bytes], b: Iterable[bytes]) -> tuple[bool, str | None]:
    """Compare two byte streams (any chunking) byte for byte; (equal, SHA-256 hex of the bytes
    when equal). Stops at the first difference. Chunks of equal length (the usual case: two
    files read with the same chunk size) are compared whole (``memcmp``); otherwise the common
    part is sliced out of each, never compared through a memoryview (element by element)."""
    h = hashlib.sha256()
    ia = (c for c in a if c)
    ib = (c for c in b if c)
    ba, pa = b"", 0
    bb, pb = b"", 0
    while True:
        if pa == len(ba):
            ba, pa = next(ia, b""), 0
        if pb == len(bb):
            bb, pb = next(ib, b""), 0
        if not ba and not bb:
            return True, h.hexdigest()
        if not ba or not bb:
            return False, None
        k = min(len(ba) - pa, len(bb) - pb)
        if pa == 0 and pb == 0 and len(ba) == len(bb):
            x, y = ba, bb
        else:
            x, y = ba[pa:pa + k], bb[pb:pb + k]
        if x != y:
            return False, None
        h.update(x)
        pa += k
        pb += k


def is_internal(rel: str) -> bool:
    """True for names of the toolkit's temporary files, at any depth."""
    return rel.rstrip("/").rsplit("/", 1)[-1].startswith(TMP_PREFIX)


@functools.lru_cache(maxsize=64)
def run_tag(run_id: str) -> str:
    """The short tag of a run inside temporary names (8 hex digits of its id)."""
    return hashlib.sha1(run_id.encode()).hexdigest()[:8]


def tmp_name(path: str, run_id: str) -> str:
    """The temporary name a file is written to before it is renamed into ``path``:
    ``.drt-tmp.<run tag>.<sha256 of the name>`` (82 bytes, so a 255-byte name still has one;
    the whole digest, so two names of one directory never share a temporary name). Names that
    are not UTF-8 (local paths carry their bytes as surrogate escapes) are hashed by their bytes."""
    d, name = posixpath.split(path)
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return posixpath.join(d, f"{TMP_PREFIX}{run_tag(run_id)}.{digest}")


def stage_name(root: str, run_id: str, i: int) -> str:
    """Where a snapshot-diff move is staged: ``<root>/.drt-tmp.<run tag>.mv<i>``, ``i`` counting
    the run's staged moves, so no two staged paths of a run ever share a name."""
    return posixpath.join(root, f"{TMP_PREFIX}{run_tag(run_id)}.mv{i}") if root else f"{TMP_PREFIX}{run_tag(run_id)}.mv{i}"


def tmp_run_tag(name: str) -> str | None:
    """The run tag of a temporary file name (None: not one of ours)."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    if not base.startswith(TMP_PREFIX):
        return None
    return base[len(TMP_PREFIX):].split(".", 1)[0] or None


class UnderConstruction(OSError):
    """The file is open for write (HDFS "under construction"): no checksum can be had yet.
    ``visible_length``: the bytes a reader sees now, when the filesystem knows it."""

    def __init__(self, path: str, visible_length: int | None = None, message: str = "") -> None:
        super().__init__(message or f"{path} is open for write (under construction)")
        self.path = path
        self.visible_length = visible_length


@dataclass(frozen=True)
class FileStatus:
    path: str  # absolute path (or S3 key)
    size: int
    mtime: float  # seconds since the epoch
    is_dir: bool = False
    permission: str | None = None  # octal, e.g. "644"
    version: str | None = None  # change token (see the module doc); None: unknown
    block_size: int | None = None  # HDFS: the file's block size


@dataclass(frozen=True)
class Checksum:
    algorithm: str
    value: str

    @property
    def layout_independent(self) -> bool:
        return self.algorithm in LAYOUT_INDEPENDENT

    def comparable(self, other: Checksum | None) -> bool:
        """Whether the two values can be compared: the same algorithm name. HDFS names its
        MD5MD5CRC with the layout it depends on (``MD5-of-<crcPerBlock>MD5-of-<bytesPerCrc>CRC32C``),
        so equal names mean equal layouts; an MD5MD5CRC is never compared with a composite CRC."""
        return other is not None and other.algorithm == self.algorithm

    @property
    def bytes_per_checksum(self) -> int | None:
        """HDFS MD5MD5CRC: the bytes-per-checksum its name states."""
        import re

        m = re.fullmatch(r"MD5-of-\d+MD5-of-(\d+)CRC32C?", self.algorithm)
        return int(m.group(1)) if m else None

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.value}"

    @classmethod
    def parse(cls, text: str | None) -> Checksum | None:
        if not text or ":" not in text:
            return None
        a, _, v = text.rpartition(":")
        return cls(a, v)


@dataclass(frozen=True)
class DiffEntry:
    """One line of an HDFS snapshot diff report: ``+`` create, ``-`` delete, ``M`` modify, ``R`` rename."""

    type: str
    path: str  # relative to the snapshot root
    target: str | None = None  # for renames


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot of a snapshottable directory, as the NameNode lists it."""

    name: str
    #: HDFS's snapshot id: the NameNode's counter, never reused and kept by renameSnapshot, so it
    #: tells a snapshot from another one put under its name later (None: the NameNode does not say)
    id: int | None
    #: the snapshot root's modification time (s): its creation — or its last renameSnapshot, which
    #: sets it too
    mtime: float

    @property
    def identity(self) -> str:
        """What this snapshot is, whatever it is called: its id, else (older NameNodes) its time."""
        return f"id:{self.id}" if self.id is not None else f"mtime:{round(self.mtime * 1000)}"


class FileSystem:
    """Base class; subclasses implement the primitives. ``kind`` is local | webhdfs | s3."""

    kind = "abstract"
    supports_append = False
    supports_times = False
    supports_permissions = False
    supports_snapshots = False
    #: True when checksum() is answered without streaming the file's bytes through this process
    cheap_checksum = False
    #: True when FileStatus.version changes whenever the bytes change, even when size and mtime
    #: are put back (local: inode + ctime, which no call can set; S3: the ETag of a new object).
    #: HDFS's fileId is not: TRUNCATE + APPEND keep the inode and SETTIMES restores mtime, so a
    #: fast-forward from an HDFS listing also asks the source's own checksum
    content_token = True
    #: True when rename() replaces an existing file in one step (no moment without the file)
    supports_atomic_replace = False
    #: True when a write becomes visible only once complete (S3 multipart): the copy engine then
    #: writes straight to the final name through write_verified() instead of temp + rename
    writes_in_place = False

    # -- paths ---------------------------------------------------------------------------------
    def join(self, base: str, rel: str) -> str:
        rel = rel.strip("/")
        if not rel:
            return base
        return posixpath.join(base, rel) if base else rel

    def relative(self, root: str, path: str) -> str:
        root = root.rstrip("/")
        return path[len(root):].lstrip("/") if root else path.lstrip("/")

    # -- primitives ----------------------------------------------------------------------------
    def list_files(self, root: str, skipped: Skipped | None = None, dirs: dict[str, Any] | None = None,
                   recursive: bool = True) -> Iterator[FileStatus]:
        """Every regular file under ``root`` (recursively); empty when absent; ``root`` itself
        when it is a file. Temporary files (``.drt-tmp.*``), symlinks and empty directories are
        passed over, each reported through ``skipped(path, reason)`` when given.

        ``dirs``, when given, receives every directory listed (``root`` included) with its
        :meth:`dir_token` as it was *before* its entries were read (filesystems without
        directories record none). ``recursive=False`` lists the files directly in ``root`` and
        records its subdirectories without descending into them."""
        raise NotImplementedError

    def list_dir(self, path: str, skipped: Skipped | None = None, dirs: dict[str, Any] | None = None
                 ) -> Iterator[FileStatus]:
        """One directory read once, not descended: the unit of work of a parallel listing. Yields
        its regular files and, among them, each subdirectory as ``FileStatus(path, 0, 0.0, is_dir=True)``,
        the subdirectory's :meth:`dir_token` put in ``dirs`` (when given) before it is yielded, so
        before its own entries are read. What :meth:`list_files` passes over in it is reported
        through ``skipped``; ``path`` itself never is (the caller sees whether anything came).
        Nothing when ``path`` is gone or no longer a directory. Filesystems without directories
        (S3) are never asked. This default is ``list_files(recursive=False)``, which reads
        ``path``'s own status too; a filesystem may override it with one read of the directory."""
        level: dict[str, Any] = {}
        for s in self.list_files(path, skipped, dirs=level, recursive=False):
            if s.path != path:  # path became a file since its parent was read: not one of its entries
                yield s
        for d, token in level.items():
            if d != path:
                if dirs is not None:
                    dirs[d] = token
                yield FileStatus(d, 0, 0.0, True)

    def dir_token(self, path: str) -> Any:
        """What changes whenever a directory's entries change (created, deleted, renamed in or
        out): e.g. its modification time and inode/fileId. None when ``path`` is no longer a
        directory. Only filesystems that record ``dirs`` in :meth:`list_files` implement it."""
        raise NotImplementedError

    settle_s = 0.0  # how long after a directory's stamp a token of it can be trusted

    @staticmethod
    def token_settled(token: Any) -> bool:
        """False when a later change to the directory could leave ``token`` as it is (it was
        taken within ``settle_s`` of the directory's stamp): such a directory is read again."""
        return True

    def list_dirs(self, root: str) -> Iterator[str]:
        """Every directory under ``root`` (recursively, ``root`` excluded), for pruning."""
        return iter(())

    def stat(self, path: str) -> FileStatus | None:
        raise NotImplementedError

    def checksum(self, path: str) -> Checksum | None:
        """The filesystem's own checksum of ``path`` (algorithm named honestly), or None when
        it has none. Raises :class:`UnderConstruction` for a file open for write."""
        return None

    def content_checksum(self, path: str, length: int | None = None) -> Checksum:
        """CRC32C of the bytes (``COMPOSITE-CRC32C``), computed by reading them here."""
        h = ContentHash()
        for chunk in self.read(path, length=length):
            h.update(chunk)
        return h.checksum()

    def content_digest(self, path: str, length: int | None = None) -> Checksum:
        """SHA-256 of the bytes (:data:`DIGEST_ALGO`), computed by reading them here."""
        h = hashlib.sha256()
        for chunk in self.read(path, length=length):
            h.update(chunk)
        return Checksum(DIGEST_ALGO, h.hexdigest())

    def read(self, path: str, offset: int = 0, length: int | None = None, chunk_size: int = CHUNK
             ) -> Iterator[bytes]:
        raise NotImplementedError

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False, block_size: int | None = None,
              bytes_per_checksum: int | None = None, size_hint: int | None = None) -> int:
        """Write (or append) ``chunks`` to ``path`` (parents created, an existing file replaced);
        return the bytes written. ``block_size``/``bytes_per_checksum``: HDFS create parameters
        (ignored where they mean nothing); ``size_hint``: the expected length (S3 part sizes)."""
        raise NotImplementedError

    def write_verified(self, path: str, chunks: Iterable[bytes], before_commit: Callable[[int], None], *,
                       size_hint: int | None = None) -> int:
        """Only where :attr:`writes_in_place`: write ``path``, calling ``before_commit(n)`` after the
        last byte and before the object becomes visible; if it raises, nothing becomes visible."""
        raise NotImplementedError

    def list_snapshots(self, path: str) -> list[str]:
        """Names of the snapshots of ``path`` (HDFS: LISTSTATUS of ``<path>/.snapshot``); [] when unknown."""
        return []

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` (parents created). A file ``dst`` is replaced — atomically
        where :attr:`supports_atomic_replace`. A directory ``dst`` raises IsADirectoryError."""
        raise NotImplementedError

    def delete(self, path: str, recursive: bool = False) -> bool:
        raise NotImplementedError

    def mkdirs(self, path: str) -> None:
        raise NotImplementedError

    def set_times(self, path: str, mtime: float) -> None:
        pass

    def set_permission(self, path: str, permission: str) -> None:
        pass

    #: which of DistCp's ``-p`` attributes beyond permission and times this filesystem reads and
    #: sets through :meth:`attributes` / :meth:`set_attributes` ("owner", "group", "acl", "xattr")
    preservable: frozenset[str] = frozenset()

    def attributes(self, path: str, which: frozenset[str]) -> dict[str, Any]:
        """The file's ``which`` attributes: ``owner``/``group`` (names), ``acl`` (the extended ACL
        entries, e.g. ``["user:alice:r-x", "group::r--"]``; the base entries are the permission),
        ``xattr`` (name -> value as hex)."""
        return {}

    def set_attributes(self, path: str, attrs: dict[str, Any], permission: str | None = None) -> None:
        """Set what :meth:`attributes` returned (``permission``: the file's octal permission,
        which an ACL's base entries are made from)."""

    def list_tmp(self, root: str) -> Iterator[str]:
        """Temporary files left under ``root`` by killed runs (for clean-up)."""
        raise NotImplementedError

    # -- snapshots (HDFS) ------------------------------------------------------------------------
    def is_snapshottable(self, path: str) -> bool:
        return False

    def create_snapshot(self, path: str, name: str) -> None:
        raise NotImplementedError(f"{self.kind} has no snapshots")

    def delete_snapshot(self, path: str, name: str) -> None:
        raise NotImplementedError(f"{self.kind} has no snapshots")

    def snapshot_exists(self, path: str, name: str) -> bool:
        return False

    def snapshot_diff(self, path: str, from_snapshot: str, to_snapshot: str) -> list[DiffEntry]:
        raise NotImplementedError(f"{self.kind} has no snapshots")

    def snapshots(self, path: str) -> dict[str, SnapshotInfo]:
        """Every snapshot of the snapshottable directory ``path``, by name ({} when none or unknown)."""
        return {}

    def is_open(self, path: str) -> bool:
        """Whether a writer holds ``path`` open now (HDFS: under construction). A snapshot of an
        open file reads as a closed file of the length the NameNode knew: the live file says
        whether more is being written."""
        return False

    def snapshot_path(self, path: str, name: str) -> str:
        """Where the snapshot ``name`` of ``path`` is readable (HDFS: ``<path>/.snapshot/<name>``)."""
        return posixpath.join(path, ".snapshot", name)

    def close(self) -> None:
        pass

    # -- helpers -------------------------------------------------------------------------------
    def read_all(self, path: str) -> bytes:
        return b"".join(self.read(path))

    def write_bytes(self, path: str, data: bytes) -> int:
        return self.write(path, [data])
