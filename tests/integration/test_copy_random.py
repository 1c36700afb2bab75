"""The invariant, attacked: after every run that ends without failed files, the target equals
the source file by file (names, types, contents), whatever happened on the source in between —
creates, deletes, renames (swaps, cycles, moves out of deleted directories), appends, in-place
rewrites with the same size and mtime, file↔directory type changes — and whatever happened to
earlier runs (copies that failed, runs killed half-way, a target changed behind our back, the
state location lost). Seeded and reproducible: the seed is in the test id; a failure names the
step and the operations since the last run.

Issue 21 added: names with leading and trailing spaces (every kind) and names that are not UTF-8
(local sources: copied by their bytes between local trees, skipped with a reason into WebHDFS or
S3); a run whose target another run takes mid-copy (the fencing marker rewritten: it must stop,
exit 1, on every target); between local trees, permissions and times preserved through a
source chmod/touch and a target's mode/mtime changed behind our back; ``--append-only`` on every
file in three cases; an exclude filter switched on and off between runs, with files staged under the excluded
``landing/`` and published by a rename out of it; and, on local targets, entries planted behind
our back — a symlink where the source has a directory (pointing outside the target or into the
source), target-only symlinks, FIFOs and empty directories — and a second run through a symlink
alias of the target while one runs (refused). After every run nothing outside the target was
written, the source was not written, and the target holds no entry that is not a directory or a
regular file.

Matrix: local → local, local → S3 (moto), local → HDFS, HDFS with snapshots (snapshot-diff
fast-forwards) → local, → S3 and → HDFS. HDFS is real (hadoop-client-minicluster: the source on
the hot HA pair, the target on the cold cluster), so the snapshot diffs are the NameNode's own
GETSNAPSHOTDIFF (its order, renamed parents named by their old path), with real fileIds and
MD5-of-MD5-of-CRC32C checksums. Every mode is exercised: bootstrap,
fast-forward, reconcile, snapshot diff.
"""

from __future__ import annotations

import os
import posixpath
import random
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.copy import execute
from dr_toolkit.copy import state as copy_state
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.plan import Filters
from dr_toolkit.copy.request import CopyRequest, Opener
from dr_toolkit.errors import DrtError, LeaseHeld
from dr_toolkit.fs import FileSystem, Location, open_fs, parse_uri
from dr_toolkit.ledger import Ledger
from dr_toolkit.ledger import lease as ledger_lease
from dr_toolkit.topology import CopyOptions

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]
T0 = 1_700_000_000.0


