"""File replication speed and memory, each as a ratio against a baseline run in this script.

    .venv/bin/python benchmarks/copy_bench.py [--large-mib 128 --large-n 8] [--tree PATH]
                                              [--entries 1000000] [--planner streamed] [--parts 2]
                                              [--raw-runs] [--batch N] [--spark] [--workdir DIR]

1. large files: `drt distcp --update` throughput vs `cp -r`, through the CLI (goal ≥ 0.8×)
2. a real tree of many small files (default: this virtualenv's site-packages):
   `drt distcp --update` wall time vs `rsync -a`                             (goal ≤ 1.0×)
3. a re-run with nothing changed vs rsync -a's re-run                        (goal ≤ 1.5×, 0 bytes read)
4. planning a fast-forward of N manifest entries against a listing: time and peak RSS
                                                                             (goal < 30 s, < 2 GiB)
   (ratio against building the same dicts without planning)
   and the same diff planned by the streamed planner (copy/stream_plan.py: the listing and the base
   manifest sorted in zlib-compressed runs on disk, in two processes; the merge split by top-level
   names into --parts key ranges, each merged, planned and its part of the new manifest written by a
   process of its own): wall and CPU time, the memory of all processes together (RSS and PSS, sampled),
   the disk of the runs, beside issue 42's goals (10,000,000 entries within 2 GiB; 100,000,000 < 15 min
   and < 4 GiB — extrapolated from the measured rate unless N is 100,000,000), and the wall time on two
   idle cores (each phase's busiest process's CPU time: the machine is shared). --planner picks which
   (default: both up to 1,000,000 entries, only the streamed one above: the in-memory one needs ~1.2 KiB
   a file)
5. with --spark: the spark engine's figures beside the local engine's.
6. (--only 6) the copy run's own planning path, planning.plan_run, on a synthetic namespace of --entries files
   (a generated filesystem listed through listing.list_tree; [4]'s changes): the base manifest read from a local
   state location and decoded (StateStore.read_manifest, streamed), both listings, the chain check, the plan, the
   copies recorded and the next manifest written (StateStore.write_manifest, streamed), with the run's maps
   spilling to SQLite past spill.BATCH and (--run-maps both, the default) all in memory: wall, CPU, peak PSS
   beside issue 42's goal (10,000,000 files within 2 GiB).
Both sides of every ratio run on the same disk, from the page cache (each source is read once first).
`drt` runs with bytecode caching on (PYTHONDONTWRITEBYTECODE is dropped for its runs and one
warm-up run writes the .pyc files), as an installed toolkit runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DRT = [sys.executable, "-m", "dr_toolkit.cli.main"]


def timed(cmd: list[str], **kw: object) -> tuple[float, str]:
    os.sync()  # start every measurement with no dirty pages left by the one before
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed: {r.stderr[-2000:]}")
    return dt, r.stdout


def warm(path: Path) -> None:
    subprocess.run(["tar", "cf", "/dev/null", str(path)], check=False)
    for p in path.rglob("*"):
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(1 << 22):
                    pass


def distcp(src: Path, dst: Path, *extra: str) -> tuple[float, dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "PYTHONDONTWRITEBYTECODE")}
    env["DRT_STATE_DIR"] = str(dst.parent / "drt-state")  # the copy state, outside the target
    dt, out = timed([*DRT, "distcp", str(src), str(dst), "--update", "--json", *extra], env=env,
                    cwd=dst.parent)
    return dt, json.loads(out)


ENGINE_CHILD = r"""
import json, os, sys, time
from dr_toolkit.access import Access
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.topology import CopyOptions
os.environ["DRT_STATE_DIR"] = os.path.join(os.path.dirname(sys.argv[2]), "drt-state")  # the CLI runs' state
os.sync()
t = time.perf_counter()
r = distcp(CopyRequest("file://" + sys.argv[1], "file://" + sys.argv[2], options=CopyOptions(engine=sys.argv[3])),
           access=Access.from_env())
