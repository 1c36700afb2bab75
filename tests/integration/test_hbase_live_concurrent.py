"""Issue 42: the HBase signal reads its region servers concurrently (a bounded pool, one deadline per
live view) — and a region server that cannot be read is still a reason naming it, NO_GO, never a
server skipped.

1. On the real HBase 2.6 pair: the hot region server's info server is reached through a link the
   test can cut (its znode's info port pointed at the link, as a firewall or a hung info server would
   leave it): GO through the link, then, cut, NO_GO naming that region server — in the gate and in
   `drt hbase status`.
2. On a real ZooKeeper with region-server znodes in HBase's layout, their info servers answered by
   local HTTP stand-ins (the pages as HBase 2.6 renders them): among 24 region servers one refuses
   and one never answers; every other one is read, at most ``workers`` at a time, and the two are
   named — the one that hangs by the check's deadline.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.gate import check
from dr_toolkit.hbase.encoding import PB_MAGIC, Layout, _ld, _pb_body, _vi, parse_fields
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import HBasePolicy, ZooKeeperEndpoint, load_topology
from tests.support.fixtures_failover import RealHBaseWorld, add_verify_report, drt, write_topology
from tests.support.netlink import TcpLink
from tests.support.procs import free_port

pytestmark = pytest.mark.integration


def with_info_port(raw: bytes, port: int) -> bytes:
    """A region server's znode value (``PBUF`` + ``RegionServerInfo``) with field 1, the info port, changed."""
    at = raw.index(PB_MAGIC)
    body = _pb_body(raw[at:])
    assert body is not None
    out = b""
    for no, v in parse_fields(body):
        if no == 1:
            out += _vi(1, port)
        else:
            out += _vi(no, v) if isinstance(v, int) else _ld(no, v)
    return raw[:at] + PB_MAGIC + out


def test_a_region_server_that_cannot_be_read_is_named_and_no_go(tmp_path, hbase_clusters) -> None:
    from kazoo.client import KazooClient

    hot, cold = hbase_clusters
    path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1", "tables": ["default:orders"]}],
                          verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}], hbase_clusters=hbase_clusters)
    topo = load_topology(path)
    ledger = open_ledger(topo, Access.from_env())
    add_verify_report(ledger, "orders")
    world = RealHBaseWorld(topo, hot, cold)  # drained: the queues alone read "drain proven"
    lay = Layout(hot.znode_parent)
    (server,) = [rs.server_name for rs in hot.region_servers]
    znode = f"{lay.rs}/{server}"
    raw = KazooClient(hosts=hot.zk_quorum, timeout=10)
    raw.start(timeout=30)
    original, _ = raw.get(znode)
    info_port = next(v for no, v in parse_fields(_pb_body(original[original.index(PB_MAGIC):]) or b"") if no == 1)
    link = TcpLink("127.0.0.1", int(info_port)).start()
    try:
        def hbase_signal() -> Any:
            res = check(topo, ledger, access=Access.from_env())
            return next(s for s in res.signals if s.component == "hbase")

        assert hbase_signal().caught_up  # read directly
        raw.set(znode, with_info_port(original, link.port))
        through = hbase_signal()
        assert through.caught_up, through.reason  # the same signal through the link
        assert through.detail["live"]["sources"] == {server: ["1"]}
        link.cut()
        sig = hbase_signal()
        assert not sig.caught_up
        reason = sig.reason or ""
        assert f"cannot read the replication sources region server {server} runs" in reason, reason
        assert f"cannot read region server {server}'s count of mutations without WAL" in reason, reason
        assert f":{link.port}/rs-status" in reason, reason  # the address that did not answer
        # `drt hbase status` judges with the same live reads
        r = drt("--json", "hbase", "status", "--peer", "1", config=path)
        doc = json.loads(r.stdout)
        assert r.returncode == 1 and doc["caught_up"] is False, (r.returncode, r.stdout, r.stderr)
        assert any(f"region server {server} runs" in x for x in doc["reasons"]), doc["reasons"]
    finally:
        link.cut()
        current, _ = raw.get(znode)
        if current != original:
            raw.set(znode, original)
        raw.stop()
        raw.close()
        world.close()


# --- many region servers on a real ZooKeeper, their info servers stood in for ---------------------------

SERVERS = 24
REFUSES, HANGS = 5, 17


