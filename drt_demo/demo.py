"""`drt demo`: the whole dr-toolkit cycle on real servers started on this machine.

Two real clusters, "hot" and "cold", each one HBase 2.6 JVM (its own ZooKeeper, HDFS NameNode +
DataNode with WebHDFS, master and region server: ``drt_servers.hbase``) and one Kafka 4 KRaft
broker (``drt_servers.kafka``); real MirrorMaker 2 mirrors hot → cold (topics ``hot.<name>``
on cold) and a real HBase replication peer ships hot's table to cold. Spark runs locally; the
ledger is SQLite; Airflow runs its DAGs through ``dag.test()`` in a private AIRFLOW_HOME — with
``ui`` (`drt demo --ui`) its metadata DB is on PostgreSQL (``drt_servers.postgres``) and the
failover runs as deployed: Airflow's api-server, scheduler (LocalExecutor), dag-processor and
triggerer (:func:`deployed_env`, the settings of tests/dags/test_deployed_airflow.py and
docker-compose.yml). The steps, in order:

seed (HDFS files, Kafka records and a consumer group part-way, HBase rows) → MirrorMaker 2 and
the HBase peer catch up → the DAGs (HBase replication status, HDFS copy, Kafka checkpoint,
verification) → hot keeps writing while MirrorMaker 2 is paused and the peer disabled →
failover check (NO_GO, and why) → drain (MirrorMaker 2 resumed, peer enabled, incremental copy)
→ failover check (GO) → failover run (approval given by the demo) → the way back
(``drt_demo.comeback``): cold, now active, takes writes and the old hot a stray one → re-protect
cold → hot (MirrorMaker 2 cold → hot started first; the divergence report acknowledged item by item,
each item kept aside on hot) → cold writes on, replicated to hot → switchover back (the planned
failover cold → hot, then a re-protect hot → cold) → the round trip proven → final report.

Everything lives under the work directory (default ``./demo-data``): a new directory is
created, one a previous demo made (``.drt-demo``) is cleared, any other is refused. The servers
are stopped at the end, even on failure — unless ``ui`` (``drt demo --ui``): then they, PostgreSQL
and Airflow's four processes on 127.0.0.1 stay up (``running.json``; ``drt demo --stop`` stops them,
each process group: the LocalExecutor's workers too).
Third-party output goes to ``<workdir>/logs/third-party.log``; every time printed is ISO UTC.
"""

from __future__ import annotations

import getpass
import json
import os
import posixpath
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drt_servers.process import ManagedProcess

# The project's dags/ and plugins/: symlinks in a checkout, package data in an installed wheel
# (resolved, so a checkout's DAG files keep their real paths — the DAG bundle's).
AIRFLOW_FILES = Path(__file__).resolve().parent / "airflow_files"
DAGS = (AIRFLOW_FILES / "dags").resolve()
PLUGINS = (AIRFLOW_FILES / "plugins").resolve()
KAFKA_TOPICS = {"orders": 3, "payments": 2}
GROUP = "billing"
RECORDS_PER_PARTITION = 60
LATE_RECORDS = 15  # per partition, produced while MirrorMaker 2 is paused
HBASE_TABLE = "default:orders"
HBASE_ROWS = 2000
HBASE_LATE_ROWS = 500  # written while the peer is disabled
# The protected HDFS tree, below the root: a re-protect keeps what the old hot took after the
# failover beside it (``/data/.drt-divergence/<run>``, dr_toolkit.failback.hdfs), outside the tree
WAREHOUSE = "/data/warehouse"


@dataclass
class DemoContext:
    workdir: Path
    say: Callable[[str], None]
    servers: list[ManagedProcess] = field(default_factory=list)
    topology_path: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    hbase: tuple[Any, Any] | None = None  # drt_servers.hbase.HBaseCluster hot, cold
    kafka: tuple[Any, Any] | None = None  # drt_servers.kafka.KafkaBroker hot, cold
    mm2: Any = None  # drt_servers.kafka.MirrorMaker2
    mm2_back: Any = None  # the MirrorMaker 2 cold → hot of the re-protect (drt_demo.comeback)

    @property
    def seed_root(self) -> Path:
        return self.workdir / "seed"


