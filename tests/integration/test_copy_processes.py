"""Local to local on copy processes (`copy/processes.py`): the replica
equals the source; a run killed (SIGKILL, SIGTERM) at random points leaves no partial file under a
real name and no copy process behind, SIGTERM leaves no temp file, the re-run converges; a run
whose fencing token another run takes places nothing more (beyond a file in hand per process)."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import copying, processes
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.copy.state import take_fence
from dr_toolkit.errors import ConfigError, LeaseHeld
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, tmp_files, tree_digest
from tests.support.procs import children

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def _no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_ctx: Any, tasks: list[Any], *_a: Any, **_k: Any) -> Any:
        if tasks:
            raise AssertionError("copied on threads: the process path was not taken")
        return []

    monkeypatch.setattr(copying, "run_local", refuse)


def test_a_large_local_tree_is_copied_on_processes_and_equals_the_source(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough files for processes (the default `auto`): every file (small ones through one
    buffer, large ones through the kernel) arrives equal, with permissions and times; the re-run
    copies nothing."""
    _no_threads(monkeypatch)
    rnd = random.Random(7)
    files = {f"d{i % 13}/s{i // 13}/f{i:04d}.bin": rnd.randbytes(rnd.randint(0, 20_000))
             for i in range(processes.PROCESS_MIN_FILES + 40)}
    files.update({f"big/b{i}.bin": rnd.randbytes((2 << 20) + i) for i in range(3)})
    make_tree(tmp_path / "src", files)
    for i, p in enumerate(sorted((tmp_path / "src").rglob("*.bin"))[:50]):
        p.chmod(0o640 if i % 2 else 0o600)
        os.utime(p, ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_000_000_000 + i))
    opts = CopyOptions(update=True, delete=True, preserve=["permissions", "times"])
    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts),
               access=Access.from_env())
    assert r.ok and r.files_copied == len(files), r.failures
    assert tree_digest(tmp_path / "dst") == tree_digest(tmp_path / "src")
    for p in (tmp_path / "src").rglob("*.bin"):
        s, t = p.stat(), (tmp_path / "dst" / p.relative_to(tmp_path / "src")).stat()
        assert stat.S_IMODE(t.st_mode) == stat.S_IMODE(s.st_mode), p
        assert abs(t.st_mtime_ns - s.st_mtime_ns) < 1000, p  # times travel as float seconds (sub-µs lost)
    assert tmp_files(tmp_path / "dst") == []
    again = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=opts),
                   access=Access.from_env())
    assert again.ok and again.files_copied == 0 and again.bytes_copied == 0


def _workers_of(pid: int) -> list[int]:
    """The copy processes `pid` started."""
    return children({pid}, b"dr_toolkit.copy.processes")


def _placed(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_ino for p in root.rglob("*")
            if p.is_file() and not p.name.startswith(".drt-tmp.")} if root.exists() else {}


