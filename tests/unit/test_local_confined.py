"""A copy target on the local filesystem: nothing is written through a symlink among a file's
parents — checked for every file, and the file is created relative to the directory checked, so a
parent swapped for a link between the check and the create does not redirect it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dr_toolkit.fs import local
from dr_toolkit.fs.local import LocalFileSystem


def _fs(root: Path) -> LocalFileSystem:
    fs = LocalFileSystem()
    fs.confine = os.path.realpath(root)
    return fs


def test_a_parent_swapped_for_a_link_after_the_check_does_not_redirect_the_create(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "dst"
    (root / "d").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    real_readlink = os.readlink

    def readlink_then_swap(p, *a, **k):  # type: ignore[no-untyped-def]
        got = real_readlink(p, *a, **k)  # the check sees the real directory ...
        if str(p).startswith("/proc/self/fd/") and not (tmp_path / "moved").exists():
            os.rename(root / "d", tmp_path / "moved")  # ... then it is swapped for a link
            os.symlink(tmp_path / "outside", root / "d")
        return got

    monkeypatch.setattr(local.os, "readlink", readlink_then_swap)
    fd = _fs(root).open_confined(str(root / "d" / "f"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.close(fd)
    assert os.listdir(tmp_path / "outside") == []  # not through the link
    assert os.listdir(tmp_path / "moved") == ["f"]  # in the directory that was checked


@pytest.mark.parametrize("where", ["d", "d/e"])
def test_a_link_among_the_parents_is_refused_and_names_the_link(tmp_path: Path, where: str) -> None:
    root = tmp_path / "dst"
    root.mkdir()
    (tmp_path / "outside" / "e").mkdir(parents=True)
    if where == "d":
        os.symlink(tmp_path / "outside", root / "d")
    else:
        (root / "d").mkdir()
        os.symlink(tmp_path / "outside" / "e", root / "d" / "e")
    fs = _fs(root)
    target = str(root / "d" / "e" / "f")
    for attempt in (lambda: fs.open_confined(target, os.O_WRONLY | os.O_CREAT), lambda: fs.confined(target)):
        with pytest.raises(OSError, match=f"{root / where} is a symlink in the target"):
            attempt()
    assert os.listdir(tmp_path / "outside" / "e") == []


def test_missing_parents_are_made_and_a_path_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "dst"
    root.mkdir()
    fs = _fs(root)
    os.close(fs.open_confined(str(root / "a" / "b" / "f"), os.O_WRONLY | os.O_CREAT))
    assert (root / "a" / "b" / "f").is_file()
    with pytest.raises(OSError, match="outside the target's real path"):
        fs.open_confined(str(tmp_path / "elsewhere" / "f"), os.O_WRONLY | os.O_CREAT)
    assert not (tmp_path / "elsewhere").exists()
