"""Reverse diffs (`-rdiff S2 S1`, a backward `-diff S2 S1`) end with the target equal to the
older snapshot (issue 39 #2), on the real HDFS of the session.

HDFS computes every snapshot diff from the earlier snapshot to the later one; asked from the later
to the earlier it reverses the report (CREATE and DELETE swap, a RENAME names the later path
first) but every other path still names the *older* snapshot's location, under a renamed
directory too. Read with forward (DistCpSync) path semantics, `-rdiff s3 s1` left `d/c` — which
s1 lacks — on the target, exit 0, even with --delete.

The randomized test interleaves forward diffs, `-rdiff` and backward `-diff` (and a `-diff` that
names a base the target's last run did not read) over seeded change sequences with renames,
swaps, directory moves and cycles, type changes, overwrites, appends and truncates to any length,
and checks after every run that the target holds exactly the files of the snapshot read — the
snapshot's own bytes, read back from `.snapshot/<name>`. Bounded: 2 seeds of 10 steps into
a local target and one of 5 into the cold HDFS (about a minute on a quiet machine); `DRT_RDIFF_STRESS=N` runs N times the seeds and steps, for longer local runs.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.fs import FileSystem, open_fs, parse_uri
from dr_toolkit.topology import CopyOptions
from tests.integration.test_copy_random import Tree

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

STRESS = max(1, int(os.environ.get("DRT_RDIFF_STRESS", "1")))


def files_of(fs: FileSystem, root: str) -> dict[str, bytes]:
    return {fs.relative(root, s.path): fs.read_all(s.path) for s in fs.list_files(root)}


def test_a_reverse_diff_under_a_renamed_directory_restores_the_older_snapshot(hot_dir: Any, tmp_path: Path) -> None:
    """s1: d/a, d/b. Then d/c created and d renamed to e: s3. HDFS's report s3 → s1 is
    `R ./e → ./d` and `- ./d/c` (the created file named by its path in s1's naming)."""
    hot_dir.allow_snapshot("/src")
    hot_dir.write("/src/d/a", b"a1")
    hot_dir.write("/src/d/b", b"b1")
    hot_dir.create_snapshot("/src", "s1")
    hot_dir.write("/src/d/c", b"c-new")
    hot_dir.write("/src/d/b", b"b2-rewritten")
    hot_dir.rename("/src/d", "/src/e")
    hot_dir.create_snapshot("/src", "s3")
    src, acc = hot_dir.uri("/src"), Access.from_env()
    opts = CopyOptions(update=True, delete=True)
    for i, how in enumerate(({"rdiff": ("s3", "s1")}, {"diff": ("s3", "s1")})):
        dst = str(tmp_path / f"dst{i}")
        r = distcp(CopyRequest(src, dst, options=opts, diff=("s1", "s3")), access=acc)
        assert r.ok and files_of(open_fs(parse_uri(dst), acc), dst) == {
            "e/a": b"a1", "e/b": b"b2-rewritten", "e/c": b"c-new"}
        r = distcp(CopyRequest(src, dst, options=opts, **how), access=acc)  # type: ignore[arg-type]
        assert r.ok, r.failures
        assert "snapshot diff s3 → s1" in r.mode_reason, r.mode_reason  # the diff used, not a listing
        got = files_of(open_fs(parse_uri(dst), acc), dst)
        assert got == {"d/a": b"a1", "d/b": b"b1"}, (how, r.mode_reason)


class Changes(Tree):
    """The test_copy_random change sequences, plus truncates to any length (the NameNode's own
    TRUNCATE; a cut inside a block is recovered before the next snapshot)."""

    def __init__(self, hot: Any, fs: FileSystem, root: str, rnd: random.Random) -> None:
        super().__init__(fs, root, rnd)
        self.hot = hot
        self.snapshots = True  # no in-place rewrite keeping size and mtime: a diff cannot see one

    def op_truncate(self) -> None:
        cands = sorted(k for k, v in self.files.items() if len(v) > 1)
        if not cands:
            return
        rel = self.rnd.choice(cands)
        n = self.rnd.randint(0, len(self.files[rel]) - 1)
        r = requests.post(f"{self.hot.cluster.webhdfs_url}/webhdfs/v1{self.p(rel)}",
                          params={"op": "TRUNCATE", "newlength": str(n), "user.name": "hdfs"}, timeout=30)
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 60
        while self.fs.is_open(self.p(rel)):  # the cut block is being recovered
            assert time.monotonic() < deadline, f"truncate of {rel} never recovered"
            time.sleep(0.05)
        self.files[rel] = self.files[rel][:n]
        self.log.append(f"truncate {rel} to {n}")

    OPS = [*Tree.OPS, "op_truncate", "op_truncate", "op_truncate", "op_rename_dir", "op_swap"]


CASES = [(7, "local"), (21, "local"), (33, "webhdfs")] + [(100 + i, ("local", "webhdfs")[i % 2])
                                                        for i in range(3 * (STRESS - 1))]


@pytest.mark.parametrize("seed,tgt_kind", CASES, ids=[f"seed{s}-to-{k}" for s, k in CASES])
def test_forward_and_reverse_diffs_interleaved_equal_the_snapshot_read(hot_dir: Any, tmp_path: Path, seed: int,
                                                                       tgt_kind: str,
                                                                       request: pytest.FixtureRequest) -> None:
    rnd = random.Random(seed)
    acc = Access.from_env()
    hot_dir.allow_snapshot("/src")
    sfs, sroot = open_fs(hot_dir.location("/src"), acc), hot_dir.p("/src")
    src = hot_dir.uri("/src")
    if tgt_kind == "local":
        dst, troot = str(tmp_path / "dst"), str(tmp_path / "dst")
        tfs = open_fs(parse_uri(dst), acc)
    else:  # the cold cluster, through WebHDFS
        cold = request.getfixturevalue("cold_dir")
        dst, troot = cold.uri("/dst"), cold.p("/dst")
        tfs = open_fs(cold.location("/dst"), acc)
    tree = Changes(hot_dir, sfs, sroot, rnd)
    tree.OPS = [op for op in Changes.OPS if "landing" not in op]
    for _ in range(12):
        tree.op_create()
    snaps: dict[str, dict[str, bytes]] = {}

    def snap() -> str:
        name = f"s{len(snaps)}"
        hot_dir.create_snapshot("/src", name)
        held = files_of(sfs, sfs.snapshot_path(sroot, name))
        assert held == tree.files, f"the test's model drifted: {tree.log}"
        snaps[name] = held
        return name

    s0, s1 = snap(), snap()  # two snapshots of one tree
    opts = CopyOptions(update=True, delete=True, workers=4)
    # the first run has no base: it lists its S2; from here on the target's base is a snapshot
    r = distcp(CopyRequest(src, dst, options=opts, diff=(s0, s1)), access=acc)
    assert r.ok and files_of(tfs, troot) == tree.files
    base = s1
    kinds: dict[str, int] = {}
    for step in range((10 if tgt_kind == "local" else 5) * STRESS):  # an HDFS target: slower writes
        tree.log.clear()
        for _ in range(rnd.randint(2, 5)):
            getattr(tree, rnd.choice(tree.OPS))()
        newest = snap()
        older = [n for n in snaps if n not in (base, newest)]
        x = rnd.random()
        if x < 0.4 or not older:
            kind, read, args = "forward -diff", newest, {"diff": (base, newest)}
        elif x < 0.7:
            read = rnd.choice(older)
            kind, args = "-rdiff", {"rdiff": (base, read)}
        elif x < 0.88:
            read = rnd.choice(older)
            kind, args = "backward -diff", {"diff": (base, read)}
        else:  # a base the target's last run did not read: the snapshot read is listed
            other = rnd.choice(older)
            read = rnd.choice([n for n in snaps if n != other])
            kind, args = "-diff, another base", {"diff": (other, read)}
        what = f"seed {seed} step {step}: {kind} {args} after {tree.log}"
        r = distcp(CopyRequest(src, dst, options=opts, **args), access=acc)  # type: ignore[arg-type]
        assert r.ok, (what, r.failures)
        used = f"snapshot diff {base} → {read}" in r.mode_reason
        key = kind + (" (diff applied)" if used else " (listed)")
        kinds[key] = kinds.get(key, 0) + 1
        got = files_of(tfs, troot)
        want = snaps[read]
        extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
        bad = sorted(k for k in want if k in got and got[k] != want[k])
        assert not extra and not missing and not bad, (what, r.mode_reason, extra, missing,
                                                       [(k, len(got[k]), len(want[k])) for k in bad])
        base = read
    # forward and reverse runs happened, each applying the NameNode's diff (not a listing)
    assert any(k in kinds for k in ("-rdiff (diff applied)", "backward -diff (diff applied)")), kinds
    assert "forward -diff (diff applied)" in kinds, kinds
