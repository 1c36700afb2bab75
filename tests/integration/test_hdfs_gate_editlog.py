"""The HDFS signal's quick path from the NameNodes' edit logs (issue 42, copy/editlog.py), on real HDFS:
the proof records each side's last transaction id read BEFORE its evidence; a quick check whose
txid is unchanged proves "no change at all" with no diff call (the NameNode's audit log shows none);
a moved txid is answered by the edit log's inotify events under the policy's root (the reader,
java/HdfsEdits.java, on the MiniDFSCluster's own Hadoop jars): a change on cold → NO_GO, writes on
hot → pending counted from the events. Writes racing the proof — and its roll of each NameNode's
edit log, which puts the recorded txid at the start of a fresh segment — are never lost, another
NameNode process (restarted) is not trusted, and where the edit log cannot be read (or rolled) the
snapshot diff answers (the txid is recorded as read), with the reason."""

from __future__ import annotations

import threading
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
    monkeypatch.delenv(editlog.ENV_ROLL, raising=False)
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
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each change made on cold after a proof (cold then repaired by a run and proven again):
    NO_GO on the quick path, named from cold's edit log — the same-size in-place rewrite too."""
    monkeypatch.setenv(editlog.ENV_ROLL, "off")  # (the roll's own attack is the racing test's)
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    for i, change in enumerate(CHANGES):
        rec = _proved(env)
        for note in (rec["hot_nn_base"], rec["cold"]["nn_base"]) if i == 0 else ():  # not at a segment start: said
            assert f"not rolled (${editlog.ENV_ROLL} is off)" in note and "which a read from it first decodes" in note, (
                note)
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


class _Racer:
    """Changes one file under the policy's root on one side without pause: SETTIMES keeping its
    size and mtime, with an access time of its own (one transaction, one METADATA event naming
    it) — so the full check, which compares size, mtime, change token and checksum, still proves
    while the writes race it. Each write: (access time, began, ended) on one clock."""

    def __init__(self, d: HdfsDir, atime0: int) -> None:
        self.d, self.next = d, atime0
        self.done: list[tuple[int, float, float]] = []
        self.path = d.p("/data/a.bin")
        self.session = d.fs().client._session
        st = d.stat("/data/a.bin")
        assert st is not None
        self.mtime = int(st["modificationTime"])
        self.stop = threading.Event()
        self.lock = threading.Lock()  # held by a write: the test holds it to order one write exactly
        self.thread = threading.Thread(target=self._run, daemon=True)

    def write(self) -> None:
        with self.lock:
            self.write_held()

    def write_held(self) -> None:
        at, self.next = self.next, self.next + 1
        t0 = time.monotonic()
        self.session.put(f"{self.d.active_url}/webhdfs/v1{self.path}", timeout=30, params={
            "op": "SETTIMES", "modificationtime": str(self.mtime), "accesstime": str(at),
            "user.name": "hdfs"}).raise_for_status()
        self.done.append((at, t0, time.monotonic()))

    def _run(self) -> None:
        while not self.stop.is_set():
            self.write()


