"""Re-protect for HDFS (issue 40): divergence -> set_aside -> reprotect, on the real HDFS pair of
the session (snapshots on: the common snapshot, GETSNAPSHOTDIFF, the rollback from it) and on
``local_root`` clusters (no snapshots: the old hot's listing against the base manifest).

Each scenario: files written on hot, a forward replicate (the common base), a failover at the
topology level (the recovery point = the time of that copy's listing), then writes on BOTH sides
(hot: the loss window; cold: the active cluster), then the three steps. Checked: the old hot's tree
equals the active cluster's exactly and the active cluster holds what its writers wrote; every path
the old hot changed after the base is in the divergence report with its kind, and its bytes are at
``kept_at``; a file nobody changed is not copied (the run's byte counters); a refusal before the
set-aside; a dry run changes nothing; seeded random interleavings; kills of set_aside and reprotect
in a child process, then the step called again.

No ZooKeeper in these topologies (no fence): the runbook lifts the old hot's read-only flag (and
passes its epoch) before re-protect; the fence checks themselves are the copy's (test_copy_fence).
"""

from __future__ import annotations

import json
import os
import posixpath
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import replicate_policy
from dr_toolkit.copy.signals import hdfs_signals
from dr_toolkit.errors import FencedError, ProblemFound
from dr_toolkit.failback import hdfs as fb
from dr_toolkit.failback.divergence import Divergence
from dr_toolkit.fs import FileSystem, open_fs, parse_uri
from dr_toolkit.fs.base import is_internal
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import Topology, load_topology
from dr_toolkit.zk.fencing import open_fence
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

RUN = "failback-test-1"


class World:
    """One topology (policy ``wh``: hot ``/data`` -> cold ``/data``), its ledger, and each side's
    tree through the toolkit's filesystem layer (relative paths under each side's ``/data``)."""

    def __init__(self, topo: Topology, kind: str) -> None:
        self.topo, self.kind = topo, kind
        self.ledger = Ledger.open(topo.ledger.url)
        self.acc = Access.from_env()
        pol = topo.policies.hdfs[0]
        self.hot_loc, self.cold_loc = parse_uri(pol.source, topo), parse_uri(pol.targets[0], topo)
        self.hot_fs: FileSystem = open_fs(self.hot_loc, self.acc)
        self.cold_fs: FileSystem = open_fs(self.cold_loc, self.acc)

    def side(self, which: str) -> tuple[FileSystem, str]:
        return (self.hot_fs, self.hot_loc.path) if which == "hot" else (self.cold_fs, self.cold_loc.path)

    def write(self, which: str, rel: str, data: bytes) -> None:
        fs, root = self.side(which)
        fs.write_bytes(fs.join(root, rel), data)

    def delete(self, which: str, rel: str) -> None:
        fs, root = self.side(which)
        assert fs.delete(fs.join(root, rel))

    def rename(self, which: str, a: str, b: str) -> None:
        fs, root = self.side(which)
        fs.rename(fs.join(root, a), fs.join(root, b))

    def tree(self, which: str) -> dict[str, bytes]:
        fs, root = self.side(which)
        return {r: fs.read_all(s.path) for s in fs.list_files(root) if not is_internal(r := fs.relative(root, s.path))}

    def raw_tmp(self, which: str) -> list[str]:
        fs, root = self.side(which)
        return list(fs.list_tmp(root))

    def read_uri(self, uri: str) -> bytes:
        loc = parse_uri(uri, self.topo)
        fs = open_fs(loc, self.acc)
        try:
            return fs.read_all(loc.path)
        finally:
            fs.close()

    def replicate(self) -> Any:
        (r,) = replicate_policy(self.topo, "wh", self.ledger, access=self.acc)
        assert r.ok, r.failures
        return r

    def close(self) -> None:
        self.hot_fs.close()
        self.cold_fs.close()


