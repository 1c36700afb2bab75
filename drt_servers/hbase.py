"""Real HBase 2.6 clusters (``hbase-testing-util`` 2.6.1-hadoop3) for the tests, the demo and the
benchmarks — docs/contracts.md, "The real servers".

Each :class:`HBaseCluster` is one JVM (``drt_servers/java/hbase/HBaseMiniServer.java``) running
HBase's own mini ZooKeeper, a mini HDFS (one DataNode, WebHDFS on), one master and one region
server (its ``/jmx`` and ``/rs-status`` on; the master's ``/master-status`` on a port the launcher picks, published
in its znode as a deployed master publishes it), with replication tuned for tests. When it is up, the JVM writes
``cluster.json`` — where ZooKeeper listens and the znode parent, ``hbase.rootdir`` (never assume
``/hbase``: the testing utility puts it under ``/user/<user>/test-data/<uuid>``), the NameNode's
RPC and HTTP ports, the region servers and their info ports — and answers a line protocol on a
control port: every admin action (tables, puts, peers, WAL rolls, region-server kill/start) is
HBase's own Admin API.

:func:`hbase_pair` starts hot and cold with a real replication peer hot → cold and a table whose
family has ``REPLICATION_SCOPE => 1`` on both.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drt_servers import maven
from drt_servers.process import ManagedProcess, free_port

if TYPE_CHECKING:
    from drt_servers.kdc import Kdc

JAVA17_FLAGS = [
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    *[f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.io", "java.nio", "sun.nio.ch", "java.lang", "jdk.internal.ref", "java.lang.reflect", "java.util",
        "java.util.concurrent", "java.util.concurrent.atomic", "java.net", "java.security", "sun.security.util",
        "java.text", "java.math", "java.util.zip")],
    *[f"--add-exports=java.base/{p}=ALL-UNNAMED" for p in ("jdk.internal.misc", "sun.net.dns", "sun.net.util")],
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
]

LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %-5p [%t] %c{1}: %m%n
rootLogger = WARN,console
logger.repl.name = org.apache.hadoop.hbase.replication
logger.repl.level = WARN
"""

TABLE = "default:orders"
FAMILY = "d"
PEER = "1"


class ControlError(RuntimeError):
    """The cluster's control channel answered ``ok: false``."""


@dataclass
class RegionServer:
    server_name: str  # host,port,startcode as in /hbase/rs and the WAL directory names
    info_port: int  # HTTP: /jmx


