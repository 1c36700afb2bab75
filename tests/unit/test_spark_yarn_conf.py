"""Spark on YARN without a cluster: the packed environment's layout, the conf the session factory
sets for `yarn`, a Spark connection applied to the topology, spark-defaults.conf over the library's
defaults, and the one-line errors before Spark starts (tests/integration/test_spark_yarn.py runs
the same on a real YARN)."""

from __future__ import annotations

import socket
import subprocess
import tarfile
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.secrets import Credentials
from dr_toolkit.spark.executor_env import VENV_PYTHON, venv_archive
from dr_toolkit.spark.session import (
    _under_defaults_file,
    check_yarn,
    resourcemanagers,
    session_conf,
    with_spark_connections,
)
from dr_toolkit.topology import Topology


def _topology(conn_id: str | None = "spark_yarn") -> Topology:
    spark = {"conn_id": conn_id, "conf": {"spark.executor.cores": "3"}} if conn_id else {}
    return Topology.model_validate({"clusters": {
        "hot": {"role": "hot", "local_root": "/tmp/h", "spark": spark},
        "cold": {"role": "cold", "local_root": "/tmp/c"}}})


def test_the_packed_environment_is_a_venv_whose_python_imports_the_executor_packages(tmp_path: Path) -> None:
    path = venv_archive()
    assert venv_archive() == path  # cached by content
    with tarfile.open(path) as tar:
        tar.extractall(tmp_path, filter="fully_trusted")
    assert (tmp_path / "pyvenv.cfg").read_text().startswith("home = ")
    assert (tmp_path / "bin" / "python").is_symlink()
    p = subprocess.run([str(tmp_path / "bin" / "python"), "-c",
                        "import sys, pydantic, google_crc32c, hdfs, boto3, dr_toolkit.copy.execute as m; "
                        "print(sys.prefix); print(m.__file__)"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    prefix, module = p.stdout.split()
    assert Path(prefix) == tmp_path and Path(module).is_relative_to(tmp_path)


def test_yarn_ships_the_venv_and_runs_its_python() -> None:
    keys = session_conf("yarn", "drt", {}, {})
    archive, alias = keys["spark.archives"].split("#")
    assert alias == "drtenv" and "executor-venv-" in archive and Path(archive).is_file()
    assert keys["spark.pyspark.python"] == VENV_PYTHON == "./drtenv/bin/python"
    assert "spark.executorEnv.PYTHONPATH" not in keys
    assert "spark.archives" not in session_conf("yarn", "drt", {}, {}, ship_library=False)


def test_a_spark_connection_sets_master_queue_conf_and_hadoop_conf_dir() -> None:
    access = Access.from_mapping({"spark_yarn": Credentials(host="yarn", extra={
        "hadoop_conf_dir": "/etc/hadoop/conf", "queue": "dr", "conf": {"spark.executor.memory": "4g",
                                                                          "spark.executor.cores": "1"}})})
    topo = with_spark_connections(_topology(), access)
    spark = topo.hot.spark
    assert spark.master == "yarn"
    assert spark.conf == {"spark.executor.memory": "4g", "spark.yarn.queue": "dr", "spark.executor.cores": "3"}
    assert getattr(spark, "hadoop_conf_dir", None) == "/etc/hadoop/conf"
    assert topo.cold.spark.master == "local[2]"
    plain = _topology(None)
    assert with_spark_connections(plain, access) is plain
    cluster_mode = Access.from_mapping({"spark_yarn": Credentials(host="yarn", extra={"deploy-mode": "cluster"})})
    with pytest.raises(ConfigError, match="deploy-mode"):
        with_spark_connections(_topology(), cluster_mode)
    with pytest.raises(ConfigError, match="clusters.hot.spark.conn_id"):
        with_spark_connections(_topology(), Access.from_mapping({}))


def test_spark_defaults_conf_wins_over_the_library_defaults_only(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "# site\nspark.sql.shuffle.partitions 4\nspark.archives hdfs:///site.tgz#site\nspark.app.name=site\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    keys = _under_defaults_file(session_conf("yarn", "drt", {"spark.app.name": "mine"}, {}),
                                {"spark.app.name": "mine"})
    assert "spark.sql.shuffle.partitions" not in keys  # the file's 4 stays
    assert keys["spark.app.name"] == "mine"  # the caller's conf still wins
    assert keys["spark.archives"].startswith("hdfs:///site.tgz#site,") and keys["spark.archives"].endswith("#drtenv")


def test_resourcemanagers_of_a_yarn_site() -> None:
    assert resourcemanagers({"yarn.resourcemanager.hostname": "rm"}) == ["rm:8032"]
    assert resourcemanagers({"yarn.resourcemanager.ha.enabled": "true", "yarn.resourcemanager.ha.rm-ids": "a,b",
                             "yarn.resourcemanager.address.a": "h1:1", "yarn.resourcemanager.hostname.b": "h2"}
                            ) == ["h1:1", "h2:8032"]


def test_yarn_errors_are_one_line_before_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(ConfigError, match="HADOOP_CONF_DIR") as e:
        check_yarn({})
    assert e.value.exit_code == 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        (tmp_path / "yarn-site.xml").write_text(
            "<configuration><property><name>yarn.resourcemanager.address</name>"
            f"<value>127.0.0.1:{port}</value></property></configuration>")
        with pytest.raises(UnreachableError, match="ResourceManager does not answer") as u:
            check_yarn({}, str(tmp_path))
    assert u.value.exit_code == 3 and f"127.0.0.1:{port}" in str(u.value.where)
    with pytest.raises(ConfigError, match="no yarn-site.xml"):
        check_yarn({}, str(tmp_path / "missing"))
