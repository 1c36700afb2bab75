"""A target directory whose space quota is less than one block (issue 39, item 6), real HDFS.

HDFS charges a block being written against the space quota at its full preferred size (128 MiB by
default) until it is closed. The run's fencing marker (``.drt-tmp.fence``, a few dozen bytes) was
created with the cluster's default block size, so a target under an 8 MiB quota refused it
(``DSQuotaExceededException``): exit 3, nothing copied — although the tree (1 MiB blocks, as on
hot, kept by the copy) fits. The marker is written with the smallest block size the NameNode takes
(``dfs.namenode.fs-limits.min-block-size``, 1 MiB by default) and, should even that not fit, empty
(an empty file holds no block).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dr_toolkit.cli.main import main
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

MIB = 1 << 20


def _quota(d: HdfsDir, rel: str, space: int) -> None:
    r = d.fs().client._session.put(f"{d.active_url}/webhdfs/v1{d.p(rel)}", params={
        "op": "SETQUOTA", "namespacequota": "-1", "storagespacequota": str(space), "user.name": "hdfs"})
    assert r.status_code == 200, r.text


def _drt(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    capsys.readouterr()
    code = main(["--json", "distcp", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize("space_mib", [8, 0], ids=["8MiB", "under-one-min-block"])
def test_a_small_tree_is_copied_under_a_space_quota_smaller_than_a_block(
        hot_dir: HdfsDir, cold_dir: HdfsDir, capsys: pytest.CaptureFixture[str], space_mib: int) -> None:
    files = {"a.txt": b"a" * 3000, "d/b.txt": b"b" * 5000}
    if space_mib == 0:  # below one minimum block: only empty files fit, and the (empty) marker
        files = {"e1": b"", "d/e2": b""}
    for rel, data in files.items():
        hot_dir.write(f"/src/{rel}", data, block_size=MIB)  # small blocks on hot, kept by the copy
    cold_dir.mkdir("/dst")
    _quota(cold_dir, "/dst", space_mib * MIB or 4096)
    code, out, err = _drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update", "-m", "2")
    assert code == 0 and out is not None, err
    assert out["files_copied"] == len(files) and out["files_failed"] == 0, out
    assert cold_dir.tree("/dst") == files
    assert cold_dir.stat("/dst/.drt-tmp.fence") is None  # the marker goes with the run
    # a second run takes the target again (the marker written anew) and finds everything equal
    code, out, err = _drt(capsys, hot_dir.uri("/src"), cold_dir.uri("/dst"), "--update")
    assert code == 0 and out is not None and out["files_copied"] == 0, err


def test_the_marker_keeps_its_token_under_a_quota_smaller_than_a_default_block(cold_dir: HdfsDir) -> None:
    """Under an 8 MiB quota the marker is a real one (1 MiB blocks: it holds its token, so a run
    that takes a target a killed run left counts on from it), not the empty fall-back."""
    from dr_toolkit.copy.state import take_fence

    cold_dir.mkdir("/dst")
    _quota(cold_dir, "/dst", 8 * MIB)
    fs = cold_dir.fs()
    first = take_fence(fs, cold_dir.p("/dst"), "run-a")
    st = cold_dir.stat("/dst/.drt-tmp.fence")
    assert st is not None and st["blockSize"] == MIB and cold_dir.read("/dst/.drt-tmp.fence").startswith(b"1 run-a ")
    second = take_fence(fs, cold_dir.p("/dst"), "run-b")  # run-a was killed: its marker is still there
    assert (first.token, second.token) == (1, 2) and cold_dir.read("/dst/.drt-tmp.fence").startswith(b"2 run-b ")
