"""The DAGs run by Airflow as deployed — scheduler, dag-processor, triggerer and api-server with the
LocalExecutor on PostgreSQL (tests/support/airflow_deployed.py), never ``dag.test()`` — on real
servers: ZooKeeper (the fence) and the two Kafka brokers (the mirror the failover waits for); the
HDFS policy's clusters are local roots. Everything is seen and done through the REST API:

1. a per-policy replication DAG on its own schedule (``* * * * *``): the scheduler creates the run
   by itself once the DAG is unpaused; its first try fails for a real reason (the policy's source
   directory does not exist yet), the directory is made, the retry (try 2) succeeds;
2. an executed dr_failover triggered through the API: the drain sensor is *deferred* to the
   triggerer while a Kafka topic has records the cold cluster lacks, resumes once they are
   mirrored; the approval is parked (``awaiting_input``) and answered through the HITL API; the
   run continues and promotes the cold cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from drt_demo.demo import ParkReported
from tests.support.airflow_deployed import AirflowDeployment, stray_processes
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow]

POLICY_DAG = "dr_hdfs_replication__wh"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, zk_server: Any, kafka_hot: Any, kafka_cold: Any, postgres: Any
          ) -> dict[str, Any]:
    from tests.support.fixtures_kafka import Rec, create_topic, produce, unique

    for b in (kafka_hot, kafka_cold, zk_server):
        if not b.running:
            b.start()
    tmp = tmp_path_factory.mktemp("deployed")
    topic = unique("orders")
    for addr in (kafka_hot.address, kafka_cold.address):
        create_topic(addr, topic, 1)
    # records on hot the cold cluster does not have yet: the failover's drain waits for them
    produce(kafka_hot.address, topic, 0, [Rec(f"v{i}".encode(), 1_700_000_000_000 + i, b"k") for i in range(5)])
    path = write_topology(tmp, zk=zk_server.address, kafka_hot=kafka_hot.address, kafka_cold=kafka_cold.address,
                          hdfs=[{"name": "wh", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"],
                                 "schedule": "* * * * *"}],
                          kafka=[{"name": "stream", "topics": [topic]}],
                          failover={"approvers": ["Anonymous"]})
    # the servers' time limits as a deployment would set them (the tests' 3 s are tight on two busy
    # cores shared by five Airflow processes: a late answer is a NO_GO signal, not a test of this)
    doc = yaml.safe_load(path.read_text())
    # the ledger on PostgreSQL, as deployed (docker-compose.yml): tasks, the triggerer and the test
    # write and read it from separate processes at once
    doc["ledger"]["url"] = postgres.create_database(f"drt_ledger_{topic.rsplit('-', 1)[1]}")
    # the retry 20 s after the first try fails (the default 60 s): the test makes the source between
    # the two, after it sees `up_for_retry`
    doc["policies"]["retry_delay_s"] = 20
    for c in doc["clusters"].values():
        c["zookeeper"].update(connect_timeout_s=15, call_timeout_s=15)
        c["kafka"]["timeout_s"] = 15
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    (tmp / "state").mkdir()
    return {"path": path, "tmp": tmp, "topic": topic, "hot": kafka_hot.address, "cold": kafka_cold.address}


@pytest.fixture(scope="module")
def airflow(postgres: Any, world: dict[str, Any]) -> Iterator[AirflowDeployment]:
    dep = AirflowDeployment(postgres, extra_env={"DRT_CONFIG": str(world["path"]),
                                                 "DRT_STATE_DIR": str(world["tmp"] / "state")})
    try:
        dep.start()
        yield dep
    finally:
        home = str(dep.home)
        dep.stop()
        left = stray_processes(home)
        assert not left, f"Airflow processes left after stop: {left}"


def _ti(af: AirflowDeployment, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
    return dict(af.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"))


def _state(af: AirflowDeployment, dag_id: str, run_id: str, task_id: str, *states: str) -> dict[str, Any] | None:
    ti = _ti(af, dag_id, run_id, task_id)
    if ti["state"] in ("failed", "upstream_failed") and "failed" not in states:
        raise AssertionError(f"{dag_id}/{run_id}/{task_id} {ti['state']}:\n{_run_report(af, dag_id, run_id)}\n"
                             f"{af.logs(60)}")
    return ti if ti["state"] in states else None


def _run_report(af: AirflowDeployment, dag_id: str, run_id: str) -> str:
    """Every task's state in the run, and the log of each failed one (what a failing test shows)."""
    out = []
    for ti in af.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]:
        out.append(f"{ti['task_id']}: {ti['state']} (try {ti['try_number']})")
        if ti["state"] == "failed":
            try:
                out.append(af.task_log(dag_id, run_id, ti["task_id"], int(ti["try_number"]))[-4000:])
            except OSError as exc:
                out.append(f"(no log: {exc})")
    return "\n".join(out)