print(json.dumps({"t": time.perf_counter() - t, "bytes": r.bytes_copied}))
"""


def engine_only(src: Path, dst: Path, engine: str = "local") -> float:
    """The copy alone, timed inside an already started interpreter (no CLI start-up)."""
    r = subprocess.run([sys.executable, "-c", ENGINE_CHILD, str(src), str(dst), engine], capture_output=True,
                       text=True, cwd=REPO, check=True)
    return float(json.loads(r.stdout.strip().splitlines()[-1])["t"])


def bench_large(work: Path, n: int, mib: int, spark: bool) -> None:
    src = work / "large"
    src.mkdir()
    block = os.urandom(1 << 20)
    for i in range(n):
        with open(src / f"part-{i:04d}.bin", "wb") as f:
            for _ in range(mib):
                f.write(block)
    total = n * mib * (1 << 20)
    warm(src)
    os.sync()
    t_cp = t_drt = float("inf")
    for i in range(2):  # alternate, best of two: the machine is shared and the disk's writeback is bursty
        # every run writes a new directory and nothing is deleted before the last one: on ext4 an
        # inode freed in the last seconds is passed over (and re-read) by every create after it
        # (ialloc's recently_deleted), which slowed rsync and drt alike 3-6x after a deleted tree
        t_cp = min(t_cp, timed(["cp", "-r", str(src), str(work / f"large-cp{i}")])[0])
        dt, out = distcp(src, work / f"large-drt{i}")
        t_drt = min(t_drt, dt)
        assert out["bytes_copied"] == total, out
    t_eng = engine_only(src, work / "large-drt-eng")
    print(f"[1] large files {n} x {mib} MiB: cp -r {t_cp:.2f}s ({total / t_cp / 1e6:.0f} MB/s); "
          f"drt distcp --engine local {t_drt:.2f}s ({total / t_drt / 1e6:.0f} MB/s); "
          f"throughput ratio {t_cp / t_drt:.2f}x of cp (goal >= 0.8); "
          f"the copy alone (in-process, no CLI start-up) {t_eng:.2f}s = {t_cp / t_eng:.2f}x of cp")
    if spark:
        t_sp, out = distcp(src, work / "large-spark", "--engine", "spark")
        assert out["bytes_copied"] == total, out
        print(f"[5] spark engine, large files: {t_sp:.2f}s ({total / t_sp / 1e6:.0f} MB/s) = "
              f"{t_cp / t_sp:.2f}x of cp, {t_drt / t_sp:.2f}x of the local engine (includes Spark start-up)")
    for d in ("large-cp0", "large-cp1", "large-drt0", "large-drt1", "large-drt-eng", "large-spark"):
        shutil.rmtree(work / d, ignore_errors=True)
    shutil.rmtree(src)


def bench_tree(work: Path, tree: Path, spark: bool) -> None:
    files = sum(1 for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    size = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())
    warm(tree)
    t_rs = t_drt = float("inf")
    for i in range(2):  # alternate, best of two; new directories, nothing deleted in between (see bench_large)
        t_rs = min(t_rs, timed(["rsync", "-a", f"{tree}/", str(work / f"tree-rsync{i}")])[0])
        dt, out = distcp(tree, work / f"tree-drt{i}", "--preserve", "perm,times")
        t_drt = min(t_drt, dt)
    t_eng = engine_only(tree, work / "tree-drt-eng")
    t_again, again = distcp(tree, work / "tree-drt1", "--preserve", "perm,times")
    t_again = min(t_again, distcp(tree, work / "tree-drt1", "--preserve", "perm,times")[0])
    t_again_eng = engine_only(tree, work / "tree-drt1")
    print(f"[2] small files ({tree}: {files} files, {size / 1e6:.0f} MB): rsync -a {t_rs:.2f}s; "
          f"drt distcp {t_drt:.2f}s; wall-time ratio {t_drt / t_rs:.2f}x of rsync (goal <= 1.0); "
          f"copied {out['files_copied']} files; the copy alone (in-process) {t_eng:.2f}s = {t_eng / t_rs:.2f}x")
    t_rs2 = min(timed(["rsync", "-a", f"{tree}/", str(work / "tree-rsync1")])[0] for _ in range(2))
    print(f"[3] re-run, nothing changed: drt {t_again:.2f}s vs rsync -a re-run {t_rs2:.2f}s = "
          f"{t_again / t_rs2:.2f}x of rsync (goal <= 1.5), mode {again['mode']}, "
          f"bytes_copied {again['bytes_copied']}, files read {len(again['files_read'])} (goal 0); "
          f"in-process {t_again_eng:.2f}s; {100 * t_again / t_drt:.1f}% of the full copy")
    if spark:
        t_sp, out = distcp(tree, work / "tree-spark", "--engine", "spark")
        print(f"[5] spark engine, small files: {t_sp:.2f}s = {t_sp / t_rs:.2f}x of rsync, "
              f"{t_sp / t_drt:.2f}x of the local engine (includes Spark start-up)")
    for d in ("tree-rsync0", "tree-rsync1", "tree-drt0", "tree-drt1", "tree-drt-eng", "tree-spark"):
        shutil.rmtree(work / d, ignore_errors=True)


PLAN_CHILD = r"""
import resource, sys, time
from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy.plan import fast_forward
from dr_toolkit.fs.base import FileStatus
from dr_toolkit.topology import CopyOptions
n, do_plan = int(sys.argv[1]), sys.argv[2] == "plan"
t0 = time.perf_counter()
base = {f"d{i % 1000:04d}/part-{i:08d}.parquet": mf.Entry(1000 + i % 5000, 1.6e9 + i, f"COMPOSITE-CRC32C:{i:08x}",
                                                          1.7e9 + i, f"{i}:1{i}", f"COMPOSITE-CRC32C:{i:08x}",
                                                          f"{i + 7}:2{i}")
        for i in range(n)}
