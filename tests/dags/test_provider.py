"""dr-toolkit as an Airflow provider, installed from its wheel into a clean virtualenv: the
`apache_airflow_provider` entry point, the `drt` connection type with its form field, the
operators, sensors, hook, extra links and the DR page plugin; a DAG using the operators loads.
And the tasks use no deprecated Airflow API (deprecations of Airflow's API are errors here)."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import add_verify_report, write_topology
from tests.support.wheel import installed_wheel

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]

CHECK = r"""
import json, os, sys
from pathlib import Path
home, dags = Path(sys.argv[1]), Path(sys.argv[2])
os.environ.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                   "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                   "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db"})
(home / "plugins").mkdir(parents=True, exist_ok=True)   # empty: the plugin comes from the package
from airflow.providers_manager import ProvidersManager
pm = ProvidersManager()
info = pm.providers["dr-toolkit"]
from airflow import plugins_manager
plugins, errors = plugins_manager._get_plugins()
dr = [p for p in plugins if p.name == "dr_toolkit"]
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=str(dags))
dag = bag.dags.get("uses_the_provider")
import drt_airflow
print(json.dumps({
    "package": info.version, "module": drt_airflow.__file__,
    "hook": pm.hooks["drt"].hook_class_name if pm.hooks.get("drt") else None,
    "hook_name": pm.hooks["drt"].hook_name if pm.hooks.get("drt") else None,
    "widgets": sorted(k for k in pm.connection_form_widgets if k.startswith("extra__drt__")),
    "hidden": pm.field_behaviours.get("drt", {}).get("hidden_fields"),
    "links": sorted(c for c in pm.extra_links_class_names if c.startswith("drt_airflow")),
    "plugins": len(dr), "plugin_errors": errors,
    "views": [v["href"] for p in dr for v in p.external_views],
    "apps": [a["url_prefix"] for p in dr for a in p.fastapi_apps],
    "import_errors": {k: v[-300:] for k, v in bag.import_errors.items()},
    "tasks": sorted(dag.task_dict) if dag else None,
    "task_links": {t: sorted(l.name for l in dag.task_dict[t].operator_extra_links) for t in dag.task_dict} if dag else None,
}))
"""

DAG = '''
import pendulum
from airflow.sdk import DAG
from drt_airflow.verify import VerifyOperator
from drt_airflow.hdfs import HdfsReplicationOperator
from drt_airflow.kafka import KafkaCheckpointOperator, KafkaMirrorCaughtUpSensor
from drt_airflow.failover import FailoverStepOperator

with DAG("uses_the_provider", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    v = VerifyOperator(task_id="verify", policy="orders-table")
    c = KafkaCheckpointOperator(task_id="checkpoint")
    s = KafkaMirrorCaughtUpSensor(task_id="mirrored")
    f = FailoverStepOperator(task_id="promote", step="promote_cold", run_id="failover-x")
    v >> c >> s >> f
'''


@pytest.mark.slow  # builds the wheel (~10 s), installs it (no deps) and loads Airflow in the new venv
def test_the_provider_installed_from_the_wheel(tmp_path: Path) -> None:
    venv, vsite = installed_wheel(tmp_path)
    vpy = venv / "bin" / "python"
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "uses_the_provider.py").write_text(DAG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH", "DRT_"))}
    r = subprocess.run([str(vpy), "-c", CHECK, str(tmp_path / "home"), str(dags)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["module"].startswith(vsite), out["module"]  # the installed package, not the checkout
    assert out["package"] == "0.1.0"
    assert out["hook"] == "drt_airflow.hooks.DrtHook" and out["hook_name"] == "dr-toolkit"
    assert out["widgets"] == ["extra__drt__config"] and "password" in out["hidden"]
    assert out["links"] == ["drt_airflow.links.DrPageLink", "drt_airflow.links.VerifyReportLink"]
    assert out["plugins"] == 1 and out["plugin_errors"] == {}, out["plugin_errors"]
    assert out["views"] == ["/dr-toolkit/"] and out["apps"] == ["/dr-toolkit"]
    assert out["import_errors"] == {}
    assert out["tasks"] == ["checkpoint", "mirrored", "promote", "verify"]
    assert out["task_links"]["verify"] == ["Verification report"] and out["task_links"]["promote"] == ["DR status"]


AIRFLOW_DEPRECATIONS = (r".*airflow\.models.* is deprecated", r".*is deprecated.*airflow\.",
                        r".*from `airflow\.models` is deprecated")


def test_dag_tasks_use_no_deprecated_airflow_api(airflow_home, tmp_path, monkeypatch, capfd) -> None:
    """A DAG's task resolves the topology through DrtHook (connection drt_default, Variable
    drt_config: both undefined here) with Airflow's API deprecations turned into errors, and its
    log holds no deprecation warning."""
    from airflow.exceptions import RemovedInAirflow4Warning

    from tests.support.airflow import load_dag

    path = write_topology(tmp_path, zk=None, failover={"rpo_slo_s": 3600},
                          verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}])
    add_verify_report(Ledger.open(load_topology(path).ledger.url), "orders", age_s=60)
    monkeypatch.setenv("DRT_CONFIG", str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RemovedInAirflow4Warning)
        for pattern in AIRFLOW_DEPRECATIONS:
            warnings.filterwarnings("error", message=pattern, category=DeprecationWarning)
        run = load_dag("dr_rpo_watch").test()
    cap = capfd.readouterr()
    assert run.state == "success", (cap.out + cap.err)[-3000:]
    log = cap.out + cap.err
    airflow_api = [ln for ln in log.splitlines() if "is deprecated" in ln and "`airflow." in ln]
    assert airflow_api == [], airflow_api[:3]
