"""Airflow for tests: two local DAG bundles (the project's dags/ and a test-only bundle),
set before anything imports airflow, and a loader that returns a DAG ready for dag.test()."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUNDLES = [
    {"name": "dr-toolkit", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
     "kwargs": {"path": str(REPO / "dags"), "refresh_interval": 0}},
    {"name": "drt-tests", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
     "kwargs": {"path": str(REPO / "tests" / "dags" / "bundle"), "refresh_interval": 0}},
]


def env(home: Path) -> dict[str, str]:
    """The environment of a temporary Airflow home (SQLite metadata DB, small parallelism)."""
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(BUNDLES),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    }


def load_dag(dag_id: str) -> Any:
    """Parse the bundles and return the DAG ``dag_id`` (as the DAG processor would)."""
    from airflow.dag_processing.dagbag import DagBag

    for b in BUNDLES:
        bag = DagBag(dag_folder=b["kwargs"]["path"])  # type: ignore[index]
        if dag_id in bag.dags:
            return bag.dags[dag_id]
    raise KeyError(f"DAG {dag_id!r} not found in {[b['kwargs']['path'] for b in BUNDLES]}")  # type: ignore[index]
