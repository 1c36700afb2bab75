"""Issue 21, "the replica equals the source, round two": each hole reproduced through `drt` or
the library, on local trees and on the real HDFS (hadoop-client-minicluster) where the
NameNode's own GETSNAPSHOTDIFF, fileIds and append semantics matter."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from dr_toolkit.copy import execute
from dr_toolkit.copy.api import distcp
from dr_toolkit.fs import open_fs
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, tmp_files, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
UPD = CopyOptions(update=True, delete=True)


def _drt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
         ) -> tuple[int, dict[str, Any]]:
    monkeypatch.delenv("DRT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(["--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def _all_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


# -- item 1: a symlink (or any non-directory) in the target is never followed -------------------------
def test_symlinks_planted_in_the_target_are_replaced_never_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """dst/d -> a directory outside the replica, dst/e -> the source's own directory d: the run
    must write d/f and e/f into real directories of the target, and nothing outside it."""
    make_tree(tmp_path / "src", {"d/f": b"the source's d/f", "e/f": b"e/f: other bytes", "top": b"t"})
    make_tree(tmp_path / "outside", {"keep": b"outside"})
    (tmp_path / "dst").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "dst/d")
    os.symlink(tmp_path / "src/d", tmp_path / "dst/e")
    os.mkfifo(tmp_path / "dst/top")  # a FIFO where the source has a file
    before_src, before_out = _all_bytes(tmp_path / "src"), _all_bytes(tmp_path / "outside")
    code, out = _drt(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0, out
    assert _all_bytes(tmp_path / "src") == before_src  # the source is never written
    assert _all_bytes(tmp_path / "outside") == before_out  # nothing outside the target
    assert sorted(os.listdir(tmp_path / "outside")) == ["keep"]
    assert not (tmp_path / "dst/d").is_symlink() and not (tmp_path / "dst/e").is_symlink()
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    assert sorted(e["path"] for e in out["deleted_entries"]) == ["d", "e", "top"]
    # and again: nothing left to do, still nothing outside
    code, out = _drt(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0 and out["files_copied"] == 0
    assert _all_bytes(tmp_path / "outside") == before_out


def test_a_symlink_planted_while_the_run_executes_is_refused_in_one_line(tmp_path: Path) -> None:
    """A link swapped in after the plan (between listing and writing): the write through it is
    refused (the file fails with one clear line, the next run converges), nothing outside."""
    make_tree(tmp_path / "src", {"d/f1": b"1"})
    assert distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, access=Access.from_env()).ok
    make_tree(tmp_path / "src", {"d/f2": b"two"})
    (tmp_path / "outside").mkdir()

    def plant(kind: str, n: int) -> None:
        if kind == "plan" and not (tmp_path / "dst/d").is_symlink():
            (tmp_path / "dst/d/f1").unlink()
            (tmp_path / "dst/d").rmdir()
            os.symlink(tmp_path / "outside", tmp_path / "dst/d")

    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=plant, access=Access.from_env())
    assert os.listdir(tmp_path / "outside") == []
    assert r.files_failed == 1 and "is a symlink in the target" in r.failures[0]["error"], r.failures
    r2 = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, access=Access.from_env())
    assert r2.ok and tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    assert os.listdir(tmp_path / "outside") == []


def test_a_target_directory_swapped_for_a_symlink_mid_copy_is_refused_for_every_later_file(tmp_path: Path) -> None:
    """After the first file of a directory was written, the directory is replaced by a link to
    elsewhere: every later write, rename and retry into it is refused (each checks its parents
    again, none trusts an earlier check), nothing lands outside, the next run converges."""
    make_tree(tmp_path / "src", {"d/f1": b"1", "d/f2": b"two", "d/f3": b"three"})
    (tmp_path / "outside").mkdir()
    swapped = []

    def swap(kind: str, n: int) -> None:
        if kind == "bytes" and not swapped:  # the first file's bytes are in its temp file in dst/d
            os.rename(tmp_path / "dst/d", tmp_path / "moved")
            os.symlink(tmp_path / "outside", tmp_path / "dst/d")
            swapped.append(1)

    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=swap, access=Access.from_env())
    assert swapped and os.listdir(tmp_path / "outside") == []
    assert r.files_failed == 3 and all("is a symlink in the target" in f["error"] for f in r.failures), r.failures
    r2 = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, access=Access.from_env())
    assert r2.ok and tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    assert os.listdir(tmp_path / "outside") == []


def test_a_target_directory_moved_away_mid_copy_gets_no_file_and_the_run_copies_it_again(tmp_path: Path) -> None:
    """The directory a file is being written into is moved out of the target before the file is
    renamed into place: the file is not placed in the moved directory (it would be counted copied
    and recorded while the target lacks it); it is copied again into the directory made anew, so
    the run ends with the replica equal to the source. (Small files commit through one descriptor
    of their directory: this is what checks that directory again before the rename.)"""
    make_tree(tmp_path / "src", {"d/f1": b"1", "d/f2": b"two"})
    moved = []

    def move(kind: str, n: int) -> None:
        if kind == "bytes" and not moved:  # the first file's bytes are in its temp file in dst/d
            os.rename(tmp_path / "dst/d", tmp_path / "moved")
            moved.append(1)

    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=move,
               access=Access.from_env())
    assert moved and r.ok, r.failures
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    assert [p for p in os.listdir(tmp_path / "moved") if not p.startswith(".drt-tmp.")] == []


# -- item 10: --delete leaves exactly the source's entries; odd names; append-only -----------------
def test_delete_removes_and_reports_target_only_symlinks_fifos_and_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    make_tree(tmp_path / "src", {"a": b"a", "k/b": b"b"})
    assert distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, access=Access.from_env()).ok
    os.symlink(tmp_path / "src/a", tmp_path / "dst/ln")
    os.symlink(tmp_path / "nowhere", tmp_path / "dst/k/dangling")
    os.mkfifo(tmp_path / "dst/pipe")
    (tmp_path / "dst/empty/sub").mkdir(parents=True)
    # what a killed run leaves in a directory the source no longer has: only its temp file
    (tmp_path / "dst/killed").mkdir()
    (tmp_path / "dst/killed/.drt-tmp.0badc0de.0123").write_bytes(b"partial")
    code, out = _drt(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0, out
    assert sorted(os.listdir(tmp_path / "dst")) == ["a", "k"] and os.listdir(tmp_path / "dst/k") == ["b"]
    got = {e["path"]: e["reason"] for e in out["deleted_entries"]}
    assert {"ln", "k/dangling", "pipe", "empty/sub", "empty", "killed"} <= set(got), got
    assert got["pipe"] == "not a regular file" and got["k/dangling"] == "dangling symlink"
    assert out["entries_deleted"] == len(got)


def test_a_source_name_that_is_not_utf8_is_copied_by_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    odd = os.fsencode(str(src)) + b"/caf\xe9.csv"
    with open(odd, "wb") as f:
        f.write(b"latin-1 name")
    make_tree(src, {"ok.txt": b"ok"})
    for _ in range(2):  # the second run is a fast-forward from a manifest holding the name
        code, out = _drt(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
        assert code == 0, out
    with open(os.fsencode(str(tmp_path / "dst")) + b"/caf\xe9.csv", "rb") as f:
        assert f.read() == b"latin-1 name"
    assert out["mode"] == "fast-forward" and out["files_copied"] == 0


# -- items 3 and 5: snapshot-diff staging names, whitespace in names (real HDFS) ----------------------
def _hdfs_src(hot_dir: Any, files: dict[str, bytes]) -> Any:
    hot_dir.allow_snapshot("/s")
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    for rel, data in files.items():
        fs.write_bytes(hot_dir.p(f"/s/{rel}"), data)
    return fs


def test_staged_moves_never_share_a_name_even_when_every_hash_prefix_collides(
        tmp_path: Path, hot_dir: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A renamed directory of 24 files, every 8-hex tag forced equal: each staged move still gets
    its own name (file 2's bytes never land under file 1's name)."""
    files = {f"big/f{i:02d}.csv": f"file {i}\n".encode() * (i + 1) for i in range(24)}
    _hdfs_src(hot_dir, files)
    opts = CopyOptions(update=True, delete=True, snapshots=True)
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env()).ok
    import dr_toolkit.fs.base as base

    monkeypatch.setattr(base, "run_tag", lambda run_id: "c0111de0")  # every prefix collides
    hot_dir.rename("/s/big", "/s/moved")
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason and r.files_renamed == 24, (r.mode_reason, r.failures)
    assert hot_dir.tree("/s") == {k.replace("big/", "moved/"): v for k, v in files.items()}
    assert _all_bytes(dst) == hot_dir.tree("/s")
    assert tmp_files(dst) == []


