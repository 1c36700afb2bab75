"""The protection direction (issue 40) on the real ZooKeeper: one znode, written in the fence's
re-protect transaction, then recorded in the ledger, which every edge that loads the topology reads; the gate says nothing protects
an active cluster until a re-protect; copies follow the direction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError, FencedError
from dr_toolkit.failback.direction import directed, oriented, record
from dr_toolkit.failover.gate import check as gate_check
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.fencing import assert_copy_allowed, open_fence
from tests.support.fixtures_failover import drt, write_topology

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

ACCESS = Access.from_env()


@pytest.fixture
def topo_path(tmp_path: Path, zk_server) -> Path:  # type: ignore[no-untyped-def]
    if not zk_server.running:
        zk_server.start()
    return write_topology(tmp_path, zk=zk_server.address,
                          hdfs=[{"name": "warehouse", "source": "hdfs://hot/w", "targets": ["hdfs://cold/w"],
                                 "options": {"update": True, "delete": True}}],
                          hbase=[{"name": "hb", "peer_id": "1", "tables": ["t"], "hbase_rootdir": "/hbase-hot",
                                  "hbase_rootdir_cold": "/hbase-cold"}],
                          verify=[{"name": "orders", "source": "hdfs://hot/w/o", "target": "hdfs://cold/w/o",
                                   "key": ["id"]}])


def _fail_over(topo) -> int:  # type: ignore[no-untyped-def]
    """What a failover leaves in ZooKeeper: hot fenced and read-only, cold active, mirrors paused."""
    with open_fence(topo, access=ACCESS) as f:
        st = f.bump(fenced_cluster=topo.hot_name, by="test failover")
        f.set_read_only(topo.hot_name, True, epoch=st.epoch, by="test")
        f.guarded_set(f"{f.root}/mirrors-paused", b"{}", st.epoch)
        f.set_active(topo.cold_name, epoch=st.epoch, by="test run fo-1",
                     recovery={"recovery_point_epoch": 1_700_000_000.0})
        return st.epoch


def test_the_reversed_topology_swaps_roles_and_every_policy_and_reverses_back(topo_path: Path) -> None:
    topo = load_topology(topo_path)
    back = topo.reversed()
    assert (back.hot_name, back.cold_name) == ("cold", "hot")
    assert back.policies.hdfs[0].source == "hdfs://cold/w" and back.policies.hdfs[0].targets == ["hdfs://hot/w"]
    assert (back.policies.verify[0].source, back.policies.verify[0].target) == ("hdfs://cold/w/o", "hdfs://hot/w/o")
    assert back.is_reversed and not topo.is_reversed
    # each cluster's HBase root directory is read on that cluster
    assert (back.policies.hbase[0].hbase_rootdir, back.policies.hbase[0].hbase_rootdir_cold) == ("/hbase-cold",
                                                                                                 "/hbase-hot")
    again = back.reversed()
    assert again.hot_name == "hot" and again.policies.hdfs == topo.policies.hdfs
    assert again.policies.verify == topo.policies.verify and again.policies.hbase == topo.policies.hbase
    assert not again.is_reversed
    # the fence stays on the configured cold cluster's ZooKeeper in both directions
    assert back.fence_cluster == "cold" and again.fence_cluster == "cold"


def test_a_policy_without_a_target_on_the_cold_cluster_cannot_be_reversed(tmp_path: Path) -> None:
    path = write_topology(tmp_path, zk=None, hdfs=[{"name": "archive-only", "source": "hdfs://hot/a",
                                                   "targets": ["s3://bucket/a"]}])
    with pytest.raises(ConfigError, match="archive-only.*no target on the cold cluster"):
        load_topology(path).reversed()


def test_reprotect_records_the_direction_in_one_transaction_and_every_edge_follows_it(topo_path: Path) -> None:
    topo = load_topology(topo_path)
    ledger = open_ledger(topo, ACCESS)
    assert directed(topo, ledger).hot_name == "hot"  # no direction recorded: as configured
    epoch = _fail_over(topo)
    # after the failover, before re-protect: the direction is still the old one, and the gate says
    # that nothing protects the active cluster (whatever the signals say)
    assert directed(topo, ledger).hot_name == "hot"
    res = gate_check(topo, ledger, access=ACCESS, components=())
    assert not res.go and any("cold is the active cluster" in r and "reprotect" in r for r in res.reasons)
    # the standby is read-only: a reverse copy into it is refused
    back = topo.reversed()
    with pytest.raises(FencedError, match="fenced"):
        assert_copy_allowed(back, "cold", "hot", access=ACCESS)

    with open_fence(topo, access=ACCESS) as f:
        with pytest.raises(FencedError, match="not the active cluster"):
            f.reprotect(active="hot", standby="cold", by="t", run_id="rp-0")  # hot was not promoted
        assert f.direction() is None and f.state().epoch == epoch  # the refusal wrote nothing
        st = f.reprotect(active="cold", standby="hot", by="t", run_id="rp-1")
        assert st.epoch == epoch + 1 and st.fenced_cluster is None
        snap = f.snapshot()
        assert snap["direction"]["hot"] == "cold" and snap["direction"]["cold"] == "hot"
        assert snap["read_only"] == [] and f.zk.exists(f"{f.root}/mirrors-paused") is None
        again = f.reprotect(active="cold", standby="hot", by="t", run_id="rp-1")  # a resumed run: nothing new
        assert again.epoch == st.epoch
    # between the transaction and the ledger's event (a killed re-protect) the edges see the old
    # direction, where nothing may replicate into the active cluster and the gate says NO_GO
    assert directed(topo, ledger).hot_name == "hot"
    with pytest.raises(FencedError):
        assert_copy_allowed(topo, "hot", "cold", access=ACCESS)
    assert not gate_check(topo, ledger, access=ACCESS, components=()).go
    record(ledger, {"hot": "cold", "cold": "hot", "epoch": st.epoch, "run_id": "rp-1"}, run_id="rp-1")

    now = directed(topo, ledger)
    assert (now.hot_name, now.cold_name) == ("cold", "hot") and now.policies.hdfs[0].source == "hdfs://cold/w"
    assert_copy_allowed(now, "cold", "hot", access=ACCESS)  # the new direction replicates
    with pytest.raises(FencedError):  # the old direction never again: hot -> cold while cold is active
        assert_copy_allowed(topo, "hot", "cold", access=ACCESS)
    res = gate_check(now, ledger, access=ACCESS, components=())
    assert not any("active cluster" in r for r in res.reasons)

    # the CLI loads the topology of the current direction: the fence status and the gate say so
    out = drt("--json", "failover", "fence-status", config=topo_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["direction"]["hot"] == "cold"
    out = drt("--json", "failover", "check", "--timeout", "10", config=topo_path)
    doc = json.loads(out.stdout)
    assert not any("active cluster" in r for r in doc["reasons"]), doc["reasons"]


def test_a_direction_naming_other_clusters_is_refused(topo_path: Path) -> None:
    topo = load_topology(topo_path)
    with pytest.raises(ConfigError, match="not this topology's clusters"):
        oriented(topo, {"hot": "prod", "cold": "dr"})
    assert oriented(topo, {"hot": "hot", "cold": "cold"}) is topo
    assert oriented(topo, {"hot": "cold", "cold": "hot"}).hot_name == "cold"
