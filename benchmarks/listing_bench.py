"""-numListstatusThreads at every level (issue 42): one deep tree with everything under one
top-level directory, listed by

- ``serial``: one walk (``list_threads=1``, the filesystem's own ``list_files``);
- ``top-split``: the listing before issue 42 (the root read one level, each top-level subtree
  walked serially on one of N threads, the files gathered): its logic copied below as the baseline;
- ``parallel``: ``dr_toolkit.copy.listing`` with ``list_threads=N`` — every directory a unit of
  work any thread takes, files streamed through a bounded queue;
- ``find -type f -printf '%s %T@'`` (local only): a public peer that also stats every file.

Local disk: ``--files`` files over ``--dirs`` directories (a random tree, every directory under
``all/``), built once under ``--workdir`` and reused. HDFS: a smaller tree on a real MiniDFSCluster
(hadoop-client-minicluster, drt_servers.hdfs) read over WebHDFS, with the NameNode's listStatus and
getfileinfo calls per run from its audit log; on localhost, then with each request delayed by
``--rtt-ms`` (a NameNode that far away: simulated, the one layer here that is). Each listing runs in a fresh process: its
wall time (the listing alone, the entries consumed and counted, not kept), entries/s and peak
RSS (of the whole process, by GNU time; ``import`` is an idle one for reference) are printed, the median of
``--repeat`` runs, then the ratio against the top-level split and the goal.

    .venv/bin/python benchmarks/listing_bench.py [--files 200000 --dirs 20000 --threads 4[,8]]
        [--hdfs-files 4000 --hdfs-dirs 1000 --rtt-ms 0,2] [--no-hdfs] [--no-local] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GOAL = ("issue 42: listing parallel at every level — a tree held under one top-level directory lists "
        "on N threads, not one: parallel faster than the top-level split where the listing waits on "
        "a server (WebHDFS); on local disk under one interpreter lock, no slower than it")


# -- the baseline: the top-level split as it was before issue 42 (dr_toolkit/copy/listing.py at fd40146)
def top_split(side: Any, skipped: Any, dirs: dict[str, Any] | None) -> dict[str, Any]:
    import threading

    from dr_toolkit.copy.listing import Side, list_tree

    one = Side(side.loc, side.fs, side.root)
    lock = threading.Lock()

    def skip(path: str, reason: str) -> None:
        if skipped is not None:
            with lock:
                skipped(path, reason)

    level: dict[str, Any] = {}
    out = list_tree(one, side.root, skip, dirs=level, recursive=False)
    subs = sorted(d for d in level if d)

    def walk(d: str) -> tuple[dict[str, Any], dict[str, Any]]:
        tokens: dict[str, Any] = {}
        n = [0]

        def count(path: str, reason: str) -> None:
            n[0] += 1
            skip(path, reason)

        path = side.fs.join(side.root, d)
        got = list_tree(one, path, count, dirs=tokens)
        if not got and not n[0] and set(tokens) <= {d}:
            skip(path, "empty directory")
        return got, tokens

    with ThreadPoolExecutor(min(side.list_threads, max(1, len(subs)))) as pool:
        for got, tokens in pool.map(walk, subs):
            out.update(got)
            level.update(tokens)
    if dirs is not None:
        dirs.update(level)
    return out


# -- one listing in this process (the child)
def child(variant: str, uri: str, threads: int, rtt_ms: float) -> None:
    from dr_toolkit.copy.listing import Side, entries
    from dr_toolkit.fs.local import LocalFileSystem
    from dr_toolkit.fs.uri import parse_uri
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

    if variant == "import":
        print(json.dumps({"entries": 0, "skips": 0, "wall": 0.0}))
        return
    loc = parse_uri(uri)
    if rtt_ms > 0:  # a NameNode rtt_ms away (simulated: the real server here answers on localhost)
        import requests

        send = requests.Session.send

        def far(self: Any, *a: Any, **kw: Any) -> Any:
            time.sleep(rtt_ms / 1000)
            return send(self, *a, **kw)

        requests.Session.send = far  # type: ignore[method-assign]
    fs: Any = LocalFileSystem() if loc.kind == "local" else WebHdfsFileSystem(loc.namenodes, user="hdfs", timeout_s=60)
    n_skips = [0]

    def skip(path: str, reason: str) -> None:
        n_skips[0] += 1

    tokens: dict[str, Any] = {}
    t = time.monotonic()
    if variant == "top-split":
        n = len(top_split(Side(loc, fs, loc.path, list_threads=threads), skip, tokens))
    else:
        side = Side(loc, fs, loc.path, list_threads=1 if variant == "serial" else threads)
        n = sum(1 for _ in entries(side, None, skip, tokens))
    wall = time.monotonic() - t
    print(json.dumps({"entries": n, "skips": n_skips[0], "dirs": len(tokens), "wall": wall}))


def spawn(argv: list[str]) -> tuple[dict[str, Any], float, int]:
    """Run ``argv`` under GNU time; (its JSON line or {"lines": n} with "cpu": its user + system
    CPU s, wall s, its peak RSS in KiB).
    GNU time forks it from its own small process: a child of this one would carry this process's
    peak into its own (Linux keeps ru_maxrss across fork and exec)."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        t = time.monotonic()
        r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", rss_file.name, *argv], stdout=subprocess.PIPE)
        wall = time.monotonic() - t
        if r.returncode != 0:
            raise SystemExit(f"{argv[:4]}: exit {r.returncode}")
        rss_s, user, system = rss_file.read().split()[-3:]
        rss = int(rss_s)
    out = r.stdout
    line = out.decode().strip().splitlines()[-1] if out.strip() else "{}"
    try:
        res = json.loads(line)
    except ValueError:
        res = {"lines": out.count(b"\n")}
    res["cpu"] = float(user) + float(system)
    return res, wall, rss


