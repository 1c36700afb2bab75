"""The WebHDFS emulator answers what a real NameNode/DataNode pair answers (raw REST calls).

What Hadoop's own client makes of these answers is checked in test_hadoop_client_conformance.py.
"""

from __future__ import annotations

import hashlib
import os
import random
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import google_crc32c
import pytest
import requests

from dr_toolkit.fs.hdfs_checksum import md5md5crc32c
from tests.support.webhdfs_emulator import WebHdfsEmulator

pytestmark = pytest.mark.integration


@pytest.fixture
def emu(tmp_path: Path) -> Iterator[WebHdfsEmulator]:
    e = WebHdfsEmulator(tmp_path / "hdfs").start(standby_first=False)
    yield e
    e.stop()


def call(emu: WebHdfsEmulator, method: str, path: str, op: str, data: bytes | None = None,
         follow: bool = True, **params: Any) -> requests.Response:
    url = f"{emu.active_url}/webhdfs/v1{path}"
    r = requests.request(method, url, params={"op": op, "user.name": "hdfs", **params}, allow_redirects=False,
                         timeout=30)
    if r.status_code == 307 and follow:
        r = requests.request(method, r.headers["Location"], data=data, timeout=30)
    return r


def put_file(emu: WebHdfsEmulator, path: str, data: bytes, **params: Any) -> None:
    r = call(emu, "PUT", path, "CREATE", data=data, overwrite="true", **params)
    assert r.status_code == 201, r.text


def naive_md5md5crc(data: bytes, block: int, bpc: int) -> tuple[str, str]:
    """The definition, spelled out with no streaming: MD5 of block MD5s of chunk CRC32Cs."""
    blocks = [data[i:i + block] for i in range(0, len(data), block)]
    md5s = b"".join(hashlib.md5(b"".join(struct.pack(">I", google_crc32c.value(b[j:j + bpc]))
                                          for j in range(0, len(b), bpc))).digest() for b in blocks)
    cpb = block // bpc if len(blocks) > 1 else 0
    return f"MD5-of-{cpb}MD5-of-{bpc}CRC32C", (struct.pack(">iq", bpc, cpb) + hashlib.md5(md5s).digest()).hex()


def test_data_ops_redirect_to_the_datanode(emu: WebHdfsEmulator) -> None:
    dn = emu.datanode_url
    for method, op in (("PUT", "CREATE"), ("GET", "OPEN"), ("POST", "APPEND"), ("GET", "GETFILECHECKSUM")):
        if op != "CREATE":
            put_file(emu, "/r/f", b"abc")
        r = call(emu, method, "/r/f", op, follow=False, overwrite="true")
        assert r.status_code == 307, (op, r.text)
        loc = r.headers["Location"]
        assert loc.startswith(dn + "/webhdfs/v1/r/f?") and "namenoderpcaddress=" in loc, loc
        assert dn != emu.active_url
    # the namenode never serves bytes; the datanode refuses namespace operations
    r = requests.get(f"{dn}/webhdfs/v1/r?op=LISTSTATUS", timeout=30)
    assert r.status_code == 400 and r.json()["RemoteException"]["exception"] == "IllegalArgumentException"


def test_standby_namenode_answers_standby_exception(tmp_path: Path) -> None:
    e = WebHdfsEmulator(tmp_path / "h").start(standby_first=True)
    try:
        r = requests.get(f"{e.urls[0]}/webhdfs/v1/?op=LISTSTATUS", timeout=30)
        assert r.status_code == 403
        ex = r.json()["RemoteException"]
        assert ex["exception"] == "StandbyException" and ex["javaClassName"] == "org.apache.hadoop.ipc.StandbyException"
        assert requests.get(f"{e.urls[1]}/webhdfs/v1/?op=LISTSTATUS", timeout=30).status_code == 200
    finally:
        e.stop()


