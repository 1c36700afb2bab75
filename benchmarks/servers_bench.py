"""Start-up time and memory of every real server the tests and the demo run (drt_servers).

Starts each component's pair as the tests do — ZooKeeper; HDFS hot + cold (MiniDFSCluster,
the hot one HA with two NameNodes); Kafka hot + cold (KRaft) and MirrorMaker 2; HBase hot + cold
(each: mini ZooKeeper, HDFS, master, region server) — one component at a time, and prints per
server the wall time from spawn to its ready-check passing and its resident memory (RSS of
its process group) once ready, then stops it. ``--runs N`` repeats and prints min/median/max.
There is no peer to compare with: these are the costs the suite and the demo pay.

    .venv/bin/python benchmarks/servers_bench.py [--runs 1] [--only hdfs,kafka,hbase,zookeeper]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drt_servers.process import ManagedProcess  # noqa: E402


def _zookeeper(root: Path) -> list[ManagedProcess]:
    from drt_servers.zookeeper import zookeeper

    return [zookeeper(root).start()]


def _hdfs(root: Path) -> list[ManagedProcess]:
    from drt_servers.hdfs import hdfs_pair

    return list(hdfs_pair(root))


def _kafka(root: Path) -> list[ManagedProcess]:
    from drt_servers.kafka import MirrorMaker2, kafka_pair

    hot, cold = kafka_pair(root)
    return [hot, cold, MirrorMaker2(root / "mm2", hot.bootstrap, cold.bootstrap).start()]


def _hbase(root: Path) -> list[ManagedProcess]:
    from drt_servers.hbase import hbase_pair

    return [c.process for c in hbase_pair(root)]


COMPONENTS: dict[str, Callable[[Path], list[ManagedProcess]]] = {
    "zookeeper": _zookeeper, "hdfs": _hdfs, "kafka": _kafka, "hbase": _hbase}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", default=",".join(COMPONENTS))
    args = ap.parse_args()
    figures: dict[str, list[tuple[float, int]]] = {}
    for run in range(args.runs):
        for comp in args.only.split(","):
            root = Path(tempfile.mkdtemp(prefix=f"drt-bench-{comp}-"))
            procs = COMPONENTS[comp](root)
            try:
                for p in procs:
                    figures.setdefault(p.name, []).append((p.started_in_s or 0.0, p.rss_bytes()))
                    print(f"run {run + 1}: {p.describe()}", file=sys.stderr)
            finally:
                for p in reversed(procs):
                    p.stop()
    print(f"{'server':<16} {'start-up s (min/median/max)':>30} {'RSS MiB (median)':>18}")
    for name, vals in figures.items():
        ts = [t for t, _ in vals]
        rss = statistics.median(r for _, r in vals) / 2**20
        print(f"{name:<16} {min(ts):>10.1f} {statistics.median(ts):>9.1f} {max(ts):>9.1f} {rss:>18.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