def host(i: int) -> str:
    return f"127.0.1.{i + 1}"  # loopback addresses: one listening socket, one host per region server


class Pages(BaseHTTPRequestHandler):
    """The three pages the signal reads of a region server, as HBase 2.6 renders them (the formats of
    tests/unit/test_hbase_live.py), for the region server the request's host names."""

    names: dict[str, str] = {}
    lock = threading.Lock()
    active = 0
    most = 0

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.active += 1
            cls.most = max(cls.most, cls.active)
        try:
            time.sleep(0.05)  # a page takes a moment: requests overlap when the pool lets them
            h = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            name = cls.names[h]
            if self.path.startswith("/rs-status"):
                body = (b"<h2>Replication Status</h2><table><tr><th>PeerId</th><th>WalGroup</th><th>Current Log</th>"
                        b"<th>Size</th><th>Queue Size</th><th>Offset</th></tr><tr><td>1</td><td>g</td><td>w.1</td>"
                        b"<td>100</td><td>0</td><td>100</td></tr></table>")
                ctype = "text/html"
            elif self.path.startswith("/conf"):
                body = json.dumps({"properties": [{"key": "hbase.regionserver.metrics.period", "value": "1000"}]}
                                  ).encode()
                ctype = "application/json"
            else:
                body = json.dumps({"beans": [{"tag.serverName": name, "mutationsWithoutWALCount": 0,
                                              "mutationsWithoutWALSize": 0, "Bulkload_num_ops": 0}]}).encode()
                ctype = "application/json"
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        finally:
            with cls.lock:
                cls.active -= 1


@pytest.fixture
def stand_ins() -> Iterator[tuple[int, int, socket.socket]]:
    """(the pages' port, a port nothing listens on, a socket that accepts and never answers)."""
    srv = ThreadingHTTPServer(("0.0.0.0", 0), Pages)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(64)  # connections complete in the backlog; nothing ever reads or answers them
    yield srv.server_address[1], free_port(), hang
    srv.shutdown()
    srv.server_close()
    hang.close()


def test_live_reads_are_bounded_and_every_server_not_read_is_named(zk_server, hbase_parent, stand_ins) -> None:
    from dr_toolkit.hbase.signals import _live_problems, read_live
    from dr_toolkit.zk.client import connect

    pages, closed, hang = stand_ins
    lay = Layout(hbase_parent)
    names = {i: f"{host(i)},16020,{1700000000000 + i}" for i in range(SERVERS)}
    Pages.names = {host(i): n for i, n in names.items()}
    Pages.most = 0
    ep = ZooKeeperEndpoint(quorum=zk_server.address, hbase_znode_parent=hbase_parent, call_timeout_s=10)
    with connect(ep, credentials=None) as zk:
        zk.ensure_path(lay.rs)
        for i, n in names.items():
            port = {REFUSES: closed, HANGS: hang.getsockname()[1]}.get(i, pages)
            h = "127.0.0.1" if i in (REFUSES, HANGS) else host(i)
            name = n if i not in (REFUSES, HANGS) else f"{h},{16020 + i},{1700000000000 + i}"
            names[i] = name
            zk.create(f"{lay.rs}/{name}", PB_MAGIC + _vi(1, port))
        view = read_live(zk, hbase_parent, workers=4, deadline_s=3.0)
    refused, hung = names[REFUSES], names[HANGS]
    assert set(view.servers) == set(names.values())
    read = set(names.values()) - {refused, hung}
    assert set(view.sources) == read and all(view.sources[s] == {"1"} for s in read)
    assert set(view.without_wal) == read
    assert set(view.source_errors) == set(view.counter_errors) == {refused, hung}
    assert "Connection refused" in view.source_errors[refused], view.source_errors
    assert "no answer within 3 s" in view.source_errors[hung] or "timed out" in view.source_errors[hung], \
        view.source_errors
    assert 1 <= Pages.most <= 4  # never more requests in flight than the pool's workers
    reasons, _ = _live_problems(HBasePolicy(name="p", peer_id="1"), view, view, list(names.values()))
    text = " | ".join(reasons)
    for s in (refused, hung):
        assert f"cannot read the replication sources region server {s} runs" in text, text
        assert f"cannot read region server {s}'s count of mutations without WAL" in text, text
    assert not any(s in text for s in read), text
