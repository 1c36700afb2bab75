"""Issue 38 #9 and #10: the runbook always finishes or says exactly why not; a refused abort
changes nothing.

#9: the `drt failover run --execute` process is killed (SIGKILL, by itself, at a precise point: a
wrapper around the real CLI kills its own process right after the event named) at every step
boundary — right after each step's ``done`` audit row, inside ``kafka_apply`` right after the offsets
were written on cold, and inside ``promote_cold`` right after the active-cluster znode was written
and before its audit row — on the real ZooKeeper and Kafka pair.
Hot's clients keep writing after the kill (records produced on hot, not on cold: the gate says
NO_GO). A resume by another operator then:
- after promotion (the znode says cold under the run's epoch): finishes — the promote step
  recognises it already happened and is not gated again — and writes the report;
- before promotion: says why not (NO_GO at the fresh gate, nothing promoted); once cold holds the
  records, finishes.

#10: `drt failover abort` of a promoted run is refused (exit 2) and the ledger, every table row for
row, is what it was before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.runbook import STEPS
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.client import connect
from dr_toolkit.zk.fencing import Fence
from tests.support.fixtures_failover import drt, write_topology

pytestmark = pytest.mark.integration
ALL = [s.value for s in STEPS]
ACCESS = Access.from_env()

# The real CLI, killed by itself right after the named event (fault injection: the process dies with
# SIGKILL exactly there; everything it talks to is real).
KILLER = """
import os, signal, sys
from dr_toolkit.cli.main import main
from dr_toolkit.failover import runbook
from dr_toolkit.zk import fencing

at = os.environ["DRT_TEST_KILL_AT"]
_audit = runbook.Runbook._audit
_set_active = fencing.Fence.set_active


def audit(self, name, status, **kw):
    _audit(self, name, status, **kw)
    if str(name) == at and status == "done":
        os.kill(os.getpid(), signal.SIGKILL)


def set_active(self, *a, **kw):
    out = _set_active(self, *a, **kw)
    if at == "promote-write":
        os.kill(os.getpid(), signal.SIGKILL)
    return out


_apply_many = runbook.apply_many  # the name the runbook calls (imported at its top)


def apply_many(*a, **kw):
    out = _apply_many(*a, **kw)
    if at == "kafka-apply-write":  # the offsets are on cold, kafka_apply's audit row is not
        os.kill(os.getpid(), signal.SIGKILL)
    return out


runbook.Runbook._audit = audit
fencing.Fence.set_active = set_active
runbook.apply_many = apply_many
sys.exit(main(sys.argv[1:]))
"""
PROMOTED = ("promote-write", "promote_cold", "report")  # kill points after the active-cluster write


@pytest.fixture
def world(tmp_path: Path, zk_server: Any, kafka_hot: Any, kafka_cold: Any) -> dict[str, Any]:
    """A topic on the real brokers, copied hot → cold after 3 cold-only records, and a group that
    consumed 4 of hot's 5 records; a topology on the real ZooKeeper naming both."""
    from tests.support.fixtures_kafka import (
        Rec,
        commit_after_consuming,
        create_topic,
        mirror,
        produce,
        unique,
    )

    if not zk_server.running:
        zk_server.start()
    topic, group = unique("orders"), unique("billing")
    for addr in (kafka_hot.address, kafka_cold.address):
        create_topic(addr, topic, 1)
    produce(kafka_hot.address, topic, 0, [Rec(f"v{i}".encode(), 1_700_000_000_000 + i, b"k") for i in range(5)])
    mirror(kafka_hot.address, kafka_cold.address, topic, 0, shift=3)
    commit_after_consuming(kafka_hot.address, group, topic, {0: 4})
    path = write_topology(tmp_path, zk=zk_server.address, kafka_hot=kafka_hot.address, kafka_cold=kafka_cold.address,
                          kafka=[{"name": "stream", "topics": [topic], "groups": [group]}])
    return {"path": path, "topo": load_topology(path), "hot": kafka_hot.address, "cold": kafka_cold.address,
            "topic": topic, "group": group}


def _fence(topo: Any) -> dict[str, Any]:
    ep = topo.cold.zookeeper
    with connect(ep, credentials=None) as zk:
        return Fence(zk, ep.dr_root).snapshot()