def test_writes_racing_the_proofs_edit_log_roll_are_never_lost(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """The proof has each side's NameNode roll its edit log and records the txid read right AFTER
    the roll (editlog.base_state), so the base sits at the start of a fresh segment. Writers change
    a file under the policy's root on hot and on cold without pause while the proof runs — before,
    during and after each side's roll, before and after its base is read, during and after the full
    check — with one more write just before and one just after each roll, and, after the full check,
    a new file on hot and a file deleted on cold. Then, on each side: the roll's segment is the
    recorded base's (the finalized segment before it ends one txid earlier: END_LOG_SEGMENT, then
    START_LOG_SEGMENT); every write that began after the base was read (the base read before the
    full check began) is an event read from the recorded base, the file made or deleted after the
    full check too; none that ended before that read began is; and the quick check says NO_GO for
    cold — never "no change" while a file differs from what the proof saw. (Checked to fail with the txid read before the roll, the
    txid read + 2, and hot's txid read after the full check as the base.) A standby refuses the roll."""
    from dr_toolkit.copy import signals

    monkeypatch.setenv(editlog.ENV_ROLL, "always")  # roll at every proof, not only on a long segment
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    racers = {"hot": _Racer(hot_dir, 1_500_000_000_000), "cold": _Racer(cold_dir, 1_400_000_000_000)}
    ports = {"hot": {str(p) for p in hot_dir.cluster.rpc_ports}, "cold": {str(p) for p in cold_dir.cluster.rpc_ports}}

    def side(rpc: str) -> str:
        return next(k for k, v in ports.items() if rpc.rsplit(":", 1)[1] in v)

    reads: list[tuple[str, int, float, float]] = []  # (side, txid, began, ended) of every txid read
    rolls: dict[str, tuple[int, float, float]] = {}
    evidence: list[float] = []
    real_state, real_roll, real_full = editlog.namenode_state, editlog.roll_edits, signals._target_signal

    def state(*a: Any, **k: Any) -> editlog.NameNodeState:
        t0 = time.monotonic()
        if "cold" not in rolls or any(x[0] == "cold" and x[2] > rolls["cold"][2] for x in reads):
            st = real_state(*a, **k)
            reads.append((side(st.rpc), st.txid, t0, time.monotonic()))
            return st
        with racers["cold"].lock:  # cold's base read: no cold write in flight during it, then one right
            st = real_state(*a, **k)  # after it — the base's next transaction exactly (a base past the read misses it)
            reads.append((side(st.rpc), st.txid, t0, time.monotonic()))
            racers["cold"].write_held()
        return st

    def roll(st: editlog.NameNodeState, **k: Any) -> int:
        r = racers[side(st.rpc)]
        r.write()  # just before the roll
        t0 = time.monotonic()
        first = real_roll(st, **k)
        rolls[side(st.rpc)] = (first, t0, time.monotonic())
        r.write()  # just after it, before the base is read
        return first

    def full(*a: Any, **k: Any) -> Any:
        evidence.append(time.monotonic())
        sig = real_full(*a, **k)
        hot_dir.write("/data/d1/late.bin", b"l")  # after the full check looked: seen only from the events
        cold_dir.delete("/data/d1/b.bin")
        return sig

    monkeypatch.setattr(editlog, "namenode_state", state)
    monkeypatch.setattr(editlog, "roll_edits", roll)
    monkeypatch.setattr(signals, "_target_signal", full)
    for r in racers.values():
        r.thread.start()
    try:
        s = _sig(env, "prove")
        time.sleep(0.3)
    finally:
        for r in racers.values():
            r.stop.set()
            r.thread.join(timeout=60)
    monkeypatch.setattr(editlog, "namenode_state", real_state)
    assert s.caught_up and s.detail["proof"]["recorded"], (s.reason, s.detail)
    rec = proof.recorded(env["ledger"], "wh", env["run"].target)
    assert rec is not None
    (t_ev,) = evidence
    for name, d, nn_d, note in (("hot", hot_dir, rec["hot_nn"], rec["hot_nn_base"]),
                                ("cold", cold_dir, rec["cold"]["nn"], rec["cold"]["nn_base"])):
        base = editlog.NameNodeState.of(nn_d)
        first, r0, r1 = rolls[name]
        assert base is not None and base.segment is not None and first <= base.segment <= base.txid, (name, base, first)
        assert "the edit log rolled at the proof" in note and s.detail["proof"]["edit_log_base"][name] == note, note
        if name == "cold":  # on the NameNode's disk: the segment before the roll ends at its first txid - 1
            current = sorted(f.name for f in (d.cluster.workdir / "data").glob("name*/current/edits_*"))
            assert f"-{first - 1:019d}" in " ".join(current) and f"_{first:019d}" in " ".join(current), current
        base_read = next(x for x in reads if x[0] == name and x[2] > r1)  # the first txid read after the roll
        assert base_read[3] < t_ev, "the base was read after the full check began"
        racer = racers[name]
        assert any(b < r1 and e > r0 for _, b, e in racer.done), "no write raced the roll"
        now = proof.nn_state(d.fs(), d.location("/data"))
        got = editlog.read_edits(now, base.txid, [d.p("/data")], user="hdfs")
        seen = {int(e["atime"]) for e in got.touched if e.get("meta") == "TIMES" and e["path"] == racer.path}
        late = [at for at, b, _ in racer.done if b > base_read[3] or b > t_ev]
        lost = [at for at in late if at not in seen]
        assert late and not lost, f"{name}: {len(lost)} of {len(late)} writes after the base not read from it: {lost[:5]}"
        early = [at for at, _, e in racer.done if e < base_read[2] and at in seen]
        assert not early, f"{name}: writes ended before the base was read are read after it: {early[:5]}"
        after_full = ("CREATE", d.p("/data/d1/late.bin")) if name == "hot" else ("UNLINK", d.p("/data/d1/b.bin"))
        assert after_full in {(e["e"], e["path"]) for e in got.touched}, (name, after_full)
    # the quick check: cold changed (NO_GO), hot's writes pending — never "no change"
    q = _sig(env, "quick")
    assert not q.caught_up and q.safe_time is None and "cold changed since the proof" in (q.reason or ""), q.reason
    assert f"edit log from txid {rec['cold']['nn']['txid']}" in (q.reason or ""), q.reason
    # a standby does not roll: said so (the proof then records the txid as read)
    standby = editlog.NameNodeState.of({**rec["hot_nn"], "rpc": f"127.0.0.1:{hot_dir.cluster.rpc_ports[0]}"})
    assert standby is not None
    with pytest.raises(editlog.EditLogUnavailable) as exc:
        editlog.roll_edits(standby, user="hdfs")
    assert exc.value.kind == "standby", exc.value


def test_another_namenode_process_or_no_reader_is_not_trusted_the_snapshot_diff_answers(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    # no reader (no Hadoop jars): the proof cannot roll the edit logs — it records the txids as read, saying so
    monkeypatch.setenv(editlog.ENV_ROLL, "always")
    monkeypatch.delenv(editlog.ENV_CLASSPATH)
    rec = _proved(env)
    for note in (rec["hot_nn_base"], rec["cold"]["nn_base"]):
        assert "the edit log could not be rolled" in note and f"${editlog.ENV_CLASSPATH} is not set" in note, note
        assert "which a read from it first decodes" in note, note
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
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time is None and "snapshot diff from drtproof-" in (s.reason or ""), s.reason
    s = _sig(env, "auto")
    assert s.detail["path"] == "full" and "cold changed" in s.detail["quick_not_proven"], s.detail


def test_the_reader_says_why_when_not_the_superuser_or_the_edits_are_gone(tmp_path: Path) -> None:
    """On a NameNode with permissions on (the shared test clusters have them off, where the NameNode
    skips its superuser check): getEditsFromTxid and rollEdits refuse a user other than the HDFS
    superuser, and a txid whose edits were purged (after a checkpoint) is gone — each a stated
    reason (the quick check then diffs: the same fallback as tested above; the proof records the
    txid as read). The roll, as the superuser: the old segment ends with END_LOG_SEGMENT, the new
    one starts with START_LOG_SEGMENT — the txid the roll returns, the NameNode's last txid after
    it, the first of the segment its journal names."""
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
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

        with pytest.raises(editlog.EditLogUnavailable, match="needs the HDFS superuser") as exc:
            editlog.roll_edits(st, user="nobody")
        assert exc.value.kind == "superuser"

        # the edits up to now finalized (the roll), then removed from the NameNode's name directories, as
        # a checkpoint's purge removes them (NNStorageRetentionManager; here by hand: this NameNode has
        # no checkpointer, and saveNamespace purges no edits while the log is closed)
        first = editlog.roll_edits(st, user="hdfs")
        rolled = proof.nn_state(fs, loc, segment=True)
        assert first == st.txid + 2 and rolled.txid == first and rolled.segment == first, (st, first, rolled)
        gone = [f for f in (tmp_path / "nn" / "data").glob("name*/current/edits_0*-*") if f.is_file()]
        assert any(f.name.endswith(f"-{first - 1:019d}") for f in gone), sorted(str(f) for f in gone)
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