def write_topology(ctx: DemoContext, *, way_back: bool = False) -> Path:
    """The demo's topology (each HBase cluster's own root directory: ``hbase_rootdir`` hot's,
    ``hbase_rootdir_cold`` cold's, read in the direction that runs). ``way_back``: what the
    re-protect and the switchover need besides (``drt_demo.comeback``): each cluster's ``hbase``
    command (:meth:`drt_servers.hbase.HBaseCluster.write_hbase_command`: HBase peers and scopes are
    changed through it) and MirrorMaker 2's offset-syncs and checkpoints topics of both flows (the
    re-protect's evidence of the flow the other way, with the DefaultReplicationPolicy's renamed
    topics). The forward part runs without them, as before: the `hbase` command makes only peer and
    scope changes, and with it dr_hbase_replication's table sweep would ask it for `list`."""
    from dr_toolkit.spark.session import QUICK_START_JVM

    assert ctx.hbase is not None and ctx.kafka is not None
    hb_hot, hb_cold = ctx.hbase
    k_hot, k_cold = ctx.kafka
    user = getpass.getuser()
    bin_dir = ctx.workdir / "servers" / "bin"
    extra = {name: (f'\n    hbase_shell: "{hb.write_hbase_command(bin_dir / name / "hbase")}"' if way_back else "")
             for name, hb in (("hot", hb_hot), ("cold", hb_cold))}
    # MM2's internal topics, on the flow's source (offset syncs) and target (checkpoints); each
    # endpoint's hot-role field describes the flow from it, its cold-role field the flow into it
    mm2 = {name: (f", mm2_offset_syncs_topic: mm2-offset-syncs.{other}.internal, "
                  f"mm2_checkpoints_topic: {other}.checkpoints.internal" if way_back else "")
           for name, other in (("hot", "cold"), ("cold", "hot"))}
    # the group's positions on the mirrors' renamed copies (hot.<topic> on cold, cold.<topic> on hot)
    # are not carried across: MM2's DefaultReplicationPolicy never mirrors a copy back to the cluster
    # it came from (a cycle), so <alias>.<alias>.<topic> never exists to remap onto
    copies = [f"{alias}.{t}" for alias in ("hot", "cold") for t in KAFKA_TOPICS]
    exclude = f"\n      exclude_topics: [{', '.join(copies)}]" if way_back else ""

    def hdfs(c: Any) -> str:
        return (f'{{namenodes: ["http://127.0.0.1:{c.nn_http_port}"], user: {user}, rpc_addresses: ["127.0.0.1:{c.nn_rpc_port}"], '
                f'timeout_s: 30}}')

    def zk(c: Any) -> str:
        return (f'{{quorum: "{c.zk_quorum}", hbase_znode_parent: "{c.znode_parent}", connect_timeout_s: 5, '
                f'call_timeout_s: 5}}')

    # Spark's driver JVM (each verification: the dr_verify DAG, the failovers' final verify) with
    # the quick-start options the copy engine's context uses (dr_toolkit.spark.session.QUICK_START_JVM):
    # the demo's tables are small, its Spark start-up is most of a verification (local verify of its
    # 20,000 rows: 38-44 s -> 20-23 s)
    spark = f'{{master: "local[2]", conf: {{spark.driver.extraJavaOptions: "{QUICK_START_JVM}"}}}}'
    text = f"""# Written by `drt demo` with the ports it used: real HDFS, HBase, Kafka and MirrorMaker 2.
version: 1
clusters:
  hot:
    role: hot
    hdfs: {hdfs(hb_hot)}
    zookeeper: {zk(hb_hot)}{extra['hot']}
    # one producer clock on this machine: no skew, so the remap can be exact
    kafka: {{bootstrap_servers: "{k_hot.bootstrap}", timeout_s: 5, max_clock_skew_s: 0{mm2['hot']}}}
    spark: {spark}
  cold:
    role: cold
    hdfs: {hdfs(hb_cold)}
    zookeeper: {zk(hb_cold)}{extra['cold']}
    kafka: {{bootstrap_servers: "{k_cold.bootstrap}", timeout_s: 5, replication_policy: default, source_alias: hot,
            max_clock_skew_s: 0{mm2['cold']}}}
    spark: {spark}
policies:
  hdfs:
    - name: warehouse
      source: hdfs://hot{WAREHOUSE}
      targets: [hdfs://cold{WAREHOUSE}]
      options: {{update: true, delete: true, append_only: ["logs/*.log"], preserve: [times],
                state_dir: "{ctx.workdir / 'copy-state'}"}}
  hbase:
    - name: hbase-orders
      peer_id: "1"
      tables: ["{HBASE_TABLE}"]
      hbase_rootdir: "{hb_hot.rootdir}"
      hbase_rootdir_cold: "{hb_cold.rootdir}"
  kafka:
    - name: orders-stream
      topics: [{", ".join(KAFKA_TOPICS)}]
      groups: [{GROUP}]{exclude}
  verify:
    - name: orders-table
      source: hdfs://hot{WAREHOUSE}/orders
      target: hdfs://cold{WAREHOUSE}/orders
      format: parquet
      key: [order_id]
ledger: {{url: "sqlite:///{ctx.workdir}/ledger.db"}}
failover: {{max_lag_s: 60, drain_timeout_s: 120, reports_dir: reports, rpo_slo_s: 900}}
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


# Airflow as deployed (`drt demo --ui`, tests/dags/test_deployed_airflow.py; docker-compose.yml's
# x-airflow-common sets the same): the api-server, scheduler, dag-processor and triggerer, the
# LocalExecutor running the tasks, on a PostgreSQL metadata database
COMPONENTS = ("scheduler", "dag-processor", "triggerer")
DEPLOYED_SETTINGS = {
    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
    "AIRFLOW__CORE__PARALLELISM": "4",
    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
    "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
    "AIRFLOW__API__WORKERS": "1",
}
# quick turns on one machine (the demo and the tests; a deployment keeps Airflow's defaults)
FAST_SETTINGS = {
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
    "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
}


def deployed_env(home: Path, sql_alchemy_conn: str, api_port: int, *, jwt_secret: str, secret_key: str,
                 extra_dag_folders: tuple[Path, ...] = (), log_level: str = "INFO") -> dict[str, str]:
    """The environment shared by every Airflow process of one deployment on 127.0.0.1: the
    private home of :func:`airflow_env` (its DAG bundles), :data:`DEPLOYED_SETTINGS` and
    :data:`FAST_SETTINGS`, the metadata DB ``sql_alchemy_conn`` (PostgreSQL), the api-server on
    ``api_port`` (the workers reach its Execution API there) and one JWT secret and API secret
    key shared by all (a worker's token must be one the api-server accepts)."""
    base = f"http://127.0.0.1:{api_port}"
    return {
        **airflow_env(home, extra_dag_folders=extra_dag_folders, log_level=log_level),
        **DEPLOYED_SETTINGS,
        **FAST_SETTINGS,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql_alchemy_conn,
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "AIRFLOW__API__SECRET_KEY": secret_key,
    }


def check_ui_dependencies() -> None:
    """`drt demo --ui` runs Airflow's scheduler with the LocalExecutor, which needs a PostgreSQL
    metadata DB (it refuses SQLite): the server binaries (drt_servers.postgres) and psycopg2 are
    installed, or say (one line, exit 3) what to install. Checked before the work directory is
    touched."""
    import importlib.util

    from dr_toolkit.errors import UnreachableError
    from drt_servers import postgres

    other = "or run `drt demo` without --ui (its DAGs through dag.test(), nothing left running)"
    why = postgres.missing()
    if why:
        raise UnreachableError(f"`drt demo --ui` runs Airflow's scheduler on PostgreSQL: {why}",
                               hint=f"{postgres.INSTALL_HINT}; {other}")
    if importlib.util.find_spec("psycopg2") is None:
        raise UnreachableError("`drt demo --ui` runs Airflow's scheduler on PostgreSQL: psycopg2 is not installed",
                               hint=f"pip install 'dr-toolkit[postgres]'; {other}")


def check_airflow_files() -> None:
    """The demo's DAGs and plugins are installed (package data of drt_demo), and Airflow is
    importable, or say (one line) what is missing."""
    import importlib.util

    from dr_toolkit.errors import ConfigError

    for module, extra in (("airflow", "airflow"),):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"the demo needs {module!r}, which is not installed",
                              hint=f"pip install 'dr-toolkit[{extra}]' (or run `make demo` in a checkout)")
    for need in (DAGS / "dr_hdfs_replication.py", PLUGINS / "dr_toolkit_plugin.py", PLUGINS / ".airflowignore",
                 PLUGINS / "drt_airflow" / "dag_test.py"):
        if not need.is_file():
            raise ConfigError(f"the demo's Airflow files are not installed: {need} is missing",
                              hint="install dr-toolkit from a wheel built from the project (it ships dags/ and "
                                   "plugins/ in drt_demo/airflow_files), or run `make demo` in a checkout")


def start_servers(ctx: DemoContext, say: Callable[[str], None]) -> None:
    """HBase hot and cold (one after the other: two cores) while the Kafka brokers start beside
    them; every server's start-up time and memory is printed. A server that cannot start is an
    error naming it (its log is under ``<workdir>/servers``)."""
    from drt_servers import hbase, kafka

    root = ctx.workdir / "servers"
    root.mkdir(parents=True, exist_ok=True)
    got: dict[str, Any] = {}
    failed: list[BaseException] = []

    def start_kafka() -> None:
        try:
            got["kafka"] = kafka.kafka_pair(root / "kafka")
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failed.append(exc)

    say("starting the servers: HBase hot and cold (each: ZooKeeper, HDFS NameNode + DataNode, master, "
        "region server), Kafka hot and cold (KRaft) …")
    t = threading.Thread(target=start_kafka, daemon=True)
    t.start()
    try:
        ctx.hbase = hbase.hbase_pair(root / "hbase", table=HBASE_TABLE)
        ctx.servers.extend([ctx.hbase[0].process, ctx.hbase[1].process])
    finally:
        t.join()
        if "kafka" in got:
            ctx.kafka = got["kafka"]
            ctx.servers.extend(got["kafka"])
    if failed:
        raise failed[0]
    assert ctx.kafka is not None
    for srv in (*ctx.hbase, *ctx.kafka):
        say(f"           {srv.describe()}")


