"""The copy run plans through the streamed planner (copy/stream_plan.py, issue 42): with a batch of
three entries every listing and the base manifest are spilled as sorted runs and merged back, and
a bootstrap, a fast-forward (new, changed and deleted files, a file that became a directory and a
directory that became a file) and a reconcile (the target changed behind our back) still leave
the target equal to the source. The run's maps (the listings, the base manifest, the next one:
copy/spill.py) spill to their SQLite files past three entries too, and each run is made again into
a second replica with every map in memory: the same replica, manifest (in order) and report."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import spill as spill_map
from dr_toolkit.copy import stream_plan as sp
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.copy.spill import SpillMap
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_the_copy_run_decides_through_spilled_sorted_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          copy_state_dir: Path) -> None:
    monkeypatch.setattr(sp, "BATCH", 3)
    spilled: list[str] = []
    spill = sp.SortedStream._spill

    def spy(self: sp.SortedStream[Any], blocks: Any) -> None:
        spill(self, blocks)
        spilled.append(self.name)

    monkeypatch.setattr(sp.SortedStream, "_spill", spy)
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, {f"d{i % 3}/f{i}": f"file {i}".encode() for i in range(10)}
              | {"a": b"a file", "a-b/x": b"beside", "b/c/d": b"deep", "top": b"top"})

    spills: list[int] = []
    to_disk = SpillMap._spill

    def spy_map(self: SpillMap[Any]) -> None:
        spills.append(len(self._mem or {}))
        to_disk(self)

    monkeypatch.setattr(SpillMap, "_spill", spy_map)
    mem = tmp_path / "mem"  # the same runs with every map in memory: the same replica, manifest and report

    def copy(to: Path, batch: int) -> Any:
        monkeypatch.setattr(spill_map, "BATCH", batch)
        r = distcp(CopyRequest(f"file://{src}", f"file://{to}", options=CopyOptions(update=True, delete=True,
                                                                                    preserve=["times"])),
                   access=Access.from_env())
        assert r.ok and tree_digest(to) == tree_digest(src), r.mode_reason
        return r

    def manifest(r: Any, replica: Path) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
        header, entries = mf.decode(next(copy_state_dir.glob(f"copy/*/manifests/{r.manifest_id}.jsonl.gz")).read_bytes())
        for p, e in entries.items():  # each replica's manifest says what its files are now (fix-ups recorded)
            t = LocalFileSystem().stat(str(replica / p))
            assert t is not None and (e.tmtime, e.tversion) == (t.mtime, t.version), (p, e, t)
        for k in ("manifest_id", "run_id", "base_manifest_id", "target", "source_time", "entries_digest"):
            header.pop(k, None)
        header["entries_from"] = bool(header.get("entries_from"))  # the base's entries referenced (nothing changed)
        # the target's own mtime and token differ between the two replicas: the rest in order
        return header, [(p, e._replace(tmtime=None, tversion=None)) for p, e in entries.items()]

    def report(r: Any) -> dict[str, Any]:
        out = {k: v for k, v in r.to_json().items() if k not in ("run_id", "target", "manifest_id", "base_manifest_id",
                                                                 "duration_s", "source_time", "watermark")}
        out["mode_reason"] = re.sub(r"manifest-[^ ;:,]+", "<manifest id>", out["mode_reason"])
        return out

    def run() -> Any:
        spills.clear()
        r = copy(dst, 3)
        assert spills, "no listing or manifest map spilled"
        n = len(spills)
        m = copy(mem, 10**9)
        assert len(spills) == n  # nothing spilled with the default batch
        assert tree_digest(mem) == tree_digest(dst)
        assert manifest(r, dst) == manifest(m, mem)
        assert report(r) == report(m)
        return r

    assert run().mode == "bootstrap"
    assert "src" in spilled  # the source listing went through sorted runs (the target's is empty)
    spilled.clear()
    (src / "d0/f0").write_bytes(b"changed, and longer")  # changed
    (src / "d1/f1").unlink()  # deleted
    make_tree(src, {"new/n1": b"n1", "d2/f11": b"new beside"})  # new
    (src / "a").unlink()
    make_tree(src, {"a/under": b"a file became a directory"})
    shutil.rmtree(src / "b")
    make_tree(src, {"b": b"a directory became a file"})
    r = run()
    assert r.mode == "fast-forward" and r.files_copied == 5, (r.mode, r.files_copied)
    assert {"src", "held"} <= set(spilled)  # the base manifest too
    spilled.clear()
    for replica in (dst, mem):
        (replica / "top").write_bytes(b"tampered with")  # the target changed behind our back
    r = run()
    assert r.mode == "reconcile" and r.files_copied == 1, (r.mode, r.mode_reason)
    assert {"src", "tgt", "held"} <= set(spilled)  # the chain check read the target against the base
    r = run()  # nothing changed: the base's entries referenced, spilled or not
    assert r.mode == "fast-forward" and r.files_copied == 0 and manifest(r, dst)[0]["entries_from"], r.mode_reason
    for replica in (dst, mem):  # touched behind our back: kept (same bytes), its time put back and recorded anew
        os.utime(replica / "d2/f2", (1e9, 1e9))
    r = run()
    assert r.mode == "reconcile" and r.files_copied == 0 and r.attributes_reapplied == 1, r.mode_reason
    r = run()
    assert r.mode == "fast-forward" and r.files_copied == 0 and manifest(r, dst)[0]["entries_from"], r.mode_reason


def test_a_manifest_streams_to_and_from_a_state_location_on_hdfs(hot_dir: Any, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """The state location on real HDFS (WebHDFS): a manifest past the spool threshold is written a chunk at a
    time (the bytes of the whole-bytes encoder, its digest computed on the way), read back a chunk at a time
    (the digest checked first), its header alone read by a stream closed early, and the client still works."""
    from dr_toolkit.copy import state
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

    monkeypatch.setattr(state, "SPOOL_BYTES", 4096)
    monkeypatch.setattr(state, "IO_CHUNK", 16 << 10)
    monkeypatch.setattr(spill_map, "BATCH", 100)
    fs = WebHdfsFileSystem([hot_dir.active_url], user="hdfs")  # the active NameNode only: no failover to wait for
    store = state.StateStore(hot_dir.location("state"), fs, "file:///src", "file:///dst")
    d = {f"d{i % 7}/f{i:05d}-{os.urandom(12).hex()}": mf.Entry(i, 1.6e9 + i, f"COMPOSITE-CRC32C:{i:08x}", 1.7e9,
                                                              f"{i}:1", None, f"t{i}", i % 9 == 0)
         for i in range(5000)}  # more than one 4096-row line, ~140 KiB of gzip: 9 chunks
    header = {"manifest_id": "m1", "pending": []}
    want = mf.encode(d, header)
    _, digest = store.write_manifest("m1", d, header)
    assert hot_dir.read(store.manifest_path("m1")[len(hot_dir.root):]) == want and digest == mf.digest(want)
    assert store._header("m1") == header  # the rest of the stream left unread
    got = store.read_manifest("m1", digest)
    assert got is not None and got[0] == header and list(got[1].items()) == list(d.items())
    assert isinstance(got[1], SpillMap) and got[1].spilled
    assert store.read_manifest("m1", "0" * 64) is None
    _, same = store.write_same_as("m2", "m1", digest, {"manifest_id": "m2"})
    latest = store.latest()
    assert latest is not None and latest[0] == "m2" and latest[3] == same and list(latest[2].items()) == list(d.items())
