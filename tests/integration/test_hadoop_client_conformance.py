"""Hadoop's own clients against the real HDFS (hadoop-client-minicluster; the hot HA pair,
the standby NameNode first): pyspark's bundled Hadoop ``WebHdfsFileSystem`` over ``webhdfs://``
(with the dr-toolkit JAX-RS shim it needs) and its ``DistributedFileSystem`` over ``hdfs://``
RPC, and the proof that Spark reads and writes ``hdfs://<cluster>`` both ways.

``tests/support/hadoop_client/WebHdfsRepl.java`` is compiled here against pyspark's bundled
Hadoop jars; it drives a Hadoop ``FileSystem`` (HA nameservice, the standby first) one command
per line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.errors import ConfigError
from dr_toolkit.fs.hdfs_checksum import md5md5crc32c
from dr_toolkit.spark import hadoop
from dr_toolkit.spark.hadoop import jaxrs_shim_jar, spark_jars_dir
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = pytest.mark.integration
REPL_SRC = Path(__file__).resolve().parents[1] / "support" / "hadoop_client" / "WebHdfsRepl.java"
HAVE_JAVAC = shutil.which("javac") is not None


@pytest.fixture(scope="module")
def repl_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAVE_JAVAC:
        pytest.skip("no javac: the refusal path is tested instead (test_without_a_jdk_webhdfs_is_refused)")
    jars = spark_jars_dir()
    assert jars is not None, "pyspark's jars not found"
    out = tmp_path_factory.mktemp("repl")
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", f"{jars}/*", str(REPL_SRC)], check=True,
                   capture_output=True, timeout=300)
    return out


class Repl:
    def __init__(self, classes: Path, hdfs: HdfsDir, *, shim: bool = True, rpc: bool = False,
                 conf: dict[str, str] | None = None) -> None:
        jars = spark_jars_dir()
        cp = [str(classes), f"{jars}/*"]
        if shim:
            jar = jaxrs_shim_jar()
            assert jar is not None, "the JAX-RS shim could not be built"
            cp.append(str(jar))
        nn = [u.split("//")[1] for u in hdfs.urls]
        rpcs = [f"127.0.0.1:{p}" for p in hdfs.cluster.rpc_ports]
        settings = {
            "dfs.nameservices": "ns1", "dfs.ha.namenodes.ns1": "nn1,nn2",
            "dfs.namenode.http-address.ns1.nn1": nn[0], "dfs.namenode.http-address.ns1.nn2": nn[1],
            "dfs.namenode.rpc-address.ns1.nn1": rpcs[0], "dfs.namenode.rpc-address.ns1.nn2": rpcs[1],
            "hadoop.user.group.static.mapping.overrides": "hdfs=supergroup;",
            "dfs.client.failover.proxy.provider.ns1": hadoop.FAILOVER_PROVIDER,
            "dfs.checksum.combine.mode": "COMPOSITE_CRC",
            "dfs.http.client.retry.policy.enabled": "false", "dfs.http.client.failover.max.attempts": "4",
            **(conf or {}),
        }
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Djava.net.preferIPv4Stack=true", "-cp", os.pathsep.join(cp), "WebHdfsRepl",
             "hdfs://ns1" if rpc else "webhdfs://ns1",
             *(f"{k}={v}" for k, v in settings.items())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "HADOOP_USER_NAME": "hdfs"})
        ready = self._line()
        assert ready.get("ready"), ready

    def _line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the Hadoop client process ended"
        out: dict[str, Any] = json.loads(line)
        return out

    def __call__(self, *args: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\t".join(args) + "\n")
        self.proc.stdin.flush()
        return self._line()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def emu(hot_dir: HdfsDir) -> HdfsDir:
    """This test's directory on the real hot HDFS."""
    return hot_dir


@pytest.fixture
def client(repl_classes: Path, emu: HdfsDir) -> Iterator[Repl]:
    r = Repl(repl_classes, emu)
    yield r
    r.close()


