"""`drt demo` end to end, as `make demo` runs it: NO_GO while lag remains, GO after draining,
a failover that succeeds, the reports on disk — and a second run in the same work directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark, pytest.mark.airflow]


def test_demo_runs_the_whole_cycle(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "demo", "--workdir", str(workdir)],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    s = json.loads(r.stdout)
    assert [c["verdict"] for c in s["checks"]] == ["NO_GO", "GO"]
    reasons = " ".join(s["checks"][0]["reasons"])
    for component in ("hdfs", "hbase", "kafka"):
        assert component in reasons, reasons
    assert s["failover_status"] == "succeeded"
    assert Path(s["report"]).is_file() and Path(s["verify_report"]).is_file()
    steps = {st["name"]: st["status"] for st in s["failover"]["steps"]}
    assert steps["promote_cold"] == "done" and steps["kafka_offsets"] == "done"
    # The servers are gone and the directory can be used again: a second run wipes and repeats.
    assert (workdir / ".drt-demo").exists()
    refused = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "demo", "--workdir", str(tmp_path)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "not made by `drt demo`" in refused.stderr
