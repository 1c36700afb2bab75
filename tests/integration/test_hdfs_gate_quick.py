"""The HDFS signal's quick path (issue 42, copy/proof.py), on real HDFS: after a recorded full proof,
the gate proves the same safe time from what changed — cold's snapshot diff (or, without snapshots
on cold, the NameNode's counters and a sample), hot's snapshot diff from the run's snapshot — and
lists nothing (the NameNode's audit log: no listStatus). A change on cold since the proof is NO_GO
on the quick path, a change on hot is pending, and a missing or old proof takes the full path.

These tests keep the NameNodes' edit-log evidence off (``DRT_HDFS_EDITLOG=off``): they are the
snapshot-diff / counters path, the one every quick check falls back to where the edit log cannot
answer (tests/integration/test_hdfs_gate_editlog.py tests the edit-log path)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import proof
from dr_toolkit.copy.api import replicate_policy
from dr_toolkit.copy.signals import hdfs_signals, prove_policy
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.integration.test_copy_random import _truncator, rewrite_in_place
from tests.support.fixtures_failover import write_topology
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


@pytest.fixture(autouse=True)
def snapshot_diff_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from dr_toolkit.copy import editlog

    monkeypatch.setenv(editlog.ENV_SWITCH, "off")


def _env(tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, *, cold_snapshots: bool) -> dict[str, Any]:
    for rel, data in (("/data/a.bin", b"a" * 700), ("/data/d1/b.bin", b"b" * 300), ("/data/d1/d2/c.bin", b"c" * 50)):
        hot_dir.write(rel, data)
    hot_dir.allow_snapshot("/data")
    cold_dir.mkdir("/data")
    if cold_snapshots:
        cold_dir.allow_snapshot("/data")
    path = write_topology(
        tmp_path, zk=None,
        hdfs=[{"name": "wh", "source": f"hdfs://hot{hot_dir.p('/data')}", "targets": [f"hdfs://cold{cold_dir.p('/data')}"],
               "options": {"update": True, "delete": True, "snapshots": True}}],
        hot_extra={"hdfs": {"namenodes": hot_dir.urls, "user": "hdfs"}},
        cold_extra={"hdfs": {"namenodes": cold_dir.urls, "user": "hdfs"}})
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    (r,) = replicate_policy(topo, "wh", ledger, access=Access.from_env())
    assert r.ok and r.source_snapshot, r
    return {"topo": topo, "ledger": ledger, "run": r, "hot": hot_dir, "cold": cold_dir}


def _sig(env: dict[str, Any], mode: str, now: float | None = None) -> Any:
    (s,) = hdfs_signals(env["topo"], env["ledger"], Access.from_env(), time.time() if now is None else now, mode=mode)
    return s


def _listings(d: HdfsDir) -> int:
    return len(d.cluster.audit("listStatus", under=d.root))


def _settled(*dirs: HdfsDir) -> None:
    """Every audit record of what came before is in the log: a marker's own record is seen (the
    NameNode's audit logger writes in order), outside the policy's tree; a bound, not a timing."""
    import uuid

    for d in dirs:
        mark = f"/audit-marks/{uuid.uuid4().hex}"
        d.mkdir(mark)
        deadline = time.monotonic() + 60
        while not d.cluster.audit("mkdirs", under=d.p(mark)):
            assert time.monotonic() < deadline, f"the NameNode's audit log never showed {mark}"
            time.sleep(0.1)


def _proved(env: dict[str, Any]) -> Any:
    s = _sig(env, "prove")
    assert s.caught_up and s.detail["proof"]["recorded"], s.detail
    return s


@pytest.mark.parametrize("cold_snapshots", [True, False], ids=["cold-snapshots", "cold-counters"])
def test_after_a_proof_the_quick_path_states_the_safe_time_and_lists_nothing(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, cold_snapshots: bool) -> None:
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=cold_snapshots)
    full = _proved(env)
    lists = (_listings(hot_dir), _listings(cold_dir))
    assert lists[0] > 0 and lists[1] > 0  # the full proof lists both trees (the audit log sees listings)
    s = _sig(env, "quick")
    _settled(hot_dir, cold_dir)
    assert (_listings(hot_dir), _listings(cold_dir)) == lists, "the quick path listed a directory"
    assert s.caught_up and s.safe_time == env["run"].source_time == full.safe_time, (s.reason, s.basis)
    assert s.detail["path"] == "quick" and s.detail["listings"] == 0 and s.detail["files_pending"] == 0
    assert ("snapshot diff of cold" if cold_snapshots else "GETCONTENTSUMMARY") in s.basis, s.basis
    assert "cannot see a file rewritten in place" in s.basis and "until the next full proof" in s.basis
    assert s.detail["namenode_calls_total"] == (4 if cold_snapshots else 2 + 3 + 2), s.detail["namenode_calls"]

    # hot takes writes since the run: pending on the quick path, the safe time unchanged (still no listing)
    hot_dir.write("/data/d1/new.bin", b"n" * 10)
    hot_dir.append("/data/a.bin", b"more")
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time == env["run"].source_time and s.detail["files_pending"] == 2, s.detail
    assert "2 entries changed on hot" in (s.reason or ""), s.reason
    _settled(hot_dir, cold_dir)
    assert (_listings(hot_dir), _listings(cold_dir)) == lists


def _delete(d: HdfsDir) -> None:
    d.delete("/data/d1/d2/c.bin")


def _rename(d: HdfsDir) -> None:
    d.rename("/data/d1/b.bin", "/data/d1/b2.bin")


def _append(d: HdfsDir) -> None:
    d.append("/data/d1/d2/c.bin", b"x")


def _overwrite(d: HdfsDir) -> None:  # the same size, new bytes: a new file under the same name
    d.delete("/data/d1/b.bin")
    d.write("/data/d1/b.bin", b"B" * 300)


@pytest.mark.parametrize("change", [_delete, _rename, _append, _overwrite], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("cold_snapshots", [True, False], ids=["cold-snapshots", "cold-counters"])
def test_a_change_on_cold_since_the_proof_is_no_go_on_the_quick_path(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir, cold_snapshots: bool, change: Any) -> None:
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=cold_snapshots)
    _proved(env)
    change(cold_dir)
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time is None, (s.basis, s.detail)
    assert "cold changed since the proof" in (s.reason or ""), s.reason
    # auto: the quick path cannot prove, so the full check runs — and finds cold no longer holds the run
    s = _sig(env, "auto")
    assert s.detail["path"] == "full" and "cold changed" in s.detail["quick_not_proven"]
    assert not s.caught_up and s.safe_time is None and "no longer holds" in (s.reason or ""), s.reason


def test_a_same_size_rewrite_in_place_on_cold_is_the_stated_limit_until_the_full_proof(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir) -> None:
    """TRUNCATE + APPEND + SETTIMES back to the same size and mtime: the NameNode's snapshot diff
    does not report it (HDFS's limit, docs/design.md) — the quick basis says so, and the full proof
    (cold's own checksum of kept files) finds it."""
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    _proved(env)
    fs = cold_dir.fs()
    rewrite_in_place(fs, cold_dir.p("/data/a.bin"), _truncator(cold_dir), b"z" * 700)
    s = _sig(env, "quick")
    assert "cannot see a file rewritten in place" in s.basis
    s = _sig(env, "full")
    assert not s.caught_up and s.safe_time is None, (s.reason, s.basis)


def test_without_a_proof_or_with_an_old_one_the_full_path_runs(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir) -> None:
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    # no proof: the quick path proves nothing (NO_GO, no listing); auto takes the full path and records one
    before = (_listings(hot_dir), _listings(cold_dir))
    s = _sig(env, "quick")
    assert not s.caught_up and s.safe_time is None and "no full proof recorded" in (s.reason or ""), s.reason
    _settled(hot_dir, cold_dir)
    assert (_listings(hot_dir), _listings(cold_dir)) == before
    s = _sig(env, "auto")
    assert s.caught_up and s.detail["path"] == "full" and s.detail["proof"]["recorded"], s.detail
    assert _listings(cold_dir) > before[1]
    s = _sig(env, "auto")
    assert s.caught_up and s.detail["path"] == "quick", s.detail
    # an old proof: not used
    later = time.time() + proof.PROOF_MAX_AGE_S + 60
    s = _sig(env, "quick", now=later)
    assert s.safe_time is None and "older than" in (s.reason or ""), s.reason
    s = _sig(env, "auto", now=later)
    assert s.detail["path"] == "full" and "older than" in s.detail["quick_not_proven"]
    # a run since the proof (it changes cold): not used either until the next proof
    hot_dir.write("/data/late.bin", b"l")
    (r2,) = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.from_env())
    assert r2.ok
    s = _sig(env, "quick")
    assert s.safe_time is None and f"run {r2.run_id}" in (s.reason or ""), s.reason
    s = _sig(env, "auto")
    assert s.caught_up and s.detail["path"] == "full" and s.safe_time == r2.source_time
    assert _sig(env, "quick").safe_time == r2.source_time
    # what the replication DAG runs after a run: the policy's full check, recorded as the proof
    hot_dir.write("/data/late2.bin", b"m")
    (r3,) = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.from_env())
    assert _sig(env, "quick").safe_time is None
    (p,) = prove_policy(env["topo"], "wh", env["ledger"], Access.from_env())
    assert p.detail["proof"]["recorded"] and p.safe_time == r3.source_time, p.detail
    s = _sig(env, "quick")
    assert s.caught_up and s.safe_time == r3.source_time and s.detail["path"] == "quick"


def test_the_proof_snapshot_of_cold_is_replaced_and_a_recreated_one_proves_nothing(
        tmp_path: Path, hot_dir: HdfsDir, cold_dir: HdfsDir) -> None:
    env = _env(tmp_path, hot_dir, cold_dir, cold_snapshots=True)
    _proved(env)
    first = proof.recorded(env["ledger"], "wh", env["run"].target)
    assert first is not None
    _proved(env)
    second = proof.recorded(env["ledger"], "wh", env["run"].target)
    assert second is not None
    names = set(cold_dir.fs().snapshots(cold_dir.p("/data")))
    assert names == {second["cold"]["snapshot"]}, names  # the previous proof's snapshot deleted
    # the proof's snapshot deleted and taken again under its name (after a change): a new id, no proof
    snap = second["cold"]["snapshot"]
    cold_dir.cluster.delete_snapshot(cold_dir.p("/data"), snap)
    _delete(cold_dir)
    cold_dir.create_snapshot("/data", snap)
    s = _sig(env, "quick")
    assert s.safe_time is None and "re-created" in (s.reason or ""), s.reason
