"""The HDFS signal's quick path from the NameNodes' edit logs (issue 42, copy/editlog.py), on real HDFS:
the proof records each side's last transaction id read BEFORE its evidence; a quick check whose
txid is unchanged proves "no change at all" with no diff call (the NameNode's audit log shows none);
a moved txid is answered by the edit log's inotify events under the policy's root (the reader,
java/HdfsEdits.java, on the MiniDFSCluster's own Hadoop jars): a change on cold → NO_GO, writes on
hot → pending counted from the events. A write racing the proof is never lost, another NameNode
process (restarted) is not trusted, and where the edit log cannot be read the snapshot diff
answers, with the reason."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import editlog, proof
from dr_toolkit.copy.api import replicate_policy
from dr_toolkit.copy.signals import hdfs_signals
from tests.integration.test_copy_random import _truncator, rewrite_in_place

# the same estate, settling and changes as the snapshot-diff path's tests (without their autouse switch)
from tests.integration.test_hdfs_gate_quick import _append, _delete, _env, _overwrite, _rename, _settled
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


@pytest.fixture(autouse=True)
def hadoop_classpath(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The edit log reader's Hadoop client jars: the MiniDFSCluster's own (what `hadoop classpath`
    would print on a cluster's edge node)."""
    from drt_servers import maven

    monkeypatch.setenv(editlog.ENV_CLASSPATH, maven.classpath("hdfs"))
    monkeypatch.delenv(editlog.ENV_SWITCH, raising=False)
    yield


def _sig(env: dict[str, Any], mode: str) -> Any:
    (s,) = hdfs_signals(env["topo"], env["ledger"], Access.from_env(), time.time(), mode=mode)
    return s


def _proved(env: dict[str, Any]) -> dict[str, Any]:
    s = _sig(env, "prove")
    assert s.caught_up and s.detail["proof"]["recorded"], s.detail
    rec = proof.recorded(env["ledger"], "wh", env["run"].target)
    assert rec is not None and rec["cold"].get("nn") and rec.get("hot_nn"), rec
    return rec


def _audit(d: HdfsDir, *cmds: str) -> int:
    return sum(len(d.cluster.audit(c, under=d.root)) for c in cmds)


WALKS = ("computeSnapshotDiff", "listStatus", "contentSummary", "getContentSummary")


def test_an_unchanged_txid_proves_no_change_with_no_diff_call_and_hot_writes_are_counted_from_events(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir) -> None:
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    _proved(env)
    # a second proof deletes the first one's snapshot (a transaction of ours, after the record): the
    # recorded txid moves over it (nothing else happened), so a quiet cold still needs no read
    rec = _proved(env)
    assert "moved over the deletion of the previous proof's snapshot" in rec["cold"]["nn_read"], rec["cold"]
    before = (_audit(hot_dir, *WALKS), _audit(cold_dir, *WALKS))
    nn = editlog.NameNodeState.of(rec["cold"]["nn"])
    assert nn is not None and "before the full check lists cold" in rec["cold"]["nn_read"], rec["cold"]
    s = _sig(env, "quick")
    _settled(hot_dir, cold_dir)  # (its own mkdirs move the txids: after the check)
    assert s.caught_up and s.safe_time == env["run"].source_time, (s.reason, s.basis)
    assert s.detail["cold_evidence"] == "txid" and s.detail["hot_evidence"] == "txid", s.basis
    calls = s.detail["namenode_calls"]
    assert set(calls) == {"JMX"}, calls  # no GETSNAPSHOTDIFF, no GETSNAPSHOTLIST, no edit log read
    assert "no namespace change at all since" in s.basis and "bytes changed on a DataNode" in s.basis, s.basis
    # the NameNodes agree: no diff, no listing, no content summary asked of either since the proof
    assert (_audit(hot_dir, *WALKS), _audit(cold_dir, *WALKS)) == before

    # hot takes writes: its txid moved, the events under the source root are the pending entries
    hot_dir.write("/data/d1/new.bin", b"n" * 10)
    hot_dir.append("/data/a.bin", b"more")
    hot_dir.write("/elsewhere/x.bin", b"x")  # outside the policy's root: not pending
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time == env["run"].source_time, (s.reason, s.detail)
    # (cold's txid moved too: the audit marker made on cold, outside the policy's root — no change there)
    assert s.detail["hot_evidence"] == "editlog" and s.detail["cold_evidence"] == "editlog", s.basis
    assert s.detail["files_pending"] == 2 and "2 entries changed on hot" in (s.reason or ""), s.detail
    assert "GETSNAPSHOTDIFF" not in s.detail["namenode_calls"], s.detail["namenode_calls"]
    _settled(hot_dir, cold_dir)
    assert (_audit(hot_dir, *WALKS), _audit(cold_dir, *WALKS)) == before, "a diff or a listing was asked"


