"""-numListstatusThreads at every level (issue 42): every directory is a unit of work that any
listing thread takes, at any depth. On real local trees (random ones, a deep chain, one wide
directory, everything under one top-level directory) the parallel listing yields the same entries
(status for status), the same skip reports and the same directory tokens as one serial walk; an
error in a deep directory surfaces; a consumer that stops early leaves no listing thread behind;
the files are handed over while the walk goes on (memory bounded by the queue), not gathered."""

from __future__ import annotations

import errno
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.copy import listing
from dr_toolkit.copy.listing import Side, entries, list_tree, proven_listing, target_listing
from dr_toolkit.fs.base import FileStatus
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.fs.uri import parse_uri

Listed = tuple[list[tuple[str, FileStatus]], list[tuple[str, str]], dict[str, Any]]


def side(root: Path, threads: int, fs: LocalFileSystem | None = None) -> Side:
    loc = parse_uri(str(root))
    return Side(loc, fs or LocalFileSystem(), loc.path, list_threads=threads)


def walk(s: Side, only: str | None = None) -> Listed:
    skips: list[tuple[str, str]] = []
    tokens: dict[str, Any] = {}
    got = list(entries(s, only, lambda p, r: skips.append((p, r)), tokens))
    # a local token taken within FRESH_S of the directory's stamp is marked "fresh" (read again by
    # a proof): the two walks of a tree just made may fall on either side of that moment
    tokens = {d: t[1:] if isinstance(t, tuple) and t and t[0] == "fresh" else t for d, t in tokens.items()}
    return sorted(got, key=lambda e: e[0]), sorted(skips), tokens


def assert_same(root: Path, only: str | None = None, threads: tuple[int, ...] = (2, 3, 8)) -> Listed:
    serial = walk(side(root, 1), only)
    assert serial[0] or serial[1], "an empty tree proves nothing"
    for n in threads:
        got = walk(side(root, n), only)
        assert [r for r, _ in got[0]] == [r for r, _ in serial[0]], n  # same names, each once
        assert got[0] == serial[0], n  # status for status
        assert got[1] == serial[1], n  # skip reports
        assert got[2] == serial[2], n  # directory tokens
    return serial


def random_tree(root: Path, rnd: random.Random, dirs: int, files: int) -> None:
    made = [root]
    root.mkdir(parents=True, exist_ok=True)
    for i in range(dirs):
        d = rnd.choice(made) / f"d{i}"
        d.mkdir()
        made.append(d)
    for i in range(files):
        d = rnd.choice(made)
        k = rnd.random()
        if k < 0.04:
            os.symlink(d / "nowhere", d / f"dangling{i}")
        elif k < 0.08:
            os.symlink(made[0], d / f"link{i}")
        elif k < 0.11:
            (d / f".drt-tmp.{i:08x}.killed").write_bytes(b"k")
        elif k < 0.13:
            os.mkfifo(d / f"fifo{i}")
        else:
            (d / f"f{i}").write_bytes(rnd.randbytes(rnd.randrange(0, 64)))