def _hdfs_world(tmp_path: Path, hdfs_hot: Any, hdfs_cold: Any, hot_dir: Any, cold_dir: Any,
                zk: str | None = None) -> World:
    hot_dir.allow_snapshot("/data")
    cold_dir.allow_snapshot("/data")
    path = write_topology(
        tmp_path, zk=zk,
        hdfs=[{"name": "wh", "source": f"hdfs://hot{hot_dir.p('/data')}", "targets": [f"hdfs://cold{cold_dir.p('/data')}"],
               "options": {"update": True, "delete": True, "snapshots": True}}],
        hot_extra={"hdfs": {"namenodes": hdfs_hot.namenodes, "user": "hdfs"}},
        cold_extra={"hdfs": {"namenodes": hdfs_cold.namenodes, "user": "hdfs"}})
    return World(load_topology(path), "hdfs")


def _local_world(tmp_path: Path, zk: str | None = None) -> World:
    path = write_topology(tmp_path, zk=zk, hdfs=[{"name": "wh", "source": "hdfs://hot/data",
                                                    "targets": ["hdfs://cold/data"],
                                                    "options": {"update": True, "delete": True, "snapshots": True}}])
    (tmp_path / "hot" / "data").mkdir(parents=True)
    (tmp_path / "cold" / "data").mkdir(parents=True)
    return World(load_topology(path), "local")


