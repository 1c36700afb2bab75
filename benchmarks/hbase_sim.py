"""`hbase_status_bench.py --live`: 1,000 HBase region servers — a real ZooKeeper in HBase 2.6's layout, the
region servers' and the master's info servers simulated by one local HTTP server (a child process).

Benchmark-only: nothing here is imported by dr_toolkit/. The toolkit's own code reads everything
(``replication_status``, ``checked_status``, ``hbase_signals``); what is counted is counted around it
(ZooKeeper reads at ``ZkClient._many``, HTTP requests at the simulated server, filesystem calls at the
local filesystem's methods).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
START = 1700000000000
WAL_BYTES = 1000  # each region server's current WAL: the queues' positions reach its end (drain proven)
MASTER_HOST = "127.0.0.1"

# The sections of a region server's /rs-status before "Replication Status" (server metrics, block
# cache, tasks, one row per online region). HBase 2.6.1's page for the test pair's region server
# (a handful of regions) is about 40 KB; a region server with a few hundred regions renders more.
RS_PAGE_KB = 64
CONF_PROPERTIES = 900  # HBase 2.6.1's /conf?format=json lists ~900 properties (all defaults + site)
SERVER_BEAN_ATTRIBUTES = 250  # its sub=Server bean has ~250 attributes


def host_of(i: int) -> str:
    """Region server i's own loopback address: 127.1.x.y (Linux answers all of 127/8 on lo)."""
    return f"127.1.{i // 250}.{i % 250 + 1}"


def index_of(host: str) -> int | None:
    parts = host.split(".")
    if len(parts) != 4 or parts[:2] != ["127", "1"]:
        return None
    return int(parts[2]) * 250 + int(parts[3]) - 1


def name_of(i: int) -> str:
    return f"{host_of(i)},16020,{START + i}"


# --- the simulated info servers (child process) ------------------------------------------------------

PEER_HEAD = ("<tr><th>Peer Id</th><th>Cluster Key</th><th>Endpoint</th><th>State</th><th>IsSerial</th>"
             "<th>Remote WAL</th><th>Sync Replication State</th><th>Bandwidth</th><th>ReplicateAll</th>"
             "<th>Namespaces</th><th>Exclude Namespaces</th><th>Table Cfs</th><th>Exclude Table Cfs</th></tr>")
RS_HEAD = ("<tr><th>PeerId</th><th>WalGroup</th><th>Current Log</th><th>Size</th><th>Queue Size</th>"
           "<th>Offset</th></tr>")


def pages(servers: int, peers: int, page_kb: int, cold_key: str) -> tuple[Any, bytes, bytes]:
    """(rs_status(i), conf, master_status) as HBase 2.6.1 renders them."""
    region_row = ("<tr><td><a href='region.jsp?name=0123456789abcdef'>bench:t,row-{n},1700000000000."
                  "0123456789abcdef0123456789abcdef.</a></td><td>row-{n}</td><td>row-{m}</td><td>1</td>"
                  "<td>0</td><td>42</td><td>0</td><td>0</td></tr>\n")
    filler_rows, size = [], 0
    n = 0
    while size < page_kb * 1024:
        r = region_row.format(n=n, m=n + 1)
        filler_rows.append(r)
        size += len(r)
        n += 1
    head = ("<!DOCTYPE html><html><head><title>HBase Region Server</title></head><body>"
            "<h2>Server Metrics</h2><h2>Block Cache</h2><h2>Tasks</h2><h2>Regions</h2><table class='table'>"
            "<tr><th>Region Name</th><th>Start Key</th><th>End Key</th><th>ReplicaID</th></tr>\n"
            + "".join(filler_rows) + "</table>")

    def rs_status(i: int) -> bytes:
        h = host_of(i)
        rows = "".join(f"<tr><td>{p}</td><td>{h}%2C16020%2C{START + i}</td><td>hdfs://nn/hbase/WALs/{name_of(i)}/"
                       f"{h}%2C16020%2C{START + i}.{START}</td><td>{WAL_BYTES}</td><td>0</td><td>{WAL_BYTES}</td></tr>"
                       for p in range(1, peers + 1))
        return (head + f"<section><h2>Replication Status</h2><table class='table'>{RS_HEAD}{rows}</table></section>"
                "<h2>Software Attributes</h2><table><tr><td>HBase Version</td><td>2.6.1</td></tr></table>"
                "</body></html>").encode()

    props = [{"key": f"hbase.bench.property.{k}", "value": f"value-{k}", "isFinal": False,
              "resource": "hbase-default.xml"} for k in range(CONF_PROPERTIES)]
    props += [{"key": "hbase.regionserver.metrics.period", "value": "5000", "isFinal": False,
               "resource": "hbase-default.xml"},
              {"key": "hbase.replication.bulkload.enabled", "value": "false", "isFinal": False,
               "resource": "hbase-default.xml"}]
    conf = json.dumps({"properties": props}).encode()
    peer_rows = "".join(f"<tr><td>{p}</td><td>{cold_key}</td><td></td><td>ENABLED</td><td>false</td><td></td>"
                        "<td>NONE</td><td>UNLIMITED</td><td>true</td><td></td><td></td><td></td><td></td></tr>"
                        for p in range(1, peers + 1))
    master = (f"<html><body><h2>Peers</h2><table class='table'>{PEER_HEAD}{peer_rows}"
              f"<tr><td>Total: {peers}</td></tr></table></body></html>").encode()
    return rs_status, conf, master


