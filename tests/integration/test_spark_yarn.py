"""Spark on a real YARN (drt_servers/yarn.py: a ResourceManager and a NodeManager from Hadoop
3.4.1, each its own JVM, over the hot HDFS pair's HA nameservice): `drt distcp --engine spark
--spark-master yarn` and `drt verify --spark-master yarn` give what the local engine / local
Spark give; the executors run the Python of the packed environment shipped with spark.archives
(nothing installed on the node); the applications are FINISHED/SUCCEEDED in the ResourceManager's
REST API and their containers' logs are where the NodeManager keeps them.

Each driver runs in its own `drt` process. Spark's own jars come from the node's Spark
installation (spark.yarn.jars=local:…, as where Spark is installed on the nodes): uploading the
460 MB of jars per application is what spark.yarn.archive avoids on a real estate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drt_servers.hdfs import HdfsCluster
from drt_servers.yarn import YarnCluster

# each YARN application takes 1-3 min on a loaded 2-core machine (a JVM driver, the AM and an
# executor container, the packed environment localized): more than the suite's 600 s default per test
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("copy_state_dir"),
              pytest.mark.timeout(1500)]
REPO = Path(__file__).resolve().parents[2]
DRT = [sys.executable, "-m", "dr_toolkit.cli.main"]


@pytest.fixture(scope="module")
def yarn(hdfs_hot: HdfsCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[YarnCluster]:
    y = YarnCluster("yarn", tmp_path_factory.mktemp("yarn"), hdfs_hot).start()
    yield y
    y.stop()


@pytest.fixture(scope="module")
def spark_conf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The submitter's spark-defaults.conf: small containers for the one 4 GiB NodeManager, and
    every JVM (driver, application master, executor) with the copy engine's quick-start options
    (QUICK_START_JVM): the tests' data are a few hundred rows, their time is the JVMs' start-up."""
    import pyspark

    from dr_toolkit.spark.session import QUICK_START_JVM

    d = tmp_path_factory.mktemp("spark-conf")
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    (d / "spark-defaults.conf").write_text(
        f"spark.yarn.jars local:{jars}/*\nspark.executor.instances 1\nspark.executor.cores 2\n"
        "spark.executor.memory 512m\nspark.yarn.am.memory 256m\nspark.driver.memory 512m\n"
        "spark.sql.shuffle.partitions 4\n"
        + "".join(f"spark.{jvm}.extraJavaOptions {QUICK_START_JVM}\n" for jvm in ("driver", "yarn.am", "executor")))
    return d


def env(yarn: YarnCluster | None = None, conf_dir: Path | None = None) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PYSPARK_GATEWAY", "DRT_SPARK_MASTER", "HADOOP_CONF_DIR", "YARN_CONF_DIR"))}
    e.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO),
              "HADOOP_USER_NAME": "hdfs"})
    if yarn is not None:
        # the node has no Python with the toolkit's packages: the executors must run the shipped one
        e.update(yarn.env(), PYSPARK_PYTHON="/nonexistent/python-not-on-the-nodes")
        e.pop("PYTHONPATH")  # (Spark passes the driver's PYTHONPATH on to the executors)
    if conf_dir is not None:
        e["SPARK_CONF_DIR"] = str(conf_dir)
    return e


def drt(*args: str, environ: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DRT, "--json", *args], env=environ, capture_output=True, text=True, timeout=560, cwd=cwd)


def no_trace(text: str) -> None:
    assert "Traceback" not in text and "Py4JJavaError" not in text, text[-3000:]


def finished_app(yarn: YarnCluster, before: set[str]) -> str:
    """The one application that ran since ``before``: FINISHED with final status SUCCEEDED in the
    ResourceManager's REST API, its containers' logs in the NodeManager's log directory, and its
    executors launched with the packed environment linked as ./drtenv and its Python."""
    new = yarn.application_dirs() - before
    assert len(new) == 1, (new, before)
    app = new.pop()
    assert yarn.application_state(app) == "FINISHED"
    assert yarn.final_status(app) == "SUCCEEDED"
    logs = yarn.container_logs(app)
    containers = {k.split("/")[0] for k in logs}
    assert len(containers) >= 2, logs.keys()  # the application master and an executor
    assert all(f"{c}/stderr" in logs for c in containers)
    launches = [v for k, v in logs.items() if k.endswith("/launch_container.sh") and "CoarseGrainedExecutorBackend" in v]
    assert launches, logs.keys()
    assert all('"drtenv"' in s and "executor-venv-" in s for s in launches)  # the archive, localized
    return app