@pytest.fixture(params=["hdfs", "local"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    if request.param == "hdfs":
        w = _hdfs_world(tmp_path, *(request.getfixturevalue(n) for n in ("hdfs_hot", "hdfs_cold", "hot_dir",
                                                                          "cold_dir")))
    else:
        w = _local_world(tmp_path)
    yield w
    w.close()


def _bytes(tag: str, n: int) -> bytes:
    return (tag.encode() * (n // max(1, len(tag)) + 1))[:n]


BASE = {"keep/big": _bytes("big", 200_000), "keep/small": b"small", "h/mod": _bytes("hm0", 3000),
        "h/del": _bytes("hd0", 4000), "h/ren": _bytes("hr0", 5000), "c/mod": _bytes("cm0", 6000),
        "c/del": _bytes("cd0", 7000), "c/ren": _bytes("cr0", 8000), "x/both": _bytes("xb0", 900),
        "x/gone": _bytes("xg0", 800)}


def _scenario(w: World) -> tuple[Any, dict[str, bytes], dict[str, str]]:
    """Base on hot, replicated; then writes on both sides. Returns (the base run, the cold writers'
    tree, what hot changed after the base: rel -> kind)."""
    for rel, data in BASE.items():
        w.write("hot", rel, data)
    base = w.replicate()
    assert w.tree("cold") == BASE
    time.sleep(0.05)
    # the failover (topology level): cold is active from the recovery point = base.source_time on
    w.write("hot", "h/new", _bytes("hot-new", 1111))  # the loss window on the old hot
    w.write("hot", "h/mod", _bytes("hm1", 3333))
    w.delete("hot", "h/del")
    w.rename("hot", "h/ren", "h/ren2")
    w.write("cold", "c/new", _bytes("cold-new", 2222))  # the active cluster's writers
    w.write("cold", "c/mod", _bytes("cm1", 6666))
    w.delete("cold", "c/del")
    w.rename("cold", "c/ren", "c/ren2")
    w.write("hot", "x/both", _bytes("xb-hot", 901))  # both sides changed it: the active cluster's wins,
    w.write("cold", "x/both", _bytes("xb-cold", 902))  # the old hot's is kept aside
    w.delete("hot", "x/gone")  # both sides deleted it
    w.delete("cold", "x/gone")
    want = {k: v for k, v in BASE.items() if k not in ("c/del", "c/ren", "x/gone")}
    want.update({"c/new": _bytes("cold-new", 2222), "c/mod": _bytes("cm1", 6666), "c/ren2": BASE["c/ren"],
                 "x/both": _bytes("xb-cold", 902)})
    changed = {"h/new": "created", "h/mod": "modified", "h/del": "deleted", "h/ren": "deleted", "h/ren2": "created",
               "x/both": "modified", "x/gone": "deleted"}
    return base, want, changed


def _check_report(w: World, items: list[Divergence], changed: dict[str, str]) -> None:
    got = {it.detail["rel"]: it.detail["change"] for it in items}
    assert got == changed, got
    for it in items:
        assert it.capability == "hdfs" and it.policy == "wh"
        assert it.where == w.topo.policies.hdfs[0].source + "/" + it.detail["rel"]
        if w.kind == "hdfs":
            assert it.detail["base"].startswith("snapshot id:"), it.detail["base"]
        else:
            assert it.detail["base"].startswith("manifest "), it.detail["base"]


def test_reprotect_after_writes_on_both_sides(world: World) -> None:
    w = world
    base, want, changed = _scenario(w)
    hot_now = w.tree("hot")
    probe = fb.divergence(w.topo, w.ledger, w.acc, recovery_point=base.source_time)  # no run: nothing left
    _check_report(w, probe, changed)
    if w.kind == "hdfs":
        assert not [n for n in w.hot_fs.snapshots(w.hot_loc.path) if n.startswith(fb.FAILBACK_SNAP_PREFIX)]
    items = fb.divergence(w.topo, w.ledger, w.acc, recovery_point=base.source_time, run_id=RUN)
    _check_report(w, items, changed)
    if w.kind == "hdfs":
        assert fb.FAILBACK_SNAP_PREFIX + RUN in w.hot_fs.snapshots(w.hot_loc.path)  # the moment reported
        ren2 = next(it for it in items if it.detail["rel"] == "h/ren2")
        assert ren2.detail["renamed_from"].endswith("/h/ren"), ren2.detail  # the diff's rename, said
    # the copy into the old hot is refused while its post-base writes are in the tree
    with pytest.raises(ProblemFound, match="set the divergence aside first"):
        fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)
    assert w.tree("hot") == hot_now
    kept = fb.set_aside(w.topo, w.ledger, w.acc, items, run_id=RUN)
    for it in kept:
        if it.detail["change"] == "deleted":
            assert it.kept_at is None
            continue
        assert it.kept_at is not None and f"/.drt-divergence/{RUN}/wh/" in it.kept_at
        assert w.read_uri(it.kept_at) == hot_now[it.detail["rel"]], it  # the old hot's bytes, kept
    # a write on the old hot after the report (its writers were not stopped): found, refused
    w.write("hot", "h/late", b"written after the divergence report")
    with pytest.raises(ProblemFound, match="h/late"):
        fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)
    late = fb.set_aside(w.topo, w.ledger, w.acc, [Divergence("hdfs", "wh", "late", {"change": "created",
                                                                                     "rel": "h/late"})], run_id=RUN)
    assert late[0].kept_at and w.read_uri(late[0].kept_at) == b"written after the divergence report"
    # a dry run: planned, nothing written on either side
    before_hot, before_cold = w.tree("hot"), w.tree("cold")
    runs_before = len(w.ledger.runs(policy="wh", limit=100))
    plan = fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN, dry_run=True)
    assert plan["status"] == "planned", plan
    assert plan["policies"][0]["files_restored"] == (3 if w.kind == "hdfs" else 0), plan
    other = fb.reprotect(w.topo, w.ledger, w.acc, run_id="not-taken", dry_run=True)  # no failback snapshot yet
    assert other["status"] == "planned" and other["policies"][0]["files_restored"] == plan["policies"][0][
        "files_restored"], other
    if w.kind == "hdfs":
        assert fb.FAILBACK_SNAP_PREFIX + "not-taken" not in w.hot_fs.snapshots(w.hot_loc.path)
    assert (w.tree("hot"), w.tree("cold")) == (before_hot, before_cold)
    assert len(w.ledger.runs(policy="wh", limit=100)) == runs_before
    said: list[str] = []
    res = fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN, progress=said.append)
    assert res["status"] == "done", res
    (p,) = res["policies"]
    assert w.tree("cold") == want  # the active cluster: what its writers wrote
    assert w.tree("hot") == want, (p, sorted(set(w.tree("hot")) ^ set(want)))  # the old hot equals it exactly
    assert not w.raw_tmp("hot")
    # delta only: the files cold changed, and — without a common snapshot — the ones hot deleted or
    # modified (their base bytes come from cold); keep/* (nobody changed them) never copied
    from_cold = ["c/new", "c/mod", "c/ren2", "x/both"]
    if w.kind == "hdfs":
        # h/mod, h/del, h/ren from the common snapshot, within the old hot; not x/both nor x/gone
        # (the active cluster changed them too: the copy brings its state)
        assert p["files_restored"] == 3, p
        assert "from snapshot" in p["rollback"], p
    else:
        from_cold += ["h/mod", "h/del", "h/ren"]
        assert "no common snapshot" in p["base"], p
    assert p["forward"] == "no common snapshot on cold: listing compare", p
    assert (p["files_copied"], p["bytes_copied"]) == (len(from_cold), sum(len(want[r]) for r in from_cold)), p
    assert p["files_deleted"] == 2, p  # c/del and c/ren (cold renamed it): the old hot holds both
    assert any("files copied" in m for m in said), said
    # the reversed replication continues from here: a fast-forward with nothing to do
    rev = w.topo.reversed()
    (again,) = replicate_policy(rev, "wh", w.ledger, access=w.acc)
    assert again.ok and again.mode == "fast-forward" and again.files_copied == 0, again.mode_reason
    (sig,) = hdfs_signals(rev, w.ledger, w.acc, time.time())  # the reversed gate sees the old hot caught up
    assert sig.caught_up and sig.safe_time is not None, (sig.reason, sig.basis)
    # re-protect again: idempotent, nothing copied, nothing kept twice
    res2 = fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)
    assert res2["status"] == "done" and res2["policies"][0]["bytes_copied"] == 0, res2
    assert w.tree("hot") == want


