"""Benchmark: `drt failover check` on a large topology, and the import time of each DAG file.

Sets up, on real local servers (ZooKeeper, two real Kafka brokers, local directories):
K Kafka partitions (topics of 100 partitions, one mirrored record each), Q HBase replication
queues (one per region server, drained) and P HDFS policies (replicated once). Then times
the gate — the components read concurrently — against a baseline measured in the same run:
the same signals read one component after the other, and one Kafka topic after the other. Goal: < 3 s for 1,000 / 200 / 50.

It also times each DAG file in ``dags/`` (a fresh interpreter; ``airflow.sdk`` imported first,
so the figure is the DAG file's own cost) against the baseline of importing ``airflow.sdk``.
Goal: < 0.3 s each.

    .venv/bin/python benchmarks/gate_bench.py                      # 1,000 / 200 / 50
    .venv/bin/python benchmarks/gate_bench.py --partitions 200 --queues 50 --policies 10
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

import yaml  # noqa: E402

from dr_toolkit.access import Access  # noqa: E402
from dr_toolkit.failover.gate import check  # noqa: E402
from dr_toolkit.failover.signals import COMPONENTS, read_signals  # noqa: E402
from dr_toolkit.kafka import signals as kafka_signals  # noqa: E402
from dr_toolkit.ledger import open_ledger  # noqa: E402
from dr_toolkit.topology import load_topology  # noqa: E402
from dr_toolkit.zk.client import connect  # noqa: E402
from tests.support import servers  # noqa: E402


def produce_one_per_partition(address: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": address, "linger.ms": 0, "batch.num.messages": 1})
    for part in range(partitions):
        p.produce(topic, value=f"v{part}".encode(), key=b"k", partition=part, timestamp=1_700_000_000_000 + part)
        p.flush(10)


def setup(work: Path, zk_addr: str, hot: str, cold: str, *, partitions: int, queues: int, policies: int) -> Path:
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.hbase.encoding import Layout, encode_position
    from dr_toolkit.hbase.peers import PeerCluster, add_peer
    from drt_demo.mirror import create_topics

    topics = {f"bench-{i}": min(100, partitions - i * 100) for i in range((partitions + 99) // 100)}
    for addr in (hot, cold):
        create_topics(addr, topics)
    for t, n in topics.items():
        produce_one_per_partition(hot, t, n)
        produce_one_per_partition(cold, t, n)
    hdfs = []
    for i in range(policies):
        d = work / "hot" / f"p{i}"
        d.mkdir(parents=True)
        for j in range(3):
            (d / f"f{j}.txt").write_text(f"{i}-{j}\n")
        hdfs.append({"name": f"p{i}", "source": f"hdfs://hot/p{i}", "targets": [f"hdfs://cold/p{i}"]})
    (work / "cold").mkdir(exist_ok=True)
    zk = {"quorum": zk_addr, "dr_root": "/drt-bench", "connect_timeout_s": 5, "call_timeout_s": 10}
    doc = {"version": 1,
           "clusters": {"hot": {"role": "hot", "local_root": str(work / "hot"), "kafka": {"bootstrap_servers": hot},
                                "zookeeper": {**zk, "hbase_znode_parent": "/hbase-hot"}},
                        "cold": {"role": "cold", "local_root": str(work / "cold"),
                                 "kafka": {"bootstrap_servers": cold},
                                 "zookeeper": {**zk, "hbase_znode_parent": "/hbase-cold"}}},
           "policies": {"hdfs": hdfs, "hbase": [{"name": "hb", "peer_id": "1"}],
                        "kafka": [{"name": "k", "topics": sorted(topics), "groups": []}]},
           "ledger": {"url": f"sqlite:///{work / 'ledger.db'}"},
           "failover": {"max_lag_s": 300}}
    path = work / "drt.yaml"
    path.write_text(yaml.safe_dump(doc))
    topo = load_topology(path)
    ledger = open_ledger(topo, Access.from_env())
    for p in hdfs:
        replicate_policy(topo, p["name"], ledger, access=Access.from_env())
    ep = topo.hot.zookeeper
    assert ep is not None and topo.cold.zookeeper is not None
    with connect(ep, credentials=None) as z:
        # plain ZooKeeper, no HBase: written as for HBase 1.x (the toolkit writes no peer znode for 2.x)
        add_peer(z, "1", topo.cold.zookeeper.cluster_key, cluster=PeerCluster(ep.hbase_znode_parent, "1.4"))
        lay = Layout(ep.hbase_znode_parent)
        for s in range(queues):
            server = f"rs{s}.bench,16020,1700000000000"
            wal = f"rs{s}.bench%2C16020%2C1700000000000.1700000000001"
            z.ensure_path(f"{lay.rs}/{server}")
            z.ensure_path(f"{lay.queues}/{server}/1")
            z.create(f"{lay.queues}/{server}/1/{wal}", encode_position(100))
            # the WAL file on the hot filesystem, 100 bytes long: drain is proven by its length
            f = work / "hot" / "hbase" / "WALs" / server / wal
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"w" * 100)
    return path


def dag_import_times() -> list[tuple[str, float, float]]:
    code = ("import sys, time, runpy; t0 = time.perf_counter(); import airflow.sdk; t1 = time.perf_counter(); "
            "runpy.run_path(sys.argv[1]); t2 = time.perf_counter(); print(t1 - t0, t2 - t1)")
    from tests.support.airflow import env as airflow_env

    # dr_policies.py builds one DAG per policy of the topology: it gets the example's, as a deployment
    # gives it (the drt_default connection's extra, here from the environment: no metadata DB to ask)
    conn = {"conn_type": "generic", "extra": {"config": str(REPO / "examples/embedded.yaml")}}
    env = {**os.environ, **airflow_env(Path(tempfile.mkdtemp(prefix="drt-bench-airflow-"))),
           "AIRFLOW_CONN_DRT_DEFAULT": json.dumps(conn)}
    out = []
    for f in sorted((REPO / "dags").glob("*.py")):
        best_base, best = 1e9, 1e9
        for _ in range(3):
            r = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True, timeout=300,
                               env=env)
            if r.returncode != 0:
                print(f"  {f.name}: import failed: {r.stderr.strip().splitlines()[-1:]}")
                break
            base, own = map(float, r.stdout.strip().splitlines()[-1].split())
            best_base, best = min(best_base, base), min(best, own)
        else:
            out.append((f.name, best_base, best))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--queues", type=int, default=200)
    ap.add_argument("--policies", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-gate", action="store_true")
    ap.add_argument("--skip-dags", action="store_true", help="skip the DAG import timings")
    args = ap.parse_args()

    if not args.skip_gate:
        work = Path(tempfile.mkdtemp(prefix="drt-gate-bench-"))
        for d in ("zk", "kh", "kc"):
            (work / d).mkdir()
        zk = servers.zookeeper(work / "zk").start()
        hot = servers.kafka_broker(work / "kh", "bench-hot").start()
        cold = servers.kafka_broker(work / "kc", "bench-cold").start()
        try:
            t0 = time.perf_counter()
            path = setup(work, zk.address, hot.address, cold.address, partitions=args.partitions,
                         queues=args.queues, policies=args.policies)
            print(f"set-up: {args.partitions} Kafka partitions, {args.queues} HBase queues, {args.policies} HDFS "
                  f"policies in {time.perf_counter() - t0:.1f}s")
            topo = load_topology(path)
            ledger = open_ledger(topo, Access.from_env())
            gate_t, base_t = [], []
            parallel = getattr(kafka_signals, "PARALLEL", None)
            for _ in range(args.repeat):
                t = time.perf_counter()
                res = check(topo, ledger, timeout_s=120, access=Access.from_env())
                gate_t.append(time.perf_counter() - t)
                # baseline: one component after the other, one Kafka topic after the other
                if parallel is not None:
                    kafka_signals.PARALLEL = 1  # type: ignore[attr-defined, unused-ignore]
                t = time.perf_counter()
                for c in COMPONENTS:
                    read_signals(topo, ledger, Access.from_env(), components=(c,), timeout_s=120)
                base_t.append(time.perf_counter() - t)
                if parallel is not None:
                    kafka_signals.PARALLEL = parallel  # type: ignore[attr-defined, unused-ignore]
            print(f"gate verdict {res.verdict} over {len(res.signals)} signals, recovery point "
                  f"{res.to_json()['recovery_point']}" + ("" if res.go else f" — {res.reasons[:3]}"))
            hb = [s for s in res.signals if s.component == "hbase"]
            if hb:
                print(f"  HBase basis: {hb[0].basis}")
            for c in COMPONENTS:
                t = time.perf_counter()
                read_signals(topo, ledger, Access.from_env(), components=(c,), timeout_s=120)
                print(f"  component {c:<6} alone: {time.perf_counter() - t:.2f}s")
            g, b = min(gate_t), min(base_t)
            print(f"failover check (concurrent): {g:.2f}s   baseline (components and topics one at a time): {b:.2f}s   "
                  f"ratio {g / b:.2f}   goal < 3 s: {'met' if g < 3 else 'NOT met'}")
            # byte-code compiled first, as `pip install` (and `make setup`) does: this environment may
            # set PYTHONDONTWRITEBYTECODE, and a new process would then re-compile every module it imports
            import compileall
            import sysconfig

            compileall.compile_dir(REPO / "dr_toolkit", quiet=1)
            compileall.compile_dir(sysconfig.get_paths()["purelib"], quiet=1, workers=0)
            ends = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "--json",
                                    "failover", "check"], capture_output=True, text=True, timeout=300)
                ends.append(time.perf_counter() - t)
            e = min(ends)
            print(f"`drt failover check` end to end (new process): best {e:.2f}s of {args.repeat} "
                  f"(all: {', '.join(f'{x:.2f}' for x in ends)}), exit {r.returncode}, verdict "
                  f"{json.loads(r.stdout)['verdict'] if r.stdout else '?'}; ratio to the in-process baseline "
                  f"{e / b:.2f}; goal < 3 s: {'met' if e < 3 else 'NOT met'}")
        finally:
            for p in (cold, hot, zk):
                p.kill()
    if args.skip_dags:
        return
    print("DAG file import time (own cost after `import airflow.sdk`; baseline = airflow.sdk import):")
    for name, base, own in dag_import_times():
        print(f"  {name:<28} {own:.3f}s   baseline {base:.3f}s   ratio {own / base:.2f}   goal < 0.3 s: "
              f"{'met' if own < 0.3 else 'NOT met'}")


if __name__ == "__main__":
    main()