@pytest.mark.parametrize(("size", "block", "bpc"), [
    (0, 1024, 512), (1, 1024, 512), (511, 1024, 512), (512, 1024, 512), (1024, 1024, 512),
    (1025, 1024, 512), (5000, 1024, 512), (70_000, 4096, 512), (70_000, 65536, 4096),
])
def test_getfilechecksum_is_md5md5crc_for_the_file_layout(tmp_path: Path, size: int, block: int, bpc: int) -> None:
    e = WebHdfsEmulator(tmp_path / "h", bytes_per_checksum=bpc).start(standby_first=False)
    try:
        data = random.Random(size).randbytes(size)
        put_file(e, "/c/f", data, blocksize=str(block))
        assert call(e, "GET", "/c/f", "GETFILESTATUS").json()["FileStatus"]["blockSize"] == block
        fc = call(e, "GET", "/c/f", "GETFILECHECKSUM").json()["FileChecksum"]
        if size == 0:  # HDFS's magic value for an empty file
            assert fc["algorithm"] == "MD5-of-0MD5-of-0CRC32"
            assert fc["bytes"] == "00000000" + "0" * 16 + hashlib.md5(bytes(32)).hexdigest()
        else:
            assert (fc["algorithm"], fc["bytes"]) == naive_md5md5crc(data, block, bpc)
        assert fc["length"] == 28
        # the product's streaming computation agrees with the emulator, whatever the chunking
        ours = md5md5crc32c(data, block, bpc)
        assert (ours.algorithm, ours.value) == (fc["algorithm"], fc["bytes"])
    finally:
        e.stop()


def test_md5md5crc_names_the_layout_it_depends_on(emu: WebHdfsEmulator) -> None:
    data = os.urandom(3000)
    put_file(emu, "/l/small-a", data, blocksize="1024")
    put_file(emu, "/l/small-b", data, blocksize="2048")
    put_file(emu, "/l/big", data)  # default 128 MiB block: one block
    a, b, big = (call(emu, "GET", p, "GETFILECHECKSUM").json()["FileChecksum"] for p in
                 ("/l/small-a", "/l/small-b", "/l/big"))
    assert a["algorithm"] == "MD5-of-2MD5-of-512CRC32C" and b["algorithm"] == "MD5-of-4MD5-of-512CRC32C"
    assert a["bytes"] != b["bytes"] != big["bytes"]
    assert big["algorithm"] == "MD5-of-0MD5-of-512CRC32C"
    # a blockSize that is no multiple of bytes-per-checksum is refused, as HDFS refuses it
    r = call(emu, "PUT", "/l/bad", "CREATE", data=b"x", overwrite="true", blocksize="1000")
    assert r.status_code == 400 and "io.bytes.per.checksum" in r.json()["RemoteException"]["message"]


def test_composite_mode_is_httpfs_only_and_opt_in(tmp_path: Path) -> None:
    e = WebHdfsEmulator(tmp_path / "h", checksum_mode="composite").start(standby_first=False)
    try:
        put_file(e, "/f", b"hello")
        fc = call(e, "GET", "/f", "GETFILECHECKSUM").json()["FileChecksum"]
        assert fc == {"algorithm": "COMPOSITE-CRC32C", "bytes": f"{google_crc32c.value(b'hello'):08x}", "length": 4}
    finally:
        e.stop()


def test_file_open_for_write(emu: WebHdfsEmulator) -> None:
    emu.open_for_write("/uc/log", b"first line\n")
    st = call(emu, "GET", "/uc/log", "GETFILESTATUS").json()["FileStatus"]
    assert st["length"] == 11
    r = call(emu, "GET", "/uc/log", "GETFILECHECKSUM")
    ex = r.json()["RemoteException"]
    assert r.status_code == 403 and ex["exception"] == "IOException" and ex["javaClassName"] == "java.io.IOException"
    assert ex["message"] == "Fail to get checksum, since file /uc/log is under construction."
    emu.hflush("/uc/log", b"second\n")
    assert call(emu, "GET", "/uc/log", "OPEN").content == b"first line\nsecond\n"
    assert call(emu, "POST", "/uc/log", "APPEND", data=b"x").json()["RemoteException"]["exception"] == \
        "AlreadyBeingCreatedException"
    emu.close_file("/uc/log")
    assert call(emu, "GET", "/uc/log", "GETFILECHECKSUM").status_code == 200


