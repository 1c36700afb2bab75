"""Session fixtures for the Kerberos tests: a real KDC (Hadoop's MiniKdc), a kerberized HDFS
(NameNode + DataNode, SPNEGO on WebHDFS and on the whole web UI, /jmx too) and a ZooKeeper with SASL (Kerberos) authentication in
its realm (drt_servers/kdc.py, drt_servers/hdfs.py, drt_servers/zookeeper.py).

The KDC caps every ticket at :data:`MAX_LIFE_S`, so a test can see a ticket run out and the
toolkit obtain a new one within a short run. Hadoop's signed cookie lives
:data:`COOKIE_S`, so requests keep presenting tickets (not only the first one).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from drt_servers.hdfs import HdfsCluster
from drt_servers.kdc import Kdc
from drt_servers.process import ManagedProcess
from drt_servers.zookeeper import zookeeper

MAX_LIFE_S = 12
COOKIE_S = 1
TOKEN_RENEW_S = 15  # hdfs_secure_cold's dfs.namenode.delegation.token.renew-interval (1 day by default)
USER = "drt"


@pytest.fixture(scope="session")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    k = Kdc(tmp_path_factory.mktemp("kdc"), max_life_s=MAX_LIFE_S).start()
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture(scope="session")
def hdfs_secure(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsCluster]:
    h = HdfsCluster("hdfs-secure", tmp_path_factory.mktemp("hdfs-secure"), kdc=kdc, spnego_ui=True,
                    auth_token_validity_s=COOKIE_S).start()
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture(scope="session")
def hdfs_secure_cold(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsCluster]:
    """A second kerberized HDFS in the same realm (another NameNode: its own delegation-token keys),
    for copies and the gate between two secure clusters; configured as :func:`hdfs_secure`, with
    permissions on as in production (``/`` is the superuser's, ``hdfs/localhost``: a test gives its
    user a directory first; the edit log is served to the superuser only), and delegation tokens
    that expire :data:`TOKEN_RENEW_S` after their last renewal (so their renewal is exercised)."""
    h = HdfsCluster("hdfs-secure-cold", tmp_path_factory.mktemp("hdfs-secure-cold"), kdc=kdc, spnego_ui=True,
                    auth_token_validity_s=COOKIE_S,
                    conf={"dfs.permissions.enabled": "true",
                          "dfs.namenode.delegation.token.renew-interval": str(TOKEN_RENEW_S * 1000)}).start()
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture(scope="session")
def zk_secure(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedProcess]:
    """ZooKeeper as ``zookeeper/localhost`` with the SASL provider; clients name it ``localhost:<port>``."""
    z = zookeeper(tmp_path_factory.mktemp("zk-secure"), kdc=kdc)
    z.start()
    try:
        yield z
    finally:
        z.stop()


def kerberos_env(kdc: Kdc, user: str = USER, *, keytab: Path | str | None = None,
                 principal: str | None = None) -> dict[str, str]:
    """The environment of a `drt` run as ``user`` (its keytab unless ``keytab`` says otherwise)."""
    return {**kdc.client_env(), "DRT_KERBEROS_PRINCIPAL": principal or kdc.principal(user),
            "DRT_KERBEROS_KEYTAB": str(keytab if keytab is not None else kdc.keytab(user))}


def without_kerberos_env() -> dict[str, str]:
    """The test process's environment less any Kerberos credential (the user's own never leaks in)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("DRT_KERBEROS_PRINCIPAL", "DRT_KERBEROS_KEYTAB", "KRB5CCNAME", "KRB5_CONFIG")}
