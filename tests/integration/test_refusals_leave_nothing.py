"""A refused `drt` command is one line on stderr — no blank line before it — and leaves nothing
behind: no ledger file, no ledger directory (issue 43 #9). On real files and a real (absent)
ZooKeeper port; `drt` run as a process, its stderr a pipe as in a script or a CI log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import free_port

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

CLUSTERS = "version: 1\nclusters:\n  a: {role: hot, local_root: a}\n  b: {role: cold, local_root: b}\n"


def drt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def only_line(r: subprocess.CompletedProcess[str], code: int) -> str:
    """stderr is exactly one line, ``drt: error: …`` — not a blank line and then the error."""
    assert r.returncode == code, (r.returncode, r.stderr, r.stdout)
    assert r.stderr.startswith("drt: error: ") and r.stderr.count("\n") == 1, repr(r.stderr)
    return r.stderr


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_refused_distcp_and_replicate_print_one_line_and_create_no_ledger(tmp_path: Path) -> None:
    zk = free_port()  # nothing listens there
    (tmp_path / "a" / "src").mkdir(parents=True)
    (tmp_path / "a" / "src" / "f.txt").write_text("x")
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(CLUSTERS.replace("local_root: b}", f"local_root: b, zookeeper: {{quorum: '127.0.0.1:{zk}', "
                                                      "connect_timeout_s: 1, call_timeout_s: 1}}")
                   + "policies:\n  hdfs:\n    - {name: p, source: 'hdfs://a/src', targets: ['hdfs://b/dst']}\n"
                   + "ledger: {url: 'sqlite:///state/deep/ledger.db'}\n")
    before = tree(tmp_path)
    cases = [
        (["distcp", str(tmp_path / "nothere"), str(tmp_path / "out")], 2, "does not exist"),
        (["replicate", "nosuch"], 2, "no policy named 'nosuch'"),
        (["replicate", "p"], 3, f"127.0.0.1:{zk}"),  # the copy's fence: ZooKeeper does not answer
    ]
    for args, code, what in cases:
        line = only_line(drt("--config", str(cfg), *args, cwd=tmp_path), code)
        assert what in line, line
        assert tree(tmp_path) == before, (args, sorted(tree(tmp_path) - before))


def test_failover_execute_without_zookeeper_is_refused_up_front(tmp_path: Path) -> None:
    """`failover run --execute` on a topology without any ZooKeeper: exit 2 before a run record
    (it was valid, created a run and failed at fence_hot); `config validate` says so in a note;
    a dry run still runs and records (its ledger is kept: a ledger with a row is never removed)."""
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(CLUSTERS + "ledger: {url: 'sqlite:///l.db'}\n")
    before = tree(tmp_path)
    line = only_line(drt("--config", str(cfg), "failover", "run", "--execute", "--yes-i-am-sure",
                         "--reason", "drill", cwd=tmp_path), 2)
    assert "no ZooKeeper configured" in line and "zookeeper section" in line, line
    assert tree(tmp_path) == before, sorted(tree(tmp_path) - before)

    r = drt("--json", "--config", str(cfg), "config", "validate", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["valid"] and any("failover run --execute" in n for n in doc["notes"]), doc
    assert r.stderr.startswith("note: no ZooKeeper configured"), r.stderr

    r = drt("--json", "--config", str(cfg), "failover", "run", "--reason", "dry", cwd=tmp_path)
    assert r.returncode == 1 and json.loads(r.stdout)["steps"][0]["status"] == "failed", r.stderr
    assert (tmp_path / "l.db").is_file()
