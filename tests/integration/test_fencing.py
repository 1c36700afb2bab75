"""Fencing on the real ZooKeeper: increasing epochs, stale writers refused, active cluster, read-only flag."""

from __future__ import annotations

import threading
import uuid

import pytest

from dr_toolkit.errors import FencedError
from dr_toolkit.topology import ZooKeeperEndpoint
from dr_toolkit.zk.client import connect
from dr_toolkit.zk.fencing import Fence

pytestmark = pytest.mark.integration


@pytest.fixture
def fence(zk_server):
    if not zk_server.running:
        zk_server.start()
    ep = ZooKeeperEndpoint(quorum=zk_server.address, dr_root=f"/drt-{uuid.uuid4().hex[:8]}",
                           connect_timeout_s=5, call_timeout_s=5)
    client = connect(ep)
    yield Fence(client, ep.dr_root)
    client.close()


def test_a_writer_holding_a_stale_fencing_epoch_is_refused(fence) -> None:
    writer = fence.bump(fenced_cluster="cold", by="writer-a")  # writer A works under epoch 1
    fence.guarded_set(f"{fence.root}/data", b"from-a-1", writer.epoch)

    newer = fence.bump(fenced_cluster="hot", by="operator")  # the operator fences: epoch 2
    assert newer.epoch == writer.epoch + 1

    with pytest.raises(FencedError, match="stale fencing epoch"):
        fence.guarded_set(f"{fence.root}/data", b"from-a-2", writer.epoch)
    with pytest.raises(FencedError):
        fence.check_epoch(writer.epoch)
    with pytest.raises(FencedError):
        fence.set_active("hot", epoch=writer.epoch, by="writer-a")
    data, _ = fence.zk.get(f"{fence.root}/data")
    assert data == b"from-a-1"  # the stale write did not land
    assert fence.active() is None

    fence.guarded_set(f"{fence.root}/data", b"from-operator", newer.epoch)
    assert fence.zk.get(f"{fence.root}/data")[0] == b"from-operator"


