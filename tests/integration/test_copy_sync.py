"""DistCp-sync-style scenario: bootstrap, then a chain of creates, file and directory
renames, deletes, appends and overwrites. After every incremental run the target is
byte-identical to the source, and the run read no unchanged file. Renames are moved on the
target only when a snapshot diff says so; without one they are copied (never guessed).

Snapshot mode never forgets a file the base snapshot does not hold (real HDFS): a file whose copy
failed and whose directory (or itself) is then renamed, files published by a rename out of an
excluded directory; filters widened since the base force a listing run."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import execute
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.fs import FileSystem, open_fs, parse_uri
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import all_bytes, hdfs_source

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
SNAP = CopyOptions(update=True, delete=True, snapshots=True)
OPTS = CopyOptions(update=True, delete=True, append_only=["logs/*.log"], workers=4, snapshots=True)


def digest(fs: FileSystem, root: str) -> dict[str, str]:
    return {fs.relative(root, s.path): hashlib.md5(fs.read_all(s.path)).hexdigest() for s in fs.list_files(root)}


def _w(fs: FileSystem, root: str, rel: str, data: bytes, t: float) -> None:
    p = fs.join(root, rel)
    fs.write_bytes(p, data)
    fs.set_times(p, t)


# each step: (name, mutate(fs, root), files whose content it changes (the only ones a run may read))
Step = tuple[str, Callable[[FileSystem, str], None], set[str]]
T0 = 1_700_000_000.0


def _steps() -> list[Step]:
    def create(fs: FileSystem, r: str) -> None:
        _w(fs, r, "new/one.txt", b"one" * 1000, T0 + 100)
        _w(fs, r, "a/two.txt", b"two" * 999, T0 + 101)

    def rename_file(fs: FileSystem, r: str) -> None:
        fs.rename(fs.join(r, "f000.bin"), fs.join(r, "renamed/f000.bin"))

    def rename_dir(fs: FileSystem, r: str) -> None:
        fs.rename(fs.join(r, "a/b"), fs.join(r, "moved-b"))

    def delete(fs: FileSystem, r: str) -> None:
        fs.delete(fs.join(r, "f004.bin"))
        fs.delete(fs.join(r, "c"), recursive=True)

    def append(fs: FileSystem, r: str) -> None:
        p = fs.join(r, "logs/app.log")
        fs.write(p, [b"line %d\n" % i for i in range(500, 900)], append=True)
        fs.set_times(p, T0 + 200)

    def overwrite(fs: FileSystem, r: str) -> None:
        old = fs.read_all(fs.join(r, "f008.bin"))
        _w(fs, r, "f008.bin", bytes(reversed(old)), T0 + 300)  # same size, new content

    return [("create", create, {"new/one.txt", "a/two.txt"}), ("rename-file", rename_file, set()),
            ("rename-dir", rename_dir, set()), ("delete", delete, set()), ("append", append, {"logs/app.log"}),
            ("overwrite", overwrite, {"f008.bin"})]


#: what a run without a snapshot diff reads after a rename: the files under their new names
MOVED = {"rename-file": {"renamed/f000.bin"}, "rename-dir": {"moved-b/f002.bin", "moved-b/f006.bin",
                                                              "moved-b/f010.bin"}}


def _seed(fs: FileSystem, root: str) -> None:
    for i in range(12):
        d = ["", "a/", "a/b/", "c/"][i % 4]
        _w(fs, root, f"{d}f{i:03d}.bin", hashlib.sha256(str(i).encode()).digest() * (200 + i), T0 + i)
    _w(fs, root, "logs/app.log", b"".join(b"line %d\n" % i for i in range(500)), T0 + 50)


def _run_chain(src_uri: str, src_fs: FileSystem, src_root: str, dst: Path, topology: Any = None,
               opened: Callable[[], list[str]] | None = None) -> list[Any]:
    dst_fs = open_fs(parse_uri(f"file://{dst}"), Access.from_env())
    r = distcp(CopyRequest(src_uri, f"file://{dst}", options=OPTS),
               topology=topology, access=Access.from_env())
    assert r.mode == "bootstrap" and r.files_failed == 0
    assert digest(dst_fs, str(dst)) == digest(src_fs, src_root)
    results = [r]
    for name, mutate, changed in _steps():
        mutate(src_fs, src_root)
        before = len(opened()) if opened else 0
        r = distcp(CopyRequest(src_uri, f"file://{dst}", options=OPTS),
                   topology=topology, access=Access.from_env())
        served = opened()[before:] if opened else []
        assert r.files_failed == 0, (name, r.failures)
        assert r.mode == "fast-forward", (name, r.mode_reason)
        assert digest(dst_fs, str(dst)) == digest(src_fs, src_root), name
        may_read = changed if opened else changed | MOVED.get(name, set())
        assert set(r.files_read) <= may_read, (name, r.files_read)
        if opened:  # what the NameNode's audit log shows ("open": a read, a checksum, or block
            # locations): only changed files were opened; their bytes from the snapshot, the live
            # file asked only whether it is still being written (GET_BLOCK_LOCATIONS)
            from_snap = [p for p in served if "/.snapshot/drt-" in p]
            live = {src_fs.relative(src_root, p) for p in served if "/.snapshot/" not in p}
            rels = {p.split("/.snapshot/", 1)[1].split("/", 1)[1] for p in from_snap}
            assert rels <= changed and live <= changed, (name, rels, live)
        if name.startswith("rename") and opened:
            assert r.files_renamed >= 1 and r.bytes_copied == 0, name
        if name == "append":
            assert r.files_appended == 1 and r.bytes_copied == sum(len(b"line %d\n" % i) for i in range(500, 900))
        if name == "delete":
            assert r.files_deleted == 4
        results.append(r)
    return results


def test_sync_chain_local_to_local(tmp_path: Path) -> None:
    src = tmp_path / "src"
    fs = open_fs(parse_uri(f"file://{src}"), Access.from_env())
    _seed(fs, str(src))
    _run_chain(f"file://{src}", fs, str(src), tmp_path / "dst")


def test_sync_chain_hdfs_snapshots_to_local(tmp_path: Path, webhdfs: Any) -> None:
    """Source on a real HDFS, snapshottable: each run diffs its snapshot against the last one."""
    fs = open_fs(webhdfs.location("/data"), Access.from_env())
    root = webhdfs.p("/data")
    _seed(fs, root)
    webhdfs.allow_snapshot("/data")
    fs.create_snapshot(root, "probe")
    live, snap = fs.stat(f"{root}/f000.bin"), fs.stat(f"{root}/.snapshot/probe/f000.bin")
    fs.delete_snapshot(root, "probe")
    # as on a NameNode: a file in a snapshot answers the live file's inode id (fileId)
    assert live is not None and snap is not None and live.version == snap.version
    uri = webhdfs.uri("/data")

    def opened() -> list[str]:
        return [r["src"] for r in webhdfs.cluster.audit("open", under=root) if r["proto"] == "webhdfs"]

    results = _run_chain(uri, fs, root, tmp_path / "dst", opened=opened)
    assert all("snapshot diff" in r.mode_reason for r in results[1:])
    # the newest snapshot is kept as the next run's base; older ones the toolkit made are dropped
    assert fs.snapshot_exists(root, results[-1].source_snapshot)
    assert not any(fs.snapshot_exists(root, r.source_snapshot) for r in results[:-1])


def test_sync_chain_hdfs_snapshot_gone_falls_back_to_reconcile(tmp_path: Path, webhdfs: Any) -> None:
    fs = open_fs(webhdfs.location("/data"), Access.from_env())
    root = webhdfs.p("/data")
    _seed(fs, root)
    webhdfs.allow_snapshot("/data")
    uri = webhdfs.uri("/data")
    r = distcp(CopyRequest(uri, f"file://{tmp_path}/dst", options=OPTS), access=Access.from_env())
    assert r.source_snapshot
    fs.delete_snapshot(root, r.source_snapshot)
    _w(fs, root, "late.txt", b"late", T0 + 999)
    r2 = distcp(CopyRequest(uri, f"file://{tmp_path}/dst", options=OPTS), access=Access.from_env())
    assert r2.mode == "reconcile" and "snapshot" in r2.mode_reason and "gone" in r2.mode_reason
    assert r2.files_copied == 1
    assert digest(open_fs(parse_uri(f"file://{tmp_path}/dst"), Access.from_env()), f"{tmp_path}/dst") == digest(fs, root)


def test_a_file_whose_copy_failed_and_whose_directory_is_then_renamed_is_copied(
        tmp_path: Path, hot_dir: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    hdfs_source(hot_dir, {"d/a": b"a", "d/b": b"bbbb", "top": b"t"})
    dst = tmp_path / "dst"
    real = execute._copy_full

    def fail_b(ctx: Any, task: Any, *a: Any) -> Any:
        if task.rel == "d/b":
            raise OSError("injected: disk full")
        return real(ctx, task, *a)

    monkeypatch.setattr(execute, "_copy_full", fail_b)
    monkeypatch.setattr(execute, "ATTEMPTS", 1)
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env())
    assert r.files_failed == 1
    monkeypatch.setattr(execute, "_copy_full", real)
    hot_dir.rename("/s/d", "/s/e")
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    assert all_bytes(dst) == hot_dir.tree("/s") == {"e/a": b"a", "e/b": b"bbbb", "top": b"t"}


def test_a_failed_file_renamed_itself_and_through_a_renamed_parent_is_copied(
        tmp_path: Path, hot_dir: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Why pending files need no fileId tracking: their paths are paths of the base snapshot, and
    the NameNode's diff from that snapshot names every rename that moved them — their own
    (d/x/b → d/y/b2) and their parent's (d → e), reported in one diff — so each rename whose
    source covers a pending path has its target listed. Two runs of failures, then both renames."""
    hdfs_source(hot_dir, {"d/x/b": b"bbbb", "d/x/a": b"a", "d/y/c": b"c"})
    dst = tmp_path / "dst"
    real = execute._copy_full

    def fail_b(ctx: Any, task: Any, *a: Any) -> Any:
        if task.rel.endswith("b") or task.rel.endswith("b2"):
            raise OSError("injected: disk full")
        return real(ctx, task, *a)

    monkeypatch.setattr(execute, "_copy_full", fail_b)
    monkeypatch.setattr(execute, "ATTEMPTS", 1)
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env()).files_failed == 1
    hot_dir.rename("/s/d/x/b", "/s/d/y/b2")  # the pending file itself
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env())  # fails again: pending under its new name
    assert r.files_failed == 1 and "snapshot diff" in r.mode_reason, r.mode_reason
    monkeypatch.setattr(execute, "_copy_full", real)
    hot_dir.rename("/s/d/y/b2", "/s/d/x/b3")
    hot_dir.rename("/s/d", "/s/e")  # and its parent, in the same diff
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    assert all_bytes(dst) == hot_dir.tree("/s") == {"e/x/b3": b"bbbb", "e/x/a": b"a", "e/y/c": b"c"}