def start_mirror(ctx: DemoContext) -> Any:
    from drt_servers import kafka

    assert ctx.kafka is not None
    mm2 = kafka.MirrorMaker2(ctx.workdir / "servers" / "mm2", ctx.kafka[0].bootstrap, ctx.kafka[1].bootstrap,
                             topics="|".join(KAFKA_TOPICS), groups=GROUP, policy="default")
    ctx.servers.append(mm2)
    mm2.start()
    ctx.mm2 = mm2
    return mm2


# PostgreSQL's data directory when the server cannot reach the work directory (see start_postgres)
PG_OUTSIDE_PREFIX = "drt-demo-pg-"


def start_postgres(ctx: DemoContext) -> Any:
    """PostgreSQL (drt_servers.postgres) for `--ui`'s Airflow metadata DB, its data in
    ``<workdir>/servers/postgres``. Started by root it runs as ``postgres``: when that user cannot
    reach the work directory (under a private home, pytest's tmp) the data goes to a
    ``/tmp/drt-demo-pg-*`` directory that path links to, removed with the demo's servers (a failed
    demo, `drt demo --stop`, the next `drt demo`). Its log stays in ``<workdir>/servers``."""
    import tempfile

    from drt_servers import postgres

    servers = ctx.workdir / "servers"
    servers.mkdir(parents=True, exist_ok=True)
    link = servers / "postgres"
    if postgres.reachable_by_postgres(servers):
        link.mkdir()
        where = link
    else:
        where = Path(tempfile.mkdtemp(prefix=PG_OUTSIDE_PREFIX))
        where.chmod(0o755)
        link.symlink_to(where)
    pg = postgres.Postgres(where, max_connections=100, log_dir=servers)
    ctx.servers.append(pg)
    pg.start()
    return pg


def remove_outside_postgres(workdir: Path) -> None:
    """Remove the ``/tmp/drt-demo-pg-*`` data directory ``<workdir>/servers/postgres`` links to
    (start_postgres), once its server is stopped."""
    import tempfile

    link = workdir / "servers" / "postgres"
    if not link.is_symlink():
        return
    target = Path(os.readlink(link))
    if target.name.startswith(PG_OUTSIDE_PREFIX) and target.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(target, ignore_errors=True)
    link.unlink()


def stop_servers(ctx: DemoContext) -> None:
    for srv in reversed(ctx.servers):
        try:
            if srv.running and srv.proc is not None:
                os.killpg(srv.proc.pid, signal.SIGCONT)  # a paused MirrorMaker must be able to stop
        except (OSError, AttributeError):
            pass
        srv.stop()


MARKER = ".drt-demo"


def prepare_workdir(workdir: Path) -> str:
    """Make the work directory ready and say, in one line, what was done: a new or empty
    directory is used; one a previous demo made (it holds the ``.drt-demo`` marker) is cleared,
    after stopping the servers a ``drt demo --ui`` left running there; any other directory is
    refused (exit 2) with what to delete or pass instead — nothing in it is touched."""
    workdir = workdir.resolve()
    if workdir.exists() and not workdir.is_dir():
        from dr_toolkit.errors import ConfigError

        raise ConfigError(f"{workdir} is a file, not a directory",
                          hint="pass --workdir DIR with a new or empty directory "
                               "(`make demo DEMO_ARGS='--workdir DIR'`)")
    if workdir.exists() and any(workdir.iterdir()):
        if not (workdir / MARKER).exists():
            from dr_toolkit.errors import ConfigError

            raise ConfigError(f"{workdir} exists and was not made by `drt demo` (no {MARKER} file in it)",
                              hint=f"delete it (rm -r {workdir}) if it is yours to lose, or pass another "
                                   "directory: drt demo --workdir DIR (make demo DEMO_ARGS='--workdir DIR')")
        stopped = stop_left_running(workdir)
        remove_outside_postgres(workdir)
        shutil.rmtree(workdir)
        what = (f"cleared the previous demo's directory {workdir}"
                + (f" (stopped the {stopped} server(s) it left running)" if stopped else "")
                + f" — made by drt demo ({MARKER})")
    elif workdir.exists():
        what = f"using the empty directory {workdir}"
    else:
        what = f"created {workdir}"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("made by drt demo; cleared at the next run\n")
    return what


def _stop_wave(name: str) -> int:
    """Which wave stops ``name`` (:func:`stop_left_running`): Airflow's processes and the
    MirrorMakers first (clients of the others), then the brokers and HBase, PostgreSQL last."""
    return 0 if name.startswith(("airflow-", "mirrormaker2")) else 2 if name == "postgres" else 1


def stop_left_running(workdir: Path, say: Callable[[str], None] | None = None) -> int:
    """Stop the processes a previous ``drt demo --ui`` left running (``running.json``): each one
    by its process group, only if that process still runs the command recorded for it — in three
    waves, each asked to stop together and waited for before the next (:func:`_stop_wave`: the
    api-server, Airflow's other processes and MirrorMaker before the brokers and HBase, PostgreSQL,
    which Airflow's processes use, last — the order of the demo's own ``stop_servers``, each wave's
    processes side by side: 10-11 s instead of 20 s). ``say`` gets one line as each is asked to stop
    and one when it has (a JVM may take seconds: `drt demo --stop` is not silent meanwhile)."""
    path = workdir / "running.json"
    if not path.is_file():
        return 0
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0
    n = 0
    for wave in (0, 1, 2):
        asked: list[tuple[str, int, str, float]] = []
        for e in reversed(entries):
            pid, cmdline = int(e.get("pid", 0)), str(e.get("cmdline", ""))
            name = str(e.get("name") or "process")
            if _stop_wave(name) != wave or pid <= 1 or not _same_process(pid, cmdline):
                continue
            try:
                os.killpg(pid, signal.SIGCONT)
                os.killpg(pid, signal.SIGTERM)
            except OSError:
                continue
            if say is not None:
                say(f"stopping {name} (pid {pid}) …")
            n += 1
            asked.append((name, pid, cmdline, time.monotonic()))
        deadline = time.monotonic() + 30
        while asked:
            # the whole group: LocalExecutor workers and task runners stop with their scheduler
            for name, pid, cmdline, t0 in list(asked):
                alive = _same_process(pid, cmdline)
                if not alive and not _group_members(pid):
                    asked.remove((name, pid, cmdline, t0))
                    if say is not None:
                        say(f"  {name} stopped in {time.monotonic() - t0:.1f} s")
                elif time.monotonic() >= deadline:
                    asked.remove((name, pid, cmdline, t0))
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                    if say is not None:
                        say(f"  {name} " + ("did not stop within 30 s: killed" if alive
                                             else "stopped; what was left of its process group killed after 30 s"))
            if asked:
                time.sleep(0.2)
    path.unlink(missing_ok=True)
    return n


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``: each server was started as the leader
    of its own group (a new session), so only its children can be in it."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


def _same_process(pid: int, cmdline: str) -> bool:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":  # a zombie: already stopped
        return False
    return raw.replace(b"\0", b" ").decode(errors="replace").strip() == cmdline.strip()