def test_delta_only_on_a_larger_tree_hdfs(tmp_path: Path, hdfs_hot: Any, hdfs_cold: Any, hot_dir: Any,
                                         cold_dir: Any) -> None:
    """120 files (2.4 MB) replicated; then 4 changes on each side: the re-protect moves exactly the
    active cluster's changed bytes between the clusters and restores the old hot's 2 deleted or
    modified files within it; every other file is compared by checksum, never copied."""
    w = _hdfs_world(tmp_path, hdfs_hot, hdfs_cold, hot_dir, cold_dir)
    try:
        rnd = random.Random(5)
        base = {f"p{i % 6}/f{i:03d}": rnd.randbytes(20_000) for i in range(120)}
        for rel, data in base.items():
            w.write("hot", rel, data)
        t0 = time.monotonic()
        w.replicate()
        t_fwd = time.monotonic() - t0
        # the forward gate proves it (a `drtproof-` snapshot of cold's tree, copy/proof.py): the
        # re-protect deletes it once the old hot is up to date, nothing else would
        (sig,) = hdfs_signals(w.topo, w.ledger, w.acc, time.time(), mode="prove")
        assert sig.caught_up, (sig.reason, sig.basis)
        proofs = [n for n in w.cold_fs.snapshots(w.cold_loc.path) if n.startswith("drtproof-")]
        assert len(proofs) == 1, proofs
        cold = dict(base)
        w.write("hot", "p0/f000", b"hot rewrote it")
        w.delete("hot", "p1/f001")
        w.write("hot", "p9/new", b"hot new")
        w.rename("hot", "p2/f002", "p9/moved")
        for rel, data in (("p3/f003", b"cold rewrote it" * 100), ("p9/cnew", b"cold new" * 50)):
            w.write("cold", rel, data)
            cold[rel] = data
        w.delete("cold", "p4/f004")
        del cold["p4/f004"]
        w.rename("cold", "p5/f005", "p9/cmoved")
        cold["p9/cmoved"] = cold.pop("p5/f005")
        t0 = time.monotonic()
        items = fb.divergence(w.topo, w.ledger, w.acc, recovery_point=None, run_id=RUN)
        t_div = time.monotonic() - t0
        assert {it.detail["rel"]: it.detail["change"] for it in items} == {
            "p0/f000": "modified", "p1/f001": "deleted", "p9/new": "created", "p2/f002": "deleted",
            "p9/moved": "created"}
        t0 = time.monotonic()
        fb.set_aside(w.topo, w.ledger, w.acc, items, run_id=RUN)
        t_aside = time.monotonic() - t0
        t0 = time.monotonic()
        res = fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)
        t_rep = time.monotonic() - t0
        (p,) = res["policies"]
        assert w.tree("hot") == w.tree("cold") == cold
        moved = ["p3/f003", "p9/cnew", "p9/cmoved"]
        assert (p["files_copied"], p["bytes_copied"]) == (3, sum(len(cold[r]) for r in moved)), p
        assert p["files_restored"] == 3 and p["files_deleted"] == 2, p  # f000, f001, f002; f004 and f005 gone
        assert p["proof_snapshot_deleted"] == proofs[0], p
        assert not [n for n in w.cold_fs.snapshots(w.cold_loc.path) if n.startswith("drtproof-")]
        print(f"\n120 files, {sum(map(len, base.values()))} bytes: forward replicate {t_fwd:.1f}s, divergence "
              f"{t_div:.1f}s, set_aside {t_aside:.1f}s, reprotect {t_rep:.1f}s: {p['files_copied']} files "
              f"({p['bytes_copied']} bytes) copied, {p['files_restored']} restored, mode {p['mode']}")
    finally:
        w.close()


