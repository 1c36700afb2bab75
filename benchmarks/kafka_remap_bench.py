"""Benchmark: remap a consumer group over P partitions × N records on real Kafka brokers.

Prints, for the remap (timestamp binary search + fingerprint window read):
- the worst probes per partition against the bound ⌈log2 n⌉ + 3,
- the wall time to remap the whole group, and the share of partitions remapped ``exact``,
- the ratio against a baseline measured in the same run: a linear scan of every cold
  partition for the checkpoint's fingerprint (what you do without a search).

Data: per partition N records with runs of up to 50 equal timestamps and CreateTime going
backwards now and then; the cold mirror holds 0–50 unrelated records first (offset shift);
the group has consumed a random prefix (0…N) of each partition.

    .venv/bin/python benchmarks/kafka_remap_bench.py                # 100 × 2,000
    .venv/bin/python benchmarks/kafka_remap_bench.py --partitions 10 --records 2000

The brokers are real Apache Kafka 4.1 (``drt_servers.kafka``, single-node KRaft): a fetch
seeks through the offset index, so its cost does not grow with the log.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dr_toolkit.access import Access
from dr_toolkit.kafka import api, offsets
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.kafka.remap import probe_budget
from dr_toolkit.kafka.rows import Checkpoint
from dr_toolkit.topology import parse_topology
from tests.support import servers

QUIET = {"log_level": 0}


def timestamps(rng: random.Random, n: int) -> list[int]:
    out, ts = [], 1_700_000_000_000
    while len(out) < n:
        run = rng.choice([1, 1, 1, 2, 5, 50, rng.randrange(1, 50)])
        if rng.random() < 0.05:
            ts -= rng.randrange(1, 3)
        out.extend([ts] * min(run, n - len(out)))
        ts += rng.randrange(1, 10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="drt-kbench-"))
    hot = servers.kafka_broker(work, "bench-hot").start()
    cold = servers.kafka_broker(work, "bench-cold").start()
    try:
        run(args, rng, hot.address, cold.address, work)
    finally:
        hot.kill()
        cold.kill()


def run(args: argparse.Namespace, rng: random.Random, hot: str, cold: str, work: Path) -> None:
    P, N = args.partitions, args.records
    topic, group = "bench", "bench-group"
    for addr in (hot, cold):
        a = AdminClient({"bootstrap.servers": addr, **QUIET})
        for f in a.create_topics([NewTopic(topic, P, 1)], request_timeout=30).values():
            f.result(timeout=60)
    t0 = time.monotonic()
    ph = Producer({"bootstrap.servers": hot, "linger.ms": 0, **QUIET})
    pc = Producer({"bootstrap.servers": cold, "linger.ms": 0, **QUIET})
    shifts, consumed = {}, {}
    for p in range(P):
        shifts[p] = rng.randrange(0, 51)
        for i in range(shifts[p]):
            pc.produce(topic, value=f"other-{i}".encode(), partition=p, timestamp=1_000 + i)
            pc.flush(10)
        for i, ts in enumerate(timestamps(rng, N)):
            key, value = f"k{i % 13}".encode(), f"p{p}-r{i}".encode()
            for prod in (ph, pc):
                prod.produce(topic, key=key, value=value, partition=p, timestamp=ts, headers=[("src", b"hot")])
                prod.flush(10)
        consumed[p] = rng.choice([0, N, rng.randrange(0, N + 1), rng.randrange(0, N + 1)])
    produce_s = time.monotonic() - t0
    c = Consumer({"bootstrap.servers": hot, "group.id": group, "enable.auto.commit": False, **QUIET})
    c.commit(offsets=[TopicPartition(topic, p, consumed[p]) for p in range(P)], asynchronous=False)
    c.close()
    print(f"setup: produced {P * N:,} records to hot and {P * N + sum(shifts.values()):,} to cold, one per "
          f"request, in {produce_s:.1f}s ({2 * P * N / produce_s:,.0f} records/s)")

    topo = parse_topology(
        "version: 1\nclusters:\n"
        f"  hot: {{role: hot, kafka: {{bootstrap_servers: '{hot}', timeout_s: 120, max_clock_skew_s: 0.005}}}}\n"
        f"  cold: {{role: cold, kafka: {{bootstrap_servers: '{cold}', timeout_s: 120}}}}\n"
        f"policies:\n  kafka:\n    - {{name: b, topics: [{topic}], groups: [{group}]}}\n"
        f"ledger: {{url: 'sqlite:///{work}/ledger.db'}}\n")
    from dr_toolkit.ledger import open_ledger

    ledger = open_ledger(topo, Access.from_env())
    t0 = time.monotonic()
    ck = api.checkpoint(topo, ledger, access=Access.from_env())
    ck_s = time.monotonic() - t0
    t0 = time.monotonic()
    mirror = Mirror.of(topo, Access.from_env())
    with mirror.client("cold") as rc:  # the remap step of api.remap, counted
        done = offsets.remap_groups(mirror, rc, {group: [Checkpoint.from_row(r) for r in ledger.latest_checkpoint(group)]})
    res = {"partitions": [r.to_json() for r in done.groups[group].rows]}
    remap_fetches, remap_records = done.fetches, done.records_read
    remap_s = time.monotonic() - t0

    wrong, worst, worst_p, over = 0, 0, -1, 0
    for r in res["partitions"]:
        p = r["partition"]
        n = N + shifts[p]
        if r["target_offset"] != shifts[p] + consumed[p]:
            wrong += 1
        if r["probes"] > worst:
            worst, worst_p = r["probes"], p
        if r["probes"] > probe_budget(n):
            over += 1
    exact = sum(1 for r in res["partitions"] if r["method"] == "exact")

    # Baseline: read each cold partition from its start until the checkpoint's fingerprint.
    rows = {r["partition_id"]: r for r in ck["partitions"]}
    t0 = time.monotonic()
    with KafkaCluster(cold, timeout_s=120) as kc:
        for p in range(P):
            fp = (rows[p]["fingerprint"] or "").removeprefix("@next:").partition("#")[0]
            lo, hi = kc.watermarks(topic, p)
            for rec in kc.read(topic, p, lo, hi):
                if rec.fingerprint == fp:
                    break
        base_fetches, base_records = kc.fetches, kc.records_read
    base_s = time.monotonic() - t0

    n_max = N + 50
    print(f"checkpoint of {P} partitions: {ck_s:.2f}s")
    print(f"remap of {P} partitions × {N:,} records: {remap_s:.2f}s wall, "
          f"exact {exact}/{P} = {100 * exact / P:.0f}%, wrong targets: {wrong}")
    print(f"probes: worst {worst} (partition {worst_p}); bound ⌈log2 n⌉+3 = "
          f"{math.ceil(math.log2(n_max))}+3 = {probe_budget(n_max)} for n ≤ {n_max}; partitions over bound: {over}")
    print(f"baseline linear fingerprint scan: {base_s:.2f}s → remap/baseline wall = {remap_s / base_s:.2f}×")
    print(f"work: remap {remap_fetches:,} fetch calls / {remap_records:,} records read; baseline "
          f"{base_fetches:,} fetch calls / {base_records:,} records read → records ratio "
          f"{remap_records / max(1, base_records):.3f}×")


if __name__ == "__main__":
    main()
