"""Replication peers written in HBase's layout on a real ZooKeeper: idempotent, converging, validated."""

from __future__ import annotations

import random
import threading

import pytest

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.hbase import peers as hp
from dr_toolkit.hbase.encoding import Layout, decode_peer, decode_state
from dr_toolkit.retry import Retry
from dr_toolkit.zk.client import connect, is_world_writable
from tests.support.fixtures_failover import znode_tree

pytestmark = pytest.mark.integration

COLD = "cold-zk1.example.com,cold-zk2.example.com:2181:/hbase"
ZKV = "1.4"  # an HBase that learns peers from ZooKeeper: the toolkit writes znodes only for HBase < 2.0 (issue 38)


def test_on_hbase_2_without_a_shell_nothing_is_written_into_zookeeper(zkc, zk, hbase_parent) -> None:
    """Issue 38 #1: HBase 2.x never sees a peer written into ZooKeeper (no replication source, no
    queue), so without clusters.<hot>.hbase_shell every peer change is refused before anything is
    written, naming what to configure and the shell commands that would make it."""
    for call in (lambda: hp.add_peer(zkc, "1", COLD, cluster=hp.PeerCluster(hbase_parent, "2.6")),
                 lambda: hp.add_peer(zkc, "1", COLD, cluster=hp.PeerCluster(hbase_parent), dry_run=True),
                 lambda: hp.converge_peers(zkc, [hp.PeerSpec("1", COLD)], cluster=hp.PeerCluster(hbase_parent))):
        with pytest.raises(ConfigError, match="never writes a peer into ZooKeeper") as err:
            call()
        assert "hbase_shell" in (err.value.hint or "") and "add_peer '1'" in (err.value.hint or "")
    assert zk.exists(hbase_parent) is None


def test_add_writes_hbase_layout_and_is_idempotent(zkc, zk, hbase_parent, tmp_path) -> None:
    from dr_toolkit.ledger import Ledger

    ledger = Ledger.open(f"sqlite:///{tmp_path}/l.db")
    lay = Layout(hbase_parent)
    res = hp.add_peer(zkc, "1", COLD, table_cfs="shop:orders:d,m;audit", ledger=ledger,
                      cluster=hp.PeerCluster(hbase_parent, ZKV))
    assert res.changed and [c.path for c in res.changes] == [lay.peer("1"), lay.peer_state("1"),
                                                             lay.peer_table_cfs("1")]
    raw = zk.get(lay.peer("1"))[0]
    assert raw.startswith(b"PBUF")
    cfg = decode_peer(raw)
    assert cfg.cluster_key == COLD
    assert hp.read_peer(zkc, "1", hbase_parent).table_cfs == {"shop:orders": ["d", "m"], "audit": []}
    assert zk.get(lay.peer_state("1"))[0] == b"PBUF\x08\x00"  # ReplicationState ENABLED
    before = znode_tree(zk, hbase_parent)
    again = hp.add_peer(zkc, "1", COLD, table_cfs="shop:orders:d,m;audit", ledger=ledger,
                        cluster=hp.PeerCluster(hbase_parent, ZKV))
    assert not again.changed and znode_tree(zk, hbase_parent) == before
    events = ledger.audit_events(component="hbase")
    assert [e["action"] for e in events] == ["peers.add", "peers.add"]
    assert [e["status"] for e in events] == ["ok", "unchanged"]


def test_enable_disable_remove_list(zkc, zk, hbase_parent) -> None:
    lay = Layout(hbase_parent)
    hp.add_peer(zkc, "1", COLD, cluster=hp.PeerCluster(hbase_parent, ZKV))
    hp.add_peer(zkc, "2", "other:2181:/hbase-x", enabled=False, cluster=hp.PeerCluster(hbase_parent, ZKV))
    assert decode_state(zk.get(lay.peer_state("2"))[0]) == "DISABLED"
    assert hp.disable_peer(zkc, "1", cluster=hp.PeerCluster(hbase_parent, ZKV)).changed
    assert not hp.disable_peer(zkc, "1", cluster=hp.PeerCluster(hbase_parent, ZKV)).changed
    assert zk.get(lay.peer_state("1"))[0] == b"PBUF\x08\x01"
    hp.enable_peer(zkc, "2", cluster=hp.PeerCluster(hbase_parent, ZKV))
    listed = {p.peer_id: (p.cluster_key, p.state, p.table_cfs) for p in hp.list_peers(zkc, hbase_parent)}
    assert listed == {"1": (COLD, "DISABLED", None), "2": ("other:2181:/hbase-x", "ENABLED", None)}
    assert hp.remove_peer(zkc, "1", cluster=hp.PeerCluster(hbase_parent, ZKV)).changed
    assert zk.exists(lay.peer("1")) is None
    assert not hp.remove_peer(zkc, "1", cluster=hp.PeerCluster(hbase_parent, ZKV)).changed  # already gone
    assert [p.peer_id for p in hp.list_peers(zkc, hbase_parent)] == ["2"]


