"""A source truncated while the copy runs (issue 39, item 3), on a real HDFS.

What the real NameNode does: ``TRUNCATE`` to a length inside a block drops every block past it at
once and leaves the file *under construction* while a DataNode recovers the block that is cut; until
then GETFILESTATUS reports the **old** end of that block (3 MiB file, 1 MiB blocks, truncated to
1,234,567: the NameNode says 2,097,152) and OPEN serves the old bytes up to there — a state the
file never had. Recovery is started by the DataNode's next heartbeat; this test's own cluster has
its DataNode heartbeat once every 10 minutes, so the recovery is still pending for the whole test
(deterministic: no race with the copy). GET_BLOCK_LOCATIONS and GETFILESTATUS answer exactly as
for a file a writer holds open (test_hdfs_open_files.py: a writer's open file is reported
pending, not placed), so nothing over WebHDFS tells the two apart: a file
under construction whose bytes were read live is never placed; it is reported open (pending) and
the target keeps the version it held.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.topology import CopyOptions
from drt_servers.hdfs import HdfsCluster

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

MIB = 1 << 20
OLD = bytes(range(251)) * (3 * MIB // 251) + bytes(3 * MIB % 251)  # 3 MiB, three 1 MiB blocks
NEW_LEN = 1_234_567


@pytest.fixture(scope="module")
def slow_recovery(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HdfsCluster]:
    """A real HDFS whose DataNode heartbeats every 600 s: block recovery (which the NameNode hands
    out in heartbeat replies) does not start while a test runs."""
    c = HdfsCluster("hdfs-slow-recovery", tmp_path_factory.mktemp("hdfs-slow-recovery"),
                    conf={"dfs.heartbeat.interval": "600"}).start()
    yield c
    c.kill()


def _truncate(c: HdfsCluster, path: str, length: int) -> bool:
    r = requests.post(f"{c.webhdfs_url}/webhdfs/v1{path}",
                      params={"op": "TRUNCATE", "newlength": str(length), "user.name": "hdfs"}, timeout=30)
    assert r.status_code == 200, r.text
    return bool(r.json()["boolean"])


def _blocks(c: HdfsCluster, path: str) -> dict[str, Any]:
    r = requests.get(f"{c.webhdfs_url}/webhdfs/v1{path}",
                     params={"op": "GET_BLOCK_LOCATIONS", "offset": "0", "length": "1", "user.name": "hdfs"}, timeout=30)
    return r.json()["LocatedBlocks"]  # type: ignore[no-any-return]


def _drt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    capsys.readouterr()
    code = main(["--json", "distcp", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize("target", ["hdfs", "local"])
def test_a_file_truncated_while_its_block_is_recovered_is_never_placed_torn(
        slow_recovery: HdfsCluster, tmp_path: Path, target: str, capsys: pytest.CaptureFixture[str]) -> None:
    c = slow_recovery
    base = f"/t/{target}"
    c.write(f"{base}/src/big.bin", OLD, block_size=MIB)
    c.write(f"{base}/src/small.txt", b"small")
    dst = c.uri(f"{base}/dst") if target == "hdfs" else str(tmp_path / "dst")
    code, out, err = _drt(capsys, c.uri(f"{base}/src"), dst, "--update")
    assert code == 0 and out is not None and out["files_copied"] == 2, err

    def held() -> bytes:
        return c.read(f"{base}/dst/big.bin") if target == "hdfs" else (tmp_path / "dst" / "big.bin").read_bytes()

    assert held() == OLD
    # TRUNCATE inside the second block: the third is dropped, the second waits for recovery
    assert _truncate(c, f"{base}/src/big.bin", NEW_LEN) is False  # False: block recovery pending
    st = c.stat(f"{base}/src/big.bin")
    assert st is not None and st["length"] == 2 * MIB  # neither the old length nor the new one
    lb = _blocks(c, f"{base}/src/big.bin")
    assert lb["isUnderConstruction"] and not lb["isLastBlockComplete"]  # as for a file open for write
    assert len(c.read(f"{base}/src/big.bin")) == 2 * MIB  # what a reader gets now
    # the copy: the 2 MiB state was never a version of the file; the target keeps the old version
    # and the file is reported open (pending), never counted as copied
    code, out, err = _drt(capsys, c.uri(f"{base}/src"), dst, "--update")
    assert out is not None, err
    data = held()
    assert len(data) != 2 * MIB, "the copy placed bytes no version of the source ever held"
    assert data == OLD
    assert out["files_open"] == 1 and out["files_copied"] == 0 and out["files_failed"] == 0, out
    assert code == 0, err
    opened = out["open_files"][0]
    assert opened["path"] == "big.bin" and opened["copied_bytes"] == 0 and opened["placed"] is False
    assert "not copied" in opened["reason"]
    # a first copy into an empty target: the file is not placed at all
    fresh = c.uri(f"{base}/fresh") if target == "hdfs" else str(tmp_path / "fresh")
    code, out, err = _drt(capsys, c.uri(f"{base}/src"), fresh, "--update")
    assert code == 0 and out is not None and out["files_open"] == 1 and out["files_copied"] == 1, (err, out)
    if target == "hdfs":
        assert c.stat(f"{base}/fresh/big.bin") is None and c.read(f"{base}/fresh/small.txt") == b"small"
    else:
        assert not (tmp_path / "fresh" / "big.bin").exists()
        assert (tmp_path / "fresh" / "small.txt").read_bytes() == b"small"


@pytest.mark.parametrize("how", ["snapshots", "-diff"])
def test_a_snapshot_taken_while_a_truncate_is_recovered_is_not_placed_torn(
        slow_recovery: HdfsCluster, tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot taken during the recovery of a file no earlier snapshot holds (else HDFS truncates
    by copy: the NameNode then reports the new length and the new block cannot be read yet) holds the
    torn state too: 2,097,152 bytes, closed, with a checksum that matches them (once recovered it
    reads as the new version). The live file is under construction, so the snapshot's bytes are no
    proven version either: not placed, reported open."""
    c = slow_recovery
    base = f"/t/snap-{how.strip('-')}"
    c.mkdir(f"{base}/src")
    c.allow_snapshot(f"{base}/src")
    c.write(f"{base}/src/small.txt", b"small")
    dst = tmp_path / "dst"
    opts = CopyOptions(update=True, snapshots=True)
    if how == "-diff":
        c.create_snapshot(f"{base}/src", "s0")
    else:  # the pair's base snapshot (drt-...) holds small.txt only
        assert distcp(CopyRequest(c.uri(f"{base}/src"), f"file://{dst}", options=opts),
                      access=Access.from_env()).files_copied == 1
    c.write(f"{base}/src/big.bin", OLD, block_size=MIB)  # in no snapshot: truncated in place
    assert _truncate(c, f"{base}/src/big.bin", NEW_LEN) is False
    if how == "-diff":
        c.create_snapshot(f"{base}/src", "s1")
        st = c.stat(f"{base}/src/.snapshot/s1/big.bin")
        assert st is not None and st["length"] == 2 * MIB  # the snapshot holds the torn state
        code, out, err = _drt(capsys, c.uri(f"{base}/src"), str(dst), "--update", "--diff", "s0", "s1")
        assert out is not None, err
        files_open, files_failed, opened = out["files_open"], out["files_failed"], out["open_files"]
    else:
        r = distcp(CopyRequest(c.uri(f"{base}/src"), f"file://{dst}", options=opts), access=Access.from_env())
        files_open, files_failed, opened = r.files_open, r.files_failed, r.open_files
    assert not (dst / "big.bin").exists() or len((dst / "big.bin").read_bytes()) != 2 * MIB, \
        "the copy placed the snapshot's torn bytes"
    assert not (dst / "big.bin").exists() and (dst / "small.txt").read_bytes() == b"small"
    assert files_open == 1 and files_failed == 0 and opened[0]["placed"] is False, opened


