"""The runbook on the real test services (a real HBase 2.6 pair hot → cold): a full executed failover, a dry run that writes nothing but
audit rows, decisions (reject, approvers, lint acknowledgements) audited, runs killed mid-way and at
approval then resumed (the gate re-run, never an old GO), abort after the fence."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.failover.runbook import STEPS, Runbook, Step, StepStatus
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.client import connect
from dr_toolkit.zk.fencing import Fence
from tests.support.fixtures_failover import (
    assert_failover_report_in_chromium,
    drt,
    write_topology,
    znode_tree,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

ALL = [s.value for s in STEPS]
ACCESS = Access.from_env()  # built at the edge, as the CLI and the Airflow hook build theirs
__all__ = ["fence_of"]  # used by tests/dags/test_dag_failover.py


def fence_of(topo) -> dict:
    ep = topo.cold.zookeeper
    with connect(ep, credentials=None) as zk:
        return Fence(zk, ep.dr_root).snapshot()


_CLUSTERS: list[tuple] = []


@pytest.fixture
def worlds(hbase_worlds):
    """The shared ``hbase_worlds`` (the real HBase pair as the runbook's worlds, ``worlds(topo,
    lagging=...)``); ``simple`` writes topologies pointing at its clusters."""
    _CLUSTERS[:] = [hbase_worlds.clusters]
    return hbase_worlds


def simple(tmp_path, zk_server, **kw):
    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}],
                          hbase_clusters=_CLUSTERS[0], **kw)
    return path, load_topology(path)


@pytest.fixture
def kafka_world(kafka_hot, kafka_cold):
    """A topic on the real brokers copied hot → cold directly (not by MirrorMaker 2) after 3
    cold-only records: the test asserts the exact cold offset the runbook applies (3 + 4)."""
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
def test_full_failover_with_execute_applies_offsets_only_after_gate_and_approval(
        tmp_path, zk_server, kafka_world, worlds) -> None:
    from tests.support.fixtures_kafka import committed

    path = write_topology(tmp_path, zk=zk_server.address, kafka_hot=kafka_world["hot"], kafka_cold=kafka_world["cold"],
                          hbase_clusters=worlds.clusters,
                          hbase=[{"name": "hb", "peer_id": "1"}],
                          kafka=[{"name": "stream", "topics": [kafka_world["topic"]], "groups": [kafka_world["group"]]}])
    topo = load_topology(path)
    ledger = open_ledger(topo, Access.from_env())
    worlds(topo)
    asked = []

    def approve(req):
        # at approval time nothing has been written on cold for the group yet
        asked.append((req, committed(kafka_world["cold"], kafka_world["group"], kafka_world["topic"], 1)))
        return True

    rb = Runbook.start(topo, ledger, access=ACCESS, reason="datacenter A lost power", execute=True, approver=approve,
                       who="alice@ops")
    out = rb.run()
    assert out["status"] == "succeeded", [(s["name"], s["status"], s.get("message")) for s in out["steps"]]
    assert [s["name"] for s in out["steps"]] == ALL
    assert all(s["status"] == "done" for s in out["steps"]), out["steps"]
    req, cold_then = asked[0]
    assert req["cold"] == "cold" and req["recovery_point"] and req["gate"]["verdict"] == "GO"
    assert cold_then.get(0, -1001) < 0  # no commit on cold before the approval
    assert committed(kafka_world["cold"], kafka_world["group"], kafka_world["topic"], 1) == {0: 3 + 4}

    snap = fence_of(topo)
    assert snap["active"]["cluster"] == "cold" and snap["active"]["epoch"] == 1
    assert snap["fencing"]["fenced_cluster"] == "hot" and snap["read_only"] == ["hot"]
    events = ledger.audit_events(run_id=rb.run_id, component="failover")
    assert [e["action"] for e in events if e["status"] == "done"] == ALL
    assert all(e["actor"] == "alice@ops" for e in events)
    appr = next(e for e in events if e["action"] == "approval" and e["status"] == "done")
    assert appr["after_state"]["approved"] is True and appr["after_state"]["by"] == "alice@ops"
    assert appr["at"] and appr["after_state"]["at"]
    kafka_evts = [e for e in ledger.audit_events(run_id=rb.run_id) if e["component"] == "kafka"]
    remap_at = min(e["at"] for e in kafka_evts if e["action"] == "remap")
    apply_at = min(e["at"] for e in kafka_evts if e["action"] == "apply_offsets")
    assert remap_at < appr["at"] < apply_at
    report = json.loads((tmp_path / "reports" / f"{rb.run_id}.json").read_text())
    assert report["gate"]["verdict"] == "GO" and report["decision"]["by"] == "alice@ops"
    checks = [c for c in ledger.gate_checks() if c["source"] == f"runbook:{rb.run_id}"]
    assert checks and all(c["actor"] == "alice@ops" for c in checks)  # the executed run's gates are history
    assert "Safe time per signal" in (tmp_path / "reports" / f"{rb.run_id}.html").read_text()

    again = Runbook.resume(topo, ledger, rb.run_id, access=ACCESS,
                           approver=lambda req: pytest.fail("asked twice")).run()
    assert again["status"] == "succeeded" and fence_of(topo)["fencing"]["epoch"] == 1


def test_the_report_holds_the_remap_the_recovery_point_and_its_whole_audit_trail_styled(
        tmp_path, zk_server, kafka_world) -> None:
    """The failover report (real ZooKeeper and Kafka pair): per group and partition the offset on hot
    before the remap, on cold after it, the method and may-reread; the recovery point promoted at
    (the same as the active-cluster znode's), its RPO and limiting signal; an audit trail that ends
    with the report's own event; and, in real Chromium, a styled page with the remap table."""
    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address, kafka_hot=kafka_world["hot"], kafka_cold=kafka_world["cold"],
                          kafka=[{"name": "stream", "topics": [kafka_world["topic"]], "groups": [kafka_world["group"]]}])
    topo = load_topology(path)
    ledger = open_ledger(topo, ACCESS)
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="report drill", execute=True, approver=lambda req: True,
                       who="alice@ops")
    out = rb.run()
    assert out["status"] == "succeeded", [(s["name"], s["status"], s.get("message")) for s in out["steps"]]
    report = json.loads((tmp_path / "reports" / f"{rb.run_id}.json").read_text())
    remap = [(r["group"], r["topic"], r["partition"], r["before"], r["after"], r["may_reread"], r["applied"])
             for r in report["kafka_remap"]]
    assert remap == [(kafka_world["group"], kafka_world["topic"], 0, 4, 3 + 4, 0, "applied")], report["kafka_remap"]
    rec = report["recovery"]
    assert rec["recovery_point"] and rec["recovery_point"] == fence_of(topo)["active"]["recovery_point"]
    assert rec["rpo_s"] is not None and rec["limited_by"] in {f"{s['component']} {s['name']}"
                                                               for s in report["gate"]["signals"]}
    assert report["outcome"] == "promoted" and [s["status"] for s in report["steps"]] == ["done"] * len(ALL)
    assert report["audit"][-1]["action"] == "report" and report["audit"][-1]["status"] == "done"
    assert report["audit_through"]["action"] == "report" and report["audit_through"]["events"] == len(report["audit"])
    assert {e["action"] for e in report["audit"]} >= {*ALL, "remap", "apply_offsets"}
    dom = assert_failover_report_in_chromium(tmp_path / "reports" / f"{rb.run_id}.html", tmp_path,
                                             banner=(0x1A, 0x7F, 0x37), remap_rows=1)  # green: promoted
    assert "Safe time per signal" in dom and "limits the recovery point" in dom and "(the report itself)" in dom


