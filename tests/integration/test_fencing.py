"""Fencing on the real ZooKeeper: increasing epochs, stale writers refused, active cluster, read-only flag."""

from __future__ import annotations

import threading
import uuid

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import FencedError
from dr_toolkit.topology import ZooKeeperEndpoint
from dr_toolkit.zk.client import connect
from dr_toolkit.zk.fencing import Fence

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


@pytest.fixture
def fence(zk_server):
    if not zk_server.running:
        zk_server.start()
    ep = ZooKeeperEndpoint(quorum=zk_server.address, dr_root=f"/drt-{uuid.uuid4().hex[:8]}",
                           connect_timeout_s=5, call_timeout_s=5)
    client = connect(ep, credentials=None)
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


def test_copies_into_the_fenced_read_only_cluster_are_refused(tmp_path, zk_server) -> None:
    from dr_toolkit.topology import load_topology
    from dr_toolkit.zk.fencing import assert_copy_allowed, open_fence
    from tests.support.fixtures_failover import write_topology

    if not zk_server.running:
        zk_server.start()
    hdfs = [{"name": "data", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"]}]
    topo = load_topology(write_topology(tmp_path, zk=zk_server.address, hdfs=hdfs))
    assert_copy_allowed(topo, "cold", "hot", access=Access.from_env())  # nothing fenced yet
    with open_fence(topo, access=Access.from_env()) as fence:
        st = fence.bump(fenced_cluster="hot", by="op")
        fence.set_read_only("hot", True, epoch=st.epoch, by="op")
    with pytest.raises(FencedError, match="cluster 'hot' is fenced"):
        assert_copy_allowed(topo, "cold", "hot", access=Access.from_env())
    assert_copy_allowed(topo, "hot", "cold", epoch=st.epoch, access=Access.from_env())  # the runbook's final copy, under the current epoch
    with pytest.raises(FencedError, match="stale fencing epoch 0"):
        assert_copy_allowed(topo, "hot", "cold", epoch=0, access=Access.from_env())


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
    assert replicate_policy(topo, policy, ledger, access=Access.from_env())[0].ok
    with open_fence(topo, access=Access.from_env()) as fence:
        epoch = fence.bump(fenced_cluster=topo.hot_name, by="test").epoch
    (src / "b.txt").write_text("written after the fence")
    with pytest.raises(FencedError, match="replication into the cold cluster is stopped"):
        replicate_policy(topo, policy, ledger, access=Access.from_env())
    assert replicate_policy(topo, policy, ledger, dry_run=True, access=Access.from_env())[0].ok  # counting changes nothing
    results = replicate_policy(topo, policy, ledger, fence_epoch=epoch, access=Access.from_env())
    assert results[0].ok and results[0].files_copied == 1
    with pytest.raises(FencedError, match="stale fencing epoch"):
        replicate_policy(topo, policy, ledger, fence_epoch=epoch - 1, access=Access.from_env())


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


def _hdfs_topology(tmp_path, zk_server):
    from dr_toolkit.topology import load_topology
    from tests.support.fixtures_failover import write_topology

    if not zk_server.running:
        zk_server.start()
    hdfs = [{"name": "data", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"],
             "options": {"update": True, "delete": True}}]
    path = write_topology(tmp_path, zk=zk_server.address, hdfs=hdfs)
    (tmp_path / "hot" / "data").mkdir(parents=True, exist_ok=True)
    (tmp_path / "hot" / "data" / "a.txt").write_text("hot's file")
    return path, load_topology(path)


def test_abort_after_promotion_is_refused_even_when_the_ledger_missed_the_promotion(tmp_path, zk_server) -> None:
    """A run killed right after it made cold active (the znode written, the ledger row not): an abort
    must read the active-cluster znode, not only the ledger, and keep hot fenced. Fence.lift refuses
    too (the backstop: the active znode's version is checked in the lift's transaction)."""
    from dr_toolkit.access import Access
    from dr_toolkit.errors import ConfigError
    from dr_toolkit.failover.runbook import Runbook
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.zk.fencing import open_fence

    _path, topo = _hdfs_topology(tmp_path, zk_server)
    ledger = open_ledger(topo, Access.from_env())
    rb = Runbook.start(topo, ledger, reason="killed after promotion", execute=True, access=Access.from_env())
    rb.run(until="fence_hot")
    assert rb.state.epoch == 1
    with open_fence(topo, access=Access.from_env()) as fence:
        fence.set_active(topo.cold_name, epoch=1, by=f"run {rb.run_id}")  # ... and the process dies here
    with pytest.raises(ConfigError, match="already the active cluster"):
        rb.abort("false alarm")
    with open_fence(topo, access=Access.from_env()) as fence:
        snap = fence.snapshot()
        assert snap["fencing"]["epoch"] == 1 and snap["fencing"]["fenced_cluster"] == "hot"
        assert snap["read_only"] == ["hot"]
        with pytest.raises(FencedError, match="'cold' is the active cluster"):
            fence.lift(epoch=1, cluster="hot", by="someone")
        assert fence.state().epoch == 1 and fence.is_read_only("hot")


def _race_lift_and_promote(fence: Fence, epoch: int) -> list[BaseException]:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def attempt(write) -> None:  # type: ignore[no-untyped-def]
        barrier.wait()
        try:
            write()
        except FencedError:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(lambda: fence.lift(epoch=epoch, cluster="hot", by="abort"),)),
               threading.Thread(target=attempt, args=(lambda: fence.set_active("cold", epoch=epoch, by="promote"),))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_lift_and_promotion_racing_never_leave_hot_unfenced_with_cold_active(fence) -> None:
    """Lift and set_active under the same epoch, started together many times: afterwards either
    cold is active and hot still fenced, or hot's fence is lifted and cold is not active."""
    for i in range(15):
        st = fence.bump(fenced_cluster="hot", by=f"run {i}")
        fence.set_read_only("hot", True, epoch=st.epoch, by="run")
        fence.zk.ensure_path(fence.root)
        if fence.zk.exists(fence.active_path):
            fence.zk.set(fence.active_path, b"{}")
        errors = _race_lift_and_promote(fence, st.epoch)
        assert not errors, errors
        active = (fence.active() or {}).get("cluster")
        cur = fence.state()
        if active == "cold":
            assert cur.fenced_cluster == "hot" and fence.is_read_only("hot"), (i, cur)
        else:
            assert cur.fenced_cluster is None and not fence.is_read_only("hot"), (i, cur)


def test_distcp_into_a_fenced_or_promoted_cluster_is_refused(tmp_path, zk_server) -> None:
    """`drt distcp` checks the fence as policy runs do: hot → cold is refused once hot is fenced or
    cold is active (even holding the epoch), and nothing writes into a fenced cluster; dry runs
    still count. Nothing on the promoted cluster is deleted."""
    import json
    import os
    import subprocess
    import sys

    from dr_toolkit.zk.fencing import open_fence

    path, topo = _hdfs_topology(tmp_path, zk_server)

    def drt(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "--json", *args],
                              capture_output=True, text=True, timeout=120, env=os.environ.copy())

    r = drt("distcp", "hdfs://hot/data", "hdfs://cold/data", "--update", "--delete")
    assert r.returncode == 0, r.stderr
    with open_fence(topo, access=Access.from_env()) as fence:
        st = fence.bump(fenced_cluster="hot", by="test")
        fence.set_read_only("hot", True, epoch=st.epoch, by="test")
    (tmp_path / "cold" / "data" / "written-on-cold.txt").write_text("new data on the cluster being promoted")
    r = drt("distcp", "hdfs://hot/data", "hdfs://cold/data", "--update", "--delete")
    assert r.returncode == 1 and "replication into the cold cluster is stopped" in r.stderr, r.stderr
    assert (tmp_path / "cold" / "data" / "written-on-cold.txt").exists()
    r = drt("distcp", "hdfs://cold/data", "hdfs://hot/data", "--update")
    assert r.returncode == 1 and "cluster 'hot' is fenced" in r.stderr, r.stderr
    r = drt("distcp", "hdfs://hot/data", "hdfs://cold/data", "--update", "--delete", "--dry-run")
    assert r.returncode == 0 and json.loads(r.stdout)["files_deleted"] == 1, r.stderr
    with open_fence(topo, access=Access.from_env()) as fence:
        fence.set_active("cold", epoch=st.epoch, by="test promotion")
    from dr_toolkit.copy.api import distcp
    from dr_toolkit.copy.request import CopyRequest

    with pytest.raises(FencedError, match="'cold' is the active cluster"):
        distcp(CopyRequest("hdfs://hot/data", "hdfs://cold/data", fence_epoch=st.epoch),
               topology=topo, access=Access.from_env())
    assert (tmp_path / "cold" / "data" / "written-on-cold.txt").exists()