def run_once(label: str, uri: str, threads: int, nn: Any = None, rtt_ms: float = 0.0) -> tuple[Any, ...]:
    before = nn_ops(nn) if nn is not None else None
    res, _w, rss = spawn([sys.executable, __file__, "--child", label, "--uri", uri, "--threads", str(threads),
                          "--rtt-ms", str(rtt_ms)])
    ops = {k: v - before[k] for k, v in nn_ops(nn).items()} if nn is not None and before is not None else {}
    return res["wall"], res, rss, ops


def report(label: str, threads: int, runs: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The median run of ``label`` (by wall time), printed."""
    wall, res, rss, ops = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    rate = res["entries"] / wall if wall else 0.0
    extra = ("  NameNode: " + ", ".join(f"{k} {v:,}" for k, v in ops.items())) if ops else ""
    print(f"  {label:<10} N={threads if label != 'serial' else 1:<2} {wall:7.2f} s  {rate:8,.0f} entries/s  "
          f"CPU {res['cpu']:6.2f} s  peak RSS {rss / 1024:7.1f} MiB  ({res['entries']:,} files, {res['skips']:,} skipped, "
          f"{res.get('dirs', 0):,} directory tokens; runs: {', '.join(f'{r[0]:.2f}' for r in runs)} s){extra}")
    return {"wall": wall, "cpu": res["cpu"], "rss": rss, "entries": res["entries"], "skips": res["skips"], "dirs": res.get("dirs"), "ops": ops}


def measure(label: str, uri: str, threads: int, repeat: int, nn: Any = None, rtt_ms: float = 0.0) -> dict[str, Any]:
    return report(label, threads, [run_once(label, uri, threads, nn, rtt_ms) for _ in range(repeat)])


def nn_ops(c: Any) -> dict[str, int]:
    """The NameNode's audit records under /bench so far, by command (WebHDFS calls are not counted
    in its NameNodeActivity metrics: the audit log is)."""
    recs = c.audit(None, "/bench")
    return {k: sum(r.get("cmd") == k for r in recs) for k in ("listStatus", "getfileinfo")}


def random_tree(files: int, dirs: int, seed: int = 42) -> tuple[list[str], list[str]]:
    """Directory paths under ``all`` (each under a random earlier one: depth grows like log n) and
    file paths spread over them."""
    rnd = random.Random(seed)
    made = ["all"]
    for i in range(dirs - 1):
        made.append(f"{rnd.choice(made)}/d{i}")
    return made, [f"{made[i % len(made)]}/f{i}" for i in range(files)]


def build_local(root: Path, files: int, dirs: int) -> None:
    done = root / ".built"
    if done.exists():
        return
    made, paths = random_tree(files, dirs)
    t = time.monotonic()
    for d in made:
        (root / d).mkdir(parents=True, exist_ok=True)
    for p in paths:
        (root / p).write_bytes(b"")
    done.write_text("ok")
    print(f"  built {files:,} files over {dirs:,} directories in {time.monotonic() - t:.1f} s")


def run_all(uri: str, threads: list[int], repeat: int, nn: Any = None, rtt_ms: float = 0.0) -> dict[str, dict[str, Any]]:
    """serial, then the top-level split and the parallel listing at each N, taken in turns
    (``repeat`` rounds: the machine's load drifts between rounds, not between the variants); the
    median of each; the ratios."""
    plan = [("serial", 1)] + [(v, n) for n in threads for v in ("top-split", "parallel")]
    runs: dict[tuple[str, int], list[tuple[Any, ...]]] = {k: [] for k in plan}
    for _ in range(repeat):
        for label, n in plan:
            runs[(label, n)].append(run_once(label, uri, n, nn, rtt_ms))
    res = {"import": measure("import", uri, 1, 1)}
    for label, n in plan:
        res[label if label == "serial" else f"{label}/{n}"] = report(label, n, runs[(label, n)])
    for n in threads:
        top, par = res[f"top-split/{n}"], res[f"parallel/{n}"]
        print(f"  N={n}: ratio top-split/parallel {top['wall'] / par['wall']:.2f}x (> 1: the parallel listing "
              f"faster), serial/parallel {res['serial']['wall'] / par['wall']:.2f}x, serial/top-split "
              f"{res['serial']['wall'] / top['wall']:.2f}x; CPU parallel/serial {par['cpu'] / res['serial']['cpu']:.2f}; peak RSS parallel {par['rss'] / 1024:.1f} MiB vs "
              f"top-split {top['rss'] / 1024:.1f} MiB")
    same = len({(r["entries"], r["skips"], r["dirs"]) for k, r in res.items() if k != "import"}) == 1
    print(f"  the same files, skips and tokens counted by every listing: {'yes' if same else 'NO'}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    ap.add_argument("--threads", default="4", help="N (comma-separated: each N run)")
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--dirs", type=int, default=20_000)
    ap.add_argument("--hdfs-files", type=int, default=4_000)
    ap.add_argument("--hdfs-dirs", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rtt-ms", default="0,2", help="HDFS: NameNode round trips to run at (ms, comma-separated; "
                    "above 0 simulated by a sleep before each request: the real NameNode is on localhost)")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "drt-listing-bench"))
    ap.add_argument("--no-local", action="store_true")
    ap.add_argument("--no-hdfs", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.uri, int(args.threads), float(args.rtt_ms))
        return 0
    threads = [int(x) for x in str(args.threads).split(",")]
    print(GOAL)
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, N = {threads} threads, "
          f"median of {args.repeat} runs")
    if not args.no_local:
        root = Path(args.workdir) / f"local-{args.files}-{args.dirs}"
        print(f"local disk: {args.files:,} files over {args.dirs:,} directories, all under {root}/all")
        build_local(root, args.files, args.dirs)
        spawn(["find", str(root), "-type", "f", "-printf", "%s %T@\n"])  # the page cache warm for every run
        res = run_all(str(root), threads, args.repeat)
        finds = []
        for _ in range(args.repeat):
            out, wall, rss = spawn(["find", str(root), "-type", "f", "-printf", "%s %T@\n"])
            finds.append((wall, out.get("lines", 0), rss, out["cpu"]))
        wall, lines, rss, cpu = sorted(finds)[len(finds) // 2]
        print(f"  {'find':<10} {'':4} {wall:7.2f} s  {lines / wall:8,.0f} entries/s  CPU {cpu:6.2f} s  peak RSS "
              f"{rss / 1024:7.1f} MiB  ({lines:,} lines, counted by this process through a pipe)")
        for n in threads:
            print(f"  N={n}: ratio parallel/find {res[f'parallel/{n}']['wall'] / wall:.2f}x (find: C, one thread, "
                  "no status objects)")
    if not args.no_hdfs:
        from drt_servers.hdfs import HdfsCluster

        work = Path(tempfile.mkdtemp(prefix="drt-listing-bench-hdfs-"))
        c = HdfsCluster("hdfs-bench", work).start()
        try:
            print(f"HDFS (MiniDFSCluster, WebHDFS): {args.hdfs_files:,} files over {args.hdfs_dirs:,} "
                  f"directories, all under /bench/all; {c.describe()}")
            made, paths = random_tree(args.hdfs_files, args.hdfs_dirs)
            t = time.monotonic()
            client = c.client()
            leaves = set(made) - {d.rsplit("/", 1)[0] for d in made if "/" in d}
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda d: client.makedirs(f"/bench/{d}"), sorted(leaves)))
                list(pool.map(lambda p: client.write(f"/bench/{p}", b"", overwrite=True), paths))
            print(f"  built in {time.monotonic() - t:.1f} s")
            uri = c.uri("/bench")
            measure("serial", uri, 1, 1)  # warm-up (the NameNode's JIT), not counted
            for rtt in (float(x) for x in str(args.rtt_ms).split(",")):
                print(f" NameNode round trip: {'localhost' if not rtt else f'+{rtt:g} ms (simulated)'}")
                run_all(uri, threads, args.repeat, c, rtt)
        finally:
            c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