def _unpause(af: AirflowDeployment, dag_id: str) -> None:
    af.wait_for(f"DAG {dag_id} parsed by the dag-processor", lambda: af.api("GET", f"/dags/{dag_id}"), timeout=180)
    af.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})


@pytest.mark.timeout(900)  # setup + call took 411 s at load 20 on 2 cores (pyproject's 600 s: too close)
def test_scheduler_runs_the_dags_with_a_retry_a_deferred_sensor_and_an_approval(
        airflow: AirflowDeployment, world: dict[str, Any]) -> None:
    from tests.integration.test_failover_runbook import fence_of
    from tests.support.fixtures_kafka import mirror

    af = airflow
    t0 = time.monotonic()

    def phase(name: str) -> None:  # printed (shown with -s or when the test fails): where the time goes
        print(f"[deployed airflow] {time.monotonic() - t0:6.1f}s {name}", flush=True)

    phase(f"deployment up: {af.timings}")
    assert af.api("GET", "/monitor/health")["scheduler"]["status"] == "healthy"
    assert af.env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor" and "postgresql" in af.conn

    # 1. the policy's DAG on its schedule: no run is triggered — the scheduler creates it
    _unpause(af, POLICY_DAG)
    run = af.wait_for("the scheduled run of the policy DAG", lambda: next(
        (r for r in af.api("GET", f"/dags/{POLICY_DAG}/dagRuns")["dag_runs"]), None), timeout=150)
    assert run["run_type"] == "scheduled", run
    phase("scheduled run created")
    rid = run["dag_run_id"]
    first = af.wait_for("the first try failed, a retry due",
                        lambda: _state(af, POLICY_DAG, rid, "replicate", "up_for_retry", "failed"), timeout=150)
    assert first["state"] == "up_for_retry" and first["try_number"] == 1, first
    assert "the source hdfs://hot/data does not exist" in af.task_log(POLICY_DAG, rid, "replicate", 1)
    src = Path(world["tmp"]) / "hot" / "data"
    phase("first try failed")
    src.mkdir(parents=True)
    for i in range(3):
        (src / f"part-{i}.csv").write_text(f"{i},row\n")
    done = af.wait_for("the retry succeeded", lambda: _state(af, POLICY_DAG, rid, "replicate", "success"),
                       timeout=150)
    assert done["try_number"] == 2, done
    phase("retry succeeded")
    assert sorted(p.name for p in (Path(world["tmp"]) / "cold" / "data").iterdir()) == [
        "part-0.csv", "part-1.csv", "part-2.csv"]
    topo = load_topology(world["path"])
    assert [r["status"] for r in Ledger.open(topo.ledger.url).runs(policy="wh")][-1] == "succeeded"
    # paused: the fence below refuses its next runs. A run the scheduler started meanwhile (the
    # next minute's, queued behind max_active_runs=1) must end first: its copy would hold the
    # policy's lease when the failover's final copy takes it
    af.api("PATCH", f"/dags/{POLICY_DAG}", {"is_paused": True})
    af.wait_for("no task of the policy DAG queued or running", lambda: not af.api(
        "GET", f"/dags/{POLICY_DAG}/dagRuns/~/taskInstances?state=queued&state=running")["task_instances"],
        timeout=120)

    # 2. an executed failover: the drain deferred on the triggerer, the approval parked and answered
    _unpause(af, "dr_failover")
    fo = af.api("POST", "/dags/dr_failover/dagRuns",
                {"logical_date": None, "conf": {"reason": "deployed drill", "dry_run": False}})
    frid = fo["dag_run_id"]
    phase("failover triggered")
    waiting = af.wait_for("wait_drain deferred", lambda: _state(af, "dr_failover", frid, "wait_drain", "deferred"),
                          timeout=180)
    assert waiting["trigger"]["classpath"] == "drt_airflow.triggers.DrainedTrigger", waiting
    assert fence_of(topo)["fencing"]["epoch"] == 1  # fenced before the drain
    time.sleep(2)  # still deferred: the topic's records are not on cold
    assert _ti(af, "dr_failover", frid, "wait_drain")["state"] == "deferred"
    assert af.wait_for("the triggerer running the drain trigger", lambda: _ti(
        af, "dr_failover", frid, "wait_drain").get("triggerer_job"), timeout=60)
    mirror(world["hot"], world["cold"], world["topic"], 0)  # the mirror catches up
    phase("deferred seen, mirrored")
    af.wait_for("wait_drain resumed and done", lambda: _state(af, "dr_failover", frid, "wait_drain", "success"),
                timeout=120)

    parked = af.wait_for("the approval parked", lambda: _state(af, "dr_failover", frid, "approval",
                                                               "awaiting_input"), timeout=360)
    assert parked["try_number"] == 1
    # answered only once the scheduler has taken in the parking worker's exit: an answer before it
    # can fail the resumed task in Airflow 3.3 (drt_demo.demo.ParkReported says why)
    scheduler_log = next(p.log_path for p in af.procs if p.name == "airflow-scheduler")
    park_seen = ParkReported(scheduler_log, "dr_failover", "approval")
    af.wait_for("the scheduler taking in the parking worker's exit", lambda: park_seen(frid), timeout=120)
    phase("approval parked")
    assert fence_of(topo)["active"] is None  # nothing promoted before the answer
    assert _ti(af, "dr_failover", frid, "promote_cold")["state"] in (None, "scheduled", "queued", "none")
    details = af.api("GET", "/dags/~/dagRuns/~/hitlDetails?dag_id_pattern=dr_failover")["hitl_details"]
    mine = [d for d in details if d["task_instance"]["dag_run_id"] == frid]
    assert len(mine) == 1 and not mine[0]["response_received"] and "**Promote cold**" in mine[0]["body"], mine
    answer = af.api("PATCH", f"/dags/dr_failover/dagRuns/{frid}/taskInstances/approval/-1/hitlDetails",
                    {"chosen_options": ["Approve"], "params_input": {}})
    assert answer["chosen_options"] == ["Approve"], answer

    af.wait_for("the failover run succeeded", lambda: af.api(
        "GET", f"/dags/dr_failover/dagRuns/{frid}")["state"] == "success"
        or _state(af, "dr_failover", frid, "report", "success"), timeout=300)
    assert _ti(af, "dr_failover", frid, "promote_cold")["state"] == "success"
    phase("failover run done")
    snap = fence_of(topo)
    assert snap["active"]["cluster"] == "cold" and snap["fencing"]["fenced_cluster"] == "hot"
    events = Ledger.open(topo.ledger.url).audit_events(component="failover")
    appr = [e for e in events if e["action"] == "approval" and e["status"] == "done"]
    assert appr and appr[-1]["after_state"]["approved"] is True, appr
