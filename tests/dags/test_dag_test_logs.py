"""The Logs tab of runs made by ``dag.test()`` (how `drt demo` runs the DAGs): the api-server reads
each task's log from the shared base log folder — it said "Could not read served logs" (dag.test()
wrote no log file, so the api-server asked a worker log server nobody runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from tests.support.airflow import DAG_FOLDERS, REPO

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def test_task_logs_of_dag_test_runs_are_read_by_the_api_server(airflow_home, api_server) -> None:
    code = ("import json, sys; from pathlib import Path; from drt_airflow.dag_test import run_dag; "
            "print('DRT-RESULT ' + json.dumps(run_dag('drt_fixture_probe', folder=Path(sys.argv[1]))))")
    plugins = str(REPO / "plugins")  # this checkout's plugin (not an installed one)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([plugins, *filter(None, [os.environ.get("PYTHONPATH")])])}
    r = subprocess.run([sys.executable, "-c", code, str(DAG_FOLDERS[1])], capture_output=True, text=True, env=env,
                       timeout=600)
    result = [ln for ln in r.stdout.splitlines() if ln.startswith("DRT-RESULT ")]
    assert r.returncode == 0 and result, r.stdout[-3000:] + r.stderr[-3000:]
    assert json.loads(result[-1].split(" ", 1)[1])[0] == "success"

    headers = {"Authorization": f"Bearer {api_server.token()}", "Accept": "application/json"}

    def get(path: str) -> dict:
        with urllib.request.urlopen(urllib.request.Request(f"{api_server.url}{path}", headers=headers),
                                    timeout=30) as resp:
            return json.loads(resp.read())

    runs = get("/api/v2/dags/drt_fixture_probe/dagRuns?order_by=-start_date&limit=1")["dag_runs"]
    run_id = urllib.request.quote(runs[0]["dag_run_id"], safe="")
    for task, value in (("produce", 41), ("consume", 42)):
        doc = get(f"/api/v2/dags/drt_fixture_probe/dagRuns/{run_id}/taskInstances/{task}/logs/1")
        text = json.dumps(doc["content"])
        assert "Could not read served logs" not in text, text[:2000]
        assert f"Done. Returned value was: {value}" in text, text[:3000]  # the operator's own log line
