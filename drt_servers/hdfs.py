"""Real HDFS (docs/contracts.md, the real servers): a NameNode (or an HA pair) and one DataNode from Hadoop's
``hadoop-client-minicluster`` (``drt_servers/maven/hdfs/pom.xml``), started by our own main
``drt_servers/java/hdfs/DrtMiniDfs.java`` in its own Java 17 JVM on free 127.0.0.1 ports, with
its data under a given directory (kept across stop/kill/restart).

``HdfsCluster`` gives the addresses (``webhdfs_url``, ``namenodes`` for a topology, ``namenode``
for ``webhdfs://`` URIs, ``rpc_port`` for ``hdfs://``) and the helpers tests use to change the
cluster behind the toolkit's back: plain WebHDFS calls (write, append, rename, delete, mkdir,
snapshots, stat) and, through the launcher's control port, what WebHDFS cannot do (a file kept
open for write and hflushed/hsynced, a writer's lease recovered, an HA failover).

**Secure mode** (opt-in: ``kdc=`` a :class:`drt_servers.kdc.Kdc`): Kerberos authentication
(``hadoop.security.authentication=kerberos``) with the NameNode and DataNode as
``hdfs/localhost`` and SPNEGO (``HTTP/localhost``) on WebHDFS, block access tokens on, and the
DataNode on unprivileged ports as Hadoop's own tests allow (``ignore.secure.ports.for.testing``:
no SASL data-transfer protection, which would need HTTPS). Its addresses name ``localhost``
(SPNEGO targets ``HTTP/<host of the URL>``); ``spnego_ui=True`` puts SPNEGO on the whole web UI
(``/jmx`` too, ``AuthenticationFilterInitializer``); ``auth_token_validity_s`` shortens Hadoop's
signed session cookie so every request authenticates again (tests of ticket renewal). The
helpers below then act as ``hdfs/localhost`` through the toolkit's own SPNEGO client.

Hadoop DistCp (``drt_servers/maven/distcp/pom.xml``, the local job runner in its own JVM) is the
copy-speed baseline: :func:`distcp_argv`.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drt_servers import maven
from drt_servers.process import ManagedProcess, free_port

if TYPE_CHECKING:
    from drt_servers.kdc import Kdc

HADOOP_VERSION = "3.4.1"
MAIN = "DrtMiniDfs"
USER = "hdfs"

LOG4J = """\
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.ConsoleAppender
log4j.appender.file.target=System.err
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d{HH:mm:ss,SSS} %p %c{1}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.metrics2=ERROR
log4j.logger.org.eclipse.jetty=ERROR
"""

# the NameNode's audit log (one line per namespace operation: cmd=open src=... proto=webhdfs|rpc),
# kept in its own file: tests read it to see what the toolkit asked the real NameNode for
AUDIT = """\
log4j.logger.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=INFO, audit
log4j.additivity.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=false
log4j.appender.audit=org.apache.log4j.FileAppender
log4j.appender.audit.File={path}
log4j.appender.audit.layout=org.apache.log4j.PatternLayout
log4j.appender.audit.layout.ConversionPattern=%m%n
"""

# Jersey (in the NameNode's web server) logs through java.util.logging
JUL = "handlers=java.util.logging.ConsoleHandler\n.level=SEVERE\n"

# Hadoop 3.4 on Java 17 (HADOOP-19310 adds the same to Hadoop's scripts)
ADD_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.reflect", "java.io", "java.net", "java.nio", "java.util", "java.util.concurrent",
    "java.util.zip", "java.math", "java.text", "sun.security.util", "sun.security.x509", "sun.nio.ch")]


class HdfsError(RuntimeError):
    """A control-port command the launcher refused (its Java exception's class and message)."""


class HdfsCluster(ManagedProcess):
    """One real HDFS cluster (NameNode + DataNode, or with ``ha`` two NameNodes of which the
    first is standby) in its own JVM. ``start()`` waits until the launcher wrote its ports."""

    def __init__(self, name: str, workdir: Path, *, ha: bool = False, snapshot_roots: Sequence[str] = (),
                 conf: dict[str, str] | None = None, heap: str = "384m", start_timeout: float = 180.0,
                 kdc: Kdc | None = None, spnego_ui: bool = False, auth_token_validity_s: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.kdc = kdc
        self.host = "localhost" if kdc is not None else "127.0.0.1"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ha = ha
        self.rpc_ports = [free_port() for _ in range(2 if ha else 1)]
        self.http_ports = [free_port() for _ in range(2 if ha else 1)]
        self.ports_file = self.workdir / "ports.json"
        self.info: dict[str, Any] = {}
        cp = f"{maven.java_classes('hdfs')}:{maven.classpath('hdfs')}"
        self.audit_log = self.workdir / "audit.log"
        (self.workdir / "log4j.properties").write_text(LOG4J + AUDIT.format(path=self.audit_log))
        (self.workdir / "jul.properties").write_text(JUL)
        secure = secure_conf(kdc, spnego_ui=spnego_ui, auth_token_validity_s=auth_token_validity_s) if kdc else {}
        argv = [maven.java(), f"-Xmx{heap}", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.net.preferIPv4Stack=true", *(kdc.jvm_options() if kdc else []), f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
                f"-Djava.util.logging.config.file={self.workdir / 'jul.properties'}",
                f"-Dtest.build.data={self.workdir / 'build'}", *ADD_OPENS, "-cp", cp, MAIN,
                "--dir", str(self.workdir / "data"), "--ports-file", str(self.ports_file),
                "--rpc", str(self.rpc_ports[0]), "--http", str(self.http_ports[0])]
        if ha:
            argv += ["--ha", "--rpc2", str(self.rpc_ports[1]), "--http2", str(self.http_ports[1])]
        for root in snapshot_roots:
            argv += ["--snapshot-root", root]
        for k, v in {**secure, **(conf or {})}.items():
            argv += ["--conf", f"{k}={v}"]
        env = {"HADOOP_USER_NAME": USER, **(kdc.client_env() if kdc else {})}
        super().__init__(name, argv, port=self.http_ports[-1], log_dir=self.workdir, ready=self._ready,
                         env=env, cwd=self.workdir, start_timeout=start_timeout)

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> HdfsCluster:
        self.ports_file.unlink(missing_ok=True)
        self.info = {}
        super().start()
        return self

    def restart(self) -> HdfsCluster:
        self.stop()
        return self.start()

    def _ready(self) -> bool:
        if not self.ports_file.exists():
            return False
        self.info = json.loads(self.ports_file.read_text())
        return True

    # -- addresses -----------------------------------------------------------------------------
    @property
    def rpc_port(self) -> int:
        """RPC port of the active NameNode (the one ``hdfs://127.0.0.1:<port>`` reaches)."""
        return self.rpc_ports[self.active_index()]

    @property
    def http_port(self) -> int:
        """HTTP (WebHDFS) port of the active NameNode."""
        return self.http_ports[self.active_index()]

    @property
    def webhdfs_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the active NameNode (WebHDFS REST under /webhdfs/v1)."""
        return f"http://{self.host}:{self.http_port}"

    @property
    def namenodes(self) -> list[str]:
        """Every NameNode's HTTP URL, in order (an HA pair: the standby first until a failover)."""
        return [f"http://{self.host}:{p}" for p in self.http_ports]

    @property
    def namenode(self) -> str:
        """``host:port`` of the active NameNode's HTTP server, for ``webhdfs://host:port/path``."""
        return f"{self.host}:{self.http_port}"

    @property
    def datanode_http_port(self) -> int:
        return int(self.info["dn_http"])

    def uri(self, path: str) -> str:
        return f"webhdfs://{self.namenode}{path}"

    def location(self, path: str) -> Any:
        """A :class:`dr_toolkit.fs.uri.Location` naming every NameNode (as a topology cluster would)."""
        from dr_toolkit.fs.uri import Location

        return Location("webhdfs", path, f"webhdfs://{self.namenodes[0].split('//')[1]}{path}",
                        namenodes=tuple(self.namenodes))

    def audit(self, cmd: str | None = None, under: str = "/") -> list[dict[str, str]]:
        """The NameNode's audit records so far (``cmd``, ``src``, ``dst``, ``proto``, ``ugi`` ...),
        those of ``cmd`` whose ``src`` lies under ``under``."""
        out = []
        try:
            lines = self.audit_log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        for line in lines:
            rec = dict(kv.split("=", 1) for kv in line.split("\t") if "=" in kv)
            if (cmd is None or rec.get("cmd") == cmd) and rec.get("src", "").startswith(under):
                out.append(rec)
        return out

    # -- the control port ------------------------------------------------------------------------
    def control(self, *words: str, timeout: float = 60.0) -> str:
        """One command of the launcher's line protocol; returns the text after ``ok``."""
        with socket.create_connection(("127.0.0.1", int(self.info["control"])), timeout=timeout) as s:
            s.sendall((" ".join(words) + "\n").encode())
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        reply = buf.decode().strip()
        if reply.startswith("ok"):
            return reply[3:]
        raise HdfsError(f"{self.name}: {' '.join(words)[:200]}: {reply}")

    def active_index(self) -> int:
        if not self.ha:
            return 0
        return int(self.control("active")) if self.info else 1

    def failover(self) -> None:
        """HA: the active NameNode becomes standby, the other one active."""
        self.control("failover")

    def open_for_write(self, path: str, data: bytes = b"", *, append: bool = False,
                       block_size: int | None = None, sync: str = "hflush") -> None:
        """A writer (the launcher's own HDFS client) creates ``path`` (or reopens it for append)
        and keeps it open; ``data`` is written and then ``sync``-ed (``hflush``, ``hsync`` =
        hsync with UPDATE_LENGTH, or ``none``)."""
        if append:
            self.control("append", path)
        else:
            self.control("create", path, *([str(block_size)] if block_size else []))
        if data:
            self.hflush(path, data, sync=sync)

    def hflush(self, path: str, data: bytes, *, sync: str = "hflush") -> None:
        """The open writer of ``path`` writes ``data`` and flushes it: readers now see it. A plain
        ``hflush`` does not tell the NameNode the new length (GETFILESTATUS keeps the completed
        blocks' length); ``sync="hsync"`` (UPDATE_LENGTH) does."""
        for i in range(0, len(data), 1 << 20):
            self.control("write", path, base64.b64encode(data[i:i + (1 << 20)]).decode())
        if sync != "none":
            self.control(sync, path)

    def close_file(self, path: str) -> None:
        """The writer closes the file: it is complete, its checksum can be had."""
        self.control("close", path)

    def recover_lease(self, path: str) -> None:
        """The writer dies; the NameNode recovers its lease and closes the file as it is."""
        if self.control("recover", path) != "true":
            raise HdfsError(f"{self.name}: lease of {path} not recovered")

    def allow_snapshot(self, path: str) -> None:
        self.control("allowsnapshot", path)

    # -- plain WebHDFS (as any other client would change the cluster) ------------------------------
    def client(self, user: str = USER) -> Any:
        """An HdfsCLI ``InsecureClient`` on the active NameNode (HdfsCLI does not fail over on a
        StandbyException); on a secure cluster a SPNEGO client acting as ``hdfs/localhost``."""
        from hdfs import Client, InsecureClient

        if self.kdc is None:
            return InsecureClient(self.webhdfs_url, user=user, timeout=60)
        from dr_toolkit.kerberos import KerberosConfig, SpnegoAuth, kerberos_for

        c = Client(self.webhdfs_url, timeout=60)
        c._session.auth = SpnegoAuth(kerberos_for(KerberosConfig(
            principal=self.kdc.principal("hdfs/localhost"), keytab=str(self.kdc.service_keytab),
            krb5_conf=str(self.kdc.krb5_conf), source="drt_servers")))
        return c

    def write(self, path: str, data: bytes, *, block_size: int | None = None) -> None:
        self.client().write(path, data, overwrite=True, blocksize=block_size)

    def append(self, path: str, data: bytes) -> None:
        self.client().write(path, data, append=True)

    def read(self, path: str) -> bytes:
        with self.client().read(path) as r:
            return bytes(r.read())

    def mkdir(self, path: str) -> None:
        self.client().makedirs(path)

    def rename(self, src: str, dst: str) -> None:
        self.client().rename(src, dst)

    def delete(self, path: str, recursive: bool = True) -> bool:
        return bool(self.client().delete(path, recursive=recursive))

    def stat(self, path: str) -> dict[str, Any] | None:
        """GETFILESTATUS's ``FileStatus`` (``None`` when missing)."""
        return self.client().status(path, strict=False)  # type: ignore[no-any-return]

    def create_snapshot(self, path: str, name: str) -> None:
        self.client().create_snapshot(path, name)

    def delete_snapshot(self, path: str, name: str) -> None:
        self.client().delete_snapshot(path, name)

    def set_times(self, path: str, mtime_ms: int) -> None:
        self.client().set_times(path, modification_time=mtime_ms)


def secure_conf(kdc: Kdc, *, spnego_ui: bool = False, auth_token_validity_s: int | None = None) -> dict[str, str]:
    """The Hadoop configuration of a kerberized cluster in realm ``kdc.realm`` (see the module doc)."""
    nn = kdc.principal("hdfs/localhost")
    http = kdc.principal("HTTP/localhost")
    keytab = str(kdc.service_keytab)
    conf = {
        "hadoop.security.authentication": "kerberos",
        "dfs.namenode.kerberos.principal": nn, "dfs.namenode.keytab.file": keytab,
        "dfs.datanode.kerberos.principal": nn, "dfs.datanode.keytab.file": keytab,
        "dfs.web.authentication.kerberos.principal": http, "dfs.web.authentication.kerberos.keytab": keytab,
        "dfs.namenode.kerberos.internal.spnego.principal": http,
        "dfs.block.access.token.enable": "true",
        "ignore.secure.ports.for.testing": "true",
        # WebHDFS's filter (AuthFilterInitializer) takes its type from hadoop.http.authentication.*
        "hadoop.http.authentication.type": "kerberos",
        "hadoop.http.authentication.simple.anonymous.allowed": "false",
        "hadoop.http.authentication.kerberos.principal": http,
        "hadoop.http.authentication.kerberos.keytab": keytab,
    }
    if spnego_ui:
        conf["hadoop.http.filter.initializers"] = "org.apache.hadoop.security.AuthenticationFilterInitializer"
    if auth_token_validity_s is not None:
        conf["hadoop.http.authentication.token.validity"] = str(auth_token_validity_s)
    return conf


def hdfs_pair(root: Path, *, hot_ha: bool = True) -> tuple[HdfsCluster, HdfsCluster]:
    """Hot (an HA pair of NameNodes unless ``hot_ha=False``, the standby listed first) and cold,
    two JVMs started one after the other (2 cores)."""
    hot = HdfsCluster("hdfs-hot", Path(root) / "hot", ha=hot_ha).start()
    try:
        cold = HdfsCluster("hdfs-cold", Path(root) / "cold").start()
    except BaseException:
        hot.stop()
        raise
    return hot, cold


def start_for_cli(workdir: Path) -> list[ManagedProcess]:
    """``python -m drt_servers start hdfs --dir D``: hot and cold, ports printed."""
    hot, cold = hdfs_pair(workdir)
    for c in (hot, cold):
        print(f"{c.name}: namenodes {' '.join(c.namenodes)}, rpc {c.rpc_ports}, datanode http "
              f"{c.datanode_http_port}, data {c.workdir / 'data'}")
    return [hot, cold]


def distcp_argv(args: Sequence[str], workdir: Path, *, heap: str = "512m") -> list[str]:
    """``java … org.apache.hadoop.tools.DistCp ARGS`` in its own JVM (the local job runner), with
    the unshaded Hadoop client of ``maven/distcp/pom.xml``; sources/targets as ``hdfs://`` or
    ``webhdfs://`` URIs of the clusters."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "log4j.properties").write_text(LOG4J)
    return [maven.java(), f"-Xmx{heap}", "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}", f"-Dhadoop.tmp.dir={workdir / 'tmp'}",
            *ADD_OPENS, "-cp", maven.classpath("distcp"), "org.apache.hadoop.tools.DistCp",
            "-Dmapreduce.framework.name=local", f"-Dmapreduce.cluster.local.dir={workdir / 'local'}",
            f"-Dyarn.app.mapreduce.am.staging-dir={workdir / 'staging'}", *args]


def wipe(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)


def wait_until(pred: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not met after {timeout}s")