def test_distcp_on_yarn_equals_the_local_engine(yarn: YarnCluster, spark_conf_dir: Path, hdfs_hot: HdfsCluster,
                                                 hdfs_cold: HdfsCluster, tmp_path: Path) -> None:
    root = f"/yarn-{os.getpid()}-{tmp_path.name}"
    want = {f"d{i % 3}/f{i:02d}.bin": os.urandom(997 * i + 13) for i in range(24)}
    want["d0/empty"] = b""
    for rel, data in want.items():
        hdfs_hot.write(f"{root}/src/{rel}", data)
    src = hdfs_hot.uri(f"{root}/src")
    before = yarn.application_dirs()
    on_yarn = drt("distcp", src, hdfs_cold.uri(f"{root}/yarn"), "--engine", "spark", "--spark-master", "yarn",
                  environ=env(yarn, spark_conf_dir), cwd=tmp_path)
    assert on_yarn.returncode == 0, on_yarn.stderr[-4000:]
    no_trace(on_yarn.stderr)
    local = drt("distcp", src, hdfs_cold.uri(f"{root}/local"), "--engine", "local", environ=env(), cwd=tmp_path)
    assert local.returncode == 0, local.stderr[-3000:]
    y, loc = json.loads(on_yarn.stdout), json.loads(local.stdout)
    keys = ("files_total", "files_copied", "bytes_copied", "files_skipped", "files_deleted", "files_failed", "mode",
            "status")
    assert {k: y[k] for k in keys} == {k: loc[k] for k in keys}
    assert y["files_copied"] == len(want) and y["bytes_copied"] == sum(map(len, want.values()))
    for rel, data in want.items():
        assert hdfs_cold.read(f"{root}/yarn/{rel}") == data
        assert hdfs_cold.read(f"{root}/local/{rel}") == data
    finished_app(yarn, before)


def _parquet(path: Path, rows: list[dict[str, object]]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "part-0.parquet")
    return f"file://{path}"


def test_verify_on_yarn_equals_local(yarn: YarnCluster, spark_conf_dir: Path, tmp_path: Path) -> None:
    src_rows = [{"id": i, "v": f"v{i}", "amt": i * 0.5} for i in range(500)]
    peer_rows = [dict(r) for r in src_rows if r["id"] not in (5, 6)]
    peer_rows[100]["v"] = "changed"
    peer_rows.append({"id": 9000, "v": "new", "amt": 1.0})
    src, peer = _parquet(tmp_path / "s", src_rows), _parquet(tmp_path / "p", peer_rows)
    before = yarn.application_dirs()
    on_yarn = drt("verify", src, peer, "--key", "id", "--buckets", "4", "--spark-master", "yarn",
                  environ=env(yarn, spark_conf_dir), cwd=tmp_path)
    assert on_yarn.returncode == 1, on_yarn.stderr[-4000:]  # differences found
    no_trace(on_yarn.stderr)
    local = drt("verify", src, peer, "--key", "id", "--buckets", "4", "--spark-master", "local[2]",
                environ=env(conf_dir=spark_conf_dir), cwd=tmp_path)  # (its YARN keys unused on local[2])
    assert local.returncode == 1, local.stderr[-3000:]
    y, loc = json.loads(on_yarn.stdout), json.loads(local.stdout)
    counters = ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS", "CONTENT_DIFFERENT_ROWS",
                "source_rows", "peer_rows")
    assert {k: y[k] for k in counters} == {k: loc[k] for k in counters}
    assert (y["ONLY_IN_SOURCE_TABLE_ROWS"], y["ONLY_IN_PEER_TABLE_ROWS"], y["CONTENT_DIFFERENT_ROWS"]) == (2, 1, 1)
    assert y["provenance"]["spark_master"] == "yarn"
    app = finished_app(yarn, before)
    assert y["provenance"]["spark_app_id"] == app


