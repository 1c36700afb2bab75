"""Benchmark: `drt verify hbase://…` against HBase's own VerifyReplication on the same real tables.

Starts a real HBase 2.6 pair (drt_servers.hbase: hot → cold with a real replication peer), writes
``--rows`` rows (100-byte values, one cell each) on hot and lets the peer ship them, plants a few
differences on cold (rows deleted, cells changed, rows only on cold), then times, one after the
other on the same tables:

- ``drt --json verify hbase://hot/bench:vr hbase://cold/bench:vr`` — the CLI in its own process,
  Spark local[2] reading both tables through TableInputFormat (wall time: process start to end);
- VerifyReplication (hbase-mapreduce 2.6.1, MapReduce local job runner, ``1 bench:vr`` — peer id 1)
  as HBase ships it (the peer scanner fetches ``hbase.mapreduce.scan.cachedrows`` rows per RPC,
  default 1), and again with ``-Dhbase.mapreduce.scan.cachedrows=1000`` (what an operator tunes).

Prints each wall time, the counters of each (they must be identical) and the ratios
VerifyReplication / drt. One run on a shared 2-core machine: a rough figure.

    .venv/bin/python benchmarks/verifyrep_bench.py                # 200,000 rows
    .venv/bin/python benchmarks/verifyrep_bench.py --rows 1000000
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drt_servers.hbase import hbase_pair, mapredcp, verify_replication  # noqa: E402

TABLE = "bench:vr"
COUNTERS = ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS", "CONTENT_DIFFERENT_ROWS")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--dir", type=Path, default=None)
    a = ap.parse_args()
    root = a.dir or Path(tempfile.mkdtemp(prefix="drt-verifyrep-bench-"))
    t0 = time.monotonic()
    hot, cold = hbase_pair(root / "hbase")
    try:
        print(f"clusters up in {time.monotonic() - t0:.1f} s", flush=True)
        for c in (cold, hot):
            c.create_table(TABLE, "d", 1)
        t0 = time.monotonic()
        for first in range(0, a.rows, 50_000):
            hot.put(first, min(50_000, a.rows - first), table=TABLE, family="d", value_bytes=100)
        cold.wait_rows(a.rows, table=TABLE, timeout=1800)
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
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "verify", src, dst],
                           capture_output=True, text=True, env=env, cwd=root, timeout=3600)
        ours_s = time.monotonic() - t0
        if r.returncode not in (0, 1):
            print(r.stderr[-3000:], file=sys.stderr)
            return 2
        ours = json.loads(r.stdout)
        vr = verify_replication(hot, TABLE, "1", workdir=root / "vr-default", timeout=3600)
        vr_tuned = verify_replication(hot, TABLE, "1", "-Dhbase.mapreduce.scan.cachedrows=1000",
                                      workdir=root / "vr-cached", timeout=3600)
    finally:
        hot.stop()
        cold.stop()
    same = all(ours[k] == vr[k] == vr_tuned[k] for k in COUNTERS)
    print(f"\n{a.rows:,} rows, one region per table, load average {os.getloadavg()[0]:.1f}")
    print(f"{'':44s} {'wall s':>8s}  " + "  ".join(f"{k}" for k in COUNTERS))
    for name, secs, d in (("drt verify (Spark local[2], TableInputFormat)", ours_s, ours),
                          ("VerifyReplication (cachedrows 1, as shipped)", vr["wall_s"], vr),
                          ("VerifyReplication (cachedrows 1000)", vr_tuned["wall_s"], vr_tuned)):
        print(f"{name:44s} {secs:8.1f}  " + "  ".join(f"{d[k]:>{len(k)},}" for k in COUNTERS))
    print(f"counters identical: {same}")
    print(f"ratio VerifyReplication/drt: {vr['wall_s'] / ours_s:.2f}x as shipped, "
          f"{vr_tuned['wall_s'] / ours_s:.2f}x with cachedrows=1000 (drt's job alone: {ours['duration_s']:.1f} s)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
