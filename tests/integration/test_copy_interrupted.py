"""A run stopped part-way and the run after it: SIGTERM marks the run interrupted and leaves no
file half visible; a run killed mid-append (--append-only) leaves the target's old version whole,
local and on the real HDFS; a killed run's multipart uploads on S3 and its snapshots on HDFS are
cleaned up by the next run. (Kills at random points: test_copy_kill.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, tmp_files, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
UPD = CopyOptions(update=True, delete=True)


def _topology(tmp_path: Path) -> Path:
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(yaml.safe_dump({"version": 1, "clusters": {
        "hot": {"role": "hot", "local_root": str(tmp_path / "hot")},
        "cold": {"role": "cold", "local_root": str(tmp_path / "cold")}},
        "policies": {"hdfs": [{"name": "p", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"]}]},
        "ledger": {"url": f"sqlite:///{tmp_path}/ledger.db"}}))
    return cfg


def test_sigterm_marks_the_run_interrupted_and_leaves_nothing_half_visible(tmp_path: Path) -> None:
    cfg = _topology(tmp_path)
    files = {f"f{i}.bin": os.urandom(300_000) for i in range(12)}
    make_tree(tmp_path / "hot/data", files)
    env = {**os.environ, "DRT_CONFIG": str(cfg)}
    proc = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "distcp", "hdfs://hot/data",
                             "hdfs://cold/data", "--update", "--bandwidth-mb-s", "0.5", "--workers", "2"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
    deadline = time.time() + 60
    while time.time() < deadline and not [r for r in ledger.runs() if r["status"] == "running"]:
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "interrupted" in err and "Traceback" not in err  # 128 + SIGTERM
    assert [r["status"] for r in ledger.runs()] == ["interrupted"]
    assert tmp_files(tmp_path / "cold/data") == []
    got = tree_digest(tmp_path / "cold/data")
    want = tree_digest(tmp_path / "hot/data")
    assert all(want[k] == v for k, v in got.items()) and len(got) < len(want)


def test_a_killed_runs_multipart_uploads_on_s3_are_aborted_by_the_next_run(tmp_path: Path, s3_bucket: str) -> None:
    """A SIGKILL mid-upload leaves a multipart upload (invisible, but billed and never finished):
    the next run under the target aborts it, converges, and leaves other prefixes' uploads alone."""
    make_tree(tmp_path / "src", {"a": b"a" * 1000, "d/b": b"b"})
    uri = f"s3://{s3_bucket}/replica"
    fs = open_fs(parse_uri(uri), Access.from_env())
    client = fs.client  # type: ignore[attr-defined]
    client.create_multipart_upload(Bucket=s3_bucket, Key="replica/d/b")  # what the killed run left
    client.create_multipart_upload(Bucket=s3_bucket, Key="elsewhere/x")  # not this target's
    r = distcp(CopyRequest(f"file://{tmp_path}/src", uri, options=UPD), access=Access.from_env())
    assert r.ok and r.files_copied == 2
    assert not client.list_multipart_uploads(Bucket=s3_bucket, Prefix="replica/").get("Uploads")
    assert [u["Key"] for u in client.list_multipart_uploads(Bucket=s3_bucket, Prefix="elsewhere/")["Uploads"]] \
        == ["elsewhere/x"]
    assert fs.read_all("replica/a") == b"a" * 1000 and fs.read_all("replica/d/b") == b"b"
    # nothing of the toolkit's state inside the replica
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket, Prefix="replica/").get("Contents", [])]
    assert sorted(keys) == ["replica/a", "replica/d/b"]


def test_orphaned_snapshots_of_killed_runs_are_deleted(tmp_path: Path, webhdfs: Any) -> None:
    fs = open_fs(webhdfs.location("/s"), Access.from_env())
    src = webhdfs.p("/s")
    fs.write_bytes(f"{src}/f", b"f")
    webhdfs.allow_snapshot("/s")
    opts = CopyOptions(update=True, delete=True, snapshots=True)

    def die(kind: str, n: int) -> None:
        raise KeyboardInterrupt("killed")

    with pytest.raises(KeyboardInterrupt):
        distcp(CopyRequest(webhdfs.uri("/s"), f"file://{tmp_path}/dst", options=opts, progress=die),
               access=Access.from_env())
    # a SIGKILL leaves the snapshot behind; the state remembers it — simulate by making one by hand
    from dr_toolkit.copy.state import StateStore, default_state_uri

    st = StateStore.open(default_state_uri(None, None), webhdfs.uri("/s"), f"file://{tmp_path}/dst", None,
                         Access.from_env())
    st.note_snapshot("drt-orphan")
    fs.create_snapshot(src, "drt-orphan")
    fs.create_snapshot(src, "drt-someone-elses")  # not noted by this pair: left alone
    r = distcp(CopyRequest(webhdfs.uri("/s"), f"file://{tmp_path}/dst", options=opts),
               access=Access.from_env())
    assert r.ok and "drt-orphan" in r.snapshots_cleaned
    assert not fs.snapshot_exists(src, "drt-orphan") and fs.snapshot_exists(src, "drt-someone-elses")
    assert fs.snapshot_exists(src, r.source_snapshot)


@pytest.mark.parametrize("target", ["local", "hdfs"])
def test_a_killed_append_leaves_the_old_version_whole(tmp_path: Path, target: str,
                                                       request: pytest.FixtureRequest) -> None:
    """--append-only: a run killed mid-append leaves the target's old version, never a file that is
    neither. Into a local target the tail goes to a temporary copy renamed into place; into a real
    HDFS target it is written to a temporary file beside the target and put on its end by one
    CONCAT (HDFS's own APPEND would leave the old bytes and part of the tail)."""
    old = os.urandom(1000)
    make_tree(tmp_path / "src", {"app.log": old})
    opts = CopyOptions(update=True, delete=True, append_only=["*.log"])
    if target == "local":
        dst = f"file://{tmp_path}/dst"

        def held() -> dict[str, bytes]:
            return {"app.log": (tmp_path / "dst/app.log").read_bytes()}

        def temps() -> list[Any]:
            return list(tmp_files(tmp_path / "dst"))
    else:
        cold = request.getfixturevalue("cold_dir")
        dst = cold.uri("/dst")

        def held() -> dict[str, bytes]:
            return dict(cold.tree("/dst"))

        def temps() -> list[Any]:
            return [k for k in cold.cluster.client().list(cold.p("/dst")) if k.startswith(".drt-tmp.")]
    assert distcp(CopyRequest(f"file://{tmp_path}/src", dst, options=opts), access=Access.from_env()).ok
    tail = os.urandom(10 << 20)  # three chunks: the kill comes after the first was written
    with open(tmp_path / "src/app.log", "ab") as f:
        f.write(tail)
    seen = []

    def kill(kind: str, n: int) -> None:
        if kind == "bytes":
            seen.append(n)
            if len(seen) == 2:
                raise KeyboardInterrupt("killed mid-append")

    with pytest.raises(KeyboardInterrupt):
        distcp(CopyRequest(f"file://{tmp_path}/src", dst, options=opts, progress=kill),
               access=Access.from_env())
    assert held() == {"app.log": old}
    r = distcp(CopyRequest(f"file://{tmp_path}/src", dst, options=opts), access=Access.from_env())
    assert r.ok and r.files_appended == 1, (r.mode_reason, r.failures)
    assert held() == {"app.log": old + tail} and temps() == []
