"""`drt` global behaviour: exit codes, JSON on stdout, one-line errors on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def drt(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_broken_config_exit_2_one_line() -> None:
    r = drt("--config", "examples/broken.yaml", "config", "validate")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "examples/broken.yaml:9" in lines[0] and "bootstrap_server" in lines[0]
    assert r.stdout == ""


def test_validate_json() -> None:
    r = drt("--json", "--config", "examples/production.yaml", "config", "validate")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["valid"] is True and out["hot"] == "prod" and out["policies"]["hdfs"] == 2


def test_status_json_on_fresh_ledger(tmp_path: Path) -> None:
    cfg = tmp_path / "drt.yaml"
    cfg.write_text("version: 1\nclusters:\n  a: {role: hot, local_root: /tmp/a}\n  b: {role: cold, local_root: /tmp/b}\n"
                   f"ledger: {{url: 'sqlite:///{tmp_path}/l.db'}}\n")
    r = drt("--json", "--config", str(cfg), "status")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["schema_version"] >= 1 and out["replication"] == []


def test_help_reads_well() -> None:
    r = drt("--help")
    assert r.returncode == 0
    assert "--config" in r.stdout and "--json" in r.stdout and "status" in r.stdout


def test_unknown_command_is_usage_error() -> None:
    r = drt("no-such-command")
    assert r.returncode == 2