def _znodes(ep, root: str) -> dict[str, bytes]:
    with connect(ep, credentials=None) as zk:
        return znode_tree(zk, root)


def _committed_once_ready(address: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, asked again while the broker's group coordinator is not ready
    (a broker started for this session answers NOT_COORDINATOR until it is)."""
    from confluent_kafka import KafkaError, KafkaException

    from tests.support.fixtures_kafka import committed

    deadline = time.monotonic() + 60
    while True:
        try:
            return committed(address, group, topic, 1)
        except KafkaException as exc:
            retriable = exc.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                               KafkaError.COORDINATOR_NOT_AVAILABLE)
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_dry_run_writes_nothing_but_audit_rows(tmp_path, zk_server, kafka_world, worlds) -> None:
    """Nothing in the ledger but the journal (every other table row for row, whatever writes it: the
    dry run is rolled back in the ledger's transactions), nothing in ZooKeeper (hot's and cold's),
    nothing on the clusters (cold's HDFS target, cold's Kafka group offsets)."""
    from tests.integration.test_failover_dry_run_ledger import JOURNAL, rows

    path = write_topology(tmp_path, zk=zk_server.address, kafka_hot=kafka_world["hot"], kafka_cold=kafka_world["cold"],
                          hbase_clusters=worlds.clusters,
                          hbase=[{"name": "hb", "peer_id": "1"}],
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}],
                          kafka=[{"name": "stream", "topics": [kafka_world["topic"]], "groups": [kafka_world["group"]]}])
    (tmp_path / "hot" / "warehouse").mkdir(parents=True)
    (tmp_path / "hot" / "warehouse" / "a.txt").write_text("a")
    topo = load_topology(path)
    worlds(topo, lagging=True)
    ledger = open_ledger(topo, ACCESS)
    zk_before = {role: _znodes(c.zookeeper, c.zookeeper.dr_root) for role, c in (("hot", topo.hot), ("cold", topo.cold))}
    tables = {t: v for t, v in rows(ledger).items() if t not in JOURNAL}
    r = drt("--json", "failover", "run", "--reason", "drill", config=path)
    doc = json.loads(r.stdout)
    steps = {s["name"]: s for s in doc["steps"]}
    assert doc["dry_run"] is True and set(steps) == set(ALL)
    assert steps["wait_drain"]["status"] == "planned" and "bytes left to ship" in steps["wait_drain"]["message"]
    assert steps["final_copy"]["message"] == "dry-run copy plan"
    assert steps["promote_cold"]["message"] == "would promote cold"
    assert fence_of(topo) == {"fencing": {"epoch": 0, "fenced_cluster": None, "at": None, "by": None},
                              "active": None, "direction": None, "read_only": []}
    assert {role: _znodes(c.zookeeper, c.zookeeper.dr_root)
            for role, c in (("hot", topo.hot), ("cold", topo.cold))} == zk_before == {"hot": {}, "cold": {}}
    assert ledger.latest_checkpoint(kafka_world["group"]) == []  # no checkpoint rows
    assert ledger.watermarks() == []  # no proven-drain or last-seen records either
    assert ledger.runs() == [] and ledger.verify_reports() == [] and ledger.gate_checks() == []
    assert {t: v for t, v in rows(ledger).items() if t not in JOURNAL} == tables
    assert all(e["dry_run"] for e in ledger.audit_events(run_id=doc["run_id"]))
    assert ledger.failover_run(doc["run_id"])["status"] == doc["status"] != "running"  # the run's record is written
    assert not (tmp_path / "cold" / "warehouse" / "a.txt").exists()
    assert _committed_once_ready(kafka_world["cold"], kafka_world["group"], kafka_world["topic"]).get(0, -1001) < 0


def test_rejection_typed_at_the_cli_is_audited_and_never_promotes(tmp_path, zk_server, worlds) -> None:
    path, topo = simple(tmp_path, zk_server)
    worlds(topo)
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "failover", "run",
                        "--execute", "--reason", "test"], input="hot\n", capture_output=True, text=True, timeout=120,
                       env={**os.environ, "DRT_ACTOR": "carol@ops"})
    assert r.returncode == 1, r.stderr
    assert "Type the cold cluster's name" in r.stderr
    assert "approval" in r.stdout and "rejected" in r.stdout
    snap = fence_of(topo)
    assert snap["active"] is None and snap["fencing"]["epoch"] == 1  # fenced, never promoted
    ev = [e for e in open_ledger(topo, Access.from_env()).audit_events(component="failover") if e["action"] == "approval"
          and e["status"] == "rejected"]
    # the decision is the login user's ($DRT_ACTOR is only a label: issue 20 #14)
    from dr_toolkit.failover.runbook import os_identity

    assert len(ev) == 1 and ev[0]["actor"] == os_identity() and ev[0]["after_state"]["approved"] is False


def _decision(ledger, run_id: str, status: str) -> dict | None:
    """The run's approval event with ``status``, as the ledger holds it (None when there is none)."""
    return next((e for e in ledger.audit_events(run_id=run_id, component="failover")
                 if e["action"] == "approval" and e["status"] == status), None)


def test_decision_api_restricts_approvers_and_audits_a_rejection(tmp_path, zk_server, worlds) -> None:
    path, topo = simple(tmp_path, zk_server, failover={"approvers": ["alice", "bob"]})
    worlds(topo)
    ledger = open_ledger(topo, ACCESS)
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="hitl", execute=True, who="airflow:dag")
    assert rb.run()["status"] == "waiting_approval"
    rb = Runbook.resume(topo, ledger, rb.run_id, access=ACCESS)
    with pytest.raises(ConfigError, match="'mallory' may not decide"):
        rb.record_decision(True, "mallory")
    assert _decision(ledger, rb.run_id, "done") is None
    res = rb.record_decision(False, "bob", "not during the sale")
    assert res.status == StepStatus.REJECTED
    ev = _decision(ledger, rb.run_id, "rejected")
    assert ev["actor"] == "bob" and ev["after_state"]["comment"] == "not during the sale" and ev["at"]
    with pytest.raises(ConfigError, match="already has a decision"):
        rb.record_decision(True, "alice")
    out = Runbook.resume(topo, ledger, rb.run_id, access=ACCESS).run()
    assert out["status"] == "aborted" and fence_of(topo)["active"] is None


def test_lint_findings_block_promotion_unless_each_is_acknowledged(tmp_path, zk_server, worlds) -> None:
    path, topo = simple(tmp_path, zk_server,
                        hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}])
    conf = tmp_path / "hot" / "warehouse" / "conf"
    conf.mkdir(parents=True)
    (conf / "core-site.xml").write_text("<value>hdfs://hot/warehouse</value>\n<v>hdfs://hot/x</v>\n")
    worlds(topo)
    ledger = open_ledger(topo, ACCESS)
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="lint", execute=True, who="alice")
    assert rb.run()["status"] == "waiting_approval"
    req = rb.approval_request()
    ids = [f["id"] for f in req["findings"]]
    assert len(ids) == 2 and ids[0].endswith("core-site.xml:1")
    with pytest.raises(ConfigError, match="1 metadata-lint finding"):
        rb.record_decision(True, "alice", acknowledged=ids[:1])
    res = rb.record_decision(True, "alice", "known: rewritten at start-up", acknowledged=ids)
    assert res.status == StepStatus.DONE
    assert _decision(ledger, rb.run_id, "done")["after_state"]["acknowledged"] == sorted(ids)
    out = Runbook.resume(topo, ledger, rb.run_id, access=ACCESS).run()
    assert out["status"] == "succeeded", [(s["name"], s["status"], s.get("message")) for s in out["steps"]]
    assert fence_of(topo)["active"]["cluster"] == "cold"


