"""HDFS through WebHDFS (the ``hdfs`` package): several namenodes fail over by themselves
(StandbyException, refused connection or timeout → next namenode), Kerberos as an option,
snapshots and GETSNAPSHOTDIFF. Every request carries ``timeout_s``.

**Kerberos.** With ``kerberos=True`` (the topology's ``hdfs.kerberos``) or a principal in the
environment (``DRT_KERBEROS_PRINCIPAL``), requests authenticate with SPNEGO
(:class:`dr_toolkit.kerberos.SpnegoAuth`: a 401 asking to ``Negotiate`` is answered with a ticket
for ``HTTP/<namenode host>``, then Hadoop's signed cookie carries the session) and send no
``user.name``; the NameNode's redirects to DataNodes carry its delegation token. The ticket comes
from the endpoint's connection or the environment (:class:`dr_toolkit.kerberos.KerberosConfig`),
in a private credential cache, renewed for long runs. A cluster that asks for Kerberos when none
is configured is a :class:`~dr_toolkit.kerberos.KerberosError` (exit 3) saying what to set.
:func:`http_get` (from :mod:`dr_toolkit.kerberos`, re-exported here) is the same for any other
GET on a Hadoop HTTP server (``/jmx``).

**Checksums, as a real cluster answers them.** Over WebHDFS the NameNode redirects
GETFILECHECKSUM to a DataNode, whose handler always computes HDFS's default
``MD5-of-<crcPerBlock>MD5-of-<bytesPerCRC>CRC32C`` (the REST call has no combine-mode
parameter; only HttpFS honours ``dfs.checksum.combine.mode=COMPOSITE_CRC``). That value
depends on the file's block size and bytes-per-checksum, and HDFS names it with both
(``crcPerBlock`` = blockSize/bytesPerCRC, 0 for a single-block file), so :meth:`checksum`
returns it under that exact name and the copy layer compares it only with a checksum of the
same name (:meth:`Checksum.comparable`): HDFS→HDFS with the source's block size preserved
on create (:meth:`write` ``block_size``) and the same bytes-per-checksum on both clusters,
or against :class:`dr_toolkit.fs.hdfs_checksum.Md5Md5Crc32c` computed while streaming.
``COMPOSITE-CRC32C`` is returned only when the server says so (HttpFS).

**Open files.** A file open for write has no checksum yet: HDFS answers ``Fail to get
checksum, since file … is under construction``; :meth:`checksum` raises
:class:`UnderConstruction` with the visible length (:meth:`visible_length`: GETFILESTATUS may
lag behind what readers see after a plain ``hflush``; OPEN serves the visible bytes).

**Atomic replace.** :meth:`rename` is one ``RENAME`` with ``renameoptions=OVERWRITE``
(HDFS's ``rename2``): there is no moment without the target file.

**Snapshot diffs** keep HDFS's semantics (see :meth:`snapshot_diff`).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.base import (
    CHUNK,
    TMP_PREFIX,
    Checksum,
    DiffEntry,
    FileStatus,
    FileSystem,
    Skipped,
    SnapshotInfo,
    UnderConstruction,
)
from dr_toolkit.kerberos import (
    KerberosError,
    SpnegoAuth,
    kerberos_required,
)
from dr_toolkit.kerberos import http_get as http_get  # re-exported: GETs on a NameNode's /jmx with SPNEGO
from dr_toolkit.kerberos import kerberos_wanted as kerberos_wanted  # re-exported
from dr_toolkit.secrets import redact

if TYPE_CHECKING:
    from dr_toolkit.secrets import Credentials


_DIFF_TYPES = {"CREATE": "+", "DELETE": "-", "MODIFY": "M", "RENAME": "R"}
UNDER_CONSTRUCTION = "is under construction"


class NotWebHdfs(Exception):
    """A non-2xx answer without WebHDFS's ``RemoteException`` JSON: something other than a NameNode's
    (or DataNode's) WebHDFS answered — a web server on the wrong port, a proxy's error page."""

    def __init__(self, status: int, content_type: str, url: str) -> None:
        super().__init__(f"HTTP {status} ({content_type or 'no content type'}) from {url}")
        self.status, self.content_type, self.url = status, content_type, url


def _webhdfs_answer(response: Any, *args: Any, **kwargs: Any) -> Any:
    """A requests response hook: a failed answer must be WebHDFS's own (``{"RemoteException": …}``),
    else :class:`NotWebHdfs` — the ``hdfs`` library would take any non-2xx answer for "no such
    file" (``status(strict=False)`` returns None) or quote an HTML page as the error. 401/407 are
    left to the library and to the Kerberos handshake, which answers them itself. A
    ``SecurityException`` (the NameNode refusing our credentials: a token expired or cancelled) is
    a :class:`KerberosError`, for the same reason: it is not "no such file"."""
    if response.ok or response.status_code in (401, 407):
        return response
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("RemoteException"), dict):
        remote = body["RemoteException"]
        if remote.get("exception") == "SecurityException":
            # the NameNode refused who we are (an expired or cancelled delegation token, a ticket it
            # cannot use): never let it read as "no such file" (the hdfs library's strict=False does)
            from urllib.parse import urlsplit

            detail = str(remote.get("message") or "").split("\n")[0][:300]
            raise KerberosError(f"the NameNode refused our credentials (SecurityException: {detail})",
                                where=f"webhdfs://{urlsplit(response.url).netloc}",
                                hint="a delegation token expires or is cancelled: fetch a new one with a valid "
                                     "ticket; check the principal and keytab")
        return response
    raise NotWebHdfs(response.status_code, response.headers.get("Content-Type", "").split(";")[0].strip(),
                     response.url)


class _RedactUrls(logging.Filter):
    """urllib3 logs each request's URL at DEBUG (``drt -vv``): a delegation token in it is hidden."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        hidden = redact(msg)
        if hidden != msg:
            record.msg, record.args = hidden, ()
        return True


def _hide_tokens_in_logs() -> None:
    lg = logging.getLogger("urllib3.connectionpool")
    if not any(isinstance(f, _RedactUrls) for f in lg.filters):
        lg.addFilter(_RedactUrls())


def _client_class(kerberos: bool) -> Any:
    from hdfs.client import Client, InsecureClient, _Request

    base: Any = Client if kerberos else InsecureClient

    class DrtClient(base):  # type: ignore[misc]
        _get_snapshot_diff = _Request("GET")
        _get_snapshot_list = _Request("GET")  # GETSNAPSHOTLIST (Hadoop 3.3+): snapshot ids and times
        _rename2 = _Request("PUT")  # op name from the attribute: RENAME (digits dropped)
        _concat = _Request("POST")  # CONCAT: the sources' blocks moved onto the target's end, atomically
        _get_xattrs = _Request("GET")  # GETXATTRS (all of them)
        _set_xattr = _Request("PUT")  # SETXATTR
        _get_delegation_token = _Request("GET")  # GETDELEGATIONTOKEN
        _cancel_delegation_token = _Request("PUT")  # CANCELDELEGATIONTOKEN
        _renew_delegation_token = _Request("PUT")  # RENEWDELEGATIONTOKEN

    # op names from attributes lose their underscores: this one is spelled out. GET_BLOCK_LOCATIONS
    # answers the NameNode's LocatedBlocks, with isUnderConstruction
    DrtClient._get_block_locations = _Request("GET").to_method("GET_BLOCK_LOCATIONS")

    return DrtClient


class WebHdfsFileSystem(FileSystem):
    kind = "webhdfs"
    supports_append = True
    supports_times = True
    supports_permissions = True
    supports_snapshots = True
    cheap_checksum = True
    supports_atomic_replace = True
    content_token = False  # fileId survives TRUNCATE + APPEND (+ SETTIMES): see FileSystem.content_token

    def __init__(self, namenodes: Sequence[str], *, user: str | None = None, kerberos: bool = False,
                 timeout_s: float = 30.0, credentials: Credentials | None = None) -> None:
        if not namenodes:
            raise ConfigError("WebHDFS filesystem without namenodes", hint="list hdfs.namenodes in the topology")
        if timeout_s <= 0:
            raise ConfigError(f"WebHDFS timeout must be positive, got {timeout_s}", hint="set hdfs.timeout_s")
        self.namenodes = list(namenodes)
        self.timeout_s = timeout_s
        token = credentials.extra.get("delegation") if credentials is not None and credentials.extra else None
        self.kerberos = None if token else kerberos_wanted(kerberos, credentials)
        user = user or (credentials.login if credentials and self.kerberos is None else None)
        cls = _client_class(self.kerberos is not None or bool(token))
        url = ";".join(self.namenodes)
        if token:
            # a delegation token (fetched by a driver that holds a ticket) stands in for Kerberos on
            # executors: every request carries it, no ticket and no user.name needed
            self.client = cls(url, timeout=timeout_s)
            self.client._session.params = {"delegation": str(token)}
            _hide_tokens_in_logs()
        elif self.kerberos is not None:
            # no user.name: the NameNode takes the user from the ticket (and refuses a different one)
            self.client = cls(url, timeout=timeout_s)
            self.client._session.auth = SpnegoAuth(self.kerberos)
            _hide_tokens_in_logs()  # DataNode redirects carry the NameNode's token; CANCEL carries ours
        else:
            self.client = cls(url, user=user or "hdfs", timeout=timeout_s)
            if credentials is not None and credentials.password:
                # a gateway in front of WebHDFS (Knox, HttpFS behind a proxy) takes HTTP basic auth
                self.client._session.auth = (credentials.login or user or "hdfs", credentials.password)
            self.client._session.hooks["response"].append(kerberos_required)
        self.client._session.hooks["response"].append(_webhdfs_answer)

    def delegation_token(self, renewer: str | None = None) -> str:
        """GETDELEGATIONTOKEN: a token of the authenticated principal, for processes that hold no
        ticket (Spark executors): ``Credentials(extra={"delegation": token})`` opens the same
        filesystem with it. The token is a secret (never log it); it lives as the NameNode's
        ``dfs.namenode.delegation.token.*`` settings say (1 day unless renewed, 7 days at most)."""
        with self._errors("/"):
            r = self.client._get_delegation_token("/", **({"renewer": renewer} if renewer else {}))
            token = (r.json().get("Token") or {}).get("urlString")
        if not token:
            raise ConfigError("the NameNode gave no delegation token (is the cluster kerberized?)",
                              where=", ".join(self.namenodes), hint="delegation tokens need Kerberos on the cluster")
        return str(token)

    def renew_delegation_token(self, token: str) -> float:
        """RENEWDELEGATIONTOKEN (as its renewer: the principal that fetched it): the token's new
        expiry, epoch seconds — the NameNode's ``dfs.namenode.delegation.token.renew-interval``
        from now (1 day by default), never past its maximum lifetime (7 days by default)."""
        with self._errors("/"):
            r = self.client._renew_delegation_token("/", token=token)
            return int(r.json()["long"]) / 1000.0

    def cancel_delegation_token(self, token: str) -> None:
        """CANCELDELEGATIONTOKEN: the token stops working at once (a driver when its job is done)."""
        with self._errors("/"):
            self.client._cancel_delegation_token("/", token=token)

    # -- errors ------------------------------------------------------------------------------------
    def _status_or_none(self, path: str) -> dict[str, Any] | None:
        """GETFILESTATUS; None only when the NameNode answers that ``path`` does not exist. The hdfs
        library's ``status(strict=False)`` returns None for *every* refusal — an
        AccessControlException, an invalid path, a server error — which would read a tree we may
        not read as absent (an empty source listing, a cold "missing" everything): those raise."""
        from hdfs.util import HdfsError

        try:
            with self._errors(path):
                try:
                    d = self.client.status(path)
                except HdfsError as exc:
                    # an inode path (/.reserved/.inodes/<id>) of an inode that is gone: the NameNode
                    # answers IllegalArgumentException, not FileNotFoundException — absent too
                    if "/.reserved/.inodes/" in path and getattr(exc, "exception", "") == "IllegalArgumentException":
                        return None
                    raise
        except FileNotFoundError:
            return None
        return d if isinstance(d, dict) else None

    @contextmanager
    def _errors(self, path: str) -> Iterator[None]:
        import requests
        from hdfs.util import HdfsError

        try:
            yield
        except HdfsError as exc:
            exc_name = getattr(exc, "exception", "") or ""
            text = str(exc)
            if exc_name == "FileNotFoundException" or "does not exist" in text or "not found" in text:
                raise FileNotFoundError(f"{path}: {text}") from None
            if exc_name == "StandbyException":
                raise UnreachableError(f"no active namenode among {', '.join(self.namenodes)}",
                                       where=path, hint="check the namenodes' HA state") from None
            if UNDER_CONSTRUCTION in text:
                raise UnderConstruction(path, None, f"{path} is open for write (under construction)") from None
            raise OSError(f"WebHDFS {path}: {exc_name + ': ' if exc_name else ''}{text}") from None
        except NotWebHdfs as exc:
            from urllib.parse import urlsplit

            address = f"webhdfs://{urlsplit(exc.url).netloc}"
            what = (f"{address} answered HTTP {exc.status} ({exc.content_type or 'no content type'}), "
                    "not a NameNode's WebHDFS (/webhdfs/v1)")
            if exc.status >= 500:  # a gateway or proxy whose backend is down: unreachable, not misconfigured
                raise UnreachableError(what, where=path, hint="check the NameNode behind it and the address "
                                                              "(NameNode HTTP port, 9870 by default)") from None
            raise ConfigError(what, where=path,
                              hint="check the address (NameNode HTTP port, 9870 by default)") from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise UnreachableError(f"WebHDFS unreachable ({type(exc).__name__}, timeout {self.timeout_s:g} s)",
                                   where=", ".join(self.namenodes),
                                   hint="check that a namenode is up and its WebHDFS port is open") from None

    # -- listing -----------------------------------------------------------------------------------
    @staticmethod
    def _status(path: str, d: dict[str, Any]) -> FileStatus:
        is_dir = d.get("type") == "DIRECTORY"
        file_id = d.get("fileId")
        return FileStatus(path, int(d.get("length", 0)), int(d.get("modificationTime", 0)) / 1000.0,
                          is_dir, d.get("permission"), str(file_id) if file_id is not None else None,
                          None if is_dir else (int(d["blockSize"]) if d.get("blockSize") else None))

    def _list(self, path: str) -> list[tuple[str, dict[str, Any]]]:
        with self._errors(path):
            return list(self.client.list(path, status=True))

    @staticmethod
    def _dtoken(d: dict[str, Any]) -> Any:
        # the NameNode stamps a directory's modificationTime (ms) on every create, delete and
        # rename of an entry in it; the fileId tells a directory from another put under its name
        return (int(d.get("modificationTime", 0)), d.get("fileId"))

    def dir_token(self, path: str) -> Any:
        d = self._status_or_none(path)
        return self._dtoken(d) if d is not None and d.get("type") == "DIRECTORY" else None

    def _walk(self, root: str, want_tmp: bool, skipped: Skipped | None = None,
              dirs: list[str] | None = None, tokens: dict[str, Any] | None = None,
              recursive: bool = True) -> Iterator[FileStatus]:
        top = self._status_or_none(root)
        if top is None:
            return
        if tokens is not None and top.get("type") == "DIRECTORY":
            tokens[root] = self._dtoken(top)
        if top.get("type") != "DIRECTORY":
            if top.get("type") == "SYMLINK":
                if skipped and not want_tmp:
                    skipped(root, "symlink")
                return
            if posixpath.basename(root).startswith(TMP_PREFIX) == want_tmp:
                yield self._status(root, top)
            elif skipped and not want_tmp:
                skipped(root, "named like a temporary file")
            return
        stack = [root]
        while stack:
            d = stack.pop()
            try:
                entries = self._list(d)
            except FileNotFoundError:
                continue
            if not entries and d != root and skipped and not want_tmp:
                skipped(d, "empty directory")
            for s in self._step(d, entries, want_tmp, skipped, tokens):
                if not s.is_dir:
                    yield s
                    continue
                if recursive:
                    stack.append(s.path)
                if dirs is not None:
                    dirs.append(s.path)

    def _step(self, d: str, entries: list[tuple[str, dict[str, Any]]], want_tmp: bool, skipped: Skipped | None,
              tokens: dict[str, Any] | None) -> Iterator[FileStatus]:
        """One directory's LISTSTATUS as one step of a walk: its files (only the temporary ones when
        ``want_tmp``), each subdirectory as ``FileStatus(path, 0, 0.0, is_dir=True)`` with its token
        in ``tokens`` before it is yielded (before its own entries are read), what is passed over
        reported through ``skipped``."""
        for name, st in entries:
            p = posixpath.join(d, name)
            kind = st.get("type")
            if kind == "DIRECTORY":
                if tokens is not None:
                    tokens[p] = self._dtoken(st)
                yield FileStatus(p, 0, 0.0, True)
            elif kind == "SYMLINK":
                if skipped and not want_tmp:
                    skipped(p, "symlink")
            elif name.startswith(TMP_PREFIX):
                if want_tmp:
                    yield self._status(p, st)
                elif skipped:
                    skipped(p, "named like a temporary file")
            elif not want_tmp:
                yield self._status(p, st)

    def list_files(self, root: str, skipped: Skipped | None = None, dirs: dict[str, Any] | None = None,
                   recursive: bool = True) -> Iterator[FileStatus]:
        return self._walk(root, want_tmp=False, skipped=skipped, tokens=dirs, recursive=recursive)

    def list_dir(self, path: str, skipped: Skipped | None = None, dirs: dict[str, Any] | None = None
                 ) -> Iterator[FileStatus]:
        """One LISTSTATUS of ``path`` (see :meth:`FileSystem.list_dir`), no GETFILESTATUS of it first."""
        try:
            entries = self._list(path)
        except FileNotFoundError:
            return
        yield from self._step(path, entries, False, skipped, dirs)

    def list_dirs(self, root: str) -> Iterator[str]:
        dirs: list[str] = []
        for _ in self._walk(root, want_tmp=True, dirs=dirs):
            pass
        return iter(dirs)

    def list_tmp(self, root: str) -> Iterator[str]:
        return (s.path for s in self._walk(root, want_tmp=True))

    def stat(self, path: str) -> FileStatus | None:
        d = self._status_or_none(path)
        return None if d is None else self._status(path, d)

    def content_summary(self, path: str) -> dict[str, int]:
        """GETCONTENTSUMMARY: the NameNode's counts under ``path`` (``fileCount``,
        ``directoryCount``, ``length``, ``spaceConsumed``) in one call, no listing through the client."""
        with self._errors(path):
            d = self.client.content(path)
        return {k: int(d.get(k) or 0) for k in ("fileCount", "directoryCount", "length", "spaceConsumed")}

    # -- checksums ---------------------------------------------------------------------------------
    def checksum(self, path: str) -> Checksum | None:
        """GETFILECHECKSUM under the algorithm name the server gives (see the module doc).
        Raises :class:`UnderConstruction` (with the visible length) for a file open for write."""
        try:
            with self._errors(path):
                d = self.client.checksum(path)
        except UnderConstruction:
            raise UnderConstruction(path, self.visible_length(path),
                                    f"{path} is open for write (under construction): no checksum until it is "
                                    "closed") from None
        if not d or not d.get("bytes") or not d.get("algorithm"):
            return None
        value = str(d["bytes"]).lower()
        n = d.get("length")
        if isinstance(n, int) and 0 < n * 2 < len(value):
            value = value[: n * 2]
        return Checksum(str(d["algorithm"]), value)

    def is_open(self, path: str) -> bool:
        """Under construction now, from the NameNode's ``LocatedBlocks`` (GET_BLOCK_LOCATIONS,
        one NameNode call, no DataNode read). GETFILESTATUS has no such flag. False when the file
        is gone.

        A file in a snapshot (``…/.snapshot/<name>/…``) cannot say: the real NameNode answers
        ``isUnderConstruction: false`` and a complete last block for the snapshot of a file still
        being written. So the snapshot is asked which inode it holds (its ``fileId``) and that
        inode is asked, through ``/.reserved/.inodes/<fileId>`` — never the live path of the same
        name, which may hold another file, or be unreachable (a parent that became a file:
        ``AccessControlException … is not a directory``). The NameNode resolves an inode path
        through the inode's parents: an inode no longer in the live tree (deleted, kept only by
        snapshots — HDFS drops the lease of a file deleted while open) answers "not found", "is
        not a directory" or another file's status there: not open."""
        if "/.snapshot/" in path:
            st = self.stat(path)
            if st is None or st.is_dir or st.version is None:
                return False
            path = f"/.reserved/.inodes/{st.version}"
            try:
                now = self.stat(path)
            except OSError as exc:
                if "is not a directory" in str(exc):
                    return False
                raise
            if now is None or now.is_dir or now.version != st.version:
                return False
        try:
            with self._errors(path):
                d = self.client._get_block_locations(path, offset=0, length=1).json()
        except FileNotFoundError:
            return False
        blocks = d.get("LocatedBlocks") or {}
        return bool(blocks.get("isUnderConstruction"))

    def visible_length(self, path: str) -> int | None:
        """The bytes a reader sees now. For a file open for write GETFILESTATUS shows only what
        the NameNode knows (its length at the last fsync: the first hflush after a block was
        allocated, or an ``hsync`` with UPDATE_LENGTH); the datanode serves up to the visible
        length, so the tail past the NameNode's length is read (and counted, not kept). The
        NameNode refuses an OPEN at ``offset >= length`` ("Offset=N out of the range [0, N)"),
        so the tail is read from the last byte it knows. None when the file is gone."""
        st = self.stat(path)
        if st is None:
            return None
        start = max(st.size - 1, 0)
        extra = 0
        try:
            for chunk in self.read(path, offset=start):
                extra += len(chunk)
        except FileNotFoundError:
            return None
        return max(st.size, start + extra)

    # -- data --------------------------------------------------------------------------------------
    def read(self, path: str, offset: int = 0, length: int | None = None, chunk_size: int = CHUNK
             ) -> Iterator[bytes]:
        with self._errors(path), self.client.read(path, offset=offset, length=length,
                                                  chunk_size=chunk_size) as reader:
            yield from reader

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False, block_size: int | None = None,
              bytes_per_checksum: int | None = None, size_hint: int | None = None) -> int:
        """CREATE (overwriting) or APPEND through the datanode redirect. ``block_size`` is
        passed as ``blocksize=``; ``bytes_per_checksum`` cannot be chosen over WebHDFS (the
        datanode's ``dfs.bytes-per-checksum`` applies) and is ignored; so is ``size_hint``."""
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
                self.client.write(path, data=counted(), overwrite=True, blocksize=block_size or None)
        return n

    def rename(self, src: str, dst: str) -> None:
        """One ``RENAME … renameoptions=OVERWRITE``: a file ``dst`` is replaced atomically; a
        directory ``dst`` raises IsADirectoryError; missing parents of ``dst`` are created."""
        from hdfs.util import HdfsError

        dest = self.client.resolve(dst)
        for attempt in range(2):
            try:
                with self._errors(src):
                    try:
                        self.client._rename2(src, destination=dest, renameoptions="OVERWRITE")
                        return
                    except HdfsError as exc:
                        text = str(exc)
                        if "must both be directories" in text or "directory is not empty" in text:
                            raise IsADirectoryError(f"cannot replace directory {dst} with a file") from None
                        if attempt == 0 and "destination parent" in text and "not found" in text:
                            raise _MissingParent from None
                        raise
            except _MissingParent:
                self.mkdirs(posixpath.dirname(dst) or "/")

    def concat(self, target: str, source: str) -> None:
        """One ``CONCAT``: ``source``'s blocks are moved onto the end of ``target`` and ``source``
        is removed, in one NameNode operation — readers see ``target`` as it was or with all of
        ``source`` after it, never part of it. ``source`` must be a closed, non-empty file in
        ``target``'s directory."""
        with self._errors(target):
            self.client._concat(target, sources=self.client.resolve(source))

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

    # -- DistCp -p: owner, group (SETOWNER: the superuser's, unless permissions are off), ACLs, xattrs
    preservable = frozenset({"owner", "group", "acl", "xattr"})

    def attributes(self, path: str, which: frozenset[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        with self._errors(path):
            if "owner" in which or "group" in which:
                d = self.client.status(path)
                out.update({k: d.get(k) for k in ("owner", "group") if k in which})
            if "acl" in which:
                out["acl"] = sorted(self.client.acl_status(path).get("entries") or [])
            if "xattr" in which:
                r = self.client._get_xattrs(path, encoding="hex")
                out["xattr"] = {x["name"]: str(x.get("value") or "") for x in r.json().get("XAttrs") or []}
        return out

    def set_attributes(self, path: str, attrs: dict[str, Any], permission: str | None = None) -> None:
        """SETOWNER; SETACL (the base entries from ``permission``: with extended entries its
        group bits are the mask) or REMOVEACL when the source has none; SETXATTR for each source
        xattr whose value differs (target-only xattrs are left, as DistCp leaves them)."""
        with self._errors(path):
            if attrs.get("owner") or attrs.get("group"):
                self.client.set_owner(path, owner=attrs.get("owner") or None, group=attrs.get("group") or None)
            if "acl" in attrs:
                entries = [e for e in attrs["acl"] if not e.startswith("default:")]
                if entries:
                    perm = (permission or self.client.status(path).get("permission") or "644").rjust(3, "0")[-3:]
                    bits = ["".join(c if int(d) & m else "-" for c, m in (("r", 4), ("w", 2), ("x", 1)))
                            for d in perm]
                    spec = [f"user::{bits[0]}", *entries, f"mask::{bits[1]}", f"other::{bits[2]}"]
                    if not any(e.startswith("group::") for e in entries):
                        spec.append(f"group::{bits[1]}")
                    self.client.set_acl(path, ",".join(spec))
                elif self.client.acl_status(path).get("entries"):
                    self.client.remove_acl(path)
            if attrs.get("xattr"):
                r = self.client._get_xattrs(path, encoding="hex")
                have = {x["name"]: str(x.get("value") or "") for x in r.json().get("XAttrs") or []}
                for name, value in attrs["xattr"].items():
                    if have.get(name) != value:
                        self.client._set_xattr(path, **{"xattr.name": name, "xattr.value": value or "0x",
                                                        "flag": "REPLACE" if name in have else "CREATE"})

    # -- snapshots ---------------------------------------------------------------------------------
    def is_snapshottable(self, path: str) -> bool:
        d = self._status_or_none(path)
        return bool(d and d.get("snapshotEnabled"))

    def create_snapshot(self, path: str, name: str) -> None:
        with self._errors(path):
            self.client.create_snapshot(path, name)

    def delete_snapshot(self, path: str, name: str) -> None:
        with self._errors(path):
            self.client.delete_snapshot(path, name)

    def snapshot_exists(self, path: str, name: str) -> bool:
        return self.stat(self.snapshot_path(path, name)) is not None

    def snapshots(self, path: str) -> dict[str, SnapshotInfo]:
        """GETSNAPSHOTLIST: every snapshot of ``path`` with its id (the NameNode's counter: never
        reused, kept by renameSnapshot) and time (the snapshot root's modification time: set at
        its creation and again by renameSnapshot). A NameNode without GETSNAPSHOTLIST (before
        Hadoop 3.3): LISTSTATUS of ``<path>/.snapshot``, names and times, no ids."""
        try:
            with self._errors(path):
                res = self.client._get_snapshot_list(path)
            out = {}
            for d in res.json()["SnapshotList"]:
                name = str(d.get("fullPath") or "").rsplit("/", 1)[-1] or str(d["dirStatus"]["pathSuffix"])
                sid = d.get("snapshotID")
                out[name] = SnapshotInfo(name, int(sid) if sid is not None else None,
                                         int(d["dirStatus"]["modificationTime"]) / 1000.0)
            return out
        except (KeyError, ValueError, TypeError):
            pass  # an answer of another shape: the names and times below
        except OSError as exc:  # the NameNode does not know the op (IllegalArgumentException)
            if isinstance(exc, FileNotFoundError):
                raise

        try:
            listed = self._list(posixpath.join(path, ".snapshot"))
        except OSError:  # no snapshot list here either: no identity known (a snapshot-mode run lists)
            return {}
        return {name: SnapshotInfo(name, None, int(st.get("modificationTime", 0)) / 1000.0) for name, st in listed}

    def snapshot_diff(self, path: str, from_snapshot: str, to_snapshot: str) -> list[DiffEntry]:
        """GETSNAPSHOTDIFF as HDFS reports it, in HDFS's order, untranslated:

        - ``M`` entries for directories whose children changed (the snapshot root as ``""``)
          come first in each section, then ``+`` creates, then ``-`` deletes and ``R`` renames;
        - paths are relative to the snapshot root and name the **earlier** location: a
          create/modify/delete inside a renamed directory carries the directory's old path
          (DistCpSync translates these through the renames);
        - ``R`` carries the earlier source and the later target;
        - a created directory is one ``+`` (its contents are not listed), a deleted one one ``-``.
        """
        with self._errors(path):
            res = self.client._get_snapshot_diff(path, oldsnapshotname=from_snapshot, snapshotname=to_snapshot)
        out = []
        for d in res.json()["SnapshotDiffReport"]["diffList"]:
            src = d.get("sourcePath") or ""
            tgt = d.get("targetPath")
            out.append(DiffEntry(_DIFF_TYPES.get(d["type"], d["type"]), src.strip("/"),
                                 tgt.strip("/") if tgt else None))
        return out

    def close(self) -> None:
        self.client._session.close()


def credentials_for_executors(fs: FileSystem, creds: Credentials | None) -> tuple[Credentials | None, str | None]:
    """What a driver ships to processes that hold no ticket (Spark executors) for ``fs``: for a
    kerberized WebHDFS, ``creds`` plus a delegation token fetched now with the driver's ticket
    (returned too, so the driver cancels it when the job is done:
    :meth:`WebHdfsFileSystem.cancel_delegation_token`); anything else unchanged, no token."""
    if not isinstance(fs, WebHdfsFileSystem) or fs.kerberos is None:
        return creds, None
    from dataclasses import replace

    from dr_toolkit.secrets import Credentials

    token = fs.delegation_token()
    base = creds if creds is not None else Credentials()
    return replace(base, extra={**base.extra, "delegation": token}), token


class _MissingParent(Exception):
    """Internal: RENAME's destination parent does not exist yet."""
