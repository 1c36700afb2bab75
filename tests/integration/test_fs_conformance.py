"""One conformance suite for the three filesystems: local for real, S3 against moto's S3
server, WebHDFS against a real HDFS (hadoop-client-minicluster; an HA pair of NameNodes, the
standby listed first, so every call fails over)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import google_crc32c
import pytest

from dr_toolkit.access import Access
from dr_toolkit.fs import FileSystem, open_fs, parse_uri
from dr_toolkit.fs.base import tmp_name

pytestmark = pytest.mark.integration
KINDS = ["local", "webhdfs", "s3"]


@pytest.fixture(params=KINDS)
def anyfs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[FileSystem, str]]:
    kind = request.param
    if kind == "local":
        yield open_fs(parse_uri(f"file://{tmp_path}/root"), Access.from_env()), f"{tmp_path}/root"
    elif kind == "webhdfs":
        d = request.getfixturevalue("hot_dir")
        yield open_fs(d.location("/root"), Access.from_env()), d.p("/root")
    else:
        bucket = request.getfixturevalue("s3_bucket")
        yield open_fs(parse_uri(f"s3://{bucket}/root"), Access.from_env()), "root"


def test_write_stat_read_checksum(anyfs: tuple[FileSystem, str]) -> None:
    fs, root = anyfs
    data = os.urandom(3 * 1024 * 1024 + 17)  # more than one streaming chunk
    p = fs.join(root, "d1/d2/file.bin")
    assert fs.write(p, [data[:1000], data[1000:]]) == len(data)
    s = fs.stat(p)
    assert s is not None and s.size == len(data) and not s.is_dir and s.mtime > 0
    assert fs.read_all(p) == data
    assert b"".join(fs.read(p, offset=5, length=100)) == data[5:105]
    assert b"".join(fs.read(p, offset=len(data) - 10)) == data[-10:]
    c = fs.checksum(p)
    assert c is not None
    if fs.kind == "webhdfs":  # what a NameNode answers: MD5MD5CRC32C, named with its layout
        from dr_toolkit.fs.hdfs_checksum import md5md5crc32c

        want = md5md5crc32c(data, s.block_size or 128 << 20, c.bytes_per_checksum or 512)
        assert c.comparable(want) and c == want and not c.layout_independent
    else:
        assert (c.algorithm, c.value) == ("COMPOSITE-CRC32C", f"{google_crc32c.value(data):08x}")


def test_listing_is_recursive_and_reports_what_it_skips(anyfs: tuple[FileSystem, str]) -> None:
    fs, root = anyfs
    for rel in ("a", "x/b", "x/y/c", ".drt/manifests/m.jsonl.gz"):  # a source dir named .drt is data
        fs.write_bytes(fs.join(root, rel), rel.encode())
    tmp = tmp_name(fs.join(root, "x/b"), "run1")
    fs.write_bytes(tmp, b"partial")
    skipped: list[tuple[str, str]] = []
    rels = sorted(fs.relative(root, s.path) for s in fs.list_files(root, lambda p, why: skipped.append((p, why))))
    assert rels == [".drt/manifests/m.jsonl.gz", "a", "x/b", "x/y/c"]
    assert [fs.relative(root, p) for p, _why in skipped] == [fs.relative(root, tmp)]
    assert [fs.relative(root, p) for p in fs.list_tmp(root)] == [fs.relative(root, tmp)]
    assert list(fs.list_files(fs.join(root, "nothing-here"))) == []


def test_local_listing_reports_links_and_empty_dirs(tmp_path: Path) -> None:
    fs = open_fs(parse_uri(str(tmp_path)), Access.from_env())
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    os.symlink(tmp_path / "f", tmp_path / "d" / "link")
    os.symlink(tmp_path / "nowhere", tmp_path / "d" / "dangling")
    os.symlink(tmp_path / "d", tmp_path / "dirlink")
    skipped: dict[str, str] = {}
    rels = [fs.relative(str(tmp_path), s.path) for s in fs.list_files(str(tmp_path), skipped.__setitem__)]
    assert rels == ["f"]
    assert {fs.relative(str(tmp_path), p): why for p, why in skipped.items()} == {
        "d/link": "symlink", "d/dangling": "dangling symlink", "dirlink": "symlink", "empty": "empty directory"}


def test_change_token_sees_a_same_size_same_mtime_rewrite(anyfs: tuple[FileSystem, str]) -> None:
    fs, root = anyfs
    p = fs.join(root, "f")
    fs.write_bytes(p, b"one")
    if fs.supports_times:
        fs.set_times(p, 1_600_000_000.0)
    before = fs.stat(p)
    fs.write_bytes(p, b"two")
    if fs.supports_times:
        fs.set_times(p, 1_600_000_000.0)
    after = fs.stat(p)
    assert before is not None and after is not None and before.version and after.version
    assert before.version != after.version and fs.read_all(p) == b"two"


def test_rename_onto_a_directory_is_refused_where_directories_exist(anyfs: tuple[FileSystem, str]) -> None:
    """A file renamed onto a directory: refused on a filesystem; on S3, which has no directories,
    the key ``d`` is written beside the keys under ``d/``, and nothing under ``d/`` changes."""
    fs, root = anyfs
    fs.write_bytes(fs.join(root, "a"), b"a")
    fs.write_bytes(fs.join(root, "d/x"), b"x")
    if fs.kind == "s3":
        fs.rename(fs.join(root, "a"), fs.join(root, "d"))
        assert fs.stat(fs.join(root, "a")) is None
        assert fs.read_all(fs.join(root, "d")) == b"a" and fs.read_all(fs.join(root, "d/x")) == b"x"
        return
    with pytest.raises(IsADirectoryError):
        fs.rename(fs.join(root, "a"), fs.join(root, "d"))


def test_s3_writes_become_visible_only_after_verification(s3_bucket: str) -> None:
    from dr_toolkit.fs.s3 import MAX_PARTS, PART_SIZE, part_size

    fs = open_fs(parse_uri(f"s3://{s3_bucket}/v"), Access.from_env())
    data = os.urandom(PART_SIZE * 2 + 5)

    for body in (data, data[:1000]):  # multipart (parts in parallel) and a single PUT
        def refuse(n: int, want: int = len(body)) -> None:
            assert n == want
            raise OSError("source changed")
        with pytest.raises(OSError, match="source changed"):
            fs.write_verified("v/obj", [body[i:i + (1 << 20)] for i in range(0, len(body), 1 << 20)], refuse,
                              size_hint=len(body))
        assert fs.stat("v/obj") is None
    assert fs.write_verified("v/obj", [data], lambda n: None, size_hint=len(data)) == len(data)
    assert fs.read_all("v/obj") == data
    c = fs.checksum("v/obj")
    assert c is not None and c.value == f"{google_crc32c.value(data):08x}"
    assert part_size(None) == PART_SIZE and part_size(PART_SIZE * MAX_PARTS * 3) >= PART_SIZE * 3
    # an upload left by a killed run is aborted by the next run
    client = fs.client  # type: ignore[attr-defined]
    client.create_multipart_upload(Bucket=s3_bucket, Key="v/left-by-a-kill")
    assert fs.abort_stale_uploads("v") == 1  # type: ignore[attr-defined]
    assert not client.list_multipart_uploads(Bucket=s3_bucket, Prefix="v/").get("Uploads")


def test_rename_replaces_and_delete(anyfs: tuple[FileSystem, str]) -> None:
    fs, root = anyfs
    a, b = fs.join(root, "a"), fs.join(root, "sub/b")
    fs.write_bytes(a, b"new")
    fs.write_bytes(b, b"old content")
    fs.rename(a, b)
    assert fs.stat(a) is None
    assert fs.read_all(b) == b"new"
    assert fs.delete(b) is True
    assert fs.stat(b) is None
    fs.write_bytes(fs.join(root, "t/1"), b"1")
    fs.write_bytes(fs.join(root, "t/u/2"), b"2")
    assert fs.delete(fs.join(root, "t"), recursive=True)
    assert list(fs.list_files(fs.join(root, "t"))) == []


def test_missing_paths(anyfs: tuple[FileSystem, str]) -> None:
    fs, root = anyfs
    assert fs.stat(fs.join(root, "missing")) is None
    with pytest.raises(FileNotFoundError):
        fs.read_all(fs.join(root, "missing"))


def test_append_times_permissions_where_supported(anyfs: tuple[FileSystem, str]) -> None:
    fs, root = anyfs
    p = fs.join(root, "log")
    fs.write_bytes(p, b"line1\n")
    if fs.supports_append:
        fs.write(p, [b"line2\n"], append=True)
        assert fs.read_all(p) == b"line1\nline2\n"
    else:
        with pytest.raises(NotImplementedError):
            fs.write(p, [b"x"], append=True)
    if fs.supports_times:
        fs.set_times(p, 1_600_000_000.25)
        s = fs.stat(p)
        assert s is not None and abs(s.mtime - 1_600_000_000.25) < 1e-3
    if fs.supports_permissions:
        fs.set_permission(p, "640")
        s = fs.stat(p)
        assert s is not None and s.permission == "640"


def test_webhdfs_snapshots_and_diff(hot_dir: Any) -> None:
    fs = open_fs(hot_dir.location("/snap"), Access.from_env())
    snap = hot_dir.p("/snap")
    for rel in ("keep", "gone", "dir/moved", "mod"):
        fs.write_bytes(f"{snap}/{rel}", rel.encode())
    assert not fs.is_snapshottable(snap)
    hot_dir.allow_snapshot("/snap")
    assert fs.is_snapshottable(snap)
    fs.create_snapshot(snap, "s1")
    fs.delete(f"{snap}/gone")
    fs.rename(f"{snap}/dir", f"{snap}/dir2")
    fs.write(f"{snap}/mod", [b"+more"], append=True)  # same inode: MODIFY
    fs.write_bytes(f"{snap}/keep", b"rewritten")  # CREATE with overwrite makes a new inode, as HDFS does
    fs.write_bytes(f"{snap}/new", b"n")
    fs.create_snapshot(snap, "s2")
    diff = {(d.type, d.path, d.target) for d in fs.snapshot_diff(snap, "s1", "s2")}
    assert diff == {("M", "", None), ("-", "gone", None), ("R", "dir", "dir2"), ("M", "mod", None),
                    ("+", "new", None), ("-", "keep", None), ("+", "keep", None)}
    assert fs.read_all(f"{snap}/.snapshot/s1/gone") == b"gone"
    assert fs.snapshot_exists(snap, "s1")
    fs.delete_snapshot(snap, "s1")
    assert not fs.snapshot_exists(snap, "s1")


def test_webhdfs_fails_over_between_namenodes(hot_dir: Any) -> None:
    fs = open_fs(hot_dir.location("/ha"), Access.from_env())
    ha = hot_dir.p("/ha")
    fs.write_bytes(f"{ha}/f", b"one")
    hot_dir.failover()  # the other namenode becomes active
    assert fs.read_all(f"{ha}/f") == b"one"
    fs.write_bytes(f"{ha}/g", b"two")
    assert sorted(s.path for s in fs.list_files(ha)) == [f"{ha}/f", f"{ha}/g"]


def test_webhdfs_all_standby_is_unreachable_error(hot_dir: Any) -> None:
    from dr_toolkit.errors import UnreachableError
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

    fs = WebHdfsFileSystem(hot_dir.urls[:1], timeout_s=5)  # only the standby
    with pytest.raises(UnreachableError, match="no active namenode"):
        fs.stat(hot_dir.p("/x"))
