"""DrtHook: the one access value, resolved through Airflow's connection API (metadata DB first)."""

from __future__ import annotations

import pytest

from dr_toolkit.errors import ConfigError
from tests.dags.test_dag_failover import add_db_connection
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch) -> None:
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "plugins"))


def test_connections_in_the_metadata_db_reach_the_library(airflow_home, tmp_path) -> None:
    from drt_airflow.hooks import DrtHook

    add_db_connection("ledger_pg_db", "postgres", login="drt", password="s3cr3t-from-db", host="db.example")
    path = write_topology(tmp_path, zk=None)
    hook = DrtHook(config=str(path))
    creds = hook.access().get("ledger_pg_db")
    assert creds is not None and creds.login == "drt" and creds.password == "s3cr3t-from-db"
    assert "s3cr3t" not in repr(creds) and hook.access().summary()["connections"] == ["ledger_pg_db"]
    assert hook.topology().source_file == str(path)


def test_an_undefined_connection_is_one_clear_error_never_a_fallback(airflow_home, tmp_path) -> None:
    from drt_airflow.hooks import DrtHook

    with pytest.raises(ConfigError) as e:
        DrtHook(config=str(write_topology(tmp_path, zk=None))).access().get("no_such_conn", what="clusters.hot.s3.conn_id")
    assert "no_such_conn" in e.value.message and "not defined in Airflow connections" in e.value.message


def test_topology_path_is_decided_in_one_place(airflow_home, tmp_path, monkeypatch) -> None:
    """drt_default's extra 'config' > the Variable drt_config (metadata DB, as the DR page reads
    it outside a task) > $DRT_CONFIG; an unset Variable is "not set", not an error."""
    from airflow.models.variable import Variable
    from drt_airflow.hooks import DrtHook, topology_path, variable

    monkeypatch.setenv("DRT_CONFIG", "/from/env.yaml")
    Variable.delete("drt_config")
    assert variable("drt_config") is None and topology_path() == "/from/env.yaml"
    Variable.set("drt_config", "/from/variable.yaml")
    try:
        assert variable("drt_config") == "/from/variable.yaml"
        assert topology_path() == DrtHook().topology_path() == "/from/variable.yaml"
        add_db_connection("drt_default", "generic", extra='{"config": "/from/connection.yaml"}')
        assert topology_path() == "/from/connection.yaml"
        assert DrtHook(config="/explicit.yaml").topology_path() == "/explicit.yaml"
    finally:
        Variable.delete("drt_config")
        from airflow.models.connection import Connection
        from airflow.utils.session import create_session

        with create_session() as session:
            session.query(Connection).filter(Connection.conn_id == "drt_default").delete()


def test_an_aws_connection_is_resolved_by_the_amazon_provider(airflow_home, tmp_path, s3_server) -> None:
    """An ``aws`` connection in the metadata DB that assumes a role (what only AwsBaseHook knows):
    the library receives the role's temporary keys and session token and its S3 client uses them."""
    import json
    import uuid

    from drt_airflow.hooks import DrtHook

    from dr_toolkit.fs.s3 import S3FileSystem
    from dr_toolkit.topology import S3Endpoint

    extra = {"role_arn": "arn:aws:iam::123456789012:role/drt-dr", "region_name": "us-east-1",
             "service_config": {"sts": {"endpoint_url": s3_server.endpoint_url}}}
    add_db_connection("aws_role_db", "aws", login="AKIAFROMTHEDB", password="long-term-secret-from-db",
                      extra=json.dumps(extra))
    config = str(write_topology(tmp_path, zk=None))
    creds = DrtHook(config=config).access().get("aws_role_db")
    assert creds is not None and creds.login and creds.login.startswith("ASIA") and creds.login != "AKIAFROMTHEDB"
    token = creds.extra["aws_session_token"]
    assert token and creds.password != "long-term-secret-from-db" and "secret" not in repr(creds)

    add_db_connection("aws_keys_db", "aws", login="AKIAPLAINKEYS", password="plain-secret")
    plain = DrtHook(config=config).access().get("aws_keys_db")
    assert plain is not None and (plain.login, plain.password) == ("AKIAPLAINKEYS", "plain-secret")
    assert "aws_session_token" not in plain.extra

    bucket = f"drt-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=bucket)
    s3_server.client().put_object(Bucket=bucket, Key="dir/a.txt", Body=b"abc")
    fs = S3FileSystem(bucket, endpoint=S3Endpoint(bucket=bucket, endpoint_url=s3_server.endpoint_url,
                                                  region="us-east-1"), credentials=creds)
    assert fs.client._request_signer._credentials.token == token  # the temporary keys sign requests
    st = fs.stat("dir/a.txt")
    assert st is not None and st.size == 3
