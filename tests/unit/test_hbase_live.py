"""Issue 38: the readers of what the running HBase does (pages as HBase 2.6 renders them) and the
decision over them — a lying or missing input never reads as "nothing to ship"."""

from __future__ import annotations

import pytest

from dr_toolkit.hbase.encoding import DecodeError, PeerConfig
from dr_toolkit.hbase.live import ServerCounters, parse_master_peers, parse_rs_sources, same_peer
from dr_toolkit.hbase.signals import LiveView, _live_problems
from dr_toolkit.hbase.tabledesc import decode_tabledesc, encode_tabledesc
from dr_toolkit.topology import HBasePolicy

HEAD = ("<tr><th>Peer Id</th><th>Cluster Key</th><th>Endpoint</th><th>State</th><th>IsSerial</th><th>Remote WAL</th>"
        "<th>Sync Replication State</th><th>Bandwidth</th><th>ReplicateAll</th><th>Namespaces</th>"
        "<th>Exclude Namespaces</th><th>Table Cfs</th><th>Exclude Table Cfs</th></tr>")


def _page(*rows: tuple[str, ...], total: int | None = None) -> str:
    body = "".join("<tr>" + "".join(f"<td>\n  {c}\n</td>" for c in r) + "</tr>" for r in rows)
    n = len(rows) if total is None else total
    return (f"<html><table><tr><th>x</th></tr></table><h2>Peers</h2><table class='t'>{HEAD}{body}"
            f"<tr><td>Total: {n}</td></tr></table></html>")


def _row(pid: str = "1", state: str = "ENABLED", ra: str = "true", ns: str = "", exns: str = "", tcfs: str = "",
         extcfs: str = "") -> tuple[str, ...]:
    return (pid, "zk1,zk2:2181:/hbase", "", state, "false", "", "NONE", "UNLIMITED", ra, ns, exns, tcfs, extcfs)


def test_master_peers_are_read_as_hbase_renders_them() -> None:
    peers = parse_master_peers(_page(_row(), _row("2", "DISABLED", "false", ns="shop; audit",
                                                  tcfs="default.orders:d,m; ns1.t2"),
                                     _row("3", extcfs="default.orders", exns="tmp")))
    assert peers["1"].state == "ENABLED" and peers["1"].config.replicates_all
    two = peers["2"].config
    assert peers["2"].state == "DISABLED" and two.namespaces == frozenset({"shop", "audit"})
    assert two.table_cfs == {"default:orders": ["d", "m"], "ns1:t2": []}
    assert not two.replicates("other:t") and two.replicates("shop:x") and two.replicates("default:orders", "d")
    three = peers["3"].config
    assert not three.replicates("default:orders") and not three.replicates_namespace("tmp")


@pytest.mark.parametrize("page,msg", [
    (_page(_row(tcfs="ns.a.b:d")), "cannot tell namespace from table"),  # HBase itself would misread it
    (_page(_row(extcfs="orders")), "cannot tell namespace from table"),
    (_page(_row(), total=2), "Total: 2"),  # a row the parser did not see
    (_page(_row(state="enabled")), "unexpected state"),
    ("<html><table><tr><th>Peer Id</th></tr></table></html>", "no Peers table"),
])
def test_a_master_page_that_cannot_be_read_exactly_is_no_answer(page: str, msg: str) -> None:
    with pytest.raises(DecodeError, match=msg):
        parse_master_peers(page)


RS_HEAD = ("<tr><th>PeerId</th><th>WalGroup</th><th>Current Log</th><th>Size</th><th>Queue Size</th>"
           "<th>Offset</th></tr>")


def test_region_server_sources_from_its_status_page() -> None:
    row = "<tr><td>1</td><td>rs%2C1</td><td>hdfs://nn/WALs/rs/w.1 </td><td>0</td><td>1</td><td>842</td></tr>"
    page = f"<h2>Replication Status</h1><table>{RS_HEAD}{row}</table>"
    got = parse_rs_sources(page)
    assert list(got) == ["1"] and got["1"][0]["Offset"] == "842"
    assert parse_rs_sources("<h2>Replication Status</h1><p>No Replication Metrics for Peers</p>") == {}
    with pytest.raises(DecodeError, match="no Replication Status section"):
        parse_rs_sources("<html>another page</html>")  # e.g. an error page: never "no sources"
    with pytest.raises(DecodeError, match="neither a replication status table"):
        parse_rs_sources("<h2>Replication Status</h1><p>something else</p>")