def test_concurrent_bumps_each_get_a_distinct_increasing_epoch(fence) -> None:
    epochs: list[int] = []
    lock = threading.Lock()

    def bump(i: int) -> None:
        st = fence.bump(fenced_cluster="hot", by=f"op-{i}", tries=50)
        with lock:
            epochs.append(st.epoch)

    threads = [threading.Thread(target=bump, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(epochs) == list(range(1, 7))
    assert fence.state().epoch == 6


def test_bump_with_an_expected_epoch_refuses_when_someone_fenced_in_between(fence) -> None:
    fence.bump(fenced_cluster="hot", by="a")
    fence.bump(fenced_cluster="hot", by="b")
    with pytest.raises(FencedError, match="expected 1"):
        fence.bump(fenced_cluster="hot", by="a", expected_epoch=1)
    assert fence.state().epoch == 2


def test_promotion_and_read_only_flag_are_written_under_the_epoch(fence) -> None:
    st = fence.bump(fenced_cluster="hot", by="op")
    fence.set_read_only("hot", True, epoch=st.epoch, by="op")
    assert fence.is_read_only("hot") and not fence.is_read_only("cold")
    fence.set_active("cold", epoch=st.epoch, by="op")
    snap = fence.snapshot()
    assert snap["active"]["cluster"] == "cold" and snap["active"]["epoch"] == st.epoch
    assert snap["read_only"] == ["hot"]
    assert snap["fencing"] == {"epoch": 1, "fenced_cluster": "hot", "at": st.at, "by": "op"}


def test_assert_writable_refuses_writers_for_the_fenced_read_only_cluster(tmp_path, zk_server) -> None:
    from dr_toolkit.topology import load_topology
    from dr_toolkit.zk.fencing import assert_writable, open_fence
    from tests.support.fixtures_failover import write_topology

    if not zk_server.running:
        zk_server.start()
    hdfs = [{"name": "data", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"]}]
    topo = load_topology(write_topology(tmp_path, zk=zk_server.address, hdfs=hdfs))
    assert_writable(topo, "hot")  # nothing fenced yet
    with open_fence(topo) as fence:
        st = fence.bump(fenced_cluster="hot", by="op")
        fence.set_read_only("hot", True, epoch=st.epoch, by="op")
    with pytest.raises(FencedError, match="cluster 'hot' is fenced"):
        assert_writable(topo, "hot")
    assert_writable(topo, "cold", epoch=st.epoch)  # the cold side's writer under the current epoch
    with pytest.raises(FencedError, match="stale fencing epoch 0"):
        assert_writable(topo, "cold", epoch=0)


def test_scheduled_replication_refused_once_hot_is_fenced(tmp_path, zk_server) -> None:
    """After the hot cluster is fenced, `drt replicate` must not write into the (promoted) cold
    cluster; the runbook's final copy, holding the current epoch, still runs."""
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import load_topology
    from dr_toolkit.zk.fencing import open_fence
    from tests.support.fixtures_failover import write_topology

    if not zk_server.running:
        zk_server.start()
    hdfs = [{"name": "data", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"]}]
    topo = load_topology(write_topology(tmp_path, zk=zk_server.address, hdfs=hdfs))
    ledger = Ledger.open(topo.ledger.url)
    src = tmp_path / "hot" / "data"
    src.mkdir(parents=True, exist_ok=True)
    (src / "a.txt").write_text("before the fence")
    policy = topo.policies.hdfs[0].name
    assert replicate_policy(topo, policy, ledger)[0].ok
    with open_fence(topo) as fence:
        epoch = fence.bump(fenced_cluster=topo.hot_name, by="test").epoch
    (src / "b.txt").write_text("written after the fence")
    with pytest.raises(FencedError, match="replication into the cold cluster is stopped"):
        replicate_policy(topo, policy, ledger)
    assert replicate_policy(topo, policy, ledger, dry_run=True)[0].ok  # counting changes nothing
    results = replicate_policy(topo, policy, ledger, fence_epoch=epoch)
    assert results[0].ok and results[0].files_copied == 1
    with pytest.raises(FencedError, match="stale fencing epoch"):
        replicate_policy(topo, policy, ledger, fence_epoch=epoch - 1)


def test_an_epoch_that_was_never_issued_is_refused(fence) -> None:
    st = fence.bump(fenced_cluster="hot", by="op")
    with pytest.raises(FencedError, match="never issued"):
        fence.check_epoch(st.epoch + 1)
    with pytest.raises(FencedError, match="never issued"):
        fence.guarded_set(f"{fence.root}/data", b"forged", st.epoch + 5)
    with pytest.raises(FencedError, match="never issued"):
        fence.set_active("cold", epoch=st.epoch + 1, by="forger")
    assert fence.zk.exists(f"{fence.root}/data") is None and fence.active() is None
    assert fence.check_epoch(st.epoch).epoch == st.epoch


def test_lift_retires_the_fencing_epoch_and_clears_the_read_only_flag(fence) -> None:
    st = fence.bump(fenced_cluster="hot", by="run-1")
    fence.set_read_only("hot", True, epoch=st.epoch, by="run-1")
    lifted = fence.lift(epoch=st.epoch, cluster="hot", by="op abort run-1")
    assert lifted.epoch == st.epoch + 1 and lifted.fenced_cluster is None
    assert not fence.is_read_only("hot") and fence.state().fenced_cluster is None
    with pytest.raises(FencedError, match="stale fencing epoch"):
        fence.set_active("cold", epoch=st.epoch, by="run-1")  # the aborted run's writer
    with pytest.raises(FencedError, match="expected 1"):
        fence.lift(epoch=st.epoch, cluster="hot", by="again")  # lifting twice is refused


def test_random_bumps_lifts_and_writes_never_accept_a_non_current_epoch(fence) -> None:
    """Attack: random sequences of bumps, lifts and writes with random epochs; a write lands iff its
    epoch is the current one."""
    import random

    rnd = random.Random(7)
    current = fence.state().epoch
    for i in range(60):
        op = rnd.choice(["bump", "lift", "write", "write"])
        if op == "bump":
            current = fence.bump(fenced_cluster="hot", by=f"op{i}").epoch
        elif op == "lift" and current:
            current = fence.lift(epoch=current, cluster="hot", by=f"op{i}").epoch
        else:
            e = rnd.randint(0, current + 2)
            path = f"{fence.root}/w"
            if e == current:
                fence.guarded_set(path, str(i).encode(), e)
                assert fence.zk.get(path)[0] == str(i).encode()
            else:
                before = fence.zk.exists(path) and fence.zk.get(path)[0]
                with pytest.raises(FencedError):
                    fence.guarded_set(path, str(i).encode(), e)
                assert (fence.zk.exists(path) and fence.zk.get(path)[0]) == before
    assert fence.state().epoch == current
