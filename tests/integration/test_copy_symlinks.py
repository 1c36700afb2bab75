"""What a copy does with symlinks, on local trees: a symlink in the source is passed over and
reported (never followed); a symlink — or any non-directory — in the target where the source has
a directory is replaced, never written through, even when planted after the plan or swapped in
for a directory while the run writes into it (every write re-checks its parents; a directory
moved away mid-copy gets no file); target-only symlinks go with --delete, reported; an alias of
the source (a symlink, or a topology's cluster root inside it) is seen through when checking that
the target is not inside it.

Runs through a symlink alias of one target exclude each other: test_copy_fence.py. The local
filesystem layer's own confinement (no write through a link among a file's parents):
tests/unit/test_local_confined.py; its listing's skip reasons: test_fs_conformance.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import CopyOptions, load_topology
from tests.support.fixtures_copy import all_bytes, drt_in, make_tree, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
UPD = CopyOptions(update=True, delete=True)


def test_plain_paths_long_names_and_skipped_entries_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("DRT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    long_name = "n" * 250 + ".bin"  # 254 bytes: a temp name with a suffix would not fit
    make_tree(tmp_path / "src", {long_name: b"long", "d/ok.txt": b"ok", "d/.drt-tmp.looks-like-ours": b"x",
                                 ".drt/manifests/data.txt": b"a source dir named .drt is data"})
    (tmp_path / "src/empty").mkdir()
    os.symlink(tmp_path / "src/d/ok.txt", tmp_path / "src/link")
    os.symlink(tmp_path / "nowhere", tmp_path / "src/dangling")
    code = main(["--json", "distcp", "src", "dst", "--update", "--delete"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert tree_digest(tmp_path / "dst").keys() == {long_name, "d/ok.txt", ".drt/manifests/data.txt"}
    assert out["entries_skipped"] == 4
    assert out["skipped_reasons"] == {"symlink": 1, "dangling symlink": 1, "empty directory": 1,
                                      "named like a temporary file (.drt-tmp.*)": 1}


@pytest.mark.parametrize("how", ["symlink", "local-root-alias"])
def test_overlap_is_checked_on_real_paths(tmp_path: Path, how: str) -> None:
    make_tree(tmp_path / "data/src", {"a": b"a"})
    if how == "symlink":
        os.symlink(tmp_path / "data/src", tmp_path / "alias")
        with pytest.raises(ConfigError, match="inside the source"):
            distcp(CopyRequest(f"file://{tmp_path}/data/src", f"file://{tmp_path}/alias/copy", options=UPD),
                   access=Access.from_env())
    else:
        cfg = tmp_path / "drt.yaml"
        cfg.write_text(yaml.safe_dump({"version": 1, "clusters": {
            "hot": {"role": "hot", "local_root": str(tmp_path / "data")},
            "cold": {"role": "cold", "local_root": str(tmp_path / "data/src")}}}))
        topo = load_topology(cfg)
        with pytest.raises(ConfigError, match="inside"):
            distcp(CopyRequest("hdfs://hot/src", "hdfs://cold/x", options=UPD),
                   topology=topo, access=Access.from_env())
    assert sorted(p.name for p in (tmp_path / "data/src").iterdir()) == ["a"]


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
    before_src, before_out = all_bytes(tmp_path / "src"), all_bytes(tmp_path / "outside")
    code, out = drt_in(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0, out
    assert all_bytes(tmp_path / "src") == before_src  # the source is never written
    assert all_bytes(tmp_path / "outside") == before_out  # nothing outside the target
    assert sorted(os.listdir(tmp_path / "outside")) == ["keep"]
    assert not (tmp_path / "dst/d").is_symlink() and not (tmp_path / "dst/e").is_symlink()
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    assert sorted(e["path"] for e in out["deleted_entries"]) == ["d", "e", "top"]
    # and again: nothing left to do, still nothing outside
    code, out = drt_in(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0 and out["files_copied"] == 0
    assert all_bytes(tmp_path / "outside") == before_out


def test_a_symlink_planted_while_the_run_executes_is_refused_in_one_line(tmp_path: Path) -> None:
    """A link swapped in after the plan (between listing and writing): the write through it is
    refused (the file fails with one clear line, the next run converges), nothing outside."""
    make_tree(tmp_path / "src", {"d/f1": b"1"})
    assert distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD),
                  access=Access.from_env()).ok
    make_tree(tmp_path / "src", {"d/f2": b"two"})
    (tmp_path / "outside").mkdir()

    def plant(kind: str, n: int) -> None:
        if kind == "plan" and not (tmp_path / "dst/d").is_symlink():
            (tmp_path / "dst/d/f1").unlink()
            (tmp_path / "dst/d").rmdir()
            os.symlink(tmp_path / "outside", tmp_path / "dst/d")

    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=plant),
               access=Access.from_env())
    assert os.listdir(tmp_path / "outside") == []
    assert r.files_failed == 1 and "is a symlink in the target" in r.failures[0]["error"], r.failures
    r2 = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD),
                access=Access.from_env())
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

    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=swap),
               access=Access.from_env())
    assert swapped and os.listdir(tmp_path / "outside") == []
    assert r.files_failed == 3 and all("is a symlink in the target" in f["error"] for f in r.failures), r.failures
    r2 = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD),
                access=Access.from_env())
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

    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=move),
               access=Access.from_env())
    assert moved and r.ok, r.failures
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    assert [p for p in os.listdir(tmp_path / "moved") if not p.startswith(".drt-tmp.")] == []


def test_delete_removes_and_reports_target_only_symlinks_fifos_and_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    make_tree(tmp_path / "src", {"a": b"a", "k/b": b"b"})
    assert distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD),
                  access=Access.from_env()).ok
    os.symlink(tmp_path / "src/a", tmp_path / "dst/ln")
    os.symlink(tmp_path / "nowhere", tmp_path / "dst/k/dangling")
    os.mkfifo(tmp_path / "dst/pipe")
    (tmp_path / "dst/empty/sub").mkdir(parents=True)
    # what a killed run leaves in a directory the source no longer has: only its temp file
    (tmp_path / "dst/killed").mkdir()
    (tmp_path / "dst/killed/.drt-tmp.0badc0de.0123").write_bytes(b"partial")
    code, out = drt_in(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0, out
    assert sorted(os.listdir(tmp_path / "dst")) == ["a", "k"] and os.listdir(tmp_path / "dst/k") == ["b"]
    got = {e["path"]: e["reason"] for e in out["deleted_entries"]}
    assert {"ln", "k/dangling", "pipe", "empty/sub", "empty", "killed"} <= set(got), got
    assert got["pipe"] == "not a regular file" and got["k/dangling"] == "dangling symlink"
    assert out["entries_deleted"] == len(got)