def jmx(i: int) -> bytes:
    bean: dict[str, Any] = {"name": "Hadoop:service=HBase,name=RegionServer,sub=Server", "modelerType": "RegionServer,sub=Server",
                            "tag.serverName": name_of(i), "tag.Context": "regionserver",
                            "mutationsWithoutWALCount": 0, "mutationsWithoutWALSize": 0, "Bulkload_num_ops": 0}
    bean.update({f"metric{k}": k for k in range(SERVER_BEAN_ATTRIBUTES)})
    return json.dumps({"beans": [bean]}).encode()


def serve(port: int, servers: int, peers: int, latency_ms: float, page_kb: int | None) -> int:
    cold_key = os.environ["DRT_SIM_COLD_KEY"]
    rs_status, conf, master = pages(servers, peers, page_kb if page_kb is not None else RS_PAGE_KB, cold_key)
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    delay = latency_ms / 1000.0
    bodies: dict[tuple[str, int], bytes] = {}  # rendered once per region server: the server's CPU is not ours

    def rendered(kind: str, i: int) -> bytes:
        b = bodies.get((kind, i))
        if b is None:
            b = bodies[(kind, i)] = rs_status(i) if kind == "rs" else jmx(i)
        return b

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, body: bytes, ctype: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            path = self.path.split("?", 1)[0]
            if path == "/_stats":
                with lock:
                    body = json.dumps(dict(counts)).encode()
                    if "reset" in self.path:
                        counts.clear()
                self._send(body, "application/json")
                return
            with lock:
                counts[path] += 1
            time.sleep(delay)
            i = index_of(host)
            if host == MASTER_HOST and path == "/master-status":
                self._send(master, "text/html")
            elif i is None or not 0 <= i < servers:
                self.send_error(404)
            elif path == "/rs-status":
                self._send(rendered("rs", i), "text/html")
            elif path == "/conf":
                self._send(conf, "application/json")
            elif path == "/jmx":
                self._send(rendered("jmx", i), "application/json")
            else:
                self.send_error(404)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    srv = Server(("0.0.0.0", port), Handler)
    print("ready", flush=True)
    srv.serve_forever()
    return 0


# --- the benchmark ------------------------------------------------------------------------------------


def stats(port: int, reset: bool = True) -> dict[str, int]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats{'?reset' if reset else ''}", timeout=30) as r:
        out: dict[str, int] = json.loads(r.read())
        return out


class Counting:
    """Counts the toolkit's ZooKeeper reads (znodes, by operation, and round trips) and local
    filesystem calls, around the library's own methods (the benchmark's process only)."""

    def __init__(self) -> None:
        from dr_toolkit.fs.local import LocalFileSystem
        from dr_toolkit.zk.client import ZkClient

        self.zk: Counter[str] = Counter()
        self.fs: Counter[str] = Counter()
        self.serial = False
        orig_many = ZkClient._many
        me = self

        def many(client: Any, op: str, paths: Any, fn: Any) -> list[Any]:
            if paths:
                me.zk[op] += len(paths)
                me.zk["round trips"] += len(paths) if me.serial else 1
            if me.serial:  # the baseline: one znode at a time, each answer awaited
                return [x for p in paths for x in orig_many(client, op, [p], fn)]
            return orig_many(client, op, paths, fn)

        ZkClient._many = many  # type: ignore[method-assign]
        for name in ("stat", "read", "list_files"):
            orig = getattr(LocalFileSystem, name)

            def wrapped(fs: Any, *a: Any, _orig: Any = orig, _name: str = name, **kw: Any) -> Any:
                with self._lock:
                    self.fs[_name] += 1
                return _orig(fs, *a, **kw)

            setattr(LocalFileSystem, name, wrapped)
        self._lock = threading.Lock()

    def take(self) -> tuple[dict[str, int], dict[str, int]]:
        z, f = dict(self.zk), dict(self.fs)
        self.zk.clear()
        self.fs.clear()
        return z, f


