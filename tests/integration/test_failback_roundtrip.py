"""Coming back (issue 40), end to end through the real `drt` command line on a real ZooKeeper:
failover → writes on both sides → re-protect (divergence report acknowledged, kept aside) →
replication the other way → switchover back → re-protect → replication as configured.

The invariant attacked: after the round trip the active cluster holds exactly what the writers of
each period wrote (the writers' own model, file by file), the standby equals it, and what the old
hot took after the recovery point is in the divergence report and kept, byte for byte — nowhere lost.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failback.direction import recorded
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import drt, write_topology

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

ACCESS = Access.from_env()
YES = ("--execute", "--yes-i-am-sure")


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class Writers:
    """The writers' model of the data set: what each period's writers wrote, where they wrote it."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.model: dict[str, bytes] = {}
        self.n = 0

    def write(self, root: Path, *, n: int, model: dict[str, bytes] | None = None) -> dict[str, bytes]:
        """``n`` random changes (create, overwrite, delete) under ``root``, mirrored into ``model``
        (default: the writers' model of the active cluster)."""
        m = self.model if model is None else model
        for _ in range(n):
            self.n += 1
            op = self.rng.random()
            if m and op < 0.2:
                rel = self.rng.choice(sorted(m))
                (root / rel).unlink()
                del m[rel]
            elif m and op < 0.5:
                rel = self.rng.choice(sorted(m))
                data = f"rewrite {self.n} ".encode() * self.rng.randint(1, 50)
                (root / rel).write_bytes(data)
                m[rel] = data
            else:
                rel = f"d{self.rng.randint(0, 3)}/f{self.n}.bin"
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                data = self.rng.randbytes(self.rng.randint(0, 3000))
                (root / rel).write_bytes(data)
                m[rel] = data
        return m


def ok(r) -> dict:  # type: ignore[no-untyped-def]
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-3000:]}"
    return json.loads(r.stdout)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_round_trip_ends_with_what_the_writers_wrote_and_the_divergence_kept(tmp_path: Path, zk_server,
                                                                             seed: int) -> None:
    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address,
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"],
                                 "options": {"update": True, "delete": True}}])
    hot, cold = tmp_path / "hot" / "warehouse", tmp_path / "cold" / "warehouse"
    hot.mkdir(parents=True)
    w = Writers(seed)

    # period 1: writers on hot, replicated hot -> cold, then a planned failover
    w.write(hot, n=30)
    ok(drt("--json", "replicate", "wh", config=path))
    fo = ok(drt("--json", "failover", "run", *YES, "--reason", "drill", config=path))
    assert fo["status"] == "succeeded"
    assert tree(cold) == w.model

    # period 2: writers on cold (the active cluster); the old hot takes writes too (its clients
    # ignored the fence): the divergence
    before_hot = tree(hot)
    diverged = w.write(hot, n=8, model=dict(before_hot))
    w.write(cold, n=20)
    changed_on_hot = {rel for rel in set(before_hot) | set(diverged) if before_hot.get(rel) != diverged.get(rel)}
    kept_bytes = {rel: diverged[rel] for rel in changed_on_hot if rel in diverged}

    # nothing protects cold until a re-protect: the gate says so
    chk = drt("--json", "failover", "check", config=path)
    assert chk.returncode == 1 and any("re-protect" in r for r in json.loads(chk.stdout)["reasons"])

    # re-protect: refused without acknowledging each divergence item; then acknowledged
    r = drt("--json", "failover", "reprotect", "--execute", "--yes-i-am-sure", "--reason", "come back", config=path)
    if changed_on_hot:
        doc = json.loads(r.stdout)
        assert r.returncode == 1 and doc["status"] == "failed"
        assert any(s["name"] == "approval" and s["status"] == "failed" for s in doc["steps"])
        run_id = doc["run_id"]
        rp = ok(drt("--json", "failover", "reprotect", "--resume", run_id, "--yes-i-am-sure",
                    "--acknowledge", "all", config=path))
    else:
        rp = ok(r)
    assert rp["status"] == "succeeded", rp
    items = rp["divergence"]
    reported = {i["where"] for i in items}
    assert {rel for rel in changed_on_hot} <= {w_.split("/warehouse/", 1)[-1] for w_ in reported} | \
        {w_.lstrip("/") for w_ in reported}, (changed_on_hot, reported)
    # every byte the old hot took after the recovery point is kept where the report says
    for it in items:
        if it["kept_at"]:
            kept = Path(tmp_path / "hot" / it["kept_at"].split("hdfs://hot/", 1)[-1])
            rel = next(r_ for r_ in kept_bytes if it["where"].endswith(r_))
            assert kept.read_bytes() == kept_bytes[rel]
    assert tree(hot) == tree(cold) == w.model  # the old hot brought up to date, nothing of cold lost
    topo = load_topology(path)
    assert recorded(open_ledger(topo, ACCESS))["hot"] == "cold"
    st = ok(drt("--json", "status", config=path))["direction"]
    assert (st["hot"], st["cold"], st["as_configured"]) == ("cold", "hot", False) and st["run_id"] == rp["run_id"]
    assert "protected: cold -> hot (the other way round" in drt("status", config=path).stdout

    # period 3: writers on cold, replicated cold -> hot by the ordinary command (the current direction)
    w.write(cold, n=15)
    ok(drt("--json", "replicate", "wh", config=path))
    assert tree(hot) == w.model

    # switchover back: zero loss, no divergence, roles as configured again
    sw = ok(drt("--json", "failover", "switchover", *YES, "--acknowledge", "all", "--reason", "back home",
                config=path))
    assert sw["status"] == "succeeded" and sw["reprotect"]["divergence"] == []
    assert tree(hot) == w.model
    assert recorded(open_ledger(topo, ACCESS))["hot"] == "hot"
    assert ok(drt("--json", "status", config=path))["direction"]["as_configured"] is True

    # period 4: writers on hot again, replicated hot -> cold as configured
    w.write(hot, n=15)
    ok(drt("--json", "replicate", "wh", config=path))
    assert tree(cold) == tree(hot) == w.model
    # the gate as configured again: hot is the active cluster, nothing says it is unprotected
    chk = json.loads(drt("--json", "failover", "check", config=path).stdout)
    assert not any("active cluster" in r or "re-protect" in r for r in chk["reasons"]), chk["reasons"]
    # one history across the round trip: two failovers, two re-protects, two direction changes
    ledger = open_ledger(topo, ACCESS)
    kinds = [str(r["reason"]).split(":")[0] for r in ledger.failover_runs(limit=50)]
    assert sorted(kinds) == ["drill", "re-protect", "re-protect", "switchover"], kinds
    assert len([e for e in ledger.audit_events(component="direction") if e["status"] == "done"]) == 2


