"""Fixtures for the HBase replication tests (capability 1.3). Loaded by tests/conftest.py.

Each test gets its own znode parent (``/hbase-<uuid>``): the ZooKeeper is shared by the session.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
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

    client = connect(zk_endpoint)
    yield client
    try:
        client.close()
    except Exception:  # noqa: BLE001
        pass


@pytest.fixture
def rs_cluster(zk_server: Any, hbase_parent: str) -> Iterator[Callable[..., Any]]:
    """Factory of simulated HBase clusters (drt_demo/regionserver_sim.py) under the test's parent."""
    from drt_demo.regionserver_sim import SimCluster

    made: list[SimCluster] = []

    def make(peers: list[str], parent: str | None = None, rootdir: Any = None) -> SimCluster:
        c = SimCluster(zk_server.address, parent or hbase_parent, peers, rootdir=rootdir)
        made.append(c)
        return c

    yield make
    for c in made:
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass


@pytest.fixture
def hbase_topology(tmp_path: Path, zk_server: Any, hbase_parent: str) -> Path:
    """A topology file whose hot cluster's ZooKeeper is the test server (parent = the test's)."""
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
