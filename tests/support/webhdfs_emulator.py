"""A small WebHDFS REST emulator over a temporary directory (test support, never product).

It answers what a real NameNode + DataNode pair answers over WebHDFS (read against Hadoop's
``NamenodeWebHdfsMethods``, the DataNode's ``WebHdfsHandler``, ``JsonUtil``, ``DFSClient``'s
checksum code and ``SnapshotDiffInfo``); ``tests/integration/test_hadoop_client_conformance.py``
drives it with Hadoop's own ``WebHdfsFileSystem`` to keep it honest.

- ``/webhdfs/v1/<path>?op=...`` with JSON bodies and ``RemoteException`` errors.
- Two namenodes over one namespace (the first in standby by default: it answers every call
  with ``StandbyException``, as an HA pair does) and one **datanode** on its own port: OPEN,
  CREATE, APPEND and GETFILECHECKSUM answer ``307 Temporary Redirect`` to the datanode, which
  serves the bytes (``namenoderpcaddress=`` in the redirect, as HDFS does).
- GETFILECHECKSUM answers ``MD5-of-<crcPerBlock>MD5-of-<bytesPerCRC>CRC32C`` computed the way
  HDFS computes it for the file's block size: per block the MD5 of the big-endian CRC32C of
  every ``bytesPerCRC`` chunk, then the MD5 of the block MD5s; ``crcPerBlock`` is
  ``blockSize/bytesPerCRC`` for multi-block files and 0 for single-block files; an empty file
  answers ``MD5-of-0MD5-of-0CRC32`` (HDFS's magic empty value). The DataNode hard-codes this
  combine mode over WebHDFS whatever the client's ``dfs.checksum.combine.mode``.
  ``checksum_mode="composite"`` answers ``COMPOSITE-CRC32C`` instead (what **HttpFS** answers
  when asked for COMPOSITE_CRC) for tests of that path.
- CREATE takes ``blocksize`` (kept per file, reported as ``blockSize``); bytes-per-checksum is
  the datanode's setting (``bytes_per_checksum``, default 512): WebHDFS has no parameter for it.
- ``fileId`` is the inode id: new on every CREATE (overwrite included), kept by RENAME/APPEND;
  a file under ``<dir>/.snapshot/<name>/`` answers the id its inode had at the snapshot.
- Files open for write (:meth:`WebHdfsEmulator.open_for_write`, or a CREATE/APPEND whose writer
  died mid-stream; :meth:`WebHdfsEmulator.recover_lease` closes them): OPEN (the datanode) serves
  the visible length; GETFILESTATUS shows what the NameNode knows — the visible length after an
  ``hsync`` with UPDATE_LENGTH, only the completed blocks after a plain ``hflush`` (as HDFS);
  GETFILECHECKSUM refuses with HDFS's
  ``IOException: Fail to get checksum, since file <p> is under construction.``
- RENAME: without options the old boolean semantics (into an existing directory, ``false``
  when the target exists); with ``renameoptions=OVERWRITE`` (``rename2``) one atomic replace,
  and errors as RemoteExceptions (FileAlreadyExistsException, FileNotFoundException, ...).
- GETSNAPSHOTDIFF in HDFS's shape: walks the *earlier* snapshot's tree, so CREATE/DELETE/
  MODIFY under a renamed directory carry the **earlier** path; RENAME carries the earlier
  source and the later target; a directory whose children changed is reported ``MODIFY``
  first (the root as ``""``); sections are ordered as HDFS orders its diff map (shallower
  inodes first, then by name bytes, signed, of their current location); inside a section
  CREATEs then DELETE/RENAMEs, each by name. A rename out of a directory that is then deleted
  is a CREATE of the target (its source is never visited), as in HDFS.
- GETSNAPSHOTDIFFLISTING (what Hadoop >= 3.3 clients ask): the same walk as modify/create/delete
  lists with inode ids (one page), from which the client builds its report.
- ``<dir>/.snapshot/<name>/...`` reads, ALLOWSNAPSHOT, CREATESNAPSHOT, DELETESNAPSHOT,
  GETHOMEDIRECTORY, GETFILEBLOCKLOCATIONS (one block location per block, on the datanode).

Not emulated: permissions checks, ACLs, xattrs, quotas, leases between clients, tokens.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat as st
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlparse

from tests.support.procs import free_port

PREFIX = "/webhdfs/v1"
DEFAULT_BLOCK_SIZE = 134217728
DATA_OPS = {"OPEN", "CREATE", "APPEND", "GETFILECHECKSUM"}


class _Err(Exception):
    def __init__(self, status: int, exception: str, message: str, java_class: str | None = None) -> None:
        super().__init__(message)
        self.status, self.exception, self.message = status, exception, message
        self.java_class = java_class or _JAVA_CLASSES.get(exception, f"org.apache.hadoop.{exception}")


_JAVA_CLASSES = {
    "FileNotFoundException": "java.io.FileNotFoundException",
    "IOException": "java.io.IOException",
    "IllegalArgumentException": "java.lang.IllegalArgumentException",
    "UnsupportedOperationException": "java.lang.UnsupportedOperationException",
    "FileAlreadyExistsException": "org.apache.hadoop.fs.FileAlreadyExistsException",
    "ParentNotDirectoryException": "org.apache.hadoop.fs.ParentNotDirectoryException",
    "PathIsNotEmptyDirectoryException": "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
    "StandbyException": "org.apache.hadoop.ipc.StandbyException",
    "SnapshotException": "org.apache.hadoop.hdfs.protocol.SnapshotException",
    "AlreadyBeingCreatedException": "org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException",
}


def md5md5crc32c(f: Any, size: int, block_size: int, bytes_per_crc: int) -> tuple[str, str]:
    """HDFS's MD5MD5CRC file checksum of ``size`` bytes read from ``f``: (algorithm, hex bytes).

    The hex is the serialised ``MD5MD5CRC32FileChecksum``: int bytesPerCRC, long crcPerBlock,
    16-byte MD5 (28 bytes), as ``JsonUtil`` writes it."""
    import google_crc32c

    if size == 0:
        return "MD5-of-0MD5-of-0CRC32", (struct.pack(">iq", 0, 0) + hashlib.md5(bytes(32)).digest()).hex()
    block_md5s = bytearray()
    left = size
    while left > 0:
        n = min(block_size, left)
        left -= n
        crcs = bytearray()
        while n > 0:
            chunk = f.read(min(bytes_per_crc, n))
            if not chunk:
                raise _Err(500, "IOException", "short read while computing the checksum")
            n -= len(chunk)
            crcs += struct.pack(">I", google_crc32c.value(chunk))
        block_md5s += hashlib.md5(crcs).digest()
    crc_per_block = block_size // bytes_per_crc if size > block_size else 0
    value = struct.pack(">iq", bytes_per_crc, crc_per_block) + hashlib.md5(block_md5s).digest()
    return f"MD5-of-{crc_per_block}MD5-of-{bytes_per_crc}CRC32C", value.hex()


def _signed(name: str) -> tuple[int, ...]:
    """Java's SignedBytes.lexicographicalComparator as a sort key."""
    return tuple(b - 256 if b > 127 else b for b in name.encode())


