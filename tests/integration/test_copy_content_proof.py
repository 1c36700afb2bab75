"""Which proof of equality a run gives, and the stronger one on request (issue 39, item 5), real HDFS.

HDFS → HDFS a file is proven equal by the DataNodes' MD5-of-MD5-of-CRC32C (GETFILECHECKSUM), a
function of each 512-byte chunk's CRC32C: a target chunk rewritten in place with other bytes of the
same CRC32C (TRUNCATE + APPEND + SETTIMES keep its fileId, size and mtime) is kept by the default
proof — the documented limit, DistCp ``-update`` is fooled alike. ``--proof content`` compares the
bytes of every file kept (read on both sides) and reads every copied file back (SHA-256 against the
source bytes read); the run's JSON names the proof (``proof``, ``proof_basis``) and so does the
gate's HDFS basis.

And what equality never rests on: HDFS → HDFS the two clusters' checksums are compared like with
like (no manifest: nothing read); a local target with the same size and CRC32C is not equal, nor an
HDFS → local one (the state recorded is a SHA-256, never a CRC alone); the bytes read back are
compared with the source bytes read; an HDFS file rewritten in place keeping its fileId, size and
mtime is copied again (source) or repaired (target); and the NameNode's snapshot diff does not
report such a rewrite (the limit of snapshot mode; a listing run copies it).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from dr_toolkit.copy.api import distcp, replicate_policy
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.copy.signals import hdfs_signals
from dr_toolkit.fs import open_fs
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import CopyOptions, load_topology
from tests.integration.test_copy_random import _truncator, rewrite_in_place
from tests.support.fixtures_copy import all_bytes, drt_in, hdfs_source, make_tree, sample_tree, tmp_files
from tests.support.fixtures_failover import write_topology
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
UPD = CopyOptions(update=True, delete=True)
SNAP = CopyOptions(update=True, delete=True, snapshots=True)


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


def forge_same_crc32c(data: bytes) -> bytes:
    """Other bytes of the same length and the same CRC32C: 4 bytes changed at the start, 4 more
    chosen by linear algebra over GF(2) (CRC is affine in the message bits)."""
    import google_crc32c

    n = len(data)
    assert n >= 16
    zero = google_crc32c.value(bytes(n))

    def lin(pos: int, chunk: bytes) -> int:  # the linear part of the CRC of `chunk` placed at pos
        m = bytearray(n)
        m[pos:pos + len(chunk)] = chunk
        return google_crc32c.value(bytes(m)) ^ zero

    e1 = b"EVIL"
    want = lin(0, e1)
    p2 = n - 4
    cols = [lin(p2, (1 << j).to_bytes(4, "little")) for j in range(32)]
    # solve sum(x_j * cols[j]) = want over GF(2)
    rows = [(c, 1 << j) for j, c in enumerate(cols)]
    basis: dict[int, tuple[int, int]] = {}
    for v, comb in rows:
        for bit in range(31, -1, -1):
            if not (v >> bit) & 1:
                continue
            if bit in basis:
                v, comb = v ^ basis[bit][0], comb ^ basis[bit][1]
            else:
                basis[bit] = (v, comb)
                break
    v, comb = want, 0
    for bit in range(31, -1, -1):
        if (v >> bit) & 1:
            v, comb = v ^ basis[bit][0], comb ^ basis[bit][1]
    assert v == 0
    d = bytearray(n)
    d[0:4] = e1
    d[p2:p2 + 4] = comb.to_bytes(4, "little")
    out = bytes(a ^ b for a, b in zip(data, d, strict=True))
    assert out != data and google_crc32c.value(out) == google_crc32c.value(data)
    return out


def test_a_target_with_the_same_size_and_crc32c_is_not_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = os.urandom(5000)
    make_tree(tmp_path / "src", {"f.bin": data})
    make_tree(tmp_path / "dst", {"f.bin": forge_same_crc32c(data)})
    code, out = drt_in(tmp_path, monkeypatch, capsys, "distcp", "src", "dst", "--update", "--delete")
    assert code == 0 and out["files_copied"] == 1, out
    assert (tmp_path / "dst/f.bin").read_bytes() == data


def test_hdfs_to_local_the_recorded_state_is_a_sha256_not_a_crc(tmp_path: Path, hot_dir: Any) -> None:
    """HDFS source unchanged (its MD5MD5CRC32C as recorded), local target rewritten to bytes with
    the recorded CRC32C: the target's SHA-256 no longer matches, the file is copied again."""
    data = os.urandom(7000)
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    fs.write_bytes(hot_dir.p("/s/f.bin"), data)
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=UPD), access=Access.from_env()).ok
    (dst / "f.bin").write_bytes(forge_same_crc32c(data))
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=UPD), access=Access.from_env())
    assert r.ok and r.mode == "reconcile" and r.files_copied == 1, (r.mode_reason, r.basis)
    assert (dst / "f.bin").read_bytes() == data