class Tree:
    """The source as the test believes it is (rel -> bytes), changed through the filesystem API."""

    def __init__(self, fs: FileSystem, root: str, rnd: random.Random, non_utf8: bool = False,
                 truncate: Callable[[str], None] | None = None) -> None:
        self.fs, self.root, self.rnd = fs, root, rnd
        self.truncate = truncate  # HDFS: TRUNCATE to 0 (the NameNode's own)
        # snapshot mode trusts the NameNode's diff, which does not report an in-place rewrite that
        # puts size and mtime back (a documented limit): such rewrites only without snapshots
        self.snapshots = False
        self.non_utf8 = non_utf8  # a local source: names that are not UTF-8 too
        self.files: dict[str, bytes] = {}
        self.log: list[str] = []
        self.n = 0

    # -- helpers ----------------------------------------------------------------------------
    def p(self, rel: str) -> str:
        return self.fs.join(self.root, rel)

    def dirs(self) -> list[str]:
        out = set()
        for rel in self.files:
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                out.add("/".join(parts[:i]))
        return sorted(out)

    def free(self, rel: str) -> bool:
        """No file or directory at rel, and no file at any of its parents."""
        if rel in self.files or any(k.startswith(rel + "/") for k in self.files):
            return False
        parts = rel.split("/")
        return not any("/".join(parts[:i]) in self.files for i in range(1, len(parts)))

    def new_name(self) -> str:
        for _ in range(100):
            self.n += 1
            depth = self.rnd.choice([0, 1, 1, 2])
            ds = self.dirs()
            base = self.rnd.choice(ds) if ds and self.rnd.random() < 0.6 else ""
            extra = "/".join(f"d{self.rnd.randint(0, 4)}" for _ in range(depth))
            rel = "/".join(x for x in (base, extra, self.leaf(f"f{self.n}")) if x)
            if rel.count("/") <= 3 and self.free(rel):
                return rel
        raise AssertionError("no free name")

    def leaf(self, name: str) -> str:
        """Now and then a name with a leading or trailing space, or (local) one that is not UTF-8."""
        x = self.rnd.random()
        if x < 0.08:
            return " " + name
        if x < 0.16:
            return name + " "
        if x < 0.22 and self.non_utf8:
            return name + "\udce9"  # the byte 0xE9 alone: Latin-1 é, not UTF-8
        return name

    def data(self, n: int | None = None) -> bytes:
        return self.rnd.randbytes(self.rnd.randint(0, 20_000) if n is None else n)

    def write(self, rel: str, data: bytes, mtime: float | None = None) -> None:
        self.fs.write_bytes(self.p(rel), data)
        if self.fs.supports_times:
            self.fs.set_times(self.p(rel), mtime if mtime is not None else T0 + self.rnd.randint(0, 10))
        self.files[rel] = data

    def mv(self, a: str, b: str) -> None:
        self.fs.rename(self.p(a), self.p(b))
        for k in [k for k in self.files if k == a or k.startswith(a + "/")]:
            self.files[b + k[len(a):]] = self.files.pop(k)

    def rm(self, rel: str) -> None:
        self.fs.delete(self.p(rel), recursive=True)
        for k in [k for k in self.files if k == rel or k.startswith(rel + "/")]:
            del self.files[k]

    # -- operations ---------------------------------------------------------------------------
    def op_create(self) -> None:
        rel = self.new_name()
        self.write(rel, self.data())
        self.log.append(f"create {rel}")

    def op_delete(self) -> None:
        if self.files:
            rel = self.rnd.choice(sorted(self.files))
            self.rm(rel)
            self.log.append(f"delete {rel}")

    def op_delete_dir(self) -> None:
        if self.dirs():
            d = self.rnd.choice(self.dirs())
            self.rm(d)
            self.log.append(f"delete dir {d}")

    def op_rename(self) -> None:
        if self.files:
            a = self.rnd.choice(sorted(self.files))
            b = self.new_name()
            self.mv(a, b)
            self.log.append(f"rename {a} -> {b}")

    def op_rename_dir(self) -> None:
        ds = self.dirs()
        if ds:
            a = self.rnd.choice(ds)
            b = f"r{self.n}"
            self.n += 1
            if self.free(b) and not b.startswith(a + "/"):
                self.mv(a, b)
                self.log.append(f"rename dir {a} -> {b}")

    def op_swap(self) -> None:
        if len(self.files) >= 2:
            a, b = self.rnd.sample(sorted(self.files), 2)
            if a.startswith(b + "/") or b.startswith(a + "/"):
                return
            tmp = f"swap{self.n}"
            self.n += 1
            self.mv(a, tmp)
            self.mv(b, a)
            self.mv(tmp, b)
            self.log.append(f"swap {a} <-> {b}")

    def op_cycle_dirs(self) -> None:
        top = sorted({d for d in self.dirs() if "/" not in d})
        if len(top) >= 3:
            a, b, c = self.rnd.sample(top, 3)
            tmp = f"cyc{self.n}"
            self.n += 1
            self.mv(a, tmp)
            self.mv(c, a)
            self.mv(b, c)
            self.mv(tmp, b)
            self.log.append(f"cycle {a} <- {c} <- {b} <- {a}")

    def op_move_out_then_delete_dir(self) -> None:
        ds = [d for d in self.dirs() if sum(k.startswith(d + "/") for k in self.files) >= 2]
        if ds:
            d = self.rnd.choice(ds)
            f = self.rnd.choice(sorted(k for k in self.files if k.startswith(d + "/")))
            b = f"out{self.n}"
            self.n += 1
            self.mv(f, b)
            self.rm(d)
            self.log.append(f"move {f} -> {b}, delete dir {d}")

    def op_append(self) -> None:
        if self.files and self.fs.supports_append:
            rel = self.rnd.choice(sorted(self.files))
            more = self.data(self.rnd.randint(1, 5000))
            self.fs.write(self.p(rel), [more], append=True)
            self.files[rel] += more
            self.log.append(f"append {rel}")

    def op_rewrite_same_size_same_mtime(self) -> None:
        cands = sorted(k for k, v in self.files.items() if v)
        if cands and self.fs.supports_times:
            rel = self.rnd.choice(cands)
            st = self.fs.stat(self.p(rel))
            assert st is not None
            old = self.files[rel]
            new = bytes(b ^ 0x5A for b in old)
            self.write(rel, new, st.mtime)
            self.log.append(f"rewrite {rel} (same size, same mtime)")

    def op_rewrite_in_place_keeping_the_inode(self) -> None:
        """HDFS: TRUNCATE + APPEND + SETTIMES — fileId, size and mtime all as before."""
        cands = sorted(k for k, v in self.files.items() if v)
        if cands and self.truncate is not None and not self.snapshots:
            rel = self.rnd.choice(cands)
            rewrite_in_place(self.fs, self.p(rel), self.truncate, bytes(b ^ 0xA5 for b in self.files[rel]))
            self.files[rel] = bytes(b ^ 0xA5 for b in self.files[rel])
            self.log.append(f"rewrite in place {rel} (truncate + append + settimes)")

    def op_file_to_dir(self) -> None:
        if self.files:
            f = self.rnd.choice(sorted(self.files))
            self.rm(f)
            self.write(f + "/inner", self.data())
            self.log.append(f"file {f} becomes a directory")

    def op_dir_to_file(self) -> None:
        if self.dirs():
            d = self.rnd.choice(self.dirs())
            self.rm(d)
            self.write(d, self.data())
            self.log.append(f"directory {d} becomes a file")

    def op_stage_in_landing(self) -> None:
        rel = f"landing/{self.leaf(f'l{self.n}')}"
        self.n += 1
        if self.free(rel):
            self.write(rel, self.data())
            self.log.append(f"stage {rel}")

    def op_publish_from_landing(self) -> None:
        staged = sorted(k for k in self.files if k.startswith("landing/"))
        if staged:
            a = self.rnd.choice(staged)
            b = self.new_name()
            if not b.startswith("landing/"):
                self.mv(a, b)
                self.log.append(f"publish {a} -> {b}")

    OPS = ["op_rewrite_in_place_keeping_the_inode", "op_rewrite_in_place_keeping_the_inode", "op_stage_in_landing", "op_publish_from_landing", "op_create", "op_create", "op_delete", "op_delete_dir", "op_rename", "op_rename_dir", "op_swap",
           "op_cycle_dirs", "op_move_out_then_delete_dir", "op_append", "op_rewrite_same_size_same_mtime",
           "op_rewrite_same_size_same_mtime", "op_file_to_dir", "op_dir_to_file"]