def _set_times(d: HdfsDir) -> None:
    d.cluster.set_times(d.p("/data/a.bin"), 1_600_000_000_000)


def _rewrite_in_place(d: HdfsDir) -> None:
    """TRUNCATE + APPEND + SETTIMES back to the same size and mtime: the snapshot diff's blind spot."""
    rewrite_in_place(d.fs(), d.p("/data/a.bin"), _truncator(d), b"z" * 700)


CHANGES = [_delete, _rename, _append, _overwrite, _set_times, _rewrite_in_place]


def test_a_change_on_cold_since_the_proof_is_no_go_from_the_edit_log(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir) -> None:
    """Each change made on cold after a proof (cold then repaired by a run and proven again):
    NO_GO on the quick path, named from cold's edit log — the same-size in-place rewrite too."""
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    for change in CHANGES:
        _proved(env)
        change(cold_dir)
        s = _sig(env, "quick")
        assert not s.caught_up and s.safe_time is None, (change.__name__, s.reason, s.detail)
        assert "cold changed since the proof" in (s.reason or "") and "edit log from txid" in (s.reason or ""), (
            change.__name__, s.reason)
        # a run puts cold back (the full path's own repair); then the next change
        (r,) = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.from_env())
        assert r.ok, (change.__name__, r)
    # an access-time update alone (a read) is not a change
    _proved(env)
    fs = cold_dir.fs()
    fs.client._session.put(  # SETTIMES of the access time only: what a read logs past the precision
        f"{cold_dir.active_url}/webhdfs/v1{cold_dir.p('/data/a.bin')}",
        params={"op": "SETTIMES", "accesstime": str(int(time.time() * 1000)), "user.name": "hdfs"}).raise_for_status()
    s = _sig(env, "quick")
    assert s.caught_up and s.detail["cold_evidence"] == "editlog", (s.reason, s.detail)
    assert "1 access-time updates not counted" in s.basis, s.basis