def test_no_completed_run_is_an_item_not_no_divergence(tmp_path: Path) -> None:
    w = _local_world(tmp_path)
    w.write("hot", "a", b"never replicated")
    items = fb.divergence(w.topo, w.ledger, w.acc, recovery_point=None, run_id=RUN)
    assert len(items) == 1 and items[0].detail["change"] == "unknown-base", items
    assert "no completed run" in items[0].detail["why"]
    with pytest.raises(ProblemFound):
        fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)
    (kept,) = fb.set_aside(w.topo, w.ledger, w.acc, items, run_id=RUN)
    assert kept.kept_at is not None and w.read_uri(kept.kept_at + "/a") == b"never replicated"
    w.write("cold", "b", b"active")
    assert fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)["status"] == "done"
    assert w.tree("hot") == w.tree("cold") == {"b": b"active"}


# -- random interleavings ------------------------------------------------------------------------

NAMES = [f"d{i}/f{j}" for i in range(5) for j in range(5)]
SEEDS = max(1, int(os.environ.get("DRT_FAILBACK_SEEDS", "1")))  # N times the seeds, for longer runs


def _random_ops(rnd: random.Random, w: World, which: str, model: dict[str, bytes], n: int) -> None:
    for _ in range(n):
        op = rnd.choice(["create", "modify", "delete", "rename", "same", "rename-dir"])
        have = sorted(model)
        free = [x for x in NAMES if x not in model]
        if op == "create" and free or not have:
            rel = rnd.choice(free)
            data = rnd.randbytes(rnd.randint(0, 3000))
            w.write(which, rel, data)
            model[rel] = data
        elif op == "modify":
            rel = rnd.choice(have)
            data = rnd.randbytes(rnd.randint(1, 3000))
            w.write(which, rel, data)
            model[rel] = data
        elif op == "same":  # rewritten with the very same bytes: no change of content
            rel = rnd.choice(have)
            w.write(which, rel, model[rel])
        elif op == "delete":
            rel = rnd.choice(have)
            w.delete(which, rel)
            del model[rel]
        elif op == "rename-dir":  # a whole directory moved to a name no file lives under
            full = sorted({r.split("/")[0] for r in have})
            empty = sorted({r.split("/")[0] for r in NAMES} - set(full))
            if not empty:
                continue
            a, b = rnd.choice(full), rnd.choice(empty)
            fs, root = w.side(which)
            fs.delete(fs.join(root, b), recursive=True)  # an empty directory left there: not moved into
            fs.rename(fs.join(root, a), fs.join(root, b))
            for r in [r for r in model if r.startswith(a + "/")]:
                model[b + r[len(a):]] = model.pop(r)
        else:
            a, b = rnd.choice(have), rnd.choice(NAMES)
            if a == b:
                continue
            w.rename(which, a, b)  # onto an existing name too (it is replaced)
            model[b] = model.pop(a)