def rewrite_in_place(fs: FileSystem, path: str, truncate: Callable[[str], None], data: bytes) -> None:
    st = fs.stat(path)
    assert st is not None and st.size == len(data)
    truncate(path)
    fs.write(path, [data], append=True)
    fs.set_times(path, st.mtime)
    after = fs.stat(path)
    assert after is not None and (after.version, after.size, after.mtime) == (st.version, st.size, st.mtime)


def _truncator(cluster_dir: Any) -> Callable[[str], None]:
    import requests

    def truncate(path: str) -> None:
        r = requests.post(f"{cluster_dir.active_url}/webhdfs/v1{path}",
                          params={"op": "TRUNCATE", "newlength": 0, "user.name": "hdfs"}, timeout=30)
        assert r.status_code == 200 and r.json() == {"boolean": True}, r.text

    return truncate


def _plant(tree: Tree, troot: str, outside: Path, src_root: str, rnd: random.Random) -> list[str]:
    """Entries planted in a local target behind our back: a symlink where the source has a
    directory (pointing outside the target, or into the source), a target-only symlink, a FIFO
    and an empty directory."""
    done = []
    ds = [d for d in tree.dirs() if os.path.isdir(os.path.join(troot, d)) and not d.startswith("landing")]
    if ds:
        d = rnd.choice(ds)
        shutil.rmtree(os.path.join(troot, d))
        to = str(outside) if rnd.random() < 0.5 else os.path.join(src_root, rnd.choice(tree.dirs()))
        os.symlink(to, os.path.join(troot, d))
        done.append(f"symlink {d} -> {to}")
    n = rnd.randint(0, 10**6)
    os.symlink(src_root, os.path.join(troot, f"ln{n}"))
    os.mkfifo(os.path.join(troot, f"fifo{n}"))
    os.makedirs(os.path.join(troot, f"empty{n}", "sub"))
    done.append(f"ln{n}, fifo{n}, empty{n}/sub")
    return done