def migrate_airflow(env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed:\n{r.stderr[-2000:]}")


def elapsed(t0: float) -> str:
    return f"{time.monotonic() - t0:.1f}s"


# The DAGs the demo runs before its failover, in this order, with their run conf
DAGS_BEFORE_FAILOVER: list[tuple[str, dict[str, Any]]] = [
    ("dr_hbase_replication", {}), ("dr_hdfs_replication", {"policy": "all"}), ("dr_kafka_offsets", {}),
    ("dr_verify", {})]


class DagRuns:
    """The DAGs of ``plan`` run with ``dag.test()`` one after the other in ONE child process
    (plugins/drt_airflow/dag_test.py ``--many``: this library never imports Airflow itself), each
    one's output in ``<log_dir>/<dag_id>.log``. Airflow is imported and the DAG folder parsed once,
    not once per DAG (each child took ~3.5 s of start-up on an idle machine). :meth:`result` waits
    for a DAG's end and returns its task states; the child starts the next DAG only when asked for
    it, so the demo reads the ledger between two DAGs, alone, as when each had its own process."""

    def __init__(self, plan: list[tuple[str, dict[str, Any]]], log_dir: Path, timeout_s: float = 1200) -> None:
        self.plan = [d for d, _ in plan]
        self.log_dir = log_dir
        self.done: list[str] = []
        runner = PLUGINS / "drt_airflow" / "dag_test.py"
        spec = [[d, c, str(log_dir / f"{d}.log")] for d, c in plan]
        self.own_log = (log_dir / "dag-runner.log").open("a")  # the child's output before the first DAG's
        self.proc = subprocess.Popen([sys.executable, str(runner), "--many", json.dumps(spec)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.own_log,
                                     env=os.environ.copy(), text=True, bufsize=1)
        self.watchdog = threading.Timer(timeout_s * len(plan), self.proc.kill)
        self.watchdog.daemon = True
        self.watchdog.start()

    def result(self, dag_id: str) -> dict[str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.plan[len(self.done)] != dag_id:
            raise RuntimeError(f"DAG {dag_id} asked for out of order (next: {self.plan[len(self.done)]})")
        if self.done:
            self.proc.stdin.write("next\n")  # the previous DAG's result has been read: go on
            self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(f"DRT-DAG-DONE {dag_id} "):
                _, _, state, states_json = line.rstrip("\n").split(" ", 3)
                self.done.append(dag_id)
                if state == "success":
                    states: dict[str, str] = json.loads(states_json)
                    return states
                break
        log = self.log_dir / f"{dag_id}.log"
        lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
        tail = "\n".join(lines[-15:]) or (self.log_dir / "dag-runner.log").read_text(errors="replace")[-2000:]
        self.close()
        raise RuntimeError(f"DAG {dag_id} failed (log {log}):\n{tail}")

    def close(self) -> None:
        self.watchdog.cancel()
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # the child ends at its next read (or has nothing left to run)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.own_log.close()


def iso_epochs(line: str) -> str:
    """Every epoch-seconds value in a line the demo prints (``1795493141.600``) as ISO UTC."""
    import re

    def one(m: re.Match[str]) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(m.group(0))))

    return re.sub(r"(?<![\w.:-])1[5-9]\d{8}(?:\.\d+)?(?![\w.:-])", one, line)


class QuietStderr:
    """Third-party noise (librdkafka's ``%3|...|FAIL|``, Spark's log4j banners, Python warnings)
    goes to a log file: file descriptor 2 points there while the demo runs, so child JVMs and C
    libraries write there too; the demo's own lines go to the terminal."""

    def __init__(self) -> None:
        self.saved: int | None = None
        self.path: Path | None = None

    def start(self, path: Path) -> None:
        import warnings

        sys.stderr.flush()
        self.saved = os.dup(2)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
        self.path = path
        warnings.simplefilter("default")  # shown once each, in the log

    def stop(self) -> None:
        if self.saved is not None:
            sys.stderr.flush()
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.saved = None


class Demo:
    """The demo's steps; each prints one line of what it did."""

    def __init__(self, workdir: Path, say: Callable[[str], None], *, quiet: bool = True, ui: bool = False) -> None:
        self.ctx = DemoContext(workdir.resolve(), lambda line: say(iso_epochs(line)))
        self.ui = ui
        self.airflow: dict[str, Any] = {}  # --ui: the deployment's environment, port and secrets (setup)
        self.t0 = time.monotonic()
        self.logs = self.ctx.workdir / "logs"
        self.quiet = QuietStderr() if quiet else None
        self.keep_running = False
        self.dag_runs: DagRuns | None = None  # the DAGs before the failover (dag_result)
        from dr_toolkit.access import Access

        # the demo is an edge: its credentials value is built once (AIRFLOW_CONN_* of its environment)
        self.access = Access.from_env()

    def dag_result(self, dag_id: str) -> dict[str, str]:
        """The task states of ``dag_id``'s run (one of :data:`DAGS_BEFORE_FAILOVER`, in order), the
        DAGs' child process started at the first."""
        if self.dag_runs is None:
            self.dag_runs = DagRuns(DAGS_BEFORE_FAILOVER, self.logs)
        states = self.dag_runs.result(dag_id)
        if dag_id == DAGS_BEFORE_FAILOVER[-1][0]:
            self.dag_runs.close()
        return states

    def step(self, title: str, detail: str = "") -> None:
        self.ctx.say(f"[{elapsed(self.t0):>6}] {title}" + (f" — {detail}" if detail else ""))

    # -- set-up ------------------------------------------------------------------------------------
    def setup(self) -> None:
        ctx = self.ctx
        check_airflow_files()  # before wiping anything
        if self.ui:
            check_ui_dependencies()
        ctx.say(f"work directory: {prepare_workdir(ctx.workdir)}")
        self.logs.mkdir()
        if self.quiet is not None:
            self.quiet.start(self.logs / "third-party.log")
            ctx.say(f"third-party output (Kafka client, Spark, warnings) goes to {self.quiet.path}; "
                    "-v shows it here")
        # INFO: each task's log (the UI's Logs tab, demo-data/logs/) says what the task did; the
        # terminal stays quiet (the DAGs' output goes to those files only)
        home = ctx.workdir / "airflow"
        home.mkdir()
        # --ui: Airflow as deployed, its metadata DB on PostgreSQL (the DAGs before the failover too)
        env = self.deployed_airflow_env() if self.ui else airflow_env(home, log_level="INFO")
        os.environ.update(env)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        migrate = threading.Thread(target=migrate_airflow, args=(env,), daemon=True)
        migrate.start()  # beside the JVMs' start-up
        start_servers(ctx, lambda m: self.step(m) if not m.startswith(" ") else ctx.say(m))
        ctx.topology_path = write_topology(ctx)
        os.environ["DRT_CONFIG"] = str(ctx.topology_path)
        migrate.join()
        db = ("on PostgreSQL (drt_servers.postgres)" if self.ui else f"in {ctx.workdir / 'airflow'}")
        self.step("servers", f"up; topology {ctx.topology_path}; Airflow metadata DB migrated {db}; "
                             f"DAG logs in {self.logs}")

    def deployed_airflow_env(self) -> dict[str, str]:
        """`--ui`: PostgreSQL started (~3 s) with a database for Airflow; the deployment's
        environment (:func:`deployed_env`) with the demo's api-server port, JWT secret and API
        secret key, and the api-server's login (``admin`` and a password of its own)."""
        import secrets as pysecrets

        from drt_servers.process import free_port

        ctx = self.ctx
        home = ctx.workdir / "airflow"
        t0 = time.monotonic()
        pg = start_postgres(ctx)
        conn = pg.create_database("airflow")
        self.step("PostgreSQL", f"for Airflow's metadata DB: {pg.describe()} (in {elapsed(t0)})")
        port = int(os.environ.get("DRT_DEMO_UI_PORT") or free_port())
        password = pysecrets.token_urlsafe(9)
        (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({"admin": password}) + "\n")
        env = {**deployed_env(home, conn, port, jwt_secret=pysecrets.token_hex(32),
                              secret_key=pysecrets.token_hex(16), log_level="INFO"),
               "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin"}
        self.airflow = {"env": env, "port": port, "password": password}
        return env

    def topology(self) -> Any:
        from dr_toolkit.topology import load_topology

        return load_topology(self.ctx.topology_path)

    def ledger(self) -> Any:
        from dr_toolkit.ledger import open_ledger

        return open_ledger(self.topology(), self.access)

    def hdfs_client(self, c: Any) -> Any:
        from hdfs import InsecureClient

        return InsecureClient(f"http://127.0.0.1:{c.nn_http_port}", user=getpass.getuser(), timeout=60)

    # -- 1. seed -----------------------------------------------------------------------------------
    def seed(self) -> None:
        from drt_demo import seed

        ctx = self.ctx
        assert ctx.hbase is not None and ctx.kafka is not None
        hb_hot, hb_cold = ctx.hbase
        files = seed.seed_files(ctx.seed_root)
        client = self.hdfs_client(hb_hot)
        client.makedirs(posixpath.dirname(WAREHOUSE))
        client.upload(WAREHOUSE, str(ctx.seed_root / "warehouse"), n_threads=4)
        hot = ctx.kafka[0].bootstrap
        now_ms = int(time.time() * 1000)
        base = now_ms - 10 * 60 * 1000  # the seeded records are ten minutes old
        n = seed.seed_kafka(hot, KAFKA_TOPICS, records_per_partition=RECORDS_PER_PARTITION, base_ts_ms=base)
        committed = seed.consume_part_way(hot, GROUP, KAFKA_TOPICS, records_per_partition=RECORDS_PER_PARTITION)
        hb_hot.put(0, HBASE_ROWS, table=HBASE_TABLE)
        self.step("seed", f"hot HDFS {WAREHOUSE}: {files['files']} files / {files['bytes']:,} bytes (orders: "
                          f"{files['orders_rows']:,} Parquet rows, a growing log); Kafka {n} records in "
                          f"{sum(KAFKA_TOPICS.values())} partitions, group {GROUP} part-way "
                          f"({len(committed)} partitions committed); HBase {HBASE_TABLE}: {HBASE_ROWS:,} rows")
        mm2 = start_mirror(ctx)
        mm2.wait_mirrored(list(KAFKA_TOPICS), timeout=180)
        got = hb_cold.wait_rows(HBASE_ROWS, table=HBASE_TABLE, timeout=180)
        self.step("mirrors caught up", f"MirrorMaker 2 ({mm2.describe()}) copied every record to "
                                       f"{', '.join(mm2.remote_topic(t) for t in KAFKA_TOPICS)} on cold; the HBase "
                                       f"peer shipped {got:,} rows to cold")

    # -- 2..5 --------------------------------------------------------------------------------------
    def replication_setup(self) -> None:
        from dr_toolkit.failover.gate import check

        states = self.dag_result("dr_hbase_replication")
        self.step("HBase replication", f"DAG dr_hbase_replication: {_states(states)} (peer 1, table scopes, "
                                       "queues)")
        res = check(self.topology(), self.ledger(), access=self.access, components=("hbase",))
        hb = next(s for s in res.signals if s.component == "hbase")
        self.step("HBase shipped", f"{hb.basis}" if hb.caught_up else f"not proven: {hb.reason}")

    def hdfs_replication(self) -> None:
        states = self.dag_result("dr_hdfs_replication")
        run = self.ledger().runs(policy="warehouse", limit=1)[0]
        self.step("HDFS replication", f"DAG dr_hdfs_replication: {_states(states)}; {run['mode']}: "
                                      f"{run['files_copied']} files / {run['bytes_copied']:,} bytes copied "
                                      "hot HDFS → cold HDFS")

    def kafka_checkpoint(self) -> None:
        states = self.dag_result("dr_kafka_offsets")
        rows = self.ledger().latest_checkpoint(GROUP)
        self.step("Kafka checkpoint", f"DAG dr_kafka_offsets: {_states(states)}; group {GROUP}: "
                                      f"{len(rows)} partitions with offset, timestamp and fingerprint")

    def verification(self) -> None:
        states = self.dag_result("dr_verify")
        rep = self.ledger().verify_reports(name="orders-table", limit=1)[0]
        self.ctx.summary["verify_report"] = rep["report_path"]
        self.step("verification", f"DAG dr_verify: {_states(states)}; GOODROWS {rep['goodrows']:,}, "
                                  f"BADROWS {rep['badrows']}; report {rep['report_path']}")

    def hot_keeps_writing(self) -> None:
        """MirrorMaker 2 paused (SIGSTOP), the HBase peer disabled, and hot writes on: new Kafka
        records, HBase rows, lines appended to the growing log on HDFS."""
        from drt_demo import seed

        ctx = self.ctx
        assert ctx.hbase is not None and ctx.kafka is not None and ctx.mm2 is not None and ctx.mm2.proc
        os.killpg(ctx.mm2.proc.pid, signal.SIGSTOP)
        hb_hot = ctx.hbase[0]
        hb_hot.disable_peer("1")
        hb_hot.put(HBASE_ROWS, HBASE_LATE_ROWS, table=HBASE_TABLE)
        n = seed.seed_kafka(ctx.kafka[0].bootstrap, KAFKA_TOPICS, records_per_partition=LATE_RECORDS,
                            base_ts_ms=int(time.time() * 1000), key_prefix="late")
        client = self.hdfs_client(hb_hot)
        lines = "".join(f"{i:06d} request handled at {time.time():.3f}\n" for i in range(500))
        client.write(f"{WAREHOUSE}/logs/app.log", data=lines, append=True, encoding="utf-8")
        self.step("hot keeps writing", f"MirrorMaker 2 paused, HBase peer 1 disabled; hot got {n} Kafka records, "
                                       f"{HBASE_LATE_ROWS} HBase rows and 500 log lines appended on HDFS")

    # -- 6..8 --------------------------------------------------------------------------------------
    def gate(self, label: str) -> dict[str, Any]:
        from dr_toolkit.failover.gate import check

        res = check(self.topology(), self.ledger(), access=self.access).to_json()
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

        ctx = self.ctx
        assert ctx.hbase is not None and ctx.mm2 is not None and ctx.mm2.proc
        os.killpg(ctx.mm2.proc.pid, signal.SIGCONT)
        ctx.mm2.wait_mirrored(list(KAFKA_TOPICS), timeout=180)
        hb_hot, hb_cold = ctx.hbase
        hb_hot.enable_peer("1")
        rows = hb_cold.wait_rows(HBASE_ROWS + HBASE_LATE_ROWS, table=HBASE_TABLE, timeout=180)
        topo = self.topology()
        results = replicate_policy(topo, "warehouse", self.ledger(), access=self.access)
        r = results[0].to_json()
        # a fresh checkpoint of the group, as the scheduled dr_kafka_offsets would take: the one taken
        # before the verification ages past failover.max_lag_s on a loaded machine (verify: ~1 min)
        from dr_toolkit.kafka import api

        api.checkpoint(topo, self.ledger(), groups=[GROUP], access=self.access)
        self.step("drain", f"MirrorMaker 2 resumed and caught up; HBase peer enabled, cold has {rows:,} rows; "
                           f"incremental copy ({r['mode']}) {r['files_copied']} files / {r['bytes_copied']:,} bytes; "
                           f"a fresh checkpoint of group {GROUP}")

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
                           approver=approve, who="drt-demo", access=self.access)
        out = rb.run()
        self.ctx.summary["failover"] = out
        report = rb.results.get("report")
        if report is not None:
            self.ctx.summary["report"] = (report.detail.get("after") or {}).get("html")
        self.step("failover run", f"{out['run_id']}: {out['status']}; steps: "
                                  + ", ".join(f"{s['name']} {s['status']}" for s in out["steps"]))
        return out

    def close(self) -> None:
        try:
            if self.dag_runs is not None:
                self.dag_runs.close()
            if not self.keep_running:
                started_pg = any(getattr(srv, "name", "") == "postgres" for srv in self.ctx.servers)
                stop_servers(self.ctx)
                if started_pg:  # this run's (never a previous demo's still running: setup failed early)
                    remove_outside_postgres(self.ctx.workdir)
            else:
                # left running on purpose (`--ui`, until `drt demo --stop`): their Popen objects must
                # not say "ResourceWarning: subprocess N is still running" as this process exits
                # (QuietStderr turned ResourceWarning on for the log)
                import warnings

                warnings.filterwarnings("ignore", message=r"subprocess \d+ is still running", category=ResourceWarning)
        finally:
            if self.quiet is not None:
                self.quiet.stop()

    # -- --ui: leave everything running ------------------------------------------------------------
    def airflow_failover(self, ui: dict[str, Any], deadline_s: float = 1200) -> dict[str, Any]:
        """`dr_failover` executed by Airflow's scheduler, approved as an operator would: unpaused and
        triggered through the REST API (logged in as ``admin``), its tasks run by the LocalExecutor,
        the drain sensor deferred to the triggerer, the approval parked in *Required actions* and
        answered through the HITL REST API (recorded as ``airflow:admin``); polled to its end
        (bounded by ``deadline_s``, a line each time the tasks' states change). The task states come
        from the run's ``/taskInstances``. The grid, the approval and the SLO chart then show a real
        executed failover."""
        import urllib.parse

        t0 = time.monotonic()
        api = AirflowApi(ui)
        api.wait_for("DAG dr_failover parsed by the dag-processor", lambda: api.call("GET", "/api/v2/dags/dr_failover"),
                     timeout=300)
        api.call("PATCH", "/api/v2/dags/dr_failover", {"is_paused": False})
        run = api.call("POST", "/api/v2/dags/dr_failover/dagRuns", {
            "logical_date": None, "conf": {"reason": "drt demo: hot-to-cold drill through Airflow", "dry_run": False}})
        dag_run_id = str(run["dag_run_id"])
        self.step("dr_failover triggered", f"run {dag_run_id} through the REST API, unpaused ({elapsed(t0)} with the "
                                           "DAG's parse); the scheduler runs it, the LocalExecutor its tasks")
        quoted = urllib.parse.quote(dag_run_id, safe="")
        park_seen = ParkReported(self.logs / "airflow-scheduler.log", "dr_failover", "approval")
        answered: dict[str, Any] = {}
        parked_at: float | None = None
        last = ""
        states: dict[str, str] = {}
        give_up = time.monotonic() + deadline_s
        while True:
            dr = api.call("GET", f"/api/v2/dags/dr_failover/dagRuns/{quoted}")
            tis = api.call("GET", f"/api/v2/dags/dr_failover/dagRuns/{quoted}/taskInstances?limit=100")
            states = {ti["task_id"]: str(ti.get("state") or "none") for ti in tis.get("task_instances") or []}
            now = _progress(states)
            if now != last:
                self.ctx.say(f"           [{elapsed(self.t0):>6}] dr_failover: {now}")
                last = now
            if dr.get("state") in ("success", "failed"):
                break
            if states.get("approval") == "awaiting_input" and parked_at is None:
                parked_at = time.monotonic()
            # answered once the scheduler has taken in the parking worker's exit (ParkReported: an
            # earlier answer can fail the task in Airflow 3.3); a log without that line (another
            # log level) holds the answer back at most a minute
            settled = parked_at is not None and park_seen(dag_run_id)
            if parked_at is not None and not answered and (settled or time.monotonic() - parked_at > 60):
                answered = answer_parked(ui, "dr_failover", api.token(), dag_run_id)
                if answered:
                    self.step("approval", f"given in Airflow by {ui['user']} (Required actions, through the REST "
                                          f"API as the UI does): {answered.get('subject') or 'approve'}"
                                          + ("" if settled else " (the scheduler's log never said the park was "
                                                                "taken in: answered after 60 s)"))
            if time.monotonic() > give_up:
                raise RuntimeError(f"dr_failover run {dag_run_id} not done after {deadline_s:g} s: {now} "
                                   f"(task logs: {ui['url']}, {self.ctx.workdir / 'airflow' / 'logs'})")
            time.sleep(0.5)  # two GETs a turn: the approval is answered, the end seen, within 0.5 s
        if dr["state"] != "success":
            failed = [t for t, st in states.items() if st in ("failed", "upstream_failed")]
            raise RuntimeError(f"dr_failover run {dag_run_id} {dr['state']} in Airflow: failed tasks {failed} "
                               f"(their logs: {ui['url']}, {self.ctx.workdir / 'airflow' / 'logs'})")
        ledger = self.ledger()
        row = next((r for r in ledger.failover_runs(limit=5) if str(r["run_id"]).startswith("failover-")), None)
        if row is None:
            raise RuntimeError("dr_failover ran but recorded no failover run in the ledger")
        rid = str(row["run_id"])
        report_json = self.topology().reports_dir() / f"{rid}.json"
        doc = json.loads(report_json.read_text()) if report_json.is_file() else {"steps": []}
        out = {"run_id": rid, "status": row["status"], "steps": doc.get("steps") or [],
               "through": "airflow-scheduler", "dag_run_id": dag_run_id, "dag_states": states,
               "approved_by": ui["user"] if answered else None}
        self.ctx.summary["failover"] = out
        self.ctx.summary["report"] = str(report_json.with_suffix(".html"))
        self.step("dr_failover in Airflow", f"executed by the scheduler in {elapsed(t0)}: {_states(states)}; run "
                                            f"{rid}: {row['status']}; report {report_json.with_suffix('.html')}")
        return out

    def write_running(self) -> list[dict[str, Any]]:
        """``running.json``: the processes left running (what `drt demo --stop` stops); written again
        when the way back changed the MirrorMakers."""
        running = []
        for srv in self.ctx.servers:
            if srv.running and srv.proc is not None:
                try:
                    cmd = Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                        errors="replace").strip()
                except OSError:
                    continue
                running.append({"name": getattr(srv, "name", "server"), "pid": srv.proc.pid, "cmdline": cmd})
        (self.ctx.workdir / "running.json").write_text(json.dumps(running, indent=2))
        return running

    def leave_ui_running(self) -> dict[str, Any]:
        """Start Airflow as deployed with the demo's home, DAGs, plugin, DRT_CONFIG and PostgreSQL
        (setup): the api-server on 127.0.0.1, then the scheduler (LocalExecutor), dag-processor and
        triggerer, each in its own process group, ready when the api-server's health says all three
        are healthy; write ``airflow.env`` (the same environment, to start them again by hand; mode
        0600: it holds the deployment's JWT secret) and ``running.json`` (what the next `drt demo` or
        `drt demo --stop` stops)."""
        ctx = self.ctx
        port, password = int(self.airflow["port"]), str(self.airflow["password"])
        env = {**self.airflow["env"], "DRT_CONFIG": str(ctx.topology_path), "SPARK_LOCAL_IP": "127.0.0.1"}
        env_file = ctx.workdir / "airflow.env"
        env_file.touch(mode=0o600)
        env_file.write_text(
            "# The demo's Airflow environment: `set -a; . demo-data/airflow.env; set +a; .venv/bin/airflow api-server`"
            " (scheduler, dag-processor, triggerer: the same)\n"
            + "".join(f"{k}={shlex_quote(v)}\n" for k, v in sorted(env.items())))
        url = f"http://127.0.0.1:{port}"
        t0 = time.monotonic()
        api = ManagedProcess("airflow-api-server", api_server_argv(port),
                             port=port, log_dir=self.logs, env=env, start_timeout=180,
                             ready=lambda: _http_ok(f"{url}/api/v2/monitor/health"))
        ctx.servers.append(api)
        api.start()
        procs = []
        for name in COMPONENTS:
            p = ManagedProcess(f"airflow-{name}", airflow_argv(name), port=port, log_dir=self.logs, env=env,
                               ready=lambda: True)
            ctx.servers.append(p)
            p.start()
            procs.append(p)
        self.keep_running = True
        ui = {"url": url, "dr_page": f"{url}/dr-toolkit/", "user": "admin", "password": password,
              "env_file": str(env_file)}
        AirflowApi(ui).wait_for("Airflow's scheduler, dag-processor and triggerer healthy",
                                lambda: _all_healthy(url, procs), timeout=300)
        running = self.write_running()
        self.step("Airflow", f"api-server, scheduler (LocalExecutor), dag-processor and triggerer up in "
                             f"{elapsed(t0)}; metadata DB on PostgreSQL; logs in {self.logs}")
        self.step("UI", f"airflow api-server at {url} (login admin / {password}); the DR page: {url}/dr-toolkit/")
        return {**ui, "running": [r["name"] for r in running]}