@pytest.mark.parametrize("size", [3000, 3 << 20], ids=["small", "large"])
def test_local_bytes_read_back_are_compared_with_the_source_bytes_read(tmp_path: Path, size: int) -> None:
    """Another process alters the temp file between write and rename: the bytes read back differ
    from the source bytes read (compared byte for byte), the copy is retried, the target ends equal."""
    data = os.urandom(size)
    make_tree(tmp_path / "src", {"d/f.bin": data})
    hit = []

    def corrupt(kind: str, n: int) -> None:
        if kind == "bytes" and not hit:
            tmps = tmp_files(tmp_path / "dst")
            if tmps:
                p = Path(tmps[0])
                if p.stat().st_size:
                    with open(p, "r+b") as f:
                        f.write(b"\0" * 8)
                    hit.append(p)

    r = distcp(CopyRequest(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", options=UPD, progress=corrupt),
               access=Access.from_env())
    assert hit and r.ok, r.failures
    assert (tmp_path / "dst/d/f.bin").read_bytes() == data
    assert hashlib.sha256((tmp_path / "dst/d/f.bin").read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


def _rewrite_in_place(d: Any, rel: str, data: bytes) -> None:
    """TRUNCATE to 0, APPEND other bytes of the same length, SETTIMES back: same fileId, size, mtime."""
    import requests

    st = d.stat(rel)
    url = f"{d.active_url}/webhdfs/v1{d.p(rel)}"
    r = requests.post(url, params={"op": "TRUNCATE", "newlength": 0, "user.name": "hdfs"}, timeout=30)
    assert r.status_code == 200 and r.json() == {"boolean": True}, r.text
    d.append(rel, data)
    d.cluster.set_times(d.p(rel), st["modificationTime"])
    after = d.stat(rel)
    assert (after["fileId"], after["length"], after["modificationTime"]) == \
        (st["fileId"], st["length"], st["modificationTime"])


def test_an_hdfs_source_rewritten_in_place_keeping_its_fileid_is_copied_again(tmp_path: Path, hot_dir: Any) -> None:
    fs = open_fs(hot_dir.location("/s"), Access.from_env())
    fs.write_bytes(hot_dir.p("/s/f.bin"), b"A" * 5000)
    fs.write_bytes(hot_dir.p("/s/g.bin"), b"untouched")
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=UPD), access=Access.from_env()).ok
    _rewrite_in_place(hot_dir, "/s/f.bin", b"B" * 5000)
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=UPD), access=Access.from_env())
    assert r.ok and r.mode == "fast-forward" and r.files_copied == 1, (r.mode_reason, r.basis)
    assert all_bytes(dst) == hot_dir.tree("/s") == {"f.bin": b"B" * 5000, "g.bin": b"untouched"}