def serial(on: bool, counting: Counting) -> None:
    """The baseline: every read one at a time (ZooKeeper znodes, region-server pages, WAL lengths)."""
    from dr_toolkit.hbase import signals, status

    counting.serial = on
    signals.RS_WORKERS = 1 if on else 32
    signals.LIVE_DEADLINE_S = 3600.0 if on else 30.0
    status.LENGTH_WORKERS = 1 if on else 16


def live_bench(args: Any) -> int:
    import yaml
    from kazoo.client import KazooClient

    from dr_toolkit.access import Access
    from dr_toolkit.hbase.encoding import PB_MAGIC, Layout, PeerConfig, _ld, _vi, encode_peer, encode_state
    from dr_toolkit.hbase.signals import checked_status, hbase_signals
    from dr_toolkit.hbase.status import replication_status
    from dr_toolkit.hbase.tabledesc import encode_tabledesc, tabledesc_path
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.topology import load_topology
    from dr_toolkit.zk.client import connect
    from tests.support import servers as srv
    from tests.support.procs import free_port

    sys.path.insert(0, str(REPO / "benchmarks"))
    from hbase_status_bench import populate  # the existing mode's loader, same layout

    n, peers, wals = args.servers or 1000, args.peers, args.wals
    work = Path(tempfile.mkdtemp(prefix="drt-hbase-live-bench-"))
    zk_proc = srv.zookeeper(work / "zk").start() if not os.environ.get("DRT_BENCH_ZK") else None
    address = os.environ.get("DRT_BENCH_ZK") or zk_proc.address  # type: ignore[union-attr]
    tag = uuid.uuid4().hex[:8]
    p_status, p_gate, p_cold = f"/hbase-{tag}-status", f"/hbase-{tag}-gate", f"/hbase-{tag}-cold"
    zk_sec = {"quorum": address, "dr_root": f"/drt-{tag}", "connect_timeout_s": 10, "call_timeout_s": 600}
    (work / "hot").mkdir()
    (work / "cold").mkdir()
    doc = {"version": 1,
           "clusters": {"hot": {"role": "hot", "local_root": str(work / "hot"),
                                "zookeeper": {**zk_sec, "hbase_znode_parent": p_gate}},
                        "cold": {"role": "cold", "local_root": str(work / "cold"),
                                 "zookeeper": {**zk_sec, "hbase_znode_parent": p_cold}}},
           "policies": {"hbase": [{"name": f"hb{p}", "peer_id": str(p), "tables": ["default:orders"]}
                                  for p in range(1, peers + 1)]},
           "ledger": {"url": f"sqlite:///{work / 'ledger.db'}"}, "failover": {"max_lag_s": 300}}
    (work / "drt.yaml").write_text(yaml.safe_dump(doc))
    topo = load_topology(work / "drt.yaml")
    assert topo.cold.zookeeper is not None
    cold_key = topo.cold.zookeeper.cluster_key
    port = free_port()
    sim = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "hbase_status_bench.py"), "--serve", str(port),
                            "--servers", str(n), "--peers", str(peers), "--latency-ms", str(args.latency_ms)]
                           + (["--page-kb", str(args.page_kb)] if args.page_kb is not None else []),
                           stdout=subprocess.PIPE, env={**os.environ, "DRT_SIM_COLD_KEY": cold_key})
    raw = KazooClient(hosts=address, timeout=30)
    raw.start(timeout=30)
    try:
        assert sim.stdout is not None and sim.stdout.readline().strip() == b"ready"
        t = time.perf_counter()

        def rs_value(_name: str) -> bytes:
            return PB_MAGIC + _vi(1, port)  # RegionServerInfo.infoPort

        master = PB_MAGIC + _ld(1, _ld(1, MASTER_HOST.encode()) + _vi(2, 16000) + _vi(3, START)) + _vi(2, 0) + _vi(3, port)
        for parent, w in ((p_status, wals), (p_gate, 1)):
            populate(raw, parent, n, peers, w, name_of=name_of, rs_value=rs_value,
                     position=lambda _n, _w: WAL_BYTES)
            lay = Layout(parent)
            raw.create(f"{parent}/master", master)
            for p in range(1, peers + 1):
                raw.create(lay.peer(str(p)), encode_peer(PeerConfig(cold_key), "2.6"))
                raw.create(lay.peer_state(str(p)), encode_state(True, "2.6"))
        raw.ensure_path(p_cold)
        root = work / "hot" / "hbase"
        for i in range(n):
            h = host_of(i)
            f = root / "WALs" / name_of(i) / f"{h}%2C16020%2C{START + i}.{START}"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"w" * WAL_BYTES)
        desc = Path(str(root) + tabledesc_path("", "default", "orders"))
        desc.parent.mkdir(parents=True, exist_ok=True)
        desc.write_bytes(encode_tabledesc("default", "orders", {"d": 1}))
        print(f"set-up: a real ZooKeeper with {n} region servers × {peers} peers × {wals} WALs "
              f"({n * peers * wals} WAL znodes) and × 1 WAL (the gate's tree: drain provable), {n} WAL files; "
              f"{time.perf_counter() - t:.1f} s")
        print(f"simulated info servers: one HTTP server (child process) for {n} region servers (127.1.x.y) and "
              f"the master; each answer after {args.latency_ms:g} ms; /rs-status "
              f"{(args.page_kb if args.page_kb is not None else RS_PAGE_KB)} KB before its replication table")
        counting = Counting()
        ledger = open_ledger(topo, Access.from_env())
        ep = topo.hot.zookeeper
        assert ep is not None

        def measure(label: str, fn: Any, repeat: int) -> tuple[float, Any, dict[str, int], dict[str, int],
                                                             dict[str, int]]:
            fn()  # warm-up
            counting.take()
            stats(port)
            times, out = [], None
            c0 = time.process_time()
            for _ in range(repeat):
                t0 = time.perf_counter()
                out = fn()
                times.append(time.perf_counter() - t0)
            cpu.append((time.process_time() - c0) / repeat)
            z, f = counting.take()
            h = stats(port)
            per = {k: v // repeat for k, v in z.items()}
            if os.environ.get("DRT_BENCH_PROFILE"):
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.runcall(fn)
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                counting.take()
                stats(port)
            return statistics.median(times), out, per, {k: v // repeat for k, v in f.items()}, \
                {k: v // repeat for k, v in h.items()}

        results: list[tuple[str, float, float | None, str, str]] = []
        cpu: list[float] = []
        with connect(ep.model_copy(update={"hbase_znode_parent": p_status}), credentials=None) as zk:
            cases = [
                ("status", "replication_status", f"{n}×{peers}×{wals}", lambda: replication_status(zk, p_status)),
                ("checked", "drt hbase status (checked_status)", f"{n}×{peers}×{wals}",
                 lambda: checked_status(zk, p_status)),
                ("checked", "drt hbase status (checked_status)", f"{n}×{peers}×1", lambda: checked_status(zk, p_gate)),
                ("gate", "gate's HBase signal (hbase_signals)", f"{n}×{peers}×1, {peers} policies",
                 lambda: hbase_signals(topo, ledger, Access.from_env(), time.time())),
            ]
            only = set(args.only.split(","))
            for key, label, size, fn in cases:
                if key not in only:
                    continue
                med, out, z, f, h = measure(label, fn, args.repeat)
                verdict = _verdict(out)
                calls = (f"ZooKeeper {sum(v for k, v in z.items() if k != 'round trips')} znodes in "
                         f"{z.get('round trips', 0)} round trips; HTTP {sum(h.values())} "
                         f"({', '.join(f'{k} {v}' for k, v in sorted(h.items()))}); "
                         f"filesystem {sum(f.values())} ({', '.join(f'{k} {v}' for k, v in sorted(f.items()))})")
                base = None
                if not args.no_baseline:
                    serial(True, counting)
                    try:
                        t0 = time.perf_counter()
                        bout = fn()
                        base = time.perf_counter() - t0
                        counting.take()
                        stats(port)
                        if _verdict(bout) != verdict:
                            print(f"  !! the serial baseline's verdict differs: {_verdict(bout)} vs {verdict}")
                    finally:
                        serial(False, counting)
                results.append((f"{label} [{size}]", med, base, verdict, calls))
                print(f"{label} [{size}]: {med:.2f} s median of {args.repeat}, load average "
                      f"{os.getloadavg()[0]:.1f} (goal < 10 s: "
                      f"{'met' if med < 10 else 'NOT met'}); serial baseline "
                      f"{'-' if base is None else f'{base:.2f} s ({base / med:.1f}x)'}; {verdict}")
                print(f"  calls per check: {calls}; this process's CPU {cpu[-1]:.2f} s per check")
        return 0
    finally:
        sim.kill()
        if zk_proc is None:  # an existing ensemble: take the trees away (a ZooKeeper started here just stops)
            for parent in (p_status, p_gate):
                try:
                    raw.delete(parent, recursive=True)
                except Exception:  # noqa: BLE001
                    pass
        raw.stop()
        raw.close()
        if zk_proc is not None:
            zk_proc.kill()


def _verdict(out: Any) -> str:
    if isinstance(out, list):  # signals
        bad = [s for s in out if not s.caught_up]
        return ("GO (every policy caught up, drain proven)" if not bad and all(s.safe_time for s in out)
                else f"NO_GO: {bad[0].reason if bad else 'no safe time'}"[:200])
    if isinstance(out, dict):
        return f"caught_up={out['caught_up']} ({len(out['reasons'])} reasons)"
    return f"caught_up={out.caught_up} ({len(out.queues)} queues, {len(out.reasons)} reasons)"