def _expected_changes(base: dict[str, bytes], now: dict[str, bytes]) -> dict[str, str]:
    out = {r: "created" for r in now if r not in base}
    out.update({r: "deleted" for r in base if r not in now})
    out.update({r: "modified" for r in now if r in base and now[r] != base[r]})
    return out


def _interleaving(w: World, seed: int) -> None:
    rnd = random.Random(seed)
    hot: dict[str, bytes] = {}
    _random_ops(rnd, w, "hot", hot, 10)
    w.replicate()
    if rnd.random() < 0.7:  # a second run: the base is the last completed one
        _random_ops(rnd, w, "hot", hot, 5)
        w.replicate()
    base = dict(hot)
    cold = dict(hot)
    assert w.tree("cold") == cold
    for _ in range(12):  # writes on both sides, interleaved
        which = rnd.choice(["hot", "cold"])
        _random_ops(rnd, w, which, hot if which == "hot" else cold, 1)
    assert w.tree("hot") == hot and w.tree("cold") == cold
    items = fb.divergence(w.topo, w.ledger, w.acc, recovery_point=None, run_id=RUN)
    got = {it.detail["rel"]: it.detail["change"] for it in items}
    assert got == _expected_changes(base, hot), (seed, got)
    want_base = "snapshot id:" if w.kind == "hdfs" else "manifest "
    assert all(it.detail["base"].startswith(want_base) for it in items), (seed, [it.detail for it in items])
    kept = fb.set_aside(w.topo, w.ledger, w.acc, items, run_id=RUN)
    for it in kept:
        if it.detail["change"] != "deleted":
            assert it.kept_at and w.read_uri(it.kept_at) == hot[it.detail["rel"]], (seed, it)
    res = fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)
    assert res["status"] == "done", (seed, res)
    assert w.tree("cold") == cold and w.tree("hot") == cold, seed
    (p,) = res["policies"]
    # nothing both sides hold as of the base is copied: only paths cold changed, or hot changed
    # (those restored within the old hot when there is a common snapshot)
    cold_changed = {r for r in cold if base.get(r) != cold[r]}
    hot_changed = {r for r in cold if r in _expected_changes(base, hot)} if w.kind == "local" else set()
    might = cold_changed | hot_changed
    assert p["bytes_copied"] <= sum(len(cold[r]) for r in might), (seed, p, sorted(might))
    assert p["files_copied"] <= len(might), (seed, p, sorted(might))


@pytest.mark.parametrize("seed", range(4 * SEEDS))
def test_random_interleavings_local(tmp_path: Path, seed: int) -> None:
    w = _local_world(tmp_path)
    try:
        _interleaving(w, seed)
    finally:
        w.close()


@pytest.mark.parametrize("seed", range(2 * SEEDS))
def test_random_interleavings_hdfs(tmp_path: Path, hdfs_hot: Any, hdfs_cold: Any, hot_dir: Any, cold_dir: Any,
                                   seed: int) -> None:
    w = _hdfs_world(tmp_path, hdfs_hot, hdfs_cold, hot_dir, cold_dir)
    try:
        _interleaving(w, 100 + seed)
    finally:
        w.close()


