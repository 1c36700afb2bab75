"""Fixtures of file replication: a directory of the test's own on the real hot HDFS (an HA
pair, standby listed first; tests/support/fixtures_hdfs.py), an S3 bucket on the shared moto
server, trees to copy, and tree comparison helpers."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixtures_hdfs import HdfsDir


@pytest.fixture
def copy_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy state location of the test's own ($DRT_STATE_DIR: manifests live outside the replica,
    and never in the user's ~/.local/state). Used by the modules that run copies, with
    ``pytestmark = [..., pytest.mark.usefixtures("copy_state_dir")]``."""
    d = tmp_path_factory.mktemp("drt-state")
    monkeypatch.setenv("DRT_STATE_DIR", str(d))
    return d


@pytest.fixture
def webhdfs(hot_dir: HdfsDir) -> HdfsDir:
    """A fresh directory on the real hot HDFS; ``urls`` lists the standby NameNode first, so
    every client fails over. Paths given to its helpers are relative to the directory."""
    return hot_dir


@pytest.fixture
def s3_bucket(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the moto S3 server; the default AWS chain points at it."""
    name = "drt-" + uuid.uuid4().hex[:10]
    s3_server.client().create_bucket(Bucket=name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    return name


def make_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def sample_tree(n: int = 12, size: int = 5000) -> dict[str, bytes]:
    out = {}
    for i in range(n):
        d = ["", "a/", "a/b/", "c/"][i % 4]
        out[f"{d}f{i:03d}.bin"] = hashlib.sha256(str(i).encode()).digest() * (size // 32 + i)
    return out


def tree_digest(root: Path) -> dict[str, str]:
    """rel path -> md5 of every visible file (the toolkit's hidden entries left out)."""
    out = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for f in filenames:
            if f.startswith(".drt-tmp."):
                continue
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.md5(p.read_bytes()).hexdigest()
    return out


def run_distcp(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """`drt --json distcp ARGS` in this process: (exit code, its JSON document or None, stderr)."""
    import json

    from dr_toolkit.cli.main import main

    capsys.readouterr()
    code = main(["--json", "distcp", *args])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out) if cap.out.strip() else None), cap.err


def drt_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
           ) -> tuple[int, dict[str, Any]]:
    """`drt --json ARGS` in this process, run from ``tmp_path`` with no topology: (exit code, its JSON
    document or {})."""
    import json

    from dr_toolkit.cli.main import main

    monkeypatch.delenv("DRT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    code = main(["--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def all_bytes(root: Path) -> dict[str, bytes]:
    """rel path -> bytes of every regular file under ``root`` (symlinks left out)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def hdfs_source(hot_dir: HdfsDir, files: dict[str, bytes]) -> Any:
    """``files`` written under ``/s`` of ``hot_dir``, made snapshottable; its filesystem."""
    from dr_toolkit.access import Access
    from dr_toolkit.fs import open_fs

    hot_dir.allow_snapshot("/s")
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    for rel, data in files.items():
        fs.write_bytes(hot_dir.p(f"/s/{rel}"), data)
    return fs


def tmp_files(root: Path) -> list[str]:
    """The temporary files of copies under ``root`` (a run's fencing marker ``.drt-tmp.fence`` left out)."""
    return [str(p) for p in root.rglob(".drt-tmp.*") if p.name != ".drt-tmp.fence"]


def write_copy_topology(path: Path, *, namenodes: list[str], cold_root: Path, ledger_url: str,
                        targets: list[str] | None = None, s3: tuple[str, str] | None = None,
                        options: dict[str, Any] | None = None, schedule: str = "@hourly",
                        source: str = "/data") -> Path:
    """A topology: hot = a real HDFS (HA pair), cold = a local root (and an S3 bucket
    ``s3 = (endpoint_url, bucket)``), one HDFS policy ``warehouse`` from hdfs://hot``source``."""
    import yaml

    cold: dict[str, Any] = {"role": "cold", "local_root": str(cold_root)}
    if s3:
        cold["s3"] = {"endpoint_url": s3[0], "bucket": s3[1], "region": "us-east-1"}
    doc = {
        "version": 1,
        "clusters": {"hot": {"role": "hot", "hdfs": {"namenodes": namenodes, "user": "hdfs", "timeout_s": 10}},
                     "cold": cold},
        "policies": {"hdfs": [{"name": "warehouse", "source": f"hdfs://hot{source}",
                               "targets": targets or ["hdfs://cold/data"], "schedule": schedule,
                               "options": {"update": True, "delete": True, **(options or {})}}]},
        "ledger": {"url": ledger_url},
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
