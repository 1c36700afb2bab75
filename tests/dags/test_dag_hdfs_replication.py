"""The dr_hdfs_replication DAG, run with dag.test(): policies mapped to tasks, copies made
from the (emulated) HDFS hot cluster to the cold one, ledger rows and watermarks written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.fs import open_fs
from dr_toolkit.ledger import Ledger
from tests.support.fixtures_copy import sample_tree, tree_digest, write_copy_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow]


def test_dag_maps_over_policies_and_replicates(airflow_home: Any, webhdfs: Any, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.airflow import load_dag

    fs = open_fs(webhdfs.location("/data"))
    for rel, data in sample_tree(6).items():
        fs.write_bytes(f"/data/{rel}", data)
    ledger_url = f"sqlite:///{tmp_path}/ledger.db"
    cfg = write_copy_topology(tmp_path / "drt.yaml", namenodes=webhdfs.urls, cold_root=tmp_path / "cold",
                              ledger_url=ledger_url)
    monkeypatch.setenv("DRT_CONFIG", str(cfg))
    run = load_dag("dr_hdfs_replication").test()
    assert run.state == "success"
    tis = {(ti.task_id, ti.map_index): ti for ti in run.get_task_instances()}
    assert tis[("due_policies", -1)].xcom_pull(task_ids="due_policies") == ["warehouse"]
    assert ("replicate", 0) in tis
    report = tis[("report", -1)].xcom_pull(task_ids="report")
    assert report == {"policies": ["warehouse"], "files_copied": 6, "bytes_copied": report["bytes_copied"],
                      "files_failed": 0}
    assert len(tree_digest(tmp_path / "cold/data")) == 6
    ledger = Ledger.open(ledger_url)
    assert [r["status"] for r in ledger.runs(policy="warehouse")] == ["succeeded"]
    assert ledger.watermarks("hdfs")[0]["name"] == "warehouse:hdfs://cold/data"

    # the policy is @hourly and just ran: the next DAG run maps over no policy
    run2 = load_dag("dr_hdfs_replication").test()
    assert run2.state == "success"
    tis2 = {(ti.task_id, ti.map_index): ti for ti in run2.get_task_instances()}
    assert tis2[("due_policies", -1)].xcom_pull(task_ids="due_policies") == []
    assert len(ledger.runs(policy="warehouse")) == 1
