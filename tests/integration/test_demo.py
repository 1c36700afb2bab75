"""`drt demo` end to end, as `make demo` runs it: NO_GO while lag remains, GO after draining,
a failover that succeeds, the reports on disk — and a second run in the same work directory."""

from __future__ import annotations

import json
import os
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


WHEEL_CHECK = """
import json, os, sys
from pathlib import Path
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


@pytest.mark.slow  # ~25 s: builds sdist + wheel (~8 s, nothing written in the checkout), installs it (no deps), parses the DAGs from it
def test_demo_runs_from_an_installed_wheel(tmp_path: Path) -> None:
    """`drt demo` finds its DAGs and plugins in the installed package (not a checkout): a wheel
    built from the project, installed in a fresh venv that sees only the project's dependencies."""
    import shutil
    import site
    import sysconfig

    repo = Path(__file__).resolve().parents[2]
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    subprocess.run([uv, "build", "-q", "-o", str(tmp_path / "dist"), str(repo)], check=True,
                   capture_output=True, timeout=300, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("dr_toolkit-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, capture_output=True, timeout=120)
    vpy = venv / "bin" / "python"
    vsite = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    # the project's dependencies come from the test venv's site-packages — a plain path line, so
    # its editable install of dr-toolkit (a .pth of its own there) is not active in this venv
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()] or [sysconfig.get_paths()["purelib"]]
    (Path(vsite) / "zz_project_deps.pth").write_text("\n".join(deps) + "\n")
    subprocess.run([uv, "pip", "install", "-q", "--no-deps", "--python", str(vpy), str(wheel)], check=True,
                   capture_output=True, timeout=300)
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
