"""The planner's decisions, the manifest format, filters and task balancing (no servers)."""

from __future__ import annotations

import pytest

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy.plan import FileTask, Filters, apply_diff, chain_break, comparable, fast_forward
from dr_toolkit.copy.spark_engine import balance
from dr_toolkit.fs.base import Checksum, DiffEntry, FileStatus, is_internal, tmp_name
from dr_toolkit.topology import CopyOptions


def st(rel: str, size: int, mtime: float) -> FileStatus:
    return FileStatus(rel, size, mtime)


BASE = {"a": mf.Entry(10, 1.0, "MD5:aa", 5.0), "d/b": mf.Entry(20, 2.0, "MD5:bb", 5.0),
        "d/c": mf.Entry(30, 3.0, "MD5:cc", 5.0), "log": mf.Entry(100, 4.0, "MD5:ll", 5.0)}


def test_fast_forward_skips_unchanged_detects_renames_appends_deletes() -> None:
    src = {"a": st("a", 10, 1.0), "e/b": st("e/b", 20, 2.0), "log": st("log", 150, 9.0), "new": st("new", 1, 9.0)}
    plan = fast_forward(src, BASE, CopyOptions(delete=True, append_only=["log"]), reason="r")
    assert plan.renames == [("d/b", "e/b")]
    assert {(t.rel, t.action, t.offset) for t in plan.copies} == {("log", "append", 100), ("new", "copy", 0)}
    assert plan.deletes == ["d/c"]
    assert plan.keep["a"] == BASE["a"] and plan.keep["e/b"] == BASE["d/b"]
    assert plan.bytes_to_copy == 50 + 1


def test_fast_forward_without_delete_keeps_vanished_files_in_the_manifest() -> None:
    plan = fast_forward({"a": st("a", 10, 1.0)}, BASE, CopyOptions(), reason="r")
    assert plan.deletes == [] and set(plan.keep) == set(BASE)


def test_ambiguous_rename_is_copied_not_guessed() -> None:
    base = {"x": mf.Entry(5, 1.0, None, 1.0), "y": mf.Entry(5, 1.0, None, 1.0)}
    plan = fast_forward({"z": st("z", 5, 1.0)}, base, CopyOptions(delete=True), reason="r")
    assert plan.renames == [] and [t.rel for t in plan.copies] == ["z"]


def test_chain_break_reasons() -> None:
    tgt = {rel: st(rel, e.size, e.tmtime or 0) for rel, e in BASE.items()}
    assert chain_break(BASE, tgt, lambda r: True) is None
    assert "missing" in (chain_break(BASE, {k: v for k, v in tgt.items() if k != "a"}, lambda r: True) or "")
    assert "bytes" in (chain_break(BASE, {**tgt, "a": st("a", 11, 5.0)}, lambda r: True) or "")
    assert "modified" in (chain_break(BASE, {**tgt, "a": st("a", 10, 6.0)}, lambda r: True) or "")
    assert "not in the last manifest" in (chain_break(BASE, {**tgt, "zz": st("zz", 1, 1)}, lambda r: True) or "")


def test_apply_snapshot_diff() -> None:
    diff = [DiffEntry("R", "d", "e"), DiffEntry("-", "a"), DiffEntry("+", "n"), DiffEntry("M", "log"),
            DiffEntry("M", ".")]
    fresh = {"n": {"n": st("n", 3, 9.0)}, "log": {"log": st("log", 120, 9.0)}}
    state, renames = apply_diff(BASE, diff, lambda rel, rec: fresh.get(rel) if rel else None)
    assert set(state) == {"e/b", "e/c", "log", "n"}
    assert state["log"].size == 120 and renames == {"e/b": "d/b", "e/c": "d/c"}


def test_filters_and_internal_names() -> None:
    f = Filters(include=["*.parquet", "logs/*"], exclude=["*tmp*"])
    assert f.wanted("x/y.parquet") and f.wanted("logs/app.log")
    assert not f.wanted("x/y.csv") and not f.wanted("x/tmp.parquet")
    assert not Filters().wanted(".drt/manifests/m.jsonl.gz")
    assert is_internal("a/.drt-tmp.f.run1") and not is_internal("a/.drtx")
    assert tmp_name("/t/a/f", "r1") == "/t/a/.drt-tmp.f.r1"


def test_comparable_checksums() -> None:
    md5 = Checksum("MD5", "ab")
    assert comparable(md5, Checksum("MD5", "cd")) is None
    assert "no checksum" in (comparable(None, md5) or "")
    assert "differ" in (comparable(md5, Checksum("COMPOSITE-CRC32C", "1")) or "")
    assert "block layout" in (comparable(Checksum("MD5-of-0MD5-of-512CRC32C", "1"),
                                         Checksum("MD5-of-0MD5-of-512CRC32C", "1")) or "")


def test_manifest_roundtrip_and_sorted_ids() -> None:
    entries = {f"p/{i}": mf.Entry(i, i / 3, f"MD5:{i:032x}", i / 7) for i in range(1000)}
    header, back = mf.decode(mf.encode(entries, {"manifest_id": "m1"}))
    assert header == {"manifest_id": "m1"} and back == entries
    ids = [mf.new_manifest_id() for _ in range(50)]
    assert ids == sorted(ids)


@pytest.mark.parametrize("n,groups", [(1, 4), (10, 3), (200, 8)])
def test_balance_by_bytes_and_count(n: int, groups: int) -> None:
    tasks = [FileTask(f"f{i}", size=(i % 7) * 1_000_000 + 10, mtime=0) for i in range(n)]
    bins = balance(tasks, groups)
    assert sorted(t.rel for b in bins for t in b) == sorted(t.rel for t in tasks)
    assert len(bins) == min(n, groups)
    weights = [sum(t.size + 256 * 1024 for t in b) for b in bins]
    assert max(weights) - min(weights) <= max(t.size for t in tasks) + 256 * 1024