def test_files_published_by_rename_out_of_an_excluded_directory_are_copied(tmp_path: Path, hot_dir: Any) -> None:
    fs = hdfs_source(hot_dir, {"data/old.csv": b"old"})
    opts = CopyOptions(update=True, delete=True, snapshots=True, exclude=["landing/*"])
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env()).ok
    fs.write_bytes(hot_dir.p("/s/landing/new.csv"), b"staged, then published")
    fs.write_bytes(hot_dir.p("/s/landing/batch/p1.csv"), b"part 1")
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env()).ok  # nothing to copy: excluded
    hot_dir.rename("/s/landing/new.csv", "/s/data/new.csv")
    hot_dir.rename("/s/landing/batch", "/s/data/batch")
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=opts), access=Access.from_env())
    assert r.ok and "snapshot diff" in r.mode_reason, r.mode_reason
    assert all_bytes(dst) == {"data/old.csv": b"old", "data/new.csv": b"staged, then published",
                               "data/batch/p1.csv": b"part 1"}


def test_widened_filters_force_a_listing_run(tmp_path: Path, hot_dir: Any) -> None:
    hdfs_source(hot_dir, {"a.csv": b"a", "b.txt": b"b", "d/c.txt": b"c"})
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}",
                              options=CopyOptions(update=True, delete=True, snapshots=True, include=["*.csv"])),
                  access=Access.from_env()).ok
    assert all_bytes(dst) == {"a.csv": b"a"}
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env())
    assert r.ok and "filters changed" in r.mode_reason, r.mode_reason
    assert all_bytes(dst) == hot_dir.tree("/s")
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env())  # same filters again: the diff is used
    assert r.ok and "snapshot diff" in r.mode_reason and r.files_copied == 0
