"""dr_reprotect with dag.test() on a real ZooKeeper and local HDFS roots: the shape, and an executed
re-protect after a real failover, its divergence report asked and approved through Airflow's HITL
REST API on a running api-server; afterwards the hook (every DAG, the DR page) loads the topology of
the new direction."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from dr_toolkit.topology import load_topology
from tests.dags.test_dag_failover import _approve_when_asked
from tests.support.fixtures_failover import drt, write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_dag_shape_params_and_docs(airflow_home) -> None:
    from tests.support.airflow import load_dag

    dag = load_dag("dr_reprotect")
    assert "divergence report" in dag.doc_md.lower() and dag.params["dry_run"] is True
    assert type(dag.task_dict["approval"]).__name__ == "HITLOperator"
    assert dag.task_dict["set_aside"].upstream_task_ids == {"approval", "execute_or_dry_run"}
    assert dag.task_dict["lift_standby"].upstream_task_ids == {"set_aside"}
    assert dag.task_dict["report"].upstream_task_ids == {"gate"}


@pytest.mark.slow
def test_an_executed_reprotect_asks_the_divergence_and_turns_every_dag_around(
        airflow_home, api_server, tmp_path: Path, zk_server, monkeypatch) -> None:
    from drt_airflow.hooks import DrtHook

    from tests.support.airflow import load_dag

    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address,
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"],
                                 "options": {"update": True, "delete": True}}])
    hot, cold = tmp_path / "hot" / "warehouse", tmp_path / "cold" / "warehouse"
    hot.mkdir(parents=True)
    (hot / "a.txt").write_text("a1")
    (hot / "b.txt").write_text("b1")
    for args in (("replicate", "wh"), ("failover", "run", "--execute", "--yes-i-am-sure", "--reason", "drill")):
        r = drt("--json", *args, config=path)
        assert r.returncode == 0, r.stdout + r.stderr
    (hot / "late.txt").write_text("written on the old hot after the failover")  # the divergence
    (cold / "c.txt").write_text("written on the active cluster")
    monkeypatch.setenv("DRT_CONFIG", str(path))
    assert DrtHook().topology().hot_name == "hot"

    stop, answered = threading.Event(), []
    t = threading.Thread(target=_approve_when_asked, args=(api_server, "dr_reprotect", stop, answered), daemon=True)
    t.start()
    try:
        run = load_dag("dr_reprotect").test(run_conf={"reason": "site A is back", "dry_run": False})
    finally:
        stop.set()
        t.join(15)
    assert answered and answered[-1].get("chosen_options") == ["Approve"], answered
    asked = answered[-1]["asked"]
    assert "**Re-protect cold onto hot**" in asked and "late.txt" in asked, asked
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert (hot / "late.txt").exists() is False and (hot / "c.txt").read_text() == "written on the active cluster"
    kept = list((tmp_path / "hot").rglob("late.txt"))
    assert len(kept) == 1 and kept[0].read_text() == "written on the old hot after the failover"
    topo = DrtHook().topology()
    assert (topo.hot_name, topo.cold_name) == ("cold", "hot")
    assert topo.policies.hdfs[0].source == "hdfs://cold/warehouse"
    report = json.loads(next((tmp_path / "reports").glob("reprotect-*.json")).read_text())
    assert [d["where"] for d in report["divergence"]] == ["hdfs://hot/warehouse/late.txt"]
    assert load_topology(path).hot_name == "hot"  # the file's roles are never rewritten
    # the DR page: the active cluster and what protects it, in the new direction
    from drt_airflow import plugin

    plugin._CACHE.clear()
    html = plugin.render(plugin.status(who="airflow:test"))
    assert "Active cluster <b id='active-cluster'>cold</b>" in html and "failed-over" not in html, html[:3000]
    assert "protected onto <b id='protected-onto'>hot</b>" in html, html[:3000]
