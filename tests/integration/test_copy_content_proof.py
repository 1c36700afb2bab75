"""Which proof of equality a run gives, and the stronger one on request (issue 39, item 5), real HDFS.

HDFS → HDFS a file is proven equal by the DataNodes' MD5-of-MD5-of-CRC32C (GETFILECHECKSUM), a
function of each 512-byte chunk's CRC32C: a target chunk rewritten in place with other bytes of the
same CRC32C (TRUNCATE + APPEND + SETTIMES keep its fileId, size and mtime) is kept by the default
proof — the documented limit, DistCp ``-update`` is fooled alike. ``--proof content`` compares the
bytes of every file kept (read on both sides) and reads every copied file back (SHA-256 against the
source bytes read); the run's JSON names the proof (``proof``, ``proof_basis``) and so does the
gate's HDFS basis.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from dr_toolkit.copy.api import replicate_policy
from dr_toolkit.copy.signals import hdfs_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.integration.test_copy_random import _truncator, rewrite_in_place
from tests.integration.test_copy_round2 import forge_same_crc32c
from tests.support.fixtures_failover import write_topology
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def _drt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    code = main(["--json", "distcp", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


def _same_crc_chunk(data: bytes, chunk: int) -> bytes:
    """``data`` with its 512-byte chunk ``chunk`` replaced by other bytes of the same CRC32C."""
    a, b = chunk * 512, (chunk + 1) * 512
    return data[:a] + forge_same_crc32c(data[a:b]) + data[b:]


def test_a_target_chunk_with_the_same_crc_is_kept_by_checksum_and_caught_by_content(
        hot_dir: HdfsDir, cold_dir: HdfsDir, capsys: pytest.CaptureFixture[str]) -> None:
    data = os.urandom(5000)
    hot_dir.write("/src/f.bin", data)
    code, out, err = _drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update")
    assert code == 0 and out["files_copied"] == 1, err
    assert out["proof"] == "checksum" and "MD5-of-MD5-of-CRC32C" in out["proof_basis"], out["proof_basis"]
    # cold's chunk 2 rewritten in place with other bytes of the same CRC32C: fileId, size, mtime kept
    forged = _same_crc_chunk(data, 2)
    fs = cold_dir.fs()
    path = cold_dir.p("/dst/f.bin")
    before = fs.checksum(path)
    rewrite_in_place(fs, path, _truncator(cold_dir), forged)
    assert cold_dir.read("/dst/f.bin") == forged and fs.checksum(path) == before  # the DataNodes cannot tell
    # the default proof keeps it (the documented limit), and says which proof it gave
    code, out, err = _drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update")
    assert code == 0 and out["files_copied"] == 0 and out["proof"] == "checksum", err
    assert cold_dir.read("/dst/f.bin") == forged
    # --proof content: the bytes are compared, the file is copied again and read back
    code, out, err = _drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update", "--proof", "content")
    assert code == 0 and out["proof"] == "content" and out["files_copied"] == 1, (err, out["mode_reason"])
    assert out["mode"] == "reconcile" and "--proof content" in out["mode_reason"]
    assert "read back" in out["proof_basis"] and "byte for byte" in out["proof_basis"]
    assert any("read back" in k for k in out["verified"]), out["verified"]
    assert cold_dir.read("/dst/f.bin") == data
    # and again: every file kept is compared by its bytes (nothing copied, nothing trusted)
    code, out, err = _drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update", "--proof", "content")
    assert code == 0 and out["files_copied"] == 0, err
    assert list(out["basis"]) == ["content (read on both sides, compared byte for byte)"], out["basis"]
    # a proof that is not one: one line, exit 2
    code, out, err = _drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update", "--proof", "md5")
    assert code == 2 and len(err.strip().splitlines()) == 1, err


def test_the_gate_names_the_proof_of_the_run_it_rests_on(tmp_path: Path, hot_dir: HdfsDir,
                                                          cold_dir: HdfsDir) -> None:
    hot_dir.write("/data/a", b"a" * 700)
    cold_dir.mkdir("/data")

    def signal(proof: str) -> Any:
        path = write_topology(
            tmp_path / proof, zk=None,
            hdfs=[{"name": "wh", "source": f"hdfs://hot{hot_dir.p('/data')}",
                   "targets": [f"hdfs://cold{cold_dir.p('/data')}"], "options": {"proof": proof}}],
            hot_extra={"hdfs": {"namenodes": hot_dir.urls, "user": "hdfs"}},
            cold_extra={"hdfs": {"namenodes": cold_dir.urls, "user": "hdfs"}})
        topo = load_topology(path)
        ledger = Ledger.open(topo.ledger.url)
        (r,) = replicate_policy(topo, "wh", ledger, access=Access.from_env())
        assert r.ok and r.proof == proof
        (sig,) = hdfs_signals(topo, ledger, Access.from_env(), time.time())
        return sig

    (tmp_path / "checksum").mkdir()
    (tmp_path / "content").mkdir()
    sig = signal("checksum")
    assert sig.caught_up and "proof checksum: the DataNodes' MD5-of-MD5-of-CRC32C" in sig.basis, sig.basis
    sig = signal("content")
    assert sig.caught_up and "proof content: every file kept read on both sides" in sig.basis, sig.basis