def test_dry_run_returns_changes_and_writes_nothing(zkc, zk, hbase_parent) -> None:
    res = hp.add_peer(zkc, "7", COLD, dry_run=True, cluster=hp.PeerCluster(hbase_parent, ZKV))
    assert [c.op for c in res.changes] == ["create", "create"] and res.dry_run
    assert zk.exists(hbase_parent) is None
    hp.add_peer(zkc, "7", COLD, cluster=hp.PeerCluster(hbase_parent, ZKV))
    res = hp.remove_peer(zkc, "7", dry_run=True, cluster=hp.PeerCluster(hbase_parent, ZKV))
    assert {c.op for c in res.changes} == {"delete"}
    assert zk.exists(Layout(hbase_parent).peer("7")) is not None


def test_half_written_peer_is_repaired(zkc, zk, hbase_parent) -> None:
    """A crash between the two znode writes (peer without peer-state) is repaired by the next run."""
    from dr_toolkit.hbase.encoding import PeerConfig, encode_peer

    lay = Layout(hbase_parent)
    zk.create(lay.peer("3"), encode_peer(PeerConfig(COLD)), makepath=True)
    assert hp.read_peer(zkc, "3", hbase_parent).state is None
    res = hp.add_peer(zkc, "3", COLD, cluster=hp.PeerCluster(hbase_parent, ZKV))
    assert [c.path for c in res.changes] == [lay.peer_state("3")]
    assert hp.read_peer(zkc, "3", hbase_parent).state == "ENABLED"


@pytest.mark.parametrize("version,peer_value,state_value", [
    ("0.94", COLD.encode(), b"ENABLED"),
    ("1.4", b"PBUF", b"PBUF\x08\x00"),
])
def test_older_hbase_encodings(zkc, zk, hbase_parent, version, peer_value, state_value) -> None:
    lay = Layout(hbase_parent)
    hp.add_peer(zkc, "1", COLD, cluster=hp.PeerCluster(hbase_parent, version))
    assert zk.get(lay.peer("1"))[0].startswith(peer_value)
    assert zk.get(lay.peer_state("1"))[0] == state_value
    if version == "1.4":  # HBase 1.x keeps table-CFs in a tableCFs child znode
        hp.add_peer(zkc, "1", COLD, table_cfs={"t1": ["cf"]}, cluster=hp.PeerCluster(hbase_parent, version))
        assert zk.get(lay.peer_table_cfs("1"))[0] == b"t1:cf"
        assert hp.read_peer(zkc, "1", hbase_parent).table_cfs == {"t1": ["cf"]}


@pytest.mark.parametrize("call,msg", [
    (lambda z, p: hp.add_peer(z, "1", "zk1,zk2/hbase", cluster=hp.PeerCluster(p, ZKV)), "malformed cluster key"),
    (lambda z, p: hp.add_peer(z, "1", "zk1:21x81:/hbase", cluster=hp.PeerCluster(p, ZKV)),
     "malformed cluster key"),
    (lambda z, p: hp.add_peer(z, "bad-id", COLD, cluster=hp.PeerCluster(p, ZKV)), "invalid peer id"),
    (lambda z, p: hp.add_peer(z, "1", COLD, table_cfs="t1:cf 1", cluster=hp.PeerCluster(p, ZKV)),
     "invalid table-CFs"),
    (lambda z, p: hp.enable_peer(z, "42", cluster=hp.PeerCluster(p, ZKV)), "unknown peer id '42'"),
    (lambda z, p: hp.disable_peer(z, "42", cluster=hp.PeerCluster(p, ZKV)), "unknown peer id '42'"),
])
def test_bad_input_is_refused_and_nothing_written(zkc, zk, hbase_parent, call, msg) -> None:
    with pytest.raises(ConfigError, match=msg):
        call(zkc, hbase_parent)
    assert zk.exists(hbase_parent) is None


