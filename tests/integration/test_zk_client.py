"""dr_toolkit.zk.client on a real ZooKeeper: timeouts, retries through restarts, digest auth and ACLs."""

from __future__ import annotations

import threading

import pytest

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.retry import Retry
from dr_toolkit.secrets import Credentials
from dr_toolkit.topology import ZooKeeperEndpoint
from dr_toolkit.zk.client import (
    ZkNoAuth,
    ZkNodeExists,
    ZkNoNode,
    connect,
    is_world_writable,
    zk_session,
)
from tests.support.procs import free_port

pytestmark = pytest.mark.integration


def test_unreachable_quorum_is_named_and_never_hangs() -> None:
    quorum = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    ep = ZooKeeperEndpoint(quorum=quorum, connect_timeout_s=1.5)
    with pytest.raises(UnreachableError) as ei:
        connect(ep, credentials=None)
    assert quorum in str(ei.value) and ei.value.exit_code == 3


def test_call_while_zookeeper_is_down_fails_within_deadline_then_recovers(zk_server, zk_endpoint, hbase_parent
                                                                          ) -> None:
    ep = zk_endpoint.model_copy(update={"call_timeout_s": 1.0})
    with zk_session(ep, retry=Retry(tries=3, deadline_s=2.0), credentials=None) as z:
        z.ensure_path(f"{hbase_parent}/a")
        try:
            zk_server.stop()
            with pytest.raises(UnreachableError, match=zk_server.address):
                z.get(f"{hbase_parent}/a")
        finally:
            zk_server.start()
        # the same client reconnects by itself once the server is back
        assert z.exists(f"{hbase_parent}/a") is not None


def test_call_retries_through_a_restart(zk_server, zk_endpoint, hbase_parent) -> None:
    with zk_session(zk_endpoint, retry=Retry(tries=100, backoff_s=0.1, max_backoff_s=0.5, deadline_s=30), credentials=None) as z:
        z.ensure_path(hbase_parent)
        zk_server.stop()
        t = threading.Timer(1.0, zk_server.start)
        t.start()
        try:
            z.create(f"{hbase_parent}/after-restart", b"x")
        finally:
            t.join()
            if not zk_server.running:
                zk_server.start()
        assert z.get(f"{hbase_parent}/after-restart")[0] == b"x"


@pytest.mark.parametrize("creds", [
    Credentials(login="drt", password="s3cret-pw"),
    Credentials(extra={"auth": "drt:s3cret-pw"}),
    Credentials(extra={"auth": [{"scheme": "digest", "credential": "drt:s3cret-pw"}]}),
])
def test_digest_auth_gives_creator_all_world_read(zk_endpoint, hbase_parent, creds) -> None:
    with connect(zk_endpoint, credentials=creds) as z:
        z.ensure_path(f"{hbase_parent}/x/y")
        z.create(f"{hbase_parent}/x/y/z", b"1")
        for path in (hbase_parent, f"{hbase_parent}/x", f"{hbase_parent}/x/y/z"):
            acls, _ = z.get_acls(path)
            assert not is_world_writable(acls)
            assert {a.id.scheme for a in acls} == {"digest", "world"}
    with connect(zk_endpoint, credentials=None) as anon:
        assert anon.get(f"{hbase_parent}/x/y/z")[0] == b"1"  # world-read
        with pytest.raises(ZkNoAuth):
            anon.set(f"{hbase_parent}/x/y/z", b"2")
        with pytest.raises(ZkNoAuth):
            anon.create(f"{hbase_parent}/x/intruder")


def test_errors_transactions_and_read_only(zkc, hbase_parent) -> None:
    with pytest.raises(ZkNoNode):
        zkc.get(f"{hbase_parent}/missing")
    zkc.ensure_path(hbase_parent)
    zkc.create(f"{hbase_parent}/a", b"1")
    with pytest.raises(ZkNodeExists):
        zkc.create(f"{hbase_parent}/a")
    with pytest.raises(ZkNodeExists):  # all or nothing: b is not created either
        zkc.transaction().create(f"{hbase_parent}/b").create(f"{hbase_parent}/a").commit()
    assert zkc.exists(f"{hbase_parent}/b") is None
    assert zkc.get_many([f"{hbase_parent}/a", f"{hbase_parent}/nope"])[1] is None
    with connect(zkc.endpoint, read_only=True, credentials=None) as ro:
        assert ro.get(f"{hbase_parent}/a")[0] == b"1"
        with pytest.raises(ConfigError, match="read-only"):
            ro.set(f"{hbase_parent}/a", b"2")


