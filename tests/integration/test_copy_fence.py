"""Issue 21, "one writer per real target location, re-checked with a fencing token before every
destructive step": the run's token lives on the target itself (``<root>/.drt-tmp.fence``,
:class:`dr_toolkit.copy.state.Fence`), so it fences runs that do not share a ledger or a lock file
(and Spark executors: ``tests/integration/test_spark_cluster.py``). A run whose target another
run took places no further file and exits 1 — on the real HDFS (the marker's fileId) and on a
local tree (its inode and ctime).

The target's lease, the first line of that rule: distcp takes it (keyed by the real location the
URI names), runs through aliases of one target (a symlink, a topology's cluster root) exclude each
other, and a run paused past its lease's TTL stops without writing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.copy.state import FENCE_NAME, take_fence
from dr_toolkit.errors import LeaseHeld
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import CopyOptions, load_topology
from tests.support.fixtures_copy import make_tree, tmp_files, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
UPD = CopyOptions(update=True, delete=True)
DRT = [sys.executable, "-m", "dr_toolkit.cli.main"]


def _env(state: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    e["DRT_STATE_DIR"] = str(state)  # each run its own state location (and so its own lock file)
    return e


def test_a_paused_run_whose_hdfs_target_another_run_took_places_no_further_file(tmp_path: Path,
                                                                                 cold_dir: Any) -> None:
    """A (local engine, slow) is SIGSTOPped mid-copy; B, a run with another state location (a
    second host, or one with and one without a topology: no shared ledger, no shared lock), copies
    the whole tree into the same WebHDFS directory and ends 0. A, resumed, finds the fencing
    marker rewritten (a new fileId): it places no further file and exits 1 in one line."""
    src = tmp_path / "src"
    make_tree(src, {f"f{i:02d}.bin": os.urandom(150_000) for i in range(12)})
    dst = cold_dir.uri("/dst")
    client = cold_dir.cluster.client()

    def listing() -> dict[str, tuple[int, int]]:
        return {n: (s["fileId"], s["modificationTime"]) for n, s in client.list(cold_dir.p("/dst"), status=True)}

    a = subprocess.Popen([*DRT, "distcp", f"file://{src}", dst, "--update", "--delete", "--bandwidth-mb-s", "0.3",
                          "--workers", "1"], env=_env(tmp_path / "state-a"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        def copying() -> bool:  # A holds its marker and writes a file's temp copy
            names = client.list(cold_dir.p("/dst")) if client.status(cold_dir.p("/dst"), strict=False) else []
            return FENCE_NAME in names and any(n.startswith(".drt-tmp.") and n != FENCE_NAME for n in names)

        deadline = time.time() + 90
        while time.time() < deadline and not copying():
            time.sleep(0.05)
        a.send_signal(signal.SIGSTOP)
        assert a.poll() is None, "A ended before it could be paused"
        b = subprocess.run([*DRT, "distcp", f"file://{src}", dst, "--update", "--delete"], env=_env(tmp_path / "state-b"),
                           capture_output=True, text=True, timeout=180)
        assert b.returncode == 0, b.stderr[-2000:]
        held = listing()
        assert FENCE_NAME not in held and len(held) == 12  # B removed its marker when it ended
        a.send_signal(signal.SIGCONT)
        _out, err = a.communicate(timeout=180)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert a.returncode == 1, err[-2000:]
    assert "another run took the target" in err and "Traceback" not in err, err[-2000:]
    assert listing() == held  # nothing placed, replaced or left behind by A after B took the target
    assert cold_dir.tree("/dst") == {p.name: p.read_bytes() for p in src.iterdir()}


def test_a_local_run_stops_when_its_token_is_taken_and_the_next_run_converges(tmp_path: Path) -> None:
    """Local engine, local target: once another owner rewrites the marker mid-run (what a run on
    another host does first, once the lease is its own), the run places nothing more and raises
    LeaseHeld (exit 1); no manifest is written; the next run converges and leaves no marker."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, {f"f{i:02d}.bin": os.urandom(100_000) for i in range(10)})
    opts = CopyOptions(update=True, delete=True, workers=1, bandwidth_mb_s=0.5)
    loc = parse_uri(f"file://{dst}")
    state: dict[str, Any] = {}

    def take_over(kind: str, n: int) -> None:  # called by the copying thread as bytes are streamed
        state["events"] = state.get("events", 0) + (kind == "bytes")
        if state["events"] == 4 and "held" not in state:
            take_fence(open_fs(loc, Access.from_env()), str(dst.resolve()), "copy:other-host:0001")
            state["held"] = {p.name: p.stat().st_ino for p in dst.iterdir() if not p.name.startswith(".drt-tmp.")}

    with pytest.raises(LeaseHeld) as e:
        distcp(CopyRequest(f"file://{src}", f"file://{dst}", options=opts, progress=take_over),
               access=Access.from_env())
    assert e.value.exit_code == 1 and "another run took the target" in str(e.value)
    after = {p.name: p.stat().st_ino for p in dst.iterdir() if not p.name.startswith(".drt-tmp.")}
    assert after == state["held"] and 0 < len(after) < 10  # nothing placed after the token was taken
    assert (dst / FENCE_NAME).read_text().split()[:2] == ["2", "copy:other-host:0001"]  # not removed: not ours
    r = distcp(CopyRequest(f"file://{src}", f"file://{dst}", options=CopyOptions(update=True, delete=True)),
               access=Access.from_env())
    assert r.ok and r.files_copied == 10 - len(after)
    assert tree_digest(dst) == tree_digest(src) and not (dst / FENCE_NAME).exists()


