"""Faults and edges of a copy: a source file changing while it is copied, a corrupted
target (flipped byte, truncated) found by the next --update run, checksum fallbacks
reported, bad input refused with exit 2 and nothing written, S3 as target and source."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.fs import open_fs, parse_uri
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, sample_tree, tmp_files, tree_digest
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def _modify_when_copy_starts(src_file: Path, dst: Path, stop: threading.Event, keep_going: bool) -> None:
    deadline = time.monotonic() + 30
    while not tmp_files(dst) and time.monotonic() < deadline:
        time.sleep(0.01)
    n = 0
    while True:
        n += 1
        data = bytes([n % 256]) * (6 << 20)
        src_file.write_bytes(data)
        os.utime(src_file, (time.time() + n, time.time() + n))
        if not keep_going or stop.wait(0.05):
            return


@pytest.mark.parametrize("keep_going", [False, True], ids=["changed-once", "keeps-changing"])
def test_file_modified_during_copy_is_recopied_or_failed_never_mixed(tmp_path: Path, keep_going: bool) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, {"big.bin": b"\xaa" * (6 << 20), "small.txt": b"small"})
    stop = threading.Event()
    t = threading.Thread(target=_modify_when_copy_starts, args=(src / "big.bin", dst, stop, keep_going))
    t.start()
    r = distcp(CopyRequest(f"file://{src}", f"file://{dst}",
                           options=CopyOptions(workers=1, bandwidth_mb_s=3)),
               access=Access.from_env())
    stop.set()
    t.join()
    assert "big.bin" in r.changed_during_copy
    out = dst / "big.bin"
    if keep_going and r.files_failed:
        assert r.failures[0]["path"] == "big.bin" and "changed" in r.failures[0]["error"]
        assert not out.exists()  # nothing partial was renamed into place
    elif keep_going:  # an attempt fell between two rewrites: it holds one state the source really had
        data = out.read_bytes()  # (the writer truncates then writes: an empty file is such a state)
        assert len(set(data)) <= 1 and len(data) <= 6 << 20, "a half-old, half-new file"
    else:
        assert r.files_failed == 0
        assert out.read_bytes() == (src / "big.bin").read_bytes()
    assert tmp_files(dst) == []
    assert (dst / "small.txt").read_bytes() == b"small"


@pytest.mark.parametrize("damage", ["flip-byte", "truncate"])
def test_corrupted_target_is_detected_and_repaired_by_update(tmp_path: Path, damage: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, sample_tree())
    distcp(CopyRequest(f"file://{src}", f"file://{dst}"), access=Access.from_env())
    victim = dst / "a/f001.bin"
    data = bytearray(victim.read_bytes())
    if damage == "flip-byte":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[:-7]
    victim.write_bytes(bytes(data))
    r = distcp(CopyRequest(f"file://{src}", f"file://{dst}", options=CopyOptions(update=True)),
               access=Access.from_env())
    assert r.mode == "reconcile" and "a/f001.bin" in r.mode_reason
    assert r.files_copied == 1
    assert tree_digest(dst) == tree_digest(src)


def test_without_a_manifest_equality_is_proven_by_content_never_by_size_and_mtime(tmp_path: Path,
                                                                                 hot_dir: HdfsDir) -> None:
    """WebHDFS answers MD5MD5CRC (a real NameNode): never compared with a CRC32C; with the
    manifest gone the files are compared by content, and the report says so per file."""
    fs = open_fs(hot_dir.location("/src"), Access.from_env())
    for rel, data in sample_tree(4).items():
        fs.write_bytes(hot_dir.p(f"/src/{rel}"), data)
    uri = hot_dir.uri("/src")
    r0 = distcp(CopyRequest(uri, f"file://{tmp_path}/dst", options=CopyOptions(update=True)),
                access=Access.from_env())
    assert r0.state_location and not (tmp_path / "dst/.drt").exists()
    for m in Path(r0.state_location.removeprefix("file://")).rglob("*.jsonl.gz"):
        m.unlink()  # manifest missing: the next run must compare files
    victim = tmp_path / "dst" / sorted(sample_tree(4))[0]
    data = bytearray(victim.read_bytes())
    data[3] ^= 1  # same size, same mtime, different bytes
    st = victim.stat()
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = distcp(CopyRequest(uri, f"file://{tmp_path}/dst", options=CopyOptions(update=True)),
               access=Access.from_env())
    assert r.mode == "bootstrap" and r.files_copied == 1 and r.files_skipped == 3
    assert r.fallbacks == [] and r.basis == {"content (read on both sides, compared byte for byte)": 3}
    assert tree_digest(tmp_path / "dst") == {k: __import__("hashlib").md5(v).hexdigest()
                                             for k, v in sample_tree(4).items()}


@pytest.mark.parametrize("case", ["unknown-scheme", "missing-source", "target-in-source", "source-in-target",
                                  "dotdot", "delete-without-update"])
def test_bad_input_is_one_clear_error_exit_2_nothing_written(tmp_path: Path, case: str,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    make_tree(src, {"a": b"a"})
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    args = {
        "unknown-scheme": ["ftp://host/x", f"file://{tmp_path}/dst"],
        "missing-source": [f"file://{tmp_path}/nope", f"file://{tmp_path}/dst"],
        "target-in-source": [f"file://{src}", f"file://{src}/inner"],
        "source-in-target": [f"file://{src}", f"file://{tmp_path}"],
        "dotdot": [f"file://{src}", f"file://{tmp_path}/dst/../../etc"],
        "delete-without-update": [f"file://{src}", f"file://{tmp_path}/dst", "--overwrite", "--update"],
    }[case]
    code = main(["distcp", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("drt: error:") == 1
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_dry_run_counts_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    files = sample_tree(6)
    make_tree(tmp_path / "src", files)
    assert main(["distcp", f"file://{tmp_path}/src", f"file://{tmp_path}/dst", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files_to_copy"] == 6 and out["bytes_to_copy"] == sum(len(v) for v in files.values())
    assert out["dry_run"] is True and not (tmp_path / "dst").exists()


def test_s3_target_then_s3_source(tmp_path: Path, s3_bucket: str, s3_server: Any) -> None:
    src = tmp_path / "src"
    files = sample_tree(8, size=20_000)
    files["big/multipart.bin"] = os.urandom((8 << 20) + 12345)  # more than one multipart part
    make_tree(src, files)
    uri = f"s3://{s3_bucket}/backup"
    r = distcp(CopyRequest(f"file://{src}", uri, options=CopyOptions(workers=4)), access=Access.from_env())
    assert r.files_copied == 9 and r.files_failed == 0
    fs = open_fs(parse_uri(uri), Access.from_env())
    for rel, data in files.items():
        assert fs.read_all(f"backup/{rel}") == data
    assert fs.checksum("backup/big/multipart.bin") is not None
    again = distcp(CopyRequest(f"file://{src}", uri), access=Access.from_env())
    assert again.mode == "fast-forward" and again.files_copied == 0
    (src / "a/f001.bin").write_bytes(b"changed")
    third = distcp(CopyRequest(f"file://{src}", uri, options=CopyOptions(delete=True)),
                   access=Access.from_env())
    assert third.files_copied == 1 and fs.read_all("backup/a/f001.bin") == b"changed"
    # and back: S3 as the source of a copy
    back = distcp(CopyRequest(uri, f"file://{tmp_path}/restored"), access=Access.from_env())
    assert back.files_failed == 0
    assert tree_digest(tmp_path / "restored") == tree_digest(src)


@pytest.mark.spark
def test_spark_engine_copies_like_the_local_engine(tmp_path: Path, spark: Any) -> None:
    src = tmp_path / "src"
    make_tree(src, sample_tree(30, size=30_000))
    r = distcp(CopyRequest(f"file://{src}", f"file://{tmp_path}/dst",
                           options=CopyOptions(engine="spark", workers=2)),
               access=Access.from_env())
    assert r.engine == "spark" and r.files_copied == 30 and r.files_failed == 0
    assert tree_digest(tmp_path / "dst") == tree_digest(src)
    (src / "c/f003.bin").write_bytes(b"new")
    r2 = distcp(CopyRequest(f"file://{src}", f"file://{tmp_path}/dst", options=CopyOptions(engine="spark")),
                access=Access.from_env())
    assert r2.mode == "fast-forward" and r2.files_copied == 1
    assert tree_digest(tmp_path / "dst") == tree_digest(src)