def test_file_id_is_the_inode(emu: WebHdfsEmulator) -> None:
    def fid(p: str) -> int:
        return int(call(emu, "GET", p, "GETFILESTATUS").json()["FileStatus"]["fileId"])

    put_file(emu, "/i/a", b"1")
    first = fid("/i/a")
    assert call(emu, "POST", "/i/a", "APPEND", data=b"2").status_code == 200
    assert fid("/i/a") == first
    assert call(emu, "PUT", "/i/a", "RENAME", destination="/i/b").json() == {"boolean": True}
    assert fid("/i/b") == first
    put_file(emu, "/i/b", b"12")  # same size and content: a new inode all the same
    assert fid("/i/b") != first


def test_rename_with_overwrite(emu: WebHdfsEmulator) -> None:
    put_file(emu, "/o/src", b"new")
    put_file(emu, "/o/dst", b"old")
    # without options: HDFS's old rename answers false when the target exists
    assert call(emu, "PUT", "/o/src", "RENAME", destination="/o/dst").json() == {"boolean": False}
    r = call(emu, "PUT", "/o/src", "RENAME", destination="/o/dst", renameoptions="NONE")
    assert r.status_code == 403 and r.json()["RemoteException"]["exception"] == "FileAlreadyExistsException"
    r = call(emu, "PUT", "/o/src", "RENAME", destination="/o/dst", renameoptions="OVERWRITE")
    assert r.status_code == 200 and r.content == b""
    assert call(emu, "GET", "/o/dst", "OPEN").content == b"new"
    assert call(emu, "GET", "/o/src", "GETFILESTATUS").status_code == 404
    # errors of rename2
    cases = {
        ("/o/missing", "/o/dst"): "FileNotFoundException",
        ("/o/dst", "/o/nodir/x"): "FileNotFoundException",
        ("/o/dst", "/o/dst"): "FileAlreadyExistsException",
    }
    assert call(emu, "PUT", "/o/d1/sub", "MKDIRS").json() == {"boolean": True}
    cases[("/o/dst", "/o/d1")] = "IOException"  # a file over a directory
    for (src, dst), exc in cases.items():
        r = call(emu, "PUT", src, "RENAME", destination=dst, renameoptions="OVERWRITE")
        assert r.json()["RemoteException"]["exception"] == exc, (src, dst, r.text)
    # a directory over an empty directory is allowed, over a non-empty one refused
    assert call(emu, "PUT", "/o/d2", "MKDIRS").status_code == 200
    assert call(emu, "PUT", "/o/e", "MKDIRS").status_code == 200
    assert call(emu, "PUT", "/o/d1", "RENAME", destination="/o/d2", renameoptions="OVERWRITE").status_code == 200
    r = call(emu, "PUT", "/o/e", "RENAME", destination="/o/d2", renameoptions="OVERWRITE")
    assert "not empty" in r.json()["RemoteException"]["message"]


# -- snapshot diff reports in HDFS's shape ----------------------------------------------------------
def snapdiff(emu: WebHdfsEmulator, d: str, old: str, new: str) -> list[tuple[str, str, str | None]]:
    r = call(emu, "GET", d, "GETSNAPSHOTDIFF", oldsnapshotname=old, snapshotname=new)
    return [(e["type"], e["sourcePath"], e.get("targetPath")) for e in r.json()["SnapshotDiffReport"]["diffList"]]