# -- kills ---------------------------------------------------------------------------------------

CHILD = r"""
import json, os, signal, sys
from dr_toolkit.access import Access
from dr_toolkit.failback import hdfs as fb
from dr_toolkit.failback.divergence import Divergence
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology

cfg, what, run_id, k, items_path = sys.argv[1:6]
k = int(k)
topo = load_topology(cfg)
ledger, acc = Ledger.open(topo.ledger.url), Access.from_env()
n = 0

def hit():
    global n
    n += 1
    if n >= k:
        os.kill(os.getpid(), signal.SIGKILL)

if what == "set_aside":
    for cls in (LocalFileSystem, WebHdfsFileSystem):
        def rename(self, a, b, _orig=cls.rename):
            _orig(self, a, b)
            hit()
        cls.rename = rename
    items = [Divergence.from_json(d) for d in json.load(open(items_path))]
    fb.set_aside(topo, ledger, acc, items, run_id=run_id)
else:
    fb.reprotect(topo, ledger, acc, run_id=run_id,
                 progress=lambda m: hit() if ("files copied" in m or "restored" in m) else None)
print("FINISHED")
"""


def _killed(w: World, tmp_path: Path, what: str, k: int, items: list[Divergence]) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    items_path = tmp_path / "items.json"
    items_path.write_text(json.dumps([it.to_json() for it in items]))
    env = dict(os.environ, DRT_COPY_LEASE_TTL_S="2")
    cfg = w.topo.source_file
    assert cfg
    p = subprocess.run([sys.executable, str(script), cfg, what, RUN, str(k), str(items_path)], env=env,
                       cwd=str(Path(__file__).resolve().parents[2]), capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stdout[-2000:], p.stderr[-4000:])
    time.sleep(2.5)  # the killed holder's leases (2 s) expire


def _kill_scenario(w: World, tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    _base, want, changed = _scenario(w)
    for i in range(6):  # more loss-window files and active writes, so the kills land mid-way
        w.write("hot", f"h/more{i}", _bytes(f"hot{i}", 500 + i))
        changed[f"h/more{i}"] = "created"
        w.write("cold", f"c/more{i}", _bytes(f"cold{i}", 700 + i))
        want[f"c/more{i}"] = _bytes(f"cold{i}", 700 + i)
    hot_now = w.tree("hot")
    items = fb.divergence(w.topo, w.ledger, w.acc, recovery_point=None, run_id=RUN)
    _check_report(w, items, changed)
    to_keep = sum(1 for it in items if it.detail["change"] != "deleted")
    _killed(w, tmp_path, "set_aside", rnd.randint(1, to_keep - 1), items)
    kept = fb.set_aside(w.topo, w.ledger, w.acc, items, run_id=RUN)  # called again: completes
    for it in kept:
        if it.detail["change"] != "deleted":
            assert it.kept_at and w.read_uri(it.kept_at) == hot_now[it.detail["rel"]], it
    events = 3 + 10 if w.kind == "hdfs" else 10 + 3  # restores + copies (hdfs), copies (local: 13)
    _killed(w, tmp_path, "reprotect", rnd.randint(1, events - 1), items)
    res = fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)  # called again: completes
    assert res["status"] == "done", res
    assert w.tree("cold") == want and w.tree("hot") == want
    assert not w.raw_tmp("hot")
    for it in fb.set_aside(w.topo, w.ledger, w.acc, items, run_id=RUN):  # and again: kept bytes untouched
        if it.detail["change"] != "deleted":
            assert it.kept_at and w.read_uri(it.kept_at) == hot_now[it.detail["rel"]], it


