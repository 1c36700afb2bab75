"""Issue 42: the HBase signal reads its region servers concurrently (a bounded pool, one deadline per
live view) — and a region server that cannot be read is still a reason naming it, NO_GO, never a
server skipped.

On the real HBase 2.6 pair: the hot region server's info server is reached through a link the
   test can cut (its znode's info port pointed at the link, as a firewall or a hung info server would
   leave it): GO through the link, then, cut, NO_GO naming that region server — in the gate and in
   `drt hbase status`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.gate import check
from dr_toolkit.hbase.encoding import PB_MAGIC, Layout, _ld, _pb_body, _vi, parse_fields
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import RealHBaseWorld, add_verify_report, drt, write_topology
from tests.support.netlink import TcpLink

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
