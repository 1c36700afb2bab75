"""Benchmark: `drt failover check` as a new process against the real servers only.

`gate_bench.py` times the gate over many HBase queues written into ZooKeeper in HBase's layout;
this one runs it where every component is the real system: a real HBase pair (HBase 2.6 from its
Maven release, with its own ZooKeeper and HDFS; peer 1 hot → cold, its real replication queues),
a real Kafka pair (K partitions, one record each, mirrored), and P HDFS policies on the HBase
JVMs' real HDFS (hot → cold over WebHDFS, replicated once). The baseline, measured in the same
run, is the same signals read one component after the other, in-process.

    .venv/bin/python benchmarks/gate_real_bench.py                  # 1,000 partitions, 50 policies
    .venv/bin/python benchmarks/gate_real_bench.py --partitions 200 --policies 10

Goal (issue 22): < 3 s as a new process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import yaml  # noqa: E402
from gate_bench import produce_one_per_partition  # noqa: E402

from dr_toolkit.access import Access  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--policies", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.failover.gate import check
    from dr_toolkit.failover.signals import COMPONENTS, read_signals
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.topology import load_topology
    from drt_demo.mirror import create_topics
    from drt_servers.hbase import FAMILY, TABLE, hbase_pair
    from tests.support import servers

    work = Path(tempfile.mkdtemp(prefix="drt-gate-real-"))
    t0 = time.perf_counter()
    hot_hb, cold_hb = hbase_pair(work / "hbase")
    (work / "kh").mkdir()
    (work / "kc").mkdir()
    k_hot = servers.kafka_broker(work / "kh", "gate-hot").start()
    k_cold = servers.kafka_broker(work / "kc", "gate-cold").start()
    print(f"servers up in {time.perf_counter() - t0:.1f}s: HBase hot+cold (each with ZooKeeper and HDFS), "
          f"Kafka hot+cold")
    try:
        t0 = time.perf_counter()
        topics = {f"bench-{i}": min(100, args.partitions - i * 100) for i in range((args.partitions + 99) // 100)}
        for addr in (k_hot.address, k_cold.address):
            create_topics(addr, topics)
        for t, n in topics.items():
            produce_one_per_partition(k_hot.address, t, n)
            produce_one_per_partition(k_cold.address, t, n)
        hot_hb.put(0, 100)
        cold_hb.wait_rows(100)
        fs = WebHdfsFileSystem([f"http://127.0.0.1:{hot_hb.nn_http_port}"], user="hdfs")
        hdfs = []
        for i in range(args.policies):
            for j in range(3):
                fs.write(f"/bench/p{i}/f{j}.txt", [f"{i}-{j}\n".encode()])
            hdfs.append({"name": f"p{i}", "source": f"hdfs://hot/bench/p{i}", "targets": [f"hdfs://cold/bench/p{i}"]})

        def cluster(role: str, hb: object, kafka: str) -> dict[str, object]:
            return {"role": role, "hdfs": {"namenodes": [f"http://127.0.0.1:{hb.nn_http_port}"], "user": "hdfs"},  # type: ignore[attr-defined]
                    "kafka": {"bootstrap_servers": kafka, "timeout_s": 10},
                    "zookeeper": {"quorum": hb.zk_quorum, "hbase_znode_parent": hb.znode_parent,  # type: ignore[attr-defined]
                                  "dr_root": "/drt-bench", "connect_timeout_s": 5, "call_timeout_s": 10}}

        doc = {"version": 1,
               "clusters": {"hot": cluster("hot", hot_hb, k_hot.address), "cold": cluster("cold", cold_hb, k_cold.address)},
               "policies": {"hdfs": hdfs,
                            "hbase": [{"name": "hb", "peer_id": "1", "tables": [TABLE],
                                       "hbase_rootdir": f"{hot_hb.webhdfs_url}{hot_hb.rootdir}"}],
                            "kafka": [{"name": "k", "topics": sorted(topics), "groups": []}]},
               "ledger": {"url": f"sqlite:///{work / 'ledger.db'}"},
               "failover": {"max_lag_s": 300}}
        path = work / "drt.yaml"
        path.write_text(yaml.safe_dump(doc))
        topo = load_topology(path)
        ledger = open_ledger(topo, Access.from_env())
        for p in hdfs:
            replicate_policy(topo, str(p["name"]), ledger, access=Access.from_env())
        print(f"set-up: {args.partitions} partitions, {args.policies} HDFS policies, table {TABLE}:{FAMILY} "
              f"replicated, in {time.perf_counter() - t0:.1f}s")

        gate_t, base_t = [], []
        res = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            res = check(topo, ledger, timeout_s=120, access=Access.from_env())
            gate_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            for c in COMPONENTS:
                read_signals(topo, ledger, Access.from_env(), components=(c,), timeout_s=120)
            base_t.append(time.perf_counter() - t)
        assert res is not None
        print(f"gate verdict {res.verdict} over {len(res.signals)} signals"
              + ("" if res.go else f" — {res.reasons[:3]}"))
        for c in COMPONENTS:
            t = time.perf_counter()
            read_signals(topo, ledger, Access.from_env(), components=(c,), timeout_s=120)
            print(f"  component {c:<6} alone: {time.perf_counter() - t:.2f}s")
        g, b = min(gate_t), min(base_t)
        print(f"check(access=Access.from_env()) in-process: {g:.2f}s   baseline (components one at a time): {b:.2f}s   ratio {g / b:.2f}")
        ends = []
        r = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "--json",
                                "failover", "check"], capture_output=True, text=True, timeout=300)
            ends.append(time.perf_counter() - t)
        assert r is not None
        e = min(ends)
        verdict = json.loads(r.stdout)["verdict"] if r.stdout.strip().startswith("{") else "?"
        print(f"`drt failover check` as a new process: best {e:.2f}s of {args.repeat} "
              f"(all: {', '.join(f'{x:.2f}' for x in ends)}), exit {r.returncode}, verdict {verdict}; "
              f"goal < 3 s: {'met' if e < 3 else 'NOT met'}")
    finally:
        for p in (k_cold, k_hot):
            p.kill()
        cold_hb.stop()
        hot_hb.stop()


if __name__ == "__main__":
    main()