def _killed_run(w: dict[str, Any], at: str) -> str:
    script = Path(w["path"]).parent / "killer.py"
    script.write_text(KILLER)
    p = subprocess.run([sys.executable, str(script), "--config", str(w["path"]), "--json", "failover", "run",
                        "--execute", "--yes-i-am-sure", "--reason", f"killed at {at}"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "DRT_TEST_KILL_AT": at, "DRT_ACTOR": "alice@ops"})
    assert p.returncode == -signal.SIGKILL, (at, p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    (run,) = open_ledger(w["topo"], ACCESS).failover_runs()
    return str(run["run_id"])


def _hot_keeps_writing(w: dict[str, Any]) -> list[Any]:
    """Hot's clients write on after the kill: records cold does not hold; the gate says NO_GO."""
    from tests.support.fixtures_kafka import Rec, produce

    late = [Rec(f"late{i}".encode(), 1_700_000_100_000 + i, b"k") for i in range(3)]
    produce(w["hot"], w["topic"], 0, late)
    r = drt("--json", "failover", "check", config=w["path"])
    assert r.returncode == 1 and json.loads(r.stdout)["verdict"] == "NO_GO", r.stdout[-2000:]
    return late


@pytest.mark.parametrize("at", [*ALL, "kafka-apply-write", "promote-write"])
def test_a_run_killed_at_any_step_boundary_resumes_to_completion(world: dict[str, Any], at: str) -> None:
    from tests.support.fixtures_kafka import committed, produce

    w = world
    run_id = _killed_run(w, at)
    ledger = open_ledger(w["topo"], ACCESS)
    done = [e["action"] for e in ledger.audit_events(run_id=run_id, component="failover") if e["status"] == "done"]
    promoted = at in PROMOTED
    assert (_fence(w["topo"])["active"] or {}).get("cluster") == ("cold" if promoted else None), at
    if at == "promote-write":
        assert "promote_cold" not in done  # the znode says cold, the ledger does not know yet
    gated_after_kill = promoted or at == "kafka-apply-write" or ALL.index(at) >= ALL.index("final_gate")
    late = _hot_keeps_writing(w) if gated_after_kill else []
    env = {"DRT_ACTOR": "bob@ops"}  # another operator resumes
    r = drt("--json", "failover", "run", "--execute", "--resume", run_id, "--yes-i-am-sure", config=w["path"], env=env)
    if late and not promoted:  # not promoted yet: a NO_GO stops it, saying why; nothing promoted
        assert r.returncode == 1, (at, r.stdout[-2000:], r.stderr[-2000:])
        doc = json.loads(r.stdout)
        failed = [s for s in doc["steps"] if s["status"] == "failed"]
        assert len(failed) == 1 and "NO_GO" in failed[0]["message"], (at, doc["steps"])
        assert _fence(w["topo"])["active"] is None and ledger.failover_run(run_id)["status"] == "failed"
        produce(w["cold"], w["topic"], 0, late)  # the mirror catches up
        r = drt("--json", "failover", "run", "--execute", "--resume", run_id, "--yes-i-am-sure", config=w["path"],
                env=env)
    assert r.returncode == 0, (at, r.stdout[-3000:], r.stderr[-2000:])
    doc = json.loads(r.stdout)
    assert doc["run_id"] == run_id and doc["status"] == "succeeded", (at, doc)
    assert [s["status"] for s in doc["steps"]] == ["done"] * len(ALL), (at, doc["steps"])
    assert ledger.failover_run(run_id)["status"] == "succeeded"
    snap = _fence(w["topo"])
    assert snap["active"]["cluster"] == "cold" and snap["active"]["epoch"] == 1 == snap["fencing"]["epoch"], snap
    assert snap["fencing"]["fenced_cluster"] == "hot" and snap["read_only"] == ["hot"], snap
    events = ledger.audit_events(run_id=run_id, component="failover")
    assert [e["action"] for e in events if e["status"] == "done"] == ALL, (at, events)
    if promoted:  # never gated again after the znode said cold: no failed step after the kill
        assert [e for e in events if e["status"] == "failed"] == [], (at, events)
    assert committed(w["cold"], w["group"], w["topic"], 1) == {0: 3 + 4}  # applied once, where the group was
    report = json.loads((Path(w["path"]).parent / "reports" / f"{run_id}.json").read_text())
    assert report["outcome"] == "promoted" and report["recovery"]["recovery_point"], (at, report["recovery"])
    assert report["recovery"]["recovery_point"] == snap["active"]["recovery_point"]
    if at == "promote-write":
        promote = next(e for e in events if e["action"] == "promote_cold" and e["status"] == "done")
        assert "already made the active cluster by this run" in promote["message"], promote["message"]
        assert promote["after_state"]["recovery"]["source"] == "the active-cluster znode written at promotion"
        assert promote["actor"] == "bob@ops"


def test_a_refused_abort_of_a_promoted_run_changes_nothing_in_the_ledger(world: dict[str, Any]) -> None:
    from tests.integration.test_failover_dry_run_ledger import rows

    w = world
    r = drt("--json", "failover", "run", "--execute", "--yes-i-am-sure", "--reason", "promote then abort",
            config=w["path"])
    assert r.returncode == 0, r.stderr[-2000:]
    run_id = json.loads(r.stdout)["run_id"]
    ledger = open_ledger(w["topo"], ACCESS)
    before = rows(ledger)
    assert ledger.failover_run(run_id)["status"] == "succeeded"
    fence_before = _fence(w["topo"])
    r = drt("--json", "failover", "abort", run_id, "--reason", "changed my mind", config=w["path"])
    assert r.returncode == 2 and "already promoted" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert rows(ledger) == before  # not a row changed: the run is still 'succeeded'
    assert ledger.failover_run(run_id)["status"] == "succeeded"
    assert _fence(w["topo"]) == fence_before


def test_a_refused_abort_of_a_run_killed_right_after_the_promote_write_changes_nothing(
        world: dict[str, Any]) -> None:
    """The ledger does not know of the promotion yet (the process died between the active-cluster
    znode and its audit row): the abort reads the znode, is refused, and writes nothing — the run
    then resumes to completion."""
    from tests.integration.test_failover_dry_run_ledger import rows

    w = world
    run_id = _killed_run(w, "promote-write")
    ledger = open_ledger(w["topo"], ACCESS)
    before, fence_before = rows(ledger), _fence(w["topo"])
    assert fence_before["active"]["cluster"] == "cold" and ledger.failover_run(run_id)["status"] == "running"
    r = drt("--json", "failover", "abort", run_id, "--reason", "false alarm", config=w["path"])
    assert r.returncode == 2 and "already the active cluster" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert rows(ledger) == before and _fence(w["topo"]) == fence_before
    r = drt("--json", "failover", "run", "--execute", "--resume", run_id, "--yes-i-am-sure", config=w["path"])
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "succeeded", (r.stdout[-2000:], r.stderr)