def _gone(pids: list[int], within_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + within_s
    left = pids
    while left and time.monotonic() < deadline:
        left = [p for p in left if Path(f"/proc/{p}").exists() and "zombie" not in Path(f"/proc/{p}/status").read_text()]
        if left:
            time.sleep(0.1)
    return left


@pytest.mark.slow
def test_killed_runs_on_processes_leave_no_partial_file_and_no_process_and_resume(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    rnd = random.Random(4321)
    files = {f"d{i % 7}/f{i:04d}.bin": rnd.randbytes(rnd.randint(20_000, 300_000)) for i in range(600)}
    make_tree(src, files)
    want = tree_digest(src)
    versions = {rel: {md5} for rel, md5 in want.items()}
    env = {k: v for k, v in os.environ.items() if k != "DRT_CONFIG"}
    env["DRT_COPY_PROCESSES"] = "on"
    cmd = [sys.executable, "-m", "dr_toolkit.cli.main", "distcp", f"file://{src}", f"file://{dst}", "--update",
           "--delete", "--json"]
    kills = {signal.SIGKILL: 0, signal.SIGTERM: 0}
    i = 0
    while min(kills.values()) < 3 and i < 60:
        i += 1
        sig = signal.SIGKILL if i % 2 else signal.SIGTERM
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
        workers: list[int] = []
        while not workers and proc.poll() is None:  # the copy phase: its processes started
            workers = _workers_of(proc.pid)
            time.sleep(0.02)
        time.sleep(rnd.uniform(0.0, 0.4))  # then a random point of the copy
        killed = proc.poll() is None
        if killed:
            workers = workers or _workers_of(proc.pid)
            proc.send_signal(sig)
            kills[sig] += bool(workers)  # counted when it hit the copy phase
        proc.wait(timeout=120)
        at_death = _placed(dst)
        assert _gone(workers) == [], f"copy processes outlived the run killed by {sig!r}"
        # nothing placed once the run has ended (a copy process started just before its parent died
        # checks that its parent is still the one that started it)
        assert _placed(dst) == at_death, f"files placed after the run killed by {sig!r} had ended"
        got = tree_digest(dst) if dst.exists() else {}
        for rel, md5 in got.items():  # every visible file is complete and one version the source had
            assert md5 in versions[rel], f"partial or wrong file visible after kill {i}: {rel}"
        if killed and sig == signal.SIGTERM:
            # 143: stopped by its handler; -15 or 0: the signal came after the run, as it exited
            assert proc.returncode in (143, -15, 0), proc.stderr.read() if proc.stderr else ""
            assert tmp_files(dst) == [], "SIGTERM left temp files"
        if not killed or i % 3 == 2:  # the source changes between attempts
            for rel in rnd.sample(sorted(files), 40 if not killed else 5):
                (src / rel).write_bytes(rnd.randbytes(rnd.randint(20_000, 300_000)))
            want = tree_digest(src)
            for rel, md5 in want.items():
                versions[rel].add(md5)
    assert min(kills.values()) >= 3, kills
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert tree_digest(dst) == want and tmp_files(dst) == []
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = json.loads(r.stdout)
    assert out["files_copied"] == 0 and out["bytes_copied"] == 0


def test_a_run_on_processes_stops_when_its_token_is_taken_and_the_next_run_converges(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another owner rewrites the marker once the first group is back, and this process pauses
    there: the copy processes, fed meanwhile, find the marker before their next rename and place
    nothing more (a file already past its check, at most one
    per process, may land); the run raises LeaseHeld (exit 1); the next run converges."""
    monkeypatch.setenv("DRT_COPY_PROCESSES", "on")
    _no_threads(monkeypatch)
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, {f"f{i:04d}.bin": os.urandom(50_000) for i in range(2000)})
    loc = parse_uri(f"file://{dst}")
    state: dict[str, Any] = {}

    def take_over(kind: str, n: int) -> None:  # called in this process as each group's files come back
        if kind == "file" and "held" not in state:
            take_fence(open_fs(loc, Access.from_env()), str(dst.resolve()), "copy:other-host:0001")
            state["held"] = {p.name for p in dst.iterdir() if not p.name.startswith(".drt-tmp.")}
            time.sleep(1.0)  # this process paused (a GC, a stopped VM): the copy processes go on alone

    with pytest.raises(LeaseHeld) as e:
        distcp(CopyRequest(f"file://{src}", f"file://{dst}",
                           options=CopyOptions(update=True, delete=True, workers=2), progress=take_over),
               access=Access.from_env())
    assert e.value.exit_code == 1 and "another run took the target" in str(e.value)
    after = {p.name for p in dst.iterdir() if not p.name.startswith(".drt-tmp.")}
    assert len(after - state["held"]) <= 2 and len(after) < 2000, len(after - state["held"])
    r = distcp(CopyRequest(f"file://{src}", f"file://{dst}", options=CopyOptions(update=True, delete=True)),
               access=Access.from_env())
    assert r.ok and tree_digest(dst) == tree_digest(src)


def test_a_copy_processes_setting_that_is_not_auto_on_or_off_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRT_COPY_PROCESSES", "maybe")
    make_tree(tmp_path / "src", {"a": b"a"})
    with pytest.raises(ConfigError) as e:
        distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                           options=CopyOptions(update=True)),
               access=Access.from_env())
    assert e.value.exit_code == 2 and "DRT_COPY_PROCESSES" in str(e.value)
    assert not (tmp_path / "dst").exists()