def test_snapshot_diff_paths_keep_leading_and_trailing_spaces(tmp_path: Path, hot_dir: Any) -> None:
    fs = _hdfs_src(hot_dir, {"x": b"plain x", "x ": b"x with a space", "b.csv": b"b", "report .csv ": b"r1",
                             "keep/a.csv": b"a"})
    opts = CopyOptions(update=True, delete=True, snapshots=True)
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env()).ok
    fs.write_bytes(hot_dir.p("/s/ lead/x.csv"), b"under a directory with a leading space")
    fs.write_bytes(hot_dir.p("/s/report .csv "), b"r2, longer")
    hot_dir.rename("/s/b.csv", "/s/a.csv ")
    fs.delete(hot_dir.p("/s/x "))
    fs.write_bytes(hot_dir.p("/s/keep/ c.csv"), b"c")
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    want = hot_dir.tree("/s")
    assert sorted(want) == sorted([" lead/x.csv", "a.csv ", "keep/ c.csv", "keep/a.csv", "report .csv ", "x"])
    assert _all_bytes(dst) == want


# -- item 6: equality is a byte compare or a SHA-256, never a 32-bit CRC32C alone ----------------------
def forge_same_crc32c(data: bytes) -> bytes:
    """Other bytes of the same length and the same CRC32C: 4 bytes changed at the start, 4 more
    chosen by linear algebra over GF(2) (CRC is affine in the message bits)."""
    import google_crc32c

    n = len(data)
    assert n >= 16
    zero = google_crc32c.value(bytes(n))

    def lin(pos: int, chunk: bytes) -> int:  # the linear part of the CRC of `chunk` placed at pos
        m = bytearray(n)
        m[pos:pos + len(chunk)] = chunk
        return google_crc32c.value(bytes(m)) ^ zero

    e1 = b"EVIL"
    want = lin(0, e1)
    p2 = n - 4
    cols = [lin(p2, (1 << j).to_bytes(4, "little")) for j in range(32)]
    # solve sum(x_j * cols[j]) = want over GF(2)
    rows = [(c, 1 << j) for j, c in enumerate(cols)]
    basis: dict[int, tuple[int, int]] = {}
    for v, comb in rows:
        for bit in range(31, -1, -1):
            if not (v >> bit) & 1:
                continue
            if bit in basis:
                v, comb = v ^ basis[bit][0], comb ^ basis[bit][1]
            else:
                basis[bit] = (v, comb)
                break
    v, comb = want, 0
    for bit in range(31, -1, -1):
        if (v >> bit) & 1:
            v, comb = v ^ basis[bit][0], comb ^ basis[bit][1]
    assert v == 0
    d = bytearray(n)
    d[0:4] = e1
    d[p2:p2 + 4] = comb.to_bytes(4, "little")
    out = bytes(a ^ b for a, b in zip(data, d, strict=True))
    assert out != data and google_crc32c.value(out) == google_crc32c.value(data)
    return out


