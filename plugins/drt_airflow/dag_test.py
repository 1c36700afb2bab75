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


def write_task_logs() -> None:
    """Give every task ``dag.test()`` runs a log file where the UI reads it.

    ``dag.test()`` runs each task in this process (no executor, no worker): it writes no task log
    file, so the api-server, finding none under ``[logging] base_log_folder``, asks the worker's
    log server at the task's hostname:8793 — which nobody runs — and the Logs tab says "Could not
    read served logs". Here each task's records (the operators' own logs included) also go to
    the file Airflow's ``FileTaskHandler`` names for that attempt, under the base log folder the
    api-server of the same AIRFLOW_HOME reads locally."""
    import logging

    import airflow.sdk.definitions.dag as sdk_dag
    from airflow.configuration import conf
    from airflow.utils.log.file_task_handler import FileTaskHandler

    base = conf.get("logging", "base_log_folder")
    names = FileTaskHandler(base_log_folder=base)
    inner = sdk_dag._run_task
    if getattr(inner, "drt_writes_logs", False):
        return

    def run_task(*, ti: Any, task: Any, run_triggerer: bool = False) -> Any:
        path = Path(base, names._render_filename(ti, ti.try_number))
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("[%(asctime)s] {%(name)s} %(levelname)s - %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        try:
            return inner(ti=ti, task=task, run_triggerer=run_triggerer)
        finally:
            root.removeHandler(handler)
            handler.close()

    run_task.drt_writes_logs = True  # type: ignore[attr-defined]
    sdk_dag._run_task = run_task  # type: ignore[assignment]


def run_dag(dag_id: str, conf: dict[str, Any] | None = None) -> tuple[str, dict[str, str]]:
    from airflow.dag_processing.dagbag import DagBag

    write_task_logs()

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
