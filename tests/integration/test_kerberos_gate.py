"""The gate's HDFS signal over two kerberized HDFS clusters (issue 41 with issue 42's quick path):
the proof reads each NameNode's txid from /jmx behind SPNEGO; the quick check finds it unchanged
(GO, no diff call); a change on hot is read from hot's edit log by the Java reader logged in from
the keytab (UserGroupInformation.loginUserFromKeytab, as the HDFS superuser's principal, the only
one getEditsFromTxid serves); a change on cold is NO_GO named from cold's edit log; a missing
keytab is one KerberosError naming the principal — never a quick "no change"."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.kerberos import KerberosError
from drt_servers.hdfs import HdfsCluster
from drt_servers.kdc import Kdc
from tests.support.fixtures_kerberos import kerberos_env

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

SUPERUSER = "hdfs/localhost"  # the NameNodes run as it: the HDFS superuser


@pytest.fixture
def secure_pair_env(hdfs_secure: HdfsCluster, hdfs_secure_cold: HdfsCluster, kdc: Kdc, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A policy hot:/kge/data -> cold:/kge/data (snapshots on both), replicated once, with the
    superuser's keytab in the environment and the reader's Hadoop configuration directory (the
    NameNodes' principal, as an edge node's hdfs-site.xml has it) on $DRT_HADOOP_CLASSPATH."""
    from dr_toolkit.access import Access
    from dr_toolkit.copy import editlog
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import load_topology
    from drt_servers import maven
    from tests.support.fixtures_failover import write_topology

    conf = tmp_path / "hadoop-conf"
    conf.mkdir()
    (conf / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.namenode.kerberos.principal</name>"
        f"<value>{kdc.principal('hdfs/localhost')}</value></property></configuration>\n")
    monkeypatch.setenv(editlog.ENV_CLASSPATH, f"{conf}:{maven.classpath('hdfs')}")
    monkeypatch.delenv(editlog.ENV_SWITCH, raising=False)
    for k, v in kerberos_env(kdc, principal=kdc.principal(SUPERUSER), keytab=kdc.service_keytab).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("KRB5CCNAME", raising=False)
    hot, cold = hdfs_secure, hdfs_secure_cold
    for rel, data in (("/kge/data/a.bin", b"a" * 700), ("/kge/data/d1/b.bin", b"b" * 300)):
        hot.write(rel, data)
    hot.client().allow_snapshot("/kge/data")  # (the control port's allowsnapshot has no ticket on a secure cluster)
    cold.mkdir("/kge/data")
    cold.client().allow_snapshot("/kge/data")
    path = write_topology(
        tmp_path, zk=None,
        hdfs=[{"name": "kge", "source": "hdfs://hot/kge/data", "targets": ["hdfs://cold/kge/data"],
               "options": {"update": True, "delete": True, "snapshots": True}}],
        hot_extra={"hdfs": {"namenodes": hot.namenodes, "kerberos": True}},
        cold_extra={"hdfs": {"namenodes": cold.namenodes, "kerberos": True}})
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    (r,) = replicate_policy(topo, "kge", ledger, access=Access.from_env())
    assert r.ok and r.source_snapshot, r
    yield {"topo": topo, "ledger": ledger, "run": r}


def _sig(env: dict[str, Any], mode: str) -> Any:
    from dr_toolkit.access import Access
    from dr_toolkit.copy.signals import hdfs_signals

    (s,) = hdfs_signals(env["topo"], env["ledger"], Access.from_env(), time.time(), mode=mode)
    return s


def test_the_quick_hdfs_signal_reads_txids_and_edit_logs_with_kerberos(
        secure_pair_env: dict[str, Any], hdfs_secure: HdfsCluster, hdfs_secure_cold: HdfsCluster, kdc: Kdc,
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = secure_pair_env
    hot, cold = hdfs_secure, hdfs_secure_cold
    from dr_toolkit.copy import editlog

    monkeypatch.setenv(editlog.ENV_ROLL, "always")  # the proof rolls both NameNodes' edit logs, logged in from the keytab
    s = _sig(env, "prove")
    assert s.caught_up and s.detail["proof"]["recorded"], s.detail
    for note in s.detail["proof"]["edit_log_base"].values():
        assert "the edit log rolled at the proof" in note, note
    # unchanged: both txids as recorded (read over SPNEGO), no diff call: GO
    s = _sig(env, "quick")
    assert s.caught_up and s.safe_time == env["run"].source_time, (s.reason, s.basis)
    assert {s.detail["hot_evidence"], s.detail["cold_evidence"]} <= {"txid", "editlog"}, s.basis
    assert "GETSNAPSHOTDIFF" not in s.detail["namenode_calls"], s.detail["namenode_calls"]

    # a write on hot: read from hot's edit log by the reader logged in from the keytab
    hot.write("/kge/data/d1/new.bin", b"n" * 10)
    s = _sig(env, "quick")
    assert not s.caught_up and s.detail["hot_evidence"] == "editlog", (s.reason, s.basis)
    assert s.detail["files_pending"] == 1 and "1 entries changed on hot" in (s.reason or ""), s.detail
    assert "GETSNAPSHOTDIFF" not in s.detail["namenode_calls"], s.detail["namenode_calls"]
    assert "edit log from txid" in s.basis, s.basis  # (getEditsFromTxid is not in the audit log)

    # cold lacks it and cold changed: NO_GO, named from cold's edit log
    cold.write("/kge/data/stray.bin", b"s")
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time is None, (s.reason, s.detail)
    assert "cold changed since the proof" in (s.reason or "") and "edit log from txid" in (s.reason or ""), s.reason

    # no ticket to be had (the keytab is gone): one error naming the principal — never "no change"
    monkeypatch.setenv("DRT_KERBEROS_KEYTAB", str(Path(kdc.workdir) / "gone.keytab"))
    with pytest.raises(KerberosError) as err:
        _sig(env, "quick")
    assert kdc.principal(SUPERUSER) in str(err.value) and "does not exist" in str(err.value), err.value


def test_a_principal_that_is_not_the_superuser_falls_back_to_the_snapshot_diff_saying_why(
        secure_pair_env: dict[str, Any], hdfs_secure_cold: HdfsCluster, kdc: Kdc,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """getEditsFromTxid serves only the HDFS superuser (cold has permissions on): as ``drt`` cold's
    reader is refused and cold's snapshot diff answers (over SPNEGO), saying why — the change is
    still seen: NO_GO."""
    env = secure_pair_env
    assert _sig(env, "prove").caught_up
    for k, v in kerberos_env(kdc).items():
        monkeypatch.setenv(k, v)
    hdfs_secure_cold.write("/kge/data/stray2.bin", b"s" * 5)
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time is None, (s.reason, s.detail)
    assert "superuser" in f"{s.reason} {s.basis} {s.detail}", (s.reason, s.basis, s.detail)
