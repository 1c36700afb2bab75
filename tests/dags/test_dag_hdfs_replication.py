"""The dr_hdfs_replication DAGs, run with dag.test(): the manual one maps every policy to a task,
the policy's own one runs on its schedule and updates its Asset; copies made from the real
HDFS hot cluster (an HA pair) to the cold one, ledger rows and watermarks written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.fs import open_fs
from dr_toolkit.ledger import Ledger
from tests.support.fixtures_copy import sample_tree, tree_digest, write_copy_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("copy_state_dir")]


def test_dag_maps_over_policies_and_replicates(airflow_home: Any, webhdfs: Any, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    from tests.support.airflow import load_dag

    fs = open_fs(webhdfs.location("/data"), Access.from_env())
    for rel, data in sample_tree(6).items():
        fs.write_bytes(webhdfs.p(f"/data/{rel}"), data)
    ledger_url = f"sqlite:///{tmp_path}/ledger.db"
    cfg = write_copy_topology(tmp_path / "drt.yaml", namenodes=webhdfs.urls, cold_root=tmp_path / "cold",
                              ledger_url=ledger_url, source=webhdfs.p("/data"))
    monkeypatch.setenv("DRT_CONFIG", str(cfg))
    run = load_dag("dr_hdfs_replication").test()  # manual: every policy now
    assert run.state == "success"
    log = "".join(capfd.readouterr())
    assert "XCom not found" not in log  # the report reads the mapped results by index, not one past the end
    tis = {(ti.task_id, ti.map_index): ti for ti in run.get_task_instances()}
    assert tis[("policies", -1)].xcom_pull(task_ids="policies") == ["warehouse"]
    assert ("replicate", 0) in tis
    report = tis[("report", -1)].xcom_pull(task_ids="report")
    assert report == {"policies": ["warehouse"], "files_copied": 6, "bytes_copied": report["bytes_copied"],
                      "files_failed": 0}
    assert len(tree_digest(tmp_path / "cold/data")) == 6
    ledger = Ledger.open(ledger_url)
    assert [r["status"] for r in ledger.runs(policy="warehouse")] == ["succeeded"]
    assert ledger.watermarks("hdfs")[0]["name"] == "warehouse:hdfs://cold/data"

    # the policy's own DAG (scheduled by Airflow on the policy's schedule): an incremental run
    # that updates the policy's Asset, which linked verify DAGs are triggered by
    fs.write_bytes(webhdfs.p("/data/new.bin"), b"x" * 100)
    dag = load_dag("dr_hdfs_replication__warehouse")
    assert dag.timetable.expression == "0 * * * *"  # the policy's @hourly
    run2 = dag.test()
    assert run2.state == "success"
    tis2 = {ti.task_id: ti for ti in run2.get_task_instances()}
    assert tis2["report"].xcom_pull(task_ids="report")["files_copied"] == 1
    assert [r["status"] for r in ledger.runs(policy="warehouse")] == ["succeeded", "succeeded"]
    # after the run, its full check is made and recorded as the proof the gate's quick path (the DR
    # page, dr_rpo_watch) rests on (test_hdfs_gate_quick: recorded and used, on real HDFS); cold is a
    # local directory here: no NameNode keeps its state, so nothing is recorded, and the task says so
    assert tis2["replicate"].xcom_pull(task_ids="replicate")["proofs"] == {"warehouse:hdfs://cold/data": False}
    # ... and the quick check (the DR page, dr_rpo_watch) checks such a target in full, not NO_GO forever
    import time

    from dr_toolkit.copy.signals import hdfs_signals
    from dr_toolkit.topology import load_topology

    (quick,) = hdfs_signals(load_topology(cfg), ledger, Access.from_env(), time.time(), mode="quick")
    newest = ledger.manifest(ledger.runs(policy="warehouse")[0]["manifest_id"])
    assert (quick.caught_up, quick.safe_time, quick.detail["path"]) == (True, float(newest["source_time"]), "full"), \
        quick
    assert "not on HDFS (local)" in quick.detail["quick_not_proven"], quick.detail
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.execute(select(AssetEvent.source_dag_id, AssetEvent.source_task_id).join(
            AssetModel, AssetEvent.asset_id == AssetModel.id).where(
            AssetModel.uri == "x-drt://hdfs/warehouse", AssetEvent.source_run_id == run2.run_id)).all()
    assert [tuple(e) for e in events] == [("dr_hdfs_replication__warehouse", "replicate")]
