"""Benchmark: `replication_status` over S region servers × P peers × W WALs on a real ZooKeeper.

Prints the wall time of the toolkit's status read (pipelined asynchronous reads, four round
trips level by level) and the ratio against a baseline measured in the same run: the same
tree read one znode at a time with synchronous calls (what a naive reader does). Goal for
200 × 3 × 20 (12,000 WAL znodes): under 2 s.

    .venv/bin/python benchmarks/hbase_status_bench.py                   # 200 × 3 × 20
    .venv/bin/python benchmarks/hbase_status_bench.py --servers 50 --wals 5
    DRT_BENCH_ZK=host:2181 .venv/bin/python benchmarks/hbase_status_bench.py   # an existing ensemble

``--live`` (issue 42): 1,000 region servers. The ZooKeeper is real (one server started here), loaded
with the queues of 1,000 region servers × 3 peers × ``--wals`` WALs in HBase 2.6's layout, their
``<parent>/rs/<server>`` znodes (``RegionServerInfo`` with the info port) and the active master's
znode. What no machine here runs — 1,000 region servers' info servers and the master's — is one
local HTTP server in a child process (``--serve``) answering for all of them: each region server is
a loopback address of its own (``127.1.x.y``, its server name ``127.1.x.y,16020,<startcode>``), the
master ``127.0.0.1``; every request waits ``--latency-ms`` before its answer (stated in the output),
and the pages are those of HBase 2.6.1 (``/rs-status`` with its Replication Status table after
``--page-kb`` of the sections before it, ``/conf?format=json``, the ``sub=Server`` bean of ``/jmx``,
``/master-status`` with its Peers table). The WALs' files and the table descriptor are on the local
filesystem (``local_root``). The library's own code reads all of it: ``replication_status``,
``checked_status`` (what ``drt hbase status`` prints) and ``hbase_signals`` (the gate's HBase signal,
one policy per peer), each beside the same code with every read made one at a time (the baseline).

    .venv/bin/python benchmarks/hbase_status_bench.py --live                  # 1,000 × 3 × 20, 10 ms
    .venv/bin/python benchmarks/hbase_status_bench.py --live --servers 200 --latency-ms 50
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
if os.environ.get("DRT_BENCH_LIB"):  # another dr_toolkit tree (e.g. `git archive <commit> dr_toolkit`): before/after
    sys.path.insert(0, os.environ["DRT_BENCH_LIB"])

from kazoo.client import KazooClient

from dr_toolkit.hbase.encoding import Layout, decode_position, encode_position
from dr_toolkit.hbase.status import replication_status, wal_sort_key
from dr_toolkit.topology import ZooKeeperEndpoint
from dr_toolkit.zk.client import connect
from tests.support import servers


def bench_name(i: int) -> str:
    return f"rs{i:04d}.example.com,16020,{1700000000000 + i}"


def populate(zk: Any, parent: str, servers: int, peers: int, wals: int, *, dead_every: int = 0,
             name_of: Any = bench_name, rs_value: Any = None, position: Any = None) -> None:
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

    names = [name_of(i) for i in range(servers)]
    for i, n in enumerate(names):
        if not (dead_every and i % dead_every == 0):
            pending.append(zk.create_async(f"{lay.rs}/{n}", rs_value(n) if rs_value else b""))
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
                pos = position(n, w) if position else w * 1000
                pending.append(zk.create_async(f"{lay.queues}/{n}/{p}/{wal_name}", encode_position(pos)))
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
    ap.add_argument("--servers", type=int, default=None, help="region servers (200; with --live 1,000)")
    ap.add_argument("--peers", type=int, default=3)
    ap.add_argument("--wals", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--live", action="store_true", help="1,000 region servers: status, `drt hbase status` and the "
                                                        "gate's HBase signal against simulated info servers")
    ap.add_argument("--latency-ms", type=float, default=10.0, help="--live: each simulated page's answer delay")
    ap.add_argument("--page-kb", type=int, default=None, help="--live: /rs-status bytes before its Replication "
                                                              "Status section (default: as recorded, see RS_PAGE)")
    ap.add_argument("--no-baseline", action="store_true", help="--live: skip the serial baseline")
    ap.add_argument("--only", default="status,checked,gate", help="--live: which of status,checked,gate to run")
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # the simulated info servers
    args = ap.parse_args()
    if args.serve is not None:
        from benchmarks.hbase_sim import serve

        return serve(args.serve, args.servers or 1000, args.peers, args.latency_ms, args.page_kb)
    if args.live:
        from benchmarks.hbase_sim import live_bench

        return live_bench(args)
    args.servers = args.servers or 200

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
