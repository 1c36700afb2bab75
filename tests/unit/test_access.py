"""The access value: credentials by connection id, per endpoint, never a silent fall-back."""

from __future__ import annotations

import json
import threading

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.secrets import Credentials, env_name, lookup, redact
from dr_toolkit.topology import parse_topology

TOPO = """
version: 1
clusters:
  prod:
    role: hot
    hdfs: {namenodes: ["http://nn1:9870"], conn_id: webhdfs_prod}
    kafka: {bootstrap_servers: "k1:9092", conn_id: kafka_prod}
  dr:
    role: cold
    hdfs: {namenodes: ["http://nn2:9870"], conn_id: webhdfs_dr}
    s3: {bucket: corp-dr-archive, conn_id: aws_dr}
ledger: {url: "postgresql+psycopg2://drt@db:5432/drt", conn_id: drt_ledger}
"""


def test_uri_connection_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_PROD", "kafka://alice:p%40ss%2Fw@k1:9092?sasl_mechanism=PLAIN")
    c = Access.from_env().get("kafka_prod")
    assert c == Credentials("alice", "p@ss/w", "k1", 9092, {"sasl_mechanism": "PLAIN"})


def test_json_connection_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DR", json.dumps(
        {"conn_type": "aws", "login": "AKIA1", "password": "sekret", "extra": json.dumps({"region_name": "eu"})}))
    c = Access.from_env().get("aws_dr")
    assert c is not None and (c.login, c.password, c.extra) == ("AKIA1", "sekret", {"region_name": "eu"})


def test_airflow_name_first_then_the_shell_safe_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert env_name("webhdfs-dr.eu") == "AIRFLOW_CONN_WEBHDFS_DR_EU"
    monkeypatch.setenv("AIRFLOW_CONN_WEBHDFS_DR_EU", "webhdfs://shell@nn:9870")
    assert (lookup("webhdfs-dr.eu") or Credentials()).login == "shell"
    monkeypatch.setenv("AIRFLOW_CONN_WEBHDFS-DR.EU", "webhdfs://airflow@nn:9870")  # how Airflow reads it
    assert (lookup("webhdfs-dr.eu") or Credentials()).login == "airflow"


def test_per_endpoint_never_per_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The S3 target of a cluster gets the S3 connection, not the cluster's WebHDFS one."""
    topo = parse_topology(TOPO, "t.yaml")
    access = Access.from_mapping({"webhdfs_dr": Credentials("hdfs"), "aws_dr": Credentials("AKIA1", "sekret")})
    dr = topo.clusters["dr"]
    assert access.for_endpoint(dr.s3, "clusters.dr.s3.conn_id") == Credentials("AKIA1", "sekret")
    assert access.for_endpoint(dr.hdfs, "clusters.dr.hdfs.conn_id") == Credentials("hdfs")
    assert access.for_endpoint(dr.kafka) is None  # no endpoint, no credentials


def test_named_but_undefined_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_PROD", raising=False)
    topo = parse_topology(TOPO, "t.yaml")
    with pytest.raises(ConfigError) as e:
        Access.from_env().for_endpoint(topo.hot.kafka, "clusters.prod.kafka.conn_id")
    assert e.value.exit_code == 2
    assert "kafka_prod" in e.value.message and "clusters.prod.kafka.conn_id" in e.value.message
    assert "AIRFLOW_CONN_KAFKA_PROD" in e.value.message


def test_endpoint_without_conn_id_has_no_credentials() -> None:
    topo = parse_topology(TOPO.replace(", conn_id: webhdfs_prod", ""), "t.yaml")
    assert Access.none().for_endpoint(topo.hot.hdfs) is None
    assert Access.none().get(None) is None and Access.none().ledger_password(None) is None


def test_a_backend_outage_is_one_config_error_not_a_fallback() -> None:
    def broken(conn_id: str) -> Credentials | None:
        raise TimeoutError("secrets backend timed out; token=abc123")

    with pytest.raises(ConfigError) as e:
        Access.from_resolver(broken, "Airflow connections").get("aws_dr", what="clusters.dr.s3.conn_id")
    assert "aws_dr" in e.value.message and "TimeoutError" in e.value.message
    assert "abc123" not in e.value.message  # the backend's message may hold a secret: only the type


def test_bad_environment_value_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DRT_LEDGER", "{not json")
    with pytest.raises(ConfigError, match="drt_ledger"):
        Access.from_env().ledger_password("drt_ledger")


def test_ledger_password_and_resolution_cached_once() -> None:
    calls: list[str] = []
    lock = threading.Lock()

    def resolve(conn_id: str) -> Credentials | None:
        with lock:
            calls.append(conn_id)
        return Credentials("drt", "pw-1") if conn_id == "drt_ledger" else None

    access = Access.from_resolver(resolve, "test")
    threads = [threading.Thread(target=access.ledger_password, args=("drt_ledger",)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert access.ledger_password("drt_ledger") == "pw-1"
    assert 1 <= len(calls) <= 8 and set(calls) == {"drt_ledger"}
    n = len(calls)
    access.get("drt_ledger")
    assert len(calls) == n  # cached after the first answer
    assert access.summary() == {"source": "test", "connections": ["drt_ledger"]}


def test_summary_and_repr_hold_no_secret() -> None:
    access = Access.from_mapping({"aws_dr": Credentials("AKIA1", "sekret", extra={"token": "t0k"})})
    creds = access.get("aws_dr")
    assert "sekret" not in repr(creds) and "t0k" not in repr(creds)
    assert "sekret" not in json.dumps(access.summary())


def test_a_location_gets_its_endpoint_credentials_under_the_endpoints_label() -> None:
    """A resolved location's credentials come from its cluster's endpoint through the one lookup
    (``Access.endpoint``/``cluster_endpoint``): named ``clusters.<name>.<kind>.conn_id`` when missing."""
    from dr_toolkit.fs import credentials_for
    from dr_toolkit.fs.uri import parse_uri

    topo = parse_topology(TOPO)
    access = Access.from_mapping({"aws_dr": Credentials("AKIA1", "sekret"), "webhdfs_dr": Credentials("hdfs")})
    assert credentials_for(parse_uri("s3://corp-dr-archive/x", topo), access) == Credentials("AKIA1", "sekret")
    assert credentials_for(parse_uri("hdfs://dr/x", topo), access) == access.endpoint(topo, "dr", "hdfs")
    assert credentials_for(parse_uri("file:///tmp/x", topo), Access.none()) is None
    with pytest.raises(ConfigError) as e:
        credentials_for(parse_uri("hdfs://prod/x", topo), access)
    assert e.value.where == "clusters.prod.hdfs.conn_id = 'webhdfs_prod'"
    with pytest.raises(ConfigError, match="cluster 'nowhere' is not in the topology"):
        access.endpoint(topo, "nowhere", "zookeeper")


@pytest.mark.parametrize(("text", "secret"), [
    ("postgresql://drt:hunter2@db:5432/drt", "hunter2"),
    ("connect failed: password=hunter2 host=db", "hunter2"),
    ('{"aws_secret_access_key": "AbCd/123"}', "AbCd/123"),
    ("sasl.password: s3cr3t!", "s3cr3t!"),
])
def test_redact(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and "***" in out
