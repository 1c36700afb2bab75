"""Hadoop's own WebHDFS client against the emulator (issue 15.3): the emulator's conformance
test, and the proof that Spark reads ``webhdfs://`` with the dr-toolkit JAX-RS shim.

``tests/support/hadoop_client/WebHdfsRepl.java`` is compiled here against pyspark's bundled
Hadoop jars; it drives ``org.apache.hadoop.hdfs.web.WebHdfsFileSystem`` (HA nameservice, the
standby namenode first) one command per line.
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
from tests.support.webhdfs_emulator import WebHdfsEmulator

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
    def __init__(self, classes: Path, emu: WebHdfsEmulator, *, shim: bool = True,
                 conf: dict[str, str] | None = None) -> None:
        jars = spark_jars_dir()
        cp = [str(classes), f"{jars}/*"]
        if shim:
            jar = jaxrs_shim_jar()
            assert jar is not None, "the JAX-RS shim could not be built"
            cp.append(str(jar))
        nn = [u.split("//")[1] for u in emu.urls]
        settings = {
            "dfs.nameservices": "ns1", "dfs.ha.namenodes.ns1": "nn1,nn2",
            "dfs.namenode.http-address.ns1.nn1": nn[0], "dfs.namenode.http-address.ns1.nn2": nn[1],
            "dfs.client.failover.proxy.provider.ns1": hadoop.FAILOVER_PROVIDER,
            "dfs.checksum.combine.mode": "COMPOSITE_CRC",
            "dfs.http.client.retry.policy.enabled": "false", "dfs.http.client.failover.max.attempts": "4",
            **(conf or {}),
        }
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", os.pathsep.join(cp), "WebHdfsRepl", "webhdfs://ns1",
             *(f"{k}={v}" for k, v in settings.items())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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
def emu(tmp_path: Path) -> Iterator[WebHdfsEmulator]:
    e = WebHdfsEmulator(tmp_path / "hdfs").start(standby_first=True)
    yield e
    e.stop()


@pytest.fixture
def client(repl_classes: Path, emu: WebHdfsEmulator) -> Iterator[Repl]:
    r = Repl(repl_classes, emu)
    yield r
    r.close()


def test_bundled_client_fails_without_the_shim(repl_classes: Path, emu: WebHdfsEmulator) -> None:
    """The problem the shim solves: pyspark's shaded Hadoop has the JAX-RS API, no runtime."""
    r = Repl(repl_classes, emu, shim=False, conf={  # fail fast instead of backing off for minutes
        "dfs.http.client.failover.sleep.base.millis": "1", "dfs.http.client.failover.sleep.max.millis": "5"})
    try:
        got = r("ls", "/")
        assert "RuntimeDelegateImpl" in got.get("message", "") or "RuntimeDelegate" in got.get("error", ""), got
    finally:
        r.close()


def test_hadoop_client_namespace_and_data(client: Repl, emu: WebHdfsEmulator) -> None:
    assert client("mkdirs", "/c/d") == {"ok": True}
    assert client("create", "/c/f", b"hello world".hex()) == {"ok": True}
    assert client("append", "/c/f", b"!!".hex()) == {"ok": True}
    assert client("open", "/c/f") == {"hex": b"hello world!!".hex()}
    assert client("open", "/c/f", "6") == {"hex": b"world!!".hex()}
    st = client("stat", "/c/f")["status"]
    assert st["length"] == 13 and not st["dir"] and st["blockSize"] == 134217728
    names = {i["name"]: i for i in client("ls", "/c")["items"]}
    assert set(names) == {"d", "f"} and names["d"]["dir"]
    assert client("home")["path"].startswith("/user/")  # GETHOMEDIRECTORY
    # rename: the old boolean semantics, then rename2 with OVERWRITE
    assert client("rename", "/c/f", "/c/g") == {"ok": True}
    assert client("create", "/c/h", b"x".hex()) == {"ok": True}
    assert client("rename", "/c/h", "/c/g") == {"ok": False}
    assert client("rename_overwrite", "/c/h", "/c/g") == {"ok": True}
    assert client("open", "/c/g") == {"hex": b"x".hex()}
    assert client("rename_overwrite", "/c/nope", "/c/g")["error"] == "java.io.FileNotFoundException"
    assert client("rename_overwrite", "/c/g", "/c/d")["error"] == "java.io.IOException"
    assert client("delete", "/c/g", "false") == {"ok": True}
    assert client("delete", "/c", "true") == {"ok": True}
    assert client("stat", "/c")["error"] == "java.io.FileNotFoundException"
    assert client("create", "/p/f", "00")["ok"]
    assert client("delete", "/p", "false")["error"] == "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException"


