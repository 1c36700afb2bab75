"""The dr_verify DAG runs every verify policy of the topology with dag.test() (Spark in the
task process: the shared local session), keeps the reports and records them in the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from dr_toolkit.ledger import Ledger
from tests.support.fixtures_verify import base_frame, topology_file, write

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]


def test_dag_verifies_every_policy_and_keeps_reports(airflow_home, spark, tmp_path: Path, monkeypatch) -> None:
    from pyspark.sql import functions as F

    from tests.support.airflow import load_dag

    hot, cold = tmp_path / "hot", tmp_path / "cold"
    df = base_frame(spark, 2000)
    for side in (hot, cold):
        write(df, side / "orders", 2)
    write(df.filter(F.col("id") < 1000), hot / "events", 1)
    write(df.filter((F.col("id") < 1000) & (F.col("id") != 17)), cold / "events", 1)
    cfg = topology_file(tmp_path, [
        "{name: orders, source: hdfs://hot/orders, target: hdfs://cold/orders, key: [id]}",
        "{name: events, source: hdfs://hot/events, target: hdfs://cold/events, key: [id], report_dir: ev-reports}"])
    monkeypatch.setenv("DRT_CONFIG", str(cfg))
    run = load_dag("dr_verify").test()
    tis = {(ti.task_id, ti.map_index): ti for ti in run.get_task_instances()}
    states = {k: ti.state for k, ti in tis.items()}
    # orders matches; events lost key 17 on the replica: its task fails, the summary still runs
    assert sorted(s for (t, _), s in states.items() if t == "verify") == ["failed", "success"]
    assert states[("summary", -1)] == "success"
    summary = tis[("summary", -1)].xcom_pull(task_ids="summary")
    assert summary["all_good"] is False
    assert summary["policies"]["orders"]["badrows"] == 0 and summary["policies"]["events"]["badrows"] == 1
    assert len(list((tmp_path / "reports").glob("verify-orders-*.html"))) == 1
    assert len(list((tmp_path / "ev-reports").glob("verify-events-*.html"))) == 1
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
    assert ledger.verify_reports(name="events")[0]["only_in_source_table_rows"] == 1