def test_offsets_are_never_applied_onto_a_promoted_cold_cluster(tmp_path, zk_server) -> None:
    """`drt kafka remap --apply` (and the batch apply) writes consumer offsets onto cold: once cold is
    the active cluster its groups' offsets are its consumers' own, and the apply is refused before
    any broker is asked (the brokers here do not answer: before promotion the same command gets as
    far as them, exit 3)."""
    import os
    import subprocess
    import sys

    from dr_toolkit.kafka.batch import apply_many
    from dr_toolkit.topology import load_topology
    from dr_toolkit.zk.fencing import open_fence
    from tests.support.fixtures_failover import write_topology

    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address, kafka_hot="127.0.0.1:1", kafka_cold="127.0.0.1:1",
                          kafka=[{"name": "k", "topics": ["orders"], "groups": ["billing"]}])
    topo = load_topology(path)

    def drt(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), *args],
                              capture_output=True, text=True, timeout=120, env=os.environ.copy())

    r = drt("kafka", "remap", "--group", "billing", "--apply")
    assert r.returncode == 3, r.stderr  # not promoted: the apply goes on and meets the dead brokers
    with open_fence(topo, access=Access.from_env()) as fence:
        st = fence.bump(fenced_cluster="hot", by="test")
        fence.set_active("cold", epoch=st.epoch, by="test promotion")
    r = drt("kafka", "remap", "--group", "billing", "--apply")
    assert r.returncode == 1 and "'cold' is the active cluster" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    with pytest.raises(FencedError, match="is the active cluster"):
        apply_many(topo, None, {"billing": [{"cold_topic": "orders", "partition": 0, "target_offset": 5,
                                             "method": "exact"}]}, access=Access.from_env())
    r = drt("kafka", "remap", "--group", "billing")  # a dry run is not refused: it goes on to the (dead) brokers
    assert r.returncode == 3 and "active cluster" not in r.stderr, r.stderr