def test_self_as_peer_is_refused(zkc, zk, zk_server, hbase_parent) -> None:
    host, port = zk_server.address.rsplit(":", 1)
    for key in (f"{host}:{port}:{hbase_parent}", f"localhost:{port}:{hbase_parent}/"):
        with pytest.raises(ConfigError, match="itself as its own peer"):
            hp.add_peer(zkc, "1", key, cluster=hp.PeerCluster(hbase_parent, ZKV))
    assert zk.exists(hbase_parent) is None
    # the same ensemble with another znode parent is another cluster
    hp.add_peer(zkc, "1", f"{host}:{port}:/hbase-other", cluster=hp.PeerCluster(hbase_parent, ZKV))


def test_existing_peer_with_other_key_is_refused(zkc, hbase_parent) -> None:
    hp.add_peer(zkc, "1", COLD, cluster=hp.PeerCluster(hbase_parent, ZKV))
    with pytest.raises(ConfigError, match="already exists with cluster key"):
        hp.add_peer(zkc, "1", "elsewhere:2181:/hbase", cluster=hp.PeerCluster(hbase_parent, ZKV))


@pytest.mark.slow
def test_peer_commands_converge_across_zookeeper_restarts_with_acls(zk_server, zk_endpoint, hbase_parent) -> None:
    """10 rounds of peer commands with ZooKeeper stopped/restarted at random points in between."""
    from dr_toolkit.secrets import Credentials

    rng = random.Random(5)
    creds = Credentials(login="drt", password="s3cret-pw")
    retry = Retry(tries=50, backoff_s=0.1, max_backoff_s=0.5, deadline_s=20)
    desired = {"1": (COLD, "ENABLED"), "2": ("dr2:2181:/hbase", "DISABLED"), "3": ("dr3,dr4:2182:/hb", "ENABLED")}
    ops = [
        lambda z: hp.add_peer(z, "1", COLD, cluster=hp.PeerCluster(hbase_parent, ZKV)),
        lambda z: hp.add_peer(z, "2", "dr2:2181:/hbase", cluster=hp.PeerCluster(hbase_parent, ZKV)),
        lambda z: hp.disable_peer(z, "2", cluster=hp.PeerCluster(hbase_parent, ZKV)),
        lambda z: hp.add_peer(z, "3", "dr3,dr4:2182:/hb", cluster=hp.PeerCluster(hbase_parent, ZKV)),
        lambda z: hp.add_peer(z, "9", "gone:2181:/hbase", cluster=hp.PeerCluster(hbase_parent, ZKV)),
        lambda z: hp.remove_peer(z, "9", cluster=hp.PeerCluster(hbase_parent, ZKV)),
    ]
    try:
        for _round in range(10):
            z = None
            for op in ops:
                if z is None:
                    z = connect(zk_endpoint, credentials=creds, retry=retry)
                fault = rng.random()
                timer = None
                if fault < 0.07:  # down while the command runs: it must retry until ZooKeeper is back
                    zk_server.stop()
                    timer = threading.Timer(rng.uniform(0.2, 1.5), zk_server.start)
                    timer.start()
                elif fault < 0.14:
                    zk_server.stop()
                    zk_server.start()
                elif fault < 0.2:
                    zk_server.kill()
                    zk_server.start()
                for _attempt in range(3):  # what an operator does after exit 3: run it again
                    try:
                        op(z)
                        break
                    except UnreachableError:
                        z.close()
                        z = connect(zk_endpoint, credentials=creds, retry=retry)
                if timer is not None:
                    timer.join()
            if z is not None:
                z.close()
        with connect(zk_endpoint, credentials=creds, retry=retry) as z:
            got = {p.peer_id: (p.cluster_key, p.state) for p in hp.list_peers(z, hbase_parent)}
            assert got == desired
            lay = Layout(hbase_parent)
            created = [lay.peers] + [lay.peer(p) for p in desired] + [lay.peer_state(p) for p in desired]
            for path in created:
                acls, _ = z.get_acls(path)
                assert not is_world_writable(acls), (path, acls)
        # a client without the credentials can read but not change the peers
        with connect(zk_endpoint, credentials=None) as anon:
            assert len(hp.list_peers(anon, hbase_parent)) == 3
            from dr_toolkit.zk.client import ZkNoAuth

            with pytest.raises(ZkNoAuth):
                hp.disable_peer(anon, "1", cluster=hp.PeerCluster(hbase_parent, ZKV))
    finally:
        if not zk_server.running:
            zk_server.start()


# --- against a real HBase 2.6 cluster ----------------------------------------------------------------