def _odd_entries(root: str) -> list[str]:
    """Entries under a local root that are neither directories nor regular files."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            m = os.lstat(os.path.join(dirpath, name)).st_mode
            if not (stat.S_ISDIR(m) or stat.S_ISREG(m)):
                out.append(os.path.join(dirpath, name))
    return out


def _utf8(rel: str) -> bool:
    try:
        rel.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _snapshot_of(fs: FileSystem, root: str) -> dict[str, bytes]:
    return {fs.relative(root, s.path): fs.read_all(s.path) for s in fs.list_files(root)}


class _Fail:
    """Makes the copy of chosen files fail (every attempt), as a broken disk or network would."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.victims: set[str] = set()
        real = execute._copy_full

        def copy_full(ctx: Any, task: Any, *a: Any) -> Any:
            if task.rel in self.victims:
                raise OSError(f"injected failure copying {task.rel}")
            return real(ctx, task, *a)

        monkeypatch.setattr(execute, "_copy_full", copy_full)
        monkeypatch.setattr(execute, "ATTEMPTS", 1)


class _Clock:
    """The lease's clock (``dr_toolkit.ledger.lease.time``): jumps past the TTL after the n-th progress
    event, as a SIGSTOP or a long GC pause of the whole process would look to it."""

    def __init__(self) -> None:
        import time as real

        self.real = real
        self.offset = 0.0

    def time(self) -> float:
        return self.real.time() + self.offset

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def pause_after(self, n: int) -> Callable[[str, int], None]:
        seen = [0]

        def progress(kind: str, _n: int) -> None:
            seen[0] += 1
            if seen[0] == n:
                self.offset = copy_state.LEASE_TTL_S * 2

        return progress


def _rename_during_the_walk(tree: Any, rnd: random.Random) -> Opener:
    """An opener (``CopyRequest.open_fs``) whose run's source listing renames a directory (to a new
    top-level name, in the tree's model too) once the walk has read two directories: a directory
    not yet read moved into the part already read is seen nowhere by the walk (issue 21 #7)."""
    state = {"opened": 0, "done": False}

    def opening(loc: Location, access: Access) -> FileSystem:
        fs = open_fs(loc, access)
        state["opened"] += 1
        if state["opened"] == 1:  # the source
            inner = fs.list_files

            def list_files(root: str, *la: Any, **lkw: Any) -> Any:
                seen: set[str] = set()
                for st in inner(root, *la, **lkw):
                    seen.add(posixpath.dirname(st.path))
                    if len(seen) >= 2 and not state["done"]:
                        state["done"] = True
                        saved, tree.rnd = tree.rnd, rnd  # its own generator: the seeded sequence is kept
                        try:
                            tree.op_rename_dir()
                        finally:
                            tree.rnd = saved
                    yield st

            fs.list_files = list_files  # type: ignore[method-assign]  # a FileSystem's walk, wrapped
        return fs

    return opening


def _kill_after(n_bytes: int) -> Callable[[str, int], None]:
    seen = [0]

    def progress(kind: str, n: int) -> None:
        if kind == "bytes":
            seen[0] += n
            if seen[0] >= n_bytes:
                raise KeyboardInterrupt("killed by the test")

    return progress