def test_an_hdfs_target_rewritten_in_place_keeping_its_fileid_is_repaired(tmp_path: Path, cold_dir: Any) -> None:
    make_tree(tmp_path / "src", {"f.bin": b"A" * 5000, "g.bin": b"untouched"})
    uri = cold_dir.uri("/dst")
    assert distcp(CopyRequest(f"file://{tmp_path}/src", uri, options=UPD), access=Access.from_env()).ok
    r = distcp(CopyRequest(f"file://{tmp_path}/src", uri, options=UPD), access=Access.from_env())
    assert r.ok and r.mode == "fast-forward" and r.files_copied == 0, r.mode_reason
    _rewrite_in_place(cold_dir, "/dst/f.bin", b"B" * 5000)
    r = distcp(CopyRequest(f"file://{tmp_path}/src", uri, options=UPD), access=Access.from_env())
    assert r.ok and r.mode == "reconcile" and "rewritten in place" in r.mode_reason and r.files_copied == 1, \
        r.mode_reason
    assert cold_dir.tree("/dst") == {"f.bin": b"A" * 5000, "g.bin": b"untouched"}


def test_the_namenodes_snapshot_diff_does_not_report_an_in_place_rewrite(tmp_path: Path, hot_dir: Any) -> None:
    """The limit of snapshot mode, stated on the real NameNode (found by the randomized test):
    TRUNCATE + APPEND + SETTIMES that put size and mtime back leave GETSNAPSHOTDIFF empty, so a
    snapshot fast-forward keeps the file; a listing run (snapshots off) copies it."""
    import requests

    hdfs_source(hot_dir, {"f.bin": b"A" * 5000, "g.bin": b"untouched"})
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env()).ok

    def blocks() -> list[tuple[int, int, int]]:  # the NameNode's LocatedBlocks: (block id, generation stamp, bytes)
        r = requests.get(f"{hot_dir.active_url}/webhdfs/v1{hot_dir.p('/s/f.bin')}",
                         params={"op": "GET_BLOCK_LOCATIONS", "offset": 0, "length": 1 << 30, "user.name": "hdfs"},
                         timeout=30)
        return [(b["block"]["blockId"], b["block"]["generationStamp"], b["block"]["numBytes"])
                for b in r.json()["LocatedBlocks"]["locatedBlocks"]]

    before = blocks()
    _rewrite_in_place(hot_dir, "/s/f.bin", b"B" * 5000)
    # what docs/design.md says of a cheaper content token: the block list changes though fileId,
    # size and mtime do not (one NameNode call per file: O(files), not usable by an O(changes) run)
    assert blocks() != before
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=SNAP), access=Access.from_env())
    assert r.ok and "(0 entries)" in r.mode_reason and r.files_copied == 0, (r.mode_reason, r.basis)
    r = distcp(CopyRequest(hot_dir.uri("/s"), f"file://{dst}", options=UPD), access=Access.from_env())  # the listing mode: the checksum differs
    assert r.ok and r.files_copied == 1 and all_bytes(dst) == hot_dir.tree("/s"), (r.mode_reason, r.basis)


def test_hdfs_to_hdfs_compares_the_clusters_checksums_like_with_like(hot_dir: Any, cold_dir: Any) -> None:
    fs = open_fs(hot_dir.location("/d"), Access.from_env())
    for rel, data in sample_tree(4).items():
        fs.write_bytes(hot_dir.p(f"/d/{rel}"), data)
    r = distcp(CopyRequest(hot_dir.uri("/d"), cold_dir.uri("/d"), options=UPD), access=Access.from_env())
    assert r.ok and r.files_copied == 4
    assert any("MD5-of-" in k and "= source" in k for k in r.verified), r.verified
    assert cold_dir.tree("/d") == hot_dir.tree("/d")
    # no manifest (lost state): the two clusters' MD5MD5CRC32C are compared, nothing is read
    for m in Path(r.state_location.removeprefix("file://")).rglob("*.jsonl.gz"):
        m.unlink()
    r2 = distcp(CopyRequest(hot_dir.uri("/d"), cold_dir.uri("/d"), options=UPD), access=Access.from_env())
    assert r2.files_copied == 0 and r2.files_read_for_planning == 0
    assert list(r2.basis) == [k for k in r2.basis if k.startswith("MD5-of-")] and sum(r2.basis.values()) == 4
