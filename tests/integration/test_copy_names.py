"""Names a copy carries as they are: a source name that is not UTF-8 (its bytes, also through a
fast-forward from a manifest), names with leading and trailing spaces through a snapshot diff on
the real HDFS, and the staging names of a snapshot diff's moves, which never collide even when
every hash prefix does. (Long names: test_copy_symlinks.py, with the entries a run skips.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import all_bytes, drt_in, hdfs_source, make_tree, tmp_files

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_a_source_name_that_is_not_utf8_is_copied_by_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    odd = os.fsencode(str(src)) + b"/caf\xe9.csv"
    with open(odd, "wb") as f:
        f.write(b"latin-1 name")
    make_tree(src, {"ok.txt": b"ok"})
    for _ in range(2):  # the second run is a fast-forward from a manifest holding the name
        code, out = drt_in(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
        assert code == 0, out
    with open(os.fsencode(str(tmp_path / "dst")) + b"/caf\xe9.csv", "rb") as f:
        assert f.read() == b"latin-1 name"
    assert out["mode"] == "fast-forward" and out["files_copied"] == 0


def test_staged_moves_never_share_a_name_even_when_every_hash_prefix_collides(
        tmp_path: Path, hot_dir: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A renamed directory of 24 files, every 8-hex tag forced equal: each staged move still gets
    its own name (file 2's bytes never land under file 1's name)."""
    files = {f"big/f{i:02d}.csv": f"file {i}\n".encode() * (i + 1) for i in range(24)}
    hdfs_source(hot_dir, files)
    opts = CopyOptions(update=True, delete=True, snapshots=True)
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env()).ok
    import dr_toolkit.fs.base as base

    monkeypatch.setattr(base, "run_tag", lambda run_id: "c0111de0")  # every prefix collides
    hot_dir.rename("/s/big", "/s/moved")
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason and r.files_renamed == 24, (r.mode_reason, r.failures)
    assert hot_dir.tree("/s") == {k.replace("big/", "moved/"): v for k, v in files.items()}
    assert all_bytes(dst) == hot_dir.tree("/s")
    assert tmp_files(dst) == []


def test_snapshot_diff_paths_keep_leading_and_trailing_spaces(tmp_path: Path, hot_dir: Any) -> None:
    fs = hdfs_source(hot_dir, {"x": b"plain x", "x ": b"x with a space", "b.csv": b"b", "report .csv ": b"r1",
                             "keep/a.csv": b"a"})
    opts = CopyOptions(update=True, delete=True, snapshots=True)
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env()).ok
    fs.write_bytes(hot_dir.p("/s/ lead/x.csv"), b"under a directory with a leading space")
    fs.write_bytes(hot_dir.p("/s/report .csv "), b"r2, longer")
    hot_dir.rename("/s/b.csv", "/s/a.csv ")
    fs.delete(hot_dir.p("/s/x "))
    fs.write_bytes(hot_dir.p("/s/keep/ c.csv"), b"c")
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    want = hot_dir.tree("/s")
    assert sorted(want) == sorted([" lead/x.csv", "a.csv ", "keep/ c.csv", "keep/a.csv", "report .csv ", "x"])
    assert all_bytes(dst) == want