def test_a_target_with_the_same_size_and_crc32c_is_not_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = os.urandom(5000)
    make_tree(tmp_path / "src", {"f.bin": data})
    make_tree(tmp_path / "dst", {"f.bin": forge_same_crc32c(data)})
    code, out = _drt(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0 and out["files_copied"] == 1, out
    assert (tmp_path / "dst/f.bin").read_bytes() == data


def test_hdfs_to_local_the_recorded_state_is_a_sha256_not_a_crc(tmp_path: Path, hot_dir: Any) -> None:
    """HDFS source unchanged (its MD5MD5CRC32C as recorded), local target rewritten to bytes with
    the recorded CRC32C: the target's SHA-256 no longer matches, the file is copied again."""
    data = os.urandom(7000)
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    fs.write_bytes(hot_dir.p("/s/f.bin"), data)
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=UPD, access=Access.from_env()).ok
    (dst / "f.bin").write_bytes(forge_same_crc32c(data))
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=UPD, access=Access.from_env())
    assert r.ok and r.mode == "reconcile" and r.files_copied == 1, (r.mode_reason, r.basis)
    assert (dst / "f.bin").read_bytes() == data


@pytest.mark.parametrize("size", [3000, 3 << 20], ids=["small", "large"])
def test_local_bytes_read_back_are_compared_with_the_source_bytes_read(tmp_path: Path, size: int) -> None:
    """Another process alters the temp file between write and rename: the bytes read back differ
    from the source bytes read (compared byte for byte), the copy is retried, the target ends equal."""
    data = os.urandom(size)
    make_tree(tmp_path / "src", {"d/f.bin": data})
    hit = []

    def corrupt(kind: str, n: int) -> None:
        if kind == "bytes" and not hit:
            tmps = tmp_files(tmp_path / "dst")
            if tmps:
                p = Path(tmps[0])
                if p.stat().st_size:
                    with open(p, "r+b") as f:
                        f.write(b"\0" * 8)
                    hit.append(p)

    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=corrupt, access=Access.from_env())
    assert hit and r.ok, r.failures
    assert (tmp_path / "dst/d/f.bin").read_bytes() == data
    assert hashlib.sha256((tmp_path / "dst/d/f.bin").read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


# -- item 4: snapshot mode never forgets a file the base does not hold (real HDFS) ---------------------
SNAP = CopyOptions(update=True, delete=True, snapshots=True)


def test_a_file_whose_copy_failed_and_whose_directory_is_then_renamed_is_copied(
        tmp_path: Path, hot_dir: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _hdfs_src(hot_dir, {"d/a": b"a", "d/b": b"bbbb", "top": b"t"})
    dst = tmp_path / "dst"
    real = execute._copy_full

    def fail_b(ctx: Any, task: Any, *a: Any) -> Any:
        if task.rel == "d/b":
            raise OSError("injected: disk full")
        return real(ctx, task, *a)

    monkeypatch.setattr(execute, "_copy_full", fail_b)
    monkeypatch.setattr(execute, "ATTEMPTS", 1)
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env())
    assert r.files_failed == 1
    monkeypatch.setattr(execute, "_copy_full", real)
    hot_dir.rename("/s/d", "/s/e")
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    assert _all_bytes(dst) == hot_dir.tree("/s") == {"e/a": b"a", "e/b": b"bbbb", "top": b"t"}


def test_a_failed_file_renamed_itself_and_through_a_renamed_parent_is_copied(
        tmp_path: Path, hot_dir: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Why pending files need no fileId tracking: their paths are paths of the base snapshot, and
    the NameNode's diff from that snapshot names every rename that moved them — their own
    (d/x/b → d/y/b2) and their parent's (d → e), reported in one diff — so each rename whose
    source covers a pending path has its target listed. Two runs of failures, then both renames."""
    _hdfs_src(hot_dir, {"d/x/b": b"bbbb", "d/x/a": b"a", "d/y/c": b"c"})
    dst = tmp_path / "dst"
    real = execute._copy_full

    def fail_b(ctx: Any, task: Any, *a: Any) -> Any:
        if task.rel.endswith("b") or task.rel.endswith("b2"):
            raise OSError("injected: disk full")
        return real(ctx, task, *a)

    monkeypatch.setattr(execute, "_copy_full", fail_b)
    monkeypatch.setattr(execute, "ATTEMPTS", 1)
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env()).files_failed == 1
    hot_dir.rename("/s/d/x/b", "/s/d/y/b2")  # the pending file itself
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env())  # fails again: pending under its new name
    assert r.files_failed == 1 and "snapshot diff" in r.mode_reason, r.mode_reason
    monkeypatch.setattr(execute, "_copy_full", real)
    hot_dir.rename("/s/d/y/b2", "/s/d/x/b3")
    hot_dir.rename("/s/d", "/s/e")  # and its parent, in the same diff
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    assert _all_bytes(dst) == hot_dir.tree("/s") == {"e/x/b3": b"bbbb", "e/x/a": b"a", "e/y/c": b"c"}


def test_files_published_by_rename_out_of_an_excluded_directory_are_copied(tmp_path: Path, hot_dir: Any) -> None:
    fs = _hdfs_src(hot_dir, {"data/old.csv": b"old"})
    opts = CopyOptions(update=True, delete=True, snapshots=True, exclude=["landing/*"])
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env()).ok
    fs.write_bytes(hot_dir.p("/s/landing/new.csv"), b"staged, then published")
    fs.write_bytes(hot_dir.p("/s/landing/batch/p1.csv"), b"part 1")
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env()).ok  # nothing to copy: excluded
    hot_dir.rename("/s/landing/new.csv", "/s/data/new.csv")
    hot_dir.rename("/s/landing/batch", "/s/data/batch")
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    assert _all_bytes(dst) == {"data/old.csv": b"old", "data/new.csv": b"staged, then published",
                               "data/batch/p1.csv": b"part 1"}


def test_widened_filters_force_a_listing_run(tmp_path: Path, hot_dir: Any) -> None:
    _hdfs_src(hot_dir, {"a.csv": b"a", "b.txt": b"b", "d/c.txt": b"c"})
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}",
                  options=CopyOptions(update=True, delete=True, snapshots=True, include=["*.csv"]), access=Access.from_env()).ok
    assert _all_bytes(dst) == {"a.csv": b"a"}
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env())
    assert r.ok and "filters changed" in r.mode_reason, r.mode_reason
    assert _all_bytes(dst) == hot_dir.tree("/s")
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env())  # same filters again: the diff is used
    assert r.ok and "snapshot diff" in r.mode_reason and r.files_copied == 0


@pytest.mark.parametrize("target", ["local", "hdfs"])
def test_a_killed_append_leaves_the_old_version_whole(tmp_path: Path, target: str,
                                                       request: pytest.FixtureRequest) -> None:
    """--append-only: a run killed mid-append leaves the target's old version, never a file that is
    neither. Into a local target the tail goes to a temporary copy renamed into place; into a real
    HDFS target it is written to a temporary file beside the target and put on its end by one
    CONCAT (HDFS's own APPEND would leave the old bytes and part of the tail)."""
    old = os.urandom(1000)
    make_tree(tmp_path / "src", {"app.log": old})
    opts = CopyOptions(update=True, delete=True, append_only=["*.log"])
    if target == "local":
        dst = f"file://{tmp_path}/dst"

        def held() -> dict[str, bytes]:
            return {"app.log": (tmp_path / "dst/app.log").read_bytes()}

        def temps() -> list[Any]:
            return list(tmp_files(tmp_path / "dst"))
    else:
        cold = request.getfixturevalue("cold_dir")
        dst = cold.uri("/dst")

        def held() -> dict[str, bytes]:
            return dict(cold.tree("/dst"))

        def temps() -> list[Any]:
            return [k for k in cold.cluster.client().list(cold.p("/dst")) if k.startswith(".drt-tmp.")]
    assert distcp(f"file://{tmp_path}/src", dst, options=opts, access=Access.from_env()).ok
    tail = os.urandom(10 << 20)  # three chunks: the kill comes after the first was written
    with open(tmp_path / "src/app.log", "ab") as f:
        f.write(tail)
    seen = []

    def kill(kind: str, n: int) -> None:
        if kind == "bytes":
            seen.append(n)
            if len(seen) == 2:
                raise KeyboardInterrupt("killed mid-append")

    with pytest.raises(KeyboardInterrupt):
        distcp(f"file://{tmp_path}/src", dst, options=opts, progress=kill, access=Access.from_env())
    assert held() == {"app.log": old}
    r = distcp(f"file://{tmp_path}/src", dst, options=opts, access=Access.from_env())
    assert r.ok and r.files_appended == 1, (r.mode_reason, r.failures)
    assert held() == {"app.log": old + tail} and temps() == []


# -- item 9: one writer per real target location; a run that lost its lease stops -------------------
def _topology_file(tmp_path: Path, cold_root: Path) -> Path:
    import yaml

    cfg = tmp_path / "drt.yaml"
    cfg.write_text(yaml.safe_dump({"version": 1, "clusters": {
        "hot": {"role": "hot", "local_root": str(tmp_path / "hot")},
        "cold": {"role": "cold", "local_root": str(cold_root)}},
        "ledger": {"url": f"sqlite:///{tmp_path}/ledger.db"}}))
    return cfg


def test_runs_through_aliases_of_one_target_exclude_each_other(tmp_path: Path) -> None:
    """While a run writes dst, runs into the same real directory are refused: through a symlink
    alias, and through a topology (with a ledger) whose cluster root maps onto it."""
    from dr_toolkit.errors import LeaseHeld
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import load_topology

    make_tree(tmp_path / "src", {"a": b"a", "b/c": b"c"})
    make_tree(tmp_path / "hot/data", {"other": b"other source"})
    (tmp_path / "dst").mkdir()
    os.symlink(tmp_path / "dst", tmp_path / "alias")
    topo = load_topology(_topology_file(tmp_path, tmp_path))
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
    refused: list[str] = []

    def meanwhile(kind: str, n: int) -> None:
        if kind != "plan" or refused:
            return
        with pytest.raises(LeaseHeld) as e1:
            distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/alias", options=UPD, access=Access.from_env())
        with pytest.raises(LeaseHeld) as e2:
            distcp("hdfs://hot/data", "hdfs://cold/dst", topology=topo, ledger=ledger, options=UPD, access=Access.from_env())
        refused.extend([str(e1.value), str(e2.value)])

    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=meanwhile, access=Access.from_env())
    assert r.ok and len(refused) == 2, refused
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    # and with the ledger holding the lease: the plain-path run through the alias is refused too
    with_ledger: list[str] = []

    def meanwhile2(kind: str, n: int) -> None:
        if kind == "plan" and not with_ledger:
            with pytest.raises(LeaseHeld) as e:
                distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/alias", options=UPD, access=Access.from_env())
            with_ledger.append(str(e.value))

    assert distcp("hdfs://hot/data", "hdfs://cold/dst", topology=topo, ledger=ledger, options=UPD,
                  progress=meanwhile2, access=Access.from_env()).ok and with_ledger


def test_a_run_paused_past_its_lease_stops_without_writing(tmp_path: Path) -> None:
    """A (a subprocess, bandwidth-limited) is SIGSTOPped mid-copy past its lease's TTL; B takes the
    lease and completes; A, resumed, must stop (exit 1, one line) without renaming anything into
    place or recording a manifest."""
    import signal
    import subprocess
    import sys
    import time

    from dr_toolkit.ledger import Ledger

    cfg = _topology_file(tmp_path, tmp_path / "cold")
    make_tree(tmp_path / "hot/data", {f"f{i}.bin": os.urandom(200_000) for i in range(8)})
    env = {**os.environ, "DRT_CONFIG": str(cfg), "DRT_COPY_LEASE_TTL_S": "2"}
    a = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "distcp", "hdfs://hot/data",
                          "hdfs://cold/data", "--update", "--delete", "--bandwidth-mb-s", "0.3", "--workers", "1"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not tmp_files(tmp_path / "cold/data"):
            time.sleep(0.05)
        assert tmp_files(tmp_path / "cold/data"), "A never started copying"
        a.send_signal(signal.SIGSTOP)
        time.sleep(3)  # past A's TTL (2 s): not an assertion on timing, a pause longer than the lease
        ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
        lease = ledger.lease_holder(f"copy-target:file://{(tmp_path / 'cold/data').resolve()}")
        assert lease is None  # A's lease ran out while it was stopped
        held = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (tmp_path / "cold/data").glob("f*.bin")}
        # another holder takes the lease now (a run on another host: A's flock does not reach it)
        with ledger.lease(f"copy-target:file://{(tmp_path / 'cold/data').resolve()}", ttl_s=60):
            a.send_signal(signal.SIGCONT)
            _out, err = a.communicate(timeout=120)
            after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (tmp_path / "cold/data").glob("f*.bin")}
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 1 and "lost the lease" in err and "Traceback" not in err, err
    assert after == held  # nothing renamed into place after the lease was lost
    assert [(r["status"], r["manifest_id"]) for r in ledger.runs()] == [("interrupted", None)]