class Store:
    """The namespace: files under ``root/fs``, snapshot copies under ``root/snapshots``."""

    def __init__(self, root: Path, *, checksum_mode: str = "md5md5crc", bytes_per_checksum: int = 512,
                 default_block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if checksum_mode not in ("md5md5crc", "composite"):
            raise ValueError(f"checksum_mode {checksum_mode!r}")
        self.root = root
        self.fs = root / "fs"
        self.snaps = root / "snapshots"
        self.fs.mkdir(parents=True, exist_ok=True)
        self.snaps.mkdir(parents=True, exist_ok=True)
        self.snapshottable: set[str] = set()
        self.checksum_mode = checksum_mode
        self.bytes_per_checksum = bytes_per_checksum
        self.default_block_size = default_block_size
        self.lock = threading.RLock()
        self.ids: dict[str, int] = {}  # HDFS path -> inode id (never reused, moved by RENAME)
        self.next_id = 16386  # 16385 is the root's id in HDFS
        self.block_sizes: dict[int, int] = {}  # inode id -> block size given at CREATE
        self.under_construction: set[int] = set()  # inode ids of files open for write
        self.snap_inodes: dict[tuple[str, str], dict[str, int]] = {}  # (dir, snapshot) -> rel path -> inode
        # what the NameNode knows of an open file's length (completed blocks + the last hsync with
        # UPDATE_LENGTH); readers (OPEN, served by the datanode) see the visible length
        self.nn_lengths: dict[int, int] = {}
        self.opens: list[str] = []  # paths of the OPEN calls answered (tests count reads)
        self.ops: list[tuple[str, str]] = []  # (op, path) of every namenode call answered
        self.writes_ended = 0  # CREATE/APPEND streams the datanode finished (whole or broken)

    # -- path mapping --------------------------------------------------------------------------
    def local(self, path: str) -> Path:
        path = "/" + path.strip("/")
        if "/.snapshot/" in path + "/":
            d, _, rest = path.partition("/.snapshot/")
            name, _, sub = rest.partition("/")
            if not name:
                raise _Err(404, "FileNotFoundException", f"File does not exist: {path}")
            return self._snapdir(d or "/", name) / "data" / sub
        if any(seg == ".." for seg in path.split("/")):
            raise _Err(400, "IllegalArgumentException", f"Invalid path name {path}")
        return self.fs / path.lstrip("/")

    def _snapdir(self, d: str, name: str) -> Path:
        return self.snaps / hashlib.sha1(d.encode()).hexdigest()[:16] / name

    def block_size(self, path: str) -> int:
        with self.lock:
            return self.block_sizes.get(self.path_ino(path), self.default_block_size)

    def path_ino(self, path: str) -> int:
        """The inode id HDFS answers for ``path``. Under ``<d>/.snapshot/<name>/`` it is the id
        the inode had when the snapshot was taken (a snapshot holds the same inodes as the live
        tree: INodesInPath resolves a snapshot path to the live inode's snapshot copy, same id);
        the snapshot root answers the snapshottable directory's id."""
        path = "/" + path.strip("/")
        if path == "/":
            return 16385
        if "/.snapshot/" not in path + "/":
            return self.ino(path)
        d, _, rest = path.partition("/.snapshot/")
        name, _, sub = rest.partition("/")
        d = d or "/"
        if not sub:
            return 16385 if d == "/" else self.ino(d)
        with self.lock:
            inv = self.snap_inodes.get((d, name))
            if inv is None:
                inv = self.snap_inodes[(d, name)] = {k: v[0] for k, v in self._snap_inventory(d, name).items()}
        if sub not in inv:
            raise _Err(404, "FileNotFoundException", f"File does not exist: {path}")
        return inv[sub]

    def status(self, path: str, p: Path, suffix: str = "") -> dict[str, Any]:
        s = p.stat()
        is_dir = st.S_ISDIR(s.st_mode)
        ino = self.path_ino(path)
        live = "/.snapshot/" not in path + "/"  # a snapshot's copy of an open file has its length then
        with self.lock:
            size = self.nn_lengths.get(ino, s.st_size) if live and ino in self.under_construction else s.st_size
        return {"pathSuffix": suffix, "type": "DIRECTORY" if is_dir else "FILE", "length": 0 if is_dir else size,
                "owner": "hdfs", "group": "supergroup", "permission": format(st.S_IMODE(s.st_mode), "o"),
                "accessTime": 0 if is_dir else int(s.st_atime * 1000), "modificationTime": s.st_mtime_ns // 1_000_000,
                "blockSize": 0 if is_dir else self.block_size(path), "replication": 0 if is_dir else 3,
                "fileId": ino, "childrenNum": len(os.listdir(p)) if is_dir else 0, "storagePolicy": 0}

    # -- inode ids -------------------------------------------------------------------------------
    def ino(self, path: str) -> int:
        with self.lock:
            if path not in self.ids:
                self.ids[path] = self.next_id
                self.next_id += 1
            return self.ids[path]

    def new_ino(self, path: str) -> int:
        with self.lock:
            self.forget(path)
            return self.ino(path)

    def forget(self, path: str) -> None:
        with self.lock:
            for k in [k for k in self.ids if k == path or k.startswith(path.rstrip("/") + "/")]:
                ino = self.ids.pop(k)
                self.block_sizes.pop(ino, None)
                self.under_construction.discard(ino)
                self.nn_lengths.pop(ino, None)

    def move(self, src: str, dst: str) -> None:
        with self.lock:
            for k in [k for k in self.ids if k == src or k.startswith(src + "/")]:
                self.ids[dst + k[len(src):]] = self.ids.pop(k)

    def is_open(self, path: str) -> bool:
        with self.lock:
            return path in self.ids and self.ids[path] in self.under_construction

    # -- checksums -------------------------------------------------------------------------------
    def checksum(self, path: str, p: Path) -> dict[str, Any]:
        if self.is_open(path):
            raise _Err(403, "IOException", f"Fail to get checksum, since file {path} is under construction.")
        size = p.stat().st_size
        if self.checksum_mode == "composite":
            import google_crc32c

            crc = 0
            with open(p, "rb") as f:
                while b := f.read(1 << 20):
                    crc = google_crc32c.extend(crc, b)
            algo, value = "COMPOSITE-CRC32C", f"{crc:08x}"
        else:
            with open(p, "rb") as f:
                algo, value = md5md5crc32c(f, size, self.block_size(path), self.bytes_per_checksum)
        return {"FileChecksum": {"algorithm": algo, "bytes": value, "length": len(value) // 2}}

    # -- snapshots -------------------------------------------------------------------------------
    def inventory(self, d: str) -> dict[str, tuple[int, int, int, bool]]:
        """relative path -> (inode, size, mtime_ns, is_dir) of the live tree at HDFS path ``d``."""
        base = self.local(d)
        out: dict[str, tuple[int, int, int, bool]] = {}
        for dirpath, dirnames, filenames in os.walk(base):
            for n in dirnames + filenames:
                p = Path(dirpath) / n
                s = p.stat()
                rel = str(p.relative_to(base))
                out[rel] = (self.ino(d.rstrip("/") + "/" + rel), s.st_size, s.st_mtime_ns, st.S_ISDIR(s.st_mode))
        return out

    def create_snapshot(self, d: str, name: str) -> None:
        if d not in self.snapshottable:
            raise _Err(403, "SnapshotException", f"Directory is not a snapshottable directory: {d}")
        sd = self._snapdir(d, name)
        if sd.exists():
            raise _Err(403, "SnapshotException", f"Failed to add snapshot: there is already a snapshot with the "
                                                 f"same name \"{name}\".")
        src = self.local(d)
        shutil.copytree(src, sd / "data", copy_function=shutil.copy2)
        (sd / "inventory.json").write_text(json.dumps(self.inventory(d)))

    def _snap_inventory(self, d: str, name: str) -> dict[str, tuple[int, int, int, bool]]:
        if name in ("", "."):
            return self.inventory(d)
        f = self._snapdir(d, name) / "inventory.json"
        if not f.exists():
            raise _Err(403, "SnapshotException", f"Cannot find the snapshot of directory {d} with name {name}")
        return {k: tuple(v) for k, v in json.loads(f.read_text()).items()}  # type: ignore[misc]

    def diff(self, d: str, old: str, new: str, *, listing: bool = False) -> Any:
        """The diff report HDFS's SnapshotDiffInfo produces (see the module doc); with
        ``listing`` the lists SnapshotDiffListingInfo produces for GETSNAPSHOTDIFFLISTING."""
        earlier, later = self._snap_inventory(d, old), self._snap_inventory(d, new)
        ROOT = -1

        def tree(inv: dict[str, tuple[int, int, int, bool]]) -> tuple[dict[int, dict[str, int]],
                                                                       dict[int, tuple[str, int, int, bool]]]:
            children: dict[int, dict[str, int]] = {ROOT: {}}
            nodes: dict[int, tuple[str, int, int, bool]] = {ROOT: ("", 0, 0, True)}
            by_path = {"": ROOT}
            for rel in sorted(inv, key=lambda r: r.count("/")):
                ino, size, mtime, is_dir = inv[rel]
                parent, _, name = rel.rpartition("/")
                children.setdefault(by_path[parent], {})[name] = ino
                nodes[ino] = (rel, size, mtime, is_dir)
                by_path[rel] = ino
                if is_dir:
                    children.setdefault(ino, {})
            return children, nodes

        e_children, e_nodes = tree(earlier)
        l_children, l_nodes = tree(later)
        diff_map: dict[int, str] = {}  # inode -> earlier (traversal) path
        dir_diffs: dict[int, tuple[list[tuple[str, int]], list[tuple[str, int]]]] = {}
        sources: dict[int, str] = {}
        targets: dict[int, str] = {}

        def join(parent: str, name: str) -> str:
            return f"{parent}/{name}" if parent else name

        def visit(ino: int, path: str) -> None:
            rel, size, mtime, is_dir = e_nodes[ino]
            if not is_dir:
                lrel, lsize, lmtime, _ = l_nodes[ino]
                if (lsize, lmtime) != (size, mtime):
                    diff_map[ino] = path
                return
            e_kids = e_children.get(ino, {})
            l_kids = l_children.get(ino, {})
            created = sorted(((n, i) for n, i in l_kids.items() if e_kids.get(n) != i), key=lambda x: _signed(x[0]))
            deleted = sorted(((n, i) for n, i in e_kids.items() if l_kids.get(n) != i), key=lambda x: _signed(x[0]))
            if created or deleted:
                dir_diffs[ino] = (created, deleted)
                diff_map[ino] = path
                for n, i in created:
                    if i in e_nodes and i not in targets:  # a reference: the target of a rename
                        targets[i] = join(path, n)
                for n, i in deleted:
                    if i in l_nodes:  # still in the later tree: renamed away (a WithName reference)
                        sources[i] = join(path, n)
            gone = {n for n, _ in deleted}
            for n in sorted(e_kids, key=_signed):
                i = e_kids[n]
                if n in gone:
                    if i not in l_nodes:
                        continue  # deleted: its subtree is not visited
                    targets[i] = l_nodes[i][0]  # findRenameTargetPath: the later path
                visit(i, join(path, n))

        visit(ROOT, "")
        if listing:
            root_id = self.ino(d) if d != "/" else 16385

            def real(i: int) -> int:
                return root_id if i == ROOT else i

            def parent_of(ino: int) -> int:
                rel = (l_nodes.get(ino) or e_nodes[ino])[0]
                parent = rel.rpartition("/")[0]
                for i, node in (l_nodes if ino in l_nodes else e_nodes).items():
                    if node[0] == parent and node[3]:
                        return real(i)
                return root_id

            mlist: list[dict[str, Any]] = []
            clist: list[dict[str, Any]] = []
            dlist: list[dict[str, Any]] = []
            for ino, path in diff_map.items():
                if ino in dir_diffs:
                    mlist.append({"dirId": real(ino), "fileId": real(ino), "sourcePath": path, "isReference": True})
                    created, deleted = dir_diffs[ino]
                    for n, i in created:
                        clist.append({"dirId": real(ino), "fileId": i, "sourcePath": join(path, n),
                                      "isReference": i in e_nodes})
                    for n, i in deleted:
                        entry = {"dirId": real(ino), "fileId": i, "sourcePath": join(path, n),
                                 "isReference": i in l_nodes}
                        if i in l_nodes and i in targets:
                            entry["targetPath"] = targets[i]
                        dlist.append(entry)
                else:
                    mlist.append({"dirId": parent_of(ino), "fileId": ino, "sourcePath": path, "isReference": False})
            return {"modifyList": mlist, "createList": clist, "deleteList": dlist}

        def order(ino: int) -> tuple[int, tuple[tuple[int, ...], ...]]:
            rel = l_nodes[ino][0] if ino in l_nodes else e_nodes[ino][0]
            parts = rel.split("/") if rel else []
            return len(parts), tuple(_signed(p) for p in parts)

        out: list[dict[str, str]] = []
        for ino in sorted(diff_map, key=order):
            path = diff_map[ino]
            out.append({"sourcePath": path, "type": "MODIFY"})
            if ino not in dir_diffs:
                continue
            created, deleted = dir_diffs[ino]
            for n, i in created:
                if not (i in sources and i in targets):
                    out.append({"sourcePath": join(path, n), "type": "CREATE"})
            for n, i in deleted:
                if i in sources and i in targets:
                    out.append({"sourcePath": sources[i], "targetPath": targets[i], "type": "RENAME"})
                else:
                    out.append({"sourcePath": join(path, n), "type": "DELETE"})
        return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", ctype: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _json(self, obj: Any, status: int = 200) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json;charset=utf-8")

    def _body_chunks(self):  # type: ignore[no-untyped-def]
        """The request body; ``self.body_complete`` tells whether it arrived whole (a writer
        killed mid-stream leaves it False)."""
        self.body_complete = False
        try:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                while True:
                    line = self.rfile.readline().strip()
                    if not line:
                        return
                    n = int(line.split(b";")[0], 16)
                    if n == 0:
                        while self.rfile.readline().strip():  # trailers, then the empty line
                            pass
                        self.body_complete = True
                        return
                    b = self.rfile.read(n)
                    if len(b) < n:
                        return
                    yield b
                    self.rfile.readline()
            else:
                left = int(self.headers.get("Content-Length") or 0)
                while left > 0:
                    b = self.rfile.read(min(left, 1 << 20))
                    if not b:
                        return
                    left -= len(b)
                    yield b
                self.body_complete = True
        except (OSError, ValueError):
            return

    def _drain(self) -> None:
        for _ in self._body_chunks():
            pass

    def _handle(self, method: str) -> None:
        u = urlparse(self.path)
        q = {k.lower(): v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        op = q.get("op", "").upper()
        try:
            if not u.path.startswith(PREFIX):
                raise _Err(404, "IllegalArgumentException", f"not a WebHDFS path: {u.path}")
            path = "/" + unquote(u.path[len(PREFIX):]).strip("/")
            if self.server.role == "datanode":
                if op not in DATA_OPS:
                    self._drain()
                    raise _Err(400, "IllegalArgumentException", f"Invalid operation {op}")
                return getattr(self, f"dn_{op.lower()}")(method, path, q)
            if self.server.standby:
                self._drain()
                raise _Err(403, "StandbyException", f"Operation category {'READ' if method == 'GET' else 'WRITE'} "
                                                    "is not supported in state standby. Visit "
                                                    "https://s.apache.org/sbnn-error")
            handler = getattr(self, f"op_{op.lower()}", None)
            if handler is None:
                self._drain()
                raise _Err(400, "IllegalArgumentException", f"Invalid value for webhdfs parameter \"op\": "
                                                            f"No enum constant {op}")
            with self.server.store.lock:
                self.server.store.ops.append((op, path))
            handler(method, path, q)
        except _Err as e:
            self._json({"RemoteException": {"exception": e.exception, "javaClassName": e.java_class,
                                            "message": e.message}}, e.status)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self.server.store

    def _existing(self, path: str) -> Path:
        p = self.store.local(path)
        if not p.exists():
            raise _Err(404, "FileNotFoundException", f"File does not exist: {path}")
        return p

    def _file(self, path: str) -> Path:
        p = self._existing(path)
        if p.is_dir():
            raise _Err(404, "FileNotFoundException", f"Path is not a file: {path}")
        return p

    def _redirect(self, path: str, q: dict[str, str]) -> None:
        """307 to the datanode, as the NameNode answers OPEN/CREATE/APPEND/GETFILECHECKSUM."""
        q = {**q, "namenoderpcaddress": f"127.0.0.1:{self.server.server_port}"}
        q.pop("noredirect", None)
        loc = f"{self.server.datanode_url}{PREFIX}{quote(path)}?" + "&".join(
            f"{k}={quote(v, safe='')}" for k, v in q.items())
        self._drain()
        self._send(307, headers={"Location": loc})

    # -- namenode operations -----------------------------------------------------------------------
    def op_getfilestatus(self, method: str, path: str, q: dict[str, str]) -> None:
        d = self.store.status(path, self._existing(path))
        if path in self.store.snapshottable:
            d["snapshotEnabled"] = True
        self._json({"FileStatus": d})

    def op_liststatus(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._existing(path)
        if p.is_dir():
            items = [self.store.status(path.rstrip("/") + "/" + n, p / n, n) for n in sorted(os.listdir(p))]
        else:
            items = [self.store.status(path, p)]
        self._json({"FileStatuses": {"FileStatus": items}})

    def op_gethomedirectory(self, method: str, path: str, q: dict[str, str]) -> None:
        self._json({"Path": f"/user/{q.get('user.name') or 'hdfs'}"})

    def op_getfileblocklocations(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._file(path)
        size = p.stat().st_size
        off = int(q.get("offset") or 0)
        length = int(q.get("length") or size)
        bs = self.store.block_size(path)
        dn = urlparse(self.server.datanode_url)
        name = f"{dn.hostname}:{dn.port}"
        locs = []
        for start in range(0, size, bs):
            if start + bs <= off or start >= off + length:
                continue
            locs.append({"offset": start, "length": min(bs, size - start), "corrupt": False,
                         "hosts": [str(dn.hostname)], "names": [name], "cachedHosts": [],
                         "topologyPaths": [f"/default-rack/{name}"], "storageTypes": ["DISK"],
                         "storageIds": ["DS-emulator"]})
        self._json({"BlockLocations": {"BlockLocation": locs}})

    def op_open(self, method: str, path: str, q: dict[str, str]) -> None:
        self._file(path)
        self._redirect(path, q)

    def op_getfilechecksum(self, method: str, path: str, q: dict[str, str]) -> None:
        self._file(path)
        self._redirect(path, q)

    def op_create(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self.store.local(path)
        if p.is_dir():
            raise _Err(403, "FileAlreadyExistsException", f"{path} already exists as a directory")
        if p.exists() and q.get("overwrite", "false").lower() != "true":
            raise _Err(403, "FileAlreadyExistsException", f"{path} for client 127.0.0.1 already exists")
        bs = q.get("blocksize")
        if bs not in (None, "", "-1", "null") and (int(bs) <= 0 or int(bs) % self.store.bytes_per_checksum):
            raise _Err(400, "IOException", f"io.bytes.per.checksum({self.store.bytes_per_checksum}) and blockSize"
                                           f"({bs}) do not match. blockSize should be a multiple of "
                                           "io.bytes.per.checksum")
        self._redirect(path, q)

    def op_append(self, method: str, path: str, q: dict[str, str]) -> None:
        self._file(path)
        if self.store.is_open(path):
            raise _Err(403, "AlreadyBeingCreatedException", f"Failed to APPEND_FILE {path} for DFSClient "
                                                            "because this file lease is currently owned by "
                                                            "another client")
        self._redirect(path, q)

    def op_mkdirs(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self.store.local(path)
        for parent in [*reversed(p.parents), p]:
            if parent.exists() and not parent.is_dir() and str(parent).startswith(str(self.store.fs)):
                raise _Err(403, "FileAlreadyExistsException", f"Path is not a directory: "
                                                              f"/{parent.relative_to(self.store.fs)}")
        p.mkdir(parents=True, exist_ok=True)
        if q.get("permission"):
            os.chmod(p, int(q["permission"], 8))
        self._json({"boolean": True})

    def op_rename(self, method: str, path: str, q: dict[str, str]) -> None:
        dst_path = "/" + q.get("destination", "").strip("/")
        options = {o.strip().upper() for o in q.get("renameoptions", "").split(",") if o.strip()}
        if options - {"NONE", "OVERWRITE"}:
            raise _Err(400, "IllegalArgumentException", f"Invalid value for webhdfs parameter \"renameoptions\": "
                                                        f"{q.get('renameoptions')}")
        if options:
            return self._rename2(path, dst_path, "OVERWRITE" in options)
        src = self.store.local(path)
        dst = self.store.local(dst_path)
        if not src.exists() or not dst.parent.is_dir() or path == "/":
            return self._json({"boolean": False})
        if dst.is_dir():
            dst = dst / src.name
        if dst.exists() or (dst_path + "/").startswith(path + "/"):
            return self._json({"boolean": False})
        with self.store.lock:
            os.rename(src, dst)
            self.store.move(path, "/" + str(dst.relative_to(self.store.fs)))
        self._json({"boolean": True})

    def _rename2(self, path: str, dst_path: str, overwrite: bool) -> None:
        """FSDirRenameOp.renameTo with options: one atomic step, errors raised."""
        src = self.store.local(path)
        dst = self.store.local(dst_path)
        with self.store.lock:
            if not src.exists():
                raise _Err(404, "FileNotFoundException", f"Source {path} not found.")
            if dst_path == path:
                raise _Err(403, "FileAlreadyExistsException", f"The source {path} and destination {dst_path} "
                                                              "are the same")
            if dst_path.startswith(path.rstrip("/") + "/"):
                raise _Err(403, "IOException", f"Rename destination {dst_path} is a directory or file under "
                                               f"source {path}")
            if not dst.parent.exists():
                raise _Err(404, "FileNotFoundException", f"Rename destination parent {dst.parent.name} not found.")
            if not dst.parent.is_dir():
                raise _Err(403, "ParentNotDirectoryException", f"Rename destination parent of {dst_path} is a file.")
            if dst.exists():
                if not overwrite:
                    raise _Err(403, "FileAlreadyExistsException", f"Rename destination {dst_path} already exists.")
                if dst.is_dir() != src.is_dir():
                    raise _Err(403, "IOException", f"Source {path} and destination {dst_path} must both be "
                                                   "directories")
                if dst.is_dir() and os.listdir(dst):
                    raise _Err(403, "IOException", f"Rename destination directory is not empty: {dst_path}")
                self.store.forget(dst_path)
            os.replace(src, dst)  # rename(2): a file over a file, a directory over an empty one
            self.store.move(path, dst_path)
        self._send(200, ctype="application/octet-stream")

    def op_delete(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self.store.local(path)
        if not p.exists():
            return self._json({"boolean": False})
        if p.is_dir():
            if os.listdir(p) and q.get("recursive", "false").lower() != "true":
                raise _Err(403, "PathIsNotEmptyDirectoryException", f"`{path} is non empty': Directory is not empty")
            shutil.rmtree(p)
        else:
            p.unlink()
        self.store.forget(path)
        self._json({"boolean": True})

    def op_settimes(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._existing(path)
        s = p.stat()
        m = int(q["modificationtime"]) * 1_000_000 if q.get("modificationtime", "-1") != "-1" else s.st_mtime_ns
        a = int(q["accesstime"]) * 1_000_000 if q.get("accesstime", "-1") != "-1" else s.st_atime_ns
        os.utime(p, ns=(a, m))
        self._send(200)

    def op_setpermission(self, method: str, path: str, q: dict[str, str]) -> None:
        os.chmod(self._existing(path), int(q.get("permission") or "755", 8))
        self._send(200)

    def op_allowsnapshot(self, method: str, path: str, q: dict[str, str]) -> None:
        if not self._existing(path).is_dir():
            raise _Err(403, "SnapshotException", f"{path} is not a directory")
        self.store.snapshottable.add(path)
        self._send(200)

    def op_createsnapshot(self, method: str, path: str, q: dict[str, str]) -> None:
        self._existing(path)
        name = q.get("snapshotname") or "s" + str(len(os.listdir(self.store.snaps)))
        with self.store.lock:
            self.store.create_snapshot(path, name)
        self._json({"Path": f"{path.rstrip('/')}/.snapshot/{name}"})

    def op_deletesnapshot(self, method: str, path: str, q: dict[str, str]) -> None:
        sd = self.store._snapdir(path, q.get("snapshotname", ""))
        if not sd.exists():
            raise _Err(403, "SnapshotException", f"Cannot delete snapshot {q.get('snapshotname')} from path {path}: "
                                                 "the snapshot does not exist.")
        shutil.rmtree(sd)
        with self.store.lock:
            self.store.snap_inodes.pop((path, q.get("snapshotname", "")), None)
        self._send(200)

    def op_getsnapshotdifflisting(self, method: str, path: str, q: dict[str, str]) -> None:
        """One page holding the whole listing (lastPath "" and lastIndex -1 end the client's loop)."""
        old, new = q.get("oldsnapshotname", ""), q.get("snapshotname", "")
        with self.store.lock:
            lists = self.store.diff(path, old, new, listing=True)
        self._json({"SnapshotDiffReportListing": {**lists, "isFromEarlier": True, "lastIndex": -1,
                                                  "lastPath": ""}})

    def op_getsnapshotdiff(self, method: str, path: str, q: dict[str, str]) -> None:
        old, new = q.get("oldsnapshotname", ""), q.get("snapshotname", "")
        with self.store.lock:
            diff = self.store.diff(path, old, new)
        self._json({"SnapshotDiffReport": {"diffList": diff, "fromSnapshot": old, "snapshotRoot": path,
                                           "toSnapshot": new}})

    # -- datanode operations -----------------------------------------------------------------------
    def dn_open(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._file(path)
        with self.store.lock:
            self.store.opens.append(path)
        size = p.stat().st_size  # the visible length (an open file's backing file holds what was flushed)
        off = int(q.get("offset") or 0)
        if off > size:
            raise _Err(403, "IOException", f"Offset={off} out of the range [0, {size}); OPEN, path={path}")
        length = size - off if q.get("length") in (None, "", "null") else min(int(q["length"]), size - off)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        with open(p, "rb") as f:
            f.seek(off)
            while length > 0:
                b = f.read(min(length, 1 << 20))
                if not b:
                    break
                self.wfile.write(b)
                length -= len(b)

    def dn_getfilechecksum(self, method: str, path: str, q: dict[str, str]) -> None:
        self._json(self.store.checksum(path, self._file(path)))

    def dn_create(self, method: str, path: str, q: dict[str, str]) -> None:
        if method != "PUT":
            raise _Err(400, "IllegalArgumentException", f"Invalid operation {method} CREATE")
        p = self.store.local(path)
        if p.is_dir():
            self._drain()
            raise _Err(403, "FileAlreadyExistsException", f"{path} already exists as a directory")
        if p.exists() and q.get("overwrite", "false").lower() != "true":
            self._drain()
            raise _Err(403, "FileAlreadyExistsException", f"{path} for client 127.0.0.1 already exists")
        p.parent.mkdir(parents=True, exist_ok=True)
        # as HDFS: the old inode goes at once, the new one is under construction until closed
        with self.store.lock:
            ino = self.store.new_ino(path)
            self.store.under_construction.add(ino)
            self.store.nn_lengths[ino] = 0
            bs = q.get("blocksize")
            if bs not in (None, "", "-1", "null"):
                self.store.block_sizes[ino] = int(bs)
            f = open(p, "wb")  # noqa: SIM115 - closed below
        try:
            with f:
                if q.get("permission"):
                    os.chmod(p, int(q["permission"], 8))
                for b in self._body_chunks():
                    f.write(b)
        finally:
            # a writer that died mid-stream leaves the file open (HDFS recovers the lease much later)
            with self.store.lock:
                if getattr(self, "body_complete", False):
                    self.store.under_construction.discard(ino)
                    self.store.nn_lengths.pop(ino, None)
                elif p.exists():  # a dead writer: the NameNode knows the completed blocks
                    bs = self.store.block_size(path)
                    self.store.nn_lengths[ino] = p.stat().st_size // bs * bs
                self.store.writes_ended += 1
        if not self.body_complete:
            self.close_connection = True
            return
        self._send(201, headers={"Location": f"hdfs://{q.get('namenoderpcaddress', '')}{path}"})

    def dn_append(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._file(path)
        with self.store.lock:
            ino = self.store.ino(path)
            self.store.under_construction.add(ino)
            self.store.nn_lengths[ino] = p.stat().st_size
        try:
            with open(p, "ab") as f:
                for b in self._body_chunks():
                    f.write(b)
        finally:
            with self.store.lock:
                if getattr(self, "body_complete", False):
                    self.store.under_construction.discard(ino)
                    self.store.nn_lengths.pop(ino, None)
                elif p.exists():  # a dead writer: the NameNode knows the completed blocks
                    bs = self.store.block_size(path)
                    self.store.nn_lengths[ino] = p.stat().st_size // bs * bs
                self.store.writes_ended += 1
        if not self.body_complete:
            self.close_connection = True
            return
        self._send(200)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    store: Store
    standby: bool
    role: str  # "namenode" | "datanode"
    datanode_url: str


class WebHdfsEmulator:
    """Two namenodes over one namespace (``failover()`` swaps active and standby) and a datanode."""

    def __init__(self, root: Path, *, layout_checksum: bool = True, checksum_mode: str | None = None,
                 bytes_per_checksum: int = 512, default_block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        # layout_checksum: kept for old callers; MD5MD5CRC (layout-dependent) is what WebHDFS answers
        mode = checksum_mode or ("md5md5crc" if layout_checksum else "composite")
        self.store = Store(root, checksum_mode=mode, bytes_per_checksum=bytes_per_checksum,
                           default_block_size=default_block_size)
        self.servers: list[_Server] = []
        self.datanode: _Server | None = None
        self.threads: list[threading.Thread] = []

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{s.server_port}" for s in self.servers]

    @property
    def active_url(self) -> str:
        return next(u for u, s in zip(self.urls, self.servers, strict=True) if not s.standby)

    @property
    def datanode_url(self) -> str:
        assert self.datanode is not None
        return f"http://127.0.0.1:{self.datanode.server_port}"

    def _serve(self, role: str, standby: bool) -> _Server:
        srv = _Server(("127.0.0.1", free_port()), _Handler)
        srv.store = self.store
        srv.standby = standby
        srv.role = role
        srv.datanode_url = self.datanode_url if self.datanode is not None else ""
        t = threading.Thread(target=srv.serve_forever, name=f"webhdfs-emulator-{role}", daemon=True)
        t.start()
        self.threads.append(t)
        return srv

    def start(self, *, standby_first: bool = True) -> WebHdfsEmulator:
        self.datanode = self._serve("datanode", False)
        for standby in ((True, False) if standby_first else (False, True)):
            self.servers.append(self._serve("namenode", standby))
        return self

    def failover(self) -> None:
        for s in self.servers:
            s.standby = not s.standby

    def stop(self) -> None:
        for s in [*self.servers, *([self.datanode] if self.datanode else [])]:
            s.shutdown()
            s.server_close()
        self.servers.clear()
        self.datanode = None

    def local(self, path: str) -> Path:
        """The backing file of an HDFS path (tests inspect and corrupt files through it)."""
        return self.store.local(path)

    def location(self, path: str) -> Any:
        """A :class:`dr_toolkit.fs.uri.Location` naming both namenodes (as a topology cluster would)."""
        from dr_toolkit.fs.uri import Location

        return Location("webhdfs", path, f"webhdfs://{self.urls[0].split('//')[1]}{path}",
                        namenodes=tuple(self.urls))

    def allow_snapshot(self, path: str) -> None:
        self.store.snapshottable.add("/" + path.strip("/"))

    # -- files open for write (a writer elsewhere holds the lease) ---------------------------------
    def open_for_write(self, path: str, data: bytes = b"", *, append: bool = False,
                       update_length: bool = True) -> None:
        """Start (or, with ``append``, reopen) a write of ``path`` with ``data`` visible; see
        :meth:`hflush` for ``update_length``."""
        p = self.store.local(path)
        with self.store.lock:
            p.parent.mkdir(parents=True, exist_ok=True)
            before = p.stat().st_size if append and p.exists() else 0
            ino = self.store.ino(path) if append else self.store.new_ino(path)
            self.store.under_construction.add(ino)
            self.store.nn_lengths[ino] = before
        self.hflush(path, data, update_length=update_length)

    def hflush(self, path: str, data: bytes, *, update_length: bool = True) -> None:
        """The writer writes ``data`` and flushes it: readers (OPEN) now see it. With
        ``update_length`` (``hsync`` with UPDATE_LENGTH) the NameNode learns the new length, so
        GETFILESTATUS shows it; without (a plain ``hflush``) GETFILESTATUS keeps the length of the
        completed blocks, as HDFS does."""
        p = self.store.local(path)
        with self.store.lock:
            with open(p, "ab") as f:
                f.write(data)
            ino = self.store.ino(path)
            size = p.stat().st_size
            bs = self.store.block_size(path)
            known = self.store.nn_lengths.get(ino, 0)
            self.store.nn_lengths[ino] = size if update_length else max(known, size // bs * bs)

    def recover_lease(self, path: str) -> None:
        """What the NameNode does once a dead writer's lease expires: close the file as it is."""
        self.close_file(path)

    def close_file(self, path: str) -> None:
        """The writer closes the file: it is complete, its checksum can be had."""
        with self.store.lock:
            ino = self.store.ino(path)
            self.store.under_construction.discard(ino)
            self.store.nn_lengths.pop(ino, None)