def airflow_argv(command: str) -> list[str]:
    """`python -P -m airflow <command>` (``-P``: see :func:`api_server_argv`)."""
    return [sys.executable, "-P", "-m", "airflow", command]


def _all_healthy(url: str, procs: list[ManagedProcess]) -> bool:
    """The api-server's health names the scheduler, dag-processor and triggerer healthy; a process
    that exited is an error naming it (with its log's tail)."""
    import urllib.request

    for p in procs:
        if p.proc is not None and p.proc.poll() is not None:
            raise RuntimeError(f"{p.name} exited with {p.proc.returncode} (log {p.log_path}):\n{p.log_tail(30)}")
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=10) as r:
            health = json.loads(r.read())
    except (OSError, ValueError):
        return False
    return all((health.get(c) or {}).get("status") == "healthy" for c in ("scheduler", "dag_processor", "triggerer"))


class AirflowApi:
    """Airflow's REST API on the demo's api-server, logged in as the UI's user (its token renewed
    every 10 minutes)."""

    def __init__(self, ui: dict[str, Any]) -> None:
        self.ui = ui
        self._token: tuple[str, float] | None = None

    def token(self) -> str:
        if self._token is None or self._token[1] < time.monotonic():
            tok = _rest(self.ui, "POST", "/auth/token", None, {"username": self.ui["user"],
                                                               "password": self.ui["password"]})["access_token"]
            self._token = (str(tok), time.monotonic() + 600)
        return self._token[0]

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call; a refused connection or a timeout (an api-server busy on two cores) asked again
        twice (not a POST: it could have been done)."""
        last: OSError | None = None
        for _ in range(3 if method != "POST" else 1):
            try:
                return _rest(self.ui, method, path, self.token(), body)
            except OSError as exc:
                import urllib.error

                if isinstance(exc, urllib.error.HTTPError):
                    raise RuntimeError(f"Airflow REST {method} {path}: HTTP {exc.code} "
                                       f"{exc.read()[:300].decode(errors='replace')}") from None
                last = exc
                time.sleep(2)
        raise RuntimeError(f"Airflow REST {method} {path}: {type(last).__name__}: {last}")

    def wait_for(self, what: str, fn: Callable[[], Any], timeout: float) -> Any:
        """Poll ``fn`` every 0.5 s until it returns something truthy (a failed call counts as not yet);
        past ``timeout`` an error naming ``what``."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                got = fn()
            except RuntimeError as exc:
                if "exited with" in str(exc):
                    raise
                last = exc
            else:
                if got:
                    return got
                last = got
            time.sleep(0.5)
        raise RuntimeError(f"not within {timeout:g} s: {what} (last: {last!r})")


