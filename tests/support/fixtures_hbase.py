"""Fixtures for the HBase replication tests (capability 1.3). Loaded by tests/conftest.py.

Real HBase: one session-scoped pair of HBase 2.6 clusters (``hbase_clusters``; ``hbase_hot``
restores peers and region servers after each test). Tests of dr-toolkit's own ZooKeeper writes
(peers in HBase's layout) also get their own znode parent (``/hbase-<uuid>``) on the session's
plain ZooKeeper.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.topology import ZooKeeperEndpoint


@pytest.fixture
def hbase_parent(zk_server: Any) -> Iterator[str]:
    """A unique HBase znode parent; removed after the test (if ZooKeeper is up)."""
    parent = f"/hbase-{uuid.uuid4().hex[:10]}"
    yield parent
    if not zk_server.running:
        zk_server.start()
    from kazoo.client import KazooClient

    # the ACL test creates znodes as digest user drt: authenticate so they can be removed
    c = KazooClient(hosts=zk_server.address, timeout=5, auth_data=[("digest", "drt:s3cret-pw")])
    try:
        c.start(timeout=15)
        c.delete(parent, recursive=True)
    except Exception:  # noqa: BLE001 - clean-up is best effort
        pass
    finally:
        c.stop()
        c.close()


@pytest.fixture
def zk_endpoint(zk_server: Any, hbase_parent: str) -> ZooKeeperEndpoint:
    if not zk_server.running:
        zk_server.start()
    return ZooKeeperEndpoint(quorum=zk_server.address, hbase_znode_parent=hbase_parent,
                             connect_timeout_s=5, call_timeout_s=5)


@pytest.fixture
def zkc(zk_endpoint: ZooKeeperEndpoint) -> Iterator[Any]:
    """dr-toolkit's own client (dr_toolkit.zk.client) on the test ZooKeeper."""
    from dr_toolkit.zk.client import connect

    client = connect(zk_endpoint, credentials=None)
    yield client
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass


#: where the session's pair is, for the child test processes (tests/support/child.py) it starts
PAIR_ENV = "DRT_TEST_HBASE_PAIR"


@pytest.fixture(scope="session")
def hbase_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """Two real HBase 2.6 clusters (drt_servers.hbase: mini ZooKeeper + mini HDFS + master + region
    server per JVM), table ``default:orders`` (family ``d``, REPLICATION_SCOPE 1) on both, and the real
    replication peer ``1`` hot → cold added through HBase's Admin API. A cluster that cannot start
    fails the tests that use it, naming the artifact or the log.

    A test marked ``child_process`` run while the pair is up gets the same pair (``$DRT_TEST_HBASE_PAIR``
    names it: :meth:`HBaseCluster.attach`), not a pair of its own started for it (~40 s); the tests
    leave the pair as they found it (``hbase_hot``, ``hbase_worlds``), in the child as here."""
    import json
    import os

    from drt_servers.hbase import HBaseCluster, hbase_pair
    from tests.support.child import in_child

    shared = os.environ.get(PAIR_ENV) if in_child() else None
    if shared:
        hot, cold = (HBaseCluster.attach(**d) for d in json.loads(shared))
        yield hot, cold  # the parent process stops them
        return
    hot, cold = hbase_pair(tmp_path_factory.mktemp("hbase"))
    for c in (hot, cold):
        print(f"\n{c.describe()}")
    os.environ[PAIR_ENV] = json.dumps([c.attach_args() for c in (hot, cold)])
    yield hot, cold
    os.environ.pop(PAIR_ENV, None)
    for c in (hot, cold):
        c.stop()


@pytest.fixture
def hbase_hot(hbase_clusters: tuple[Any, Any]) -> Iterator[Any]:
    """The hot cluster, left as the test found it: peer 1 (ENABLED) the only peer, one live region server."""
    hot, _ = hbase_clusters
    yield hot
    restore_hbase(hot, hbase_clusters[1])


@pytest.fixture
def hbase_cold(hbase_clusters: tuple[Any, Any]) -> Any:
    return hbase_clusters[1]


def restore_hbase(hot: Any, cold: Any) -> None:
    """Undo what a test did to the shared hot cluster (peers, dead region servers), through HBase's API."""
    from drt_servers.hbase import PEER

    if not hot.process.running:
        return
    peers = hot.list_peers()
    for pid, p in peers.items():
        if pid == PEER:
            if not p["enabled"]:
                hot.enable_peer(pid)
        else:
            hot.remove_peer(pid)
    if PEER not in peers:
        hot.add_peer(PEER, cold.cluster_key)
    if not hot.region_servers:
        hot.start_region_server()


def hbase_endpoint(cluster: Any) -> ZooKeeperEndpoint:
    """The ZooKeeper endpoint of a real HBase cluster, with the znode parent it reported."""
    return ZooKeeperEndpoint(quorum=cluster.zk_quorum, hbase_znode_parent=cluster.znode_parent,
                             connect_timeout_s=5, call_timeout_s=5)


@pytest.fixture
def hot_zk(hbase_hot: Any) -> Iterator[Any]:
    """dr-toolkit's own ZooKeeper client on the real hot cluster's ZooKeeper."""
    from dr_toolkit.zk.client import connect

    client = connect(hbase_endpoint(hbase_hot), credentials=None)
    yield client
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass


@pytest.fixture
def hot_fs(hbase_hot: Any) -> Any:
    """WebHDFS on the hot cluster's HDFS (where its WALs and table descriptors are)."""
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

    return WebHdfsFileSystem([f"http://127.0.0.1:{hbase_hot.nn_http_port}"], user="root", timeout_s=30)


@pytest.fixture
def hbase_topology(tmp_path: Path, zk_server: Any, hbase_parent: str) -> Path:
    """A topology file whose hot cluster's ZooKeeper is the test server (parent = the test's). No HBase
    runs there: it stands for an HBase 1.x (``hbase_version: "1.4"``), which learns peers from ZooKeeper —
    for HBase 2.x the toolkit refuses to write peers into ZooKeeper (issue 38 #1)."""
    path = tmp_path / "drt.yaml"
    path.write_text(f"""\
version: 1
clusters:
  hot:
    role: hot
    local_root: {tmp_path}/hot
    zookeeper:
      quorum: "{zk_server.address}"
      hbase_znode_parent: "{hbase_parent}"
      hbase_version: "1.4"
      connect_timeout_s: 5
      call_timeout_s: 5
  cold:
    role: cold
    local_root: {tmp_path}/cold
    zookeeper:
      quorum: "cold-zk1.example.com:2181,cold-zk2.example.com:2181"
      hbase_znode_parent: /hbase
policies:
  hbase:
    - name: orders
      peer_id: "1"
      namespaces: [shop]
      tables: ["default:audit"]
ledger:
  url: sqlite:///{tmp_path}/ledger.db
""")
    return path


def hbase_command(cluster: Any, path: Path) -> Path:
    """An executable ``hbase`` command for the real HBase ``cluster`` at ``path``: the generator is
    :meth:`drt_servers.hbase.HBaseCluster.write_hbase_command` (the demo writes the same)."""
    return Path(cluster.write_hbase_command(path))

