"""A local directory tree as a filesystem (the embedded default's stand-in for HDFS)."""

from __future__ import annotations

import os
import shutil
import stat as st
from collections.abc import Iterable, Iterator

from dr_toolkit.errors import ConfigError
from dr_toolkit.fs.base import CHUNK, INTERNAL_DIR, TMP_PREFIX, Checksum, ContentHash, FileStatus, FileSystem


class LocalFileSystem(FileSystem):
    kind = "local"
    supports_append = True
    supports_times = True
    supports_permissions = True
    cheap_checksum = False  # CRC32C of the content: the file is read

    def _walk(self, root: str, want_tmp: bool) -> Iterator[os.DirEntry[str]]:
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                it = os.scandir(d)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != INTERNAL_DIR or d != root:
                            stack.append(e.path)
                    elif e.is_file(follow_symlinks=True) and e.name.startswith(TMP_PREFIX) == want_tmp:
                        yield e

    def list_files(self, root: str) -> Iterator[FileStatus]:
        if os.path.isfile(root):
            s = self.stat(root)
            if s:
                yield s
            return
        for e in self._walk(root, want_tmp=False):
            r = e.stat()
            yield FileStatus(e.path, r.st_size, r.st_mtime_ns / 1e9, False, format(st.S_IMODE(r.st_mode), "o"))

    def list_tmp(self, root: str) -> Iterator[str]:
        for e in self._walk(root, want_tmp=True):
            yield e.path

    def stat(self, path: str) -> FileStatus | None:
        try:
            s = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStatus(path, s.st_size if not st.S_ISDIR(s.st_mode) else 0, s.st_mtime_ns / 1e9,
                          st.S_ISDIR(s.st_mode), format(st.S_IMODE(s.st_mode), "o"))

    def checksum(self, path: str) -> Checksum | None:
        h = ContentHash()
        for chunk in self.read(path, chunk_size=4 << 20):
            h.update(chunk)
        return h.checksum()

    def read(self, path: str, offset: int = 0, length: int | None = None, chunk_size: int = CHUNK
             ) -> Iterator[bytes]:
        with open(path, "rb", buffering=0) as f:
            if offset:
                f.seek(offset)
            left = length
            while left is None or left > 0:
                b = f.read(chunk_size if left is None else min(chunk_size, left))
                if not b:
                    break
                if left is not None:
                    left -= len(b)
                yield b

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False) -> int:
        os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
        n = 0
        with open(path, "ab" if append else "wb") as f:
            for c in chunks:
                f.write(c)
                n += len(c)
        return n

    def rename(self, src: str, dst: str) -> None:
        os.makedirs(os.path.dirname(dst) or "/", exist_ok=True)
        if os.path.isdir(dst) and not os.path.isdir(src):
            raise ConfigError(f"cannot replace directory {dst} with a file", hint="remove the directory first")
        os.replace(src, dst)

    def delete(self, path: str, recursive: bool = False) -> bool:
        if os.path.isdir(path) and not os.path.islink(path):
            if recursive:
                shutil.rmtree(path)
            else:
                os.rmdir(path)
            return True
        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return False

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def set_times(self, path: str, mtime: float) -> None:
        ns = int(round(mtime * 1e9))
        os.utime(path, ns=(ns, ns))

    def set_permission(self, path: str, permission: str) -> None:
        os.chmod(path, int(permission, 8))