class HBaseCluster:
    """One real HBase cluster (mini ZooKeeper + mini HDFS + master + region server) in one JVM."""

    def __init__(self, workdir: Path, name: str, *, heap: str = "900m", start_timeout: float = 300,
                 kdc: Kdc | None = None, superusers: tuple[str, ...] = ("drt",)) -> None:
        self.name = name
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.kdc = kdc
        self.host = "localhost" if kdc is not None else "127.0.0.1"
        self.zk_port = free_port()
        self.zookeeper: ManagedProcess | None = None
        self.control_port = free_port()
        self.master_info_port_wanted = free_port()  # the master's info server (/master-status, peers)
        self.info: dict[str, Any] = {}
        cp = maven.classpath("hbase")
        classes = maven.java_classes("hbase")
        conf = self.workdir / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "log4j2.properties").write_text(LOG4J2)
        secure: list[str] = []
        env: dict[str, str] = {}
        if kdc is not None:
            from drt_servers.zookeeper import zookeeper

            self.zookeeper = zookeeper(self.workdir / "zk", self.zk_port, kdc=kdc)
            (conf / "secure.properties").write_text("".join(
                f"{k}={v}\n" for k, v in secure_conf(kdc, [kdc.principal(u) for u in superusers]).items()))
            kdc.jaas_file(conf / "jaas.conf", "Client", kdc.hbase_keytab, SERVICE_PRINCIPAL)
            secure = [*kdc.jvm_options(), f"-Djava.security.auth.login.config={conf / 'jaas.conf'}",
                      f"-Ddrt.secure.conf={conf / 'secure.properties'}"]
            env = kdc.client_env()
        argv = [maven.java(), f"-Xmx{heap}", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.net.preferIPv4Stack=true", f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
                f"-Djava.io.tmpdir={self.workdir}", f"-Ddrt.master.info.port={self.master_info_port_wanted}",
                *secure, *JAVA17_FLAGS,
                "-cp", f"{classes}:{cp}", "HBaseMiniServer", str(self.workdir), str(self.zk_port),
                str(self.control_port)]
        self.process = ManagedProcess(f"hbase-{name}" + ("-secure" if kdc is not None else ""), argv,
                                      port=self.control_port, log_dir=self.workdir, ready=self._ready,
                                      start_timeout=start_timeout, cwd=self.workdir, env=env or None)

    @classmethod
    def attach(cls, workdir: str | Path, name: str, control_port: int) -> HBaseCluster:
        """The cluster another process started and still runs (the suite's child test processes:
        tests/support/fixtures_hbase.py), through the same control channel; :meth:`stop` leaves it
        running (its owner stops it). What it says about itself is asked again (:meth:`refresh`)."""
        self = cls.__new__(cls)
        self.name, self.workdir, self.kdc, self.host = name, Path(workdir), None, "127.0.0.1"
        self.zookeeper, self.control_port, self.master_info_port_wanted = None, int(control_port), -1
        self.process = _Attached(f"hbase-{name}", int(control_port))  # type: ignore[assignment]
        self.info = {}
        self.refresh()
        self.zk_port = int(self.info["zk_port"])
        return self

    def attach_args(self) -> dict[str, Any]:
        """What :meth:`attach` takes to reach this cluster from another process."""
        return {"workdir": str(self.workdir), "name": self.name, "control_port": self.control_port}

    # --- lifecycle --------------------------------------------------------------------------------

    def _ready(self) -> bool:
        f = self.workdir / "cluster.json"
        if not f.exists():
            return False
        self.info = json.loads(f.read_text())
        return True

    def start(self) -> HBaseCluster:
        (self.workdir / "cluster.json").unlink(missing_ok=True)
        if self.zookeeper is not None:
            self.zookeeper.start()
        try:
            self.process.start()
        except BaseException:
            if self.zookeeper is not None:
                self.zookeeper.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            self.process.stop()
        finally:
            if self.zookeeper is not None:
                self.zookeeper.stop()

    @property
    def started_in_s(self) -> float | None:
        return self.process.started_in_s

    def rss_bytes(self) -> int:
        return self.process.rss_bytes()

    def describe(self) -> str:
        return (f"{self.process.describe()}; ZooKeeper {self.zk_quorum}{self.znode_parent}, "
                f"rootdir {self.rootdir}, NameNode http {self.nn_http_port}, region servers "
                f"{', '.join(f'{r.server_name} (info {r.info_port})' for r in self.region_servers)}")

    # --- what the cluster said about itself ------------------------------------------------------

    @property
    def zk_quorum(self) -> str:
        return f"{self.host}:{self.info['zk_port']}"

    @property
    def znode_parent(self) -> str:
        return str(self.info["znode_parent"])

    @property
    def cluster_key(self) -> str:
        """``host:port:parent`` — what a peer on another cluster points at."""
        return f"{self.host}:{self.info['zk_port']}:{self.znode_parent}"

    @property
    def rootdir_uri(self) -> str:
        return str(self.info["rootdir"])

    @property
    def rootdir(self) -> str:
        """The path part of hbase.rootdir on the cluster's HDFS (e.g. ``/user/root/test-data/<uuid>``)."""
        return urllib.parse.urlparse(self.rootdir_uri).path

    @property
    def nn_rpc_port(self) -> int:
        return int(self.info["nn_rpc_port"])

    @property
    def nn_http_port(self) -> int:
        return int(self.info["nn_http_port"])

    @property
    def webhdfs_url(self) -> str:
        return f"webhdfs://{self.host}:{self.nn_http_port}"

    @property
    def region_servers(self) -> list[RegionServer]:
        return [RegionServer(r["server_name"], int(r["info_port"])) for r in self.info.get("region_servers", [])]

    def refresh(self) -> dict[str, Any]:
        self.info = self.request("info")
        return self.info

    # --- control channel (HBase's Admin API in the JVM) -------------------------------------------

    def request(self, *words: str, timeout: float = 120) -> dict[str, Any]:
        line = " ".join(words)
        with socket.create_connection(("127.0.0.1", self.control_port), timeout=timeout) as s:
            s.sendall(line.encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        answer: dict[str, Any] = json.loads(buf.decode())
        if not answer.get("ok"):
            raise ControlError(f"hbase-{self.name}: {line!r} failed: {answer.get('error')}")
        return answer

    def create_table(self, table: str = TABLE, families: str = FAMILY, scope: int = 1, versions: int = 1,
                     splits: list[str] | None = None) -> None:
        """Create the table (and its namespace); ``splits``: row keys it is pre-split at (one region more)."""
        self.request("create_table", table, families, str(scope), str(versions), ",".join(splits) if splits else "-")

    def put_cell(self, table: str, row: str, family: str, qualifier: str, value: str, ts: int | None = None) -> None:
        """One cell through HBase's Table API (``ts`` None: the region server's time). No spaces in the words."""
        self.request("cell", table, row, family, qualifier, "-" if ts is None else str(ts), value)

    def delete(self, table: str, row: str, family: str | None = None, qualifier: str | None = None,
               ts: int | None = None) -> None:
        """A real Delete: the row, a family, the newest version of a column, or the version at ``ts``."""
        words = [w for w in (family, qualifier, None if ts is None else str(ts)) if w is not None]
        self.request("delete", table, row, *words)

    def put(self, first: int, n: int, *, table: str = TABLE, family: str = FAMILY, value_bytes: int = 100) -> None:
        self.request("put", table, family, str(first), str(n), str(value_bytes))

    def count(self, table: str = TABLE) -> int:
        return int(self.request("count", table)["rows"])

    def count_range(self, first: int, n: int, table: str = TABLE) -> int:
        """How many of the rows ``first .. first+n-1`` (as :meth:`put` names them) the table holds."""
        return int(self.request("count_range", table, str(first), str(n))["rows"])

    def alter_scope(self, table: str, family: str, scope: int) -> None:
        self.request("alter_scope", table, family, str(scope))

    def drop_table(self, table: str) -> None:
        self.request("drop_table", table)

    def flush(self, table: str = TABLE) -> None:
        self.request("flush", table)

    def add_peer(self, peer_id: str, cluster_key: str, table_cfs: str | None = None) -> None:
        self.request("add_peer", peer_id, cluster_key, *([table_cfs] if table_cfs else []))

    def add_peer_filtered(self, peer_id: str, cluster_key: str, *, replicate_all: bool,
                          namespaces: str | None = None, table_cfs: str | None = None,
                          exclude_namespaces: str | None = None, exclude_table_cfs: str | None = None) -> None:
        """A DISABLED peer with HBase 2.x's filters (lists as ``ns1,ns2`` / ``ns:t:cf1,cf2;t2``)."""
        self.request("add_peer_filtered", peer_id, cluster_key, str(replicate_all).lower(),
                     *(v or "-" for v in (namespaces, table_cfs, exclude_namespaces, exclude_table_cfs)))

    def need_to_replicate(self, peer_id: str, table: str, family: str | None = None) -> bool:
        """HBase's own answer (``ReplicationPeerConfig.needToReplicate``) for the peer's filters."""
        return bool(self.request("need_to_replicate", peer_id, table, *([family] if family else []))["need"])

    def enable_peer(self, peer_id: str) -> None:
        self.request("enable_peer", peer_id)

    def disable_peer(self, peer_id: str) -> None:
        self.request("disable_peer", peer_id)

    def remove_peer(self, peer_id: str) -> None:
        self.request("remove_peer", peer_id)

    def list_peers(self) -> dict[str, dict[str, Any]]:
        """The peers as HBase itself sees them (``Admin.listReplicationPeers``), by id."""
        return {p["id"]: p for p in self.request("list_peers")["peers"]}

    def put_durability(self, first: int, n: int, durability: str, *, table: str = TABLE, family: str = FAMILY
                       ) -> None:
        """Rows ``first .. first+n-1`` (named as :meth:`put` names them), each Put with ``durability``
        (``SKIP_WAL``: the region server writes no WAL entry for it)."""
        self.request("put_durability", table, family, str(first), str(n), durability)

    def bulkload(self, first: int, n: int, *, table: str = TABLE, family: str = FAMILY) -> None:
        """Rows ``first .. first+n-1`` written into an HFile and bulk-loaded (no WAL edit for their cells)."""
        self.request("bulkload", table, family, str(first), str(n))

    def set_durability(self, table: str, durability: str) -> None:
        """The table descriptor's DURABILITY (``Admin.modifyTable``)."""
        self.request("set_durability", table, durability)

    @property
    def master_info_port(self) -> int:
        return int(self.info.get("master_info_port", -1))

    def roll_wal(self) -> None:
        self.request("roll_wal")

    def kill_region_server(self, index: int = 0) -> str:
        server = str(self.request("kill_rs", str(index))["server"])
        self.refresh()
        return server

    def start_region_server(self) -> str:
        server = str(self.request("start_rs")["server"])
        self.refresh()
        return server

    def wait_rows(self, n: int, table: str = TABLE, timeout: float = 120) -> int:
        """Poll until the table has at least ``n`` rows (replication arrived); returns the count."""
        deadline = time.monotonic() + timeout
        got = self.count(table)
        while got < n and time.monotonic() < deadline:
            time.sleep(0.5)
            got = self.count(table)
        if got < n:
            raise TimeoutError(f"hbase-{self.name}: {table} has {got} rows, expected {n} within {timeout} s")
        return got

    def jmx(self, query: str = "Hadoop:service=HBase,name=RegionServer,sub=Replication", index: int = 0
            ) -> dict[str, Any]:
        port = self.region_servers[index].info_port
        url = f"http://{self.host}:{port}/jmx?qry={urllib.parse.quote(query)}"
        if self.kdc is not None:  # SPNEGO, as the cluster's own service principal
            from dr_toolkit.kerberos import http_get

            r = http_get(url, kerberos=self.service_kerberos())
            r.raise_for_status()
            beans: list[dict[str, Any]] = r.json()["beans"]
        else:
            with urllib.request.urlopen(url, timeout=10) as resp:
                beans = json.loads(resp.read())["beans"]
        return beans[0] if beans else {}

    def service_kerberos(self) -> Any:
        """A :class:`dr_toolkit.kerberos.Kerberos` holder for ``hbase/localhost`` (secure mode only)."""
        from dr_toolkit.kerberos import KerberosConfig, kerberos_for

        assert self.kdc is not None
        return kerberos_for(KerberosConfig(principal=self.kdc.principal(SERVICE_PRINCIPAL),
                                           keytab=str(self.kdc.hbase_keytab), krb5_conf=str(self.kdc.krb5_conf),
                                           source="drt_servers"))

    def write_hbase_command(self, path: Path) -> Path:
        """An executable ``hbase`` command for this cluster at ``path`` (what a topology's
        ``clusters.<name>.hbase_shell`` names): ``hbase classpath`` / ``hbase mapredcp`` and
        ``hbase <CLASS>`` are bin/hbase's on this launcher's jars; its ``shell -n FILE`` makes the
        peer and scope commands dr-toolkit generates through HBase's Admin API on the control
        channel (no JRuby shell is served by Maven at this release: see the script's text). Shared
        by the tests (tests/support/fixtures_hbase.py) and ``drt demo``.

        On a secure cluster (``kdc``) ``shell -n FILE`` is a real HBase client instead
        (``DrtAdminShell``): it logs in from the Kerberos ticket cache of its environment
        (``KRB5CCNAME``; ``krb5.conf`` from ``KRB5_CONFIG``) as ``hbase shell`` does, and makes each
        command an Admin RPC over SASL/GSSAPI — without a ticket it fails (exit 1)."""
        import sys

        secure = None
        if self.kdc is not None:
            props = self.workdir / "conf" / "client.properties"
            svc = self.kdc.principal(SERVICE_PRINCIPAL)
            props.write_text("hbase.security.authentication=kerberos\nhadoop.security.authentication=kerberos\n"
                             f"hbase.master.kerberos.principal={svc}\nhbase.regionserver.kerberos.principal={svc}\n")
            secure = [self.host, str(self.info["zk_port"]), self.znode_parent, str(props),
                      str(self.kdc.krb5_conf), str(self.workdir / "conf" / "log4j2.properties"),
                      maven.java_classes("hbase")]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HBASE_COMMAND.format(python=sys.executable, name=self.name, cp=maven.classpath("hbase"),
                                             mapredcp=mapredcp(), java=maven.java(), flags=list(JAVA17_FLAGS),
                                             control=self.control_port, secure=secure,
                                             cds_dir=str(maven.CACHE / "hbase-cds")))
        path.chmod(0o755)
        return path