def test_bundled_client_fails_without_the_shim(repl_classes: Path, emu: HdfsDir) -> None:
    """The problem the shim solves: pyspark's shaded Hadoop has the JAX-RS API, no runtime."""
    r = Repl(repl_classes, emu, shim=False, conf={  # fail fast instead of backing off for minutes
        "dfs.http.client.failover.sleep.base.millis": "1", "dfs.http.client.failover.sleep.max.millis": "5"})
    try:
        got = r("ls", "/")
        assert "RuntimeDelegateImpl" in got.get("message", "") or "RuntimeDelegate" in got.get("error", ""), got
    finally:
        r.close()


def test_hadoop_client_namespace_and_data(client: Repl, emu: HdfsDir) -> None:
    P = emu.p
    assert client("mkdirs", P("/c/d")) == {"ok": True}
    assert client("create", P("/c/f"), b"hello world".hex()) == {"ok": True}
    assert client("append", P("/c/f"), b"!!".hex()) == {"ok": True}
    assert client("open", P("/c/f")) == {"hex": b"hello world!!".hex()}
    assert client("open", P("/c/f"), "6") == {"hex": b"world!!".hex()}
    st = client("stat", P("/c/f"))["status"]
    assert st["length"] == 13 and not st["dir"] and st["blockSize"] == 134217728
    names = {i["name"]: i for i in client("ls", P("/c"))["items"]}
    assert set(names) == {"d", "f"} and names["d"]["dir"]
    assert client("home")["path"].startswith("/user/")  # GETHOMEDIRECTORY
    # rename: the old boolean semantics, then rename2 with OVERWRITE
    assert client("rename", P("/c/f"), P("/c/g")) == {"ok": True}
    assert client("create", P("/c/h"), b"x".hex()) == {"ok": True}
    assert client("rename", P("/c/h"), P("/c/g")) == {"ok": False}
    assert client("rename_overwrite", P("/c/h"), P("/c/g")) == {"ok": True}
    assert client("open", P("/c/g")) == {"hex": b"x".hex()}
    assert client("rename_overwrite", P("/c/nope"), P("/c/g"))["error"] == "java.io.FileNotFoundException"
    assert client("rename_overwrite", P("/c/g"), P("/c/d"))["error"] == "java.io.IOException"
    assert client("delete", P("/c/g"), "false") == {"ok": True}
    assert client("delete", P("/c"), "true") == {"ok": True}
    assert client("stat", P("/c"))["error"] == "java.io.FileNotFoundException"
    assert client("create", P("/p/f"), "00")["ok"]
    assert client("delete", P("/p"), "false")["error"] == "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException"


def test_hadoop_client_checksum_is_md5md5crc_whatever_the_combine_mode(client: Repl, emu: HdfsDir) -> None:
    """dfs.checksum.combine.mode=COMPOSITE_CRC is set on the client; over WebHDFS the DataNode
    answers MD5MD5CRC all the same, Hadoop's client parses it, and the value the toolkit computes
    from the bytes (``md5md5crc32c``) equals the real DataNode's."""
    P = emu.p
    data = os.urandom(70_000)
    for path, block in ((P("/k/one"), ""), (P("/k/multi"), "4096")):
        assert client("create", path, data.hex(), block) == {"ok": True}
        got = client("checksum", path)
        assert got["class"] == "MD5MD5CRC32CastagnoliFileChecksum" and got["length"] == 28, got
        bs = int(block or 134217728)
        ours = md5md5crc32c(data, bs, 512)
        assert got["algorithm"] == ours.algorithm
        assert got["bytes"][:56] == ours.value
    assert client("checksum", P("/k/multi"))["algorithm"] == "MD5-of-8MD5-of-512CRC32C"
    emu.open_for_write("/k/open", b"partial")  # hflushed: the NameNode learns the length (a new block)
    got = client("checksum", P("/k/open"))
    assert got["error"] == "java.io.IOException"
    assert got["message"] == f"Fail to get checksum, since file {P('/k/open')} is under construction."
    assert client("open", P("/k/open")) == {"hex": b"partial".hex()}
    assert client("stat", P("/k/open"))["status"]["length"] == 7
    emu.close_file("/k/open")


