"""A local directory tree as a filesystem (the embedded default's stand-in for HDFS)."""

from __future__ import annotations

import os
import shutil
import stat as st
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

from dr_toolkit.fs.base import CHUNK, TMP_PREFIX, Checksum, FileStatus, FileSystem, Skipped

FRESH_S = 0.05  # a directory changed this recently may change again under the same time stamp
_PROC_FD = os.path.isdir("/proc/self/fd") and hasattr(os, "O_PATH")


def _real_dir(d: str) -> str:
    """``d``'s real path as the kernel resolves it: one open, one readlink of /proc/self/fd (about
    6x faster than :func:`os.path.realpath`, which lstat's every component from Python);
    :func:`os.path.realpath` where /proc is not mounted or ``d`` does not exist yet."""
    if _PROC_FD:
        try:
            fd = os.open(d, os.O_PATH | os.O_DIRECTORY)
        except OSError:
            return os.path.realpath(d)
        try:
            return _fd_path(fd)
        finally:
            os.close(fd)
    return os.path.realpath(d)


def _fd_path(fd: int) -> str:
    """The path the kernel resolved for an open descriptor (Linux: /proc/self/fd)."""
    return os.readlink(f"/proc/self/fd/{fd}")


class LocalFileSystem(FileSystem):
    kind = "local"
    supports_append = True
    supports_times = True
    supports_permissions = True
    supports_atomic_replace = True  # rename(2)
    cheap_checksum = False  # CRC32C of the content: the file is read
    settle_s = FRESH_S
    #: the real path every write, rename and delete must stay under (set for a copy target):
    #: no parent of a path written may be a symlink (see :meth:`confined`)
    confine: str | None = None

    def confined(self, path: str) -> None:
        """Refuse (OSError, one line) a write, rename or delete of ``path`` that would leave
        :attr:`confine`: ``path`` must lie under it and every existing parent must be a real
        directory, not a symlink (a link planted in the target is never followed). The last
        component itself is never followed: files are opened with O_NOFOLLOW, renames and
        deletes act on a link, not on what it names."""
        c = self.confine
        if c is None:
            return
        d = self._inside(path, c)
        if _real_dir(d) == d:
            return
        self._refuse(path, c, d)

    @staticmethod
    def _inside(path: str, c: str) -> str:
        d = os.path.dirname(path)
        if not (d == c or d.startswith(c + "/") or c == "/"):
            raise OSError(f"refusing to write {path}: outside the target's real path {c}")
        return d

    @staticmethod
    def _refuse(path: str, c: str, d: str) -> NoReturn:
        p = c
        for part in d[len(c):].strip("/").split("/"):
            p = os.path.join(p, part)
            if os.path.islink(p):
                raise OSError(f"refusing to write {path}: {p} is a symlink in the target (not followed: nothing "
                              f"is written outside {c})")
        raise OSError(f"refusing to write {path}: its parent resolves outside {c}")

    def open_confined(self, path: str, flags: int, mode: int = 0o666) -> int:
        """``os.open`` of ``path`` (its parents made when missing) relative to a descriptor of its
        directory whose real path was checked (:meth:`confined`): the file is created in the
        directory that was checked, even if a parent is swapped for a link right after."""
        dfd = self.dir_fd(path)
        if dfd is None:
            self.confined(path)
            os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
            return os.open(path, flags | os.O_NOFOLLOW, mode)
        try:
            return os.open(os.path.basename(path), flags | os.O_NOFOLLOW, mode, dir_fd=dfd)
        finally:
            os.close(dfd)

    def dir_fd(self, path: str) -> int | None:
        """A descriptor (``O_PATH``) of ``path``'s directory, made when missing, whose real path
        the kernel resolved and that was checked to be :attr:`confine`'s or below it (no parent
        a symlink): what is created, renamed or changed relative to it stays in the directory that
        was checked. The caller closes it. None where /proc is not mounted (no such check)."""
        if not _PROC_FD:
            return None
        c = self.confine
        d = os.path.dirname(path) or "/"
        if c is not None:
            d = self._inside(path, c)
        try:
            dfd = os.open(d, os.O_PATH | os.O_DIRECTORY)
        except FileNotFoundError:
            self.confined(path)  # before a directory is made: no parent may be a link
            os.makedirs(d, exist_ok=True)
            dfd = os.open(d, os.O_PATH | os.O_DIRECTORY)
        if c is not None and _fd_path(dfd) != d:
            os.close(dfd)
            self._refuse(path, c, d)
        return dfd

    def still_confined(self, dfd: int, path: str) -> None:
        """Refuse (OSError, one line) when the directory of ``dfd`` (from :meth:`dir_fd` for
        ``path``) is no longer where it was checked — moved away, a symlink put in its place —
        before anything is renamed into it: a file is never placed in a directory that left the
        target."""
        c = self.confine
        if c is None:
            return
        d = self._inside(path, c)
        if _fd_path(dfd) != d:
            self._refuse(path, c, d)

    @staticmethod
    def _status(path: str, r: os.stat_result) -> FileStatus:
        # the change token: inode and ctime (ctime cannot be put back, unlike mtime)
        return FileStatus(path, r.st_size, r.st_mtime_ns / 1e9, False, format(st.S_IMODE(r.st_mode), "o"),
                          f"{r.st_ino}:{r.st_ctime_ns}")

    @staticmethod
    def _dtoken(r: os.stat_result) -> Any:
        """A directory's token: mtime and inode. The kernel stamps times from a coarse clock (a
        few ms): a directory looked at within ``settle_s`` of its stamp could change again under
        the same stamp, so its token is marked fresh (see :meth:`token_settled`)."""
        if time.time() - r.st_mtime_ns / 1e9 < FRESH_S:
            return ("fresh", r.st_mtime_ns, r.st_ino)
        return (r.st_mtime_ns, r.st_ino)

    @staticmethod
    def token_settled(token: Any) -> bool:
        return not (isinstance(token, tuple) and token and token[0] == "fresh")

    def dir_token(self, path: str) -> Any:
        try:
            r = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return self._dtoken(r) if st.S_ISDIR(r.st_mode) else None

    def _walk(self, root: str, skipped: Skipped | None, want_tmp: bool, dirs: dict[str, Any] | None = None,
              recursive: bool = True) -> Iterator[tuple[str, os.stat_result]]:
        if dirs is not None:
            try:
                dirs[root] = self._dtoken(os.stat(root))
            except (FileNotFoundError, NotADirectoryError):
                return
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except (FileNotFoundError, NotADirectoryError):
                continue
            empty = not entries
            for path, r in self._step(entries, want_tmp, skipped, dirs):
                if r is not None:
                    yield path, r
                elif recursive:
                    stack.append(path)
            if empty and skipped and not want_tmp and d != root:
                skipped(d, "empty directory")

    def _step(self, entries: list[os.DirEntry[str]], want_tmp: bool, skipped: Skipped | None,
              dirs: dict[str, Any] | None) -> Iterator[tuple[str, os.stat_result | None]]:
        """One directory's entries as one step of :meth:`_walk`: ``(path, stat)`` of its regular
        files (only the temporary ones when ``want_tmp``), ``(path, None)`` of each subdirectory
        with its token in ``dirs`` before it is yielded (before its own entries are read), what is
        passed over reported through ``skipped``."""
        for e in entries:
            if e.is_symlink():
                if skipped and not want_tmp:
                    skipped(e.path, "symlink" if os.path.exists(e.path) else "dangling symlink")
                continue
            if e.is_dir(follow_symlinks=False):
                if dirs is not None:
                    try:
                        dirs[e.path] = self._dtoken(e.stat(follow_symlinks=False))
                    except (FileNotFoundError, NotADirectoryError):
                        continue  # gone since the directory was read: its parent's token moved
                yield e.path, None
                continue
            if e.name.startswith(TMP_PREFIX):
                if want_tmp:
                    yield e.path, e.stat(follow_symlinks=False)
                elif skipped:
                    skipped(e.path, "named like a temporary file (.drt-tmp.*)")
                continue
            if want_tmp:
                continue
            try:
                r = e.stat(follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                continue  # gone since the directory was read (renamed or deleted meanwhile)
            if not st.S_ISREG(r.st_mode):
                if skipped:
                    skipped(e.path, "not a regular file")
                continue
            yield e.path, r

    def list_dir(self, path: str, skipped: Skipped | None = None, dirs: dict[str, Any] | None = None
                 ) -> Iterator[FileStatus]:
        """One ``scandir`` of ``path`` (see :meth:`FileSystem.list_dir`), its own status not read again."""
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return
        for p, r in self._step(entries, False, skipped, dirs):
            yield FileStatus(p, 0, 0.0, True) if r is None else self._status(p, r)

    def list_files(self, root: str, skipped: Skipped | None = None, dirs: dict[str, Any] | None = None,
                   recursive: bool = True) -> Iterator[FileStatus]:
        try:
            top = os.lstat(root)
        except (FileNotFoundError, NotADirectoryError):
            return
        if st.S_ISLNK(top.st_mode):
            top = os.stat(root)  # the root named by the user may be a link; links below it are not followed
        if st.S_ISREG(top.st_mode):
            yield self._status(root, top)
            return
        for path, r in self._walk(root, skipped, want_tmp=False, dirs=dirs, recursive=recursive):
            yield self._status(path, r)

    def list_dirs(self, root: str) -> Iterator[str]:
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    for e in it:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                            yield e.path
            except (FileNotFoundError, NotADirectoryError):
                continue

    def list_tmp(self, root: str) -> Iterator[str]:
        for path, _r in self._walk(root, None, want_tmp=True):
            yield path

    def stat(self, path: str) -> FileStatus | None:
        try:
            s = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if st.S_ISDIR(s.st_mode):
            return FileStatus(path, 0, s.st_mtime_ns / 1e9, True, format(st.S_IMODE(s.st_mode), "o"))
        return self._status(path, s)

    def checksum(self, path: str) -> Checksum | None:
        return self.content_checksum(path)

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

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False, block_size: int | None = None,
              bytes_per_checksum: int | None = None, size_hint: int | None = None) -> int:
        n = 0
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        with open(self.open_confined(path, flags), "ab" if append else "wb") as f:
            for c in chunks:
                f.write(c)
                n += len(c)
        return n

    def rename(self, src: str, dst: str) -> None:
        self.confined(src)
        if os.path.dirname(dst) != os.path.dirname(src):
            self.confined(dst)
        try:
            os.replace(src, dst)  # rename(2): atomic; a file onto a directory fails with EISDIR
        except FileNotFoundError:
            if not os.path.lexists(src):
                raise
            os.makedirs(os.path.dirname(dst) or "/", exist_ok=True)
            os.replace(src, dst)
        except IsADirectoryError:
            raise IsADirectoryError(f"cannot replace directory {dst} with a file") from None

    def delete(self, path: str, recursive: bool = False) -> bool:
        self.confined(path)
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
        self.confined(os.path.join(path, "x"))
        os.makedirs(path, exist_ok=True)

    def set_times(self, path: str, mtime: float) -> None:
        self.confined(path)
        ns = int(round(mtime * 1e9))
        os.utime(path, ns=(ns, ns), follow_symlinks=False)

    preservable = frozenset({"owner", "group"})

    def attributes(self, path: str, which: frozenset[str]) -> dict[str, Any]:
        import grp
        import pwd

        st_ = os.lstat(path)
        out: dict[str, Any] = {}
        if "owner" in which:
            try:
                out["owner"] = pwd.getpwuid(st_.st_uid).pw_name
            except KeyError:
                out["owner"] = str(st_.st_uid)
        if "group" in which:
            try:
                out["group"] = grp.getgrgid(st_.st_gid).gr_name
            except KeyError:
                out["group"] = str(st_.st_gid)
        return out

    def set_attributes(self, path: str, attrs: dict[str, Any], permission: str | None = None) -> None:
        """owner/group by name (a number when the name is unknown here); chown needs root."""
        import grp
        import pwd

        self.confined(path)

        def numeric(name: str, kind: str, lookup: Callable[[str], int]) -> int:
            try:
                return lookup(name)
            except KeyError:
                if name.isdigit():
                    return int(name)
                raise OSError(f"no {kind} {name!r} on this machine (for {path})") from None

        u = numeric(attrs["owner"], "user", lambda n: pwd.getpwnam(n).pw_uid) if attrs.get("owner") else -1
        g = numeric(attrs["group"], "group", lambda n: grp.getgrnam(n).gr_gid) if attrs.get("group") else -1
        if u != -1 or g != -1:
            os.chown(path, u, g, follow_symlinks=False)

    def set_permission(self, path: str, permission: str) -> None:
        self.confined(path)
        if os.path.islink(path):
            raise OSError(f"refusing to chmod {path}: a symlink")
        os.chmod(path, int(permission, 8))
