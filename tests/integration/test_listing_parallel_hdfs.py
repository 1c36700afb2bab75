"""-numListstatusThreads at every level on real HDFS (issue 42; the session's hot cluster through
WebHDFS, tests/support/fixtures_hdfs.py): a tree held under one top-level directory, with empty
directories and files of killed runs, lists on 2 and 4 threads to the same files (status for
status), skip reports and directory tokens as one serial walk; the proven listing and the target's
walk (temporary files, empty directories) agree too; a NameNode gone in the middle of the walk
surfaces as one walk's error does (UnreachableError), and no listing thread is left running."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from dr_toolkit.copy.listing import Found, Side, entries, proven_listing, target_listing
from dr_toolkit.errors import UnreachableError
from dr_toolkit.fs.base import FileStatus
from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
from drt_servers.process import free_port

pytestmark = [pytest.mark.integration]


def _tree(hot_dir: Any, seed: int = 11) -> None:
    rnd = random.Random(seed)
    made = ["src/all"]
    for i in range(30):
        d = f"{rnd.choice(made)}/d{i}"
        made.append(d)
    for i in range(70):
        d = rnd.choice(made)
        if i % 10 == 3:
            hot_dir.write(f"{d}/.drt-tmp.{i:08x}.killed", b"k")
        else:
            hot_dir.write(f"{d}/f{i}", rnd.randbytes(rnd.randrange(0, 40)))
    for d in made[1:]:
        hot_dir.mkdir(d)  # the ones no file was put under stay empty
    hot_dir.write("src/top.txt", b"t")


def _walk(s: Side) -> tuple[list[tuple[str, FileStatus]], list[tuple[str, str]], dict[str, Any]]:
    skips: list[tuple[str, str]] = []
    tokens: dict[str, Any] = {}
    got = list(entries(s, None, lambda p, r: skips.append((p, r)), tokens))
    return sorted(got, key=lambda e: e[0]), sorted(skips), tokens


def test_parallel_listing_equals_one_walk_on_hdfs(hot_dir: Any) -> None:
    _tree(hot_dir)
    fs = hot_dir.fs()
    loc = hot_dir.location("src")
    serial = _walk(Side(loc, fs, loc.path))
    assert len(serial[0]) == 64 and len(serial[2]) == 32  # 63 files + top.txt; the root, all and d0..d29
    reasons = {r for _, r in serial[1]}
    assert {"empty directory", "named like a temporary file"} <= reasons, serial[1]
    for n in (2, 4):
        got = _walk(Side(loc, fs, loc.path, list_threads=n))
        assert [r for r, _ in got[0]] == [r for r, _ in serial[0]], n
        assert got == serial, n
    one, four = Side(loc, fs, loc.path), Side(loc, fs, loc.path, list_threads=4)
    assert proven_listing(one, None) == proven_listing(four, None)
    f1, f4 = Found(), Found()
    assert target_listing(one, one, f1) == target_listing(one, four, f4)
    assert (sorted(f1.tmp), sorted(f1.empty)) == (sorted(f4.tmp), sorted(f4.empty)) and f1.tmp and f1.empty


def test_a_namenode_gone_during_the_walk_surfaces(hot_dir: Any) -> None:
    _tree(hot_dir, seed=12)
    dead = WebHdfsFileSystem([f"http://127.0.0.1:{free_port()}"], user="hdfs", timeout_s=5)
    deep = hot_dir.p("src/all") + "/"

    class Gone(WebHdfsFileSystem):
        """The real cluster until the walk goes below src/all: from there a NameNode that is gone."""

        def list_dir(self, path: str, skipped: Any = None, dirs: dict[str, Any] | None = None
                     ) -> Iterator[FileStatus]:
            if path.startswith(deep):
                return dead.list_dir(path, skipped, dirs)
            return super().list_dir(path, skipped, dirs)

    fs = Gone(hot_dir.urls, user="hdfs", timeout_s=30)
    loc = hot_dir.location("src")
    with pytest.raises(UnreachableError, match="WebHDFS unreachable"):
        list(entries(Side(loc, fs, loc.path, list_threads=4)))
    assert not [t for t in threading.enumerate() if t.name.startswith("drt-list-")]
    with pytest.raises(UnreachableError, match="WebHDFS unreachable"):  # one walk: the same error
        list(entries(Side(loc, dead, loc.path)))