def _wait_for(pred, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def _events(ledger):
    runs = ledger.failover_runs()
    if not runs:
        return None, []
    return runs[0]["run_id"], [(e["action"], e["status"]) for e in ledger.audit_events(run_id=runs[0]["run_id"])]


def test_killed_mid_way_then_resumed_completes_without_repeating_finished_steps(tmp_path, zk_server, worlds) -> None:
    path, topo = simple(tmp_path, zk_server, failover={"drain_timeout_s": 120})
    ledger = open_ledger(topo, Access.from_env())
    w = worlds(topo, lagging=True)  # the drain will wait for this WAL
    proc = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "--json",
                             "failover", "run", "--execute", "--yes-i-am-sure", "--reason", "kill test"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        def waiting_for_drain():
            rid, ev = _events(ledger)
            return rid if ("wait_drain", "started") in ev else None

        run_id = _wait_for(waiting_for_drain)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert fence_of(topo)["fencing"]["epoch"] == 1 and fence_of(topo)["active"] is None

    w.drain()
    r = drt("--json", "failover", "run", "--execute", "--resume", run_id, "--yes-i-am-sure", config=path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["run_id"] == run_id and [s["status"] for s in doc["steps"]] == ["done"] * len(STEPS)
    assert doc["steps"][0]["message"] == "done earlier in this run"
    snap = fence_of(topo)
    assert snap["fencing"]["epoch"] == 1 and snap["active"]["cluster"] == "cold"
    events = ledger.audit_events(run_id=run_id, component="failover")
    assert [e["action"] for e in events if e["action"] == "fence_hot" and e["status"] == "started"] == ["fence_hot"]
    assert [e["action"] for e in events if e["status"] == "done"] == ALL


def test_killed_at_approval_then_resumed_after_a_new_write_reruns_the_gate(tmp_path, zk_server, worlds) -> None:
    """An earlier GO is never trusted: a write that hot accepted after the final gate (a region server
    that ignored the fence) must stop the promotion on resume, until it is shipped."""
    path, topo = simple(tmp_path, zk_server)
    ledger = open_ledger(topo, Access.from_env())
    w = worlds(topo)
    proc = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "failover", "run",
                             "--execute", "--reason", "approval kill"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        def at_approval():
            rid, ev = _events(ledger)
            return rid if ("approval", "started") in ev else None

        run_id = _wait_for(at_approval)
        os.killpg(proc.pid, signal.SIGKILL)  # killed while the operator was being asked
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert ("final_gate", "done") in _events(ledger)[1]
    w.lag(7)  # a new write on hot after the final gate said GO
    asked = []
    out = Runbook.resume(topo, ledger, run_id, access=ACCESS, approver=lambda req: asked.append(req) or True).run()
    assert out["status"] == "failed"
    steps = {s["name"]: s for s in out["steps"]}
    assert steps["approval"]["status"] == "failed" and "bytes left to ship" in steps["approval"]["message"]
    assert asked == [] and fence_of(topo)["active"] is None  # nobody was asked; nothing promoted
    w.drain()
    out = Runbook.resume(topo, ledger, run_id, access=ACCESS, approver=lambda req: asked.append(req) or True,
                         who="dave").run()
    assert out["status"] == "succeeded", [(s["name"], s["status"], s.get("message")) for s in out["steps"]]
    assert len(asked) == 1 and fence_of(topo)["active"]["cluster"] == "cold"
    promote = next(e for e in ledger.audit_events(run_id=run_id, component="failover")
                   if e["action"] == "kafka_apply" and e["status"] == "done")
    assert promote["after_state"]["gate"]["verdict"] == "GO"


def test_drain_timeout_fails_the_step_and_a_resume_after_draining_completes(tmp_path, zk_server, worlds) -> None:
    path, topo = simple(tmp_path, zk_server)
    ledger = open_ledger(topo, Access.from_env())
    w = worlds(topo, lagging=True)
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="timeout test", execute=True, approver=lambda req: True,
                       drain_timeout_s=1, poll_s=0.2)
    out = rb.run()
    assert out["status"] == "failed"
    steps = {s["name"]: s for s in out["steps"]}
    assert steps["fence_hot"]["status"] == "done" and steps["wait_drain"]["status"] == "failed"
    assert steps["wait_drain"]["message"].startswith("not drained after 1s: hbase 1:")
    assert steps["promote_cold"]["status"] == "pending" and fence_of(topo)["active"] is None
    w.drain()
    out = Runbook.resume(topo, ledger, rb.run_id, access=ACCESS, approver=lambda req: True).run()
    assert out["status"] == "succeeded" and fence_of(topo)["active"]["cluster"] == "cold"


def test_a_run_whose_fence_was_superseded_is_refused_by_the_writer_steps(tmp_path, zk_server, worlds) -> None:
    path, topo = simple(tmp_path, zk_server)
    ledger = open_ledger(topo, Access.from_env())
    worlds(topo)
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="first operator", execute=True, approver=lambda req: True)
    assert rb.run(until="approval")["status"] == "running"
    other = Runbook.start(topo, ledger, access=ACCESS, reason="second operator", execute=True)
    assert other.run_step("fence_hot").status == "done"
    res = rb.run_step("promote_cold")
    assert res.status == "failed" and "stale fencing epoch 1" in (res.message or "")
    assert fence_of(topo)["active"] is None and fence_of(topo)["fencing"]["epoch"] == 2