# -- item 2: HDFS fileId is not a content token (TRUNCATE + APPEND + SETTIMES on the real NameNode) ----
def _rewrite_in_place(d: Any, rel: str, data: bytes) -> None:
    """TRUNCATE to 0, APPEND other bytes of the same length, SETTIMES back: same fileId, size, mtime."""
    import requests

    st = d.stat(rel)
    url = f"{d.active_url}/webhdfs/v1{d.p(rel)}"
    r = requests.post(url, params={"op": "TRUNCATE", "newlength": 0, "user.name": "hdfs"}, timeout=30)
    assert r.status_code == 200 and r.json() == {"boolean": True}, r.text
    d.append(rel, data)
    d.cluster.set_times(d.p(rel), st["modificationTime"])
    after = d.stat(rel)
    assert (after["fileId"], after["length"], after["modificationTime"]) == \
        (st["fileId"], st["length"], st["modificationTime"])


def test_an_hdfs_source_rewritten_in_place_keeping_its_fileid_is_copied_again(tmp_path: Path, hot_dir: Any) -> None:
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    fs.write_bytes(hot_dir.p("/s/f.bin"), b"A" * 5000)
    fs.write_bytes(hot_dir.p("/s/g.bin"), b"untouched")
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=UPD, access=Access.from_env()).ok
    _rewrite_in_place(hot_dir, "/s/f.bin", b"B" * 5000)
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=UPD, access=Access.from_env())
    assert r.ok and r.mode == "fast-forward" and r.files_copied == 1, (r.mode_reason, r.basis)
    assert _all_bytes(dst) == hot_dir.tree("/s") == {"f.bin": b"B" * 5000, "g.bin": b"untouched"}


