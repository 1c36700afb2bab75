"""The cold HDFS killed (SIGKILL: NameNode and DataNode at once) under a replication, then
restarted on the same ports with its data: the run fails cleanly (exit 3, no partial file
visible), what was replicated before the crash is still there, and the next run converges.
The one HDFS test that starts a JVM of its own (the restart)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.errors import DrtError
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import sample_tree
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_target_namenode_killed_mid_run_then_restarted_converges(hot_dir: HdfsDir, cold_dir: HdfsDir,
                                                                  tmp_path: Path) -> None:
    files = sample_tree(12, size=20_000)
    for rel, data in files.items():
        hot_dir.write(f"/src/{rel}", data)
    opts = CopyOptions(update=True, delete=True, workers=2)
    r1 = distcp(CopyRequest(hot_dir.uri("/src"), cold_dir.uri("/dst"), options=opts),
                access=Access.from_env())
    assert r1.ok and r1.files_copied == 12
    hot_dir.write("/src/late.bin", b"late" * 5000)
    hot_dir.append("/src/a/f001.bin", b"tail")
    files["late.bin"] = b"late" * 5000
    files["a/f001.bin"] += b"tail"

    cold = cold_dir.cluster
    seen = [0]

    def crash(kind: str, n: int) -> None:
        if kind == "bytes":
            seen[0] += n
            if seen[0] > 0 and cold.running:
                cold.kill()  # the whole cold cluster dies under the run

    try:
        r2 = distcp(CopyRequest(hot_dir.uri("/src"), cold_dir.uri("/dst"), options=opts, progress=crash),
                    access=Access.from_env())
        failed, how = not r2.ok, f"result ok={r2.ok} failures={r2.failures}"
    except DrtError as exc:  # the target unreachable: exit 3
        failed, how = True, f"{type(exc).__name__} exit {exc.exit_code}: {exc}"
    assert failed, how
    assert not cold.running
    cold.start()  # same ports, same data directory
    # what the first run replicated survived the crash; no temporary file is visible as data
    held = cold_dir.tree("/dst")
    assert held.keys() >= {k for k in files if k not in ("late.bin",)} - {"a/f001.bin"}
    assert all(held[k] == files[k] for k in held if k not in ("a/f001.bin", "late.bin"))
    r3 = distcp(CopyRequest(hot_dir.uri("/src"), cold_dir.uri("/dst"), options=opts),
                access=Access.from_env())
    assert r3.ok and r3.files_failed == 0, r3.failures
    got = cold_dir.tree("/dst")
    assert {k: hashlib.md5(v).hexdigest() for k, v in got.items()} == {
        k: hashlib.md5(v).hexdigest() for k, v in files.items()}
