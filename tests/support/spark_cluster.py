"""A real Spark standalone cluster on 127.0.0.1: one master and N workers, each its own JVM,
started from the pyspark distribution (``SPARK_HOME`` = the pyspark package directory).

Used by the cluster tests (session fixture :func:`spark_cluster`, marker ``spark_cluster``)
and by ``make spark-cluster`` / ``make spark-cluster-stop``::

    python -m tests.support.spark_cluster start --dir .spark-cluster   # prints the master URL
    python -m tests.support.spark_cluster stop --dir .spark-cluster

Everything binds to 127.0.0.1 (RPC and web UIs). Executors run the workers' ``app-*/<n>/``
directories, whose ``stderr`` files the tests read.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import children, free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def cluster_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_PUBLIC_DNS": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m", "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"})
    return env


@dataclass
class SparkCluster:
    master_url: str
    master_ui: str
    base: Path
    pids: list[int] = field(default_factory=list)  # master first, then the workers

    @property
    def work_dirs(self) -> list[Path]:
        return sorted(self.base.glob("worker-*/work"))

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.master_ui + "/json/", timeout=5) as r:
            out: dict[str, Any] = json.loads(r.read())
            return out

    def executor_pids(self) -> list[int]:
        """PIDs of the executor JVMs the workers launched (children of the worker processes)."""
        return children(set(self.pids[1:]), b"CoarseGrainedExecutorBackend")

    def executor_logs(self) -> str:
        """Everything the executors wrote to their stdout/stderr files."""
        return "".join(p.read_text(errors="replace") for w in self.work_dirs for p in w.glob("app-*/*/std*"))

    def stop(self) -> None:
        for pid in reversed(self.pids):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        for pid in self.pids:
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            if _alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.pids = []


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and ") Z" in stat.read_text())


def _spawn(args: list[str], log: Path) -> int:
    cls = str(spark_home() / "bin" / "spark-class")
    with log.open("ab") as out:
        p = subprocess.Popen([cls, *args], env=cluster_env(), stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
    return p.pid


def start_cluster(base: Path, workers: int = 2, timeout_s: float = 120) -> SparkCluster:
    """Start a master and ``workers`` workers (1 core, 1 GiB each); return when all are ALIVE."""
    base.mkdir(parents=True, exist_ok=True)
    port, ui = free_port(), free_port()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", base)
    cluster.pids.append(_spawn(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                str(port), "--webui-port", str(ui)], base / "master.log"))
    for i in range(workers):
        wd = base / f"worker-{i}" / "work"
        wd.mkdir(parents=True, exist_ok=True)
        cluster.pids.append(_spawn(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                                    "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(wd),
                                    cluster.master_url], base / f"worker-{i}.log"))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if cluster.state().get("aliveworkers") == workers:
                return cluster
        except OSError:
            pass
        if time.monotonic() > deadline or not all(_alive(p) for p in cluster.pids):
            logs = "".join(p.read_text(errors="replace")[-2000:] for p in sorted(base.glob("*.log")))
            cluster.stop()
            raise RuntimeError(f"the Spark standalone cluster did not come up:\n{logs}")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """One standalone cluster (master + 2 workers) for the whole test session."""
    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spark_cluster", description="a local Spark standalone cluster on 127.0.0.1")
    ap.add_argument("action", choices=["start", "stop"])
    ap.add_argument("--dir", default=".spark-cluster")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    base = Path(a.dir).resolve()
    state = base / "cluster.json"
    if a.action == "start":
        if state.exists():
            print(f"already running? {state} exists (make spark-cluster-stop first)", file=sys.stderr)
            return 2
        c = start_cluster(base, a.workers)
        state.write_text(json.dumps({"master_url": c.master_url, "master_ui": c.master_ui, "pids": c.pids}))
        print(f"{c.master_url}  (UI {c.master_ui}; {a.workers} workers; logs in {base})")
        print(f"use it: drt verify … --spark-master {c.master_url}  or  export DRT_SPARK_MASTER={c.master_url}")
        return 0
    if not state.exists():
        print("no cluster running here", file=sys.stderr)
        return 0
    d = json.loads(state.read_text())
    SparkCluster(d["master_url"], d["master_ui"], base, list(d["pids"])).stop()
    state.unlink()
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
