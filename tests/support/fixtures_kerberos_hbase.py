"""Session fixtures for secure HBase (issue 41): one kerberized hot + cold HBase 2.6 pair on a KDC of
its own (``hbase_kdc``), replication hot → cold through peer
``1`` (drt_servers/hbase.py, secure mode: Kerberos RPC as ``hbase/localhost``, kerberized mini HDFS
with SPNEGO WebHDFS, SPNEGO info servers, each cluster on its own SASL ZooKeeper; HBase's znodes
carry SASL ACLs naming ``hbase.superuser`` = ``drt@DRT.TEST`` and the service principal).

Why not the session's ``kdc`` (tests/support/fixtures_kerberos.py): it caps every ticket at 12 s so
the renewal tests see tickets run out, and HBase's JVM cannot live with that — ZooKeeper's Java
client (its ``Login`` thread) and Hadoop's UGI never log in again within 60 s of the last login
("Not attempting to re-login since the last re-login was attempted less than 60 seconds before"),
so the master's ZooKeeper session dies with its ticket and the master never becomes active (tried:
"Master not active after 30000ms"). This KDC keeps Kerby's default lifetime (a day); it costs one
more small JVM (≈1 s).

A secure start is slow (≈50 s for the pair on two idle cores): one pair per session, shared by
tests/integration/test_kerberos_hbase.py; ``secure_hbase_hot`` gives peer 1 back ENABLED after a
test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drt_servers.kdc import Kdc

#: the Airflow connection of both clusters' ZooKeeper: SASL GSSAPI, the principal from the environment
ZK_CONN_ID = "zk_krb_hbase"
ZK_CONN = json.dumps({"conn_type": "zookeeper", "extra": {"sasl": {"mechanism": "GSSAPI"}}})
PLAIN_ZK_CONN = json.dumps({"conn_type": "zookeeper"})


@pytest.fixture(scope="session")
def hbase_kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    """A real KDC (realm DRT.TEST) with ordinary ticket lifetimes, for the secure HBase pair."""
    k = Kdc(tmp_path_factory.mktemp("kdc-hbase"), name="kdc-hbase").start()
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="session")
def hbase_secure_pair(hbase_kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """The kerberized hot and cold HBase (table ``default:orders``, family ``d`` at scope 1, peer 1
    hot → cold). A cluster that cannot start fails the tests that use it, naming its log."""
    from drt_servers.hbase import hbase_pair

    hot, cold = hbase_pair(tmp_path_factory.mktemp("hbase-secure"), kdc=hbase_kdc)
    for c in (hot, cold):
        print(f"\n{c.describe()}")
    try:
        yield hot, cold
    finally:
        for c in (hot, cold):
            c.stop()


@pytest.fixture
def secure_hbase_hot(hbase_secure_pair: tuple[Any, Any]) -> Iterator[Any]:
    """The secure hot cluster, left with peer 1 ENABLED."""
    hot, _ = hbase_secure_pair
    yield hot
    if hot.process.running and not hot.list_peers()["1"]["enabled"]:
        hot.enable_peer("1")


def secure_topology(tmp_path: Path, clusters: tuple[Any, Any]) -> Path:
    """A topology protecting ``default:orders`` through peer 1 on the secure pair: both clusters'
    ZooKeeper with the SASL connection :data:`ZK_CONN_ID` (no credential in the file), the policy's
    WALs and table descriptors read at the hot cluster's rootdir over SPNEGO WebHDFS."""
    from tests.support.fixtures_failover import write_topology

    return write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1", "tables": ["default:orders"]}],
                          hbase_clusters=clusters, zk_conn_id=ZK_CONN_ID)


def secure_env(kdc: Kdc, user: str | None = "drt", *, sasl: bool = True) -> dict[str, str]:
    """The environment of a `drt` run: KRB5_CONFIG, the ZooKeeper connection (SASL unless ``sasl`` is
    False) and, for ``user``, its principal and keytab (None: no principal at all)."""
    from tests.support.fixtures_kerberos import kerberos_env

    env = {**kdc.client_env(), f"AIRFLOW_CONN_{ZK_CONN_ID.upper()}": ZK_CONN if sasl else PLAIN_ZK_CONN}
    if user is not None:
        env.update(kerberos_env(kdc, user))
    return env
