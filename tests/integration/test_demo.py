"""`drt demo` end to end, as `make demo` runs it: NO_GO while lag remains, GO after draining,
a failover that succeeds, the re-protect and the switchover back, the reports on disk — and a second run in the same work directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.airflow_deployed import stray_processes
from tests.support.wheel import installed_wheel

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark, pytest.mark.airflow, pytest.mark.usefixtures("copy_state_dir")]


def _http(url: str, *, token: str | None = None, body: dict | None = None) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, method="POST" if body is not None else "GET",
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


@pytest.mark.timeout(1800)  # the demo itself is bounded at 1500 s (subprocess timeout), then `--stop`; 372 s alone before
def test_demo_runs_the_whole_cycle_and_leaves_the_ui_running(tmp_path: Path) -> None:
    """`drt demo --ui` (as `make demo DEMO_ARGS=--ui`): NO_GO then GO, the failover, the way back
    (re-protect with its divergence report, the switchover, the round trip proven), quiet output
    with ISO times, next steps; then the Airflow UI is up on 127.0.0.1 with its login, the DR page,
    a `dr_failover` run and the verification report served over HTTP; `drt demo --stop` ends it."""
    import re

    workdir = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "demo", "--ui", "--workdir",
                        str(workdir)], capture_output=True, text=True, timeout=1500)
    try:
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

        # the demo comes back: re-protect cold -> hot with the old hot's stray writes (an HDFS file,
        # an HBase row) in the divergence report, each kept aside; the switchover back; the proof
        rp = s["reprotect"]
        assert rp["status"] == "succeeded", rp["steps"]
        kinds = {d["capability"] for d in rp["divergence"]}
        assert {"hdfs", "hbase"} <= kinds and all(d["kept_at"] for d in rp["divergence"]), rp["divergence"]
        sw = s["switchover"]
        assert sw["status"] == "succeeded" and sw["failover"]["status"] == "succeeded", sw
        assert sw["reprotect"]["status"] == "succeeded" and sw["reprotect"]["divergence"] == [], sw["reprotect"]
        rt = s["round_trip"]
        assert rt["ok"] and rt["active"] == "hot" and rt["direction"]["hot"] == "hot", rt
        assert rt["hdfs_files_equal"] and rt["kafka_behind"] == 0 and rt["rows_from_cold_on_hot"] > 0, rt

        # quiet: the progress (stderr with --json) is the demo's own lines, times in ISO UTC
        progress = r.stderr
        assert progress.splitlines()[0] == f"work directory: created {workdir}", progress[:500]
        for noise in ("%3|", "%4|", "rdkafka", "log4j", "FutureWarning", "Using Spark's default", " WARN "):
            assert noise not in progress, (noise, progress[-3000:])
        assert not re.search(r"(?<![\w.])1[5-9]\d{8}\.\d+", progress), progress[-3000:]
        assert (workdir / "logs" / "third-party.log").is_file()
        for phase in ("writes after the failover", "re-protect —", "divergence report", "protected the other way",
                      "switchover failover", "switchover re-protect", "round trip — proven"):
            assert phase in progress, (phase, progress[-3000:])
        assert any("status" in step for step in s["next_steps"]) and any("--stop" in st for st in s["next_steps"])

        # the UI left running: login, the DR page, the dr_failover run, the report over HTTP
        ui = s["ui"]
        assert ui["url"].startswith("http://127.0.0.1:") and ui["user"] == "admin" and ui["password"]
        code, body = _http(f"{ui['url']}/auth/token", body={"username": "admin", "password": ui["password"]})
        assert code in (200, 201), body[:500]
        token = json.loads(body)["access_token"]
        code, page = _http(ui["dr_page"], token=token)
        assert code == 200 and "DR status" in page and 'id="verdict"' in page, page[:1000]
        code, runs = _http(f"{ui['url']}/api/v2/dags/dr_failover/dagRuns", token=token)
        assert code == 200 and json.loads(runs)["total_entries"] >= 1, runs[:500]
        # dr_failover executed through Airflow (not a dry run), approved there by the UI's user
        run = json.loads(runs)["dag_runs"][0]
        assert run["state"] == "success" and run["conf"]["dry_run"] is False, run
        # ... by Airflow's own scheduler (LocalExecutor, PostgreSQL metadata DB), not dag.test()
        assert s["failover"]["through"] == "airflow-scheduler", s["failover"]
        assert s["failover"]["run_id"].startswith("failover-manual__") and run["run_type"] == "manual", run
        assert s["failover"]["dag_states"]["promote_cold"] == "success", s["failover"]["dag_states"]
        running = json.loads((workdir / "running.json").read_text())
        names = [e["name"] for e in running]
        for name in ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
                     "postgres"):
            assert name in names, names
        env_file = (workdir / "airflow.env").read_text()
        assert "AIRFLOW__CORE__EXECUTOR=LocalExecutor" in env_file and "postgresql+psycopg2://" in env_file
        code, health = _http(f"{ui['url']}/api/v2/monitor/health")
        assert code == 200 and all(json.loads(health)[c]["status"] == "healthy"
                                   for c in ("scheduler", "dag_processor", "triggerer")), health
        rid = quote(run["dag_run_id"], safe="")
        code, hitl = _http(f"{ui['url']}/api/v2/dags/dr_failover/dagRuns/{rid}/taskInstances/approval/-1/hitlDetails",
                           token=token)
        assert code == 200 and json.loads(hitl)["chosen_options"] == ["Approve"], hitl[:500]
        assert "Kafka offsets applied on cold after approval" in json.loads(hitl)["body"]
        # the Logs tab: the task's own lines, read from the shared log folder (not "served logs")
        code, logs = _http(f"{ui['url']}/api/v2/dags/dr_failover/dagRuns/{rid}/taskInstances/promote_cold/logs/1",
                           token=token)
        assert code == 200 and "Could not read served logs" not in logs and "step promote_cold: done" in logs, \
            logs[:2000]
        # the failover report over HTTP: styled, with its remap table
        code, fo_report = _http(f"{ui['url']}/dr-toolkit/reports/{s['failover']['run_id']}", token=token)
        assert code == 200 and '<table id="kafka-remap">' in fo_report and "<style>" in fo_report, fo_report[:500]
        code, doc = _http(f"{ui['url']}/dr-toolkit/status.json", token=token)
        report_id = json.loads(doc)["verify_reports"][0]["report_id"]
        code, report = _http(f"{ui['url']}/dr-toolkit/reports/{report_id}", token=token)
        assert code == 200 and "GOODROWS" in report, report[:500]
        assert (workdir / "airflow.env").read_text().count("DRT_CONFIG=") == 1
    finally:
        pg_data = workdir / "servers" / "postgres"
        pg_data = pg_data.resolve() if pg_data.exists() else pg_data
        stop = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "demo", "--stop", "--workdir",
                               str(workdir)], capture_output=True, text=True, timeout=300)
    assert stop.returncode == 0, stop.stderr
    stopped = re.search(r"stopped (\d+) process", stop.stdout)
    assert stopped and int(stopped.group(1)) == len(running) >= 10, (stop.stdout, running)
    # nothing left: no process of the demo's (its work directory in its command line or environment:
    # the servers, Airflow's four processes and their LocalExecutor workers), none of its PostgreSQL
    left = stray_processes(str(workdir)) + stray_processes(str(pg_data))
    assert not left, left
    if pg_data.name.startswith("drt-demo-pg-"):  # outside the work directory (root: pytest's tmp is private)
        assert not pg_data.exists(), pg_data
    assert _port_closed(s["ui"]["url"])
    # The directory can be used again; a directory the demo did not make is refused.
    assert (workdir / ".drt-demo").exists()
    refused = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "demo", "--workdir", str(tmp_path)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "not made by `drt demo`" in refused.stderr


def test_demo_ui_without_postgresql_says_what_to_install(tmp_path: Path) -> None:
    """`drt demo --ui` runs Airflow's scheduler on PostgreSQL: without its server binaries (a plain
    `pip install`) one line says so and what to install, exit 3, before the work directory is made."""
    env = {**os.environ, "DRT_PG_BIN": str(tmp_path / "no-postgresql")}
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "demo", "--ui", "--workdir",
                        str(tmp_path / "demo")], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "PostgreSQL's server binaries are not installed" in lines[0], lines
    assert "apt-get install postgresql-15" in lines[0] and "without --ui" in lines[0], lines
    assert not (tmp_path / "demo").exists()


def _port_closed(url: str) -> bool:
    import socket

    host, port = url.split("//", 1)[1].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return False
    except OSError:
        return True


WHEEL_CHECK = """
import json, os, sys
from pathlib import Path
from urllib.parse import quote
import drt_demo.demo as d
home = Path(sys.argv[1])
os.environ.update(d.airflow_env(home))
os.environ["DRT_CONFIG"] = sys.argv[2]
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=str(d.DAGS))
import drt_airflow.policy_dags as pd
print(json.dumps({"dags": str(d.DAGS), "plugin": pd.__file__, "ids": sorted(bag.dags),
                  "errors": list(bag.import_errors),
                  "fileloc": bag.dags["dr_hdfs_replication"].fileloc}))