def test_hadoop_client_checksum_is_md5md5crc_whatever_the_combine_mode(client: Repl, emu: WebHdfsEmulator) -> None:
    """dfs.checksum.combine.mode=COMPOSITE_CRC is set on the client; over WebHDFS the datanode
    answers MD5MD5CRC all the same, and Hadoop's client parses and checks our answer (algorithm
    name vs bytes). Hadoop's own DataChecksum/MD5Hash give the same value from the bytes."""
    data = os.urandom(70_000)
    for path, block in (("/k/one", ""), ("/k/multi", "4096")):
        assert client("create", path, data.hex(), block) == {"ok": True}
        got = client("checksum", path)
        assert got["class"] == "MD5MD5CRC32CastagnoliFileChecksum" and got["length"] == 28, got
        bs = int(block or 134217728)
        ours = md5md5crc32c(data, bs, 512)
        assert got["algorithm"] == ours.algorithm
        assert got["bytes"][:56] == ours.value
        ref = client("reference", str(emu.local(path)), "512", str(bs))
        assert (ref["algorithm"], ref["bytes"]) == (got["algorithm"], got["bytes"])
    assert client("checksum", "/k/multi")["algorithm"] == "MD5-of-8MD5-of-512CRC32C"
    emu.open_for_write("/k/open", b"partial")
    got = client("checksum", "/k/open")
    assert got["error"] == "java.io.IOException"
    assert got["message"] == "Fail to get checksum, since file /k/open is under construction."
    assert client("open", "/k/open") == {"hex": b"partial".hex()}
    assert client("stat", "/k/open")["status"]["length"] == 7


def test_hadoop_parses_the_snapshot_diff_report(client: Repl, emu: WebHdfsEmulator) -> None:
    """GETSNAPSHOTDIFF as the REST call answers it, parsed by Hadoop's JsonUtilClient, and
    Hadoop's own getSnapshotDiffReport (GETSNAPSHOTDIFFLISTING, rebuilt by the client)."""
    for p in ("/s/d/f1", "/s/d/f2", "/s/x"):
        assert client("create", p, b"1".hex())["ok"]
    assert client("allow_snapshot", "/s") == {"ok": True}
    assert client("snapshot", "/s", "s1") == {"path": "/s/.snapshot/s1"}
    assert client("rename", "/s/d", "/s/e")["ok"]
    assert client("create", "/s/e/new", b"2".hex())["ok"]
    assert client("append", "/s/e/f1", b"3".hex())["ok"]
    assert client("snapshot", "/s", "s2")["path"] == "/s/.snapshot/s2"
    got = client("snapdiff_rest", "/s", "s1", "s2", emu.active_url)
    assert got == {"entries": [
        {"type": "M", "source": "", "target": None}, {"type": "R", "source": "d", "target": "e"},
        {"type": "M", "source": "d", "target": None}, {"type": "+", "source": "d/new", "target": None},
        {"type": "M", "source": "d/f1", "target": None}]}, got
    assert client("snapdiff", "/s", "s1", "s2") == got
    # a swap, a move out of a deleted directory, an overwrite: the client's report equals the REST one
    assert client("create", "/s/x2", b"2".hex())["ok"] and client("mkdirs", "/s/dd/sub")["ok"]
    assert client("create", "/s/dd/sub/k", b"k".hex())["ok"]
    assert client("snapshot", "/s", "s3")["path"]
    for a, b in (("/s/x", "/s/tmp"), ("/s/x2", "/s/x"), ("/s/tmp", "/s/x2"), ("/s/dd/sub/k", "/s/k")):
        assert client("rename", a, b) == {"ok": True}
    assert client("delete", "/s/dd", "true") == {"ok": True}
    assert client("create", "/s/e/f2", b"new".hex())["ok"]  # overwrite: a new inode
    assert client("snapshot", "/s", "s4")["path"]
    rest = client("snapdiff_rest", "/s", "s3", "s4", emu.active_url)["entries"]
    listed = client("snapdiff", "/s", "s3", "s4")["entries"]
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
def test_spark_reads_and_writes_webhdfs_through_the_shim(repl_classes: Path, emu: WebHdfsEmulator,
                                                         tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": list(range(100))}), buf)
    WebHdfsFileSystem(emu.urls).write("/warehouse/in/part-0.parquet", [buf.getvalue().to_pybytes()])
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(textwrap.dedent(f"""
        version: 1
        clusters:
          hot:
            role: hot
            hdfs:
              namenodes: [{', '.join(emu.urls)}]
          cold:
            role: cold
            local_root: {tmp_path / 'cold'}
    """))
    script = tmp_path / "spark_webhdfs.py"
    script.write_text(SPARK_SCRIPT)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    r = subprocess.run([sys.executable, str(script), str(cfg)], capture_output=True, text=True, timeout=600,
                       env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["path"] == "webhdfs://hot/warehouse"  # HA through the nameservice, the standby first
    assert out["n_in"] == 100 and out["n_out"] == 100 and out["sum_out"] == 2 * sum(range(100))
    assert "spark.hadoop.dfs.ha.namenodes.hot" in out["conf"] and "spark.jars" in out["conf"]
    assert not any("secret" in k.lower() or "password" in k.lower() for k in out["conf"])
    # what Spark wrote is there, committed through renames on the emulator
    names = sorted(p.name for p in emu.local("/warehouse/out").iterdir())
    assert "_SUCCESS" in names and any(n.startswith("part-") for n in names)