def tree(emu: WebHdfsEmulator, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        put_file(emu, f"/s/{rel}", data)


def snap(emu: WebHdfsEmulator, name: str) -> None:
    assert call(emu, "PUT", "/s", "CREATESNAPSHOT", snapshotname=name).status_code == 200


def mv(emu: WebHdfsEmulator, a: str, b: str) -> None:
    assert call(emu, "PUT", f"/s/{a}", "RENAME", destination=f"/s/{b}").json() == {"boolean": True}


@pytest.fixture
def sdir(emu: WebHdfsEmulator) -> WebHdfsEmulator:
    assert call(emu, "PUT", "/s", "MKDIRS").status_code == 200
    assert call(emu, "PUT", "/s", "ALLOWSNAPSHOT").status_code == 200
    return emu


def test_diff_under_a_renamed_directory_uses_the_earlier_path(sdir: WebHdfsEmulator) -> None:
    tree(sdir, {"d/f1": b"1", "d/f2": b"2", "x": b"x"})
    snap(sdir, "s1")
    mv(sdir, "d", "e")
    put_file(sdir, "/s/e/new", b"n")
    assert call(sdir, "POST", "/s/e/f1", "APPEND", data=b"more").status_code == 200
    snap(sdir, "s2")
    assert snapdiff(sdir, "/s", "s1", "s2") == [
        ("MODIFY", "", None), ("RENAME", "d", "e"),
        ("MODIFY", "d", None), ("CREATE", "d/new", None),
        ("MODIFY", "d/f1", None),
    ]


def test_diff_swap_and_cycle_are_renames(sdir: WebHdfsEmulator) -> None:
    tree(sdir, {"a": b"A", "b": b"B", "c": b"C", "z/p": b"P", "z/q": b"Q"})
    snap(sdir, "s1")
    mv(sdir, "a", "tmp")
    mv(sdir, "b", "a")
    mv(sdir, "tmp", "b")  # swap a <-> b
    mv(sdir, "z/p", "z/t")
    mv(sdir, "z/q", "z/p")
    mv(sdir, "z/t", "z/q")  # swap inside z
    snap(sdir, "s2")
    assert snapdiff(sdir, "/s", "s1", "s2") == [
        ("MODIFY", "", None), ("RENAME", "a", "b"), ("RENAME", "b", "a"),
        ("MODIFY", "z", None), ("RENAME", "z/p", "z/q"), ("RENAME", "z/q", "z/p"),
    ]


def test_diff_move_out_of_a_deleted_directory_is_a_create(sdir: WebHdfsEmulator) -> None:
    tree(sdir, {"d/f": b"F", "d/g": b"G"})
    snap(sdir, "s1")
    mv(sdir, "d/f", "g")
    assert call(sdir, "DELETE", "/s/d", "DELETE", recursive="true").json() == {"boolean": True}
    snap(sdir, "s2")
    assert snapdiff(sdir, "/s", "s1", "s2") == [("MODIFY", "", None), ("CREATE", "g", None), ("DELETE", "d", None)]


def test_diff_overwrite_new_dir_and_order(sdir: WebHdfsEmulator) -> None:
    tree(sdir, {"a/x": b"1", "b": b"2", "m/n/o": b"3"})
    snap(sdir, "s1")
    put_file(sdir, "/s/a/x", b"9")  # overwrite: a new inode under the same name
    tree(sdir, {"new/one": b"1", "new/two": b"2"})  # a new directory is one CREATE
    assert call(sdir, "POST", "/s/m/n/o", "APPEND", data=b"+").status_code == 200  # deep modify
    assert call(sdir, "DELETE", "/s/b", "DELETE").json() == {"boolean": True}
    snap(sdir, "s2")
    assert snapdiff(sdir, "/s", "s1", "s2") == [
        ("MODIFY", "", None), ("CREATE", "new", None), ("DELETE", "b", None),
        ("MODIFY", "a", None), ("CREATE", "a/x", None), ("DELETE", "a/x", None),
        ("MODIFY", "m/n/o", None),
    ]
    # against the live tree ("." as HDFS takes it) nothing changed since s2
    assert snapdiff(sdir, "/s", "s2", ".") == []


def test_diff_rename_into_a_renamed_directory(sdir: WebHdfsEmulator) -> None:
    tree(sdir, {"d/f": b"F", "k": b"K"})
    snap(sdir, "s1")
    mv(sdir, "d", "e")
    mv(sdir, "k", "e/k2")
    snap(sdir, "s2")
    # the target of a rename is its later path (HDFS's findRenameTargetPath)
    assert snapdiff(sdir, "/s", "s1", "s2") == [
        ("MODIFY", "", None), ("RENAME", "d", "e"), ("RENAME", "k", "e/k2"), ("MODIFY", "d", None),
    ]


# -- the diff report is complete: applied to the earlier tree it gives the later tree ----------------
def apply_report(earlier: dict[str, bytes | None], later: dict[str, bytes | None],
                 report: list[tuple[str, str, str | None]]) -> dict[str, bytes | None]:
    """A reference reading of an HDFS diff report (DistCpSync semantics): every earlier path
    moves with the deepest rename or delete above it; ``+``/``M`` paths are earlier paths,
    translated the same way, and their content comes from the later snapshot. Values: file
    bytes, or None for a directory."""
    renames = {src: tgt for t, src, tgt in report if t == "RENAME" and tgt is not None}
    deletes = {src for t, src, _ in report if t == "DELETE"}

    def under(p: str, a: str) -> bool:
        return p == a or p.startswith(a + "/")

    def later_path(p: str) -> str | None:
        best = ""
        for a in [*renames, *deletes]:
            if under(p, a) and len(a) > len(best):
                best = a
        if not best:
            return p
        if best in renames:  # a deeper rename wins over a delete of the same path? never both
            return renames[best] + p[len(best):]
        return None

    out: dict[str, bytes | None] = {}
    for p, v in earlier.items():
        q = later_path(p)
        if q is not None:
            out[q] = v
    for t, src, _ in report:
        if t not in ("CREATE", "MODIFY") or src == "":
            continue
        if t == "MODIFY":  # the item itself existed earlier: it moves with its own renames
            q = later_path(src)
        else:  # a new item: only its parent existed earlier
            parent, _, name = src.rpartition("/")
            qp = later_path(parent) if parent else ""
            q = None if qp is None else (f"{qp}/{name}" if qp else name)
        assert q is not None, (t, src)
        if t == "CREATE":
            for p, v in later.items():
                if under(p, q):
                    out[p] = v
        elif later.get(q) is not None:  # a modified file (a modified directory changes no bytes)
            out[q] = later[q]
    return out


def snapshot_tree(emu: WebHdfsEmulator, name: str) -> dict[str, bytes | None]:
    base = emu.local(f"/s/.snapshot/{name}") if name != "." else emu.local("/s")
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for n in dirnames:
            out[str((Path(dirpath) / n).relative_to(base))] = None
        for n in filenames:
            out[str((Path(dirpath) / n).relative_to(base))] = (Path(dirpath) / n).read_bytes()
    return out


@pytest.mark.parametrize("seed", range(30))
def test_random_changes_diff_reproduces_the_later_tree(sdir: WebHdfsEmulator, seed: int) -> None:
    rnd = random.Random(seed)
    names = ["a", "b", "c", "d", "e"]

    def files() -> list[str]:
        return [p for p, v in snapshot_tree(sdir, ".").items() if v is not None]

    def dirs() -> list[str]:
        return ["", *(p for p, v in snapshot_tree(sdir, ".").items() if v is None)]

    def fresh(d: str) -> str:
        taken = {p for p in snapshot_tree(sdir, ".")}
        for _ in range(50):
            n = f"{d}/{rnd.choice(names)}{rnd.randint(0, 3)}".lstrip("/")
            if n not in taken:
                return n
        return f"{d}/z{rnd.randint(0, 10**9)}".lstrip("/")

    for _ in range(6):
        put_file(sdir, f"/s/{fresh(rnd.choice(dirs()))}", rnd.randbytes(rnd.randint(0, 40)))
        call(sdir, "PUT", f"/s/{fresh(rnd.choice(dirs()))}", "MKDIRS")
    snap(sdir, "s1")
    for _ in range(rnd.randint(1, 14)):
        op = rnd.choice(["create", "append", "overwrite", "delete", "mkdir", "rename", "rename", "swap", "rmdir"])
        fl, ds = files(), dirs()
        if op == "create" or (op in ("append", "overwrite", "delete", "swap") and len(fl) < 2):
            put_file(sdir, f"/s/{fresh(rnd.choice(ds))}", rnd.randbytes(rnd.randint(0, 40)))
        elif op == "append":
            call(sdir, "POST", f"/s/{rnd.choice(fl)}", "APPEND", data=rnd.randbytes(rnd.randint(1, 9)))
        elif op == "overwrite":
            put_file(sdir, f"/s/{rnd.choice(fl)}", rnd.randbytes(rnd.randint(0, 40)))
        elif op == "delete":
            call(sdir, "DELETE", f"/s/{rnd.choice(fl)}", "DELETE")
        elif op == "mkdir":
            call(sdir, "PUT", f"/s/{fresh(rnd.choice(ds))}", "MKDIRS")
        elif op == "rmdir" and len(ds) > 1:
            call(sdir, "DELETE", f"/s/{rnd.choice(ds[1:])}", "DELETE", recursive="true")
        elif op == "rename":
            src = rnd.choice(fl + ds[1:])
            dst_dir = rnd.choice([d for d in ds if not (d + "/").startswith(src + "/")] or [""])
            call(sdir, "PUT", f"/s/{src}", "RENAME", destination=f"/s/{fresh(dst_dir)}")
        elif op == "swap":
            x, y = rnd.sample(fl, 2)
            for a, b in ((x, "tmp-swap"), (y, x), ("tmp-swap", y)):
                call(sdir, "PUT", f"/s/{a}", "RENAME", destination=f"/s/{b}")
    snap(sdir, "s2")
    earlier, later = snapshot_tree(sdir, "s1"), snapshot_tree(sdir, "s2")
    report = snapdiff(sdir, "/s", "s1", "s2")
    assert apply_report(earlier, later, report) == later, (report, sorted(earlier), sorted(later))


def test_a_writer_killed_mid_stream_leaves_the_file_open(emu: WebHdfsEmulator) -> None:
    """As HDFS: the data that arrived is there, the file stays under construction (no checksum)
    until the lease is recovered; deleting it works meanwhile."""
    import socket as s
    from urllib.parse import urlparse

    r = call(emu, "PUT", "/k/part", "CREATE", follow=False, overwrite="true")
    loc = urlparse(r.headers["Location"])
    sock = s.create_connection((loc.hostname, loc.port), timeout=10)
    sock.sendall(f"PUT {loc.path}?{loc.query} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5\r\nhello\r\n".encode())
    import time

    ended = emu.store.writes_ended
    sock.close()  # the writer dies before the last chunk
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and emu.store.writes_ended == ended:
        time.sleep(0.05)
    assert emu.store.writes_ended == ended + 1
    r = call(emu, "GET", "/k/part", "GETFILECHECKSUM")
    assert r.status_code == 403 and "under construction" in r.json()["RemoteException"]["message"]
    assert call(emu, "GET", "/k/part", "OPEN").content == b"hello"
    emu.recover_lease("/k/part")
    assert call(emu, "GET", "/k/part", "GETFILECHECKSUM").status_code == 200
    emu.open_for_write("/k/other", b"x")
    assert call(emu, "DELETE", "/k/other", "DELETE").json() == {"boolean": True}
