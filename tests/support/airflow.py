"""Airflow for tests: two local DAG bundles (the project's dags/ and a test-only bundle),
set before anything imports airflow, and a loader that returns a DAG ready for dag.test()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from drt_demo.demo import airflow_env

REPO = Path(__file__).resolve().parents[2]
DAG_FOLDERS = [REPO / "dags", REPO / "tests" / "dags" / "bundle"]


def env(home: Path) -> dict[str, str]:
    """The environment of a temporary Airflow home (the demo's, plus the test-only bundle)."""
    return airflow_env(home, extra_dag_folders=(DAG_FOLDERS[1],), log_level="INFO")


def load_dag(dag_id: str) -> Any:
    """Parse the bundles and return the DAG ``dag_id`` (as the DAG processor would)."""
    from airflow.dag_processing.dagbag import DagBag

    for folder in DAG_FOLDERS:
        bag = DagBag(dag_folder=str(folder))
        if dag_id in bag.dags:
            return bag.dags[dag_id]
    raise KeyError(f"DAG {dag_id!r} not found in {DAG_FOLDERS}")