KILLER = """
import os, signal, sys
from dr_toolkit.cli.main import main
from dr_toolkit.failback import runbook
from dr_toolkit.zk import fencing

at = os.environ["DRT_TEST_KILL_AT"]
_audit = runbook.Reprotect._audit
_reprotect = fencing.Fence.reprotect


def audit(self, name, status, **kw):
    _audit(self, name, status, **kw)
    if str(name) == at and status == "done":
        os.kill(os.getpid(), signal.SIGKILL)


def reprotect(self, *a, **kw):
    out = _reprotect(self, *a, **kw)
    if at == "zookeeper-written":  # the direction is in ZooKeeper, not yet in the ledger
        os.kill(os.getpid(), signal.SIGKILL)
    return out


runbook.Reprotect._audit = audit
fencing.Fence.reprotect = reprotect
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("at", ["set_aside", "zookeeper-written", "lift_standby", "hdfs"])
def test_a_reprotect_killed_at_any_point_resumes_to_completion(tmp_path: Path, zk_server, at: str) -> None:
    """The re-protect CLI SIGKILLed after a step's record, or right after the ZooKeeper transaction
    that turns the direction (before the ledger's event), then resumed by another invocation: it
    completes, the old hot equals the active cluster, the divergence is kept, nothing lost."""
    import signal
    import subprocess
    import sys

    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address,
                          hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"],
                                 "options": {"update": True, "delete": True}}])
    hot, cold = tmp_path / "hot" / "warehouse", tmp_path / "cold" / "warehouse"
    hot.mkdir(parents=True)
    w = Writers(7)
    w.write(hot, n=20)
    ok(drt("--json", "replicate", "wh", config=path))
    ok(drt("--json", "failover", "run", *YES, "--reason", "drill", config=path))
    late = hot / "late-on-hot.bin"
    late.write_bytes(b"the old hot's write after the failover")
    w.write(cold, n=10)

    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    p = subprocess.run([sys.executable, str(script), "--config", str(path), "--json", "failover", "reprotect",
                        *YES, "--acknowledge", "all", "--reason", f"killed at {at}"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "DRT_TEST_KILL_AT": at})
    assert p.returncode == -signal.SIGKILL, (at, p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    ledger = open_ledger(load_topology(path), ACCESS)
    run_id = next(str(r["run_id"]) for r in ledger.failover_runs(limit=10) if str(r["reason"]).startswith("re-protect"))
    if at == "zookeeper-written":  # the edges still see the old direction: nothing replicates into cold
        assert recorded(ledger) is None
        r = drt("--json", "replicate", "wh", config=path)
        assert r.returncode != 0 and "active cluster" in (r.stdout + r.stderr), r.stdout + r.stderr
    rp = ok(drt("--json", "failover", "reprotect", "--resume", run_id, "--yes-i-am-sure", "--acknowledge", "all",
                config=path))
    assert rp["status"] == "succeeded", rp
    assert tree(hot) == tree(cold) == w.model
    kept = [i for i in rp["divergence"] if i["where"].endswith("late-on-hot.bin")]
    assert len(kept) == 1 and kept[0]["kept_at"]
    assert list((tmp_path / "hot").rglob("late-on-hot.bin"))[0].read_bytes() == b"the old hot's write after the failover"
    assert recorded(open_ledger(load_topology(path), ACCESS))["hot"] == "cold"
