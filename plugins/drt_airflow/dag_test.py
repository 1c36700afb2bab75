"""Run one of the project's DAGs with ``dag.test()`` and print its task states — the Airflow
half of `drt demo` (the library never imports Airflow, so the demo runs this in a child
process with the demo's AIRFLOW_HOME environment):

    python plugins/drt_airflow/dag_test.py DAG_ID '{"conf": "json"}'

The last line printed is ``DRT-DAG-STATES {json}``; the exit code is 1 when the run failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DAGS = Path(__file__).resolve().parents[2] / "dags"
# Run as a script, Python puts this file's folder first on sys.path, where drt_airflow's own
# modules (hdfs.py, kafka.py, ...) would shadow the libraries of those names (`import hdfs`
# found drt_airflow/hdfs.py: every WebHDFS copy in the demo failed). Airflow puts plugins/ on
# the path itself; this folder must not be on it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != _HERE]


def run_dag(dag_id: str, conf: dict[str, Any] | None = None) -> tuple[str, dict[str, str]]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    if dag_id not in bag.dags:
        raise SystemExit(f"DAG {dag_id} not found in {DAGS}: {bag.import_errors}")
    run = bag.dags[dag_id].test(run_conf=conf or {})
    states = {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: str(ti.state)
              for ti in run.get_task_instances()}
    return str(run.state), states


if __name__ == "__main__":
    state, states = run_dag(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else None)
    print("DRT-DAG-STATES " + json.dumps(states), flush=True)
    sys.exit(0 if state == "success" else 1)