def test_an_hdfs_target_rewritten_in_place_keeping_its_fileid_is_repaired(tmp_path: Path, cold_dir: Any) -> None:
    make_tree(tmp_path / "src", {"f.bin": b"A" * 5000, "g.bin": b"untouched"})
    uri = cold_dir.uri("/dst")
    assert distcp(f"file://{tmp_path}/src", uri, options=UPD, access=Access.from_env()).ok
    r = distcp(f"file://{tmp_path}/src", uri, options=UPD, access=Access.from_env())
    assert r.ok and r.mode == "fast-forward" and r.files_copied == 0, r.mode_reason
    _rewrite_in_place(cold_dir, "/dst/f.bin", b"B" * 5000)
    r = distcp(f"file://{tmp_path}/src", uri, options=UPD, access=Access.from_env())
    assert r.ok and r.mode == "reconcile" and "rewritten in place" in r.mode_reason and r.files_copied == 1, \
        r.mode_reason
    assert cold_dir.tree("/dst") == {"f.bin": b"A" * 5000, "g.bin": b"untouched"}


# -- item 8: --preserve drift is re-applied (DistCp re-applies -p to the files it skips) --------------
def test_preserve_is_reapplied_when_the_target_drifts(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": b"a", "b": b"b"})
    os.chmod(tmp_path / "src/a", 0o640)
    os.utime(tmp_path / "src/a", (1_600_000_000, 1_600_000_000))
    opts = CopyOptions(update=True, delete=True, preserve=["permissions", "times"])
    assert distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts, access=Access.from_env()).ok
    os.chmod(tmp_path / "dst/a", 0o666)  # behind our back
    os.utime(tmp_path / "dst/a", (1_700_000_000, 1_700_000_000))
    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts, access=Access.from_env())
    assert r.ok and r.files_copied == 0 and r.attributes_reapplied == 1, (r.mode_reason, r.basis)
    st = os.stat(tmp_path / "dst/a")
    assert oct(st.st_mode & 0o777) == "0o640" and st.st_mtime == 1_600_000_000
    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts, access=Access.from_env())
    assert r.ok and r.mode == "fast-forward" and r.attributes_reapplied == 0, r.mode_reason