def test_the_nodemanager_serves_mapreduce_shuffle(yarn: YarnCluster) -> None:
    """MapReduce on the same YARN (Hadoop DistCp as a YARN job, benchmarks/yarn_distcp_bench.py): the
    NodeManager runs the mapreduce_shuffle auxiliary service (its ShuffleHandler listens on the port
    given) and the client configuration sends MapReduce jobs to this YARN with the resolved jars."""
    import socket

    with socket.create_connection(("127.0.0.1", yarn.shuffle_port), timeout=10):
        pass
    mapred = (yarn.conf_dir / "mapred-site.xml").read_text()
    assert "<name>mapreduce.framework.name</name><value>yarn</value>" in mapred
    assert "hadoop-mapreduce-client-app-3.4.1.jar" in mapred and "hadoop-distcp-3.4.1.jar" in mapred
    assert "org.apache.hadoop.tools.DistCp" in yarn.mapreduce_argv("org.apache.hadoop.tools.DistCp", [])


def test_yarn_unreachable_is_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    from drt_servers.yarn import site_xml

    (conf / "yarn-site.xml").write_text(site_xml({"yarn.resourcemanager.address": "127.0.0.1:1"}))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_bytes(b"x")
    e = env()
    e["HADOOP_CONF_DIR"] = str(conf)
    p = subprocess.run([*DRT, "distcp", str(tmp_path / "a"), str(tmp_path / "b"), "--engine", "spark",
                        "--spark-master", "yarn"], env=e, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 3, p.stderr[-2000:]
    assert p.stderr.strip().count("\n") == 0 and "127.0.0.1:1" in p.stderr and "ResourceManager" in p.stderr
    e.pop("HADOOP_CONF_DIR")
    p = subprocess.run([*DRT, "distcp", str(tmp_path / "a"), str(tmp_path / "b"), "--engine", "spark",
                        "--spark-master", "yarn"], env=e, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and "HADOOP_CONF_DIR" in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr


CONN_SCRIPT = """
import json, sys
from dr_toolkit.access import Access
from dr_toolkit.secrets import Credentials
from dr_toolkit.spark.session import get_session, with_spark_connections
from dr_toolkit.topology import Topology

topo = Topology.model_validate({"clusters": {
    "hot": {"role": "hot", "local_root": sys.argv[2], "spark": {"conn_id": "spark_yarn"}},
    "cold": {"role": "cold", "local_root": sys.argv[2]}}})
# what DrtHook.get_conn gives a DAG's task: the Spark connection (Airflow's, here given directly)
access = Access.from_mapping({"spark_yarn": Credentials(host="yarn", extra={
    "hadoop_conf_dir": sys.argv[1], "queue": "default", "deploy-mode": "client",
    "conf": {"spark.executor.memory": "512m", "spark.yarn.am.memory": "256m", "spark.executor.instances": "1"}})},
    "the DAG's connections")
topo = with_spark_connections(topo, access)
spark = get_session(topology=topo, access=access, app_name="drt-from-connection")
sc = spark.sparkContext

def where(_rows):
    import sys as s, pydantic
    yield (s.prefix, pydantic.VERSION)

got = sc.parallelize(range(2), 2).mapPartitions(where).collect()
print(json.dumps({"master": sc.master, "app": sc.applicationId, "queue": sc.getConf().get("spark.yarn.queue"),
                  "executors": got}))
spark.stop()
"""


def test_a_spark_connection_submits_to_yarn(yarn: YarnCluster, spark_conf_dir: Path, tmp_path: Path) -> None:
    """The DAGs' way: the topology names clusters.hot.spark.conn_id; the connection (host yarn, its
    extra's hadoop_conf_dir/queue/conf) sends the job to YARN — no HADOOP_CONF_DIR, no master given."""
    e = env(yarn, spark_conf_dir)
    e.pop("HADOOP_CONF_DIR")
    e.pop("YARN_CONF_DIR")
    before = yarn.application_dirs()
    p = subprocess.run([sys.executable, "-c", CONN_SCRIPT, str(yarn.conf_dir), str(tmp_path)], env=e,
                       capture_output=True, text=True, timeout=560, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["master"] == "yarn" and out["queue"] == "default"
    # the tasks ran in the packed environment's Python (its prefix is the container's ./drtenv)
    assert all(prefix.endswith("/drtenv") and "/appcache/" in prefix for prefix, _ in out["executors"]), out
    assert finished_app(yarn, before) == out["app"]
