"""Real HDFS for the tests (docs/contracts.md, the real servers): one session-scoped pair of clusters from Hadoop's
``hadoop-client-minicluster`` (``drt_servers.hdfs``) — hot, an HA pair of NameNodes whose first
(standby) is listed first so every client fails over, and cold, one NameNode — and, per test,
a fresh unique directory on each so tests never see each other's files.

A cluster that cannot start fails the test with its log (never a skip). A test that stops,
kills or fails a cluster over gets it back running (and hot's standby first again) by the next
test's fixture.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from drt_servers.hdfs import HdfsCluster


@pytest.fixture(scope="session")
def hdfs_hot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsCluster]:
    """The hot HDFS: two NameNodes (``namenodes[0]`` standby, ``namenodes[1]`` active) + a DataNode."""
    c = HdfsCluster("hdfs-hot", tmp_path_factory.mktemp("hdfs-hot"), ha=True).start()
    yield c
    c.kill()


@pytest.fixture(scope="session")
def hdfs_cold(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsCluster]:
    """The cold HDFS: one NameNode + a DataNode."""
    c = HdfsCluster("hdfs-cold", tmp_path_factory.mktemp("hdfs-cold")).start()
    yield c
    c.kill()


def _healthy(c: HdfsCluster) -> HdfsCluster:
    if not c.running:
        c.start()
    if c.ha and c.active_index() != 1:
        c.failover()  # back to: the standby listed first
    return c


class HdfsDir:
    """A test's own directory ``root`` on a real cluster. Paths given to its helpers are relative
    to it (``"/data/x"`` is ``<root>/data/x``); :meth:`p` gives the cluster path."""

    def __init__(self, cluster: HdfsCluster, root: str) -> None:
        self.cluster = cluster
        self.root = root

    def p(self, rel: str = "") -> str:
        rel = rel.strip("/")
        return f"{self.root}/{rel}" if rel else self.root

    # addresses
    @property
    def urls(self) -> list[str]:
        return self.cluster.namenodes

    @property
    def active_url(self) -> str:
        return self.cluster.webhdfs_url

    def location(self, rel: str) -> Any:
        return self.cluster.location(self.p(rel))

    def uri(self, rel: str) -> str:
        return self.cluster.uri(self.p(rel))

    def fs(self, timeout_s: float = 30) -> Any:
        from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

        return WebHdfsFileSystem(self.urls, user="hdfs", timeout_s=timeout_s)

    # changes behind the toolkit's back
    def write(self, rel: str, data: bytes, *, block_size: int | None = None) -> None:
        self.cluster.write(self.p(rel), data, block_size=block_size)

    def append(self, rel: str, data: bytes) -> None:
        self.cluster.append(self.p(rel), data)

    def read(self, rel: str) -> bytes:
        return self.cluster.read(self.p(rel))

    def mkdir(self, rel: str) -> None:
        self.cluster.mkdir(self.p(rel))

    def rename(self, src: str, dst: str) -> None:
        self.cluster.rename(self.p(src), self.p(dst))

    def delete(self, rel: str) -> bool:
        return self.cluster.delete(self.p(rel))

    def stat(self, rel: str) -> dict[str, Any] | None:
        return self.cluster.stat(self.p(rel))

    def allow_snapshot(self, rel: str) -> None:
        self.cluster.mkdir(self.p(rel))
        self.cluster.allow_snapshot(self.p(rel))

    def create_snapshot(self, rel: str, name: str) -> None:
        self.cluster.create_snapshot(self.p(rel), name)

    def open_for_write(self, rel: str, data: bytes = b"", **kw: Any) -> None:
        self.cluster.open_for_write(self.p(rel), data, **kw)

    def hflush(self, rel: str, data: bytes, **kw: Any) -> None:
        self.cluster.hflush(self.p(rel), data, **kw)

    def close_file(self, rel: str) -> None:
        self.cluster.close_file(self.p(rel))

    def recover_lease(self, rel: str) -> None:
        self.cluster.recover_lease(self.p(rel))

    def failover(self) -> None:
        self.cluster.failover()

    def tree(self, rel: str = "") -> dict[str, bytes]:
        """rel path -> bytes of every file under ``rel`` (the toolkit's temporaries left out)."""
        client = self.cluster.client()
        base = self.p(rel)
        out = {}
        for dirpath, _dirs, files in client.walk(base):
            for f in files:
                if f.startswith(".drt-tmp."):
                    continue
                full = f"{dirpath}/{f}"
                with client.read(full) as r:
                    out[full[len(base) + 1:]] = bytes(r.read())
        return out


def _unique(request: pytest.FixtureRequest) -> str:
    name = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:60]
    return f"/t/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def hot_dir(hdfs_hot: HdfsCluster, request: pytest.FixtureRequest) -> HdfsDir:
    """A fresh directory of this test's own on the hot cluster."""
    d = HdfsDir(_healthy(hdfs_hot), _unique(request))
    hdfs_hot.mkdir(d.root)
    return d


@pytest.fixture
def cold_dir(hdfs_cold: HdfsCluster, request: pytest.FixtureRequest) -> HdfsDir:
    """A fresh directory of this test's own on the cold cluster."""
    d = HdfsDir(_healthy(hdfs_cold), _unique(request))
    hdfs_cold.mkdir(d.root)
    return d

