"""The HDFS signal (copy/signals.py): safe time = the listing time of the last completed run
whose manifest cold holds; pending files -> not caught up; cold changed -> no safe time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr_toolkit.access import Access
from dr_toolkit.copy.api import replicate_policy
from dr_toolkit.copy.signals import hdfs_signals
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_copy import make_tree, sample_tree

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    hot, cold = tmp_path / "hot", tmp_path / "cold"
    make_tree(hot / "data", sample_tree(6))
    (cold / "data").mkdir(parents=True)
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(yaml.safe_dump({
        "version": 1,
        "clusters": {"hot": {"role": "hot", "local_root": str(hot)}, "cold": {"role": "cold", "local_root": str(cold)}},
        "policies": {"hdfs": [{"name": "wh", "source": "hdfs://hot/data", "targets": ["hdfs://cold/data"],
                               "options": {"update": True, "delete": True}}]},
        "ledger": {"url": f"sqlite:///{tmp_path}/ledger.db"}}))
    topo = load_topology(cfg)
    return {"topo": topo, "ledger": open_ledger(topo, Access.none()), "hot": hot / "data", "cold": cold / "data"}


def _one(env: dict[str, Any]) -> Any:
    sigs = hdfs_signals(env["topo"], env["ledger"], Access.none(), time.time())
    assert [s.name for s in sigs] == ["wh:hdfs://cold/data"]
    return sigs[0]


def test_signal_states_the_listing_time_of_the_last_completed_run(env: dict[str, Any]) -> None:
    s = _one(env)
    assert not s.caught_up and s.safe_time is None and "never replicated" in (s.reason or "")

    before = time.time()
    [r] = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.none())
    assert r.ok
    s = _one(env)
    assert s.caught_up and s.safe_time == r.source_time and before <= s.safe_time <= time.time()
    assert r.run_id in s.basis and r.manifest_id in s.basis

    # hot takes a write: not caught up, and the safe time stays the listing time (before the write)
    (env["hot"] / "late.bin").write_bytes(b"late")
    s = _one(env)
    assert not s.caught_up and s.safe_time == r.source_time and "1 files" in (s.reason or "")

    # the next run catches up and moves the safe time
    [r2] = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.none())
    s = _one(env)
    assert s.caught_up and s.safe_time == r2.source_time and r2.source_time > r.source_time


def test_cold_changed_behind_our_back_has_no_safe_time(env: dict[str, Any]) -> None:
    replicate_policy(env["topo"], "wh", env["ledger"], access=Access.none())
    victim = sorted(p for p in env["cold"].rglob("*") if p.is_file())[0]
    victim.unlink()
    s = _one(env)
    assert not s.caught_up and s.safe_time is None and "no longer holds" in (s.reason or "")


def test_unreachable_side_is_an_unreadable_signal(env: dict[str, Any], tmp_path: Path) -> None:
    replicate_policy(env["topo"], "wh", env["ledger"], access=Access.none())
    import shutil

    shutil.rmtree(env["hot"])
    s = _one(env)
    assert not s.caught_up and s.safe_time is None and s.basis == "unreadable"


def test_entries_on_hot_that_are_never_replicated_leave_no_safe_time(env: dict[str, Any]) -> None:
    """Issue 20 #15: a symlink or a file named like the tool's temp files on hot is passed over by
    every run — it is never on cold, so the gate must not say GO (it only counted them)."""
    replicate_policy(env["topo"], "wh", env["ledger"], access=Access.from_env())
    assert _one(env).caught_up
    link = env["hot"] / "latest.csv"
    link.symlink_to(next(p for p in env["hot"].rglob("*") if p.is_file()))
    tmp = env["hot"] / ".drt-tmp.deadbeef.0123456789abcdef"
    tmp.write_text("a file whose name looks like ours")
    replicate_policy(env["topo"], "wh", env["ledger"], access=Access.from_env())
    sig = _one(env)
    assert not sig.caught_up and sig.safe_time is None
    assert "2 entries on hot are never replicated" in (sig.reason or "") and "symlink" in (sig.reason or ""), sig.reason
    link.unlink()
    tmp.unlink()
    replicate_policy(env["topo"], "wh", env["ledger"], access=Access.from_env())
    assert _one(env).caught_up


def test_a_run_that_deleted_a_file_and_failed_its_new_path_leaves_no_safe_time(
        env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the torture test (a false GO): after a completed run, hot renames a directory and
    appends to a file in it; the next run deletes the file's old path on cold, then cannot copy it
    at its new one (it keeps changing while copied) and fails. Cold now holds that run's manifest,
    which descends from the completed run's — but the file, written before the completed run's
    listing, is on cold at no path: that listing time is no safe time any more."""
    from dr_toolkit.copy import execute

    (env["hot"] / "zz-old").mkdir()
    (env["hot"] / "zz-old" / "f").write_bytes(b"x" * 100)
    [r1] = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.none())
    assert r1.ok and _one(env).safe_time == r1.source_time
    (env["hot"] / "zz-old").rename(env["hot"] / "zz-new")
    with (env["hot"] / "zz-new" / "f").open("ab") as f:
        f.write(b"y" * 10)
    real = execute.copy_one

    def failing(ctx: Any, task: Any) -> Any:
        if task.rel == "zz-new/f":
            return execute.Outcome(task.rel, False, attempts=3, changed=True, error="changed while copied (injected)")
        return real(ctx, task)

    monkeypatch.setattr(execute, "copy_one", failing)
    [r2] = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.none())
    assert not r2.ok and r2.files_deleted >= 1, r2.to_json()
    assert not (env["cold"] / "zz-old" / "f").exists() and not (env["cold"] / "zz-new" / "f").exists()
    s = _one(env)
    assert s.safe_time is None and not s.caught_up, (s.basis, s.reason)
    assert r2.run_id in (s.reason or "") and "without completing" in (s.reason or ""), s.reason
    # the next run that completes gives a safe time again
    monkeypatch.undo()
    [r3] = replicate_policy(env["topo"], "wh", env["ledger"], access=Access.none())
    assert r3.ok and _one(env).safe_time == r3.source_time


