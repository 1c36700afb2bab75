"""Benchmark: checkpoint and remap G consumer groups × P partitions on the embedded brokers.

Prints:
- groups translated / requested (every partition of the group remapped to the exact target),
- wall time of the checkpoint and of the remap (goal < 60 s each at 4,000 × 10),
- fetches per distinct search against ⌈log2 n⌉ + 3,
- the ratio against the serial path measured in the same run: per group its own metadata
  call, OffsetFetch, watermarks and searches on one client, nothing shared (what the toolkit
  did before), timed on a sample of groups and scaled to G (printed as such).

Data: one topic of P partitions, n records each with strictly growing CreateTimes (declared
skew 0), mirrored to cold after a few unrelated records (offset shift). Each group commits
on every partition: half of them at the end (caught up), the others at one of ``--spread``
positions per partition (groups of one application cluster around the same offsets).

    .venv/bin/python benchmarks/kafka_scale_bench.py                       # 4,000 × 10
    .venv/bin/python benchmarks/kafka_scale_bench.py --groups 400 --records 500
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dr_toolkit.access import Access
from dr_toolkit.kafka import api, batch
from dr_toolkit.kafka.remap import probe_budget
from dr_toolkit.topology import parse_topology
from tests.support import servers

QUIET = {"log_level": 0}
T0 = 1_700_000_000_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=4000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--spread", type=int, default=20, help="distinct committed positions per partition")
    ap.add_argument("--serial-sample", type=int, default=20)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--mm2", action="store_true", help=(
        "then start real MirrorMaker 2 on the same brokers (emit.checkpoints.interval.seconds=1, its lowest "
        "whole value) and time its checkpoints for the same groups"))
    ap.add_argument("--mm2-timeout", type=float, default=900.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="drt-kscale-"))
    hot = servers.kafka_broker(work, "scale-hot").start()
    cold = servers.kafka_broker(work, "scale-cold").start()
    try:
        run(args, random.Random(args.seed), hot.address, cold.address, work)
    finally:
        hot.kill()
        cold.kill()


def run(args: argparse.Namespace, rng: random.Random, hot: str, cold: str, work: Path) -> None:
    G, P, N = args.groups, args.partitions, args.records
    topic = "scale"
    for addr in (hot, cold):
        a = AdminClient({"bootstrap.servers": addr, **QUIET})
        for f in a.create_topics([NewTopic(topic, P, 1)], request_timeout=30).values():
            f.result(timeout=60)
    t0 = time.monotonic()
    ph = Producer({"bootstrap.servers": hot, "linger.ms": 0, **QUIET})
    pc = Producer({"bootstrap.servers": cold, "linger.ms": 0, **QUIET})
    shift = {p: rng.randrange(1, 20) for p in range(P)}
    for p in range(P):
        for i in range(shift[p]):
            pc.produce(topic, value=f"other-{i}".encode(), partition=p, timestamp=1_000 + i)
            pc.flush(10)
        for i in range(N):
            for prod in (ph, pc):
                prod.produce(topic, key=f"k{i % 13}".encode(), value=f"p{p}-r{i}".encode(), partition=p,
                             timestamp=T0 + 10 * i)
                prod.flush(10)
    positions = {p: [rng.randrange(0, N + 1) for _ in range(args.spread)] for p in range(P)}
    committed = {f"g{g:05d}": {p: (N if g % 2 == 0 else rng.choice(positions[p])) for p in range(P)}
                 for g in range(G)}
    admin = AdminClient({"bootstrap.servers": hot, **QUIET})

    def commit(g: str) -> None:
        # The first commits meet a coordinator still creating __consumer_offsets: the request
        # "succeeds" with an error on each partition — committed again until none has one.
        tps = [TopicPartition(topic, p, o) for p, o in committed[g].items()]
        for _ in range(100):
            res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)])[g].result(timeout=60)
            if not any(tp.error for tp in res.topic_partitions):
                return
            time.sleep(0.2)
        raise RuntimeError(f"group {g}: commit refused: {[tp.error for tp in res.topic_partitions if tp.error]}")

    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(commit, committed))
    print(f"setup: {P} partitions × {N:,} records on hot and cold (+ shifts), {G:,} groups committed, "
          f"{time.monotonic() - t0:.1f}s")

    topo = parse_topology(
        "version: 1\nclusters:\n"
        f"  hot: {{role: hot, kafka: {{bootstrap_servers: '{hot}', timeout_s: 60, max_clock_skew_s: 0}}}}\n"
        f"  cold: {{role: cold, kafka: {{bootstrap_servers: '{cold}', timeout_s: 60}}}}\n"
        f"policies:\n  kafka:\n    - {{name: b, topics: [{topic}], groups: [{', '.join(committed)}]}}\n"
        f"ledger: {{url: 'sqlite:///{work}/ledger.db'}}\n")
    from dr_toolkit.ledger import open_ledger

    ledger = open_ledger(topo, Access.from_env())
    groups = list(committed)

    t0 = time.monotonic()
    ck = api.checkpoint(topo, ledger, groups=groups, access=Access.from_env())
    ck_s = time.monotonic() - t0
    t0 = time.monotonic()
    rm = batch.remap_many(topo, ledger, groups, access=Access.from_env())
    rm_s = time.monotonic() - t0

    t0 = time.monotonic()
    ap_res = batch.apply_many(topo, ledger, rm["groups"], run_id="scale-bench", access=Access.from_env())
    ap_s = time.monotonic() - t0
    cold_admin = AdminClient({"bootstrap.servers": cold, **QUIET})
    check = rng.sample(groups, min(50, G))
    applied_ok = sum(
        1 for g in check
        if {tp.partition: tp.offset for tp in cold_admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g)])[g].result(timeout=60).topic_partitions}
        == {p: shift[p] + committed[g][p] for p in range(P)})

    translated = 0
    off: list[str] = []
    for g, parts in rm["groups"].items():
        bad = [r for r in parts
               if not (r["method"] == "exact" and r["target_offset"] == shift[r["partition"]] + committed[g][r["partition"]])]
        translated += not bad and len(parts) == P
        off += [f"{g}[{r['partition']}] committed {committed[g][r['partition']]}: {r['method']} {r['target_offset']} "
                f"(truth {shift[r['partition']] + committed[g][r['partition']]}{', ' + r['error'] if r.get('error') else ''})"
                for r in bad]
    n = N + max(shift.values())
    budget = probe_budget(n)
    per_search = rm["fetches"] / max(1, rm["distinct_searches"])
    k = rm["distinct_searches"] / P  # distinct targets per partition

    # The serial path on a sample: each group alone, one client, nothing shared.
    sample = rng.sample(groups, min(args.serial_sample, G))
    t0 = time.monotonic()
    for g in sample:
        api.checkpoint(topo, ledger, groups=[g], workers=1, access=Access.from_env())
    serial_ck = (time.monotonic() - t0) / len(sample) * G
    t0 = time.monotonic()
    for g in sample:
        batch.remap_many(topo, ledger, [g], workers=1, access=Access.from_env())
    serial_rm = (time.monotonic() - t0) / len(sample) * G

    print(f"groups translated / requested: {translated:,} / {G:,}"
          + (f"; not exact: {'; '.join(off[:5])}" if off else ""))
    print(f"checkpoint: {ck_s:.1f}s wall for {G:,} groups × {P} partitions ({len(ck['partitions']):,} rows, "
          f"{ck['distinct_searches']:,} distinct searches, {ck['fetches']:,} fetches)")
    print(f"remap: {rm_s:.1f}s wall (goal < 60 s: {'met' if rm_s < 60 else 'NOT met'}; {rm['distinct_searches']:,} distinct searches, {rm['fetches']:,} fetches = "
          f"{per_search:.2f} per search; bound ⌈log2 n⌉+3 = {math.ceil(math.log2(n))}+3 = {budget} for n = {n:,}); "
          f"per partition {rm['fetches'] / P:.1f} fetches for k = {k:.0f} targets (goal O(k·log2(n/k)) = "
          f"{k * max(1.0, math.log2(n / max(k, 1))):.0f}; one search each would be k·{budget} = {k * budget:.0f})")
    print(f"apply: {ap_s:.1f}s wall for {G:,} groups ({len(ap_res['failed'])} failed); read back on a sample: "
          f"{applied_ok}/{len(check)} groups hold exactly the remapped offsets")
    print(f"serial path (measured on {len(sample)} groups, scaled to {G:,}): checkpoint ≈ {serial_ck:.0f}s, "
          f"remap ≈ {serial_rm:.0f}s → batched/serial = {ck_s / serial_ck:.3f}× (checkpoint), "
          f"{rm_s / serial_rm:.3f}× (remap)")
    if args.mm2:
        mm2_compare(args, hot, cold, work, committed, rm_s)


def mm2_compare(args: argparse.Namespace, hot: str, cold: str, work: Path, committed: dict[str, dict[int, int]],
                rm_s: float) -> None:
    """Real MirrorMaker 2 (dedicated mode, DefaultReplicationPolicy: cold topic ``hot.scale``) on
    the same brokers and groups: the time from its start until every group's every partition has
    a checkpoint of its committed offset, the checkpoint records it wrote meanwhile, and how many
    of its translations are exact (the copy on cold has no offset shift: truth = committed)."""
    from dr_toolkit.kafka.client import KafkaCluster
    from dr_toolkit.kafka.mm2 import read_all_checkpoints
    from drt_servers.kafka import MirrorMaker2

    groups = set(committed)
    P = args.partitions
    t0 = time.monotonic()
    mm = MirrorMaker2(work / "mm2", hot, cold, topics="scale", groups="g[0-9]+", heap="512m",
                      extra={"emit.checkpoints.interval.seconds": 1, "sync.group.offsets.enabled": "false"})
    mm.start()
    try:
        started = time.monotonic() - t0
        mm.wait_mirrored(["scale"], timeout=args.mm2_timeout)
        mirrored = time.monotonic() - t0
        remote = mm.remote_topic("scale")
        done_at, cps, written, first_all = None, {}, 0, None
        with KafkaCluster(cold, timeout_s=60) as c:
            while time.monotonic() - t0 < args.mm2_timeout:
                time.sleep(2.0)
                cps = read_all_checkpoints(c, mm.checkpoints_topic, groups)
                written = sum(hi - lo for lo, hi in (c.watermarks(mm.checkpoints_topic, q)
                                                     for q in range(c.topics().get(mm.checkpoints_topic, 0))))
                have = sum(1 for g in groups if len(cps.get(g, {})) == P)
                if first_all is None and have == len(groups):
                    first_all = time.monotonic() - t0
                if all(cps.get(g, {}).get((remote, p), (-1, -1))[0] == o
                       for g, offs in committed.items() for p, o in offs.items()):
                    done_at = time.monotonic() - t0
                    break
        exact = sum(1 for g, offs in committed.items() for p, o in offs.items()
                    if cps.get(g, {}).get((remote, p)) == (o, o))
        behind = [o - cps[g][(remote, p)][1] for g, offs in committed.items() for p, o in offs.items()
                  if (remote, p) in cps.get(g, {})]
    finally:
        mm.kill()
    total = len(groups) * P
    print(f"MirrorMaker 2 ({len(groups):,} groups × {P} partitions, emit.checkpoints.interval.seconds=1): "
          f"started {started:.1f}s, topic mirrored {mirrored:.1f}s, every group with a checkpoint on every "
          f"partition {'-' if first_all is None else f'{first_all:.1f}s'}, every checkpoint at the committed "
          f"offset {f'NOT within {args.mm2_timeout:.0f}s' if done_at is None else f'{done_at:.1f}s'} "
          f"(from its start; {'-' if done_at is None else f'{done_at - mirrored:.1f}s'} after the mirror caught up)")
    print(f"MirrorMaker 2 checkpoint records written: {written:,} for {total:,} group-partitions; exact "
          f"translations {exact:,} / {total:,}; re-reads per partition: max {max(behind, default=0):,}, "
          f"mean {sum(behind) / max(1, len(behind)):.1f}")
    if done_at is not None:
        print(f"drt remap / MM2 checkpoints after the mirror caught up = {rm_s / max(1e-9, done_at - mirrored):.3f}×")


if __name__ == "__main__":
    main()
