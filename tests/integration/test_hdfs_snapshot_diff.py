"""HDFS's snapshot-diff report as the real NameNode answers it (GETSNAPSHOTDIFF over WebHDFS,
hadoop-client-minicluster), and the reading of it that DistCpSync and the toolkit's
snapshot-diff fast-forward rely on: changes under a renamed directory carry the earlier path,
a RENAME its earlier source and later target, the NameNode's own order — and, for random change
sequences, the report applied to the earlier snapshot gives the later one."""

from __future__ import annotations

import random
from typing import Any

import pytest
import requests

from tests.support.fixtures_hdfs import HdfsDir

pytestmark = pytest.mark.integration


def call(emu: HdfsDir, method: str, path: str, op: str, data: bytes | None = None,
         follow: bool = True, **params: Any) -> requests.Response:
    """One WebHDFS REST call on the active NameNode; ``path`` is relative to the test's directory."""
    url = f"{emu.active_url}/webhdfs/v1{emu.p(path)}"
    r = requests.request(method, url, params={"op": op, "user.name": "hdfs", **params}, allow_redirects=False,
                         timeout=30)
    if r.status_code == 307 and follow:
        r = requests.request(method, r.headers["Location"], data=data, timeout=30)
    return r


def put_file(emu: HdfsDir, path: str, data: bytes, **params: Any) -> None:
    r = call(emu, "PUT", path, "CREATE", data=data, overwrite="true", **params)
    assert r.status_code == 201, r.text


# -- snapshot diff reports in HDFS's shape ----------------------------------------------------------
def snapdiff(emu: HdfsDir, d: str, old: str, new: str) -> list[tuple[str, str, str | None]]:
    r = call(emu, "GET", d, "GETSNAPSHOTDIFF", oldsnapshotname=old, snapshotname=new)
    return [(e["type"], e["sourcePath"], e.get("targetPath")) for e in r.json()["SnapshotDiffReport"]["diffList"]]


def tree(emu: HdfsDir, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        put_file(emu, f"/s/{rel}", data)


def snap(emu: HdfsDir, name: str) -> None:
    assert call(emu, "PUT", "/s", "CREATESNAPSHOT", snapshotname=name).status_code == 200


def mv(emu: HdfsDir, a: str, b: str) -> None:
    assert call(emu, "PUT", f"/s/{a}", "RENAME", destination=emu.p(f"/s/{b}")).json() == {"boolean": True}


@pytest.fixture
def sdir(hot_dir: HdfsDir) -> HdfsDir:
    assert call(hot_dir, "PUT", "/s", "MKDIRS").status_code == 200
    hot_dir.allow_snapshot("/s")  # a superuser operation: through the launcher
    return hot_dir


def test_diff_under_a_renamed_directory_uses_the_earlier_path(sdir: HdfsDir) -> None:
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


def test_diff_swap_and_cycle_are_renames(sdir: HdfsDir) -> None:
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


def test_diff_move_out_of_a_deleted_directory_is_a_create(sdir: HdfsDir) -> None:
    tree(sdir, {"d/f": b"F", "d/g": b"G"})
    snap(sdir, "s1")
    mv(sdir, "d/f", "g")
    assert call(sdir, "DELETE", "/s/d", "DELETE", recursive="true").json() == {"boolean": True}
    snap(sdir, "s2")
    assert snapdiff(sdir, "/s", "s1", "s2") == [("MODIFY", "", None), ("CREATE", "g", None), ("DELETE", "d", None)]


def test_diff_overwrite_new_dir_and_order(sdir: HdfsDir) -> None:
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
    # against the live tree nothing changed since s2: over WebHDFS the live tree is the empty
    # name ("." is refused: "Cannot find the snapshot of directory ... with name .")
    assert snapdiff(sdir, "/s", "s2", "") == []
    r = call(sdir, "GET", "/s", "GETSNAPSHOTDIFF", oldsnapshotname="s2", snapshotname=".")
    assert r.status_code == 403 and r.json()["RemoteException"]["exception"] == "SnapshotException"


def test_diff_rename_into_a_renamed_directory(sdir: HdfsDir) -> None:
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


def snapshot_tree(emu: HdfsDir, name: str) -> dict[str, bytes | None]:
    """rel -> bytes (files) or None (directories) of /s or of its snapshot ``name``, read from the cluster."""
    client = emu.cluster.client()
    base = emu.p(f"/s/.snapshot/{name}") if name != "." else emu.p("/s")
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in client.walk(base):
        rel = dirpath[len(base):].strip("/")
        for n in dirnames:
            out[f"{rel}/{n}".lstrip("/")] = None
        for n in filenames:
            with client.read(f"{dirpath}/{n}") as r:
                out[f"{rel}/{n}".lstrip("/")] = bytes(r.read())
    return out


@pytest.mark.parametrize("seed", range(8))
def test_random_changes_diff_reproduces_the_later_tree(sdir: HdfsDir, seed: int) -> None:
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
            call(sdir, "PUT", f"/s/{src}", "RENAME", destination=sdir.p(f"/s/{fresh(dst_dir)}"))
        elif op == "swap":
            x, y = rnd.sample(fl, 2)
            for a, b in ((x, "tmp-swap"), (y, x), ("tmp-swap", y)):
                call(sdir, "PUT", f"/s/{a}", "RENAME", destination=sdir.p(f"/s/{b}"))
    snap(sdir, "s2")
    earlier, later = snapshot_tree(sdir, "s1"), snapshot_tree(sdir, "s2")
    report = snapdiff(sdir, "/s", "s1", "s2")
    assert apply_report(earlier, later, report) == later, (report, sorted(earlier), sorted(later))
