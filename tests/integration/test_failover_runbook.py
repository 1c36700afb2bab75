"""The runbook on the real test services: a full executed failover, a dry run, a rejection, and a
run killed mid-way (SIGKILL) then resumed without repeating finished steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dr_toolkit.failover.runbook import STEPS, Runbook
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.client import connect
from dr_toolkit.zk.fencing import Fence
from tests.integration.test_failover_gate import SERVER, WAL_NEW, WAL_OLD
from tests.support.fixtures_failover import drt, write_topology

pytestmark = pytest.mark.integration


def hbase_world(topo, *, lagging: bool) -> None:
    from dr_toolkit.hbase.encoding import Layout, encode_position
    from dr_toolkit.hbase.peers import add_peer

    ep = topo.hot.zookeeper
    with connect(ep) as zk:
        add_peer(zk, "1", topo.cold.zookeeper.cluster_key, znode_parent=ep.hbase_znode_parent)
        lay = Layout(ep.hbase_znode_parent)
        q = f"{lay.queues}/{SERVER}/1"
        zk.ensure_path(f"{lay.rs}/{SERVER}")
        zk.ensure_path(q)
        zk.create(f"{q}/{WAL_NEW}", encode_position(5))
        if lagging:
            zk.create(f"{q}/{WAL_OLD}", encode_position(1))


def hbase_drain(topo) -> None:
    from dr_toolkit.hbase.encoding import Layout

    ep = topo.hot.zookeeper
    with connect(ep) as zk:
        zk.delete(f"{Layout(ep.hbase_znode_parent).queues}/{SERVER}/1/{WAL_OLD}")


def fence_of(topo) -> dict:
    ep = topo.cold.zookeeper
    with connect(ep) as zk:
        return Fence(zk, ep.dr_root).snapshot()


@pytest.fixture
def kafka_world(kafka_hot, kafka_cold):
    from tests.support.fixtures_kafka import (
        Rec,
        commit_after_consuming,
        create_topic,
        mirror,
        produce,
        unique,
    )

    topic, group = unique("orders"), unique("billing")
    for addr in (kafka_hot.address, kafka_cold.address):
        create_topic(addr, topic, 1)
    produce(kafka_hot.address, topic, 0, [Rec(f"v{i}".encode(), 1_700_000_000_000 + i, b"k") for i in range(5)])
    mirror(kafka_hot.address, kafka_cold.address, topic, 0, shift=3)
    commit_after_consuming(kafka_hot.address, group, topic, {0: 4})
    return {"hot": kafka_hot.address, "cold": kafka_cold.address, "topic": topic, "group": group}


@pytest.mark.slow
def test_full_failover_with_execute_ends_with_cold_active_offsets_applied_and_audit_complete(
        tmp_path, zk_server, kafka_world) -> None:
    from tests.support.fixtures_kafka import committed

    path = write_topology(tmp_path, zk=zk_server.address, kafka_hot=kafka_world["hot"], kafka_cold=kafka_world["cold"],
                          hbase=[{"name": "hb", "peer_id": "1"}],
                          kafka=[{"name": "stream", "topics": [kafka_world["topic"]], "groups": [kafka_world["group"]]}])
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    hbase_world(topo, lagging=False)
    asked = []
    rb = Runbook.start(topo, ledger, reason="datacenter A lost power", execute=True,
                       approver=lambda req: asked.append(req) or True, who="alice@ops")
    out = rb.run()
    assert out["status"] == "succeeded", out
    assert [s["name"] for s in out["steps"]] == list(STEPS)
    assert all(s["status"] == "done" for s in out["steps"]), out["steps"]
    assert asked and asked[0]["cold"] == "cold" and asked[0]["recovery_point"]

    snap = fence_of(topo)
    assert snap["active"]["cluster"] == "cold" and snap["active"]["epoch"] == 1
    assert snap["fencing"]["fenced_cluster"] == "hot" and snap["read_only"] == ["hot"]
    # the hot group had consumed 4 of 5 records; on cold the mirror sits after 3 unrelated records
    assert committed(kafka_world["cold"], kafka_world["group"], kafka_world["topic"], 1) == {0: 3 + 4}

    events = ledger.audit_events(run_id=rb.run_id, component="failover")
    done = [e["action"] for e in events if e["status"] == "done"]
    assert done == list(STEPS)
    assert all(e["actor"] == "alice@ops" for e in events)
    fence_evt = next(e for e in events if e["action"] == "fence_hot" and e["status"] == "done")
    assert fence_evt["before_state"]["fencing"]["epoch"] == 0 and fence_evt["after_state"]["fencing"]["epoch"] == 1
    promote = next(e for e in events if e["action"] == "promote_cold" and e["status"] == "done")
    assert promote["before_state"]["active"] is None and promote["after_state"]["active"]["cluster"] == "cold"
    assert ledger.failover_run(rb.run_id)["status"] == "succeeded"
    report = json.loads((tmp_path / "reports" / f"{rb.run_id}.json").read_text())
    assert report["gate"]["verdict"] == "GO" and report["run"]["reason"] == "datacenter A lost power"
    assert "GO" in (tmp_path / "reports" / f"{rb.run_id}.html").read_text()

    # resuming a finished run repeats nothing
    again = Runbook.resume(topo, ledger, rb.run_id, approver=lambda req: pytest.fail("asked twice")).run()
    assert again["status"] == "succeeded"
    assert fence_of(topo)["fencing"]["epoch"] == 1
    assert [e["action"] for e in ledger.audit_events(run_id=rb.run_id, component="failover")
            if e["status"] == "done"] == list(STEPS)


def test_dry_run_changes_nothing_and_says_what_it_would_do(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}])
    topo = load_topology(path)
    hbase_world(topo, lagging=True)
    r = drt("--json", "failover", "run", "--reason", "drill", config=path)
    doc = json.loads(r.stdout)
    steps = {s["name"]: s for s in doc["steps"]}
    assert doc["dry_run"] is True and set(steps) == set(STEPS)
    assert "would bump the fencing epoch 0 -> 1" not in json.dumps(doc)  # detail stays in the ledger
    assert steps["wait_drain"]["status"] == "planned" and "SizeOfLogQueue=1" in steps["wait_drain"]["message"]
    assert steps["promote_cold"]["message"] == "would promote cold"
    snap = fence_of(topo)
    assert snap == {"fencing": {"epoch": 0, "fenced_cluster": None, "at": None, "by": None}, "active": None,
                    "read_only": []}
    ledger = Ledger.open(topo.ledger.url)
    assert all(e["dry_run"] for e in ledger.audit_events(run_id=doc["run_id"]))


def test_rejected_approval_aborts_before_promotion(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}])
    topo = load_topology(path)
    hbase_world(topo, lagging=False)
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "failover", "run",
                        "--execute", "--reason", "test"], input="hot\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Type the cold cluster's name" in r.stderr
    assert "approval" in r.stdout and "rejected" in r.stdout
    snap = fence_of(topo)
    assert snap["active"] is None and snap["fencing"]["epoch"] == 1  # fenced, never promoted


def _wait_for(pred, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def test_killed_mid_way_then_resumed_completes_without_repeating_finished_steps(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}],
                          failover={"drain_timeout_s": 120})
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    hbase_world(topo, lagging=True)  # the drain will wait for this queue
    proc = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "--json",
                             "failover", "run", "--execute", "--yes-i-am-sure", "--reason", "kill test"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        def waiting_for_drain():
            runs = ledger.failover_runs()
            if not runs:
                return None
            ev = [(e["action"], e["status"]) for e in ledger.audit_events(run_id=runs[0]["run_id"])]
            return runs[0]["run_id"] if ("wait_drain", "started") in ev else None

        run_id = _wait_for(waiting_for_drain)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert fence_of(topo)["fencing"]["epoch"] == 1 and fence_of(topo)["active"] is None

    hbase_drain(topo)
    r = drt("--json", "failover", "run", "--execute", "--resume", run_id, "--yes-i-am-sure", config=path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["run_id"] == run_id and [s["status"] for s in doc["steps"]] == ["done"] * len(STEPS)
    assert doc["steps"][0]["message"] == "done earlier in this run"
    snap = fence_of(topo)
    assert snap["fencing"]["epoch"] == 1  # the fence was not bumped again
    assert snap["active"]["cluster"] == "cold"
    events = ledger.audit_events(run_id=run_id, component="failover")
    assert [e["action"] for e in events if e["action"] == "fence_hot" and e["status"] == "started"] == ["fence_hot"]
    assert [e["action"] for e in events if e["status"] == "done"] == list(STEPS)


@pytest.mark.slow
@pytest.mark.spark
def test_executed_failover_runs_the_final_copy_and_verification(tmp_path, zk_server, spark) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}],
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}],
                          verify=[{"name": "orders", "source": "hdfs://hot/warehouse/orders",
                                   "target": "hdfs://cold/warehouse/orders", "key": ["id"], "format": "json"}])
    orders = tmp_path / "hot" / "warehouse" / "orders"
    orders.mkdir(parents=True)
    (orders / "part-0.json").write_text("".join(json.dumps({"id": i, "v": f"x{i}"}) + "\n" for i in range(20)))
    topo = load_topology(path)
    hbase_world(topo, lagging=False)
    ledger = Ledger.open(topo.ledger.url)
    # written after the last scheduled copy: only the runbook's final copy brings it over
    (orders / "part-1.json").write_text(json.dumps({"id": 99, "v": "late"}) + "\n")
    rb = Runbook.start(topo, ledger, reason="final copy test", execute=True, approver=lambda req: True)
    out = rb.run()
    assert out["status"] == "succeeded", out
    assert (tmp_path / "cold" / "warehouse" / "orders" / "part-1.json").read_text() == \
        (orders / "part-1.json").read_text()
    verify_evt = next(e for e in ledger.audit_events(run_id=rb.run_id) if e["action"] == "final_verify"
                      and e["status"] == "done")
    assert verify_evt["after_state"]["results"][0]["BADROWS"] == 0
    assert verify_evt["after_state"]["results"][0]["GOODROWS"] == 21
    assert ledger.verify_reports(name="orders", limit=1)[0]["badrows"] == 0


def test_drain_timeout_fails_the_step_and_a_resume_after_draining_completes(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}])
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    hbase_world(topo, lagging=True)
    rb = Runbook.start(topo, ledger, reason="timeout test", execute=True, approver=lambda req: True,
                       drain_timeout_s=1, poll_s=0.2)
    out = rb.run()
    assert out["status"] == "failed"
    steps = {s["name"]: s for s in out["steps"]}
    assert steps["fence_hot"]["status"] == "done" and steps["wait_drain"]["status"] == "failed"
    assert steps["wait_drain"]["message"].startswith("not drained after 1s: hbase 1:")
    assert steps["promote_cold"]["status"] == "pending" and fence_of(topo)["active"] is None
    assert ledger.failover_run(rb.run_id)["status"] == "failed"
    hbase_drain(topo)
    out = Runbook.resume(topo, ledger, rb.run_id, approver=lambda req: True).run()
    assert out["status"] == "succeeded" and fence_of(topo)["active"]["cluster"] == "cold"


def test_a_run_whose_fence_was_superseded_is_refused_by_the_writer_steps(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}])
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    hbase_world(topo, lagging=False)
    rb = Runbook.start(topo, ledger, reason="first operator", execute=True, approver=lambda req: True)
    assert rb.run(until="approval")["status"] == "running"
    # a second operator fences again (epoch 2) before the first one promotes
    other = Runbook.start(topo, ledger, reason="second operator", execute=True)
    assert other.run_step("fence_hot").status == "done"
    res = rb.run_step("promote_cold")
    assert res.status == "failed" and "stale fencing epoch 1" in (res.message or "")
    assert fence_of(topo)["active"] is None and fence_of(topo)["fencing"]["epoch"] == 2


def test_metadata_lint_findings_are_shown_to_the_approver(tmp_path, zk_server) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}],
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}])
    conf = tmp_path / "hot" / "warehouse" / "conf"
    conf.mkdir(parents=True)
    (conf / "core-site.xml").write_text("<value>hdfs://hot/warehouse</value>\n")
    topo = load_topology(path)
    hbase_world(topo, lagging=False)
    ledger = Ledger.open(topo.ledger.url)
    asked = []
    out = Runbook.start(topo, ledger, reason="lint", execute=True, approver=lambda r: asked.append(r) or False).run()
    assert out["status"] == "aborted"
    assert asked[0]["metadata_lint"].startswith("1 hot-cluster value(s) in replicated metadata, e.g. ")
    assert "core-site.xml:1 (hdfs://hot)" in asked[0]["metadata_lint"]
    assert fence_of(topo)["active"] is None
