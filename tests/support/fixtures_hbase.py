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


@pytest.fixture(scope="session")
def hbase_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """Two real HBase 2.6 clusters (drt_servers.hbase: mini ZooKeeper + mini HDFS + master + region
    server per JVM), table ``default:orders`` (family ``d``, REPLICATION_SCOPE 1) on both, and the real
    replication peer ``1`` hot → cold added through HBase's Admin API. A cluster that cannot start
    fails the tests that use it, naming the artifact or the log."""
    from drt_servers.hbase import hbase_pair

    hot, cold = hbase_pair(tmp_path_factory.mktemp("hbase"))
    for c in (hot, cold):
        print(f"\n{c.describe()}")
    yield hot, cold
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


_HBASE_COMMAND = '''#!{python}
"""`hbase` for the real HBase cluster {name} (written by tests/support/fixtures_hbase.hbase_command).

What bin/hbase does, on this launcher's HBase 2.6 jars: `hbase classpath` / `hbase mapredcp` print
the class paths; `hbase <CLASS> ARGS` runs the class in a JVM with $HBASE_CLASSPATH on the class path.
`hbase shell -n FILE`: the JRuby shell (org.apache.hbase:hbase-shell) is not served by Maven Central
at this release (drt_servers/maven/hbase/pom.xml), so the commands dr-toolkit generates are made
through HBase's Admin API on the cluster's control channel: add_peer, enable_peer, disable_peer,
remove_peer, alter ... REPLICATION_SCOPE; any other line fails the script (exit 1), as the shell
stops at the first error with -n."""
import json, os, re, socket, sys

CP = {cp!r}
MAPREDCP = {mapredcp!r}
JAVA = {java!r}
FLAGS = {flags!r}
CONTROL = {control}


def control(*words):
    with socket.create_connection(("127.0.0.1", CONTROL), timeout=120) as s:
        s.sendall(" ".join(words).encode() + b"\\n")
        buf = b""
        while not buf.endswith(b"\\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    answer = json.loads(buf.decode())
    if not answer.get("ok"):
        sys.stderr.write("ERROR: " + str(answer.get("error")) + "\\n")
        sys.exit(1)


def quoted(text):
    return re.findall(r"'((?:[^'\\\\]|\\\\.)*)'", text)


def shell(path):
    for raw in open(path).read().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "exit":
            continue
        cmd = line.split()[0]
        q = quoted(line)
        if cmd == "add_peer" and "TABLE_CFS" not in line:
            control("add_peer", q[0], q[1])
        elif cmd in ("enable_peer", "disable_peer", "remove_peer"):
            control(cmd, q[0])
        elif cmd == "alter" and "REPLICATION_SCOPE" in line:
            for fam, scope in re.findall(r"NAME => '([^']+)', REPLICATION_SCOPE => (\\d+)", line):
                control("alter_scope", q[0], fam, scope)
        else:
            sys.stderr.write("ERROR: this hbase stand-in does not run: " + line + "\\n")
            sys.exit(1)
        print("Took 0.0100 seconds")


if len(sys.argv) < 2:
    sys.exit("usage: hbase classpath|mapredcp|shell -n FILE|CLASS ARGS")
if sys.argv[1] == "classpath":
    print(CP)
elif sys.argv[1] == "mapredcp":
    print(MAPREDCP)
elif sys.argv[1] == "shell":
    shell(sys.argv[-1])
else:
    extra = os.environ.get("HBASE_CLASSPATH", "")
    os.execv(JAVA, [JAVA, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-Djava.net.preferIPv4Stack=true", *FLAGS, "-cp", (extra + ":" if extra else "") + CP,
                    *sys.argv[1:]])
'''


def hbase_command(cluster: Any, path: Path) -> Path:
    """An executable ``hbase`` command for the real HBase ``cluster`` at ``path`` (what
    ``clusters.<name>.hbase_shell`` names): its class path and ``hbase <CLASS>`` are bin/hbase's on
    this launcher's jars; its ``shell -n`` makes the peer and scope commands dr-toolkit generates
    through HBase's Admin API (no JRuby shell is served at this release: see the script's text)."""
    import sys

    from drt_servers import maven
    from drt_servers.hbase import JAVA17_FLAGS, mapredcp

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_HBASE_COMMAND.format(python=sys.executable, name=cluster.name, cp=maven.classpath("hbase"),
                                          mapredcp=mapredcp(), java=maven.java(), flags=list(JAVA17_FLAGS),
                                          control=cluster.control_port))
    path.chmod(0o755)
    return path
