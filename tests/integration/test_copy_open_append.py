"""`drt replicate` of an append-only file still open on hot (issue 38, item 11), real HDFS → HDFS.

Found: the file reopened for append on hot; a run appended its tail up to the NameNode's length
and recorded the file open; the next run (nothing new: the NameNode's length of an open file moves
only at the writer's fsync) planned an append of **zero** bytes — CONCAT of an empty temporary
file, which the NameNode refuses ("concat: source file … is invalid or empty or underConstruction")
— three attempts, run failed. Must be: copied up to a length it really had, or reported pending
("open on hot"); never three failed attempts with an HDFS-internal error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from tests.support.fixtures_failover import write_topology
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def _topology(tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, snapshots: bool) -> Path:
    return write_topology(
        tmp_path, zk=None,
        hdfs=[{"name": "logs", "source": f"hdfs://hot{hot_dir.p('/logs')}",
               "targets": [f"hdfs://cold{cold_dir.p('/logs')}"],
               "options": {"append_only": ["*.log"], "snapshots": snapshots, "update": True}}],
        hot_extra={"hdfs": {"namenodes": hot_dir.urls, "user": "hdfs"}},
        cold_extra={"hdfs": {"namenodes": cold_dir.urls, "user": "hdfs"}})


def _replicate(cfg: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    code = main(["--config", str(cfg), "--json", "replicate", "logs"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    return code, (doc[0] if isinstance(doc, list) else doc.get("results", [doc])[0]), err


@pytest.mark.parametrize("snapshots", [False, True], ids=["listing", "snapshot"])
def test_an_append_only_file_open_on_hot_is_never_three_failed_concats(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, capsys: pytest.CaptureFixture[str],
        snapshots: bool) -> None:
    hot_dir.write("/logs/app.log", b"0" * 1000)
    if snapshots:
        hot_dir.allow_snapshot("/logs")
    cold_dir.mkdir("/logs")
    cfg = _topology(tmp_path, hot_dir, cold_dir, snapshots)
    code, r, err = _replicate(cfg, capsys)
    assert code == 0 and r["files_copied"] == 1, err
    hot_dir.open_for_write("/logs/app.log", b"1" * 100, append=True)  # reopened: the NameNode learns 1100
    for _ in range(2):  # the writer holds it open, writes nothing more: two runs
        code, r, err = _replicate(cfg, capsys)
        assert r["files_failed"] == 0 and code == 0, (r["failures"], err)
        assert r["files_open"] == 1 and r["open_files"][0]["path"] == "app.log", r
        # not placed (open on hot: its length is no proven version): cold keeps the closed version
        assert cold_dir.read("/logs/app.log") == b"0" * 1000
        assert r["open_files"][0]["placed"] is False and "open on the source" in r["open_files"][0]["reason"]
    hot_dir.close_file("/logs/app.log")  # closed with nothing more written
    code, r, err = _replicate(cfg, capsys)
    assert code == 0 and r["files_failed"] == 0 and r["files_open"] == 0, (r["failures"], err)
    assert cold_dir.read("/logs/app.log") == b"0" * 1000 + b"1" * 100
    hot_dir.append("/logs/app.log", b"2" * 50)  # grows again, closed: the tail is appended
    code, r, err = _replicate(cfg, capsys)
    assert code == 0 and r["files_failed"] == 0 and r["files_open"] == 0, (r["failures"], err)
    assert cold_dir.read("/logs/app.log") == b"0" * 1000 + b"1" * 100 + b"2" * 50


def test_a_file_an_earlier_run_recorded_open_and_that_did_not_grow_is_not_concatenated_empty(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A manifest written before this rule (an open file's prefix placed and recorded open: "o": 1)
    whose file was then closed with no byte more: the next run plans an append of zero bytes — it
    must not CONCAT an empty temporary file (refused by the NameNode, three failed attempts)."""
    from dr_toolkit.copy.state import StateStore

    hot_dir.write("/logs/app.log", b"0" * 1000)
    state = tmp_path / "state"
    monkeypatch.chdir(tmp_path)  # no topology, no ledger: the state location's newest manifest is the base
    monkeypatch.delenv("DRT_CONFIG", raising=False)
    monkeypatch.setenv("DRT_STATE_DIR", str(state))
    args = [hot_dir.uri("/logs"), cold_dir.uri("/logs"), "--update", "--append-only", "*.log"]
    capsys.readouterr()
    assert main(["--json", "distcp", *args]) == 0, capsys.readouterr().err
    capsys.readouterr()
    # the manifest as the earlier rule wrote it for a file open at that run (no ledger: the newest
    # manifest of the pair in the state location is the base)
    (pair,) = (state / "copy").glob("*/pair.json")
    names = json.loads(pair.read_text())
    store = StateStore.open(f"file://{state}", names["source"], names["target"], None, Access.from_env())
    latest = store.latest()
    assert latest is not None
    mid, header, entries, _digest = latest
    entries["app.log"] = entries["app.log"]._replace(open=True)
    store.write_manifest(mid, entries, header)
    code = main(["--json", "distcp", *args])
    out, err = capsys.readouterr()
    r = json.loads(out)
    assert code == 0 and r["files_failed"] == 0 and r["mode"] == "fast-forward", (r["failures"], r["mode_reason"])
    assert r["files_appended"] == 1 and r["bytes_copied"] == 0, r
    assert cold_dir.read("/logs/app.log") == b"0" * 1000