def test_hadoop_rpc_client_honours_composite_crc(repl_classes: Path, emu: HdfsDir) -> None:
    """Over ``hdfs://`` RPC (what Spark uses with ``hdfs.rpc_addresses``) Hadoop's client does
    honour dfs.checksum.combine.mode=COMPOSITE_CRC: the value is the CRC32C of the whole file,
    whatever its block size — unlike WebHDFS, whose DataNode always answers MD5MD5CRC."""
    import google_crc32c

    P = emu.p
    data = os.urandom(9_000)
    emu.write("/r/one", data)
    emu.write("/r/small-blocks", data, block_size=1024)
    r = Repl(repl_classes, emu, shim=False, rpc=True)
    try:
        for rel in ("/r/one", "/r/small-blocks"):
            got = r("checksum", P(rel))
            assert got["algorithm"] == "COMPOSITE-CRC32C", got
            assert got["bytes"] == f"{google_crc32c.value(data):08x}", got
        assert r("open", P("/r/one")) == {"hex": data.hex()}
    finally:
        r.close()


def test_hadoop_parses_the_snapshot_diff_report(client: Repl, emu: HdfsDir) -> None:
    """GETSNAPSHOTDIFF as the REST call answers it, parsed by Hadoop's JsonUtilClient, and
    Hadoop's own getSnapshotDiffReport (GETSNAPSHOTDIFFLISTING, rebuilt by the client)."""
    P = emu.p
    for p in (P("/s/d/f1"), P("/s/d/f2"), P("/s/x")):
        assert client("create", p, b"1".hex())["ok"]
    assert client("allow_snapshot", P("/s")) == {"ok": True}
    assert client("snapshot", P("/s"), "s1") == {"path": P("/s/.snapshot/s1")}
    assert client("rename", P("/s/d"), P("/s/e"))["ok"]
    assert client("create", P("/s/e/new"), b"2".hex())["ok"]
    assert client("append", P("/s/e/f1"), b"3".hex())["ok"]
    assert client("snapshot", P("/s"), "s2")["path"] == P("/s/.snapshot/s2")
    got = client("snapdiff_rest", P("/s"), "s1", "s2", emu.active_url)
    assert got == {"entries": [
        {"type": "M", "source": "", "target": None}, {"type": "R", "source": "d", "target": "e"},
        {"type": "M", "source": "d", "target": None}, {"type": "+", "source": "d/new", "target": None},
        {"type": "M", "source": "d/f1", "target": None}]}, got
    assert client("snapdiff", P("/s"), "s1", "s2") == got
    # a swap, a move out of a deleted directory, an overwrite: the client's report equals the REST one
    assert client("create", P("/s/x2"), b"2".hex())["ok"] and client("mkdirs", P("/s/dd/sub"))["ok"]
    assert client("create", P("/s/dd/sub/k"), b"k".hex())["ok"]
    assert client("snapshot", P("/s"), "s3")["path"]
    for a, b in ((P("/s/x"), P("/s/tmp")), (P("/s/x2"), P("/s/x")), (P("/s/tmp"), P("/s/x2")), (P("/s/dd/sub/k"), P("/s/k"))):
        assert client("rename", a, b) == {"ok": True}
    assert client("delete", P("/s/dd"), "true") == {"ok": True}
    assert client("create", P("/s/e/f2"), b"new".hex())["ok"]  # overwrite: a new inode
    assert client("snapshot", P("/s"), "s4")["path"]
    rest = client("snapdiff_rest", P("/s"), "s3", "s4", emu.active_url)["entries"]
    listed = client("snapdiff", P("/s"), "s3", "s4")["entries"]
    key = lambda e: (e["type"], e["source"], e["target"])  # noqa: E731 - the client orders sections by path
    assert sorted(listed, key=key) == sorted(rest, key=key), (listed, rest)
    assert {"type": "R", "source": "x", "target": "x2"} in rest and {"type": "+", "source": "k", "target": None} \
        in rest and {"type": "-", "source": "dd", "target": None} in rest