def test_a_file_truncated_by_copy_while_a_snapshot_holds_it_is_reported_open_not_failed(
        slow_recovery: HdfsCluster, tmp_path: Path) -> None:
    """A file a snapshot holds is truncated by copy: the NameNode reports the new length at once, but
    the new last block is not readable until its recovery (a read ends short, or past EOF). The
    file is under construction: reported open (pending), nothing placed — not three failed attempts
    with an HTTP error."""
    c = slow_recovery
    base = "/t/cot"
    c.mkdir(f"{base}/src")
    c.allow_snapshot(f"{base}/src")
    c.write(f"{base}/src/big.bin", OLD, block_size=MIB)
    c.write(f"{base}/src/small.txt", b"small")
    opts = CopyOptions(update=True, snapshots=True)
    dst = tmp_path / "dst"
    assert distcp(CopyRequest(c.uri(f"{base}/src"), f"file://{dst}", options=opts), access=Access.from_env()).files_copied == 2
    assert _truncate(c, f"{base}/src/big.bin", NEW_LEN) is False  # the pair's snapshot holds it: by copy
    st = c.stat(f"{base}/src/big.bin")
    assert st is not None and st["length"] == NEW_LEN
    for options in (opts, CopyOptions(update=True)):  # from a snapshot, and live
        r = distcp(CopyRequest(c.uri(f"{base}/src"), f"file://{dst}", options=options),
                   access=Access.from_env())
        assert r.files_failed == 0 and r.files_open == 1 and r.ok, (r.failures, r.open_files)
        assert r.open_files[0]["placed"] is False and "its read failed" in r.open_files[0]["reason"]
        assert (dst / "big.bin").read_bytes() == OLD
