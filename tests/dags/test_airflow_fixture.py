"""The Airflow fixture runs a real DAG with dag.test() on its migrated metadata DB."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def test_dag_test_runs_tasks_and_passes_xcom(airflow_home) -> None:
    from tests.support.airflow import load_dag

    run = load_dag("drt_fixture_probe").test()
    assert run.state == "success"
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["consume"].xcom_pull(task_ids="consume") == 42
