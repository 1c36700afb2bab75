"""`-diff S1 S2` / `-rdiff S2 S1` name snapshots; a name is not an identity (issue 39 #1, #4).

On the real HDFS of the session (source on the hot HA pair, target on the cold cluster, through
WebHDFS, as `drt distcp` runs them):

- DistCp's usual rotation (`deleteSnapshot s0; renameSnapshot s1 s0; createSnapshot s1`) and a
  snapshot deleted and re-created under its name: the run diffs from the snapshot the target's
  last run read — found by its snapshot id (GETSNAPSHOTLIST), whatever it is called now — or lists
  S2 and says why; never "s1 → s1 (0 entries)" with a stale target and exit 0.
- the watermark (and the manifest's source time) of a run that reads a named snapshot is the
  snapshot's own time, not the run's.
- a copy read from a snapshot asks the snapshot's inode whether it is still open, never the live
  path: a live parent that became a file does not fail the file on every run.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.fixtures_copy import run_distcp

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


drt = run_distcp  # `drt --json distcp ARGS` in this process (tests/support/fixtures_copy.py)


def snapshot_times(hot_dir: Any, rel: str) -> dict[str, float]:
    """name -> the snapshot's modification time (s) as the NameNode lists it."""
    import requests

    r = requests.get(f"{hot_dir.cluster.webhdfs_url}/webhdfs/v1{hot_dir.p(rel)}",
                     params={"op": "GETSNAPSHOTLIST", "user.name": "hdfs"}, timeout=30)
    r.raise_for_status()
    return {s["fullPath"].rsplit("/", 1)[1]: s["dirStatus"]["modificationTime"] / 1000.0
            for s in r.json()["SnapshotList"]}


def test_rotation_and_a_recreated_snapshot_are_told_apart_by_identity(
        hot_dir: Any, cold_dir: Any, capsys: pytest.CaptureFixture[str]) -> None:
    client = hot_dir.cluster.client()
    hot_dir.allow_snapshot("/src")
    for rel, data in {"src/a": b"a1", "src/b": b"b1", "src/d/x": b"x1"}.items():
        hot_dir.write(rel, data)
    hot_dir.create_snapshot("/src", "s0")
    hot_dir.write("/src/c", b"c1")
    hot_dir.create_snapshot("/src", "s1")
    src, dst = hot_dir.uri("/src"), cold_dir.uri("/dst")
    code, out, err = drt(capsys, src, dst, "--update", "--delete", "-diff", "s0", "s1")
    assert code == 0, err
    assert cold_dir.tree("/dst") == {"a": b"a1", "b": b"b1", "c": b"c1", "d/x": b"x1"}
    # the watermark is the snapshot's own time, not the run's
    t_s1 = snapshot_times(hot_dir, "/src")["s1"]
    assert out["watermark"] == pytest.approx(t_s1, abs=1e-3) and out["source_time"] == out["watermark"], out

    # DistCp's rotation: s1 becomes s0, a new s1 is taken after changes
    hot_dir.write("/src/n", b"new")
    hot_dir.delete("/src/b")
    hot_dir.write("/src/a", b"a2-longer")
    hot_dir.rename("/src/d", "/src/e")
    client.delete_snapshot(hot_dir.p("/src"), "s0")
    client.rename_snapshot(hot_dir.p("/src"), "s1", "s0")
    time.sleep(0.01)
    hot_dir.create_snapshot("/src", "s1")
    code, out, err = drt(capsys, src, dst, "--update", "--delete", "-diff", "s0", "s1")
    assert code == 0, err
    want = {"a": b"a2-longer", "c": b"c1", "e/x": b"x1", "n": b"new"}
    assert cold_dir.tree("/dst") == want, out["mode_reason"]
    # the old s1, renamed s0, is recognised by its snapshot id: its diff to the new s1 is applied
    assert "snapshot diff s0 → s1" in out["mode_reason"], out["mode_reason"]
    assert out["watermark"] == pytest.approx(snapshot_times(hot_dir, "/src")["s1"], abs=1e-3)
    # a plain -diff user is told what a snapshot diff cannot see
    assert "TRUNCATE" in out["mode_reason"]

    # s1 deleted and re-created under its name after more changes: not the snapshot the last run
    # read (another id), so s1 is listed, and the run says why
    hot_dir.write("/src/n", b"newer, longer")
    hot_dir.delete("/src/c")
    client.delete_snapshot(hot_dir.p("/src"), "s1")
    hot_dir.create_snapshot("/src", "s1")
    hot_dir.write("/src/s0-is-not-the-base", b"x")
    client.delete_snapshot(hot_dir.p("/src"), "s0")
    hot_dir.create_snapshot("/src", "s0")  # s0 now a later snapshot than s1, of another id
    code, out, err = drt(capsys, src, dst, "--update", "--delete", "-diff", "s1", "s0")
    assert code == 0, err
    assert cold_dir.tree("/dst") == {"a": b"a2-longer", "e/x": b"x1", "n": b"newer, longer",
                                     "s0-is-not-the-base": b"x"}, out["mode_reason"]
    assert "not the snapshot" in out["mode_reason"] and "listed" in out["mode_reason"], out["mode_reason"]
    assert "snapshot diff" not in out["mode_reason"].split(";")[1], out["mode_reason"]


def test_a_snapshot_read_asks_the_snapshots_inode_never_the_live_path(
        hot_dir: Any, cold_dir: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39 #4. s0 holds d/f and an open log; then, live, d becomes a file (the live path
    d/f answers `AccessControlException … is not a directory`) and the open log is renamed to
    log2 with a closed file put at its name. Reading s0: d/f is copied (it failed on every run
    when the live path was asked), and log is reported open — its inode still is, wherever it
    lives now — while the closed file now at its live path would have said it was not."""
    hot_dir.allow_snapshot("/src")
    hot_dir.create_snapshot("/src", "empty")
    hot_dir.write("/src/d/f", b"f1")
    hot_dir.open_for_write("/src/log", b"L" * 700, sync="hsync")
    hot_dir.create_snapshot("/src", "s0")
    try:
        hot_dir.delete("/src/d")
        hot_dir.write("/src/d", b"now a file")
        hot_dir.rename("/src/log", "/src/log2")
        hot_dir.write("/src/log", b"another, closed file")
        code, out, err = drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update", "-diff", "empty", "s0")
        assert out is not None, err
        assert out["files_failed"] == 0 and code == 0, (err, out["failures"])
        # log is reported open (its inode is): whether its snapshot bytes are placed meanwhile is
        # the open-file rule's business (never as complete); the closed file now at its live path
        # would have said it was not open
        assert [f["path"] for f in out["open_files"]] == ["log"], out["open_files"]
        got = cold_dir.tree("/dst")
        assert got.pop("d/f") == b"f1" and got in ({}, {"log": b"L" * 700}), got
    finally:
        hot_dir.close_file("/src/log")
