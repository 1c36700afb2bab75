"""Kill `drt distcp` (SIGKILL and SIGTERM) at random points, at least 10 times: no partial
file is ever visible under the target, the re-run completes, the target equals the source,
and temporary files are cleaned up."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fixtures_copy import make_tree, tmp_files, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("copy_state_dir")]


def _drt(*args: str) -> list[str]:
    return [sys.executable, "-m", "dr_toolkit.cli.main", *args]


def test_killed_runs_leave_no_partial_files_and_resume(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    rnd = random.Random(1234)
    files = {f"d{i % 5}/f{i:03d}.bin": rnd.randbytes(rnd.randint(50_000, 400_000)) for i in range(40)}
    make_tree(src, files)
    want = tree_digest(src)
    versions = {rel: {md5} for rel, md5 in want.items()}  # every complete version a file has had
    env = {**os.environ, "DRT_CONFIG": ""}
    env.pop("DRT_CONFIG")
    cmd = _drt("distcp", f"file://{src}", f"file://{dst}", "--update", "--delete", "--workers", "3",
               "--bandwidth-mb-s", "3", "--json")
    kills = 0
    i = 0
    while kills < 12 and i < 80:
        i += 1
        sig = signal.SIGKILL if kills % 2 == 0 else signal.SIGTERM
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
        time.sleep(rnd.uniform(0.6, 2.5))
        if proc.poll() is None:
            proc.send_signal(sig)
            kills += 1
            finished = False
        else:
            finished = True
        proc.wait(timeout=60)
        got = tree_digest(dst) if dst.exists() else {}
        # every visible file is complete and correct; partial data only ever lives in .drt-tmp.* files
        for rel, md5 in got.items():
            assert md5 in versions[rel], f"partial or wrong file visible after kill {i}: {rel}"
        if finished or i % 3 == 2:  # the source changes between attempts (and gives the next run work)
            for rel in rnd.sample(sorted(files), 8 if finished else 1):
                (src / rel).write_bytes(rnd.randbytes(rnd.randint(50_000, 400_000)))
            want = tree_digest(src)
            for rel, md5 in want.items():
                versions[rel].add(md5)
    assert kills >= 10
    r = subprocess.run(_drt("distcp", f"file://{src}", f"file://{dst}", "--update", "--delete", "--json"), env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert tree_digest(dst) == want
    assert tmp_files(dst) == []
    # the killed runs' state (manifests, run notes) lives outside the replica: the target holds
    # the source's files and nothing else
    assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file()) == sorted(want)
    # and a further run has nothing to do
    r = subprocess.run(_drt("distcp", f"file://{src}", f"file://{dst}", "--update", "--json"), env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    import json

    out = json.loads(r.stdout)
    assert out["files_copied"] == 0 and out["bytes_copied"] == 0
