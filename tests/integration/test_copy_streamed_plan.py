"""The copy run plans through the streamed planner (copy/stream_plan.py, issue 42): with a batch of
three entries every listing and the base manifest are spilled as sorted runs and merged back, and
a bootstrap, a fast-forward (new, changed and deleted files, a file that became a directory and a
directory that became a file) and a reconcile (the target changed behind our back) still leave
the target equal to the source."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import stream_plan as sp
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.topology import CopyOptions
from tests.support.fixtures_copy import make_tree, tree_digest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_the_copy_run_decides_through_spilled_sorted_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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

    def run() -> Any:
        r = distcp(CopyRequest(f"file://{src}", f"file://{dst}", options=CopyOptions(update=True, delete=True)),
                   access=Access.from_env())
        assert r.ok and tree_digest(dst) == tree_digest(src), r.mode_reason
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
    (dst / "top").write_bytes(b"tampered with")  # the target changed behind our back
    r = run()
    assert r.mode == "reconcile" and r.files_copied == 1, (r.mode, r.mode_reason)
    assert {"src", "tgt", "held"} <= set(spilled)  # the chain check read the target against the base