def test_abort_after_the_fence_lifts_it_audited_and_replication_runs_again(tmp_path, zk_server, worlds) -> None:
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.errors import FencedError

    path, topo = simple(tmp_path, zk_server,
                        hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}])
    (tmp_path / "hot" / "warehouse").mkdir(parents=True)
    (tmp_path / "hot" / "warehouse" / "a.txt").write_text("a")
    worlds(topo)
    ledger = open_ledger(topo, ACCESS)
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="abort test", execute=True)
    assert rb.run(until="wait_drain")["status"] == "running"
    assert fence_of(topo)["read_only"] == ["hot"]
    with pytest.raises(FencedError, match="replication into the cold cluster is stopped"):
        replicate_policy(topo, "wh", ledger, access=Access.from_env())
    r = drt("--json", "failover", "abort", rb.run_id, config=path)
    assert r.returncode == 2 and "needs a reason" in r.stderr
    r = drt("--json", "failover", "abort", rb.run_id, "--reason", "false alarm", config=path,
            env={"DRT_ACTOR": "erin@ops"})
    assert r.returncode == 0, r.stderr
    assert "lifted" in json.loads(r.stdout)["message"]
    snap = fence_of(topo)
    assert snap["fencing"]["epoch"] == 2 and snap["fencing"]["fenced_cluster"] is None and snap["read_only"] == []
    ev = next(e for e in ledger.audit_events(run_id=rb.run_id) if e["action"] == "abort")
    assert ev["actor"] == "erin@ops" and ev["after_state"]["reason"] == "false alarm"
    assert ev["before_state"]["fencing"]["epoch"] == 1
    assert ledger.failover_run(rb.run_id)["status"] == "aborted"
    assert replicate_policy(topo, "wh", ledger, access=Access.from_env())[0].ok  # scheduled replication runs again
    res = rb.run_step("promote_cold")  # the aborted run's writers hold a retired epoch
    assert res.status == "failed" and fence_of(topo)["active"] is None
    r = drt("--json", "failover", "run", "--execute", "--resume", rb.run_id, "--yes-i-am-sure", config=path)
    assert r.returncode == 2 and "was aborted" in r.stderr


