"""--update: DistCp's semantics (without it a file the target holds is kept as it is), a target
changed in place — even with a newer mtime — found and repaired, the files a plain run kept
compared by content once and then proven; the state it rests on kept outside the replica, with
retention of manifests."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_update_semantics_and_a_target_changed_in_place_is_repaired(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": b"original", "b": b"bbb"})
    make_tree(tmp_path / "dst", {"a": b"differs!"})  # same size, different bytes
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                           options=CopyOptions(update=False)),
               access=Access.from_env())
    assert r.files_copied == 1 and (tmp_path / "dst/a").read_bytes() == b"differs!"  # DistCp default: kept
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                           options=CopyOptions(update=True)),
               access=Access.from_env())
    assert r.files_copied == 1 and (tmp_path / "dst/a").read_bytes() == b"original"
    # the target changed in place with a newer mtime: detected, repaired (not kept as "newer")
    (tmp_path / "dst/b").write_bytes(b"BBB")
    later = time.time() + 3600
    os.utime(tmp_path / "dst/b", (later, later))
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                           options=CopyOptions(update=True)),
               access=Access.from_env())
    assert r.mode == "reconcile" and r.files_copied == 1
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")


def test_update_after_a_plain_run_compares_what_the_plain_run_kept_instead_of_copying_it(tmp_path: Path) -> None:
    """`drt distcp SRC DST` keeps files the target already holds without proving them (DistCp's
    default); a later `--update` compares those by content — it never re-copies a whole tree whose
    files are all equal (issue 22: files_copied=4 of 4 unchanged files)."""
    make_tree(tmp_path / "src", {"a": b"aaa", "d/b": b"bbbb", "d/c": b"c" * 5000, "e": b"eeeee"})
    make_tree(tmp_path / "dst", {"a": b"aaa", "d/b": b"bbbb"})  # already there before the first run
    src, dst = f"file://{tmp_path}/src", f"file://{tmp_path}/dst"
    r1 = distcp(CopyRequest(src, dst, options=CopyOptions(update=False)), access=Access.from_env())
    assert r1.ok and r1.files_copied == 2  # d/c and e; a and d/b kept as they are
    r2 = distcp(CopyRequest(src, dst, options=CopyOptions(update=False)), access=Access.from_env())
    assert r2.ok and r2.files_copied == 0
    r3 = distcp(CopyRequest(src, dst, options=CopyOptions(update=True)), access=Access.from_env())
    assert r3.ok and r3.files_copied == 0, (r3.mode, r3.mode_reason, r3.basis)
    assert r3.mode == "fast-forward"
    # and what it compared is recorded proven: the next --update run reads nothing
    r4 = distcp(CopyRequest(src, dst, options=CopyOptions(update=True)), access=Access.from_env())
    assert r4.ok and r4.files_copied == 0 and r4.files_read_for_planning == 0, r4.basis
    # a kept file that differs is still found and copied
    (tmp_path / "dst/a").write_bytes(b"AAA")
    os.utime(tmp_path / "dst/a", (1, 1))
    distcp(CopyRequest(src, dst, options=CopyOptions(update=False)), access=Access.from_env())
    r5 = distcp(CopyRequest(src, dst, options=CopyOptions(update=True)), access=Access.from_env())
    assert r5.ok and r5.files_copied == 1 and tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")


def test_state_lives_outside_the_replica_with_retention(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": b"a"})
    state = tmp_path / "state"
    opts = CopyOptions(update=True, delete=True, state_dir=str(state), keep_manifests=3)
    for i in range(6):
        (tmp_path / "src/a").write_bytes(b"a" * (i + 1))
        assert distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts),
                      access=Access.from_env()).ok
    assert sorted(p.name for p in (tmp_path / "dst").iterdir()) == ["a"]  # nothing but the source's files
    assert len(list(state.rglob("*.jsonl.gz"))) == 3
    with pytest.raises(ConfigError, match="state location"):
        distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                           options=CopyOptions(update=True, state_dir=str(tmp_path / "dst/.state"))),
               access=Access.from_env())
