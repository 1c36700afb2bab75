"""`drt hbase ...` end to end: peers on the test ZooKeeper (from the topology and with --zk), status on
the real hot HBase cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dr_toolkit.cli.main import main
from dr_toolkit.hbase.encoding import Layout
from tests.support.procs import free_port

pytestmark = pytest.mark.integration

COLD = "cold-zk1.example.com,cold-zk2.example.com:2181:/hbase"


def _run(capsys, *argv: str) -> tuple[int, dict | list | None, str]:
    rc = main(["--json", *argv])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else None), out.err


def test_peers_cycle_from_topology(capsys, hbase_topology, hbase_parent, zk) -> None:
    cfg = ["--config", str(hbase_topology)]
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "add", "1", COLD, "--dry-run")
    assert rc == 0 and doc["dry_run"] and [c["op"] for c in doc["changes"]] == ["create", "create"]
    assert zk.exists(Layout(hbase_parent).peer("1")) is None
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "add", "1", COLD, "--table-cfs", "shop:orders:d")
    assert rc == 0 and doc["changed"]
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "add", "1", COLD, "--table-cfs", "shop:orders:d")
    assert rc == 0 and not doc["changed"]
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "disable", "1")
    assert rc == 0 and doc["after"]["state"] == "DISABLED"
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "list")
    # the peer's filters are listed too (issue 20 #1); HBase 1.x (the fixture's hbase_version) has no
    # replicate_all field: table-CFs alone restrict it
    assert doc == [{"peer_id": "1", "cluster_key": COLD, "state": "DISABLED", "table_cfs": {"shop:orders": ["d"]},
                    "replicate_all": None, "namespaces": None, "exclude_namespaces": None,
                    "exclude_table_cfs": None}]
    rc, doc, err = _run(capsys, *cfg, "hbase", "peers", "enable", "2")
    assert rc == 2 and "unknown peer id '2'" in err
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "remove", "1")
    assert rc == 0 and doc["changed"]
    # every change (not the dry run's znodes) is in the audit log of the topology's ledger
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import load_topology

    events = Ledger.open(load_topology(hbase_topology).ledger.url).audit_events(component="hbase")
    assert [(e["action"], e["dry_run"]) for e in events][:2] == [("peers.add", 1), ("peers.add", 0)]
    assert events[-1]["action"] == "peers.remove"


def test_bad_input_exit_2_and_nothing_written(capsys, zk_server, hbase_parent, zk) -> None:
    base = ["hbase", "peers", "add", "--zk", zk_server.address, "--znode-parent", hbase_parent]
    host, port = zk_server.address.rsplit(":", 1)
    for key, msg in (("zk1;zk2:2181", "malformed cluster key"),
                     (f"{host}:{port}:{hbase_parent}", "itself as its own peer")):
        rc, _, err = _run(capsys, *base, "1", key)
        assert rc == 2 and msg in err
    assert zk.exists(hbase_parent) is None


def test_peer_changes_on_hbase_2_without_a_shell_exit_2_in_one_line(capsys, zk_server, hbase_parent, zk) -> None:
    """Issue 38 #1: HBase 2.x ignores peers written into ZooKeeper, so without clusters.<hot>.hbase_shell
    `drt hbase peers add/disable/...` refuse (exit 2, one line saying what to configure), writing nothing."""
    base = ["--zk", zk_server.address, "--znode-parent", hbase_parent, "--hbase-version", "2.6"]
    for argv in (["hbase", "peers", "add", *base, "1", COLD], ["hbase", "peers", "add", *base, "1", COLD, "--dry-run"]):
        rc, doc, err = _run(capsys, *argv)
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert rc == 2 and doc is None and len(lines) == 1, (rc, err)
        assert "never writes a peer into ZooKeeper" in lines[0] and "hbase_shell" in lines[0]
    assert zk.exists(hbase_parent) is None


def test_status_exit_codes_on_the_real_hot_cluster(capsys, hbase_hot, hbase_cold) -> None:
    import time

    hot, cold = hbase_hot, hbase_cold
    args = ["hbase", "status", "--zk", hot.zk_quorum, "--znode-parent", hot.znode_parent]
    cold.wait_rows(hot.count())
    rc, doc, _ = _run(capsys, *args)
    assert rc == 0 and doc["caught_up"] is True and doc["queues"][0]["wals"] == 1
    assert doc["basis"] == "queue-size" and doc["proven"] is False  # no WAL lengths from the command line
    hot.disable_peer("1")
    hot.put(7_000_000, 10)
    hot.roll_wal()  # a whole WAL now waits (HBase lists the new WAL in the queue a moment later)
    deadline = time.monotonic() + 60
    rc, doc, _ = _run(capsys, *args)
    while rc == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        rc, doc, _ = _run(capsys, *args)
    assert rc == 1 and doc["caught_up"] is False and doc["queues"][0]["size_of_log_queue"] >= 1
    assert any("peer 1 is DISABLED" in r for r in doc["reasons"])
    rc, doc, _ = _run(capsys, *args, "--peer", "9")
    assert rc == 1 and any("peer 9 is not configured" in r for r in doc["reasons"])
    hot.enable_peer("1")
    cold.wait_rows(hot.count())
    deadline = time.monotonic() + 60
    rc, doc, _ = _run(capsys, "--config", "/nonexistent.yaml", *args, "--peer", "1")
    while rc == 1 and time.monotonic() < deadline:
        time.sleep(0.5)
        rc, doc, _ = _run(capsys, "--config", "/nonexistent.yaml", *args, "--peer", "1")
    assert rc == 0 and doc["caught_up"] is True and doc["queues"][0]["wals"] == 1


def test_unreachable_zookeeper_exit_3_naming_the_quorum(tmp_path) -> None:
    quorum = f"127.0.0.1:{free_port()}"
    p = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "hbase", "status", "--zk", quorum,
                        "--timeout", "2"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "DRT_CONFIG": str(tmp_path / "none.yaml")})
    assert p.returncode == 3, p.stderr
    assert quorum in p.stderr and "cannot connect within 2s" in p.stderr


def test_peers_sync_from_policies(capsys, hbase_topology, hbase_parent) -> None:
    cfg = ["--config", str(hbase_topology)]
    _run(capsys, *cfg, "hbase", "peers", "add", "stale", "old-dr:2181:/hbase")
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "sync", "--remove-others", "--dry-run")
    assert rc == 0 and [(r["peer_id"], r["action"], r["changed"]) for r in doc] == [
        ("1", "add", True), ("stale", "remove", True)]
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "sync", "--remove-others")
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "list")
    assert [(p["peer_id"], p["cluster_key"]) for p in doc] == [("1", COLD)]
    rc, doc, _ = _run(capsys, *cfg, "hbase", "peers", "sync", "--remove-others")
    assert rc == 0 and not any(r["changed"] for r in doc)