@pytest.mark.parametrize("seed", range(2 * SEEDS))
def test_killed_set_aside_and_reprotect_resume_local(tmp_path: Path, seed: int) -> None:
    w = _local_world(tmp_path)
    try:
        _kill_scenario(w, tmp_path, seed)
    finally:
        w.close()


@pytest.mark.parametrize("seed", range(SEEDS))
def test_killed_set_aside_and_reprotect_resume_hdfs(tmp_path: Path, hdfs_hot: Any, hdfs_cold: Any, hot_dir: Any,
                                                    cold_dir: Any, seed: int) -> None:
    w = _hdfs_world(tmp_path, hdfs_hot, hdfs_cold, hot_dir, cold_dir)
    try:
        _kill_scenario(w, tmp_path, 7 + seed)
    finally:
        w.close()


@pytest.mark.parametrize("kind", ["hdfs", "local"])
def test_reprotect_is_refused_until_the_fence_lets_writes_into_the_old_hot(
        tmp_path: Path, zk_server: Any, kind: str, request: pytest.FixtureRequest) -> None:
    """What the runbook must do first: after a failover the old hot is fenced and read-only, and
    the re-protect's rollback (HDFS: restores from the common snapshot) and copy into it are
    refused (FencedError, nothing written into it); set_aside only moves the old hot's own files and
    is allowed. Once ``Fence.reprotect`` (epoch raised fencing nothing, the old hot's read-only flag
    removed) has run, it completes."""
    if not zk_server.running:
        zk_server.start()
    if kind == "hdfs":
        hot, cold, hd, cd = (request.getfixturevalue(n) for n in ("hdfs_hot", "hdfs_cold", "hot_dir", "cold_dir"))
        w = _hdfs_world(tmp_path, hot, cold, hd, cd, zk=zk_server.address)
    else:
        w = _local_world(tmp_path, zk=zk_server.address)
    try:
        base, want, changed = _scenario(w)
        with open_fence(w.topo, access=w.acc) as f:  # the failover, as the runbook leaves it
            st = f.bump(fenced_cluster="hot", by="test")
            f.set_read_only("hot", True, epoch=st.epoch, by="test")
            f.set_active("cold", epoch=st.epoch, by="test")
        items = fb.divergence(w.topo, w.ledger, w.acc, recovery_point=base.source_time, run_id=RUN)
        _check_report(w, items, changed)
        fb.set_aside(w.topo, w.ledger, w.acc, items, run_id=RUN)
        hot_after_aside = w.tree("hot")
        with pytest.raises(FencedError):
            fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)
        assert w.tree("hot") == hot_after_aside  # nothing written into the fenced cluster
        with open_fence(w.topo, access=w.acc) as f:
            f.reprotect(active="cold", standby="hot", by="test", run_id=RUN)
        assert fb.reprotect(w.topo, w.ledger, w.acc, run_id=RUN)["status"] == "done"
        assert w.tree("hot") == w.tree("cold") == want
    finally:
        w.close()


def test_aside_directory_is_outside_the_source_tree(tmp_path: Path) -> None:
    w = _local_world(tmp_path)
    uri = fb.aside_uri(w.topo, "wh", RUN, "x/y")
    assert uri == f"hdfs://hot/.drt-divergence/{RUN}/wh/x/y", uri
    assert posixpath.dirname(w.hot_loc.path) in parse_uri(uri, w.topo).path
    assert not parse_uri(uri, w.topo).path.startswith(w.hot_loc.path + "/")
    # a source just below the root keeps its aside at /.drt-divergence, never '//…' (WebHDFS refuses it)
    pol = w.topo.policy("wh")
    pair = fb._Pair(pol, "", parse_uri(pol.source, w.topo), parse_uri(pol.source, w.topo))
    path, _ = fb._aside_root(pair, RUN)
    assert path == f"{posixpath.dirname(w.hot_loc.path.rstrip('/'))}/.drt-divergence/{RUN}/wh".replace("//", "/")
    assert "//" not in path
