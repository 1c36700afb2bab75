"""Ledger errors end to end in the failover CLI: one line on stderr and exit 3, never a traceback;
relative SQLite paths resolve against the topology file, from any working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

TOPOLOGY = """version: 1
clusters:
  hot: {{role: hot, local_root: hot}}
  cold: {{role: cold, local_root: cold}}
policies:
  verify:
    - {{name: v, source: hdfs://hot/a, target: hdfs://cold/a, key: [id]}}
ledger: {{url: "{url}"}}
"""


def drt(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_LEDGER_URL", "DRT_CONFIG")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=env)


def one_line_exit_3(r: subprocess.CompletedProcess[str], what: str) -> None:
    assert r.returncode == 3, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert what in lines[0]


@pytest.mark.parametrize("command", [("failover", "check"), ("failover", "run", "--reason", "x"),
                                     ("failover", "abort", "failover-x", "--reason", "x")])
def test_a_garbage_ledger_file_is_one_line_and_exit_3(tmp_path, command) -> None:
    (tmp_path / "ledger.db").write_bytes(b"this is not a database\n" * 200)
    (tmp_path / "drt.yaml").write_text(TOPOLOGY.format(url="sqlite:///ledger.db"))
    r = drt(tmp_path, "--config", "drt.yaml", *command)
    one_line_exit_3(r, "file is not a database")
    assert "ledger" in r.stderr
    assert str(tmp_path / "ledger.db") in r.stderr


def test_a_ledger_directory_that_cannot_be_created_is_one_line_and_exit_3(tmp_path) -> None:
    (tmp_path / "blocker").write_text("a file where the ledger's directory should be")
    (tmp_path / "drt.yaml").write_text(TOPOLOGY.format(url="sqlite:///blocker/state/ledger.db"))
    # a write command (abort records its audit) must create it; a read command (check) creates nothing
    one_line_exit_3(drt(tmp_path, "--config", "drt.yaml", "failover", "abort", "failover-x", "--reason", "x"),
                    "cannot create the ledger's directory")


def test_check_with_a_missing_ledger_creates_nothing_from_another_cwd(tmp_path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "drt.yaml").write_text(TOPOLOGY.format(url="sqlite:///../state/sub/ledger.db"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = drt(elsewhere, "--json", "--config", str(conf / "drt.yaml"), "failover", "check")
    assert r.returncode == 1, r.stderr  # NO_GO (no verification report), not a crash
    assert json.loads(r.stdout)["verdict"] == "NO_GO"
    assert json.loads(r.stdout)["ledger_missing"] == str(tmp_path / "state" / "sub" / "ledger.db")
    assert not (tmp_path / "state").exists() and not list(elsewhere.iterdir())


def test_the_embedded_example_runs_from_another_directory(tmp_path) -> None:
    """`drt --config examples/embedded.yaml failover check` from /tmp: the ledger resolves next to the
    example (../embedded-data), the answer is a verdict (no servers run: NO_GO), never a traceback,
    and nothing is created (a read command: `make demo` finds no foreign demo-data afterwards)."""
    import shutil

    ex = tmp_path / "repo" / "examples"
    ex.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "embedded.yaml", ex / "embedded.yaml")
    text = (ex / "embedded.yaml").read_text()
    # point the servers at closed ports so the check answers quickly
    (ex / "embedded.yaml").write_text(text.replace("127.0.0.1:2181", "127.0.0.1:9").replace(
        "127.0.0.1:19092", "127.0.0.1:9").replace("127.0.0.1:19093", "127.0.0.1:9"))
    r = drt(tmp_path, "--json", "--config", "repo/examples/embedded.yaml", "failover", "check", "--timeout", "20")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and json.loads(r.stdout)["verdict"] == "NO_GO"
    assert json.loads(r.stdout)["ledger_missing"] == str(tmp_path / "repo" / "embedded-data" / "ledger.db")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["embedded.yaml", "examples", "repo"]