def test_steps_are_exported_as_enums() -> None:
    assert [s.value for s in STEPS][:2] == ["fence_hot", "wait_drain"]
    assert Step.KAFKA_APPLY in STEPS and STEPS.index(Step.KAFKA_APPLY) > STEPS.index(Step.APPROVAL)
    assert STEPS.index(Step.KAFKA_OFFSETS) < STEPS.index(Step.FINAL_GATE)
    assert StepStatus.REJECTED == "rejected"


@pytest.mark.slow
@pytest.mark.spark
def test_executed_failover_runs_the_final_copy_and_verification(tmp_path, zk_server, spark, worlds) -> None:
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}],
                          hbase_clusters=worlds.clusters,
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}],
                          verify=[{"name": "orders", "source": "hdfs://hot/warehouse/orders",
                                   "target": "hdfs://cold/warehouse/orders", "key": ["id"], "format": "json"}])
    orders = tmp_path / "hot" / "warehouse" / "orders"
    orders.mkdir(parents=True)
    (orders / "part-0.json").write_text("".join(json.dumps({"id": i, "v": f"x{i}"}) + "\n" for i in range(20)))
    topo = load_topology(path)
    worlds(topo)
    ledger = open_ledger(topo, Access.from_env())
    (orders / "part-1.json").write_text(json.dumps({"id": 99, "v": "late"}) + "\n")
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="final copy test", execute=True, approver=lambda req: True)
    out = rb.run()
    assert out["status"] == "succeeded", [(s["name"], s["status"], s.get("message")) for s in out["steps"]]
    assert (tmp_path / "cold" / "warehouse" / "orders" / "part-1.json").read_text() == \
        (orders / "part-1.json").read_text()
    verify_evt = next(e for e in ledger.audit_events(run_id=rb.run_id) if e["action"] == "final_verify"
                      and e["status"] == "done")
    assert verify_evt["after_state"]["results"][0]["BADROWS"] == 0
    assert verify_evt["after_state"]["results"][0]["GOODROWS"] == 21