"""


@pytest.mark.slow  # ~25 s: builds sdist + wheel from a copy (~8 s; nothing written in the checkout), installs it (no deps), parses the DAGs from it
def test_demo_runs_from_an_installed_wheel(tmp_path: Path) -> None:
    """`drt demo` finds its DAGs and plugins in the installed package (not a checkout): a wheel
    built from the project, installed in a fresh venv that sees only the project's dependencies."""
    import shutil

    repo = Path(__file__).resolve().parents[2]
    venv, vsite = installed_wheel(tmp_path, sdist=True)
    vpy = venv / "bin" / "python"
    run_dir = tmp_path / "elsewhere"  # not the checkout: nothing found by relative paths
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH", "DRT_"))}

    h = subprocess.run([str(venv / "bin" / "drt"), "demo", "--help"], capture_output=True, text=True,
                       timeout=120, cwd=run_dir, env=env)
    assert h.returncode == 0 and "--workdir" in h.stdout, h.stderr[-2000:]

    topo = run_dir / "drt.yaml"
    topo.write_text((repo / "examples" / "production.yaml").read_text())
    r = subprocess.run([str(vpy), "-c", WHEEL_CHECK, str(tmp_path / "airflow"), str(topo)], capture_output=True,
                       text=True, timeout=300, cwd=run_dir, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["dags"].startswith(vsite) and out["plugin"].startswith(vsite) and out["fileloc"].startswith(vsite)
    assert out["errors"] == []
    plugins = Path(vsite) / "drt_demo" / "airflow_files" / "plugins"
    assert (plugins / ".airflowignore").is_file() and (plugins / "dr_toolkit_plugin.py").is_file()
    assert {"dr_hdfs_replication", "dr_verify", "dr_failover", "dr_hdfs_replication__warehouse"} <= set(out["ids"])

    # the start of the demo: its checks pass, then it refuses a directory it did not make (exit 2)
    (run_dir / "keep.txt").write_text("mine")
    start = subprocess.run([str(venv / "bin" / "drt"), "demo", "--workdir", str(run_dir)], capture_output=True,
                           text=True, timeout=120, cwd=run_dir, env=env)
    assert start.returncode == 2 and "not made by `drt demo`" in start.stderr, start.stderr[-2000:]

    # an install without the demo's Airflow files: one line saying what is missing, exit 2
    shutil.rmtree(Path(vsite) / "drt_demo" / "airflow_files" / "dags")
    broken = subprocess.run([str(venv / "bin" / "drt"), "demo", "--workdir", str(tmp_path / "new")],
                            capture_output=True, text=True, timeout=120, cwd=run_dir, env=env)
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert "the demo's Airflow files are not installed" in broken.stderr and not (tmp_path / "new").exists()