class _Attached:
    """The process side of an attached :class:`HBaseCluster`: running while its control port answers;
    never stopped from here."""

    def __init__(self, name: str, port: int) -> None:
        self.name, self.port = name, port
        self.started_in_s: float | None = None

    @property
    def running(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        pass

    def describe(self) -> str:
        return f"{self.name}: attached (started by another process), control port {self.port}"

    def rss_bytes(self) -> int:
        return 0


def hbase_pair(root: Path, *, peer_id: str = PEER, table: str = TABLE, family: str = FAMILY,
               kdc: Kdc | None = None) -> tuple[HBaseCluster, HBaseCluster]:
    """Hot and cold clusters, ``table`` with ``family`` at REPLICATION_SCOPE 1 on both, and a real peer
    ``peer_id`` hot → cold added through HBase's Admin API. The JVMs start one after the other (two
    cores). ``kdc``: both kerberized in its realm (the module doc), each with its own SASL ZooKeeper."""
    hot = HBaseCluster(Path(root) / "hot", "hot", kdc=kdc)
    cold = HBaseCluster(Path(root) / "cold", "cold", kdc=kdc)
    hot.start()
    try:
        cold.start()
        cold.create_table(table, family, 1)
        hot.create_table(table, family, 1)
        hot.add_peer(peer_id, cold.cluster_key)
    except BaseException:
        hot.stop()
        cold.stop()
        raise
    return hot, cold


SERVICE_PRINCIPAL = "hbase/localhost"


def secure_conf(kdc: Kdc, superusers: list[str]) -> dict[str, str]:
    """The Hadoop + HBase keys of a kerberized cluster (the module doc): HDFS as in
    :func:`drt_servers.hdfs.secure_conf` but with the HBase service principal for NameNode and
    DataNode (one process, one login), HBase's RPC and info servers with Kerberos."""
    from drt_servers.hdfs import secure_conf as hdfs_secure_conf

    svc, keytab = kdc.principal(SERVICE_PRINCIPAL), str(kdc.hbase_keytab)
    http, http_keytab = kdc.principal("HTTP/localhost"), str(kdc.service_keytab)
    conf = hdfs_secure_conf(kdc)
    conf.update({
        "dfs.namenode.kerberos.principal": svc, "dfs.namenode.keytab.file": keytab,
        "dfs.datanode.kerberos.principal": svc, "dfs.datanode.keytab.file": keytab,
        "hbase.security.authentication": "kerberos",
        "hbase.master.kerberos.principal": svc, "hbase.master.keytab.file": keytab,
        "hbase.regionserver.kerberos.principal": svc, "hbase.regionserver.keytab.file": keytab,
        "hbase.security.authentication.ui": "kerberos",
        "hbase.security.authentication.spnego.kerberos.principal": http,
        "hbase.security.authentication.spnego.kerberos.keytab": http_keytab,
        "hbase.superuser": ",".join(superusers),
    })
    return conf


def start_for_cli(workdir: Path) -> list[ManagedProcess]:
    hot, cold = hbase_pair(workdir)
    for c in (hot, cold):
        print(c.describe())
    return [hot.process, cold.process]


def verify_replication(source: HBaseCluster, table: str, peer: str, *args: str, workdir: Path,
                       timeout: float = 1800, jvm_options: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run HBase's own VerifyReplication (``hbase-mapreduce``, MapReduce local job runner) against
    ``source``: ``peer`` is a peer id of ``source`` or a cluster key, ``args`` its options as HBase
    spells them (``--versions=3``, ``--families=d``, ``--starttime=MS``…). Returns its counters
    (GOODROWS, BADROWS, ONLY_IN_SOURCE_TABLE_ROWS, ONLY_IN_PEER_TABLE_ROWS, CONTENT_DIFFERENT_ROWS),
    ``job_s`` (the job itself) and ``wall_s`` (the JVM, start to end)."""
    return verify_replications(source, [(table, peer, list(args))], workdir=workdir, timeout=timeout,
                               jvm_options=jvm_options)[0]


#: the JVM options a test's VerifyReplication runs on small tables take (``jvm_options=``): the
#: client JIT only (C1) — a job over a few hundred rows is its JVM's start-up and class loading
QUICK_JVM = ("-XX:TieredStopAtLevel=1",)


def verify_replications(source: HBaseCluster, jobs: list[tuple[str, str, list[str]]], *, workdir: Path,
                        timeout: float = 1800, jvm_options: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """:func:`verify_replication` for each ``(table, peer, args)`` of ``jobs``, one job after the
    other in one JVM (``VerifyRepRunner … --then …``): each job its own VerifyReplication, Job and
    configuration, the JVM's start and class loading paid once. Returns each job's counters, in
    order; ``wall_s`` is the whole JVM's. ``jvm_options``: e.g. :data:`QUICK_JVM`."""
    import subprocess

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "log4j2.properties").write_text(LOG4J2)
    job_args: list[str] = []
    for i, (table, peer, args) in enumerate(jobs):
        job_args += [*(["--then"] if i else []), *args, peer, table]
    argv = [maven.java(), "-Xmx1g", "-XX:+UseSerialGC", *jvm_options, "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}", f"-Djava.io.tmpdir={workdir}",
            *JAVA17_FLAGS, "-cp", f"{maven.java_classes('hbase')}:{maven.classpath('hbase')}", "VerifyRepRunner",
            "127.0.0.1", str(source.info["zk_port"]), source.znode_parent, str(workdir), *job_args]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    wall = time.monotonic() - t0
    (workdir / "verifyrep.log").write_text(r.stdout + "\n--- stderr ---\n" + r.stderr)
    results = [ln for ln in r.stdout.strip().splitlines() if ln.startswith("{")]
    if not results:
        raise ControlError(f"VerifyReplication printed no result (exit {r.returncode}); log: "
                           f"{workdir / 'verifyrep.log'}: {r.stderr.strip()[-800:]}")
    outs: list[dict[str, Any]] = []
    for line in results:
        out: dict[str, Any] = json.loads(line)
        if not out.get("ok"):
            raise ControlError(f"VerifyReplication failed: {out} (log {workdir / 'verifyrep.log'})")
        out["wall_s"] = wall
        outs.append(out)
    if len(outs) != len(jobs):
        raise ControlError(f"VerifyReplication answered {len(outs)} of {len(jobs)} jobs (exit {r.returncode}); "
                           f"log {workdir / 'verifyrep.log'}: {r.stderr.strip()[-800:]}")
    return outs


#: the jars of the HBase client a Spark job needs to read tables through TableInputFormat — what
#: ``hbase mapredcp`` prints on an installation (TableMapReduceUtil.addHBaseDependencyJars), taken
#: from this launcher's resolved classpath; Hadoop itself comes from Spark's own client.
MAPREDCP = ("hbase-common", "hbase-client", "hbase-protocol", "hbase-protocol-shaded", "hbase-zookeeper",
            "hbase-shaded-miscellaneous", "hbase-shaded-gson", "hbase-shaded-protobuf", "hbase-shaded-netty",
            "hbase-unsafe", "hbase-replication", "hbase-hadoop-compat", "hbase-hadoop2-compat", "hbase-metrics",
            "hbase-metrics-api", "hbase-mapreduce", "hbase-server", "hbase-procedure", "hbase-asyncfs", "hbase-logging",
            "zookeeper", "zookeeper-jute", "opentelemetry-api", "opentelemetry-context", "opentelemetry-semconv",
            "audience-annotations", "protobuf-java")


def mapredcp() -> str:
    """The equivalent of ``hbase mapredcp`` for this HBase release (for ``DRT_HBASE_CLASSPATH``)."""
    import re

    out = []
    for jar in maven.classpath("hbase").split(":"):
        name = Path(jar).name
        m = re.match(r"(.+?)-\d[\w.\-]*\.jar$", name)
        if m and m.group(1) in MAPREDCP and not name.endswith("-tests.jar"):
            out.append(jar)
    return ":".join(out)


#: the text of :meth:`HBaseCluster.write_hbase_command`'s script
HBASE_COMMAND = '''#!{python}
"""`hbase` for the real HBase cluster {name} (written by drt_servers.hbase.HBaseCluster.write_hbase_command).

What bin/hbase does, on this launcher's HBase 2.6 jars: `hbase classpath` / `hbase mapredcp` print
the class paths; `hbase <CLASS> ARGS` runs the class in a JVM with $HBASE_CLASSPATH on the class path.
`hbase shell -n FILE`: the JRuby shell (org.apache.hbase:hbase-shell) is not served by Maven Central
at this release (drt_servers/maven/hbase/pom.xml), so the commands dr-toolkit generates are made
through HBase's Admin API on the cluster's control channel: add_peer, enable_peer, disable_peer,
remove_peer, alter ... REPLICATION_SCOPE; any other line fails the script (exit 1), as the shell
stops at the first error with -n."""
import json, os, re, socket, sys

CP = {cp!r}
MAPREDCP = {mapredcp!r}
JAVA = {java!r}
FLAGS = {flags!r}
CONTROL = {control}
CDS_DIR = {cds_dir!r}  # the class-data archives of `hbase CLASS` runs (drt_servers' cache)
SECURE = {secure!r}  # a kerberized cluster: [zk host, zk port, parent, client props, krb5.conf, log4j2, classes]


def control(*words):
    with socket.create_connection(("127.0.0.1", CONTROL), timeout=120) as s:
        s.sendall(" ".join(words).encode() + b"\\n")
        buf = b""
        while not buf.endswith(b"\\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    answer = json.loads(buf.decode())
    if not answer.get("ok"):
        sys.stderr.write("ERROR: " + str(answer.get("error")) + "\\n")
        sys.exit(1)


def class_archive(cp, main):
    """AppCDS (JDK 13+) for `hbase CLASS`: the first run of a class path (and main class) archives the
    classes it loaded, later runs map them — a JVM per tool call starts in about half the time (the
    cell tool's scan: 1.9 s -> 1.0 s). Returns ((tmp, final), options) for the archiving run, else
    (None, options). Not with a directory on the class path (the dump would fail the run: "Cannot
    have non-empty directory in paths"). JVM log lines go to stderr: stdout is the tool's."""
    if not CDS_DIR or any(os.path.isdir(p) for p in cp.split(":") if p):
        return None, []
    import hashlib
    quiet = ["-Xlog:disable", "-Xlog:all=warning:stderr"]
    name = hashlib.sha256("|".join((JAVA, main, cp)).encode()).hexdigest()[:16]
    final = os.path.join(CDS_DIR, name + ".jsa")
    if os.path.isfile(final):
        return None, ["-XX:SharedArchiveFile=" + final, *quiet]
    os.makedirs(CDS_DIR, exist_ok=True)
    tmp = os.path.join(CDS_DIR, "%s.%d.tmp.jsa" % (name, os.getpid()))
    return (tmp, final), ["-XX:ArchiveClassesAtExit=" + tmp, *quiet]


def quoted(text):
    return re.findall(r"'((?:[^'\\\\]|\\\\.)*)'", text)


def secure_shell(path):
    host, port, parent, props, krb5, log4j, classes = SECURE
    krb5 = os.environ.get("KRB5_CONFIG") or krb5
    os.execv(JAVA, [JAVA, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
                    "-Djava.security.krb5.conf=" + krb5, "-Dlog4j2.configurationFile=" + log4j, *FLAGS,
                    "-cp", classes + ":" + CP, "DrtAdminShell", host, port, parent, props, path])


def shell(path):
    if SECURE:
        secure_shell(path)
    for raw in open(path).read().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "exit":
            continue
        cmd = line.split()[0]
        q = quoted(line)
        if cmd == "add_peer" and "TABLE_CFS" not in line:
            control("add_peer", q[0], q[1])
        elif cmd in ("enable_peer", "disable_peer", "remove_peer"):
            control(cmd, q[0])
        elif cmd == "alter" and "REPLICATION_SCOPE" in line:
            for fam, scope in re.findall(r"NAME => '([^']+)', REPLICATION_SCOPE => (\\d+)", line):
                control("alter_scope", q[0], fam, scope)
        else:
            sys.stderr.write("ERROR: this hbase stand-in does not run: " + line + "\\n")
            sys.exit(1)
        print("Took 0.0100 seconds")


if len(sys.argv) < 2:
    sys.exit("usage: hbase classpath|mapredcp|shell -n FILE|CLASS ARGS")
if sys.argv[1] == "classpath":
    print(CP)
elif sys.argv[1] == "mapredcp":
    print(MAPREDCP)
elif sys.argv[1] == "shell":
    shell(sys.argv[-1])
else:
    extra = os.environ.get("HBASE_CLASSPATH", "")
    cp = (extra + ":" if extra else "") + CP
    dump, cds = class_archive(cp, sys.argv[1])
    argv = [JAVA, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
            *FLAGS, *cds, "-cp", cp, *sys.argv[1:]]
    if dump is None:
        os.execv(JAVA, argv)
    import subprocess
    rc = subprocess.call(argv)  # the first run of this class path: its classes archived when the JVM ends
    if rc == 0 and os.path.isfile(dump[0]):
        os.replace(dump[0], dump[1])
    elif os.path.exists(dump[0]):
        os.remove(dump[0])
    sys.exit(rc)
'''
