"""HDFS through WebHDFS (the ``hdfs`` package): several namenodes fail over by themselves
(StandbyException → next namenode), Kerberos as an option, snapshots and GETSNAPSHOTDIFF.

Checksums: GETFILECHECKSUM as the namenode answers it. ``COMPOSITE-CRC32C`` (HDFS with
``dfs.checksum.combine.mode=COMPOSITE_CRC``) and ``MD5`` are layout-independent; the default
``MD5-of-xMD5-of-yCRC32C`` depends on block size and is only compared with the same algorithm.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.base import CHUNK, INTERNAL_DIR, TMP_PREFIX, Checksum, DiffEntry, FileStatus, FileSystem

if TYPE_CHECKING:
    from dr_toolkit.secrets import Credentials

_DIFF_TYPES = {"CREATE": "+", "DELETE": "-", "MODIFY": "M", "RENAME": "R"}


def _client_class(kerberos: bool) -> Any:
    from hdfs.client import InsecureClient, _Request

    base: Any = InsecureClient
    if kerberos:
        from hdfs.ext.kerberos import KerberosClient

        base = KerberosClient

    class DrtClient(base):  # type: ignore[misc]
        _get_snapshot_diff = _Request("GET")

    return DrtClient


class WebHdfsFileSystem(FileSystem):
    kind = "webhdfs"
    supports_append = True
    supports_times = True
    supports_permissions = True
    supports_snapshots = True
    cheap_checksum = True

    def __init__(self, namenodes: Sequence[str], *, user: str | None = None, kerberos: bool = False,
                 timeout_s: float = 30.0, credentials: Credentials | None = None) -> None:
        if not namenodes:
            raise ConfigError("WebHDFS filesystem without namenodes", hint="list hdfs.namenodes in the topology")
        self.namenodes = list(namenodes)
        user = user or (credentials.login if credentials else None)
        cls = _client_class(kerberos)
        url = ";".join(self.namenodes)
        self.client = cls(url, timeout=timeout_s) if kerberos else cls(url, user=user or "hdfs", timeout=timeout_s)

    @contextmanager
    def _errors(self, path: str) -> Iterator[None]:
        import requests
        from hdfs.util import HdfsError

        try:
            yield
        except HdfsError as exc:
            exc_name = getattr(exc, "exception", "") or ""
            if exc_name == "FileNotFoundException" or "does not exist" in str(exc) or "not found" in str(exc):
                raise FileNotFoundError(f"{path}: {exc}") from None
            if exc_name == "StandbyException":
                raise UnreachableError(f"no active namenode among {', '.join(self.namenodes)}",
                                       where=path, hint="check the namenodes' HA state") from None
            raise OSError(f"WebHDFS {path}: {exc}") from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise UnreachableError(f"WebHDFS unreachable ({type(exc).__name__})",
                                   where=", ".join(self.namenodes),
                                   hint="check that a namenode is up and its WebHDFS port is open") from None

    @staticmethod
    def _status(path: str, d: dict[str, Any]) -> FileStatus:
        return FileStatus(path, int(d.get("length", 0)), int(d.get("modificationTime", 0)) / 1000.0,
                          d.get("type") == "DIRECTORY", d.get("permission"))

    def _list(self, path: str) -> list[tuple[str, dict[str, Any]]]:
        with self._errors(path):
            return list(self.client.list(path, status=True))

    def _walk(self, root: str, want_tmp: bool) -> Iterator[FileStatus]:
        top = self.stat(root)
        if top is None:
            return
        if not top.is_dir:
            if not want_tmp:
                yield top
            return
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                entries = self._list(d)
            except FileNotFoundError:
                continue
            for name, st in entries:
                p = posixpath.join(d, name)
                if st.get("type") == "DIRECTORY":
                    if not (name == INTERNAL_DIR and d == root):
                        stack.append(p)
                elif name.startswith(TMP_PREFIX) == want_tmp:
                    yield self._status(p, st)

    def list_files(self, root: str) -> Iterator[FileStatus]:
        return self._walk(root, want_tmp=False)

    def list_tmp(self, root: str) -> Iterator[str]:
        return (s.path for s in self._walk(root, want_tmp=True))

    def stat(self, path: str) -> FileStatus | None:
        with self._errors(path):
            d = self.client.status(path, strict=False)
        return None if d is None else self._status(path, d)

    def checksum(self, path: str) -> Checksum | None:
        with self._errors(path):
            d = self.client.checksum(path)
        if not d or not d.get("bytes"):
            return None
        return Checksum(str(d["algorithm"]), str(d["bytes"]).lower())

    def read(self, path: str, offset: int = 0, length: int | None = None, chunk_size: int = CHUNK
             ) -> Iterator[bytes]:
        with self._errors(path), self.client.read(path, offset=offset, length=length,
                                                  chunk_size=chunk_size) as reader:
            yield from reader

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False) -> int:
        n = 0

        def counted() -> Iterator[bytes]:
            nonlocal n
            for c in chunks:
                n += len(c)
                yield c

        with self._errors(path):
            if append:
                self.client.write(path, data=counted(), append=True)
            else:
                self.client.write(path, data=counted(), overwrite=True)
        return n

    def rename(self, src: str, dst: str) -> None:
        with self._errors(src):
            existing = self.client.status(dst, strict=False)
            if existing is not None:
                if existing.get("type") == "DIRECTORY":
                    raise ConfigError(f"cannot replace directory {dst} with a file", hint="remove it first")
                self.client.delete(dst)
            self.client.makedirs(posixpath.dirname(dst) or "/")
            self.client.rename(src, dst)

    def delete(self, path: str, recursive: bool = False) -> bool:
        with self._errors(path):
            return bool(self.client.delete(path, recursive=recursive))

    def mkdirs(self, path: str) -> None:
        with self._errors(path):
            self.client.makedirs(path)

    def set_times(self, path: str, mtime: float) -> None:
        with self._errors(path):
            self.client.set_times(path, modification_time=int(round(mtime * 1000)))

    def set_permission(self, path: str, permission: str) -> None:
        with self._errors(path):
            self.client.set_permission(path, permission)

    def is_snapshottable(self, path: str) -> bool:
        with self._errors(path):
            d = self.client.status(path, strict=False)
        return bool(d and d.get("snapshotEnabled"))

    def create_snapshot(self, path: str, name: str) -> None:
        with self._errors(path):
            self.client.create_snapshot(path, name)

    def delete_snapshot(self, path: str, name: str) -> None:
        with self._errors(path):
            self.client.delete_snapshot(path, name)

    def snapshot_exists(self, path: str, name: str) -> bool:
        return self.stat(self.snapshot_path(path, name)) is not None

    def snapshot_diff(self, path: str, from_snapshot: str, to_snapshot: str) -> list[DiffEntry]:
        with self._errors(path):
            res = self.client._get_snapshot_diff(path, oldsnapshotname=from_snapshot, snapshotname=to_snapshot)
        out = []
        for d in res.json()["SnapshotDiffReport"]["diffList"]:
            src = d.get("sourcePath", "")
            tgt = d.get("targetPath")
            out.append(DiffEntry(_DIFF_TYPES.get(d["type"], d["type"]), src.strip("/"),
                                 tgt.strip("/") if tgt else None))
        return out

    def close(self) -> None:
        self.client._session.close()
