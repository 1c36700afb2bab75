"""Who may decide on a promotion (issue 20 #14): identities come from what authenticated them —
the Airflow user who answered (``airflow:<user>``), the login of the CLI process (``os:<user>``) —
never from ``$DRT_ACTOR``, which anyone can set."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.runbook import may_decide, os_identity

pytestmark = pytest.mark.integration


def test_the_approver_mapping() -> None:
    assert may_decide("airflow:alice", ["alice"]) and may_decide("os:alice", ["alice"])
    assert may_decide("airflow:alice", ["airflow:alice"]) and not may_decide("os:alice", ["airflow:alice"])
    assert not may_decide("airflow:mallory", ["alice"]) and not may_decide("airflow:alice", ["os:alice"])
    assert not may_decide("ldap:alice", ["alice"])  # only the identities the edges authenticate
    assert os_identity() == f"os:{pwd.getpwuid(os.geteuid()).pw_name}"


def _topology(tmp_path, zk_server, approvers: list[str]):
    from tests.support.fixtures_failover import write_topology

    if not zk_server.running:
        zk_server.start()
    (tmp_path / "hot" / "data").mkdir(parents=True, exist_ok=True)
    (tmp_path / "hot" / "data" / "a.txt").write_text("a")
    return write_topology(tmp_path, zk=zk_server.address, failover={"approvers": approvers},
                          hdfs=[{"name": "data", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"]}])


def _run(path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "--json", "failover",
                           "run", "--execute", "--yes-i-am-sure", "--reason", "drill"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_drt_actor_cannot_impersonate_an_approver_at_the_cli(tmp_path, zk_server) -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert me != "alice"
    path = _topology(tmp_path, zk_server, ["alice"])
    r = _run(path, {"DRT_ACTOR": "alice", "USER": "alice", "LOGNAME": "alice"})
    assert r.returncode == 1, r.stderr
    steps = {s["name"]: s for s in json.loads(r.stdout)["steps"]}
    assert steps["approval"]["status"] == "failed" and f"'os:{me}' may not decide" in steps["approval"]["message"]
    assert steps["promote_cold"]["status"] == "pending"


def test_the_login_user_listed_as_an_approver_decides_at_the_cli(tmp_path, zk_server) -> None:
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.topology import load_topology

    me = pwd.getpwuid(os.geteuid()).pw_name
    path = _topology(tmp_path, zk_server, [me])
    r = _run(path, {"DRT_ACTOR": "mallory"})
    assert r.returncode == 0, r.stderr + r.stdout
    out = json.loads(r.stdout)
    assert {s["name"]: s["status"] for s in out["steps"]}["promote_cold"] == "done"
    ev = next(e for e in open_ledger(load_topology(path), Access.from_env()).audit_events(run_id=out["run_id"])
              if e["action"] == "approval" and e["status"] == "done")
    assert ev["actor"] == f"os:{me}" and ev["after_state"]["by"] == f"os:{me}"
