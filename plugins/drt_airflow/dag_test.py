"""Run one of the project's DAGs with ``dag.test()`` and print its task states — the Airflow
half of `drt demo` (the library never imports Airflow, so the demo runs this in a child
process with the demo's AIRFLOW_HOME environment):

    python plugins/drt_airflow/dag_test.py DAG_ID '{"conf": "json"}'

The last line printed is ``DRT-DAG-STATES {json}``; the exit code is 1 when the run failed.

    python plugins/drt_airflow/dag_test.py --many '[["DAG_ID", {"conf": "json"}, "LOG_FILE"], ...]'

runs the DAGs one after the other in this one process (Airflow imported and the DAG folder parsed
once: :func:`run_dags`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dr_toolkit.errors import EXIT_OK, EXIT_PROBLEM

DAGS = Path(__file__).resolve().parents[2] / "dags"
# Run as a script, Python puts this file's folder first on sys.path, where drt_airflow's own
# modules (hdfs.py, kafka.py, ...) would shadow the libraries of those names (`import hdfs`
# found drt_airflow/hdfs.py: every WebHDFS copy in the demo failed). Airflow puts plugins/ on
# the path itself; this folder must not be on it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != _HERE]


class _TaskLogTee:
    """This process's stdout and stderr (where Airflow's structlog writes every log line, the
    operators' own included) through a pipe: each chunk goes on to the original stdout and, while a
    task runs, also to that task's log file."""

    _MARK = b"\x00drt-task-log-sync\n"

    def __init__(self) -> None:
        import os
        import threading

        self._os = os
        sys.stdout.flush()
        sys.stderr.flush()
        r, w = os.pipe()
        self.out = os.dup(1)
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        self.file: Any = None
        self.synced = threading.Event()
        threading.Thread(target=self._pump, args=(r,), daemon=True, name="drt-task-log-tee").start()

    def _pump(self, r: int) -> None:
        while chunk := self._os.read(r, 65536):
            if self._MARK in chunk:
                chunk = chunk.replace(self._MARK, b"")
                self._write(chunk)
                self.synced.set()
                continue
            self._write(chunk)

    def _write(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._os.write(self.out, chunk)
        if self.file is not None:
            self.file.write(chunk)
            self.file.flush()

    def to(self, path: Path | None) -> None:
        """Everything written so far goes where it went; what follows also to ``path``."""
        sys.stdout.flush()
        sys.stderr.flush()
        self.synced.clear()
        self._os.write(1, self._MARK)
        self.synced.wait(10)
        if self.file is not None:
            self.file.close()
        self.file = None if path is None else path.open("ab")


def write_task_logs() -> None:
    """Give every task ``dag.test()`` runs a log file where the UI reads it.

    ``dag.test()`` runs each task in this process (no executor, no worker): it writes no task log
    file, so the api-server, finding none under ``[logging] base_log_folder``, asks the worker's
    log server at the task's hostname:8793 — which nobody runs — and the Logs tab says "Could not
    read served logs". Here each task's lines (the operators' own logs included) also go to the
    file Airflow's ``FileTaskHandler`` names for that attempt, under the base log folder that the
    api-server of the same AIRFLOW_HOME reads locally."""
    import airflow.sdk.definitions.dag as sdk_dag
    from airflow.configuration import conf
    from airflow.utils.log.file_task_handler import FileTaskHandler

    inner = sdk_dag._run_task
    if getattr(inner, "drt_writes_logs", False):
        return
    global _TEE
    base = conf.get("logging", "base_log_folder")
    names = FileTaskHandler(base_log_folder=base)
    tee = _TEE = _TaskLogTee()

    def run_task(*, ti: Any, task: Any, run_triggerer: bool = False) -> Any:
        path = Path(base, names._render_filename(ti, ti.try_number))
        path.parent.mkdir(parents=True, exist_ok=True)
        tee.to(path)
        try:
            return inner(ti=ti, task=task, run_triggerer=run_triggerer)
        finally:
            tee.to(None)

    run_task.drt_writes_logs = True  # type: ignore[attr-defined]
    sdk_dag._run_task = run_task


_TEE: _TaskLogTee | None = None  # the process's tee, once write_task_logs() set it up


def run_dag(dag_id: str, conf: dict[str, Any] | None = None, *, folder: Path = DAGS,
            bag: Any = None) -> tuple[str, dict[str, str]]:
    """Run ``dag_id`` (from ``folder``, or from the DagBag ``bag`` already filled) once with
    ``dag.test()``, each task's log written where the UI reads it (:func:`write_task_logs`); return
    the run's state and each task's."""
    from airflow.dag_processing.dagbag import DagBag

    write_task_logs()
    bag = bag if bag is not None else DagBag(dag_folder=str(folder))
    if dag_id not in bag.dags:
        raise SystemExit(f"DAG {dag_id} not found in {folder}: {bag.import_errors}")
    run = bag.dags[dag_id].test(run_conf=conf or {})
    states = {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: str(ti.state)
              for ti in run.get_task_instances()}
    return str(run.state), states


def run_dags(plan: list[list[Any]], *, folder: Path = DAGS) -> int:
    """``--many``: the DAGs of ``plan`` (``[dag_id, conf, log file]`` each) one after the other in
    this process — Airflow imported and the DAG folder parsed once, not once per DAG (`drt demo`'s
    four DAGs before its failover) — each one's output (the tasks' own logs as in :func:`run_dag`)
    in its own log file. After each, one line on stdout: ``DRT-DAG-DONE <dag_id> <state> {states}``;
    the next DAG starts when a line comes on stdin (the caller reads what the DAG wrote, alone).
    Returns the exit code: 1 at the first DAG that failed (the later ones are not run)."""
    import os

    from airflow.dag_processing.dagbag import DagBag

    report = os.fdopen(os.dup(1), "w", buffering=1)  # stdout, before the tee takes file descriptor 1
    write_task_logs()
    tee = _TEE
    assert tee is not None
    logs: list[Any] = []
    bag: Any = None
    try:
        for i, (dag_id, conf, log) in enumerate(plan):
            if i and not sys.stdin.readline():  # the caller has gone
                return EXIT_PROBLEM
            tee.to(None)  # everything so far written where it went: what follows goes to this DAG's log
            logs.append(open(log, "ab"))  # noqa: SIM115 - closed below, after the tee's last write
            tee.out = logs[-1].fileno()
            if bag is None:
                bag = DagBag(dag_folder=str(folder))
            state, states = run_dag(dag_id, conf, bag=bag)
            tee.to(None)
            report.write(f"DRT-DAG-DONE {dag_id} {state} {json.dumps(states)}\n")
            if state != "success":
                return EXIT_PROBLEM
        return EXIT_OK
    finally:
        for f in logs:
            f.close()


if __name__ == "__main__":
    if sys.argv[1] == "--many":
        sys.exit(run_dags(json.loads(sys.argv[2])))
    state, states = run_dag(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else None)
    print("DRT-DAG-STATES " + json.dumps(states), flush=True)
    sys.exit(EXIT_OK if state == "success" else EXIT_PROBLEM)
