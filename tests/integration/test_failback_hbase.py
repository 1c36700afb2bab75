"""HBase failback on the real HBase 2.6 pair (issue 40): what the old hot took after the recovery point
is reported and kept aside (never lost, also after a kill), then the old hot is brought up to date by
the delta and the reverse peer runs on the active cluster.

The failover is played the way one stops the forward direction: the forward peer ``1`` is removed from
the old hot (the ``hbase_hot`` fixture adds it back), the fence names cold active with the recovery
point (a time after the forward replication drained). Each test has its own table (``fb:t<hex>``), so
nothing is restarted and the session pair is reused.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failback import hbase as fb
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.fencing import open_fence
from tests.support.fixtures_failover import write_topology
from tests.support.fixtures_hbase import hbase_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


class Failback:
    """A table on the real pair, replicated hot → cold, failed over to cold at ``rp``."""

    def __init__(self, tmp_path: Path, hot: Any, cold: Any) -> None:
        self.hot, self.cold = hot, cold
        self.table = f"fb:t{uuid.uuid4().hex[:8]}"
        self.path = write_topology(
            tmp_path, zk=None, hbase_clusters=(hot, cold),
            hbase=[{"name": "orders", "peer_id": "1", "tables": [self.table]}],
            hot_extra={"hbase_shell": str(hbase_command(hot, tmp_path / "bin-hot" / "hbase"))},
            cold_extra={"hbase_shell": str(hbase_command(cold, tmp_path / "bin-cold" / "hbase"))})
        self.topo = load_topology(self.path)
        self.ledger = open_ledger(self.topo, Access.from_env())
        self.access = Access.from_env()
        self.rp: float | None = None

    def replicate_then_fail_over(self, rows: int = 40, *, known: bool = True) -> float:
        self.cold.create_table(self.table, "d", 0)  # the active's table has no scope: re-protect sets it
        self.hot.create_table(self.table, "d", 1)
        self.hot.put(0, rows, table=self.table, family="d")
        self.cold.wait_rows(rows, table=self.table)  # the forward peer drained this table
        time.sleep(0.05)
        self.rp = time.time()
        time.sleep(0.05)
        self.hot.remove_peer("1")  # the failover stops the forward direction
        with open_fence(self.topo, access=self.access) as fence:
            st = fence.bump(fenced_cluster=self.topo.hot_name, by="test")
            fence.set_active(self.topo.cold_name, epoch=st.epoch, by="test",
                             recovery={"recovery_point_epoch": self.rp if known else None})
        return self.rp

    def cells(self, cluster: Any, table: str | None = None, *, visible: bool = True) -> set[fb.Cell]:
        shell = str(self.topo.hot.hbase_shell)
        out = fb.run_tool(shell, "scan", cluster.cluster_key, table or self.table, "0", str(fb.MAX_TS),
                          *(["visible"] if visible else []))
        return set(out.cells)


@pytest.fixture
def failback(tmp_path: Path, hbase_hot: Any, hbase_cold: Any) -> Iterator[Failback]:
    f = Failback(tmp_path, hbase_hot, hbase_cold)
    yield f
    if "1" in hbase_cold.list_peers():  # the reverse peer re-protect added (hbase_hot restores hot's peers)
        hbase_cold.remove_peer("1")


def _diverge(f: Failback) -> set[tuple[bytes, bytes, int]]:
    """Writes on the active cluster after the failover, and on the old hot after the recovery point
    (new rows and a new version of a replicated row): the latter is the divergence. Returns its cells'
    (row, qualifier, value length)."""
    f.cold.put(1000, 20, table=f.table, family="d")
    f.hot.put(5000, 3, table=f.table, family="d", value_bytes=11)
    f.hot.put_cell(f.table, "row-0000000005", "d", "q", "hot-after-rp")
    f.hot.put_cell(f.table, "row-0000000006", "d", "extra", "x")
    f.hot.flush(f.table)  # VERSIONS => 1: the flush drops row 5's older version, the one cold holds
    same = int(time.time() * 1000)  # after the recovery point on both, the same cell: not divergence
    for c in (f.hot, f.cold):
        c.put_cell(f.table, "row-both", "d", "q", "same", same)
    want = {(f"row-{5000 + i:010d}".encode(), b"q", 11) for i in range(3)}
    return want | {(b"row-0000000005", b"q", len("hot-after-rp")), (b"row-0000000006", b"extra", 1)}


def _listed(item: Any) -> set[tuple[bytes, bytes, int]]:
    return {(c["row"].encode(), c["column"].split(":", 1)[1].encode(), c["value_bytes"])
            for c in item.detail["cells_listed"]}


def test_divergence_set_aside_and_reprotect_round(failback: Failback) -> None:
    f = failback
    rp = f.replicate_then_fail_over()
    before_cold = f.cells(f.cold)
    want = _diverge(f)
    hot_before = f.cells(f.hot)

    # the unknown base is never "no divergence"
    unknown = fb.divergence(f.topo, f.ledger, f.access, recovery_point=None)
    assert [i.where for i in unknown] == [f.table] and unknown[0].detail["base"] == "unknown"

    items = fb.divergence(f.topo, f.ledger, f.access, recovery_point=rp)
    assert [i.where for i in items] == [f.table]
    item = items[0]
    assert item.detail["cells"] == len(want) and item.detail["listed_all"], item.detail
    assert _listed(item) == want  # every divergent cell is in the report, nothing else
    assert all(c["ts"] >= rp * 1000 for c in item.detail["cells_listed"])
    divergent = {c for c in hot_before if (c.row, c.qualifier, len(c.value)) in want and c.ts >= rp * 1000}
    assert len(divergent) == len(want)

    # re-protect refuses while the old hot still holds them: copying onto it would bury them
    refused = fb.reprotect(f.topo, f.ledger, f.access, run_id="r1")
    assert refused["status"] == "failed" and "still holds" in refused["message"], refused
    assert "1" not in f.cold.list_peers()

    kept = fb.set_aside(f.topo, f.ledger, f.access, items, run_id="r1")
    aside = fb.aside_name(f.table, "r1")
    assert kept[0].kept_at == f"hbase://hot/{aside}" and aside == f"{f.table}__drt_divergence_r1"
    assert divergent <= f.cells(f.hot, aside)  # kept, with their timestamps and values
    hot_now = f.cells(f.hot)
    assert not (divergent & hot_now)  # and no longer in the protected table
    assert f.hot.count_range(5000, 3, table=f.table) == 0
    assert hot_now == {c for c in hot_before if c not in divergent}  # nothing else touched
    assert fb.divergence(f.topo, f.ledger, f.access, recovery_point=rp) == []

    dry = fb.reprotect(f.topo, f.ledger, f.access, run_id="r1", dry_run=True)
    assert dry["status"] == "planned" and "1" not in f.cold.list_peers(), dry

    said: list[str] = []
    res = fb.reprotect(f.topo, f.ledger, f.access, run_id="r1", progress=said.append)
    assert res["status"] == "done", res
    assert res["mode"] == "delta" and res["start_ms"] == math.floor(rp * 1000)
    pol = res["policies"][0]
    assert pol["scopes_set"] == {f.table: ["d"]}
    cold_now = f.cells(f.cold)  # (each read is a JVM of HBase's client: read once, asserted twice)
    assert pol["copy"]["cells"][f.table] == len(cold_now - before_cold)  # the delta only
    live = pol["evidence"]["live"]
    assert "1" in live["peers"] and all("1" in live["sources"][s] for s in live["region_servers"])
    assert f.cold.list_peers()["1"]["enabled"]
    assert f.cells(f.hot) == cold_now  # the gap is there: the old hot equals the active

    # writes on the active reach the old hot through the reverse peer
    f.cold.put(3000, 15, table=f.table, family="d")
    f.hot.wait_rows(f.cold.count(f.table), table=f.table)
    cold_now = f.cells(f.cold)  # the active takes no more writes: read once
    deadline = time.monotonic() + 60
    while (hot_now := f.cells(f.hot)) != cold_now and time.monotonic() < deadline:
        time.sleep(0.5)
    assert hot_now == cold_now
    assert divergent <= f.cells(f.hot, aside)  # still kept

    again = fb.reprotect(f.topo, f.ledger, f.access, run_id="r1")  # resumable: a second run changes nothing
    assert again["status"] == "done" and not again["policies"][0]["peer"]["changed"], again


def test_unknown_recovery_point_is_never_no_divergence_and_reprotect_copies_all_saying_so(failback: Failback
                                                                                         ) -> None:
    """No recovery point (the failover recorded none): every cell of the old hot the active lacks is
    divergence (whatever its timestamp) and is set aside; re-protect copies everything and says why."""
    f = failback
    f.replicate_then_fail_over(rows=25, known=False)
    f.cold.put(1000, 10, table=f.table, family="d")
    f.hot.put(6000, 4, table=f.table, family="d", value_bytes=5)
    items = fb.divergence(f.topo, f.ledger, f.access, recovery_point=None)
    assert [i.where for i in items] == [f.table]
    assert items[0].detail["base"] == "unknown" and "unknown" in items[0].detail["message"]
    assert items[0].detail["cells"] == 4 and items[0].detail["start_ms"] == 0
    kept = fb.set_aside(f.topo, f.ledger, f.access, items, run_id="u1")
    assert f.hot.count_range(6000, 4, table=f.table) == 0 and kept[0].detail["set_aside"]["cells_kept"] == 4
    again = fb.divergence(f.topo, f.ledger, f.access, recovery_point=None)  # nothing left: still not "none"
    assert [(i.where, i.detail["base"], i.detail["cells"]) for i in again] == [(f.table, "unknown", 0)]
    res = fb.reprotect(f.topo, f.ledger, f.access, run_id="u1")
    assert res["status"] == "done" and res["mode"] == "full", res
    assert "recovery point is unknown" in res["full_copy_because"] and "full copy" in res["message"]
    cold_now = f.cells(f.cold)  # (a JVM of HBase's client: read once, asserted twice)
    assert res["policies"][0]["copy"]["cells"][f.table] == len(cold_now) == 35
    assert f.cells(f.hot) == cold_now


KILL = """
import os, signal, sys
from dr_toolkit.access import Access
from dr_toolkit.failback import hbase as fb
from dr_toolkit.failback.divergence import Divergence
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
import json

