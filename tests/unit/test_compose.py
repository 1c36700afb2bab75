"""docker-compose.yml has the full stack, wired to a topology that validates.

No Docker engine runs in this project's CI, so this checks the file's structure: the
services and images, the published ports, and that the mounted topology, DAGs and plugins
exist and the topology's endpoints name compose services.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import yaml

from dr_toolkit.topology import load_topology

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _image(name: str) -> str:
    svc = SERVICES[name]
    return str(svc.get("image") or svc["build"]["dockerfile"])


def test_full_stack_services_present() -> None:
    airflow = {"airflow-apiserver": "api-server", "airflow-scheduler": "scheduler",
               "airflow-dag-processor": "dag-processor", "airflow-triggerer": "triggerer"}
    for name, command in airflow.items():
        assert SERVICES[name]["command"] == command
        assert "dr-toolkit-airflow" in _image(name)
        env = SERVICES[name]["environment"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
    assert _image("postgres").startswith("postgres:15")
    assert _image("zookeeper").startswith("zookeeper:3.8")
    for side in ("hot", "cold"):
        assert _image(f"kafka-{side}").startswith("apache/kafka:")
        assert _image(f"namenode-{side}").startswith("apache/hadoop:3")
        assert _image(f"datanode-{side}").startswith("apache/hadoop:3")
        assert SERVICES[f"namenode-{side}"]["environment"]["HDFS-SITE.XML_dfs.webhdfs.enabled"] == "true"
    assert _image("minio").startswith("minio/minio")
    assert "spark://spark-master:7077" in " ".join(SERVICES["spark-worker"]["command"])


def test_published_ports_do_not_clash() -> None:
    host_ports = [p.split(":")[0] for s in SERVICES.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports
    assert "8080" in host_ports  # the Airflow UI


def test_mounted_files_exist_and_topology_validates() -> None:
    mounts = SERVICES["airflow-scheduler"]["volumes"]
    sources = {m.split(":")[0]: m.split(":")[1] for m in mounts if m.startswith("./")}
    for src in sources:
        assert (REPO / src).exists(), f"{src} is mounted but missing"
    topo_src = next(s for s, d in sources.items() if d == "/opt/dr-toolkit/topology.yaml")
    env = SERVICES["airflow-scheduler"]["environment"]
    assert env["DRT_CONFIG"] == "/opt/dr-toolkit/topology.yaml"
    topo = load_topology(REPO / topo_src)
    # Every endpoint in the topology is a compose service.
    hosts = set()
    for c in topo.clusters.values():
        if c.hdfs:
            hosts |= {urlparse(u).hostname for u in c.hdfs.namenodes}
        if c.kafka:
            hosts |= {hp.rsplit(":", 1)[0] for hp in c.kafka.bootstrap_servers.split(",")}
        if c.zookeeper:
            hosts |= {hp.rsplit(":", 1)[0] for hp in c.zookeeper.quorum.split(",")}
        if c.s3 and c.s3.endpoint_url:
            hosts.add(urlparse(c.s3.endpoint_url).hostname)
    assert hosts <= set(SERVICES), hosts - set(SERVICES)
    for other in ("docker/airflow.Dockerfile", "docker/mm2.properties", "docker/postgres-init.sql"):
        assert (REPO / other).exists()


def test_connections_named_in_topology_are_defined() -> None:
    topo = load_topology(REPO / "examples" / "docker.yaml")
    env = SERVICES["airflow-scheduler"]["environment"]
    conn_ids = {ep.conn_id for c in topo.clusters.values() for ep in (c.kafka, c.s3, c.hdfs, c.zookeeper)
                if ep is not None and ep.conn_id}
    for conn_id in conn_ids:
        assert f"AIRFLOW_CONN_{conn_id.upper()}" in env, conn_id


def _env(name: str) -> dict[str, str]:
    env = SERVICES[name].get("environment") or {}
    return {k: str(v) for k, v in env.items()}


AIRFLOW_SERVICES = ["airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                    "airflow-triggerer"]


def test_airflow_services_share_jwt_secret_and_config() -> None:
    envs = [_env(n) for n in AIRFLOW_SERVICES]
    assert all(e == envs[0] for e in envs), "every Airflow service gets the same environment"
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY"):
        value = envs[0][key]
        assert value.startswith("${") and ":?" in value, f"{key} must come from .env and be required"


def test_spark_matches_airflow_image_and_has_the_library() -> None:
    airflow_image = SERVICES["airflow-scheduler"]["image"]
    for name in ("spark-master", "spark-worker"):
        assert SERVICES[name]["image"] == airflow_image, f"{name} runs the Airflow image (Python, pyspark, dr_toolkit)"
        assert "pyspark" in " ".join(SERVICES[name]["command"])


def test_datanode_ports_published_and_distinct() -> None:
    hot = SERVICES["datanode-hot"]
    cold = SERVICES["datanode-cold"]
    assert hot["ports"] == ["9864:9864"]
    assert cold["ports"] == ["9865:9865"]
    assert _env("datanode-cold")["HDFS-SITE.XML_dfs.datanode.http.address"].endswith(":9865")


def test_admin_password_file_is_on_a_shared_volume() -> None:
    path = _env("airflow-apiserver")["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    mounts = [m.split(":") for m in SERVICES["airflow-apiserver"]["volumes"]]
    assert any(path.startswith(target + "/") and source in COMPOSE["volumes"] for source, target, *_ in mounts)
    assert "admin / admin" not in (REPO / "docker-compose.yml").read_text()


# ---- the same versions and Airflow settings as the tests run ------------------------------------

def _pom_version(module: str, prop: str) -> str:
    import re

    text = (REPO / "drt_servers" / "maven" / module / "pom.xml").read_text()
    m = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", text)
    assert m, f"{prop} not in drt_servers/maven/{module}/pom.xml"
    return m.group(1)


def test_server_versions_are_the_ones_the_tests_run() -> None:
    kafka = _pom_version("kafka", "kafka.version")
    assert kafka == _pom_version("mm2", "kafka.version")
    for name in ("kafka-hot", "kafka-cold", "mirror-maker"):
        assert _image(name) == f"apache/kafka:{kafka}", (name, _image(name), kafka)
    hadoop = _pom_version("hdfs", "hadoop.version")
    for side in ("hot", "cold"):
        for role in ("namenode", "datanode"):
            assert _image(f"{role}-{side}") == f"apache/hadoop:{hadoop}"
    from drt_servers.hdfs import HADOOP_VERSION

    assert hadoop == HADOOP_VERSION
    hbase = _pom_version("hbase", "hbase.version")  # 2.6.1-hadoop3
    dockerfile = (REPO / "docker" / "hbase.Dockerfile").read_text()
    assert f"ARG HBASE_VERSION={hbase.removesuffix('-hadoop3')}\n" in dockerfile
    assert "hadoop3-bin.tar.gz" in dockerfile
    from tests.support.postgres import PG_BIN

    assert _image("postgres") == f"postgres:{PG_BIN.parent.name}"  # /usr/lib/postgresql/15/bin
    from drt_servers import zookeeper

    assert "ZooKeeper 3.8" in (zookeeper.__doc__ or "") and _image("zookeeper") == "zookeeper:3.8"
    airflow = (REPO / "docker" / "airflow.Dockerfile").read_text().split("FROM apache/airflow:", 1)[1].split("-")[0]
    from importlib.metadata import version

    assert airflow == version("apache-airflow"), (airflow, version("apache-airflow"))


def test_hbase_clusters_on_their_hdfs_and_the_topologys_znode_parents() -> None:
    topo = load_topology(REPO / "examples" / "docker.yaml")
    for side in ("hot", "cold"):
        master, rs = SERVICES[f"hbase-master-{side}"], SERVICES[f"hbase-regionserver-{side}"]
        assert master["command"] == ["master", "start"] and rs["command"] == ["regionserver", "start"]
        assert master["image"] == rs["image"] == _image("hbase-master-hot")
        conf = {m.split(":")[0] for m in master["volumes"]} | {m.split(":")[0] for m in rs["volumes"]}
        assert conf == {f"./docker/hbase-{side}-site.xml"}
        site = (REPO / "docker" / f"hbase-{side}-site.xml").read_text()
        zk = topo.clusters[side].zookeeper
        assert zk is not None
        assert f"<name>zookeeper.znode.parent</name><value>{zk.hbase_znode_parent}</value>" in site
        assert f"<value>hdfs://namenode-{side}:8020/hbase</value>" in site
        assert "<name>hbase.cluster.distributed</name><value>true</value>" in site


def test_airflow_settings_are_the_tested_deployments() -> None:
    import json

    from tests.support.airflow_deployed import DEPLOYED_SETTINGS

    env = _env("airflow-scheduler")
    for key, value in DEPLOYED_SETTINGS.items():
        assert env.get(key) == value, (key, env.get(key), value)
    bundles = json.loads(env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"])
    mounts = dict(m.split(":")[:2] for m in SERVICES["airflow-scheduler"]["volumes"] if m.startswith("./"))
    assert [(b["name"], b["classpath"], b["kwargs"]["path"]) for b in bundles] == [
        ("dr-toolkit", "airflow.dag_processing.bundles.local.LocalDagBundle", mounts["./dags"])]
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
