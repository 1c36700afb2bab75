"""A small WebHDFS REST emulator over a temporary directory (test support, never product).

It follows the Hadoop WebHDFS REST API (hadoop-project-dist/hadoop-hdfs/WebHDFS.html):
``/webhdfs/v1/<path>?op=...`` with JSON bodies and ``RemoteException`` errors, the two-step
CREATE/APPEND (307 to a "datanode" URL, then the data), OPEN with offset/length (307 too),
LISTSTATUS, GETFILESTATUS, MKDIRS, RENAME, DELETE, GETFILECHECKSUM, SETTIMES, SETPERMISSION,
ALLOWSNAPSHOT, CREATESNAPSHOT, DELETESNAPSHOT, GETSNAPSHOTDIFF (inode-based rename detection
as HDFS does), and ``<dir>/.snapshot/<name>/...`` reads. A namenode may be put in standby:
it then answers every call with ``StandbyException`` (403) so clients fail over.

GETFILECHECKSUM answers ``COMPOSITE-CRC32C`` (what HDFS answers with
``dfs.checksum.combine.mode=COMPOSITE_CRC``: the CRC32C of the whole content); with
``layout_checksum=True`` it answers HDFS's default block-layout-dependent algorithm name
(``MD5-of-0MD5-of-512CRC32C``) to exercise the size+mtime fallback.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat as st
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlparse

from tests.support.procs import free_port

PREFIX = "/webhdfs/v1"


class _Err(Exception):
    def __init__(self, status: int, exception: str, message: str) -> None:
        super().__init__(message)
        self.status, self.exception, self.message = status, exception, message


class Store:
    """The namespace: files under ``root/fs``, snapshot copies under ``root/snapshots``."""

    def __init__(self, root: Path, layout_checksum: bool = False) -> None:
        self.root = root
        self.fs = root / "fs"
        self.snaps = root / "snapshots"
        self.fs.mkdir(parents=True, exist_ok=True)
        self.snaps.mkdir(parents=True, exist_ok=True)
        self.snapshottable: set[str] = set()
        self.layout_checksum = layout_checksum
        self.lock = threading.RLock()
        self.ids: dict[str, int] = {}  # HDFS path -> inode id (never reused, moved by RENAME)
        self.next_id = 16385
        self.opens: list[str] = []  # paths of the OPEN calls answered (tests count reads)

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

    def status(self, p: Path, suffix: str = "") -> dict[str, Any]:
        s = p.stat()
        is_dir = st.S_ISDIR(s.st_mode)
        return {"pathSuffix": suffix, "type": "DIRECTORY" if is_dir else "FILE", "length": 0 if is_dir else s.st_size,
                "owner": "hdfs", "group": "supergroup", "permission": format(st.S_IMODE(s.st_mode), "o"),
                "accessTime": int(s.st_atime * 1000), "modificationTime": s.st_mtime_ns // 1_000_000,
                "blockSize": 134217728, "replication": 0 if is_dir else 3, "fileId": s.st_ino,
                "childrenNum": len(os.listdir(p)) if is_dir else 0, "storagePolicy": 0}

    # -- inode ids -------------------------------------------------------------------------------
    def ino(self, path: str) -> int:
        with self.lock:
            if path not in self.ids:
                self.ids[path] = self.next_id
                self.next_id += 1
            return self.ids[path]

    def new_ino(self, path: str) -> None:
        with self.lock:
            self.forget(path)
            self.ino(path)

    def forget(self, path: str) -> None:
        with self.lock:
            for k in [k for k in self.ids if k == path or k.startswith(path.rstrip("/") + "/")]:
                del self.ids[k]

    def move(self, src: str, dst: str) -> None:
        with self.lock:
            for k in [k for k in self.ids if k == src or k.startswith(src + "/")]:
                self.ids[dst + k[len(src):]] = self.ids.pop(k)

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
            raise _Err(403, "SnapshotException", f"snapshot {name} already exists for {d}")
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

    def diff(self, d: str, old: str, new: str) -> list[dict[str, str]]:
        a, b = self._snap_inventory(d, old), self._snap_inventory(d, new)
        a_ino = {v[0]: k for k, v in a.items()}
        b_ino = {v[0]: k for k, v in b.items()}
        out: list[dict[str, str]] = []
        dir_moves: list[tuple[str, str]] = []

        def mapped(path: str) -> str:
            for src, dst in dir_moves:
                if path.startswith(src + "/"):
                    return dst + path[len(src):]
            return path

        for path in sorted(a, key=lambda p: p.count("/")):
            ino, size, mtime, is_dir = a[path]
            newpath = b_ino.get(ino)
            if newpath is None:
                if mapped(path) == path and not any(path.startswith(x + "/") for x, _ in dir_moves) and \
                        not any(path.startswith(r["sourcePath"] + "/") for r in out if r["type"] == "DELETE"):
                    out.append({"sourcePath": path, "type": "DELETE"})
                continue
            if newpath != mapped(path):
                out.append({"sourcePath": path, "targetPath": newpath, "type": "RENAME"})
                if is_dir:
                    dir_moves.insert(0, (path, newpath))
            if not is_dir and (b[newpath][1], b[newpath][2]) != (size, mtime):
                out.append({"sourcePath": newpath, "type": "MODIFY"})
        for path, (ino, *_rest) in sorted(b.items()):
            if ino not in a_ino and not any(path.startswith(r["sourcePath"] + "/") for r in out
                                            if r["type"] == "CREATE"):
                out.append({"sourcePath": path, "type": "CREATE"})
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
        self._send(status, json.dumps(obj).encode())

    def _body_chunks(self):  # type: ignore[no-untyped-def]
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                line = self.rfile.readline().strip()
                n = int(line.split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return
                yield self.rfile.read(n)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left > 0:
                b = self.rfile.read(min(left, 1 << 20))
                if not b:
                    return
                left -= len(b)
                yield b

    def _drain(self) -> None:
        for _ in self._body_chunks():
            pass

    def _handle(self, method: str) -> None:
        u = urlparse(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        op = q.get("op", "").upper()
        try:
            if not u.path.startswith(PREFIX):
                raise _Err(404, "IllegalArgumentException", f"not a WebHDFS path: {u.path}")
            if self.server.standby and "datanode" not in q:
                self._drain()
                raise _Err(403, "StandbyException", f"Operation category {op} is not supported in state standby")
            path = "/" + unquote(u.path[len(PREFIX):]).strip("/")
            getattr(self, f"op_{op.lower()}")(method, path, q)
        except _Err as e:
            self._json({"RemoteException": {"exception": e.exception, "javaClassName":
                                            f"org.apache.hadoop.{e.exception}", "message": e.message}}, e.status)
        except AttributeError:
            self._json({"RemoteException": {"exception": "UnsupportedOperationException",
                                            "message": f"op {op} not supported"}}, 400)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- operations --------------------------------------------------------------------------
    @property
    def store(self) -> Store:
        return self.server.store

    def _existing(self, path: str) -> Path:
        p = self.store.local(path)
        if not p.exists():
            raise _Err(404, "FileNotFoundException", f"File does not exist: {path}")
        return p

    def _redirect(self, path: str, q: dict[str, str]) -> None:
        q = {**q, "datanode": "true"}
        loc = f"http://127.0.0.1:{self.server.server_port}{PREFIX}{quote(path)}?" + "&".join(
            f"{k}={quote(v)}" for k, v in q.items())
        self._drain()
        self._send(307, headers={"Location": loc})

    def op_getfilestatus(self, method: str, path: str, q: dict[str, str]) -> None:
        d = self.store.status(self._existing(path))
        if path in self.store.snapshottable:
            d["snapshotEnabled"] = True
        self._json({"FileStatus": d})

    def op_liststatus(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._existing(path)
        if p.is_dir():
            items = [self.store.status(p / n, n) for n in sorted(os.listdir(p))]
        else:
            items = [self.store.status(p)]
        self._json({"FileStatuses": {"FileStatus": items}})

    def op_open(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._existing(path)
        if p.is_dir():
            raise _Err(404, "FileNotFoundException", f"Path is not a file: {path}")
        if "datanode" not in q:
            return self._redirect(path, q)
        self.store.opens.append(path)
        size = p.stat().st_size
        off = int(q.get("offset") or 0)
        if off > size:
            raise _Err(403, "IOException", f"Offset={off} out of the range [0, {size}); OPEN, path={path}")
        length = size - off if q.get("length") in (None, "", "null") else min(int(q["length"]), size - off)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        with open(p, "rb") as f:
            f.seek(off)
            while length > 0:
                b = f.read(min(length, 1 << 20))
                if not b:
                    break
                self.wfile.write(b)
                length -= len(b)

    def op_create(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self.store.local(path)
        if p.is_dir():
            raise _Err(403, "FileAlreadyExistsException", f"{path} already exists as a directory")
        if p.exists() and q.get("overwrite", "false").lower() != "true":
            raise _Err(403, "FileAlreadyExistsException", f"{path} for client 127.0.0.1 already exists")
        if "datanode" not in q:
            return self._redirect(path, q)
        p.parent.mkdir(parents=True, exist_ok=True)
        self.store.new_ino(path)
        with open(p, "wb") as f:
            for b in self._body_chunks():
                f.write(b)
        if q.get("permission"):
            os.chmod(p, int(q["permission"], 8))
        self._send(201, headers={"Location": f"hdfs://127.0.0.1{path}"})

    def op_append(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._existing(path)
        if "datanode" not in q:
            return self._redirect(path, q)
        with open(p, "ab") as f:
            for b in self._body_chunks():
                f.write(b)
        self._send(200)

    def op_mkdirs(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self.store.local(path)
        if p.exists() and not p.is_dir():
            raise _Err(403, "FileAlreadyExistsException", f"Path is not a directory: {path}")
        p.mkdir(parents=True, exist_ok=True)
        if q.get("permission"):
            os.chmod(p, int(q["permission"], 8))
        self._json({"boolean": True})

    def op_rename(self, method: str, path: str, q: dict[str, str]) -> None:
        src = self.store.local(path)
        dst_path = q.get("destination", "")
        dst = self.store.local(dst_path)
        if not src.exists() or not dst.parent.is_dir() or path == "/":
            return self._json({"boolean": False})
        if dst.is_dir():
            dst = dst / src.name
        if dst.exists():
            return self._json({"boolean": False})
        with self.store.lock:
            os.rename(src, dst)
            self.store.move(path, "/" + str(dst.relative_to(self.store.fs)))
        self._json({"boolean": True})

    def op_delete(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self.store.local(path)
        if not p.exists():
            return self._json({"boolean": False})
        if p.is_dir():
            if os.listdir(p) and q.get("recursive", "false").lower() != "true":
                raise _Err(403, "PathIsNotEmptyDirectoryException", f"{path} is non empty")
            shutil.rmtree(p)
        else:
            p.unlink()
        self.store.forget(path)
        self._json({"boolean": True})

    def op_getfilechecksum(self, method: str, path: str, q: dict[str, str]) -> None:
        p = self._existing(path)
        if p.is_dir():
            raise _Err(404, "FileNotFoundException", f"Path is not a file: {path}")
        import google_crc32c

        crc = 0
        md5 = hashlib.md5(usedforsecurity=False)
        with open(p, "rb") as f:
            while b := f.read(1 << 20):
                crc = google_crc32c.extend(crc, b)
                md5.update(b)
        if self.store.layout_checksum:
            algo, value = "MD5-of-0MD5-of-512CRC32C", "00000200" + "0" * 16 + md5.hexdigest()
        else:
            algo, value = "COMPOSITE-CRC32C", f"{crc:08x}"
        self._json({"FileChecksum": {"algorithm": algo, "bytes": value, "length": len(value) // 2}})

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
            raise _Err(403, "SnapshotException", f"Cannot delete snapshot {q.get('snapshotname')} from {path}")
        shutil.rmtree(sd)
        self._send(200)

    def op_getsnapshotdiff(self, method: str, path: str, q: dict[str, str]) -> None:
        old, new = q.get("oldsnapshotname", ""), q.get("snapshotname", "")
        with self.store.lock:
            diff = self.store.diff(path, old, new)
        self._json({"SnapshotDiffReport": {"diffList": diff, "fromSnapshot": old, "snapshotRoot": path,
                                           "toSnapshot": new}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    store: Store
    standby: bool


class WebHdfsEmulator:
    """Two namenodes over one namespace: ``nn1`` active, ``nn2`` standby (``failover()`` swaps)."""

    def __init__(self, root: Path, *, layout_checksum: bool = False) -> None:
        self.store = Store(root, layout_checksum=layout_checksum)
        self.servers: list[_Server] = []
        self.threads: list[threading.Thread] = []

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{s.server_port}" for s in self.servers]

    @property
    def active_url(self) -> str:
        return next(u for u, s in zip(self.urls, self.servers, strict=True) if not s.standby)

    def start(self, *, standby_first: bool = True) -> WebHdfsEmulator:
        for standby in ((True, False) if standby_first else (False, True)):
            srv = _Server(("127.0.0.1", free_port()), _Handler)
            srv.store = self.store
            srv.standby = standby
            t = threading.Thread(target=srv.serve_forever, name="webhdfs-emulator", daemon=True)
            t.start()
            self.servers.append(srv)
            self.threads.append(t)
        return self

    def failover(self) -> None:
        for s in self.servers:
            s.standby = not s.standby

    def stop(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()
        self.servers.clear()

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
