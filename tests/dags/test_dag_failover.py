"""dr_failover with dag.test() on the real test services: a dry run (no approval, nothing changes)
and an executed failover approved through Airflow's HITL REST API on a running api-server."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.integration.test_failover_runbook import fence_of
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


@pytest.fixture
def topo_path(tmp_path, hbase_worlds, monkeypatch):
    path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1"}],
                          hbase_clusters=hbase_worlds.clusters)
    hbase_worlds(load_topology(path), lagging=False)
    monkeypatch.setenv("DRT_CONFIG", str(path))
    return path


def test_dag_shape_params_and_docs(airflow_home) -> None:
    from tests.support.airflow import load_dag

    dag = load_dag("dr_failover")
    assert dag.schedule is None or str(dag.timetable.summary) in ("None", "Never, external triggers only")
    assert "dr-toolkit" in dag.tags and "human approval" in dag.doc_md.lower()
    assert dag.params["dry_run"] is True
    assert dag.params.get_param("reason").schema["type"] == "string"
    assert "approval" in dag.task_dict and type(dag.task_dict["approval"]).__name__ == "HITLOperator"
    assert dag.task_dict["kafka_apply"].upstream_task_ids == {"approval"}
    assert dag.task_dict["promote_cold"].upstream_task_ids == {"kafka_apply"}


@pytest.mark.slow
def test_dry_run_goes_through_every_step_without_changing_anything(airflow_home, topo_path) -> None:
    from tests.support.airflow import load_dag

    run = load_dag("dr_failover").test(run_conf={"reason": "quarterly drill", "dry_run": True})
    assert run.state == "success"
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["approval"].state == "skipped" and tis["promote_cold"].state == "skipped"
    assert tis["report"].state == "success"
    assert tis["fence_hot"].xcom_pull(task_ids="fence_hot")["status"] == "planned"
    question = tis["approval_question"].xcom_pull(task_ids="approval_question")
    assert question.startswith("**Promote cold** (failover run `failover-") and "**Recovery point" in question
    assert "**Metadata lint**:" in question and "| signal | safe time | basis |" in question
    topo = load_topology(topo_path)
    assert fence_of(topo)["fencing"]["epoch"] == 0 and fence_of(topo)["active"] is None
    run_id = tis["start"].xcom_pull(task_ids="start")
    row = Ledger.open(topo.ledger.url).failover_run(run_id)
    assert row["reason"] == "quarterly drill" and row["execute"] == 0 and row["status"] == "succeeded"


def _give_up_waiting(dag_id: str) -> int:
    """Fail the parked approval in the metadata DB: ``dag.test()`` waits for a HITL answer without
    a time limit (it runs no timeout sweep) and pytest-timeout cannot interrupt it, so without
    this a lost answer would stall the whole suite instead of failing one test."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    failed = 0
    with create_session() as session:
        for ti in session.query(TaskInstance).filter(TaskInstance.dag_id == dag_id,
                                                     TaskInstance.state == TaskInstanceState.AWAITING_INPUT):
            ti.state = TaskInstanceState.FAILED
            failed += 1
    return failed


def _approve_when_asked(api, dag_id: str, stop: threading.Event, answered: list, choice: str = "Approve",
                        deadline_s: float = 300) -> None:
    """Answer the approval through the HITL REST API, as a human in the UI would, once the task is
    parked (``awaiting_input``): the question is listed as soon as the operator writes it, but an
    answer given before the task parks is lost on Airflow's SQLite metadata DB (the park does not
    see it and nothing resumes the task; seen in CI: ``dag.test()`` waited 85 minutes). Any failed
    call (the api-server busy) is retried until ``stop``: a thread that died on one error would
    leave ``dag.test()`` waiting for the answer for ever. Until the run ends — answered or not —
    after ``deadline_s`` a parked approval is failed instead (the test then fails, showing
    ``answered``)."""
    give_up = time.monotonic() + deadline_s
    done = False
    while not stop.is_set():
        if time.monotonic() > give_up:  # until the run ends: the approval may not be parked yet
            if _give_up_waiting(dag_id):
                answered.append({"error": f"still waiting for an answer after {deadline_s:g}s: approval failed"})
            time.sleep(1)
            continue
        if done:  # answered: watch the run until it ends
            time.sleep(1)
            continue
        try:
            headers = {"Authorization": f"Bearer {api.token()}", "Content-Type": "application/json"}
            req = urllib.request.Request(f"{api.url}/api/v2/dags/~/dagRuns/~/hitlDetails?dag_id_pattern={dag_id}",
                                         headers=headers)
            with urllib.request.urlopen(req, timeout=10) as r:
                details = json.loads(r.read())["hitl_details"]
            for d in details:
                ti = d["task_instance"]
                if d.get("response_received") or ti["task_id"] != "approval" or ti.get("state") != "awaiting_input":
                    continue
                url = (f"{api.url}/api/v2/dags/{ti['dag_id']}/dagRuns/{ti['dag_run_id']}/taskInstances/"
                       f"{ti['task_id']}/{ti['map_index']}/hitlDetails")
                body = json.dumps({"chosen_options": [choice], "params_input": {}}).encode()
                with urllib.request.urlopen(urllib.request.Request(url, data=body, method="PATCH", headers=headers),
                                            timeout=10) as r:
                    answered.append({**json.loads(r.read()), "asked": d.get("body"), "subject": d.get("subject")})
                done = True
                break
        except Exception as exc:  # noqa: BLE001 - retried; shown if the test fails
            answered.append({"error": f"{type(exc).__name__}: {exc}"})
        time.sleep(1)


