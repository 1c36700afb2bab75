"""`drt kafka …` / `drt failover …` run in a forked child (dr_toolkit/cli/guard.py): a native
client that aborts ends the command with one line and exit 3; exit codes and signals pass through.
Each case runs the guard in its own interpreter (the guard forks the process it runs in)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dr_toolkit.cli.guard import command_of, wanted

REPO = Path(__file__).resolve().parents[2]


def _guarded(body: str, tmp_path: Path) -> subprocess.Popen[str]:
    code = ("import os, signal, sys, time\n"
            "from dr_toolkit.cli.guard import run_guarded\n"
            f"def run(args):\n{body}\n"
            "sys.exit(run_guarded(run, ['kafka', 'lag']))\n")
    return subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))


def _wait_for(path: Path) -> str:
    deadline = time.monotonic() + 60
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return path.read_text()


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        st = Path(f"/proc/{pid}/stat")
        if st.exists() and st.read_text().split(") ")[-1].startswith("Z"):
            return True  # a zombie: dead, waiting for its reaper
        time.sleep(0.05)
    return False


def test_a_native_abort_is_one_line_and_exit_3(tmp_path: Path) -> None:
    p = _guarded("    sys.stderr.write('*** rdkafka_x.c:1: assert: gone ***\\n'); sys.stderr.flush(); os.abort()",
                 tmp_path)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 3, (p.returncode, err)
    lines = err.splitlines()
    assert lines[-1].startswith("drt: error: the command's native client library crashed (SIGABRT)"), err
    assert "Fatal Python error" not in err.splitlines()[-1]


@pytest.mark.parametrize("code", [0, 1, 2, 3])
def test_exit_codes_pass_through(tmp_path: Path, code: int) -> None:
    p = _guarded(f"    print('out'); return {code}", tmp_path)
    out, err = p.communicate(timeout=120)
    assert (p.returncode, out, err) == (code, "out\n", "")


@pytest.mark.parametrize("sig,expected", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 130)])
def test_a_signal_sent_to_the_command_reaches_the_child_once(tmp_path: Path, sig: int, expected: int) -> None:
    marker = tmp_path / "child.pid"
    body = (f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
            "    try:\n"
            "        time.sleep(120)\n"
            "    except KeyboardInterrupt:\n"
            "        print('interrupted once'); return 130\n"
            "    return 0")
    p = _guarded(body, tmp_path)
    child = int(_wait_for(marker))
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == expected, (p.returncode, out, err)
    assert _gone(child)
    if sig == signal.SIGINT:
        assert out == "interrupted once\n"


def test_the_child_dies_with_a_killed_parent(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    p = _guarded(f"    open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(120); return 0", tmp_path)
    child = int(_wait_for(marker))
    p.kill()
    p.wait(timeout=120)  # not communicate(): a surviving child would hold the pipes open
    assert _gone(child), "the command's child outlived its killed parent"


def test_only_the_native_client_commands_are_guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRT_NATIVE_GUARD", raising=False)
    assert command_of(["--config", "x.yaml", "--json", "kafka", "lag"]) == "kafka"
    assert command_of(["-c", "failover", "status"]) == "status"
    assert wanted(["--json", "failover", "check"]) and wanted(["kafka", "remap"])
    assert not wanted(["distcp", "a", "b"]) and not wanted(["status"]) and not wanted(["--help"])
    monkeypatch.setenv("DRT_NATIVE_GUARD", "0")
    assert not wanted(["failover", "check"])


def test_a_reader_given_up_on_does_not_hold_the_finished_command_open(tmp_path: Path) -> None:
    """`drt failover check --timeout 2` with the brokers down: the verdict is out at its timeout,
    but a pool's thread still waiting on a broker was joined at exit (the interpreter joins pool
    threads, daemon or not) — 11 s. entry()'s exit leaves such threads; what the process registered
    to run at exit (a private ticket cache's removal) still runs, and the output is all there."""
    marker = tmp_path / "atexit-ran"
    code = ("import atexit, concurrent.futures as cf, sys, threading\n"
            "from dr_toolkit.cli.main import leave\n"
            f"atexit.register(lambda: open({str(marker)!r}, 'w').write('yes'))\n"
            "never = threading.Event()\n"
            "pool = cf.ThreadPoolExecutor(1)\n"
            "pool.submit(never.wait)\n"  # a reader that never answers, on a pool's thread
            "daemon = threading.Thread(target=lambda: pool.submit(never.wait), daemon=True)\n"
            "daemon.start(); daemon.join()\n"
            "print('verdict', flush=False)\n"
            "leave(1)\n")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        out, err = p.communicate(timeout=120)  # without the early exit: never (the pool's join waits forever)
    finally:
        p.kill()
    assert (p.returncode, out, err) == (1, "verdict\n", "")
    assert marker.read_text() == "yes"
