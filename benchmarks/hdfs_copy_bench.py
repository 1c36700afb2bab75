"""HDFS → HDFS replication on two real clusters (hadoop-client-minicluster, drt_servers.hdfs):
`drt distcp --update` over WebHDFS against Hadoop DistCp 3.4.1 `-update` (local job runner,
hdfs:// RPC) on the same files, same machine, same run — the bootstrap copy, then a re-run with
nothing changed. For each run it prints the wall time, the bytes the DataNodes served (hot) and
stored (cold), and the NameNode operations on each side (from the servers' own /jmx counters), then
the ratios (DistCp / drt: > 1 means drt is faster).

    .venv/bin/python benchmarks/hdfs_copy_bench.py [--files 200] [--size 65536] [--big 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drt_servers.hdfs import HdfsCluster, distcp_argv, hdfs_pair

NN_OPS = ("GetListingOps", "FileInfoOps", "CreateFileOps", "GetBlockLocations", "FilesRenamed",
          "FilesDeleted")


def _jmx(port: int, qry: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/jmx?qry={qry}", timeout=30) as r:
        beans: list[dict[str, Any]] = json.load(r)["beans"]
        return beans


def counters(c: HdfsCluster) -> dict[str, int]:
    """The DataNode's bytes read/written and the NameNode's operation counters, as the servers count them."""
    dn = _jmx(c.datanode_http_port, "Hadoop:service=DataNode,name=DataNodeActivity-*")
    nn = _jmx(c.http_port, "Hadoop:service=NameNode,name=NameNodeActivity")
    out = {"dn_bytes_read": sum(int(b.get("BytesRead", 0)) for b in dn),
           "dn_bytes_written": sum(int(b.get("BytesWritten", 0)) for b in dn)}
    for k in NN_OPS:
        out[k] = sum(int(b.get(k, 0)) for b in nn)
    return out


def measured(label: str, argv: list[str], env: dict[str, str], hot: HdfsCluster, cold: HdfsCluster
             ) -> dict[str, Any]:
    before = (counters(hot), counters(cold))
    t = time.monotonic()
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-3000:])
        raise SystemExit(f"{label}: exit {r.returncode}")
    after = (counters(hot), counters(cold))
    d_hot = {k: after[0][k] - before[0][k] for k in after[0]}
    d_cold = {k: after[1][k] - before[1][k] for k in after[1]}
    ops = lambda d: ", ".join(f"{k} {d[k]}" for k in NN_OPS if d[k])  # noqa: E731
    print(f"  {label:<34} {wall:6.1f} s  hot read {d_hot['dn_bytes_read'] / 2**20:8.1f} MiB  "
          f"cold written {d_cold['dn_bytes_written'] / 2**20:8.1f} MiB  cold read "
          f"{d_cold['dn_bytes_read'] / 2**20:8.1f} MiB")
    print(f"  {'':<34} NameNode hot: {ops(d_hot) or '-'}; cold: {ops(d_cold) or '-'}")
    return {"wall": wall, "hot": d_hot, "cold": d_cold}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200, help="small files")
    ap.add_argument("--size", type=int, default=64 << 10, help="bytes per small file")
    ap.add_argument("--big", type=int, default=4, help="files of 64 MiB")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="drt-hdfs-bench-"))
    hot, cold = hdfs_pair(root, hot_ha=False)
    try:
        print(hot.describe())
        print(cold.describe())
        t = time.monotonic()
        for i in range(args.files):
            hot.write(f"/bench/small/d{i % 10}/f{i:05d}", os.urandom(args.size))
        for i in range(args.big):
            hot.write(f"/bench/big/b{i}", os.urandom(64 << 20))
        total = args.files * args.size + args.big * (64 << 20)
        print(f"source: {args.files} × {args.size} B + {args.big} × 64 MiB ({total / 2**20:.1f} MiB) written "
              f"in {time.monotonic() - t:.1f} s; load average {os.getloadavg()[0]:.1f}")
        env = {**os.environ, "DRT_STATE_DIR": str(root / "state")}
        drt = [sys.executable, "-m", "dr_toolkit.cli.main", "distcp", "--update", hot.uri("/bench"),
               cold.uri("/drt")]
        dcp = distcp_argv(["-update", f"hdfs://127.0.0.1:{hot.rpc_port}/bench",
                           f"hdfs://127.0.0.1:{cold.rpc_port}/distcp"], root / "distcp")
        denv = {**os.environ, "HADOOP_USER_NAME": "hdfs"}
        res: dict[str, dict[str, Any]] = {}
        for phase in ("bootstrap", "no-change re-run"):
            print(f"{phase}:")
            res[f"drt {phase}"] = measured("drt distcp --update (WebHDFS)", drt, env, hot, cold)
            res[f"distcp {phase}"] = measured("Hadoop DistCp -update (RPC, local)", dcp, denv, hot, cold)
        for phase in ("bootstrap", "no-change re-run"):
            d, h = res[f"drt {phase}"], res[f"distcp {phase}"]
            print(f"{phase}: drt {d['wall']:.1f} s, DistCp {h['wall']:.1f} s — ratio DistCp/drt "
                  f"{h['wall'] / d['wall']:.2f}× (issue 22's goal >= 1: drt no slower — "
                  f"{'met' if h['wall'] >= d['wall'] else 'NOT met'}); hot bytes read drt "
                  f"{d['hot']['dn_bytes_read']:,} vs DistCp {h['hot']['dn_bytes_read']:,}")
        print(f"after: {hot.describe()}; {cold.describe()}; load average {os.getloadavg()[0]:.1f}")
    finally:
        hot.stop()
        cold.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