def _wait(pred, timeout: float = 60.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.5)
    return bool(pred())


def test_peers_made_by_hbase_are_read_back_by_the_toolkit(hot_zk, hbase_hot, hbase_cold) -> None:
    """HBase's Admin API writes the peers; dr-toolkit reads them from ZooKeeper (values carry
    HBase's RecoverableZooKeeper metadata prefix before PBUF)."""
    hot, parent = hbase_hot, hbase_hot.znode_parent
    (one,) = [p for p in hp.list_peers(hot_zk, parent) if p.peer_id == "1"]
    assert (one.cluster_key, one.state, one.table_cfs) == (hbase_cold.cluster_key, "ENABLED", None)
    hot.add_peer("2", hbase_cold.cluster_key, "default:orders:d")
    p2 = hp.read_peer(hot_zk, "2", parent)
    assert p2 is not None and p2.state == "ENABLED" and p2.table_cfs == {"orders": ["d"]}  # default namespace unnamed
    hot.disable_peer("2")
    assert hp.read_peer(hot_zk, "2", parent).state == "DISABLED"
    assert hot.list_peers()["2"]["enabled"] is False
    hot.remove_peer("2")
    assert hp.read_peer(hot_zk, "2", parent) is None and "2" not in hot.list_peers()


def test_a_peer_written_into_zookeeper_is_not_seen_by_hbase(hot_zk, hbase_hot, hbase_cold) -> None:
    """HBase 2.x learns peers through master procedures, not ZooKeeper watches: a peer written in HBase's
    layout (as dr-toolkit once did, now refused) is in ZooKeeper, but HBase neither lists it nor
    replicates to it — no replication queue for it (issue 38 #1: "no queue" is no proof of drain)."""
    from dr_toolkit.hbase.encoding import PeerConfig, encode_peer, encode_state

    hot, parent = hbase_hot, hbase_hot.znode_parent
    lay = Layout(parent)
    with pytest.raises(ConfigError, match="never writes a peer into ZooKeeper"):
        hp.add_peer(hot_zk, "7", hbase_cold.cluster_key, cluster=hp.PeerCluster(parent, "2.6"))
    assert hp.read_peer(hot_zk, "7", parent) is None
    try:
        hot_zk.create(lay.peer("7"), encode_peer(PeerConfig(hbase_cold.cluster_key), "2.6"))
        hot_zk.create(lay.peer_state("7"), encode_state(True, "2.6"))
        assert hp.read_peer(hot_zk, "7", parent).state == "ENABLED"
        hot.put(5_000_000, 5)
        hot.roll_wal()
        assert _wait(lambda: hot_zk.get_children_many([f"{lay.queues}/{hot.region_servers[0].server_name}"])[0]
                     is not None)
        queues = hot_zk.get_children_many([f"{lay.queues}/{hot.region_servers[0].server_name}"])[0] or []
        assert "7" not in hot.list_peers()  # HBase's own view: no such peer
        assert "7" not in queues and "1" in queues  # and no replication queue for it
    finally:
        hot_zk.delete(lay.peer("7"), recursive=True)


def test_disabling_a_peer_in_zookeeper_does_not_stop_hbase_shipping(hot_zk, hbase_hot, hbase_cold) -> None:
    """Likewise a state written into ZooKeeper (the toolkit refuses to write it): HBase keeps the peer
    ENABLED and ships on."""
    from dr_toolkit.hbase.encoding import encode_state

    hot, cold, parent = hbase_hot, hbase_cold, hbase_hot.znode_parent
    lay = Layout(parent)
    with pytest.raises(ConfigError, match="never writes a peer into ZooKeeper"):
        hp.disable_peer(hot_zk, "1", cluster=hp.PeerCluster(parent, "2.6"))
    original = hot_zk.get_many([lay.peer_state("1")])[0][0]
    try:
        hot_zk.set(lay.peer_state("1"), encode_state(False, "2.6"))
        assert hp.read_peer(hot_zk, "1", parent).state == "DISABLED"
        before = cold.count()
        hot.put(6_000_000, 10)
        assert cold.wait_rows(before + 10) >= before + 10  # still shipped
        assert hot.list_peers()["1"]["enabled"] is True
    finally:
        hot_zk.set(lay.peer_state("1"), original)