point = sys.argv[2]
real = fb.run_tool

def run_tool(shell, *args, cells=None, **kw):
    if args[0] == point and cells:
        real(shell, *args, cells=cells[: len(cells) // 2], **kw)  # half of them, then killed
        os.kill(os.getpid(), signal.SIGKILL)
    return real(shell, *args, cells=cells, **kw)

fb.run_tool = run_tool
topo = load_topology(sys.argv[1])
items = [Divergence.from_json(d) for d in json.loads(sys.argv[3])]
fb.set_aside(topo, open_ledger(topo, Access.from_env()), Access.from_env(), items, run_id="rk")
print("not killed")
"""


@pytest.mark.parametrize("point", ["put", "delete"])
def test_set_aside_killed_midway_completes_and_loses_nothing(failback: Failback, point: str) -> None:
    """A kill in the middle of writing the aside table ('put') or of deleting from the protected table
    ('delete'), then set_aside again: every divergent cell ends in the aside table and none in the
    protected one."""
    import json

    f = failback
    rp = f.replicate_then_fail_over(rows=20)
    f.hot.put(7000, 30, table=f.table, family="d", value_bytes=9)  # 30 divergent rows
    items = fb.divergence(f.topo, f.ledger, f.access, recovery_point=rp)
    assert items and items[0].detail["cells"] == 30
    divergent = {c for c in f.cells(f.hot) if c.ts >= rp * 1000}
    assert len(divergent) == 30
    r = subprocess.run([sys.executable, "-c", KILL, str(f.path), point, json.dumps([i.to_json() for i in items])],
                       capture_output=True, text=True, timeout=600, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    aside = fb.aside_name(f.table, "rk")
    half = f.cells(f.hot, aside)
    if point == "put":
        assert 0 < len(half & divergent) < 30 and f.hot.count_range(7000, 30, table=f.table) == 30
    else:
        assert divergent <= half and 0 < f.hot.count_range(7000, 30, table=f.table) < 30
    kept = fb.set_aside(f.topo, f.ledger, f.access, items, run_id="rk")
    assert kept[0].kept_at == f"hbase://hot/{aside}"
    assert divergent <= f.cells(f.hot, aside)
    assert f.hot.count_range(7000, 30, table=f.table) == 0 and not (divergent & f.cells(f.hot))
    assert kept[0].detail["set_aside"]["cells_kept"] == 30
