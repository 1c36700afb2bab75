"""Benchmark: `drt verify hbase://…` against HBase's own VerifyReplication on the same real tables.

Starts a real HBase 2.6 pair (drt_servers.hbase: hot → cold with a real replication peer), creates
``bench:vr`` pre-split into ``--regions`` regions on both (split keys at equal row-number steps),
writes ``--rows`` rows (100-byte values, one cell each) on hot and lets the peer ship them, plants a
few differences on cold (rows deleted, cells changed, rows only on cold), then times, one after the
other on the same tables:

- ``drt --json verify hbase://hot/bench:vr hbase://cold/bench:vr`` — the CLI in its own process,
  Spark local[2] reading both tables through TableInputFormat (the region servers; wall time:
  process start to end);
- the same with ``--read snapshot``: a table snapshot per side, read as HFiles from each cluster's
  HDFS through TableSnapshotInputFormat, deleted after;
- VerifyReplication (hbase-mapreduce 2.6.1, MapReduce local job runner, ``1 bench:vr`` — peer id 1)
  as HBase ships it (the peer scanner fetches ``hbase.mapreduce.scan.cachedrows`` rows per RPC,
  default 1), and again with ``-Dhbase.mapreduce.scan.cachedrows=1000`` (what an operator tunes).

For each run it also reads both region servers' request counters (``/jmx``, RegionServer Server
bean: ``readRequestCount``, ``totalRequestCount``) before and after: the load the run put on the
region servers. Prints each wall time, the counters of each (they must be identical), the region
server requests, the ratios VerifyReplication / drt and the load average. One run on a shared
2-core machine: a rough figure.

    .venv/bin/python benchmarks/verifyrep_bench.py                          # 200,000 rows, 4 regions
    .venv/bin/python benchmarks/verifyrep_bench.py --rows 1000000 --regions 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drt_servers.hbase import HBaseCluster, hbase_pair, mapredcp, verify_replication  # noqa: E402

TABLE = "bench:vr"
COUNTERS = ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS", "CONTENT_DIFFERENT_ROWS")
SERVER_BEAN = "Hadoop:service=HBase,name=RegionServer,sub=Server"


def requests(*clusters: HBaseCluster) -> tuple[int, int]:
    """(read requests, all requests) the clusters' region servers have served so far (after one
    period of the region servers' metrics, ``hbase.regionserver.metrics.period`` = 5 s)."""
    time.sleep(6)
    reads = total = 0
    for c in clusters:
        b = c.jmx(SERVER_BEAN)
        reads += int(b.get("readRequestCount", 0))
        total += int(b.get("totalRequestCount", 0))
    return reads, total


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--regions", type=int, default=4, help="regions per table (pre-split)")
    ap.add_argument("--dir", type=Path, default=None)
    a = ap.parse_args()
    root = a.dir or Path(tempfile.mkdtemp(prefix="drt-verifyrep-bench-"))
    t0 = time.monotonic()
    hot, cold = hbase_pair(root / "hbase")
    runs: list[tuple[str, float, dict[str, Any], tuple[int, int]]] = []
    try:
        print(f"clusters up in {time.monotonic() - t0:.1f} s", flush=True)
        splits = [f"row-{i * a.rows // a.regions:010d}" for i in range(1, a.regions)]
        for c in (cold, hot):
            c.create_table(TABLE, "d", 1, splits=splits)
        t0 = time.monotonic()
        for first in range(0, a.rows, 50_000):
            hot.put(first, min(50_000, a.rows - first), table=TABLE, family="d", value_bytes=100)
        cold.wait_rows(a.rows, table=TABLE, timeout=3600)
        print(f"{a.rows:,} rows written on hot and replicated to cold in {time.monotonic() - t0:.1f} s", flush=True)
        step = max(1, a.rows // 7)
        for i in range(5):  # planted: 5 rows gone from cold, 5 cells changed, 5 rows only on cold
            cold.delete(TABLE, f"row-{i * step + 1:010d}")
            cold.put_cell(TABLE, f"row-{i * step + 2:010d}", "d", "q", "changed")
            cold.put_cell(TABLE, f"row-{i * step + 3:010d}x", "d", "q", "peer-only")
        env = {**os.environ, "DRT_HBASE_CLASSPATH": mapredcp(), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYTHONPATH": str(REPO)}
        src = f"hbase://{hot.zk_quorum}{hot.znode_parent}/{TABLE}"
        dst = f"hbase://{cold.zk_quorum}{cold.znode_parent}/{TABLE}"
        drt = [sys.executable, "-m", "dr_toolkit.cli.main", "--json", "verify", src, dst]
        for name, extra in (("drt verify (TableInputFormat)", []),
                            ("drt verify --read snapshot", ["--read", "snapshot", "--hbase-rootdir",
                                                            f"{hot.rootdir_uri},{cold.rootdir_uri}"])):
            before = requests(hot, cold)
            t0 = time.monotonic()
            r = subprocess.run([*drt, *extra], capture_output=True, text=True, env=env, cwd=root, timeout=3600)
            secs = time.monotonic() - t0
            if r.returncode not in (0, 1) or not r.stdout.strip().startswith("{"):
                print(f"{name} exited {r.returncode}: {r.stderr[-3000:]}", file=sys.stderr)
                return 2
            after = requests(hot, cold)
            runs.append((name, secs, json.loads(r.stdout), (after[0] - before[0], after[1] - before[1])))
            print(f"{name}: {secs:.1f} s", flush=True)
        for name, args in (("VerifyReplication (cachedrows 1, as shipped)", ()),
                           ("VerifyReplication (cachedrows 1000)", ("-Dhbase.mapreduce.scan.cachedrows=1000",))):
            before = requests(hot, cold)
            vr = verify_replication(hot, TABLE, "1", *args, workdir=root / f"vr-{len(runs)}", timeout=3600)
            after = requests(hot, cold)
            runs.append((name, vr["wall_s"], vr, (after[0] - before[0], after[1] - before[1])))
            print(f"{name}: {vr['wall_s']:.1f} s", flush=True)
    finally:
        hot.stop()
        cold.stop()
    same = all(all(d[k] == runs[0][2][k] for k in COUNTERS) for _, _, d, _ in runs)
    print(f"\n{a.rows:,} rows, {a.regions} regions per table, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'':46s} {'wall s':>7s} {'RS reads':>9s} {'RS reqs':>8s}  " + "  ".join(COUNTERS))
    for name, secs, d, (reads, total) in runs:
        print(f"{name:46s} {secs:7.1f} {reads:9,} {total:8,}  " + "  ".join(f"{d[k]:>{len(k)},}" for k in COUNTERS))
    print(f"counters identical: {same}")
    vr_s, vr_t = runs[-2][1], runs[-1][1]
    for name, secs, d, _ in runs[:-2]:
        print(f"ratio VerifyReplication/{name}: {vr_s / secs:.2f}x as shipped, {vr_t / secs:.2f}x with "
              f"cachedrows=1000 (drt's job alone: {d['duration_s']:.1f} s)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
