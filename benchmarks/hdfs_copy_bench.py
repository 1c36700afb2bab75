"""HDFS → HDFS replication on two real clusters (hadoop-client-minicluster, drt_servers.hdfs):
`drt distcp` over WebHDFS against Hadoop DistCp 3.4.1 (local job runner, hdfs:// RPC) on the
same files, same machine, same run. Prints each cluster's start-up time and memory, then the
copy times and their ratio (DistCp / drt: > 1 means drt is faster).

    .venv/bin/python benchmarks/hdfs_copy_bench.py [--files 200] [--size 65536] [--big 4]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drt_servers.hdfs import distcp_argv, hdfs_pair


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
        print(f"source: {args.files} × {args.size} B + {args.big} × 64 MiB written in {time.monotonic() - t:.1f} s")
        env = {**os.environ, "DRT_STATE_DIR": str(root / "state")}
        t = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "distcp", "--update",
                            hot.uri("/bench"), cold.uri("/drt")], env=env, capture_output=True, text=True)
        drt_s = time.monotonic() - t
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:])
            return 1
        t = time.monotonic()
        r = subprocess.run(distcp_argv(["-update", f"hdfs://127.0.0.1:{hot.rpc_port}/bench",
                                        f"hdfs://127.0.0.1:{cold.rpc_port}/distcp"], root / "distcp"),
                           env={**os.environ, "HADOOP_USER_NAME": "hdfs"}, capture_output=True, text=True)
        distcp_s = time.monotonic() - t
        if r.returncode != 0:
            print(r.stderr[-3000:])
            return 1
        print(f"drt distcp (WebHDFS): {drt_s:.1f} s; Hadoop DistCp (local job runner, RPC): {distcp_s:.1f} s; "
              f"ratio DistCp/drt {distcp_s / drt_s:.2f}×")
        print(f"after: {hot.describe()}; {cold.describe()}")
    finally:
        hot.stop()
        cold.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