def test_credentials_never_reach_the_logs(zk_endpoint, caplog) -> None:
    import logging

    caplog.set_level(1, logger="dr_toolkit.zk.kazoo")  # kazoo's BLATHER level logs every packet
    with connect(zk_endpoint, credentials=Credentials(login="drt", password="s3cret-pw")) as z:
        z.exists("/")
    kazoo_lines = [r for r in caplog.records if r.name == "dr_toolkit.zk.kazoo"]
    assert any("Auth" in r.getMessage() or "auth" in r.getMessage() for r in kazoo_lines)
    assert "s3cret-pw" not in caplog.text and "***" in caplog.text
    logging.getLogger("dr_toolkit.zk.kazoo").setLevel(logging.CRITICAL)


def test_calls_survive_session_expiry(zk_server, zk_endpoint, hbase_parent) -> None:
    """Expire the session from outside (ZooKeeper's own trick: close a second client on the same
    session id); the next calls retry until kazoo has a new session, then succeed."""
    from kazoo.client import KazooClient

    with zk_session(zk_endpoint, retry=Retry(tries=50, backoff_s=0.1, max_backoff_s=0.5, deadline_s=20), credentials=None) as z:
        z.ensure_path(hbase_parent)
        z.create(f"{hbase_parent}/eph", b"", ephemeral=True)
        old_session = z.kazoo.client_id[0]
        twin = KazooClient(hosts=zk_server.address, client_id=z.kazoo.client_id, timeout=5)
        twin.start(timeout=15)
        twin.stop()
        twin.close()
        z.create(f"{hbase_parent}/after-expiry", b"y")
        assert z.get(f"{hbase_parent}/after-expiry")[0] == b"y"
        assert z.kazoo.client_id[0] != old_session
        assert z.exists(f"{hbase_parent}/eph") is None  # the expired session's ephemeral znode is gone


def test_write_whose_answer_was_lost_is_not_reported_as_a_conflict(zkc, hbase_parent, monkeypatch) -> None:
    """Inject a lost answer: the create reaches ZooKeeper but the client sees a connection loss.
    The retry's "node exists" is recognised as our own write (same value); another value is a conflict."""
    from kazoo.exceptions import ConnectionLoss

    zkc.ensure_path(hbase_parent)
    real_create, real_delete = zkc.kazoo.create_async, zkc.kazoo.delete_async

    class Lost:
        def get(self, timeout: float | None = None) -> None:
            raise ConnectionLoss()

    def lose_first(real):  # type: ignore[no-untyped-def]
        calls = []

        def wrapper(*a, **kw):  # type: ignore[no-untyped-def]
            calls.append(a)
            r = real(*a, **kw)
            if len(calls) == 1:
                r.get(timeout=5)  # it really happened on the server...
                return Lost()  # ...but the answer never arrived
            return r
        return wrapper

    monkeypatch.setattr(zkc.kazoo, "create_async", lose_first(real_create))
    assert zkc.create(f"{hbase_parent}/n", b"v") == f"{hbase_parent}/n"
    monkeypatch.setattr(zkc.kazoo, "delete_async", lose_first(real_delete))
    zkc.delete(f"{hbase_parent}/n")
    assert zkc.exists(f"{hbase_parent}/n") is None

    real_create(f"{hbase_parent}/taken", b"someone else").get(timeout=5)
    first = []

    def lost_before_sending(*a, **kw):  # type: ignore[no-untyped-def]
        first.append(a)
        return Lost() if len(first) == 1 else real_create(*a, **kw)

    monkeypatch.setattr(zkc.kazoo, "create_async", lost_before_sending)
    with pytest.raises(ZkNodeExists):  # after a lost answer, another writer's value is still a conflict
        zkc.create(f"{hbase_parent}/taken", b"mine")
