"""An HDFS tree verified "as of T" on the real HDFS pair (issue 25, item 3): hot is read through the
snapshot the replication run took at its listing (a copy with ``snapshots: true`` takes one per
run), so files written or rewritten on hot after T never count as differences; where no snapshot
at or before T covers the tree, one line and exit 2 with what to do. A verify policy over such a
tree runs pinned to the newest snapshot, and its signal states that time as its safe time."""

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
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark, pytest.mark.usefixtures("copy_state_dir")]
REPO = Path(__file__).resolve().parents[2]
SNAP = CopyOptions(update=True, delete=True, snapshots=True)
GOOD_50 = {"GOODROWS": 50, "BADROWS": 0, "ONLY_IN_SOURCE_TABLE_ROWS": 0, "ONLY_IN_PEER_TABLE_ROWS": 0,
           "CONTENT_DIFFERENT_ROWS": 0}


def rows(first: int, last: int, value: str = "v") -> bytes:
    return "".join(json.dumps({"id": i, "v": f"{value}{i}"}) + "\n" for i in range(first, last)).encode()


@pytest.fixture
def replicated(hot_dir: Any, cold_dir: Any) -> tuple[str, str, Any, float]:
    """hot ``/s`` (snapshottable, 50 rows) replicated to cold by a snapshot run; then, after T, hot
    keeps being written: a new file (10 rows) and an existing file rewritten with other values."""
    hot_dir.allow_snapshot("/s")
    hot_dir.write("/s/part-0.json", rows(0, 25))
    hot_dir.write("/s/part-1.json", rows(25, 50))
    src, dst = hot_dir.uri("/s"), cold_dir.uri("/s")
    run = distcp(CopyRequest(src, dst, options=SNAP), access=Access.from_env())
    assert run.ok and run.source_snapshot, run.failures
    time.sleep(0.05)
    t = time.time()
    time.sleep(0.05)
    hot_dir.write("/s/part-2.json", rows(50, 60))  # written after T
    hot_dir.delete("/s/part-1.json")
    hot_dir.write("/s/part-1.json", rows(25, 50, "changed"))  # rewritten after T
    return src, dst, run, t


RUNNER = """
import json, sys, time
from dr_toolkit.access import Access
from dr_toolkit.verify.api import verify, verify_policy
from dr_toolkit.verify.request import VerifyRequest
access = Access.from_env()
cases = json.loads(sys.argv[1])
for c in cases:
    if c.get("policy"):
        from dr_toolkit.ledger import open_ledger
        from dr_toolkit.topology import load_topology
        from dr_toolkit.verify.signals import verify_signals

        topo = load_topology(c["policy"])
        ledger = open_ledger(topo, access)
        r = verify_policy(topo, "tree", ledger, access=access)
        [sig] = verify_signals(topo, ledger, access, time.time())
        out = {**r.to_json(), "signal": {"caught_up": sig.caught_up, "safe_time": sig.safe_time, "basis": sig.basis}}
    else:
        req = VerifyRequest(source=c["src"], target=c["dst"], key=["id"], format="json", as_of=c.get("as_of"))
        out = verify(req, access=access).to_json()
    print("RESULT " + json.dumps(out), flush=True)
"""


def run(cases: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    """The verifications in one new process (its Spark session reads WebHDFS: the session starts
    with the URIs, which the suite's shared session does not)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1"}
    r = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(cases)], capture_output=True, text=True, env=env,
                       cwd=tmp, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(ln[len("RESULT "):]) for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]


@pytest.mark.timeout(1200)  # one new process: Spark start and three verifications
def test_files_written_after_t_never_count_and_the_policy_signal_states_t(replicated, tmp_path: Path) -> None:
    src, dst, run_, t = replicated
    path = write_topology(tmp_path, zk=None, verify=[{"name": "tree", "source": src, "target": dst, "key": ["id"],
                                                      "format": "json"}])
    pinned, live, policy = run([{"src": src, "dst": dst, "as_of": t}, {"src": src, "dst": dst},
                                {"policy": str(path)}], tmp_path)
    assert {k: pinned[k] for k in GOOD_50} == GOOD_50
    snap = pinned["window"]["pinned"]
    assert snap["snapshot"] == run_.source_snapshot and "/.snapshot/" + run_.source_snapshot in snap["read_from"]
    assert run_.source_time <= pinned["data_time"] == snap["snapshot_time"] <= t  # as of the run's snapshot
    # read live, the writes after T show: 10 new rows, 25 rewritten
    assert (live["ONLY_IN_SOURCE_TABLE_ROWS"], live["CONTENT_DIFFERENT_ROWS"]) == (10, 25)
    # the policy runs pinned to the newest snapshot; its signal states that time, with the snapshot as basis
    assert {k: policy[k] for k in GOOD_50} == GOOD_50
    assert policy["data_time"] == policy["window"]["pinned"]["snapshot_time"] < policy["started_at"]
    sig = policy["signal"]
    assert sig["caught_up"] and sig["safe_time"] == policy["data_time"]
    assert f"snapshot {run_.source_snapshot}" in sig["basis"] and "cold equals hot as of" in sig["basis"]


def test_no_snapshot_at_or_before_t_is_one_line_exit_2(replicated, hot_dir, tmp_path: Path, monkeypatch,
                                                        capsys) -> None:
    from dr_toolkit.cli.main import main
    from tests.support.fixtures_verify import verify_paths

    src, dst, run_, t = replicated
    # every refusal comes before Spark starts (no session is needed to say it)
    with pytest.raises(ConfigError, match="no replication snapshot of .* was taken at or before"):
        verify_paths(src, dst, ["id"], format="json", as_of=run_.source_time - 60)
    with pytest.raises(ConfigError, match="no snapshottable directory holds the source|no replication snapshot of /"):
        verify_paths(dst, src, ["id"], format="json", as_of=t)  # cold's tree: no replication snapshot covers it
    (tmp_path / "a").mkdir()
    with pytest.raises(ConfigError, match="only HDFS trees"):
        verify_paths(f"file://{tmp_path}/a", dst, ["id"], format="json", as_of=t)
    with pytest.raises(ConfigError, match="Kafka topic: it cannot be read as of a time"):
        verify_paths("kafka://hot/orders", dst, ["id"], format="json", as_of=t)
    hot_dir.create_snapshot("/s", "drt-copy-in-progress")  # a later run that has not finished: cold changing
    with pytest.raises(ConfigError, match="has not finished: cold is being changed"):
        verify_paths(src, dst, ["id"], format="json", as_of=time.time())
    monkeypatch.chdir(tmp_path)
    code = main(["verify", src, dst, "--key", "id", "--format", "json", "--as-of", str(run_.source_time - 60)])
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.startswith("drt: error")]
    assert code == 2 and len(err) == 1 and "no replication snapshot" in err[0], err
