"""--delete leaves exactly the source's entries and nothing else: a single-file source deletes
nothing beside it, a target directory emptied behind the run's back is pruned (kept without
--delete), excluded target files in the way of a type change go. (Target-only symlinks, FIFOs and
directories removed and reported: test_copy_symlinks.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
UPD = CopyOptions(update=True, delete=True)


def test_single_file_source_with_delete_deletes_nothing_else(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"one.txt": b"1", "two.txt": b"2"})
    make_tree(tmp_path / "dst", {"keep-me.txt": b"k", "sub/also.txt": b"a"})
    r = distcp(CopyRequest(f"file://{tmp_path}/src/one.txt", f"file://{tmp_path}/dst", options=UPD),
               access=Access.from_env())
    assert r.ok and r.files_copied == 1 and r.files_deleted == 0
    assert tree_digest(tmp_path / "dst").keys() == {"one.txt", "keep-me.txt", "sub/also.txt"}
    r2 = distcp(CopyRequest(f"file://{tmp_path}/src/one.txt", f"file://{tmp_path}/dst", options=UPD),
                access=Access.from_env())
    assert r2.ok and r2.files_copied == 0 and r2.files_deleted == 0


def test_a_target_directory_emptied_behind_our_back_is_pruned_with_delete(tmp_path: Path) -> None:
    """Found by the randomized test on real HDFS (seed 32, a tampered target in reconcile): a
    target directory whose last file someone else deleted was left behind, the source lacking it."""
    make_tree(tmp_path / "src", {"keep/a": b"a"})
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD),
               access=Access.from_env())
    assert r.ok
    make_tree(tmp_path / "dst", {"old/deep/x": b"x"})
    (tmp_path / "dst/old/deep/x").unlink()  # emptied behind our back
    (tmp_path / "dst/keep/a").write_bytes(b"A")  # and the target changed: reconcile
    r2 = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD),
                access=Access.from_env())
    assert r2.ok and tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    assert sorted(p.name for p in (tmp_path / "dst").iterdir()) == ["keep"]
    (tmp_path / "dst/empty-kept").mkdir()
    r3 = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                            options=CopyOptions(update=True)),
                access=Access.from_env())
    assert r3.ok and (tmp_path / "dst/empty-kept").is_dir()  # without --delete nothing is removed


def test_excluded_target_files_in_the_way_of_a_type_change_are_removed(tmp_path: Path) -> None:
    """Found by the randomized test: the target keeps excluded files under landing/ (filters pass
    over them); the source's landing becomes a file: the directory goes, the file is copied."""
    make_tree(tmp_path / "src", {"landing/x": b"x", "a": b"a"})
    assert distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD),
                  access=Access.from_env()).ok
    (tmp_path / "src/landing/x").unlink()
    (tmp_path / "src/landing").rmdir()
    (tmp_path / "src/landing").write_bytes(b"now a file")
    opts = CopyOptions(update=True, delete=True, exclude=["landing/*"])
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts),
               access=Access.from_env())
    assert r.ok, r.failures
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