def test_a_write_racing_the_proof_is_never_lost(tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes made while the full check runs — after each side's txid was read, after the full check
    looked — are seen by the next quick check: hot's as pending, cold's as NO_GO."""
    from dr_toolkit.copy import signals

    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    real = signals._target_signal
    late: list[Any] = []

    def full_then_write(*a: Any, **k: Any) -> Any:
        sig = real(*a, **k)
        for w in late:
            w()
        return sig

    monkeypatch.setattr(signals, "_target_signal", full_then_write)
    late[:] = [lambda: hot_dir.write("/data/d1/late.bin", b"l")]
    s = _sig(env, "prove")
    assert s.caught_up and s.detail["proof"]["recorded"], s.detail  # the full check did not see it
    s = _sig(env, "quick")
    assert not s.caught_up and s.detail["files_pending"] == 1 and "late.bin" in (s.reason or ""), (s.reason, s.detail)

    (r,) = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.from_env())
    assert r.ok
    late[:] = [lambda: cold_dir.delete("/data/d1/b.bin")]
    s = _sig(env, "prove")
    assert s.caught_up and s.detail["proof"]["recorded"], s.detail
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time is None and "UNLINK" in (s.reason or ""), s.reason


def test_another_namenode_process_or_no_reader_is_not_trusted_the_snapshot_diff_answers(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    rec = _proved(env)
    # the recorded NameNode was another process (a restart: its start time; a reformat: its block pool)
    for field, why in (("started_ms", "restarted"), ("block_pool_id", "reformatted")):
        nn = dict(rec["cold"]["nn"])
        nn[field] = nn[field] - 1000 if field == "started_ms" else nn[field] + "-before"
        forged = {**rec, "cold": {**rec["cold"], "nn": nn}}
        env["ledger"].set_watermark(proof.COMPONENT, proof.proof_key("wh", env["run"].target), rec["proved_at"], forged)
        s = _sig(env, "quick")
        assert s.caught_up and s.detail["cold_evidence"] == "snapshot", (field, s.detail)
        assert f"the edit log not used: the active NameNode is not the one of the proof ({why}" in s.basis, s.basis
        assert s.detail["namenode_calls"].get("GETSNAPSHOTDIFF") == 1, s.detail["namenode_calls"]
    env["ledger"].set_watermark(proof.COMPONENT, proof.proof_key("wh", env["run"].target), rec["proved_at"], rec)
    # the txid moved and the reader cannot run (no Hadoop jars): the diffs answer, saying why
    hot_dir.write("/data/new.bin", b"n")
    _delete(cold_dir)
    monkeypatch.delenv(editlog.ENV_CLASSPATH)
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time is None and "snapshot diff from drtproof-" in (s.reason or ""), s.reason
    s = _sig(env, "auto")
    assert s.detail["path"] == "full" and "cold changed" in s.detail["quick_not_proven"], s.detail


def test_the_reader_says_why_when_not_the_superuser_or_the_edits_are_gone(tmp_path: Path) -> None:
    """On a NameNode with permissions on (the shared test clusters have them off, where the NameNode
    skips its superuser check): getEditsFromTxid refuses a user other than the HDFS superuser, and
    a txid whose edits were purged (after a checkpoint) is gone — each a stated reason (the quick
    check then diffs: the same fallback as tested above)."""
    import subprocess

    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
    from drt_servers import maven
    from drt_servers.hdfs import HdfsCluster

    c = HdfsCluster("hdfs-editlog-perm", tmp_path / "nn", conf={"dfs.permissions.enabled": "true"}).start()
    try:
        fs = WebHdfsFileSystem(c.namenodes, user="hdfs")
        loc = c.location("/p/data")
        fs.mkdirs("/p/data")
        fs.write("/p/data/a.bin", [b"a"])
        st = proof.nn_state(fs, loc)
        with pytest.raises(editlog.EditLogUnavailable, match="needs the HDFS superuser") as exc:
            editlog.read_edits(st, 0, ["/p/data"], user="nobody")
        assert exc.value.kind == "superuser"

        # the edits up to now finalized (a roll), then removed from the NameNode's name directories, as
        # a checkpoint's purge removes them (NNStorageRetentionManager; here by hand: this NameNode has
        # no checkpointer, and saveNamespace purges no edits while the log is closed)
        subprocess.run([maven.java(), "-cp", maven.classpath("hdfs"), "org.apache.hadoop.hdfs.tools.DFSAdmin",
                        "-fs", f"hdfs://127.0.0.1:{c.rpc_port}", "-rollEdits"], check=True, capture_output=True,
                       timeout=120, env={"HADOOP_USER_NAME": "hdfs", "PATH": "/usr/bin:/bin"})
        gone = [f for f in (tmp_path / "nn" / "data").glob("name*/current/edits_0*-*") if f.is_file()]
        assert gone, sorted(str(f) for f in (tmp_path / "nn" / "data").rglob("edits_*"))
        for f in gone:
            f.unlink()
        fs.write("/p/data/b.bin", [b"b"])
        now = proof.nn_state(fs, loc)
        with pytest.raises(editlog.EditLogUnavailable, match="no longer holds txid") as exc:
            editlog.read_edits(now, st.txid - 1, ["/p/data"], user="hdfs")
        assert exc.value.kind == "missing"
        fs.close()
    finally:
        c.kill()