def test_each_step_reads_the_run_once_and_shares_one_fence_session(tmp_path, zk_server, monkeypatch) -> None:
    """The runbook folds its state from the audit log once per step (one read of the run's events,
    the events it records folded in without reading them back), and its fencing calls within a step
    share one ZooKeeper session (a real ZooKeeper; the HDFS policy on the local file system)."""
    import sys
    from contextlib import ExitStack

    import dr_toolkit.zk.client as zk_client
    import dr_toolkit.zk.fencing as fencing
    from dr_toolkit.failover.runbook import FenceSession

    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address,
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}])
    (tmp_path / "hot" / "warehouse").mkdir(parents=True)
    (tmp_path / "hot" / "warehouse" / "a.txt").write_text("a")
    topo = load_topology(path)
    ledger = open_ledger(topo, ACCESS)
    current = ["-"]
    reads: dict[str, int] = {}
    sessions: dict[str, int] = {}
    audit_events, open_fence, zk_session = ledger.audit_events, fencing.open_fence, zk_client.zk_session

    def counted_reads(**kw):  # type: ignore[no-untyped-def]
        if kw.get("component") == "failover":
            reads[current[0]] = reads.get(current[0], 0) + 1
        return audit_events(**kw)

    def counted_fence(*a, **kw):  # type: ignore[no-untyped-def]
        if sys._getframe(1).f_globals["__name__"] == "dr_toolkit.failover.runbook":
            sessions[current[0]] = sessions.get(current[0], 0) + 1
        return open_fence(*a, **kw)

    monkeypatch.setattr(ledger, "audit_events", counted_reads)
    monkeypatch.setattr(fencing, "open_fence", counted_fence)
    rb = Runbook.start(topo, ledger, access=ACCESS, reason="counting", execute=True, approver=lambda req: True)
    run_step = rb.run_step

    def one_step(name):  # type: ignore[no-untyped-def]
        current[0] = str(name)
        try:
            return run_step(name)
        finally:
            current[0] = "-"

    monkeypatch.setattr(rb, "run_step", one_step)
    out = rb.run()
    assert out["status"] == "succeeded", [(s["name"], s["status"], s.get("message")) for s in out["steps"]]
    assert reads == dict.fromkeys(ALL, 1)
    assert sessions == {"fence_hot": 1, "final_copy": 1, "promote_cold": 1}  # the writers' guard and writes
    assert rb.state.epoch == 1 and rb.state.done >= set(ALL)  # folded in as recorded: nothing read back

    opened: list[object] = []

    def counted_session(*a, **kw):  # type: ignore[no-untyped-def]
        opened.append(a)
        return zk_session(*a, **kw)

    monkeypatch.setattr(zk_client, "zk_session", counted_session)
    with ExitStack() as stack:
        fence = FenceSession(topo, ACCESS, stack)
        assert fence() is fence() and fence().state().epoch == 1
    assert len(opened) == 1