def test_same_peer_compares_what_ships() -> None:
    a = PeerConfig("zk2,zk1:2181:/hbase", table_cfs={"orders": ["d"]}, replicate_all=False)
    b = PeerConfig("zk1,zk2:2181:/hbase/", table_cfs={"default:orders": ["d"]}, replicate_all=False)
    assert same_peer(a, b)
    assert not same_peer(a, PeerConfig(a.cluster_key, table_cfs={"orders": ["d", "m"]}, replicate_all=False))
    assert not same_peer(PeerConfig(a.cluster_key), PeerConfig(a.cluster_key, exclude_namespaces=frozenset({"x"})))
    assert not same_peer(PeerConfig(a.cluster_key), PeerConfig("elsewhere:2181:/hbase"))


def _counters(n: int = 0) -> ServerCounters:
    return ServerCounters("rs1,16020,1", n, n * 10, read_at=1000.0, period_s=5.0)


def _view(**kw: object) -> LiveView:
    v = LiveView(master="m,1,1", peers={}, servers=["rs1,16020,1"], sources={"rs1,16020,1": {"1"}},
                 without_wal={"rs1,16020,1": _counters()})
    for k, val in kw.items():
        setattr(v, k, val)
    return v


POLICY = HBasePolicy(name="p", peer_id="1", tables=["default:orders"])


def test_live_evidence_decisions() -> None:
    ok = _view()
    assert _live_problems(POLICY, ok, ok, ["rs1,16020,1"]) == ([], False)
    assert ok.counted_before == 990.0  # two metrics periods before the read
    # a live region server without a source for the peer: edits never shipped
    nosrc = _view(sources={"rs1,16020,1": {"2"}})
    reasons, never = _live_problems(POLICY, ok, nosrc, ["rs1,16020,1"])
    assert never and "runs no replication source for peer 1" in reasons[0]
    # its page unreadable: no answer (not "no source"), and no "never" either
    err = _view(sources={}, source_errors={"rs1,16020,1": "cannot read http://rs1:16030/rs-status: refused"})
    reasons, never = _live_problems(POLICY, ok, err, ["rs1,16020,1"])
    assert not never and "cannot read the replication sources region server rs1,16020,1 runs" in reasons[0]
    # no live region server at all, or one the queue read saw and the live reads did not
    assert "no live region server" in _live_problems(POLICY, ok, _view(servers=[], sources={}), [])[0][0]
    late = _live_problems(POLICY, ok, ok, ["rs1,16020,1", "rs2,16020,2"])[0]
    assert late and "went live while read" in late[0]
    # mutations without WAL on a live server
    reasons, never = _live_problems(POLICY, ok, _view(without_wal={"rs1,16020,1": _counters(3)}), ["rs1,16020,1"])
    assert never and "took 3 mutation(s) without WAL" in reasons[0]
    # bulk loads: shipped only with bulk-load replication on that server
    bulk = ServerCounters("rs1,16020,1", 0, 0, 1000.0, 5.0, bulk_loads=2, bulkload_replication=False)
    reasons, never = _live_problems(POLICY, ok, _view(without_wal={"rs1,16020,1": bulk}), ["rs1,16020,1"])
    assert never and "took 2 bulk load(s)" in reasons[0]
    shipped = ServerCounters("rs1,16020,1", 0, 0, 1000.0, 5.0, bulk_loads=2, bulkload_replication=True)
    assert _live_problems(POLICY, ok, _view(without_wal={"rs1,16020,1": shipped}), ["rs1,16020,1"]) == ([], False)
    # the counters unreadable: no answer
    reasons, _ = _live_problems(POLICY, ok, _view(without_wal={}, counter_errors={"rs1,16020,1": "refused"}),
                                ["rs1,16020,1"])
    assert "count of mutations without WAL" in reasons[0]
    # ZooKeeper's live-server list unreadable
    assert "cannot read the hot cluster's live region servers" in _live_problems(
        POLICY, ok, _view(servers=[], servers_error="no /hbase/rs znode"), [])[0][0]


def test_table_durability_from_the_descriptor() -> None:
    d = decode_tabledesc(encode_tabledesc("default", "t", {"d": 1}, durability="SKIP_WAL"))
    assert d.skips_wal and d.scopes == {"d": 1}
    assert not decode_tabledesc(encode_tabledesc("default", "t", {"d": 1}, durability="ASYNC_WAL")).skips_wal
    assert not decode_tabledesc(encode_tabledesc("default", "t", {"d": 1})).skips_wal