data = mf.encode(base, {"manifest_id": "bench"})
src = {}
for rel, e in base.items():
    i = int(rel[-16:-8])
    if i % 100 == 0:
        continue  # 1 % deleted
    if i % 100 == 1:
        src[rel] = FileStatus(rel, e.size + 10, e.mtime + 5, version=e.version)  # 1 % changed
    elif i % 1000 == 2:
        src["moved/" + rel] = FileStatus("moved/" + rel, e.size, e.mtime, version=e.version)  # 0.1 % renamed
    else:
        src[rel] = FileStatus(rel, e.size, e.mtime, version=e.version)
del base
t1 = time.perf_counter()
if do_plan:
    _, base = mf.decode(data)
    plan = fast_forward(src, base, CopyOptions(delete=True), reason="bench")
    out = mf.encode(plan.keep, {"manifest_id": "next"})
    info = f"copies={len(plan.copies)} deletes={len(plan.deletes)} keep={len(plan.keep)}"
else:
    info = ""
t2 = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {rss} {info}")
"""


def bench_plan(n: int) -> None:
    def child(mode: str) -> tuple[float, float, int, str]:
        r = subprocess.run([sys.executable, "-c", PLAN_CHILD, str(n), mode], capture_output=True, text=True,
                           cwd=REPO, check=True)
        a, b, rss, *info = r.stdout.split()
        return float(a), float(b), int(rss), " ".join(info)

    _, _, rss0, _ = child("baseline")
    setup, t_plan, rss, info = child("plan")
    print(f"[4] planning a diff of {n:,} manifest entries (decode base manifest, fast-forward plan, encode the "
          f"new manifest): {t_plan:.2f}s (goal < 30 s), peak RSS {rss / 2**30:.2f} GiB (goal < 2 GiB; "
          f"{rss / max(rss0, 1):.2f}x the RSS of only building the inputs, {rss0 / 2**30:.2f} GiB); {info}")


STREAM_CHILD = r"""
import os, resource, sys, time
from collections import Counter
from itertools import chain
from operator import itemgetter
from dr_toolkit.copy import stream_plan as sp
from dr_toolkit.copy.manifest import Entry
from dr_toolkit.fs.base import FileStatus
from dr_toolkit.topology import CopyOptions
n, work = int(sys.argv[1]), sys.argv[2]
batch = int(sys.argv[3]) if sys.argv[3] != "-" else sp.BATCH
sp.COMPRESS = sys.argv[4] == "1"
parts = int(sys.argv[5])


def base_entries(lo, hi):  # the in-memory measurement's base manifest, as a stream
    for i in range(lo, hi):
        yield (f"d{i % 1000:04d}/part-{i:08d}.parquet",
               Entry(1000 + i % 5000, 1.6e9 + i, f"COMPOSITE-CRC32C:{i:08x}", 1.7e9 + i, f"{i}:1{i}",
                     f"COMPOSITE-CRC32C:{i:08x}", f"{i + 7}:2{i}"))