def test_without_a_jdk_webhdfs_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The other route: no shim to be had → one ConfigError naming hdfs.rpc_addresses."""
    monkeypatch.setenv("DRT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no javac
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("DRT_JAXRS_SHIM_JAR", raising=False)
    with pytest.raises(ConfigError) as info:
        hadoop.check_spark_uri("webhdfs://nn1:9870/data")
    assert "rpc_addresses" in str(info.value) and info.value.exit_code == 2


SPARK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from dr_toolkit.topology import load_topology
    from dr_toolkit.spark.hadoop import spark_hadoop_conf, spark_path, check_spark_uri
    topo = load_topology(sys.argv[1])
    loc = check_spark_uri("hdfs://hot/warehouse", topo)
    conf = spark_hadoop_conf(topo, [loc])
    from pyspark.sql import SparkSession
    b = SparkSession.builder.master("local[1]").appName("drt-webhdfs-conformance")
    for k, v in {"spark.ui.enabled": "false", "spark.driver.bindAddress": "127.0.0.1",
                 "spark.sql.shuffle.partitions": "2", **conf}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    base = spark_path(loc)
    src = spark.read.parquet(base + "/in")
    n_in = src.count()
    src.selectExpr("id * 2 AS id").write.mode("overwrite").parquet(base + "/out")
    back = spark.read.parquet(base + "/out")
    print(json.dumps({"path": base, "n_in": n_in, "n_out": back.count(),
                      "sum_out": back.groupBy().sum("id").collect()[0][0], "conf": sorted(conf)}))
    spark.stop()
""")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("route", ["webhdfs", "rpc"])
def test_spark_reads_and_writes_hdfs(repl_classes: Path, emu: HdfsDir, tmp_path: Path, route: str) -> None:
    """Spark (pyspark's bundled Hadoop) reads and writes the real HA cluster as ``hdfs://hot``:
    over WebHDFS through the JAX-RS shim, or over RPC when the topology lists rpc_addresses."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": list(range(100))}), buf)
    WebHdfsFileSystem(emu.urls).write(emu.p("/warehouse/in/part-0.parquet"), [buf.getvalue().to_pybytes()])
    rpc = f"rpc_addresses: [{', '.join(f'127.0.0.1:{p}' for p in emu.cluster.rpc_ports)}]" if route == "rpc" else ""
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(textwrap.dedent(f"""
        version: 1
        clusters:
          hot:
            role: hot
            hdfs:
              namenodes: [{', '.join(emu.urls)}]
              {rpc}
          cold:
            role: cold
            local_root: {tmp_path / 'cold'}
    """))
    script = tmp_path / "spark_hdfs.py"
    script.write_text(SPARK_SCRIPT.replace("hdfs://hot/warehouse", f"hdfs://hot{emu.p('/warehouse')}"))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "HADOOP_USER_NAME": "hdfs"}
    r = subprocess.run([sys.executable, str(script), str(cfg)], capture_output=True, text=True, timeout=600,
                       env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    scheme = "webhdfs" if route == "webhdfs" else "hdfs"
    assert out["path"] == f"{scheme}://hot{emu.p('/warehouse')}"  # HA through the nameservice, the standby first
    assert out["n_in"] == 100 and out["n_out"] == 100 and out["sum_out"] == 2 * sum(range(100))
    assert "spark.hadoop.dfs.ha.namenodes.hot" in out["conf"]
    assert ("spark.jars" in out["conf"]) == (route == "webhdfs")
    assert not any("secret" in k.lower() or "password" in k.lower() for k in out["conf"])
    # what Spark wrote is there on the cluster, committed through renames
    names = set(emu.cluster.client().list(emu.p("/warehouse/out")))
    assert "_SUCCESS" in names and any(n.startswith("part-") for n in names)
