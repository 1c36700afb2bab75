"""`drt status` after a copy stopped half-way (issue 43 #10) says what is known — the files the
run planned, that how many it placed before the stop is not recorded, and that those are whole
and kept — instead of "interrupted … 0 files". A real `drt distcp` process on local trees, stopped
by SIGTERM once some files are in place.

(The copy records its counters only when every file is back — ``copy.copying.execute`` accounts the
outcomes after the workers return — so a stopped run's row holds files_total and zeros; that is
the copy engine's to change, and then the line says "N of M planned files placed".)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def drt_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "dr_toolkit.cli.main", *args]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL", "COLUMNS")}


def test_status_of_an_interrupted_copy_says_what_was_planned_not_zero_files(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for i in range(40):
        (tmp_path / "src" / f"f{i:02d}").write_bytes(os.urandom(200_000))
    (tmp_path / "drt.yaml").write_text("version: 1\nclusters:\n  a: {role: hot, local_root: a}\n"
                                       "  b: {role: cold, local_root: b}\nledger: {url: 'sqlite:///l.db'}\n")
    # 8 MB at 0.5 MB/s: the run is stopped once a few files are in place
    proc = subprocess.Popen(drt_argv("distcp", "--bandwidth-mb-s", "0.5", "-m", "2", "src", "dst"), cwd=tmp_path,
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    placed: list[Path] = []
    deadline = time.monotonic() + 240  # a bound on the wait, not a measurement
    while len(placed) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
        placed = [p for p in (tmp_path / "dst").glob("f*")] if (tmp_path / "dst").is_dir() else []
    assert proc.poll() is None, ("the copy ended before it could be stopped", proc.communicate())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    n = len(list((tmp_path / "dst").glob("f*")))
    assert 3 <= n < 40

    r = subprocess.run(drt_argv("status"), cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("interrupted"))
    assert not re.search(r"(?<![\d,])0 files", line), line
    assert "40 files planned, how many were placed before the stop is not recorded" in line, line
    assert "each file placed is whole and stays" in line and "stopped 20" in line, line

    r = subprocess.run(drt_argv("--json", "status"), cwd=tmp_path, env=env(), capture_output=True, text=True,
                       timeout=120)
    (row,) = json.loads(r.stdout)["replication"]
    assert (row["status"], row["files_total"]) == ("interrupted", 40), row
