"""Issue 38 #8: the fence is keyed by cluster identity, not by how a URI is spelled.

On the real HDFS pair (hot: an HA pair of NameNodes; cold: one NameNode) and a real ZooKeeper:
after promotion, `drt distcp webhdfs://<hot NameNode>/… webhdfs://<cold NameNode>/… --update
--delete` — in every spelling of the host (127.0.0.1, localhost, upper case, a trailing dot, the
machine's name, [::1]) and through either of hot's NameNodes — is refused like `hdfs://hot/…`, and
deletes nothing the new active cluster wrote; a copy into the fenced hot by address is refused too.
An address the topology does not list is asked the block pool its NameNode serves while a fence is
up: hot's second NameNode, left out of the topology, is still hot; a NameNode of another namespace
is not the fence's business; an address that cannot say what it is is refused.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.fencing import FOREIGN, UNKNOWN, host_key, open_fence, static_identity
from tests.support.fixtures_failover import drt, write_topology
from tests.support.procs import free_port

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
ACCESS = Access.from_env()


def _topology(tmp_path: Path, zk_server: Any, hot_namenodes: list[str], cold_namenodes: list[str]) -> Path:
    if not zk_server.running:
        zk_server.start()
    return write_topology(tmp_path, zk=zk_server.address,
                          hot_extra={"hdfs": {"namenodes": hot_namenodes, "user": "hdfs"}},
                          cold_extra={"hdfs": {"namenodes": cold_namenodes, "user": "hdfs"}})


def _promote(topo: Any) -> None:
    """What the runbook leaves after promotion: hot fenced and read-only, cold active."""
    with open_fence(topo, access=ACCESS) as fence:
        st = fence.bump(fenced_cluster=topo.hot_name, by="test")
        fence.set_read_only(topo.hot_name, True, epoch=st.epoch, by="test")
        fence.set_active(topo.cold_name, epoch=st.epoch, by="test promotion")


def _spellings(port: int) -> list[str]:
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST.:{port}", f"{socket.gethostname()}:{port}",
            f"[::1]:{port}", f"LocalHost:{port}"]


def test_every_spelling_of_one_host_is_one_host() -> None:
    local = host_key("127.0.0.1")
    for spelling in ("localhost", "LOCALHOST", "localhost.", "[::1]", "::1", socket.gethostname(),
                     socket.gethostname().upper() + "."):
        assert host_key(spelling) == local, spelling
    assert host_key("192.0.2.7") != local  # TEST-NET-1: no interface of this machine


def test_after_promotion_a_copy_by_namenode_address_is_refused_like_the_cluster_name(
        tmp_path, zk_server, hdfs_hot, hdfs_cold, hot_dir, cold_dir) -> None:
    path = _topology(tmp_path, zk_server, hdfs_hot.namenodes, hdfs_cold.namenodes)
    topo = load_topology(path)
    hot_dir.write("/data/a.txt", b"hot's file")
    r = drt("--json", "distcp", f"hdfs://hot{hot_dir.p('/data')}", f"hdfs://cold{cold_dir.p('/data')}",
            "--update", "--delete", config=path)
    assert r.returncode == 0, r.stderr
    _promote(topo)
    cold_dir.write("/data/written-on-the-new-active.txt", b"acknowledged on cold after promotion")
    held = cold_dir.tree("/data")

    cold_port = int(hdfs_cold.namenodes[0].rsplit(":", 1)[1])
    hot_ports = [int(u.rsplit(":", 1)[1]) for u in hdfs_hot.namenodes]
    tried = 0
    for hot_port in hot_ports:  # either NameNode of the HA pair
        for src_host, dst_host in zip(_spellings(hot_port), _spellings(cold_port), strict=True):
            r = drt("--json", "distcp", f"webhdfs://{src_host}{hot_dir.p('/data')}",
                    f"webhdfs://{dst_host}{cold_dir.p('/data')}", "--update", "--delete", config=path)
            assert r.returncode == 1, (src_host, dst_host, r.stdout, r.stderr[-2000:])
            assert "'cold' is the active cluster" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
            tried += 1
    assert tried == 2 * len(_spellings(0))
    # the cluster-name form, for comparison (it was refused before the fix too)
    r = drt("--json", "distcp", f"hdfs://hot{hot_dir.p('/data')}", f"hdfs://cold{cold_dir.p('/data')}",
            "--update", "--delete", config=path)
    assert r.returncode == 1 and "'cold' is the active cluster" in r.stderr, r.stderr[-2000:]
    assert cold_dir.tree("/data") == held  # nothing the new active cluster wrote was deleted

    # into the fenced hot, by address: refused, whatever the spelling
    hot_before = hot_dir.tree("/data")
    for dst_host in _spellings(hot_ports[1])[:4]:
        r = drt("--json", "distcp", f"hdfs://cold{cold_dir.p('/data')}", f"webhdfs://{dst_host}{hot_dir.p('/data')}",
                "--update", config=path)
        assert r.returncode == 1 and "cluster 'hot' is fenced" in r.stderr, (dst_host, r.stderr[-2000:])
    assert hot_dir.tree("/data") == hot_before
    # a dry run still counts what it would do (it writes nothing)
    r = drt("--json", "distcp", f"webhdfs://localhost:{hot_ports[1]}{hot_dir.p('/data')}",
            f"webhdfs://localhost:{cold_port}{cold_dir.p('/data')}", "--update", "--delete", "--dry-run", config=path)
    assert r.returncode == 0 and json.loads(r.stdout)["files_deleted"] == 1, r.stderr[-2000:]


def test_an_address_the_topology_does_not_list_is_asked_what_cluster_it_is(
        tmp_path, zk_server, hdfs_hot, hdfs_cold, hot_dir, cold_dir) -> None:
    """Hot's topology lists only its first NameNode: its second, by address, is still hot (their
    block pool), so hot → cold stays refused after promotion. An address that cannot say what it is
    (nothing listens there) is refused while the fence is up, in one line naming what to do; before
    any fence it is not asked at all."""
    path = _topology(tmp_path, zk_server, hdfs_hot.namenodes[:1], hdfs_cold.namenodes)
    topo = load_topology(path)
    hot_dir.write("/data/a.txt", b"hot's file")
    cold_dir.write("/data/b.txt", b"cold's own file")
    second = hdfs_hot.namenodes[1].split("//", 1)[1]
    loc_second = parse_uri(f"webhdfs://{second}{hot_dir.p('/data')}", topo)
    assert static_identity(topo, loc_second).cluster == UNKNOWN  # not listed: the topology alone cannot tell
    nowhere = f"127.0.0.1:{free_port()}"
    r = drt("--json", "distcp", f"hdfs://cold{cold_dir.p('/data')}", f"webhdfs://{nowhere}/x", "--update", config=path)
    assert r.returncode == 3, r.stderr[-2000:]  # no fence: not asked; the copy meets the dead address
    _promote(topo)
    held = cold_dir.tree("/data")
    r = drt("--json", "distcp", f"webhdfs://{second}{hot_dir.p('/data')}", f"hdfs://cold{cold_dir.p('/data')}",
            "--update", "--delete", config=path)
    assert r.returncode == 1 and "'cold' is the active cluster" in r.stderr, r.stderr[-2000:]
    assert "block pool" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert cold_dir.tree("/data") == held
    r = drt("--json", "distcp", f"hdfs://cold{cold_dir.p('/data')}", f"webhdfs://{second}{hot_dir.p('/data')}",
            "--update", config=path)
    assert r.returncode == 1 and "cluster 'hot' is fenced" in r.stderr, r.stderr[-2000:]
    r = drt("--json", "distcp", f"hdfs://cold{cold_dir.p('/data')}", f"webhdfs://{nowhere}/x", "--update", config=path)
    assert r.returncode == 1 and "could not be identified" in r.stderr, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) <= 2 and "clusters.<name>.hdfs.namenodes" in r.stderr, r.stderr
    r = drt("--json", "distcp", f"webhdfs://{nowhere}/x", f"hdfs://cold{cold_dir.p('/data')}", "--update",
            config=path)
    assert r.returncode == 1 and "could not be identified" in r.stderr, r.stderr[-2000:]
    # a place that is no cluster of the topology is not the fence's business
    assert static_identity(topo, parse_uri(f"file://{tmp_path}/elsewhere", topo)).cluster == FOREIGN
    r = drt("--json", "distcp", f"hdfs://cold{cold_dir.p('/data')}", f"file://{tmp_path}/elsewhere", config=path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "elsewhere" / "b.txt").read_bytes() == b"cold's own file"


def test_a_local_path_under_a_clusters_local_root_is_that_cluster(tmp_path, zk_server) -> None:
    """The embedded default (clusters on local directories): after promotion a copy spelled with
    file:// paths, plain paths or a symlink into cold's local_root is hot → cold, and refused."""
    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address,
                          hdfs=[{"name": "data", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"]}])
    topo = load_topology(path)
    (tmp_path / "hot" / "data").mkdir(parents=True)
    (tmp_path / "hot" / "data" / "a.txt").write_text("hot's file")
    r = drt("--json", "distcp", "hdfs://hot/data", "hdfs://cold/data", "--update", "--delete", config=path)
    assert r.returncode == 0, r.stderr
    _promote(topo)
    (tmp_path / "cold" / "data" / "new.txt").write_text("written on the new active cluster")
    (tmp_path / "alias").symlink_to(tmp_path / "cold")
    for src, dst in ((f"file://{tmp_path}/hot/data", f"file://{tmp_path}/cold/data"),
                     (f"{tmp_path}/hot/data", f"{tmp_path}/cold/data"),
                     (f"file://{tmp_path}/hot/data", f"file://{tmp_path}/alias/data")):
        r = drt("--json", "distcp", src, dst, "--update", "--delete", config=path)
        assert r.returncode == 1 and "'cold' is the active cluster" in r.stderr, (src, dst, r.stderr[-2000:])
    r = drt("--json", "distcp", "hdfs://cold/data", f"file://{tmp_path}/hot/data", "--update", config=path)
    assert r.returncode == 1 and "cluster 'hot' is fenced" in r.stderr, r.stderr[-2000:]
    assert (tmp_path / "cold" / "data" / "new.txt").exists()
    assert sorted(p.name for p in (tmp_path / "hot" / "data").iterdir()) == ["a.txt"]


def test_a_namenode_of_another_cluster_is_not_the_fences_business(
        tmp_path, zk_server, hdfs_hot, hdfs_cold, hot_dir, cold_dir) -> None:
    """While the fence is up, an address the topology does not list whose NameNode serves a block pool
    no topology cluster has (here the real second HDFS, which this topology does not name) is a
    foreign cluster: copies into it go on."""
    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address,
                          hot_extra={"hdfs": {"namenodes": hdfs_hot.namenodes, "user": "hdfs"}})
    topo = load_topology(path)
    assert topo.cold.hdfs is None  # cold is the local directory here; hdfs_cold is no cluster of this topology
    hot_dir.write("/data/a.txt", b"hot's file")
    _promote(topo)
    foreign = f"webhdfs://{hdfs_cold.namenodes[0].split('//', 1)[1]}{cold_dir.p('/copy')}"
    assert static_identity(topo, parse_uri(foreign, topo)).cluster == UNKNOWN
    r = drt("--json", "distcp", f"hdfs://hot{hot_dir.p('/data')}", foreign, "--update", config=path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert cold_dir.tree("/copy") == {"a.txt": b"hot's file"}
