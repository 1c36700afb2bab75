"""Spark on YARN beside Hadoop DistCp on the same YARN — DistCp's home ground (issue 41).

One real YARN (drt_servers/yarn.py: a ResourceManager and a NodeManager from Hadoop 3.4.1, each its
own JVM, the NodeManager running MapReduce's shuffle service) over the hot HDFS pair (HA
nameservice ``hdfs://drt``), and the cold cluster. The same generated tree on hot (``--small``
files of ``--small-size`` bytes in 10 directories + ``--large`` files of ``--large-mib`` MiB) is
copied hot → cold by

- Hadoop DistCp 3.4.1 as a MapReduce job on that YARN (``org.apache.hadoop.tools.DistCp -update -m
  N``: ``java -cp <HADOOP_CONF_DIR>:<the MapReduce jars>``, ``hdfs://`` RPC, N map containers), and
- ``drt distcp --update --engine spark --spark-master yarn`` (client mode, N executors × 1 core,
  the packed environment shipped with spark.archives, WebHDFS),

each into its own target, three times: the bootstrap copy, a re-run with nothing changed, and a
re-run after 1 % of the files were rewritten (new bytes, new size) — ``-update`` is DistCp's
incremental mode. After every run both copies are checked equal to the source (the same paths,
SHA-256 of every file's bytes read back) before any figure is printed, and each run is checked to
have been one YARN application that FINISHED/SUCCEEDED. Printed per run: wall time (each tool's
JVM/Spark start-up included: what a user waits for), bytes/s of the bootstrap, and the ratio
drt/DistCp beside the goal: drt no slower than DistCp (ratio ≤ 1.0, issue 22's HDFS goal, here on
DistCp's home ground). Which tool runs first alternates between runs (the page cache).

    nice -n 10 .venv/bin/python benchmarks/yarn_distcp_bench.py [--small 1000 --small-size 16384
        --large 4 --large-mib 64 --maps 2 --changed-pct 1 --keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drt_servers.hdfs import HdfsCluster, hdfs_pair
from drt_servers.yarn import YarnCluster

DRT = [sys.executable, "-m", "dr_toolkit.cli.main"]


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def tree(c: HdfsCluster, root: str) -> dict[str, str]:
    """Relative path → SHA-256 of the bytes of every file under ``root`` (read back over WebHDFS)."""
    cl = c.client()
    out = {}
    for d, _dirs, files in cl.walk(root):
        for f in files:
            h = hashlib.sha256()
            with cl.read(f"{d}/{f}", chunk_size=1 << 20) as r:
                for chunk in r:
                    h.update(chunk)
            out[f"{d}/{f}"[len(root) + 1:]] = h.hexdigest()
    return out


def spark_conf(d: Path, executors: int) -> Path:
    """spark-defaults.conf: Spark's jars from the node's installation, ``executors`` executors of 1 core."""
    import pyspark

    d.mkdir(parents=True, exist_ok=True)
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    (d / "spark-defaults.conf").write_text(
        f"spark.yarn.jars local:{jars}/*\nspark.executor.instances {executors}\nspark.executor.cores 1\n"
        "spark.executor.memory 512m\nspark.yarn.am.memory 256m\nspark.driver.memory 512m\n")
    return d


def run(label: str, argv: list[str], env: dict[str, str], cwd: Path, yarn: YarnCluster) -> dict[str, Any]:
    before = yarn.application_dirs()
    la = os.getloadavg()[0]
    t, t_epoch = time.monotonic(), time.time()
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t
    for stream, text in (("out", r.stdout), ("err", r.stderr)):
        (cwd / f"{label.replace(' ', '-').replace('%', 'pct')}.std{stream}").write_text(text)
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-5000:])
        raise SystemExit(f"{label}: exit {r.returncode}")
    out: dict[str, Any] = {"wall": wall, "app": "no YARN application", "containers": 0, "load": la}
    if r.stdout.strip().startswith("{"):
        out["json"] = json.loads(r.stdout)
    apps = yarn.application_dirs() - before
    if not apps and label.startswith("drt") and out.get("json", {}).get("files_copied") == 0:
        return out  # nothing to copy: the plan is made in the driver and no Spark application starts
    if len(apps) != 1:
        raise SystemExit(f"{label}: {len(apps)} YARN applications ran, not 1: {sorted(apps)}")
    app = apps.pop()
    deadline = time.monotonic() + 120  # the client returns once the AM unregisters: FINISHING, then FINISHED
    while (state := yarn.application_state(app)) not in ("FINISHED", "FAILED", "KILLED") and time.monotonic() < deadline:
        time.sleep(0.5)
    final = yarn.final_status(app)
    if (state, final) != ("FINISHED", "SUCCEEDED"):
        raise SystemExit(f"{label}: {app} {state}/{final}")
    out.update(app=app, containers=len({k.split("/")[0] for k in yarn.container_logs(app)}))
    # when YARN started the containers (their launch scripts, written as each is launched), from the run's start
    launched = sorted(f.stat().st_mtime - t_epoch for d in yarn.log_dirs for f in (d / app).glob("container_*/launch_container.sh"))
    if len(launched) >= 2:
        out["launched"] = (launched[0], launched[1])
    try:  # when the ResourceManager's JSON keeps them: where the wall time went, around the application
        a = yarn.rest(f"/apps/{app}").get("app") or {}
        if int(a.get("startedTime") or 0) > 0 and int(a.get("finishedTime") or 0) > 0:
            out["yarn_span"] = (a["startedTime"] / 1000 - t_epoch, a["finishedTime"] / 1000 - t_epoch)
    except (OSError, ValueError):
        pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=1000, help="small files")
    ap.add_argument("--small-size", type=int, default=16 << 10, help="bytes per small file")
    ap.add_argument("--large", type=int, default=4, help="large files")
    ap.add_argument("--large-mib", type=int, default=64, help="MiB per large file")
    ap.add_argument("--maps", type=int, default=2, help="DistCp's -m = Spark executors (1 core each)")
    ap.add_argument("--changed-pct", type=float, default=1.0, help="%% of the files rewritten before the last run")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (the servers' data and logs)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="drt-yarn-distcp-bench-"))
    print(f"load average at start {load()} (1/5/15 min; 2 cores); work dir {root}")
    t0 = time.monotonic()
    hot, cold = hdfs_pair(root / "hdfs")
    yarn: YarnCluster | None = None
    try:
        yarn = YarnCluster("yarn", root / "yarn", hot).start()
        print(f"servers up in {time.monotonic() - t0:.1f} s: {hot.describe()}; {cold.describe()}; {yarn.describe()}")
        t = time.monotonic()
        files = {f"small/d{i % 10}/f{i:05d}": args.small_size for i in range(args.small)}
        files.update({f"large/b{i}": args.large_mib << 20 for i in range(args.large)})
        for rel, size in files.items():
            hot.write(f"/bench/{rel}", os.urandom(size))
        total = sum(files.values())
        print(f"source: {args.small:,} × {args.small_size:,} B + {args.large} × {args.large_mib} MiB = "
              f"{len(files):,} files, {total / 2**20:.1f} MiB, written in {time.monotonic() - t:.1f} s")

        conf_env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("PYSPARK_GATEWAY", "DRT_SPARK_MASTER", "HADOOP_CONF_DIR", "YARN_CONF_DIR",
                                         "PYTHONPATH", "SPARK_CONF_DIR"))}
        conf_env.update(yarn.env(), HADOOP_USER_NAME="hdfs", SPARK_LOCAL_IP="127.0.0.1")
        drt_env = {**conf_env, "DRT_STATE_DIR": str(root / "state"),
                   "SPARK_CONF_DIR": str(spark_conf(root / "spark-conf", args.maps)),
                   # the node has no Python with the toolkit: the executors run the shipped environment
                   "PYSPARK_PYTHON": "/nonexistent/python-not-on-the-nodes"}
        cold_rpc = f"hdfs://127.0.0.1:{cold.rpc_port}"
        tools = {
            "DistCp": (yarn.mapreduce_argv("org.apache.hadoop.tools.DistCp", [
                "-update", "-m", str(args.maps), "hdfs://drt/bench", f"{cold_rpc}/distcp"]), conf_env),
            "drt": ([*DRT, "--json", "distcp", "--update", hot.uri("/bench"), cold.uri("/drt"), "--engine", "spark",
                     "--spark-master", "yarn"], drt_env),
        }
        res: dict[str, dict[str, Any]] = {}
        phases = ("bootstrap", "no change", f"{args.changed_pct:g} % changed")
        for n, phase in enumerate(phases):
            if n == 2:
                k = max(1, round(len(files) * args.changed_pct / 100))
                for rel in sorted(f for f in files if f.startswith("small/"))[::max(1, args.small // k)][:k]:
                    files[rel] += 1
                    hot.write(f"/bench/{rel}", os.urandom(files[rel]))
                print(f"{k} files rewritten on hot (new bytes, one byte longer)")
            order = list(tools) if n % 2 == 0 else list(tools)[::-1]
            want = tree(hot, "/bench")
            for name in order:
                argv, env = tools[name]
                r = res[f"{name} {phase}"] = run(f"{name} {phase}", argv, env, root, yarn)
                got = tree(cold, "/distcp" if name == "DistCp" else "/drt")
                if got != want:
                    bad = sorted(set(got.items()) ^ set(want.items()))[:5]
                    raise SystemExit(f"{name} {phase}: the copy differs from the source: {bad}")
                extra = ""
                if "json" in r:
                    j = r["json"]
                    extra = f", {j['files_copied']:,} files / {j['bytes_copied']:,} B copied, {j['files_skipped']:,} skipped"
                if "launched" in r:
                    extra += "; AM launched at +{:.1f} s, first worker at +{:.1f} s".format(*r["launched"])
                if "yarn_span" in r:
                    extra += "; the application ran from +{:.1f} s to +{:.1f} s".format(*r["yarn_span"])
                print(f"  {phase:<13} {name:<6} {r['wall']:7.1f} s  ({r['app']}, {r['containers']} containers, "
                      f"load {r['load']:.1f}{extra}); copy == source: {len(got):,} files, SHA-256 equal")
        print(f"\nsource {len(files):,} files, {total / 2**20:.1f} MiB; DistCp -m {args.maps} vs drt on "
              f"{args.maps} executors × 1 core; the same YARN (4 GiB, 4 vcores), the same HDFS pair")
        for phase in phases:
            d, h = res[f"drt {phase}"], res[f"DistCp {phase}"]
            rate = ""
            if phase == "bootstrap":
                rate = f"; {total / d['wall'] / 2**20:.1f} MiB/s vs {total / h['wall'] / 2**20:.1f} MiB/s"
            ratio = d["wall"] / h["wall"]
            print(f"{phase:<13}: drt {d['wall']:.1f} s, DistCp {h['wall']:.1f} s{rate} — ratio drt/DistCp "
                  f"{ratio:.2f} (goal ≤ 1.0: drt no slower than DistCp on its home ground — "
                  f"{'met' if ratio <= 1.0 else 'NOT met'})")
        print(f"load average at end {load()}; total {time.monotonic() - t0:.0f} s")
    finally:
        if yarn is not None:
            yarn.stop()
        cold.stop()
        hot.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
