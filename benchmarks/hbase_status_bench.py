"""Benchmark: `replication_status` over S region servers × P peers × W WALs on a real ZooKeeper.

Prints the wall time of the toolkit's status read (pipelined asynchronous reads, four round
trips level by level) and the ratio against a baseline measured in the same run: the same
tree read one znode at a time with synchronous calls (what a naive reader does). Goal for
200 × 3 × 20 (12,000 WAL znodes): under 2 s.

    .venv/bin/python benchmarks/hbase_status_bench.py                   # 200 × 3 × 20
    .venv/bin/python benchmarks/hbase_status_bench.py --servers 50 --wals 5
    DRT_BENCH_ZK=host:2181 .venv/bin/python benchmarks/hbase_status_bench.py   # an existing ensemble
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient

from dr_toolkit.hbase.encoding import Layout, decode_position, encode_position
from dr_toolkit.hbase.status import replication_status, wal_sort_key
from dr_toolkit.topology import ZooKeeperEndpoint
from dr_toolkit.zk.client import connect
from tests.support import servers


def populate(zk: Any, parent: str, servers: int, peers: int, wals: int, *, dead_every: int = 0) -> None:
    """Write a large queue tree quickly: pipelined async creates. The layout is the one a real HBase
    2.6 region server writes (tests/integration/test_hbase_status.py reads it from a real cluster):
    ``<parent>/rs/<server>`` live servers, ``<parent>/replication/rs/<server>/<peer>/<wal>`` with
    PBUF positions. No single machine runs 200 region servers, so the scale is synthetic."""
    from kazoo.exceptions import NodeExistsError, NoNodeError

    lay = Layout(parent)
    for base in (lay.rs, lay.queues, lay.peers):
        zk.ensure_path(base)
    pending: list[Any] = []

    def flush() -> None:
        for r in pending:
            try:
                r.get(timeout=30)
            except (NodeExistsError, NoNodeError):
                pass
        pending.clear()

    names = [f"rs{i:04d}.example.com,16020,{1700000000000 + i}" for i in range(servers)]
    for i, n in enumerate(names):
        if not (dead_every and i % dead_every == 0):
            pending.append(zk.create_async(f"{lay.rs}/{n}", b""))
        pending.append(zk.create_async(f"{lay.queues}/{n}", b""))
    flush()
    for n in names:
        for p in range(1, peers + 1):
            pending.append(zk.create_async(f"{lay.queues}/{n}/{p}", b""))
    flush()
    for n in names:
        host = n.split(",")[0]
        for p in range(1, peers + 1):
            for w in range(wals):
                wal_name = f"{host}%2C16020%2C{n.split(',')[2]}.{1700000000000 + w}"
                pending.append(zk.create_async(f"{lay.queues}/{n}/{p}/{wal_name}", encode_position(w * 1000)))
            if len(pending) > 5000:
                flush()
    flush()


def sequential_baseline(zk: KazooClient, parent: str, *, every_wal: bool) -> int:
    """One synchronous call per znode: live servers, queues, WAL lists, positions
    (of every WAL — the naive reader — or, like the toolkit, of each queue's oldest WAL)."""
    lay = Layout(parent)
    set(zk.get_children(lay.rs))
    for p in zk.get_children(lay.peers):
        zk.exists(lay.peer_state(p))
    n = 0
    for s in zk.get_children(lay.queues):
        for q in zk.get_children(f"{lay.queues}/{s}"):
            if q == "lock":
                continue
            wals = sorted(zk.get_children(f"{lay.queues}/{s}/{q}"), key=wal_sort_key)
            for w in wals if every_wal else wals[:1]:
                decode_position(zk.get(f"{lay.queues}/{s}/{q}/{w}")[0])
                n += 1
    return n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=200)
    ap.add_argument("--peers", type=int, default=3)
    ap.add_argument("--wals", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    proc = None
    address = os.environ.get("DRT_BENCH_ZK")
    if not address:
        proc = servers.zookeeper(Path(tempfile.mkdtemp(prefix="drt-bench-zk-"))).start()
        address = proc.address
    parent = f"/hbase-bench-{uuid.uuid4().hex[:8]}"
    raw = KazooClient(hosts=address, timeout=30)
    raw.start(timeout=30)
    try:
        t = time.perf_counter()
        populate(raw, parent, args.servers, args.peers, args.wals, dead_every=25)
        print(f"populated {args.servers} servers × {args.peers} peers × {args.wals} WALs "
              f"({args.servers * args.peers * args.wals} WAL znodes) in {time.perf_counter() - t:.1f}s")
        ep = ZooKeeperEndpoint(quorum=address, hbase_znode_parent=parent, call_timeout_s=60)
        with connect(ep, credentials=None) as zk:
            replication_status(zk, parent)  # warm-up
            ours = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                st = replication_status(zk, parent)
                ours.append(time.perf_counter() - t)
        base, same = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            n = sequential_baseline(raw, parent, every_wal=True)
            base.append(time.perf_counter() - t)
            t = time.perf_counter()
            sequential_baseline(raw, parent, every_wal=False)
            same.append(time.perf_counter() - t)
        o, b, s1 = statistics.median(ours), statistics.median(base), statistics.median(same)
        wal_total = sum(q.wals for q in st.queues)
        print(f"replication_status: {o:.3f}s median of {args.repeat} ({len(st.queues)} queues, {wal_total} WALs, "
              f"caught_up={st.caught_up}, {len(st.reasons)} reasons)")
        print(f"baseline A, naive (every znode incl. every WAL position, one at a time): {b:.3f}s ({n} WALs)")
        print(f"baseline B, the same znodes as the toolkit, one at a time: {s1:.3f}s")
        print(f"ratio A/ours: {b / o:.1f}x; ratio B/ours (pipelining alone): {s1 / o:.1f}x; "
              f"goal < 2 s: {'met' if o < 2 else 'NOT met'}")
        raw.delete(parent, recursive=True)
    finally:
        raw.stop()
        raw.close()
        if proc is not None:
            proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