@pytest.mark.parametrize("seed", range(6))
def test_random_trees_list_as_one_walk(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    random_tree(tmp_path / "t", rnd, dirs=rnd.randrange(1, 120), files=rnd.randrange(0, 400))
    serial = assert_same(tmp_path / "t")
    reasons = {r for _, r in serial[1]}
    if seed == 0:  # the tree holds every kind of entry a listing passes over
        assert {"empty directory", "symlink", "dangling symlink", "not a regular file"} <= reasons, reasons


def test_everything_under_one_top_level_directory(tmp_path: Path) -> None:
    random_tree(tmp_path / "t" / "all", random.Random(7), dirs=300, files=900)
    (tmp_path / "t" / "all" / "empty").mkdir()
    serial = assert_same(tmp_path / "t")
    assert len(serial[0]) > 700 and len(serial[2]) == 303


def test_a_deep_chain(tmp_path: Path) -> None:
    d = tmp_path / "t"
    for i in range(150):
        d = d / f"c{i % 10}"
        d.mkdir(parents=True)
        (d / "f").write_bytes(str(i).encode())
        if i % 7 == 0:
            (d.parent / f"side{i}").mkdir()  # an empty branch at this depth
    serial = assert_same(tmp_path / "t")
    assert len(serial[0]) == 150 and sum(r == "empty directory" for _, r in serial[1]) == 22


def test_one_wide_directory(tmp_path: Path) -> None:
    wide = tmp_path / "t" / "wide"
    wide.mkdir(parents=True)
    for i in range(3000):
        (wide / f"f{i:05d}").write_bytes(b"x")
    for i in range(40):
        (wide / f"s{i}").mkdir()
        (wide / f"s{i}" / "g").write_bytes(b"y")
    (tmp_path / "t" / "top").write_bytes(b"t")
    serial = assert_same(tmp_path / "t")
    assert len(serial[0]) == 3041


def test_below_only_and_the_proven_and_target_listings(tmp_path: Path) -> None:
    random_tree(tmp_path / "t", random.Random(3), dirs=80, files=300)
    (tmp_path / "t" / "d0" / ".drt-tmp.deadbeef.x").parent.mkdir(exist_ok=True)
    (tmp_path / "t" / "d0" / ".drt-tmp.deadbeef.x").write_bytes(b"k")
    assert_same(tmp_path / "t", only=str(tmp_path / "t" / "d0"))
    one, four = side(tmp_path / "t", 1), side(tmp_path / "t", 4)
    s1: list[tuple[str, str]] = []
    s4: list[tuple[str, str]] = []
    assert proven_listing(one, lambda p, r: s1.append((p, r))) == proven_listing(four, lambda p, r: s4.append((p, r)))
    assert set(s1) == set(s4)  # (a directory read again by the proof reports its entries again: Skips counts each once)
    f1, f4 = listing.Found(), listing.Found()
    assert target_listing(one, one, f1) == target_listing(one, four, f4)
    assert (sorted(f1.tmp), sorted(f1.empty), sorted(f1.odd)) == (sorted(f4.tmp), sorted(f4.empty), sorted(f4.odd))
    assert f1.tmp and f1.empty and f1.odd


def test_an_absent_root_or_a_file_lists_as_one_walk(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"f")
    for p in ("absent", "file"):
        for n in (1, 4):
            tokens: dict[str, Any] = {}
            assert list_tree(side(tmp_path / p, n), dirs=tokens) == {} and tokens == {}


class Spy(LocalFileSystem):
    """The real local filesystem, with each directory read recorded (which thread read it)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, int]] = []
        self.files = 0
        self.lock = threading.Lock()

    def list_dir(self, path: str, skipped: Any = None, dirs: dict[str, Any] | None = None) -> Iterator[FileStatus]:
        with self.lock:
            self.reads.append((path, threading.get_ident()))
        for s in super().list_dir(path, skipped, dirs):
            with self.lock:
                self.files += not s.is_dir
            yield s


def test_directories_below_one_top_level_directory_are_read_on_several_threads(tmp_path: Path) -> None:
    all_ = tmp_path / "t" / "all"
    for i in range(8):
        (all_ / f"s{i}" / "deeper").mkdir(parents=True)
        (all_ / f"s{i}" / "deeper" / "f").write_bytes(b"x")
    meet = threading.Barrier(2, timeout=60)
    deep = str(all_) + "/s"

    class Meeting(Spy):
        met = 0

        def list_dir(self, path: str, skipped: Any = None, dirs: dict[str, Any] | None = None
                     ) -> Iterator[FileStatus]:
            with self.lock:
                first = path.startswith(deep) and self.met < 2
                self.met += first
            if first:  # two directories two levels down are read at the same time, or never
                meet.wait()
            return super().list_dir(path, skipped, dirs)

    fs = Meeting()
    assert len(list_tree(side(tmp_path / "t", 4, fs))) == 8
    below = {tid for p, tid in fs.reads if p.startswith(deep)}
    assert len(below) >= 2, fs.reads


def test_an_error_in_a_deep_directory_surfaces(tmp_path: Path) -> None:
    random_tree(tmp_path / "t", random.Random(5), dirs=60, files=200)
    chain = tmp_path / "t" / "x" / "y" / "z" / "w"
    chain.mkdir(parents=True)
    (chain / "f").write_bytes(b"f")
    bad = str(chain)

    class Broken(LocalFileSystem):
        def list_dir(self, path: str, skipped: Any = None, dirs: dict[str, Any] | None = None
                     ) -> Iterator[FileStatus]:
            if path == bad:
                raise PermissionError(13, "Permission denied", path)
            return super().list_dir(path, skipped, dirs)

    with pytest.raises(PermissionError, match="Permission denied"):
        list_tree(side(tmp_path / "t", 4, Broken()))
    assert not [t for t in threading.enumerate() if t.name.startswith("drt-list-")]


def test_an_unreadable_deep_directory_surfaces_as_in_one_walk(tmp_path: Path) -> None:
    """A directory the kernel refuses to read, deep in the tree, at any user id (root reads a
    directory of mode 000): its path is longer than PATH_MAX, made through directory descriptors,
    so reading it by path fails with ENAMETOOLONG — one walk and the parallel one both raise it."""
    (tmp_path / "t" / "a").mkdir(parents=True)
    (tmp_path / "t" / "a" / "f").write_bytes(b"f")
    fd = os.open(tmp_path / "t" / "a", os.O_RDONLY)
    try:
        for _ in range(os.pathconf("/", "PC_PATH_MAX") // 250 + 2):
            os.mkdir("d" * 250, dir_fd=fd)
            nxt = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with os.fdopen(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "wb") as f:
            f.write(b"deep")
    finally:
        os.close(fd)
    for n in (1, 4):
        with pytest.raises(OSError) as err:
            list_tree(side(tmp_path / "t", n))
        assert err.value.errno == errno.ENAMETOOLONG, err.value
    assert not [t for t in threading.enumerate() if t.name.startswith("drt-list-")]


def test_a_consumer_that_stops_early_leaves_no_thread_and_files_are_handed_over_as_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "BATCH", 4)
    monkeypatch.setattr(listing, "QUEUE_BATCHES", 2)
    for i in range(40):
        d = tmp_path / "t" / "all" / f"d{i}"
        d.mkdir(parents=True)
        for j in range(30):
            (d / f"f{j}").write_bytes(b"x")
    fs = Spy()
    it = entries(side(tmp_path / "t", 3, fs))
    first = [next(it) for _ in range(5)]
    assert len(first) == 5
    # the threads wait on the full queue: at most the queue, one batch per thread and the batch
    # taken were read — not the 1,200 files of the tree
    assert fs.files <= (2 + 3 + 2) * 4, fs.files
    it.close()  # type: ignore[attr-defined]
    assert not [t for t in threading.enumerate() if t.name.startswith("drt-list-")]
    assert fs.files < 1200


def test_the_directory_walked_is_never_reported_empty(tmp_path: Path) -> None:
    (tmp_path / "t" / "e").mkdir(parents=True)
    (tmp_path / "t" / "f").write_bytes(b"f")
    for only in (None, str(tmp_path / "t" / "e")):
        for n in (1, 4):
            skips: list[tuple[str, str]] = []
            got = list_tree(side(tmp_path / "t", n), only, lambda p, r, into=skips: into.append((p, r)))
            assert (sorted(got), skips) == ((["f"], [(str(tmp_path / "t" / "e"), "empty directory")])
                                            if only is None else ([], [])), (only, n)
