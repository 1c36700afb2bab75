"""The filesystem protocol every copy goes through: list, stat, checksum, ranged streaming
read, write (to a temporary name), rename, delete, mkdirs, times/permissions, snapshots.

Paths are absolute within their filesystem and '/'-separated (for S3: the key, no leading
'/'). Listings skip the toolkit's own hidden entries: the ``.drt`` directory (manifests) and
temporary files named ``.drt-tmp.*``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

INTERNAL_DIR = ".drt"
TMP_PREFIX = ".drt-tmp."
CHUNK = 4 << 20  # streaming chunk: memory per worker is a few of these
#: checksum algorithms whose value depends only on the bytes (not on block or part sizes)
LAYOUT_INDEPENDENT = frozenset({"MD5", "COMPOSITE-CRC32C", "COMPOSITE-CRC32"})
#: the content checksum this toolkit computes while streaming: CRC32C of the whole content,
#: the value HDFS answers with dfs.checksum.combine.mode=COMPOSITE_CRC (hardware-fast)
CONTENT_ALGO = "COMPOSITE-CRC32C"


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


def is_internal(rel: str) -> bool:
    """True for the toolkit's hidden entries (manifest dir, temporary files), at any depth."""
    parts = rel.strip("/").split("/")
    return parts[0] == INTERNAL_DIR or parts[-1].startswith(TMP_PREFIX)


def tmp_name(path: str, run_id: str) -> str:
    """The temporary name a file is written to before it is renamed into ``path``."""
    d, name = posixpath.split(path)
    return posixpath.join(d, f"{TMP_PREFIX}{name}.{run_id}")


@dataclass(frozen=True)
class FileStatus:
    path: str  # absolute path (or S3 key)
    size: int
    mtime: float  # seconds since the epoch
    is_dir: bool = False
    permission: str | None = None  # octal, e.g. "644"


@dataclass(frozen=True)
class Checksum:
    algorithm: str
    value: str

    @property
    def layout_independent(self) -> bool:
        return self.algorithm in LAYOUT_INDEPENDENT

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


class FileSystem:
    """Base class; subclasses implement the primitives. ``kind`` is local | webhdfs | s3."""

    kind = "abstract"
    supports_append = False
    supports_times = False
    supports_permissions = False
    supports_snapshots = False
    #: True when checksum() is answered without streaming the file's bytes through this process
    cheap_checksum = False

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
    def list_files(self, root: str) -> Iterator[FileStatus]:
        """Every file under ``root`` (recursively), internal entries skipped; empty when absent."""
        raise NotImplementedError

    def stat(self, path: str) -> FileStatus | None:
        raise NotImplementedError

    def checksum(self, path: str) -> Checksum | None:
        """A content checksum (see :data:`LAYOUT_INDEPENDENT`), or None when the filesystem has none."""
        return None

    def read(self, path: str, offset: int = 0, length: int | None = None, chunk_size: int = CHUNK
             ) -> Iterator[bytes]:
        raise NotImplementedError

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False) -> int:
        """Write (or append) ``chunks`` to ``path`` (parents created); return the bytes written."""
        raise NotImplementedError

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst``, replacing ``dst`` if it is a file."""
        raise NotImplementedError

    def delete(self, path: str, recursive: bool = False) -> bool:
        raise NotImplementedError

    def mkdirs(self, path: str) -> None:
        raise NotImplementedError

    def set_times(self, path: str, mtime: float) -> None:
        pass

    def set_permission(self, path: str, permission: str) -> None:
        pass

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