def test_a_chmod_on_an_hdfs_source_is_applied_with_preserve(tmp_path: Path, hot_dir: Any) -> None:
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    fs.write_bytes(hot_dir.p("/s/f"), b"f")
    fs.set_permission(hot_dir.p("/s/f"), "644")
    opts = CopyOptions(update=True, delete=True, preserve=["permissions"])
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env()).ok
    fs.set_permission(hot_dir.p("/s/f"), "600")  # fileId, size and mtime unchanged
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=opts, access=Access.from_env())
    assert r.ok and r.attributes_reapplied == 1, (r.mode_reason, r.basis)
    assert oct(os.stat(dst / "f").st_mode & 0o777) == "0o600"


def test_the_namenodes_snapshot_diff_does_not_report_an_in_place_rewrite(tmp_path: Path, hot_dir: Any) -> None:
    """The limit of snapshot mode, stated on the real NameNode (found by the randomized test):
    TRUNCATE + APPEND + SETTIMES that put size and mtime back leave GETSNAPSHOTDIFF empty, so a
    snapshot fast-forward keeps the file; a listing run (snapshots off) copies it."""
    import requests

    _hdfs_src(hot_dir, {"f.bin": b"A" * 5000, "g.bin": b"untouched"})
    dst = tmp_path / "dst"
    assert distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env()).ok

    def blocks() -> list[tuple[int, int, int]]:  # the NameNode's LocatedBlocks: (block id, generation stamp, bytes)
        r = requests.get(f"{hot_dir.active_url}/webhdfs/v1{hot_dir.p('/s/f.bin')}",
                         params={"op": "GET_BLOCK_LOCATIONS", "offset": 0, "length": 1 << 30, "user.name": "hdfs"},
                         timeout=30)
        return [(b["block"]["blockId"], b["block"]["generationStamp"], b["block"]["numBytes"])
                for b in r.json()["LocatedBlocks"]["locatedBlocks"]]

    before = blocks()
    _rewrite_in_place(hot_dir, "/s/f.bin", b"B" * 5000)
    # what docs/design.md says of a cheaper content token: the block list changes though fileId,
    # size and mtime do not (one NameNode call per file: O(files), not usable by an O(changes) run)
    assert blocks() != before
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=SNAP, access=Access.from_env())
    assert r.ok and "(0 entries)" in r.mode_reason and r.files_copied == 0, (r.mode_reason, r.basis)
    r = distcp(hot_dir.uri("/s"), f"file://{dst}", options=UPD, access=Access.from_env())  # the listing mode: the checksum differs
    assert r.ok and r.files_copied == 1 and _all_bytes(dst) == hot_dir.tree("/s"), (r.mode_reason, r.basis)


def test_excluded_target_files_in_the_way_of_a_type_change_are_removed(tmp_path: Path) -> None:
    """Found by the randomized test: the target keeps excluded files under landing/ (filters pass
    over them); the source's landing becomes a file: the directory goes, the file is copied."""
    make_tree(tmp_path / "src", {"landing/x": b"x", "a": b"a"})
    assert distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, access=Access.from_env()).ok
    (tmp_path / "src/landing/x").unlink()
    (tmp_path / "src/landing").rmdir()
    (tmp_path / "src/landing").write_bytes(b"now a file")
    opts = CopyOptions(update=True, delete=True, exclude=["landing/*"])
    r = distcp(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts, access=Access.from_env())
    assert r.ok, r.failures
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
