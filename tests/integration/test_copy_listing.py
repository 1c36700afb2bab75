"""A live source listing (no snapshot) is a walk, not a moment: a directory renamed while the walk
runs, from a part not yet read into a part already read, is seen nowhere. Attacked here on a local
tree and on the real HDFS (the NameNode's own directory times and fileIds):

- a rename during the walk: the run still copies every file the source holds (the directories
  whose token moved are read again), exits 0 and states its listing time as the safe time only
  because the listing was then proven to be the tree at one moment;
- a tree that keeps changing through every check: the run exits 1, deletes nothing on its word
  (the renamed files stay on cold under their old names), states no watermark, and the gate's
  HDFS signal takes no safe time from it.

The rename is done by the real filesystem at a chosen point of the walk (the source filesystem's
``list_files``/``dir_token`` are wrapped to act, then delegate): fault injection, not a model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import api
from dr_toolkit.copy.request import CopyRequest, Opener
from dr_toolkit.copy.signals import last_completed
from dr_toolkit.fs import FileSystem, Location, open_fs
from dr_toolkit.ledger.store import Ledger
from dr_toolkit.topology import CopyOptions

ACCESS = Access.from_env()  # built at the edge, as the CLI builds its own

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


class LocalTree:
    def __init__(self, root: Path) -> None:
        self.root = root

    def uri(self, rel: str) -> str:
        return f"file://{self.root}{rel}"

    def write(self, rel: str, data: bytes) -> None:
        p = self.root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def rename(self, a: str, b: str) -> None:
        os.rename(self.root / a.lstrip("/"), self.root / b.lstrip("/"))

    def tree(self, rel: str) -> dict[str, bytes]:
        top = self.root / rel.lstrip("/")
        return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


@pytest.fixture(params=["local", "hdfs"])
def src(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "local":
        return LocalTree(tmp_path / "hot")
    return request.getfixturevalue("hot_dir")


def _tree(dst: Path) -> dict[str, bytes]:
    return {str(p.relative_to(dst)): p.read_bytes() for p in sorted(dst.rglob("*")) if p.is_file()}


def _seed(src: Any) -> None:
    for d in ("a", "b", "c", "d"):
        for i in range(3):
            src.write(f"/t/{d}/f{i}", f"{d}{i}".encode() * 50)


def _on_source(wrap: Callable[[Any], None]) -> Opener:
    """An opener (``CopyRequest.open_fs``) that wraps the first filesystem a run opens (its
    source) with ``wrap``."""
    opened = {"n": 0}

    def opening(loc: Location, access: Access) -> FileSystem:
        fs = open_fs(loc, access)
        opened["n"] += 1
        if opened["n"] == 1:
            wrap(fs)
        return fs

    return opening


def _rename_mid_walk(src: Any, fs: Any, done: dict[str, str]) -> None:
    """When the walk yields its first file from a second directory, move a directory it has not
    read yet under the first directory it read (already read: the moved files are seen nowhere)."""
    inner = fs.list_files

    def list_files(root: str, *a: Any, **kw: Any) -> Iterator[Any]:
        read: list[str] = []
        for s in inner(root, *a, **kw):
            d = s.path.rsplit("/", 2)[-2]
            if d not in read:
                read.append(d)
            if len(read) == 2 and not done:
                unread = sorted({"a", "b", "c", "d"} - set(read))[0]
                src.rename(f"/t/{unread}", f"/t/{read[0]}/moved-{unread}")
                done.update(first=read[0], moved=unread)
            yield s

    fs.list_files = list_files


def test_a_directory_renamed_during_the_walk_is_copied_under_its_new_name(src: Any, tmp_path: Path) -> None:
    _seed(src)
    dst = tmp_path / "cold"
    opts = CopyOptions(update=True, delete=True)
    r1 = api.distcp(CopyRequest(src.uri("/t"), f"file://{dst}", options=opts), access=ACCESS)
    assert r1.ok and r1.files_copied == 12 and r1.listing_proven
    done: dict[str, str] = {}
    opener = _on_source(lambda fs: _rename_mid_walk(src, fs, done))
    r2 = api.distcp(CopyRequest(src.uri("/t"), f"file://{dst}", options=opts, open_fs=opener), access=ACCESS)
    assert done, "the walk read fewer than two directories: nothing was injected"
    # the moved directory was read again under its new name: cold equals hot, and the listing is
    # proven (every directory unchanged at the check after the re-read)
    assert _tree(dst) == src.tree("/t"), (done, r2.to_json())
    assert r2.ok and r2.listing_proven and r2.watermark is not None, r2.to_json()
    assert any(k.startswith(f"{done['first']}/moved-{done['moved']}/") for k in _tree(dst))


def test_a_tree_that_never_holds_still_is_never_a_safe_time(src: Any, tmp_path: Path) -> None:
    _seed(src)
    dst = tmp_path / "cold"
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}")
    opts = CopyOptions(update=True, delete=True)
    r1 = api.distcp(CopyRequest(src.uri("/t"), f"file://{dst}", options=opts), access=ACCESS, ledger=ledger)
    assert r1.ok and r1.watermark is not None
    first = last_completed(ledger, None, r1.target)  # type: ignore[arg-type]
    assert first is not None and first["run_id"] == r1.run_id

    def wrap(fs: Any) -> None:
        done: dict[str, str] = {}
        _rename_mid_walk(src, fs, done)
        inner = fs.dir_token
        moves = {"n": 0}

        def dir_token(path: str) -> Any:
            if path.rstrip("/").endswith("/t") and done:  # once per check: c moves back and forth
                moves["n"] += 1
                a, b = ("/t/e", "/t/f") if moves["n"] % 2 else ("/t/f", "/t/e")
                src.rename(a, b)
            return inner(path)

        fs.dir_token = dir_token

    src.write("/t/e/g", b"g" * 10)
    r_seed = api.distcp(CopyRequest(src.uri("/t"), f"file://{dst}", options=opts),
                        access=ACCESS, ledger=ledger)
    assert r_seed.ok
    before = _tree(dst)
    r2 = api.distcp(CopyRequest(src.uri("/t"), f"file://{dst}", options=opts, open_fs=_on_source(wrap)),
                    access=ACCESS, ledger=ledger)
    assert not r2.ok and not r2.listing_proven and r2.listing_changing, r2.to_json()
    assert r2.watermark is None and r2.files_deleted == 0
    # nothing deleted on the word of that listing: every file cold held is still there
    after = _tree(dst)
    assert all(k in after for k in before), sorted(set(before) - set(after))
    # the gate's HDFS signal takes its safe time from the run before, never from this one
    got = last_completed(ledger, None, r2.target)  # type: ignore[arg-type]
    assert got is not None and got["run_id"] == r_seed.run_id
    row = next(x for x in ledger.runs(limit=10) if x["run_id"] == r2.run_id)
    assert row["status"] == "failed" and row["detail"]["listing_proven"] is False
    # once the tree holds still, a run converges: cold equals hot again
    r3 = api.distcp(CopyRequest(src.uri("/t"), f"file://{dst}", options=opts), access=ACCESS, ledger=ledger)
    assert r3.ok and r3.listing_proven and _tree(dst) == src.tree("/t")


def test_a_quiet_tree_written_just_before_the_run_is_proven(src: Any, tmp_path: Path) -> None:
    _seed(src)  # written just now: on a local tree the directories' stamps are fresh
    dst = tmp_path / "cold"
    r = api.distcp(CopyRequest(src.uri("/t"), f"file://{dst}", options=CopyOptions(update=True, delete=True)),
                   access=ACCESS)
    assert r.ok and r.listing_proven and r.listing_changing == [] and _tree(dst) == src.tree("/t")