def test_many_targets_read_side_by_side_give_each_its_own_signal_in_the_topology_order(tmp_path: Path) -> None:
    """The gate probes the policy targets side by side (``PARALLEL`` at once): with more targets than
    that, in five different states, every signal is the one the target gives when read alone, and
    they come back in the topology's order."""
    import shutil

    from dr_toolkit.copy import signals

    hot, cold = tmp_path / "hot", tmp_path / "cold"
    n = signals.PARALLEL + 5
    for i in range(n):
        make_tree(hot / f"p{i:02d}", sample_tree(3))
    cold.mkdir()
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(yaml.safe_dump({
        "version": 1,
        "clusters": {"hot": {"role": "hot", "local_root": str(hot)}, "cold": {"role": "cold", "local_root": str(cold)}},
        "policies": {"hdfs": [{"name": f"p{i:02d}", "source": f"hdfs://hot/p{i:02d}",
                               "targets": [f"hdfs://cold/p{i:02d}"]} for i in reversed(range(n))]},
        "ledger": {"url": f"sqlite:///{tmp_path}/ledger.db"}}))
    topo = load_topology(cfg)
    ledger = open_ledger(topo, Access.none())
    for i in range(n):
        if i % 5 != 0:  # every fifth: never replicated
            replicate_policy(topo, f"p{i:02d}", ledger, access=Access.none())
    for i in range(n):
        if i % 5 == 1:  # hot takes a write: pending
            (hot / f"p{i:02d}" / "late.bin").write_bytes(b"late")
        elif i % 5 == 2:  # cold changed behind our back
            next(p for p in sorted((cold / f"p{i:02d}").rglob("*")) if p.is_file()).unlink()
        elif i % 5 == 3:  # hot unreadable
            shutil.rmtree(hot / f"p{i:02d}")
    now = time.time()
    sigs = hdfs_signals(topo, ledger, Access.none(), now)
    assert [s.name for s in sigs] == [f"p{i:02d}:hdfs://cold/p{i:02d}" for i in reversed(range(n))]
    alone = [signals._target_signal(topo, ledger, Access.none(), now, p, t)
             for p in topo.policies.hdfs for t in p.targets]
    assert [(s.caught_up, s.safe_time, s.basis, s.reason) for s in sigs] == \
           [(s.caught_up, s.safe_time, s.basis, s.reason) for s in alone]
    states = {s.name.split(":")[0]: s for s in sigs}
    assert states["p04"].caught_up and states["p04"].safe_time is not None
    assert "never replicated" in (states["p05"].reason or "")
    assert "pending" in (states["p06"].reason or "")
    assert "no longer holds" in (states["p07"].reason or "")
    assert states["p08"].basis == "unreadable"