def _rest(ui: dict[str, Any], method: str, path: str, token: str | None, body: dict[str, Any] | None = None
          ) -> dict[str, Any]:
    import urllib.request

    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(f"{ui['url']}{path}", method=method, headers=headers,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        return dict(json.loads(r.read() or b"{}"))


def _progress(states: dict[str, str]) -> str:
    """One line of a run's task states: the done count, then each task not done by state."""
    by: dict[str, list[str]] = {}
    for task, st in states.items():
        by.setdefault(st, []).append(task)
    done = len(by.get("success", [])) + len(by.get("skipped", []))
    rest = "; ".join(f"{st} {', '.join(sorted(ts))}" for st, ts in sorted(by.items())
                     if st not in ("success", "skipped", "none"))
    return f"{done}/{len(states)} tasks done" + (f"; {rest}" if rest else "")


def api_server_argv(port: int) -> list[str]:
    """`python -P -m airflow api-server` on 127.0.0.1: ``-P`` keeps the current directory off
    ``sys.path`` (issue 43 #1). Run from the checkout (`make demo`), where `pip install -e .` left
    ``dr_toolkit.egg-info``, that directory is a second dr-toolkit distribution: Airflow, which
    reads every distribution's ``airflow.plugins`` entry points without de-duplicating them,
    registered the DR page plugin twice and showed "1 Plugin Import Error: Plugin 'dr_toolkit'
    already registered" on its home page."""
    return [sys.executable, "-P", "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1"]


class ParkReported:
    """Has Airflow's scheduler taken in the exit of the worker that parked ``task_id`` (in
    ``awaiting_input``) for a run? Read from the scheduler's log (``scheduler_log``): its
    "TaskInstance Finished: dag_id=…, task_id=…, run_id=…" line with ``state=awaiting_input``.

    Why an answer waits for it: Airflow 3.3 resumes an answered task at once under the same try
    number (the answer moves it to ``scheduled``; the scheduler queues it again). When the parking
    worker's exit reaches the scheduler only after that, the LocalExecutor's "success" of the old
    process drops the resumed one from its running set, and the scheduler fails the task as
    "killed externally" ("state mismatch" in its event log) — what failed the demo's approval once
    in CI, answered 0.1 s after the park. A person answers seconds later; the demo and the tests
    answer within a poll, so they wait for this line first. Reads only what was appended since the
    last call."""

    def __init__(self, scheduler_log: Path, dag_id: str, task_id: str) -> None:
        self.path, self.dag_id, self.task_id = scheduler_log, dag_id, task_id
        self.offset = 0
        self.tail = b""
        self.seen: set[str] = set()

    def __call__(self, dag_run_id: str) -> bool:
        if dag_run_id in self.seen:
            return True
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return False
        self.offset += len(data)
        lines = (self.tail + data).split(b"\n")
        self.tail = lines.pop()  # a line not finished yet: read again with the rest
        head = f"TaskInstance Finished: dag_id={self.dag_id}, task_id={self.task_id}, run_id="
        for raw in lines:
            line = raw.decode(errors="replace")
            at = line.find(head)
            if at >= 0 and "state=awaiting_input" in line:
                self.seen.add(line[at + len(head):].split(",", 1)[0])
        return dag_run_id in self.seen


def answer_parked(ui: dict[str, Any], dag_id: str, token: str, dag_run_id: str | None = None) -> dict[str, Any]:
    """Answer "Approve" to the parked (``awaiting_input``) ``approval`` task of ``dag_id`` (of run
    ``dag_run_id`` if given) through the HITL REST API; returns its subject and body, or {} when none
    is parked."""
    import urllib.parse

    details = _rest(ui, "GET", f"/api/v2/dags/~/dagRuns/~/hitlDetails?dag_id_pattern={dag_id}", token)
    for d in details.get("hitl_details") or []:
        ti = d["task_instance"]
        # only a parked task: an answer given before the park is lost on a SQLite metadata DB
        if d.get("response_received") or ti["task_id"] != "approval" or ti.get("state") != "awaiting_input":
            continue
        if dag_run_id is not None and ti["dag_run_id"] != dag_run_id:
            continue
        _rest(ui, "PATCH", f"/api/v2/dags/{ti['dag_id']}/dagRuns/{urllib.parse.quote(ti['dag_run_id'], safe='')}"
                           f"/taskInstances/{ti['task_id']}/{ti['map_index']}/hitlDetails", token,
              {"chosen_options": ["Approve"], "params_input": {}})
        return {"subject": d.get("subject"), "body": d.get("body")}
    return {}


def shlex_quote(v: str) -> str:
    import shlex

    return shlex.quote(v)


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def next_steps(workdir: Path, topology: Path | None, ui: dict[str, Any] | None) -> list[str]:
    """What to try after the demo: commands that work as printed (from the checkout)."""
    drt = shutil.which("drt") or f"{Path(sys.executable).parent / 'drt'}"
    steps = [f"{drt} --config {topology} status          # what the ledger knows: verdict, RPO, runs",
             f"{drt} --config {topology} failover check  # the gate (the demo's servers "
             + ("still run)" if ui else "are stopped: NO_GO, each reason says why)")]
    if ui:
        steps += [f"open {ui['dr_page']} (login {ui['user']} / {ui['password']}) — the DR page; the DAGs at {ui['url']} "
                  "(the scheduler runs them: unpause one, or trigger it)",
                  f"{drt} demo --stop --workdir {workdir}      # stop the servers, PostgreSQL and Airflow"]
    else:
        steps += [f"{drt} demo --ui      # the same, the failover run by Airflow's scheduler, leaving the servers "
                  "and Airflow running (make demo DEMO_ARGS=--ui)"]
    steps.append(f"reports: {workdir / 'reports'}; DAG logs: {workdir / 'logs'}")
    return steps


def stop(workdir: Path, say: Callable[[str], None] | None = None) -> int:
    """`drt demo --stop`: stop what a `drt demo --ui` left running in ``workdir``, saying each
    (and remove PostgreSQL's data if it lives outside the work directory: start_postgres)."""
    n = stop_left_running(workdir.resolve(), say)
    remove_outside_postgres(workdir.resolve())
    return n


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


def run(workdir: Path, say: Callable[[str], None], *, ui: bool = False, quiet: bool = True) -> dict[str, Any]:
    """The whole cycle; returns the summary (also written to ``<workdir>/summary.json``). With
    ``ui`` the failover runs through Airflow's scheduler, and the servers and Airflow stay up, its
    api-server serving the DR page (``summary["ui"]``)."""
    demo = Demo(workdir, say, quiet=quiet, ui=ui)
    try:
        demo.setup()
        demo.seed()
        demo.replication_setup()
        demo.hdfs_replication()
        demo.kafka_checkpoint()
        demo.verification()
        demo.hot_keeps_writing()
        before = demo.gate("while lag remains")
        demo.drain()
        after = demo.gate("after draining")
        if after["verdict"] != "GO":
            raise RuntimeError("the gate did not say GO after draining: " + "; ".join(after["reasons"]))
        ui_info = None
        if ui:  # the UI first: the failover runs through Airflow and is approved there
            ui_info = demo.leave_ui_running()
            try:
                fo = demo.airflow_failover(ui_info)
            except BaseException:
                demo.keep_running = False  # nothing is left running after a failed demo
                raise
        else:
            fo = demo.failover()
        from drt_demo import comeback

        try:
            comeback.come_back(demo)
        except BaseException:
            demo.keep_running = False  # nothing is left running after a failed demo
            raise
        if ui_info is not None:
            ui_info["running"] = [r["name"] for r in demo.write_running()]
        summary = {"workdir": str(demo.ctx.workdir), "topology": str(demo.ctx.topology_path),
                   "first_check": before["verdict"], "second_check": after["verdict"],
                   "recovery_point": after["recovery_point"], "safe_times": safe_times(after),
                   "hbase_basis": next((s["basis"] for s in after["signals"] if s["component"] == "hbase"), None),
                   "failover_status": fo["status"], "run_id": fo["run_id"],
                   "servers": [srv.describe() for srv in demo.ctx.servers if srv.running],
                   **demo.ctx.summary, "ui": ui_info,
                   "next_steps": next_steps(demo.ctx.workdir, demo.ctx.topology_path, ui_info),
                   "duration_s": round(time.monotonic() - demo.t0, 1)}
        (demo.ctx.workdir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary
    finally:
        demo.close()