CASES = [("local", "local", 11), ("local", "s3", 12), ("local", "webhdfs", 13), ("webhdfs-snap", "local", 14),
         ("webhdfs-snap", "s3", 15), ("local", "local", 16), ("webhdfs-snap", "webhdfs", 17), ("webhdfs", "local", 18),
         ("webhdfs", "webhdfs", 19), ("local", "local", 20)]


@pytest.mark.parametrize("src_kind,tgt_kind,seed", CASES, ids=[f"{a}-to-{b}-seed{s}" for a, b, s in CASES])
def test_random_change_sequences_converge(src_kind: str, tgt_kind: str, seed: int, tmp_path: Path,
                                          request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    truncate: Callable[[str], None] | None = None
    tgt_truncate: Callable[[str], None] | None = None
    # -- source ---------------------------------------------------------------------------------
    if src_kind == "local":
        src_uri = f"file://{tmp_path}/src"
        sfs, sroot = open_fs(parse_uri(src_uri), Access.from_env()), f"{tmp_path}/src"
    else:
        hot = request.getfixturevalue("hot_dir")
        sfs, sroot = open_fs(hot.location("/src"), Access.from_env()), hot.p("/src")
        hot.allow_snapshot("/src")
        src_uri = hot.uri("/src")
        truncate = _truncator(hot)
    # -- target ---------------------------------------------------------------------------------
    if tgt_kind == "local":
        tgt_uri = f"file://{tmp_path}/dst"
        tfs, troot = open_fs(parse_uri(tgt_uri), Access.from_env()), f"{tmp_path}/dst"
    elif tgt_kind == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        tgt_uri = f"s3://{bucket}/dst"
        tfs, troot = open_fs(parse_uri(tgt_uri), Access.from_env()), "dst"
    else:
        cold = request.getfixturevalue("cold_dir")
        tfs, troot = open_fs(cold.location("/dst"), Access.from_env()), cold.p("/dst")
        tgt_uri = cold.uri("/dst")
        tgt_truncate = _truncator(cold)
    # between local trees every run also preserves permissions and times: a source chmod/touch
    # (content unchanged) must reach the target, and a target's mode or mtime changed behind our
    # back must be put back (DistCp re-applies -p to the files it skips) — issue 21 #8
    preserve = ["permissions", "times"] if src_kind == tgt_kind == "local" else []
    # three cases treat every file as append-only (logs): a grown file gets only its tail, any other
    # change (rewrites, truncations, kills mid-append) still ends with the target equal — issue 21 #10
    append_only = ["*"] if seed in (13, 19, 20) else []
    opts = CopyOptions(update=True, delete=True, workers=4, snapshots=src_kind == "webhdfs-snap", preserve=preserve,
                       append_only=append_only)
    tree = Tree(sfs, sroot, rnd, non_utf8=src_kind == "local", truncate=truncate)
    tree.snapshots = opts.snapshots
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"outside the target")
    alias = tmp_path / "alias"
    if tgt_kind == "local":
        os.symlink(troot, alias)
    for _ in range(25):
        tree.op_create()
    fail = _Fail(monkeypatch)
    modes: set[str] = set()
    state_dir = Path(__import__("os").environ["DRT_STATE_DIR"])
    rounds = 9
    for rnd_i in range(rounds):
        tree.log.clear()
        if rnd_i:
            for _ in range(rnd.randint(3, 7)):
                getattr(tree, rnd.choice(Tree.OPS))()
        attrs = random.Random(seed * 15485863 + rnd_i)  # apart from ``rnd``: the seeded sequences stay as they were
        if preserve and rnd_i and tree.files:
            for rel in attrs.sample(sorted(tree.files), min(2, len(tree.files))):  # a chmod / touch on the source
                os.chmod(os.path.join(sroot, rel), attrs.choice([0o600, 0o640, 0o644, 0o755]))
                if attrs.random() < 0.5:
                    os.utime(os.path.join(sroot, rel), (T0 + 50 + rnd_i, T0 + 50 + rnd_i))
                tree.log.append(f"chmod/touch {rel}")
        if rnd_i and rnd.random() < 0.3:  # the filters change between runs
            opts = opts.model_copy(update={"exclude": [] if opts.exclude else ["landing/*"]})
            tree.log.append(f"exclude now {opts.exclude}")
        what = f"seed {seed} round {rnd_i}: {tree.log}"
        faults = ["none", "none", "fail", "kill", "tamper", "lose-state", "pause"] + (
            ["plant", "alias"] if tgt_kind == "local" else [])
        fault = rnd.choice(faults) if rnd_i else "none"
        if rnd_i == rounds - 2 and "reconcile" not in modes:
            fault = "tamper"  # every mode at least once (a target changed behind our back: reconcile)
        if fault == "plant":
            tree.log.extend(_plant(tree, troot, outside, sroot if src_kind == "local" else str(outside), rnd))
            what = f"seed {seed} round {rnd_i}: {tree.log}"
        if fault == "tamper":  # the target changed behind our back: a file rewritten, one deleted
            held = sorted(tfs.relative(troot, s.path) for s in tfs.list_files(troot))
            if held:
                victim = rnd.choice(held)
                tfs.write_bytes(tfs.join(troot, victim), b"tampered" * rnd.randint(0, 3))
                gone = rnd.choice(held)
                tfs.delete(tfs.join(troot, gone))
                if tgt_truncate is not None and len(held) > 1:  # HDFS: one rewritten keeping fileId and mtime
                    other = rnd.choice([h for h in held if h != gone])
                    old = tfs.read_all(tfs.join(troot, other))
                    if old:
                        rewrite_in_place(tfs, tfs.join(troot, other), tgt_truncate, bytes(b ^ 0x3C for b in old))
        if preserve and rnd_i and attrs.random() < 0.4:  # the target's mode and mtime changed behind our back
            held = sorted(tfs.relative(troot, x.path) for x in tfs.list_files(troot))
            if held:
                victim = os.path.join(troot, attrs.choice(held))
                os.chmod(victim, 0o604)
                os.utime(victim, (T0 - 1000, T0 - 1000))
                tree.log.append(f"target drift {victim}")
                what = f"seed {seed} round {rnd_i}: {tree.log}"
        if fault == "lose-state":
            for m in state_dir.rglob("*.jsonl.gz"):
                m.unlink()
        if fault == "fail" and tree.files:
            fail.victims = set(rnd.sample(sorted(tree.files), min(2, len(tree.files))))
            r = distcp(CopyRequest(src_uri, tgt_uri, options=opts), access=Access.from_env())
            modes.add(r.mode)
            assert r.files_failed >= 1 or not (fail.victims & set(f.get("path") for f in r.failures)), what
            fail.victims = set()
        if fault == "pause":  # a run (with a ledger lease) paused past its TTL mid-copy: it must stop
            clock = _Clock()
            monkeypatch.setattr(ledger_lease, "time", clock)
            ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
            try:
                distcp(CopyRequest(src_uri, tgt_uri, options=opts,
                                   progress=clock.pause_after(rnd.randint(1, 3))),
                       ledger=ledger, access=Access.from_env())
            except LeaseHeld as exc:
                assert "lost the lease" in str(exc) and clock.offset, (what, str(exc))
            else:  # only a run that never reached the pause may finish
                assert not clock.offset, f"a run paused past its lease went on writing: {what}"
            monkeypatch.setattr(ledger_lease, "time", clock.real)
        if fault == "none" and rnd_i and random.Random(seed * 104729 + rnd_i).random() < 0.3:
            fault = "takeover"  # drawn apart from ``rnd``: the seeded change sequences stay as they were
        if fault == "takeover":  # another run takes the target mid-run: its first step rewrites the fencing marker
            taken: list[str] = []

            def take(kind: str, n: int, taken: list[str] = taken) -> None:
                if kind == "bytes" and not taken:
                    got = copy_state.take_fence(tfs, troot, "copy:another-run:0001")
                    taken.append(str(got.token))

            try:
                distcp(CopyRequest(src_uri, tgt_uri, options=opts, progress=take), access=Access.from_env())
            except LeaseHeld as exc:  # exit 1, never 0: it places nothing more once the marker is not its own
                assert taken and "another run took the target" in str(exc), (what, str(exc))
            else:  # only a run that copied no byte may finish
                assert not taken, f"a run whose target another run took went on to exit 0: {what}"
        if fault == "kill":
            with pytest.raises((KeyboardInterrupt, DrtError)):
                distcp(CopyRequest(src_uri, tgt_uri, options=opts,
                                   progress=_kill_after(rnd.randint(1, 60_000))),
                       access=Access.from_env())
                raise KeyboardInterrupt("the run finished before the kill")
        refused: list[str] = []

        def second_run(kind: str, n: int, fault: str = fault, refused: list[str] = refused,
                       opts: CopyOptions = opts) -> None:  # a run through an alias of the target, meanwhile
            if fault == "alias" and kind == "plan" and not refused:
                with pytest.raises(LeaseHeld) as e:
                    distcp(CopyRequest(src_uri, f"file://{alias}", options=opts), access=Access.from_env())
                refused.append(str(e.value))

        mid = random.Random(seed * 7919 + rnd_i)  # a directory renamed during the walk (live listings)
        renaming = (_rename_during_the_walk(tree, mid) if src_kind != "webhdfs-snap" and rnd_i
                    and mid.random() < 0.35 else None)
        r = distcp(CopyRequest(src_uri, tgt_uri, options=opts, progress=second_run, open_fs=renaming or open_fs),
                   access=Access.from_env())
        if renaming is not None:
            what = f"seed {seed} round {rnd_i} (a directory renamed during the walk): {tree.log}"
            assert r.listing_proven or r.files_failed, (what, r.listing_changing)
        assert fault != "alias" or refused or r.files_copied + r.files_deleted + r.files_renamed == 0, what
        modes.add(r.mode)
        if "snapshot diff" in r.mode_reason:
            modes.add("snapshot-diff")
        assert r.files_failed == 0, (what, r.failures)
        got = _snapshot_of(tfs, troot)
        assert _snapshot_of(sfs, sroot) == tree.files, f"the test's model drifted (or the source was written): {what}"
        f = Filters(exclude=opts.exclude)
        want = {k: v for k, v in tree.files.items() if f.wanted(k) and (tgt_kind == "local" or _utf8(k))}
        # every wanted file, exactly; no other file at a wanted path (excluded paths: left as they are)
        extra = sorted(k for k in got if k not in want and f.wanted(k))
        assert not extra and not sorted(set(want) - set(got)), (what, r.mode, r.mode_reason, extra,
                                                                 sorted(set(want) - set(got)))
        bad = [k for k in want if got[k] != want[k]]
        assert not bad, (what, r.mode, r.mode_reason, bad)
        assert not list(tfs.list_tmp(troot)), what
        for k in want if preserve else ():  # permissions and times preserved, drift put back
            st, tt = os.stat(os.path.join(sroot, k)), os.stat(os.path.join(troot, k))
            assert (stat.S_IMODE(tt.st_mode), round(tt.st_mtime, 3)) == (stat.S_IMODE(st.st_mode), round(st.st_mtime, 3)), \
                (what, r.mode, k, oct(tt.st_mode), oct(st.st_mode), tt.st_mtime, st.st_mtime)
        assert sorted(os.listdir(outside)) == ["keep"] and (outside / "keep").read_bytes() == b"outside the target"
        if tgt_kind == "local":  # no directory the source does not have (type changes, deletes), no odd entry
            dirs = {posixpath.relpath(d, troot) for d in tfs.list_dirs(troot)}
            # the source's directories, and parents of excluded files left on the target
            held = set(tree.dirs()) | {"/".join(k.split("/")[:i]) for k in got for i in range(1, k.count("/") + 1)}
            assert dirs <= held, (what, sorted(dirs - held))
            assert not _odd_entries(troot), (what, _odd_entries(troot))
    want_modes = {"bootstrap", "fast-forward", "reconcile"} | ({"snapshot-diff"} if opts.snapshots else set())
    assert want_modes <= modes or rounds < 5, modes
