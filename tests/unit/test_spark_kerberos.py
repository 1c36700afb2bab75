"""The session builder's Kerberos derivation for Spark's own Hadoop client (issue 41): whom the
driver JVM logs in as (a kerberized side's connection, else the environment — never the topology),
and the conf and environment it starts with; a caller's own Spark Kerberos settings win."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.kerberos import KerberosConfig
from dr_toolkit.secrets import Credentials
from dr_toolkit.spark import session
from dr_toolkit.spark.hadoop import spark_kerberos
from dr_toolkit.spark.session import kerberos_conf_dir, kerberos_launch
from dr_toolkit.topology import Topology, load_topology


def _topo(tmp_path: Path, cold_kerberos: bool = False) -> Topology:
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(textwrap.dedent(f"""
        version: 1
        clusters:
          hot:
            role: hot
            hdfs:
              namenodes: [http://nn1.example:9870]
              rpc_addresses: [nn1.example:8020]
              kerberos: true
              conn_id: hot_hdfs
          cold:
            role: cold
            hdfs:
              namenodes: [http://cnn1.example:9870]
              rpc_addresses: [cnn1.example:8020]
              kerberos: {str(cold_kerberos).lower()}
    """))
    return load_topology(cfg)


@pytest.fixture(autouse=True)
def _no_kerberos_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("DRT_KERBEROS_PRINCIPAL", "DRT_KERBEROS_KEYTAB", "KRB5CCNAME", "KRB5_CONFIG"):
        monkeypatch.delenv(k, raising=False)


def test_the_principal_comes_from_the_kerberized_sides_connection_or_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _topo(tmp_path)
    access = Access.from_mapping({"hot_hdfs": Credentials(login="drt@R.TEST", extra={"keytab": "/k/drt.keytab"})})
    uris = ["hdfs://hot/a", "hdfs://cold/b"]
    kc = spark_kerberos(t, uris, access)
    assert kc is not None and (kc.principal, kc.keytab, kc.source) == ("drt@R.TEST", "/k/drt.keytab", "connection")
    assert spark_kerberos(t, ["hdfs://cold/b"], access) is None  # cold is not kerberized
    monkeypatch.setenv("DRT_KERBEROS_PRINCIPAL", "env@R.TEST")
    monkeypatch.setenv("DRT_KERBEROS_KEYTAB", "/k/env.keytab")
    kc = spark_kerberos(t, uris, Access.from_mapping({"hot_hdfs": Credentials()}))
    assert kc is not None and (kc.principal, kc.keytab, kc.source) == ("env@R.TEST", "/k/env.keytab", "environment")
    # two sides read as two principals: one JVM logs in as one
    with pytest.raises(ConfigError, match="one Kerberos principal"):
        spark_kerberos(_topo(tmp_path, cold_kerberos=True), uris, access)


def test_a_bare_uri_is_kerberized_when_the_environment_names_a_principal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "shim.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("DRT_JAXRS_SHIM_JAR", str(jar))
    assert spark_kerberos(None, ["webhdfs://nn:9870/x"], None) is None
    monkeypatch.setenv("DRT_KERBEROS_PRINCIPAL", "env@R.TEST")
    kc = spark_kerberos(None, ["webhdfs://nn:9870/x"], None)
    assert kc is not None and kc.principal == "env@R.TEST"


def test_a_keytab_becomes_sparks_login_with_a_kerberos_conf_dir_and_krb5_conf(tmp_path: Path) -> None:
    krb5 = tmp_path / "krb5.conf"
    krb5.write_text("[libdefaults]\n")
    mine = tmp_path / "conf"
    mine.mkdir()
    (mine / "core-site.xml").write_text("<configuration><property><name>fs.defaultFS</name>"
                                        "<value>hdfs://ns</value></property></configuration>")
    (mine / "hdfs-site.xml").write_text("<configuration/>")
    kc = KerberosConfig("drt@R.TEST", str(tmp_path / "drt.keytab"), krb5_conf=str(krb5))
    conf, env = kerberos_launch(kc, {}, {"HADOOP_CONF_DIR": str(mine), "SPARK_SUBMIT_OPTS": "-Dx=1"})
    assert conf == {"spark.kerberos.principal": "drt@R.TEST", "spark.kerberos.keytab": str(tmp_path / "drt.keytab")}
    assert env["SPARK_SUBMIT_OPTS"] == f"-Dx=1 -Djava.security.krb5.conf={krb5}"
    out = Path(env["HADOOP_CONF_DIR"])
    assert out != mine and (out / "hdfs-site.xml").resolve() == mine / "hdfs-site.xml"
    props = session._site_props(out / "core-site.xml")
    assert props == {"fs.defaultFS": "hdfs://ns", "hadoop.security.authentication": "kerberos"}
    assert kerberos_conf_dir(str(out)) is None  # a directory that already says Kerberos is used as it is
    fresh = Path(str(kerberos_conf_dir(None)))  # no HADOOP_CONF_DIR: a core-site.xml alone
    assert [p.name for p in fresh.iterdir()] == ["core-site.xml"]
    assert session._site_props(fresh / "core-site.xml") == {"hadoop.security.authentication": "kerberos"}


def test_the_callers_spark_kerberos_settings_win(tmp_path: Path) -> None:
    kc = KerberosConfig("drt@R.TEST", "/k/drt.keytab", krb5_conf="/etc/krb5.conf")
    given = {"spark.kerberos.keytab": "/k/theirs.keytab", "spark.kerberos.principal": "theirs@R.TEST",
             "spark.driver.extraJavaOptions": "-Djava.security.krb5.conf=/theirs/krb5.conf"}
    conf, env = kerberos_launch(kc, given, {})
    assert conf == {} and "SPARK_SUBMIT_OPTS" not in env
    # a kinit'ed ticket cache only: nothing to hand Spark as a keytab (the JVM reads the cache)
    conf, env = kerberos_launch(KerberosConfig("drt@R.TEST", ccache="FILE:/tmp/cc"), {}, {})
    assert conf == {} and set(env) == {"HADOOP_CONF_DIR"}


def test_the_launch_environment_is_set_for_the_start_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HADOOP_CONF_DIR", "/etc/hadoop/conf")
    monkeypatch.delenv("KRB5CCNAME", raising=False)
    seen = session._started("local[1]", lambda: dict(os.environ),
                            env={"HADOOP_CONF_DIR": "/tmp/gen", "KRB5CCNAME": "/tmp/cc"})
    assert (seen["HADOOP_CONF_DIR"], seen["KRB5CCNAME"]) == ("/tmp/gen", "/tmp/cc")
    assert os.environ["HADOOP_CONF_DIR"] == "/etc/hadoop/conf" and "KRB5CCNAME" not in os.environ