def test_on_hbase_2_with_a_shell_the_changes_go_through_hbase_shell_not_zookeeper(zkc, zk, hbase_parent,
                                                                                     tmp_path) -> None:
    """HBase 2.x ignores peers written into ZooKeeper (above): with the cluster's `hbase` command the
    toolkit runs `hbase shell -n FILE` with HBase's own peer commands and writes no znode itself.
    (No hbase-shell artifact is to be had here: the `hbase` below records the script it is given.)"""
    log = tmp_path / "scripts.log"
    exe = tmp_path / "hbase"
    exe.write_text(f'#!/bin/sh\n[ "$1" = shell ] && [ "$2" = -n ] || exit 9\ncat "$3" >> {log}\necho "Took 0.1 seconds"\n')
    exe.chmod(0o755)
    lay = Layout(hbase_parent)
    res = hp.add_peer(zkc, "1", COLD, table_cfs="shop:orders:d;audit", cluster=hp.PeerCluster(hbase_parent, "2.6", str(exe)))
    assert res.backend == "hbase-shell" and res.warning is None
    assert log.read_text() == ("add_peer '1', CLUSTER_KEY => 'cold-zk1.example.com,cold-zk2.example.com:2181:/hbase', "
                               "TABLE_CFS => { 'default:audit' => [], 'shop:orders' => ['d'] }\n")
    assert zk.exists(lay.peer("1")) is None  # nothing written by the toolkit
    # state as HBase would have written it: the next plans are shell commands too
    from dr_toolkit.hbase.encoding import PeerConfig, encode_peer, encode_state

    zk.create(lay.peer("1"), encode_peer(PeerConfig(COLD), "2.6"), makepath=True)
    zk.create(lay.peer_state("1"), encode_state(True, "2.6"))
    log.write_text("")
    hp.disable_peer(zkc, "1", cluster=hp.PeerCluster(hbase_parent, "2.6", str(exe)))
    hp.add_peer(zkc, "1", COLD, table_cfs="shop:orders:d", cluster=hp.PeerCluster(hbase_parent, "2.6", str(exe)))
    hp.remove_peer(zkc, "1", cluster=hp.PeerCluster(hbase_parent, "2.6", str(exe)))
    assert log.read_text() == ("disable_peer '1'\n"
                               "set_peer_replicate_all '1', false\nset_peer_tableCFs '1', { 'shop:orders' => ['d'] }\n"
                               "remove_peer '1'\n")
    # without a shell, HBase 2.x cannot be asked: refused (issue 38 #1), ZooKeeper unchanged
    with pytest.raises(ConfigError, match="no `hbase` command is configured"):
        hp.disable_peer(zkc, "1", cluster=hp.PeerCluster(hbase_parent, "2.6"))
    assert hp.read_peer(zkc, "1", hbase_parent).state == "ENABLED"


FILTERED_PEERS = [
    # (replicate_all, namespaces, table_cfs, exclude_namespaces, exclude_table_cfs)
    (True, None, None, "shop", None),
    (True, None, None, None, "shop:payments;default:orders:d"),
    (True, None, None, None, "shop:payments:x"),
    (False, "shop", None, None, None),
    (False, None, "shop:payments:d;default:orders", None, None),
    (False, "audit", "shop:payments:x", None, None),
    (False, None, None, None, None),
]


@pytest.mark.parametrize("replicate_all,namespaces,table_cfs,exclude_ns,exclude_tcfs", FILTERED_PEERS)
def test_peer_filters_read_from_zookeeper_decide_as_hbase_itself_decides(
        hot_zk, hbase_hot, hbase_cold, replicate_all, namespaces, table_cfs, exclude_ns, exclude_tcfs) -> None:
    """Issue 20 #1: a peer's replicate_all / namespaces / table-CFs / exclude filters, added through
    HBase's Admin API and decoded by the toolkit from ZooKeeper, ship exactly the tables and families
    HBase's own ReplicationPeerConfig.needToReplicate says they ship."""
    hot = hbase_hot
    hot.add_peer_filtered("9", hbase_cold.cluster_key, replicate_all=replicate_all, namespaces=namespaces,
                          table_cfs=table_cfs, exclude_namespaces=exclude_ns, exclude_table_cfs=exclude_tcfs)
    peer = hp.read_peer(hot_zk, "9", hot.znode_parent)
    assert peer is not None and peer.config is not None
    for table in ("default:orders", "shop:payments", "shop:other", "audit:log"):
        for family in (None, "d", "x"):
            theirs = hot.need_to_replicate("9", table, family)
            assert peer.config.replicates(table, family) == theirs, (table, family, theirs, peer.config)
