"""dr_toolkit.spark.hadoop: the Hadoop conf Spark needs, no secret in it, clear refusals."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.secrets import Credentials
from dr_toolkit.spark import hadoop
from dr_toolkit.spark.hadoop import (
    S3A_ENV_PROVIDER,
    check_spark_uri,
    merge_spark_conf,
    spark_hadoop_conf,
    spark_path,
    spark_secret_env,
)
from dr_toolkit.topology import Topology, load_topology

SECRET = "wJalrXUtnFEMI-very-secret"


def topo(tmp_path: Path, extra_hot: str = "") -> Topology:
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(textwrap.dedent("""
        version: 1
        clusters:
          hot:
            role: hot
            hdfs:
              namenodes: [http://nn1.example:9870, http://nn2.example:9870]
              rpc_addresses: [nn1.example:8020, nn2.example:8020]
              nameservice: prod-ns
            s3:
              bucket: hot-bucket
              endpoint_url: http://minio.example:9000
              region: eu-west-1
              conn_id: hot_s3
          cold:
            role: cold
            hdfs:
              namenodes: [https://cnn1.example:9871, https://cnn2.example:9871]
            s3:
              bucket: cold-bucket
              conn_id: cold_s3
    """))
    return load_topology(cfg)


def test_hdfs_ha_through_rpc(tmp_path: Path) -> None:
    t = topo(tmp_path)
    loc = check_spark_uri("hdfs://hot/warehouse/t", t)
    assert spark_path(loc) == "hdfs://prod-ns/warehouse/t"
    conf = spark_hadoop_conf(t, ["hdfs://hot/warehouse/t"])
    assert conf == {
        "spark.hadoop.dfs.nameservices": "prod-ns",
        "spark.hadoop.dfs.ha.namenodes.prod-ns": "nn1,nn2",
        "spark.hadoop.dfs.client.failover.proxy.provider.prod-ns": hadoop.FAILOVER_PROVIDER,
        "spark.hadoop.dfs.namenode.rpc-address.prod-ns.nn1": "nn1.example:8020",
        "spark.hadoop.dfs.namenode.rpc-address.prod-ns.nn2": "nn2.example:8020",
        "spark.hadoop.dfs.namenode.http-address.prod-ns.nn1": "nn1.example:9870",
        "spark.hadoop.dfs.namenode.http-address.prod-ns.nn2": "nn2.example:9870",
    }


def test_webhdfs_ha_with_the_shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "shim.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("DRT_JAXRS_SHIM_JAR", str(jar))
    t = topo(tmp_path)
    assert spark_path(check_spark_uri("hdfs://cold/x", t)) == "swebhdfs://cold/x"
    conf = spark_hadoop_conf(t, ["hdfs://cold/x", "hdfs://hot/y", "webhdfs://other:9870/z"])
    assert conf["spark.hadoop.dfs.nameservices"] == "cold,prod-ns"
    assert conf["spark.hadoop.dfs.namenode.https-address.cold.nn2"] == "cnn2.example:9871"
    assert conf["spark.jars"] == conf["spark.driver.extraClassPath"] == conf["spark.executor.extraClassPath"] \
        == str(jar)
    assert spark_path(check_spark_uri("webhdfs://other:9870/z")) == "webhdfs://other:9870/z"


def test_webhdfs_refused_without_the_shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRT_JAXRS_SHIM_JAR", raising=False)
    monkeypatch.setattr(hadoop, "jaxrs_shim_jar", lambda build=True: None)
    with pytest.raises(ConfigError) as info:
        check_spark_uri("webhdfs://nn:9870/data")
    assert "rpc_addresses" in str(info.value) and "\n" not in str(info.value)
    # the RPC route needs no shim
    assert spark_path(check_spark_uri("hdfs://hot/a", topo(tmp_path))) == "hdfs://prod-ns/a"
    monkeypatch.undo()
    monkeypatch.setenv("DRT_JAXRS_SHIM_JAR", str(tmp_path / "missing.jar"))
    with pytest.raises(ConfigError, match="DRT_JAXRS_SHIM_JAR"):
        hadoop.jaxrs_shim_jar()


def test_unsupported_schemes_are_one_clear_error() -> None:
    for uri in ("ftp://host/x", "gs://bucket/x", "abfs://c@a.dfs.core.windows.net/x"):
        with pytest.raises(ConfigError) as info:
            check_spark_uri(uri)
        assert info.value.exit_code == 2 and "hdfs://<cluster>/path" in str(info.value)
    assert spark_path(check_spark_uri("/tmp/data")) == "file:///tmp/data"


def test_s3a_conf_has_no_secret_and_env_carries_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRT_SPARK_S3A", "1")
    t = topo(tmp_path)
    access = Access.from_mapping({"hot_s3": Credentials(login="AKIAEXAMPLE", password=SECRET,
                                                        extra={"aws_session_token": "tok-123"})})
    conf = spark_hadoop_conf(t, ["s3://hot-bucket/data"])
    b = "spark.hadoop.fs.s3a.bucket.hot-bucket."
    assert conf[b + "endpoint"] == "http://minio.example:9000" and conf[b + "path.style.access"] == "true"
    assert conf[b + "endpoint.region"] == "eu-west-1"
    assert conf[b + "aws.credentials.provider"] == S3A_ENV_PROVIDER
    assert SECRET not in repr(conf) and "AKIAEXAMPLE" not in repr(conf) and "tok-123" not in repr(conf)
    env = spark_secret_env(t, ["s3://hot-bucket/data"], access)
    assert env == {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET,
                   "AWS_SESSION_TOKEN": "tok-123", "AWS_REGION": "eu-west-1"}
    assert spark_path(check_spark_uri("s3://hot-bucket/data/x", t)) == "s3a://hot-bucket/data/x"
    # a named connection that is not defined is an error, never a silent fallback
    with pytest.raises(ConfigError, match="hot_s3"):
        spark_secret_env(t, ["s3://hot-bucket/data"], Access.none())
    # two buckets with two connections cannot share one job's environment
    both = Access.from_mapping({"hot_s3": Credentials("a", "b"), "cold_s3": Credentials("c", "d")})
    with pytest.raises(ConfigError, match="two connections"):
        spark_secret_env(t, ["s3://hot-bucket/x", "s3://cold-bucket/y"], both)
    # a bucket outside the topology: the default AWS chain, no provider forced, no env
    assert spark_secret_env(t, ["s3://elsewhere/x"], access) == {}
    assert not any(k.endswith("credentials.provider") for k in spark_hadoop_conf(t, ["s3://elsewhere/x"]))


def test_s3a_refused_without_hadoop_aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRT_SPARK_S3A", raising=False)
    monkeypatch.setattr(hadoop, "_has_hadoop_aws", lambda conf=None: False)
    with pytest.raises(ConfigError, match="hadoop-aws"):
        check_spark_uri("s3://hot-bucket/data", topo(tmp_path))
    monkeypatch.undo()
    monkeypatch.delenv("DRT_SPARK_S3A", raising=False)
    monkeypatch.setattr(hadoop, "spark_jars_dir", lambda: None)
    cfg = tmp_path / "aws.yaml"
    cfg.write_text(textwrap.dedent("""
        version: 1
        clusters:
          hot:
            role: hot
            local_root: /tmp/hot
            s3: {bucket: b1}
            spark:
              conf: {spark.jars.packages: "org.apache.hadoop:hadoop-aws:3.5.0"}
          cold:
            role: cold
            local_root: /tmp/cold
    """))
    assert spark_path(check_spark_uri("s3://b1/x", load_topology(cfg))) == "s3a://b1/x"


def test_merge_keeps_user_keys_and_joins_lists() -> None:
    ours = {"spark.jars": "/c/shim.jar", "spark.driver.extraClassPath": "/c/shim.jar", "spark.hadoop.a": "1"}
    user = {"spark.jars": "/u/x.jar,/u/y.jar", "spark.hadoop.a": "2", "spark.master": "local[1]"}
    assert merge_spark_conf(user, ours) == {
        "spark.jars": "/u/x.jar,/u/y.jar,/c/shim.jar", "spark.driver.extraClassPath": "/c/shim.jar",
        "spark.hadoop.a": "2", "spark.master": "local[1]"}


def test_topology_checks_rpc_addresses(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("version: 1\nclusters:\n  hot:\n    role: hot\n    hdfs:\n      namenodes: [http://nn:9870]\n"
                   "      rpc_addresses: [http://nn:8020]\n")
    with pytest.raises(ConfigError, match="rpc address"):
        load_topology(cfg)


def test_kerberos_clusters_get_delegation_tokens(tmp_path: Path) -> None:
    cfg = tmp_path / "k.yaml"
    cfg.write_text(textwrap.dedent("""
        version: 1
        clusters:
          hot:
            role: hot
            hdfs:
              namenodes: [http://nn1:9870]
              rpc_addresses: [nn1:8020]
              kerberos: true
          cold:
            role: cold
            local_root: /tmp/cold
    """))
    conf = spark_hadoop_conf(load_topology(cfg), ["hdfs://hot/a", "hdfs://cold/b"])
    assert conf["spark.kerberos.access.hadoopFileSystems"] == "hdfs://hot"
