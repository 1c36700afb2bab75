"""`drt verify`: JSON per docs/contracts.md, exit 1 on differences, exit 2 with one clear error for bad
input. Most run `main()` in this process (the shared Spark session); one runs the real
`drt` command in a subprocess (its own Spark, ≈ 6 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dr_toolkit.cli.main import main
from tests.support.fixtures_verify import ROWS, base_frame, write
from tests.support.spark_quick import quick_jvms

pytestmark = [pytest.mark.integration, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]
CONTRACT = ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS", "CONTENT_DIFFERENT_ROWS",
            "source_rows", "peer_rows", "duration_s")


def errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("drt: error")]


@pytest.mark.slow
def test_cli_subprocess_reports_differences_with_exit_1(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    df = base_frame(spark, 1000)
    src = write(df, tmp_path / "a", 1)
    peer = write(df.filter(F.col("id") != 5).withColumn(
        "qty", F.when(F.col("id") == 9, F.lit(-1)).otherwise(F.col("qty"))), tmp_path / "b", 2)
    report = tmp_path / "r.html"
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "verify", src, peer,
                        "--key", "id", "--report", str(report)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**os.environ, "SPARK_CONF_DIR": quick_jvms(tmp_path / "conf")})  # 1,000 rows: a quick JVM
    assert r.returncode == 1, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert all(f in out for f in CONTRACT)
    assert (out["ONLY_IN_SOURCE_TABLE_ROWS"], out["ONLY_IN_PEER_TABLE_ROWS"], out["CONTENT_DIFFERENT_ROWS"]) == (
        1, 0, 1)
    assert out["GOODROWS"] == 998 and out["BADROWS"] == 2
    assert out["report_path"] == str(report) and report.exists()


def test_cli_identical_exit_0(spark, planted, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no drt.yaml here: plain paths need no topology
    assert main(["--json", "verify", planted.source, planted.same, "--key", "id"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["GOODROWS"] == out["source_rows"] == out["peer_rows"] == ROWS and out["BADROWS"] == 0


@pytest.mark.parametrize("args, message", [
    (["{src}", "file:///nonexistent/replica", "--key", "id"], "peer path does not exist"),
    (["{src}", "{peer}", "--key", "id,region"], "no column 'region'"),
    (["{src}", "{csv}", "--key", "id"], "cannot be read as parquet"),
    (["{src}", "{peer}", "--key", "id", "--format", "xlsx"], "unknown format 'xlsx'"),
    (["{src}", "{peer}"], "missing --key"),
    (["{src}", "{peer}", "--key", "id", "--start-time", "yesterday", "--ts-column", "ts"], "is not a time"),
])
def test_cli_bad_input_exit_2_one_error(spark, planted, capsys, tmp_path: Path, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "part-0.parquet").write_text("id,name\n1,a\n")
    argv = [a.format(src=planted.source, peer=planted.peer, csv=f"file://{tmp_path}/csv") for a in args]
    assert main(["--json", "verify", *argv]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = errors(cap.err)
    assert len(lines) == 1 and message in lines[0], cap.err[-2000:]


def test_cli_policy_uses_the_topology_and_ledger(spark, capsys, tmp_path: Path) -> None:
    from dr_toolkit.ledger import Ledger
    from tests.support.fixtures_verify import topology_file

    df = base_frame(spark, 300)
    write(df, tmp_path / "hot" / "t", 1)
    write(df, tmp_path / "cold" / "t", 2)
    cfg = topology_file(tmp_path, ["{name: t, source: hdfs://hot/t, target: hdfs://cold/t, key: [id]}"])
    assert main(["--json", "--config", str(cfg), "verify", "--policy", "t"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["GOODROWS"] == 300 and out["name"] == "t" and Path(out["report_path"]).parent == tmp_path / "reports"
    assert Ledger.open(f"sqlite:///{tmp_path}/ledger.db").verify_reports(name="t")[0]["report_id"] == out["report_id"]
    assert main(["--config", str(cfg), "verify", "--policy", "nope"]) == 2
    assert "no policy named 'nope'" in errors(capsys.readouterr().err)[0]

