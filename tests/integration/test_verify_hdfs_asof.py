"""An HDFS tree verified "as of T" on the real HDFS pair (issue 25, item 3): hot is read through the
snapshot the replication run took at its listing (a copy with ``snapshots: true`` takes one per
run), so files written or rewritten on hot after T never count as differences; where no snapshot
at or before T covers the tree, one line and exit 2 with what to do. A verify policy over such a
tree runs pinned to the newest snapshot, and its signal states that time as its safe time."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.copy.api import distcp
from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]
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
    run = distcp(src, dst, options=SNAP)
    assert run.ok and run.source_snapshot, run.failures
    time.sleep(0.05)
    t = time.time()
    time.sleep(0.05)
    hot_dir.write("/s/part-2.json", rows(50, 60))  # written after T
    hot_dir.delete("/s/part-1.json")
    hot_dir.write("/s/part-1.json", rows(25, 50, "changed"))  # rewritten after T
    return src, dst, run, t


def test_files_written_after_t_never_count(spark, replicated) -> None:
    from dr_toolkit.verify.api import verify

    src, dst, run, t = replicated
    pinned = verify(src, dst, ["id"], fmt="json", as_of=t, spark=spark)
    assert pinned.counters == GOOD_50
    snap = pinned.window["pinned"]
    assert snap["snapshot"] == run.source_snapshot and "/.snapshot/" + run.source_snapshot in snap["read_from"]
    assert run.source_time <= pinned.data_time == snap["snapshot_time"] <= t  # as of the run's snapshot
    live = verify(src, dst, ["id"], fmt="json", spark=spark)  # read live: the writes after T show
    assert (live.counters["ONLY_IN_SOURCE_TABLE_ROWS"], live.counters["CONTENT_DIFFERENT_ROWS"]) == (10, 25)


def test_no_snapshot_at_or_before_t_is_one_line_exit_2(spark, replicated, hot_dir, cold_dir, tmp_path: Path,
                                                        monkeypatch, capsys) -> None:
    from dr_toolkit.cli.main import main
    from dr_toolkit.verify.api import verify

    src, dst, run, t = replicated
    with pytest.raises(ConfigError, match="no replication snapshot of .* was taken at or before"):
        verify(src, dst, ["id"], fmt="json", as_of=run.source_time - 60, spark=spark)
    with pytest.raises(ConfigError, match="no snapshottable directory holds the source"):
        verify(dst, src, ["id"], fmt="json", as_of=t, spark=spark)  # cold is not snapshottable
    (tmp_path / "a").mkdir()
    with pytest.raises(ConfigError, match="only HDFS trees"):
        verify(f"file://{tmp_path}/a", dst, ["id"], fmt="json", as_of=t, spark=spark)
    with pytest.raises(ConfigError, match="Kafka topic: it cannot be read as of a time"):
        verify("kafka://hot/orders", dst, ["id"], fmt="json", as_of=t, spark=spark)
    hot_dir.create_snapshot("/s", "drt-copy-in-progress")  # a later run that has not finished: cold changing
    with pytest.raises(ConfigError, match="has not finished: cold is being changed"):
        verify(src, dst, ["id"], fmt="json", as_of=time.time(), spark=spark)
    monkeypatch.chdir(tmp_path)
    code = main(["verify", src, dst, "--key", "id", "--format", "json", "--as-of", str(run.source_time - 60)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) <= 2 and "no replication snapshot" in err[0], err


def test_policy_is_pinned_to_the_newest_snapshot_and_its_signal_states_it(spark, replicated,
                                                                         tmp_path: Path) -> None:
    from dr_toolkit.access import default_access
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.topology import load_topology
    from dr_toolkit.verify.api import verify_policy
    from dr_toolkit.verify.signals import verify_signals

    src, dst, run, _t = replicated
    path = write_topology(tmp_path, zk=None, verify=[{"name": "tree", "source": src, "target": dst, "key": ["id"],
                                                      "format": "json"}])
    topo = load_topology(path)
    ledger = open_ledger(topo)
    res = verify_policy(topo, "tree", ledger, spark=spark)
    assert res.counters == GOOD_50  # hot's writes after the run's snapshot are not compared
    assert res.data_time == res.window["pinned"]["snapshot_time"] < res.started_at
    [sig] = verify_signals(topo, ledger, default_access(None), time.time())
    assert sig.caught_up and sig.safe_time == res.data_time
    assert f"snapshot {run.source_snapshot}" in sig.basis and "cold equals hot as of" in sig.basis
