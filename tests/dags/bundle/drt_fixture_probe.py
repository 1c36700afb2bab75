"""A probe DAG (test-only bundle) proving the Airflow fixture runs real DAGs with dag.test()."""

from __future__ import annotations

from airflow.sdk import dag, task


@dag(schedule=None, tags=["dr-toolkit-test"], doc_md="Test probe: two tasks passing a value by XCom.")
def drt_fixture_probe():  # type: ignore[no-untyped-def]
    @task
    def produce() -> int:
        return 41

    @task
    def consume(x: int) -> int:
        return x + 1

    consume(produce())


drt_fixture_probe()