def progress(what):  # to stderr as it goes: a run stopped part-way still says how far it got
    print(f"  [4s] {time.strftime('%H:%M:%S')} {what}: {time.perf_counter() - t1:.0f} s since the start, "
          f"CPU here {time.process_time() - c1:.0f} s, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)


def listing(n=n, say=False):  # the source as a listing yields it ((rel, FileStatus), in no useful order): the same changes
    for i in range(n):
        if say and i and i % 10_000_000 == 0:
            progress(f"listing: {i:,} entries read and sorted in batches")
        rel = f"d{i % 1000:04d}/part-{i:08d}.parquet"
        if i % 100 == 0:
            continue  # 1 % deleted
        size, mtime, version = 1000 + i % 5000, 1.6e9 + i, f"{i}:1{i}"
        if i % 100 == 1:
            yield rel, FileStatus(rel, size + 10, mtime + 5, version=version)  # 1 % changed
        elif i % 1000 == 2:
            yield "moved/" + rel, FileStatus("moved/" + rel, size, mtime, version=version)  # 0.1 % renamed
        else:
            yield rel, FileStatus(rel, size, mtime, version=version)


def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# setup (not counted): the base manifest, written in two processes (two files, read one after the other
# as one manifest: the same reads as one file)
base_paths = [os.path.join(work, f"base-{i}.jsonl.gz") for i in range(2)]


def write_base(i):
    with open(base_paths[i], "wb") as f:
        sp.write_manifest(f, {"manifest_id": "bench"} if i == 0 else None, base_entries(n * i // 2, n * (i + 1) // 2))
    return 0


t0 = t1 = time.perf_counter()
c1 = time.process_time()
sp.in_processes(write_base, 2)
progress("setup: base manifest written")
base_bytes = sum(map(os.path.getsize, base_paths))
setup_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
g = min(n, 1_000_000)
g0 = time.process_time()
for _ in listing(g):  # what generating the synthetic listing alone costs (on up to 1,000,000, scaled): a listing's cost
    pass
gen = (time.process_time() - g0) * n / g
t1 = time.perf_counter()
c1 = time.process_time()
kinds = Counter()


def manifest():
    for p in base_paths:
        with open(p, "rb") as f:
            yield from sp.read_manifest(f)


with sp.Workdir(work) as tmp:
    # the base manifest read and sorted in a forked process (the other core) while the listing is sorted here
    base_sorted = sp.sorted_in_process(manifest, sp.ENTRY, tmp, batch=batch, name="base")
    src = sp.SortedStream(listing(say=n >= 20_000_000), sp.STATUS, tmp, batch=batch, name="src")
    progress("listing sorted")
    t2 = time.perf_counter()
    cpu_listing = time.process_time() - c1
    base = base_sorted()
    t3 = time.perf_counter()
    sorted_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_base = sorted_cpu.ru_utime + sorted_cpu.ru_stime - setup_cpu.ru_utime - setup_cpu.ru_stime  # the sorter's
    progress("base manifest sorted")
    runs_disk = sum(os.path.getsize(os.path.join(tmp, p)) for p in os.listdir(tmp))
    for p in base_paths:  # its runs hold it now: off the disk (the 100,000,000 run's disk budget)
        os.unlink(p)
    sort_rss = rss()
    ranges = sp.split_ranges([src, base], parts)
    options = CopyOptions(update=True, delete=True)

    def part(i):  # one key range: merged, planned and its part of the new manifest written, in a process of its own
        lo, hi = ranges[i]
        c = time.process_time()
        run = sp.stream_fast_forward(src.part(lo, hi), base.part(lo, hi), options, reason="bench", batch=4096)
        got = Counter()

        def kept():  # the decisions counted by kind, the kept entries to the new manifest (a batch at a time)
            done = 0
            for b in run.batches():
                got.update(map(itemgetter(1), b))
                done += len(b)
                if n >= 20_000_000 and done // 5_000_000 != (done - len(b)) // 5_000_000:
                    progress(f"part {i}: {done:,} decided")
                yield [(d[0], d[2]) for d in b if d[1] == "keep"]

        with open(os.path.join(work, f"next-{i}.jsonl.gz"), "wb") as out, sp.gc_paused():
            written = sp.write_manifest(out, {"manifest_id": "next"} if i == 0 else None, chain.from_iterable(kept()))
        return dict(got), run.files_total, run.bytes_total, written, rss(), time.process_time() - c

    results = sp.in_processes(part, len(ranges))
    progress("every part planned")
    runs = len(src.runs) + len(base.runs)
t4 = time.perf_counter()  # the runs removed (the work directory's exit)
next_path = os.path.join(work, "next-0.jsonl.gz")
with open(next_path, "r+b") as out:  # the parts appended in key order: one manifest (gzip members concatenated)
    out.seek(0, os.SEEK_END)
    for i in range(1, len(ranges)):
        part_path = os.path.join(work, f"next-{i}.jsonl.gz")
        with open(part_path, "rb") as f:
            left = os.fstat(f.fileno()).st_size
            while left > 0:
                left -= os.copy_file_range(f.fileno(), out.fileno(), left)
        os.unlink(part_path)
next_bytes = os.path.getsize(next_path)
t5 = time.perf_counter()
for d, *_ in results:
    kinds.update(d)
files_total = sum(r[1] for r in results)
assert sum(r[3] for r in results) == kinds["keep"], kinds
cpu = time.process_time() - c1
child = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu += child.ru_utime + child.ru_stime - setup_cpu.ru_utime - setup_cpu.ru_stime  # the forked sorter's and workers'
worker_rss = sum(r[4] for r in results[1:])
bound = max(sort_rss + child.ru_maxrss * 1024, rss() + worker_rss)  # each process's peak added, per phase
if n <= 1_000_000:  # (not timed) the manifest in parts reads back as one manifest, in tree order
    with open(next_path, "rb") as f:
        keys = [sp.tree_key(p) for p, _ in sp.read_manifest(f)]
    assert len(keys) == kinds["keep"] and keys == sorted(keys)
print(f"{t1 - t0:.3f} {t5 - t1:.3f} {t2 - t1:.3f} {t3 - t2:.3f} {t4 - t3:.3f} {t5 - t4:.3f} {bound} {runs} {batch} "
      f"{cpu:.3f} {gen:.3f} {runs_disk} {base_bytes} {next_bytes} {len(ranges)} "
      f"{'/'.join(f'{r[5]:.1f}' for r in results)} {cpu_listing:.3f} {cpu_base:.3f} "
      f"copies={kinds.get('copy', 0)} deletes={kinds.get('delete', 0)} keep={kinds.get('keep', 0)} "
      f"files_total={files_total}")
"""

MIB = 2**20
GOAL_100M_S, GOAL_100M_RSS, GOAL_10M_RSS = 15 * 60, 4 * 2**30, 2 * 2**30


RUN_CHILD = r"""
import os, resource, sys, time
from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import spill
from dr_toolkit.copy import stream_plan as sp
from dr_toolkit.copy.listing import Side
from dr_toolkit.copy.planning import Listed, plan_run
from dr_toolkit.copy.run import Base, CopyRun
from dr_toolkit.copy.state import StateStore
from dr_toolkit.fs.base import FileStatus, FileSystem
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.topology import CopyOptions
import hashlib
n, work, spilling = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
if not spilling:
    spill.BATCH = 1 << 62  # the peer: every map an ordinary dict (as before SpillMap)


def entry(i):
    return mf.Entry(1000 + i % 5000, 1.6e9 + i, f"COMPOSITE-CRC32C:{i:08x}", 1.7e9 + i, f"{i}:1{i}",
                    f"COMPOSITE-CRC32C:{i:08x}", f"{i + 7}:2{i}")


def rel(i):
    return f"d{i % 1000:04d}/part-{i:08d}.parquet"


class Synthetic(FileSystem):
    # a namespace generated as it is listed: the source (copy_bench [4]'s changes: 1 % deleted, 1 % changed,
    # 0.1 % renamed) or the target (what the base manifest recorded of it)
    kind = "synthetic"

    def __init__(self, side):
        self.side = side

    def list_files(self, root, skipped=None, dirs=None, recursive=True):
        for i in range(n):
            r, e = rel(i), entry(i)
            if self.side == "tgt":
                yield FileStatus(f"{root}/{r}", e.size, e.tmtime, version=e.tversion)
                continue
            if i % 100 == 0:
                continue
            if i % 100 == 1:
                yield FileStatus(f"{root}/{r}", e.size + 10, e.mtime + 5, version=e.version)
            elif i % 1000 == 2:
                yield FileStatus(f"{root}/moved/{r}", e.size, e.mtime, version=e.version)
            else:
                yield FileStatus(f"{root}/{r}", e.size, e.mtime, version=e.version)


def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


store = StateStore(parse_uri("file://" + os.path.join(work, "state")), LocalFileSystem(), "file:///bench/src",
                   "file:///bench/tgt")
path = store.manifest_path("base")
os.makedirs(os.path.dirname(path))
with open(path, "wb") as f:  # setup (not counted): the base manifest, streamed to the state location
    sp.write_manifest(f, {"manifest_id": "base", "pending": [], "filters": None}, ((rel(i), entry(i)) for i in range(n)))
sha = hashlib.sha256()
with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        sha.update(chunk)
rss_setup = rss()
print(f"  [6] {time.strftime('%H:%M:%S')} base manifest written ({os.path.getsize(path) / 2**20:,.0f} MiB)",
      file=sys.stderr, flush=True)
t0, c0 = time.perf_counter(), time.process_time()
got = store.read_manifest("base", sha.hexdigest())  # the run's own read: digest checked, then decoded
assert got is not None
header, entries = got
t1 = time.perf_counter()
rss_read = rss()
options = CopyOptions(update=True, delete=True)
src = Side(parse_uri("file:///bench/src"), Synthetic("src"), "/bench/src")
tgt = Side(parse_uri("file:///bench/tgt"), Synthetic("tgt"), "/bench/tgt")
run = CopyRun(src, tgt, None, options, None, False, None, None, (None, None), None, time.time(), None)
plan, _ = plan_run(run, Base("base", header, entries, "", None), None, Listed())
t2 = time.perf_counter()
for t in plan.copies:  # the copies recorded as account() records them (no bytes copied)
    plan.keep[t.rel] = mf.Entry(t.size, t.mtime, "COMPOSITE-CRC32C:0", 1.8e9, t.version, None, "t")
uri, _ = store.write_manifest("next", plan.keep, {"manifest_id": "next"})  # the run's own write (commit.py)
out_size = os.path.getsize(store.manifest_path("next"))
t3 = time.perf_counter()
info = (f"mode={plan.mode} copies={len(plan.copies)} deletes={len(plan.deletes)} keep={len(plan.keep)} "
        f"spilled={getattr(plan.keep, 'spilled', False)} ru_maxrss_after_read_MiB={rss_read // 2**20}")
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f} {time.process_time() - c0:.3f} {rss()} {rss_setup} {out_size} {info}")
"""


def bench_run_plan(n: int, work: Path, spilling: bool) -> None:
    """[6] the copy run's own planning path on a synthetic namespace of ``n`` files (copy_bench [4]'s
    changes): the base manifest read from a local state location and decoded
    (``StateStore.read_manifest``, its digest checked), ``planning.plan_run`` (both
    listings through ``listing.list_tree`` from a generated filesystem, the chain check, the streamed
    fast-forward, the steps after the rules), the copies recorded in ``Plan.keep`` and the next
    manifest written to the state location (``StateStore.write_manifest``) — with the run's maps spilling past ``spill.BATCH``
    (``spilling``) or all in memory (the peer). PSS of the process sampled every 0.5 s; temporary
    files (sorted runs, SQLite maps) in the work directory (TMPDIR), its disk sampled too."""

    tmp = work / ("run-spill" if spilling else "run-memory")
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "SQLITE_TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-c", RUN_CHILD, str(n), str(tmp), "1" if spilling else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    out, err, peak, load0, load1 = _watched(proc, lambda: _disk(tmp) + _unlinked(proc.pid))
    shutil.rmtree(tmp, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"plan_run benchmark failed: {err[-3000:]}")
    t_dec, t_plan, t_enc, cpu, maxrss, rss_setup, next_bytes, *info = out.split()
    wall = float(t_dec) + float(t_plan) + float(t_enc)
    mem = max(peak["pss"], 1)
    print(f"[6] the copy run's planning path ({'maps spill past spill.BATCH' if spilling else 'PEER: every map in memory'}"
          f") on {n:,} files: read + decode the base manifest {float(t_dec):.1f}s, plan_run (listings, chain check, plan) "
          f"{float(t_plan):.1f}s, copies recorded + next manifest written {float(t_enc):.1f}s = {wall:.1f}s wall, "
          f"{float(cpu):.1f}s CPU; peak PSS {mem / MIB:,.0f} MiB sampled (ru_maxrss {int(maxrss) / MIB:,.0f} MiB, "
          f"{int(rss_setup) / MIB:,.0f} MiB after the setup), disk of its temporary files at the peak "
          f"{peak['disk'] / MIB:,.0f} MiB (the base manifest's file and SQLite's unlinked files included); next manifest "
          f"{int(next_bytes) / MIB:,.0f} MiB; load {load0[0]:.1f} before, {load1[0]:.1f} after; {' '.join(info)}")
    scaled = mem * 10_000_000 / n
    print(f"     goal: 10,000,000 files within 2 GiB: {mem / MIB:,.0f} MiB at {n:,}"
          + (f" ({'within' if mem < GOAL_10M_RSS else 'OVER'} 2 GiB)" if n >= 10_000_000 else
             f"; x{10_000_000 / n:g} linearly: {scaled / MIB:,.0f} MiB (an upper bound where it is bounded)"))


def _watched(proc: subprocess.Popen[str], disk: Callable[[], int]
             ) -> tuple[str, str, dict[str, int], tuple[float, ...], tuple[float, ...]]:
    """Wait for ``proc``, sampling every 0.5 s the RSS and PSS of it and its children and ``disk()``:
    (stdout, stderr, the peaks, the load average before, after)."""
    import threading

    peak = {"rss": 0, "pss": 0, "disk": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            rss, pss = _tree_memory(proc.pid)
            peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)
            peak["disk"] = max(peak["disk"], disk())

    load0 = os.getloadavg()
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    done.set()
    th.join()
    return out, err, peak, load0, os.getloadavg()


def _unlinked(pid: int) -> int:
    """The disk of the files a process holds open after unlinking them (SQLite's temporary databases)."""
    total = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").endswith(" (deleted)"):
                    total += os.stat(f"/proc/{pid}/fd/{fd}").st_blocks * 512
            except OSError:
                pass
    except OSError:
        pass
    return total


def _tree_memory(root: int) -> tuple[int, int]:
    """RSS and PSS (proportional: pages shared after a fork counted once) of a process and its descendants
    (found through /proc/<pid>/task/<tid>/children: no walk over every process of the machine)."""
    rss = pss = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            pass
    return rss, pss


def _disk(path: Path) -> int:
    total = 0
    for p, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(p, name)).st_blocks * 512
            except OSError:
                pass
    return total


def bench_stream_plan(n: int, work: Path, batch: int | None, compress: bool = True, parts: int = 2) -> None:
    """[4] by the streamed planner: a synthetic namespace (the in-memory measurement's changes) fed
    through the same code path (SortedStream of a listing's (rel, FileStatus), of a manifest read
    as a stream; stream_fast_forward over each key range of split_ranges, each in a process of its
    own; the new manifest written as the decisions come, its parts concatenated). The memory of all
    its processes together and the disk of the work directory are sampled every 0.5 s from here."""

    proc = subprocess.Popen([sys.executable, "-c", STREAM_CHILD, str(n), str(work), str(batch or "-"),
                             "1" if compress else "0", str(parts)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE if n < 20_000_000 else None, text=True,
                            cwd=REPO)
    out, err, peak, load0, load1 = _watched(proc, lambda: _disk(work))
    if proc.returncode != 0:
        raise SystemExit(f"streamed planner failed: {(err or '(its stderr above)')[-2000:]}")
    (setup, t, t_src, t_base, t_merge, t_cat, bound, runs, b, cpu, gen, disk, base_bytes, next_bytes, nparts,
     part_cpu, cpu_listing, cpu_base, *info) = out.split()
    secs, cpu_s = float(t), float(cpu)
    rate = n / secs
    t100, c100 = 100_000_000 / rate, 100_000_000 * cpu_s / n
    label = "measured" if n >= 100_000_000 else "extrapolated from this rate, not run"
    print(f"[4s] streamed planning of {n:,} manifest entries (sort the listing while a forked process reads and "
          f"sorts the base manifest; split by top-level names into {nparts} key ranges, each merged, planned and "
          f"its part of the new manifest written by a process of its own; batch {int(b):,}, {runs} sorted runs, "
          f"{int(disk) / MIB:,.0f} MiB on disk{', zlib level 1' if compress else ', uncompressed'}): "
          f"{secs:.1f}s wall = {rate:,.0f} entries/s (listing sorted {float(t_src):.1f}s, then waiting for the "
          f"manifest's sort {float(t_base):.1f}s, split merge + write {float(t_merge):.1f}s (CPU per part "
          f"{part_cpu} s), parts joined {float(t_cat):.1f}s); CPU time of all processes {cpu_s:.1f}s = "
          f"{n / cpu_s:,.0f} entries per CPU-second, of which generating the synthetic listing {float(gen):.1f}s; "
          f"writing the base manifest first ({int(base_bytes) / MIB:,.0f} MiB, two processes): {float(setup):.1f}s, "
          f"not counted); load average {load0[0]:.1f} before, {load1[0]:.1f} after, on {os.cpu_count()} cores; "
          f"new manifest {int(next_bytes) / MIB:,.0f} MiB; {' '.join(info)}")
    critical = max(float(cpu_listing), float(cpu_base)) + max(map(float, part_cpu.split("/")))
    print(f"     on two idle cores (each phase as long as its busiest process's CPU time: the listing's sort "
          f"{float(cpu_listing):.1f}s beside the manifest's {float(cpu_base):.1f}s, then the busiest part "
          f"{max(map(float, part_cpu.split('/'))):.1f}s): {critical:.1f}s = {critical * 100_000_000 / n / 60:.1f} min "
          f"at 100,000,000 ({'within' if critical * 100_000_000 / n < GOAL_100M_S else 'OVER'} 15 min; "
          f"{'measured' if n >= 100_000_000 else 'extrapolated linearly'}); without generating the synthetic listing "
          f"(a listing's own cost, {float(gen):.1f}s): "
          f"{max(float(cpu_listing) - float(gen), float(cpu_base)) + max(map(float, part_cpu.split('/'))):.1f}s")
    print(f"     memory of all processes together, sampled every 0.5 s: peak RSS {peak['rss'] / MIB:,.0f} MiB "
          f"(pages a fork shares counted in each), peak PSS {peak['pss'] / MIB:,.0f} MiB (counted once); each "
          f"process's own peak added per phase: {int(bound) / MIB:,.0f} MiB. Disk of the work directory at its "
          f"peak: {peak['disk'] / MIB:,.0f} MiB (runs {int(disk) / MIB:,.0f} MiB)")
    mem = max(peak["pss"], 1)
    if n <= 10_000_000:
        print(f"     goal 10,000,000 entries within 2 GiB: at {n:,}: {mem / MIB:,.0f} MiB "
              f"({'within' if mem < GOAL_10M_RSS else 'OVER'} 2 GiB)")
    if n >= 100_000_000:
        print(f"     goal 100,000,000 entries < 15 min and < 4 GiB: {secs / 60:.1f} min wall "
              f"({'within' if secs < GOAL_100M_S else 'OVER'} 15 min), {cpu_s / 60:.1f} min of CPU; "
              f"{mem / MIB:,.0f} MiB ({'within' if mem < GOAL_100M_RSS else 'OVER'} 4 GiB); measured")
    else:
        print(f"     goal 100,000,000 entries < 15 min and < 4 GiB: {t100 / 60:.1f} min wall at this rate ({label}; "
              f"{'within' if t100 < GOAL_100M_S else 'OVER'} 15 min), {c100 / 60:.1f} min of CPU; memory is "
              f"O(batch) + O(runs x chunk): {mem / MIB:,.0f} MiB at {n:,}; runs on disk at 100,000,000 "
              f"{int(disk) * 100_000_000 / n / 2**30:,.1f} GiB ({label})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--large-n", type=int, default=8)
    ap.add_argument("--large-mib", type=int, default=128)
    ap.add_argument("--tree", default=str(REPO / ".venv/lib/python3.11/site-packages"))
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--planner", choices=["auto", "memory", "streamed", "both"], default="auto",
                    help="[4]: which planner (auto: both up to 1,000,000 entries, else streamed)")
    ap.add_argument("--batch", type=int, default=None, help="[4] streamed: entries per sorted run")
    ap.add_argument("--raw-runs", action="store_true", help="[4] streamed: runs' chunks not compressed (zlib level 1 "
                    "by default)")
    ap.add_argument("--parts", type=int, default=2, help="[4] streamed: key ranges merged in processes of their own")
    ap.add_argument("--only", default="1,2,4", help="which measurements (1=large, 2=tree+rerun, 4=plan, "
                    "6=the copy run's plan_run path)")
    ap.add_argument("--run-maps", choices=["spill", "memory", "both"], default="both",
                    help="[6]: the run's maps spilling past spill.BATCH, all in memory (the peer), or both")
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="drt-copy-bench-", dir=a.workdir))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([*DRT, "--help"], capture_output=True, env=env, check=False)  # warm-up: write the .pyc
    try:
        only = set(a.only.split(","))
        if "1" in only:
            bench_large(work, a.large_n, a.large_mib, a.spark)
        if "2" in only:
            bench_tree(work, Path(a.tree), a.spark)
        if "4" in only:
            planner = a.planner if a.planner != "auto" else ("both" if a.entries <= 1_000_000 else "streamed")
            if planner in ("memory", "both"):
                bench_plan(a.entries)
            if planner in ("streamed", "both"):
                bench_stream_plan(a.entries, work, a.batch, not a.raw_runs, a.parts)
        if "6" in only:
            if a.run_maps in ("spill", "both"):
                bench_run_plan(a.entries, work, True)
            if a.run_maps in ("memory", "both"):
                bench_run_plan(a.entries, work, False)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