def _topology_file(tmp_path: Path, cold_root: Path) -> Path:
    import yaml

    cfg = tmp_path / "drt.yaml"
    cfg.write_text(yaml.safe_dump({"version": 1, "clusters": {
        "hot": {"role": "hot", "local_root": str(tmp_path / "hot")},
        "cold": {"role": "cold", "local_root": str(cold_root)}},
        "ledger": {"url": f"sqlite:///{tmp_path}/ledger.db"}}))
    return cfg


def test_runs_through_aliases_of_one_target_exclude_each_other(tmp_path: Path) -> None:
    """While a run writes dst, runs into the same real directory are refused: through a symlink
    alias, and through a topology (with a ledger) whose cluster root maps onto it."""
    from dr_toolkit.errors import LeaseHeld
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import load_topology

    make_tree(tmp_path / "src", {"a": b"a", "b/c": b"c"})
    make_tree(tmp_path / "hot/data", {"other": b"other source"})
    (tmp_path / "dst").mkdir()
    os.symlink(tmp_path / "dst", tmp_path / "alias")
    topo = load_topology(_topology_file(tmp_path, tmp_path))
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
    refused: list[str] = []

    def meanwhile(kind: str, n: int) -> None:
        if kind != "plan" or refused:
            return
        with pytest.raises(LeaseHeld) as e1:
            distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/alias", options=UPD),
                   access=Access.from_env())
        with pytest.raises(LeaseHeld) as e2:
            distcp(CopyRequest("hdfs://hot/data", "hdfs://cold/dst", options=UPD),
                   topology=topo, ledger=ledger, access=Access.from_env())
        refused.extend([str(e1.value), str(e2.value)])

    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD,
                           progress=meanwhile),
               access=Access.from_env())
    assert r.ok and len(refused) == 2, refused
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    # and with the ledger holding the lease: the plain-path run through the alias is refused too
    with_ledger: list[str] = []

    def meanwhile2(kind: str, n: int) -> None:
        if kind == "plan" and not with_ledger:
            with pytest.raises(LeaseHeld) as e:
                distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/alias", options=UPD),
                       access=Access.from_env())
            with_ledger.append(str(e.value))

    assert distcp(CopyRequest("hdfs://hot/data", "hdfs://cold/dst", options=UPD, progress=meanwhile2),
                  topology=topo, ledger=ledger, access=Access.from_env()).ok and with_ledger


def test_a_run_paused_past_its_lease_stops_without_writing(tmp_path: Path) -> None:
    """A (a subprocess, bandwidth-limited) is SIGSTOPped mid-copy past its lease's TTL; B takes the
    lease and completes; A, resumed, must stop (exit 1, one line) without renaming anything into
    place or recording a manifest."""
    import signal
    import subprocess
    import sys
    import time

    from dr_toolkit.ledger import Ledger

    cfg = _topology_file(tmp_path, tmp_path / "cold")
    make_tree(tmp_path / "hot/data", {f"f{i}.bin": os.urandom(200_000) for i in range(8)})
    env = {**os.environ, "DRT_CONFIG": str(cfg), "DRT_COPY_LEASE_TTL_S": "2"}
    a = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "distcp", "hdfs://hot/data",
                          "hdfs://cold/data", "--update", "--delete", "--bandwidth-mb-s", "0.3", "--workers", "1"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not tmp_files(tmp_path / "cold/data"):
            time.sleep(0.05)
        assert tmp_files(tmp_path / "cold/data"), "A never started copying"
        a.send_signal(signal.SIGSTOP)
        time.sleep(3)  # past A's TTL (2 s): not an assertion on timing, a pause longer than the lease
        ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
        lease = ledger.lease_holder(f"copy-target:file://{(tmp_path / 'cold/data').resolve()}")
        assert lease is None  # A's lease ran out while it was stopped
        held = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (tmp_path / "cold/data").glob("f*.bin")}
        # another holder takes the lease now (a run on another host: A's flock does not reach it)
        with ledger.lease(f"copy-target:file://{(tmp_path / 'cold/data').resolve()}", ttl_s=60):
            a.send_signal(signal.SIGCONT)
            _out, err = a.communicate(timeout=120)
            after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (tmp_path / "cold/data").glob("f*.bin")}
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 1 and "lost the lease" in err and "Traceback" not in err, err
    assert after == held  # nothing renamed into place after the lease was lost
    assert [(r["status"], r["manifest_id"]) for r in ledger.runs()] == [("interrupted", None)]


def test_distcp_takes_the_targets_lease(tmp_path: Path) -> None:
    cfg = _topology_file(tmp_path, tmp_path / "cold")
    make_tree(tmp_path / "hot/data", {"a": b"a"})
    topo = load_topology(cfg)
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
    # the lease is keyed by the real location the URI names (here cold's local_root), not the URI string
    with ledger.lease(f"copy-target:file://{(tmp_path / 'cold/data').resolve()}"), pytest.raises(LeaseHeld):
        distcp(CopyRequest("hdfs://hot/data", "hdfs://cold/data", options=UPD),
               topology=topo, ledger=ledger, access=Access.from_env())
    assert not (tmp_path / "cold/data/a").exists()
    assert distcp(CopyRequest("hdfs://hot/data", "hdfs://cold/data", options=UPD),
                  topology=topo, ledger=ledger, access=Access.from_env()).ok
