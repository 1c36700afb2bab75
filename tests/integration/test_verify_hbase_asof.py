"""A verification pinned to a time T on a live-written HBase table (issue 25, "as of T"): rows and
versions written on hot after T — not replicated yet — never count as differences, the counters
equal VerifyReplication's with ``--endtime=T``, a verify policy's run is pinned to its start and its
signal states T as its safe time, and ``--as-of recovery-point`` takes the gate's recovery point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]
TABLE = "drt:live"
COUNTERS = ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS", "CONTENT_DIFFERENT_ROWS")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    from drt_servers.hbase import mapredcp
    from tests.support.spark_quick import quick_jvms

    # the Spark JVM with the quick-start options (C1 only, serial GC): the tables are 150 rows
    return {**os.environ, "DRT_HBASE_CLASSPATH": mapredcp(), "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_CONF_DIR": quick_jvms(tmp_path / "spark-conf")}


def drt(env: dict[str, str], cwd: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", *args], capture_output=True, text=True,
                       env=env, cwd=cwd, timeout=600)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}), r.stderr


def counters(d: dict[str, Any]) -> dict[str, int]:
    return {k: int(d[k]) for k in COUNTERS}


def test_writes_after_t_never_count(hbase_hot, hbase_cold, env, tmp_path: Path) -> None:
    from drt_servers.hbase import QUICK_JVM, verify_replication

    hot, cold = hbase_hot, hbase_cold
    for c in (cold, hot):
        c.drop_table(TABLE)
        c.create_table(TABLE, "d", 1)
    hot.put(0, 100, table=TABLE, family="d")
    cold.wait_rows(100, table=TABLE)
    time.sleep(0.05)
    t = time.time()
    time.sleep(0.05)
    hot.disable_peer("1")  # live writes after T that cold has not received (hbase_hot re-enables the peer)
    hot.put(1000, 50, table=TABLE, family="d")  # new rows
    hot.put(5, 1, table=TABLE, family="d", value_bytes=7)  # a new version of row 5
    src, dst = (f"hbase://{c.zk_quorum}{c.znode_parent}/{TABLE}" for c in (hot, cold))

    code, pinned, err = drt(env, tmp_path, "verify", src, dst, "--as-of", str(t))
    assert code == 0, err[-2000:]
    assert counters(pinned) == {"GOODROWS": 100, "BADROWS": 0, "ONLY_IN_SOURCE_TABLE_ROWS": 0,
                                "ONLY_IN_PEER_TABLE_ROWS": 0, "CONTENT_DIFFERENT_ROWS": 0}
    assert pinned["data_time"] == pytest.approx(t, abs=0.001) and pinned["window"]["end"] == pytest.approx(t)
    # the job client's completion poll at 100 ms, not 5 s (a client setting: see test_verify_hbase.FAST_POLL)
    vr = verify_replication(hot, TABLE, "1", "-Dmapreduce.client.completion.pollinterval=100",
                            f"--endtime={round(t * 1000)}", workdir=tmp_path / "verifyrep", jvm_options=QUICK_JVM)
    assert counters(vr) == counters(pinned)

    code, live, err = drt(env, tmp_path, "verify", src, dst)  # not pinned: the lag shows
    assert code == 1, err[-2000:]
    assert (live["ONLY_IN_SOURCE_TABLE_ROWS"], live["CONTENT_DIFFERENT_ROWS"], live["GOODROWS"]) == (50, 1, 99)


def test_policy_run_is_pinned_and_its_signal_states_t(hbase_worlds, env, tmp_path: Path) -> None:
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.topology import load_topology
    from dr_toolkit.verify.signals import verify_signals

    hot, cold = hbase_worlds.clusters
    for c in (cold, hot):
        c.drop_table(TABLE)
        c.create_table(TABLE, "d", 1)
    path = write_topology(tmp_path, zk=None, hbase_clusters=hbase_worlds.clusters,
                          hbase=[{"name": "hb", "peer_id": "1", "tables": [TABLE]}],
                          verify=[{"name": "live", "source": f"hbase://hot/{TABLE}", "target": f"hbase://cold/{TABLE}",
                                   "key": ["row"]}])
    topo = load_topology(path)
    hot.put(0, 40, table=TABLE, family="d")
    hbase_worlds(topo)  # peer enabled, cold holds every row, drain proven
    cold.wait_rows(40, table=TABLE)

    before = time.time()
    code, out, err = drt(env, tmp_path, "--config", str(path), "verify", "--policy", "live")
    assert code == 0, err[-2000:]
    assert out["GOODROWS"] == 40 and before <= out["data_time"] <= out["started_at"]
    ledger = open_ledger(topo, Access.from_env())
    [sig] = verify_signals(topo, ledger, Access.from_env(), time.time())
    assert out["data_time"] < out["started_at"]  # pinned to the run's start, before the reads
    assert sig.caught_up and sig.safe_time == out["data_time"]
    assert "cold equals hot as of" in sig.basis

    code, rp, err = drt(env, tmp_path, "--config", str(path), "verify", f"hbase://hot/{TABLE}",
                        f"hbase://cold/{TABLE}", "--as-of", "recovery-point")
    assert code == 0, err[-2000:]
    assert rp["GOODROWS"] == 40 and rp["data_time"] <= rp["started_at"]
