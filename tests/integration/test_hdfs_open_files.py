"""Files being written on a real HDFS (hadoop-client-minicluster), attacked: what the NameNode
reports for them is not what readers see, and a copy must never call such a file "fully copied"
or "unchanged" when it is not.

What the real NameNode does (a writer in the launcher's JVM, hflush/hsync through its control port):
- GETFILESTATUS of an open file shows the length at the NameNode's last fsync: the first hflush
  after each new block (or after the reopen for append), or an hsync with UPDATE_LENGTH. Later
  plain hflushes inside that block are visible to readers (OPEN), not to GETFILESTATUS.
- A file reopened for append keeps its modification time (and fileId) until it is closed.
- GETFILECHECKSUM refuses an open file ("under construction").

A file open for write on the source is reported pending, never placed, and does not fail the
run; the run after the writer closes it copies it whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.fs import open_fs
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_an_open_file_hflushed_past_the_namenode_length_is_never_reported_fully_copied(
        hot_dir: HdfsDir, tmp_path: Path) -> None:
    hot_dir.open_for_write("/logs/app.log", b"a" * 1500, block_size=1024)  # NameNode: 1500 (new block)
    hot_dir.hflush("/logs/app.log", b"b" * 100)  # same block: readers see 1600, the NameNode 1500
    st = hot_dir.stat("/logs/app.log")
    assert st is not None and st["length"] == 1500 and len(hot_dir.read("/logs/app.log")) == 1600
    dst = tmp_path / "dst"
    r = distcp(CopyRequest(hot_dir.uri("/logs"), f"file://{dst}", options=CopyOptions(update=True)),
               access=Access.from_env())
    # an open file's NameNode length is no proven version (a truncate being recovered answers the
    # same: test_copy_truncate_recovery.py): nothing is placed, the run says the file is open and
    # pending — copied by the first run after it is closed, never reported copied
    assert not (dst / "app.log").exists()
    assert r.ok and r.files_open == 1 and r.files_failed == 0, (r.files_open, r.files_failed, r.failures)
    assert r.open_files[0]["copied_bytes"] == 0 and r.open_files[0]["placed"] is False
    assert "not copied" in r.open_files[0]["reason"]
    # the writer closes it: the next run copies every byte and the file is no longer open
    hot_dir.close_file("/logs/app.log")
    r2 = distcp(CopyRequest(hot_dir.uri("/logs"), f"file://{dst}", options=CopyOptions(update=True)),
                access=Access.from_env())
    assert r2.ok and r2.files_open == 0 and r2.files_failed == 0
    assert (dst / "app.log").read_bytes() == b"a" * 1500 + b"b" * 100


@pytest.mark.parametrize("snapshots", [False, True], ids=["size-mtime-fileid", "snapshot-diff"])
def test_a_file_reopened_for_append_is_never_taken_as_unchanged(hot_dir: HdfsDir, tmp_path: Path,
                                                               snapshots: bool) -> None:
    hot_dir.write("/d/log", b"0" * 1000)
    hot_dir.write("/d/other", b"x")
    if snapshots:
        hot_dir.allow_snapshot("/d")
    opts = CopyOptions(update=True, delete=True, snapshots=snapshots)
    dst = tmp_path / "dst"
    r1 = distcp(CopyRequest(hot_dir.uri("/d"), f"file://{dst}", options=opts), access=Access.from_env())
    assert r1.ok and r1.files_copied == 2
    before = hot_dir.stat("/d/log")
    hot_dir.open_for_write("/d/log", b"1" * 100, append=True)  # reopened: the NameNode learns 1100
    during = hot_dir.stat("/d/log")
    assert before is not None and during is not None
    assert during["modificationTime"] == before["modificationTime"] and during["fileId"] == before["fileId"]
    r2 = distcp(CopyRequest(hot_dir.uri("/d"), f"file://{dst}", options=opts), access=Access.from_env())
    assert r2.files_failed == 0 and r2.files_open == 1, (r2.files_open, r2.open_files, r2.mode_reason)
    hot_dir.hflush("/d/log", b"2" * 100)  # same block: length, mtime, fileId as the NameNode had them
    after = hot_dir.stat("/d/log")
    assert after is not None and (after["length"], after["modificationTime"]) == (1100, before["modificationTime"])
    r3 = distcp(CopyRequest(hot_dir.uri("/d"), f"file://{dst}", options=opts), access=Access.from_env())
    held = (dst / "log").read_bytes()
    # the target is behind the readable source: the run must not claim the file is done (with
    # snapshots, the NameNode's diff lists nothing: the hflush changed no inode)
    assert held == b"0" * 1000 + b"1" * 100 + b"2" * 100 or r3.files_open == 1 or r3.files_failed == 1, (
        len(held), r3.files_open, r3.files_failed, r3.mode, r3.mode_reason)
    # the open file is not placed, live or from a snapshot (the target keeps the closed version)
    assert (dst / "log").read_bytes() == b"0" * 1000
    hot_dir.close_file("/d/log")
    r4 = distcp(CopyRequest(hot_dir.uri("/d"), f"file://{dst}", options=opts), access=Access.from_env())
    assert r4.ok and r4.files_open == 0 and r4.files_failed == 0
    assert (dst / "log").read_bytes() == b"0" * 1000 + b"1" * 100 + b"2" * 100


def test_open_file_is_reported_pending_and_never_fails_the_run(tmp_path: Path, webhdfs: Any) -> None:
    fs = open_fs(webhdfs.location("/logs"), Access.from_env())
    fs.write_bytes(webhdfs.p("/logs/closed.log"), b"done\n" * 100)
    webhdfs.open_for_write("/logs/app.log", b"line 1\n" * 50)
    r = distcp(CopyRequest(webhdfs.uri("/logs"), f"file://{tmp_path}/dst",
                           options=CopyOptions(update=True, append_only=["*.log"])),
               access=Access.from_env())
    # open on the source: not placed (its NameNode length is no proven version), reported pending
    assert r.ok and r.files_copied == 1 and r.files_open == 1
    assert r.open_files[0]["path"] == "app.log" and "open for write" in r.open_files[0]["reason"]
    assert not (tmp_path / "dst/app.log").exists()
    # the writer goes on and closes the file: the next run copies it
    webhdfs.hflush("/logs/app.log", b"line 2\n" * 30)
    webhdfs.close_file("/logs/app.log")
    r2 = distcp(CopyRequest(webhdfs.uri("/logs"), f"file://{tmp_path}/dst",
                            options=CopyOptions(update=True, append_only=["*.log"])),
                access=Access.from_env())
    assert r2.ok and r2.files_open == 0 and r2.files_copied == 1
    assert (tmp_path / "dst/app.log").read_bytes() == b"line 1\n" * 50 + b"line 2\n" * 30


def test_an_unplanned_failover_never_states_the_listing_of_a_run_that_left_a_file_open(
        tmp_path: Path, webhdfs: Any) -> None:
    """The unplanned loss window reads the last *completed* run as the gate does (no file open):
    a run that left a file open moves the ledger's watermark, but bytes hflushed before its
    listing may not be on cold — its listing time is no safe time (found 2026-11-29: unplanned
    read the watermark)."""
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.failover.unplanned import loss_window
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import load_topology
    from tests.support.fixtures_copy import write_copy_topology

    fs = open_fs(webhdfs.location("/data"), Access.from_env())
    fs.write_bytes(webhdfs.p("/data/closed.log"), b"done\n" * 10)
    cfg = write_copy_topology(tmp_path / "drt.yaml", namenodes=webhdfs.urls, cold_root=tmp_path / "cold",
                              source=webhdfs.p("/data"), ledger_url=f"sqlite:///{tmp_path}/ledger.db")
    topo = load_topology(cfg)
    ledger = Ledger.open(topo.ledger.url)
    access = Access.from_env()
    [first] = replicate_policy(topo, "warehouse", ledger, access=access)
    assert first.ok and first.files_open == 0
    first_time = float(ledger.manifest(first.manifest_id)["source_time"])  # type: ignore[index]
    webhdfs.open_for_write("/data/app.log", b"line 1\n" * 50)
    [second] = replicate_policy(topo, "warehouse", ledger, access=access)
    assert second.ok and second.files_open == 1  # the run succeeded, the file pending
    [hdfs] = [c for c in loss_window(topo, ledger, access)["components"] if c["component"] == "hdfs"]
    assert hdfs["safe_time"] == first_time, hdfs
    assert first.run_id in hdfs["basis"], hdfs