def _drain_once_fenced(topo, world, stop: threading.Event, drained_at: list) -> None:
    """The HBase queue drains only some seconds after the hot cluster was fenced: the peer is
    enabled again through HBase's Admin API (``drained_at``: that moment; nothing can ship before
    it) and the real replication ships the rows to cold."""
    while not stop.is_set():
        if fence_of(topo)["fencing"]["epoch"] == 1:
            time.sleep(3)
            drained_at.append(time.time())
            world.drain()
            return
        time.sleep(0.3)


@pytest.mark.slow
def test_executed_failover_waits_for_drain_and_for_approval_given_through_the_api(
        airflow_home, api_server, tmp_path, hbase_worlds, monkeypatch) -> None:
    from tests.support.airflow import load_dag

    # the approver list names the Airflow user (all-admins mode: Anonymous) as a plain name: it matches airflow:<user> (issue 20 #14)
    # (a real drain takes the shipping's own time: 120 s for the sensor, not the 20 s default)
    path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1"}],
                          failover={"approvers": ["Anonymous", "os:someone-else"], "drain_timeout_s": 120},
                          hbase_clusters=hbase_worlds.clusters)
    topo = load_topology(path)
    world = hbase_worlds(topo, lagging=True)  # rows put on hot with the peer disabled
    monkeypatch.setenv("DRT_CONFIG", str(path))
    topo_path = path
    stop, answered, drained_at = threading.Event(), [], []
    t = threading.Thread(target=_approve_when_asked, args=(api_server, "dr_failover", stop, answered), daemon=True)
    t.start()
    d = threading.Thread(target=_drain_once_fenced, args=(topo, world, stop, drained_at), daemon=True)
    d.start()
    try:
        run = load_dag("dr_failover").test(run_conf={"reason": "site A flooded", "dry_run": False})
    finally:
        stop.set()
        t.join(15)
        d.join(15)
    assert answered and answered[-1].get("chosen_options") == ["Approve"], answered
    # the approver saw what is approved: the recovery point, its age, the limiting signal, safe times
    asked = answered[-1]["asked"]
    assert re.search(r"\*\*Recovery point \d{4}-\d\d-\d\dT[^*]+\*\* — RPO \d+s, limited by \*\*hbase 1\*\*; "
                     r"gate verdict GO\.", asked), asked
    assert "| hbase 1 | 20" in asked and "Approving makes the cold cluster the active one." in asked
    assert run.state == "success"
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["promote_cold"].state == "success"
    topo = load_topology(topo_path)
    snap = fence_of(topo)
    assert snap["active"]["cluster"] == "cold" and snap["fencing"]["epoch"] == 1
    run_id = tis["start"].xcom_pull(task_ids="start")
    ledger = Ledger.open(topo.ledger.url)
    assert ledger.failover_run(run_id)["status"] == "succeeded"
    drain = next(e for e in ledger.audit_events(run_id=run_id) if e["action"] == "wait_drain" and e["status"] == "done")
    assert drained_at and drain["at"] >= drained_at[0]  # the sensor waited for the queue to drain
    approval = [e for e in ledger.audit_events(run_id=run_id) if e["action"] == "approval"]
    assert approval and approval[-1]["status"] == "done" and approval[-1]["actor"] == "airflow:Anonymous"


def add_db_connection(conn_id: str, conn_type: str = "generic", **fields: str) -> None:
    """A connection stored in the Airflow metadata DB (not an AIRFLOW_CONN_* variable)."""
    import os
    import subprocess
    import sys

    args = [sys.executable, "-m", "airflow", "connections", "add", conn_id, "--conn-type", conn_type]
    for k, v in fields.items():
        args += [f"--conn-{k}", v]
    r = subprocess.run(args, capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.slow
def test_rejected_through_the_api_is_audited_and_nothing_is_promoted(
        airflow_home, api_server, tmp_path, hbase_worlds, monkeypatch) -> None:
    """The fencing ZooKeeper's connection exists only in Airflow's metadata DB: the whole failover
    path resolves it through Airflow's connection API. The approver rejects through the HITL API."""
    from tests.support.airflow import load_dag

    add_db_connection("zk_failover_db")
    path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1"}], zk_conn_id="zk_failover_db",
                          hbase_clusters=hbase_worlds.clusters)
    topo = load_topology(path)
    hbase_worlds(topo, lagging=False)
    monkeypatch.setenv("DRT_CONFIG", str(path))
    stop, answered = threading.Event(), []
    t = threading.Thread(target=_approve_when_asked, args=(api_server, "dr_failover", stop, answered, "Reject"),
                         daemon=True)
    t.start()
    try:
        run = load_dag("dr_failover").test(run_conf={"reason": "drill, then rejected", "dry_run": False})
    finally:
        stop.set()
        t.join(15)
    assert answered and answered[-1].get("chosen_options") == ["Reject"], answered
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["kafka_apply"].state == "skipped" and tis["promote_cold"].state == "skipped"
    assert fence_of(topo)["active"] is None  # nothing promoted
    run_id = tis["start"].xcom_pull(task_ids="start")
    events = Ledger.open(topo.ledger.url).audit_events(run_id=run_id)
    rejected = [e for e in events if e["action"] == "approval" and e["status"] == "rejected"]
    assert len(rejected) == 1 and rejected[0]["actor"].startswith("airflow:") and rejected[0]["at"] > 0
    assert Ledger.open(topo.ledger.url).failover_run(run_id)["status"] == "aborted"
