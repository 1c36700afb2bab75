"""Real YARN (docs/contracts.md, the real servers): a ResourceManager and one NodeManager from
Hadoop's minicluster jar (``hadoop-client-minicluster`` 3.4.1, the same artifacts and version as
HDFS: ``drt_servers/maven/yarn/pom.xml``), each started by our own main
``drt_servers/java/yarn/DrtYarn.java`` in its own Java 17 JVM on free 127.0.0.1 ports — two JVMs
as on a real cluster: ``MiniYARNCluster`` runs both daemons in one JVM, where the NodeManager's
web application replaces the ResourceManager's (Guice's servlet filter is static) and the
ResourceManager's REST API answers 404. YARN runs over an :class:`~drt_servers.hdfs.HdfsCluster`
(its ``fs.defaultFS``: where applications stage their files).

``YarnCluster.conf_dir`` is a client's ``HADOOP_CONF_DIR`` (``core-site.xml`` with
``fs.defaultFS`` = the HDFS cluster, an HA nameservice as a real client would name it;
``hdfs-site.xml``; ``yarn-site.xml`` with the ResourceManager's addresses): what ``spark-submit
--master yarn`` and Hadoop's own clients read. The NodeManager keeps its containers' logs in its
log directories (``log_dirs``: ``<dir>/application_*/container_*/std{out,err}``, kept after the
application ends: log aggregation is off); the ResourceManager's REST API is at ``rm_web``.

Sized for a 2-core machine shared with other servers: the NodeManager offers 4 GiB and 4 vcores
(containers are limited by what they ask for, not by virtual or physical memory checks, which are
off), the minimum allocation is 128 MiB, and an application master may take the whole queue (the
CapacityScheduler's default 10 % would leave a Spark application ACCEPTED for ever).

MapReduce runs on it too (``mapreduce=True``, the default): Hadoop DistCp as a YARN job is the peer
of ``drt distcp --engine spark --spark-master yarn`` (``benchmarks/yarn_distcp_bench.py``). The
unshaded Hadoop 3.4.1 MapReduce jars of ``drt_servers/maven/mapreduce/pom.xml`` are "installed on
the node": the NodeManager runs the ``mapreduce_shuffle`` auxiliary service (``ShuffleHandler``:
the shuffle jar and its Netty beside the minicluster jar on the NodeManager's classpath, on a free
port) — the MapReduce application master asks for it in every container it starts, map-only jobs
included — and ``mapred-site.xml`` in ``conf_dir`` says ``mapreduce.framework.name=yarn`` with
``mapreduce.application.classpath`` = the conf dir and those jars (the application master's and the
tasks' classpath). ``mapreduce_argv`` runs a MapReduce client main (``org.apache.hadoop.tools.DistCp``)
in its own JVM with that configuration. No JobHistoryServer: ``mapreduce.jobhistory.address`` is
empty, so a finished job's client reads the final state from the ResourceManager instead of
retrying a history server that is not there.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from drt_servers import maven
from drt_servers.hdfs import ADD_OPENS, LOG4J, HdfsCluster
from drt_servers.process import ManagedProcess, free_port

MAIN = "DrtYarn"
NM_MEMORY_MB = 4096
NM_VCORES = 4

MR_MAIN_OPTS = "-Xmx300m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true"
# the application master and a task each get this much of the NodeManager's 4 GiB
MR_CONTAINER_MB = 512

RM_KEYS = ("address", "scheduler.address", "resource-tracker.address", "admin.address", "webapp.address")
NM_KEYS = ("address", "localizer.address", "webapp.address")


def site_xml(props: dict[str, str]) -> str:
    """A Hadoop ``*-site.xml`` of ``props``."""
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in props.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


def hdfs_client_conf(hdfs: HdfsCluster) -> dict[str, str]:
    """What a Hadoop client needs to reach ``hdfs`` over RPC: ``fs.defaultFS`` and, for an HA pair,
    the nameservice ``drt`` with both NameNodes (the client fails over as against a real estate)."""
    if not hdfs.ha:
        return {"fs.defaultFS": f"hdfs://127.0.0.1:{hdfs.rpc_ports[0]}"}
    return {"fs.defaultFS": "hdfs://drt", "dfs.nameservices": "drt", "dfs.ha.namenodes.drt": "nn1,nn2",
            "dfs.namenode.rpc-address.drt.nn1": f"127.0.0.1:{hdfs.rpc_ports[0]}",
            "dfs.namenode.rpc-address.drt.nn2": f"127.0.0.1:{hdfs.rpc_ports[1]}",
            "dfs.client.failover.proxy.provider.drt":
                "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"}


class YarnCluster:
    """One real YARN over ``hdfs``: the ResourceManager (``rm``) and one NodeManager (``nm``),
    each a :class:`ManagedProcess` in its own JVM. ``start()`` returns once the NodeManager is
    RUNNING in the ResourceManager's REST API; a daemon that cannot start raises naming it, with
    its log's tail."""

    def __init__(self, name: str, workdir: Path, hdfs: HdfsCluster, *, conf: dict[str, str] | None = None,
                 heap: str = "384m", start_timeout: float = 180.0, mapreduce: bool = True) -> None:
        self.name = name
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.hdfs = hdfs
        self.conf_dir = self.workdir / "conf"
        self.info: dict[str, Any] = {}
        self.rm_ports = {k: free_port() for k in RM_KEYS}
        nm_ports = {k: free_port() for k in NM_KEYS}
        self.hdfs_conf = hdfs_client_conf(hdfs)
        self.log_dir = self.workdir / "nm-logs"
        self.mapreduce = mapreduce
        self.shuffle_port = free_port() if mapreduce else 0
        aux = {"yarn.nodemanager.aux-services": "mapreduce_shuffle",
               "yarn.nodemanager.aux-services.mapreduce_shuffle.class": "org.apache.hadoop.mapred.ShuffleHandler",
               "mapreduce.shuffle.port": str(self.shuffle_port)} if mapreduce else {}
        self.server_conf: dict[str, str] = {
            **self.hdfs_conf,
            "hadoop.tmp.dir": str(self.workdir / "tmp"),
            "yarn.resourcemanager.hostname": "127.0.0.1",
            **{f"yarn.resourcemanager.{k}": f"127.0.0.1:{p}" for k, p in self.rm_ports.items()},
            **{f"yarn.nodemanager.{k}": f"127.0.0.1:{p}" for k, p in nm_ports.items()},
            "yarn.nodemanager.hostname": "127.0.0.1",
            "yarn.nodemanager.local-dirs": str(self.workdir / "nm-local"),
            "yarn.nodemanager.log-dirs": str(self.log_dir),
            "yarn.nodemanager.recovery.enabled": "false",
            "yarn.nodemanager.resource.memory-mb": str(NM_MEMORY_MB),
            "yarn.nodemanager.resource.cpu-vcores": str(NM_VCORES),
            "yarn.scheduler.minimum-allocation-mb": "128",
            "yarn.scheduler.maximum-allocation-mb": str(NM_MEMORY_MB),
            "yarn.scheduler.maximum-allocation-vcores": str(NM_VCORES),
            # the CapacityScheduler's one queue (no capacity-scheduler.xml on the classpath)
            "yarn.scheduler.capacity.root.queues": "default",
            "yarn.scheduler.capacity.root.default.capacity": "100",
            "yarn.scheduler.capacity.root.default.maximum-capacity": "100",
            "yarn.scheduler.capacity.maximum-am-resource-percent": "1.0",
            "yarn.nodemanager.vmem-check-enabled": "false",
            "yarn.nodemanager.pmem-check-enabled": "false",
            # a nearly full disk must not turn the only NodeManager UNHEALTHY (no containers at all)
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "100.0",
            "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb": "0",
            # containers' logs stay in the NodeManager's log directories after the application ends
            "yarn.log-aggregation-enable": "false",
            "yarn.resourcemanager.am.max-attempts": "1",
            "yarn.nodemanager.delete.debug-delay-sec": "600",
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms": "250",
            **aux,
            **(conf or {}),
        }
        # the client configuration first on the daemons' classpath: the NodeManager's localizer reads
        # HDFS (the HA nameservice) with a Configuration of its own, not the one given on the command line
        cp = f"{self.conf_dir}:{maven.java_classes('yarn')}:{maven.classpath('yarn')}"
        # the NodeManager's shuffle service: ShuffleHandler and the (unshaded) Netty it serves with; the
        # Hadoop classes it uses are the minicluster jar's, which come first
        nm_cp = cp if not mapreduce else ":".join(
            [cp, *(j for j in maven.classpath("mapreduce").split(":")
                   if "/hadoop-mapreduce-client-shuffle-" in j or "/io/netty/" in j or "/leveldbjni" in j)])
        (self.workdir / "log4j.properties").write_text(LOG4J)
        java_home = str(Path(maven.java()).resolve().parent.parent)
        conf_args = [a for k, v in self.server_conf.items() for a in ("--conf", f"{k}={v}")]

        def daemon(role: str, port: int, ready: Any) -> ManagedProcess:
            role_cp = nm_cp if role == "nm" else cp
            argv = [maven.java(), f"-Xmx{heap}", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-Djava.net.preferIPv4Stack=true",
                    f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}", *ADD_OPENS, "-cp", role_cp, MAIN,
                    "--role", role, "--ready-file", str(self.workdir / f"{role}.json"), *conf_args]
            return ManagedProcess(f"{name}-{role}", argv, port=port, log_dir=self.workdir, ready=ready,
                                  env={"HADOOP_USER_NAME": "hdfs", "JAVA_HOME": java_home}, cwd=self.workdir,
                                  start_timeout=start_timeout)

        self.rm = daemon("rm", self.rm_ports["address"], self._rm_ready)
        self.nm = daemon("nm", nm_ports["address"], self._nm_ready)
        self._write_client_conf()

    def _write_client_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        yarn = {"yarn.resourcemanager.hostname": "127.0.0.1",
                **{f"yarn.resourcemanager.{k}": f"127.0.0.1:{p}" for k, p in self.rm_ports.items()}}
        (self.conf_dir / "core-site.xml").write_text(site_xml({"fs.defaultFS": self.hdfs_conf["fs.defaultFS"]}))
        (self.conf_dir / "hdfs-site.xml").write_text(site_xml(self.hdfs_conf))
        (self.conf_dir / "yarn-site.xml").write_text(site_xml(yarn))
        (self.conf_dir / "log4j.properties").write_text(LOG4J)
        if self.mapreduce:
            (self.conf_dir / "mapred-site.xml").write_text(site_xml(self.mapred_conf()))

    def mapred_conf(self) -> dict[str, str]:
        """``mapred-site.xml``: MapReduce jobs go to this YARN; the application master and the tasks run
        with the conf dir and the resolved MapReduce jars (as where Hadoop is installed on the nodes)."""
        opts = f"{MR_MAIN_OPTS} {' '.join(ADD_OPENS)}"
        return {"mapreduce.framework.name": "yarn",
                "mapreduce.application.classpath": f"{self.conf_dir}:{maven.classpath('mapreduce')}",
                "yarn.app.mapreduce.am.resource.mb": str(MR_CONTAINER_MB),
                "yarn.app.mapreduce.am.command-opts": opts,
                "mapreduce.map.memory.mb": str(MR_CONTAINER_MB), "mapreduce.map.java.opts": opts,
                "mapreduce.reduce.memory.mb": str(MR_CONTAINER_MB), "mapreduce.reduce.java.opts": opts,
                "mapreduce.shuffle.port": str(self.shuffle_port),
                # no JobHistoryServer here: a finished job's state comes from the ResourceManager
                "mapreduce.jobhistory.address": "",
                "yarn.app.mapreduce.am.staging-dir": "/tmp/hadoop-yarn/staging"}

    def mapreduce_argv(self, main: str, args: list[str], *, heap: str = "384m") -> list[str]:
        """``java … MAIN ARGS``: a MapReduce client (``org.apache.hadoop.tools.DistCp``) in its own JVM
        with ``conf_dir`` and the MapReduce jars, submitting to this YARN (run it with ``env()`` and
        ``HADOOP_USER_NAME``)."""
        if not self.mapreduce:
            raise ValueError(f"{self.name}: started without MapReduce (mapreduce=False)")
        return [maven.java(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.net.preferIPv4Stack=true", f"-Dlog4j.configuration=file:{self.conf_dir / 'log4j.properties'}",
                *ADD_OPENS, "-cp", f"{self.conf_dir}:{maven.classpath('mapreduce')}", main, *args]

    # -- life cycle ----------------------------------------------------------------------------
    def start(self) -> YarnCluster:
        for role, p in (("rm", self.rm), ("nm", self.nm)):
            (self.workdir / f"{role}.json").unlink(missing_ok=True)
            try:
                p.start()
            except BaseException:
                self.stop()
                raise
        self.info = json.loads((self.workdir / "nm.json").read_text())
        return self

    def stop(self) -> None:
        self.nm.stop()
        self.rm.stop()

    def _rm_ready(self) -> bool:
        if not (self.workdir / "rm.json").exists():
            return False
        info = self.rest("/info")
        return bool(info.get("clusterInfo", info).get("state") == "STARTED")

    def _nm_ready(self) -> bool:
        if not (self.workdir / "nm.json").exists():
            return False
        return any(n.get("state") == "RUNNING" for n in self._items("/nodes", "nodes", "node"))

    def _items(self, path: str, outer: str, inner: str) -> list[dict[str, Any]]:
        """The list of a REST answer: ``{"nodes": {"node": [...]}}``, ``{"nodes": []}`` or ``{"nodes": null}``."""
        got = self.rest(path).get(outer) or []
        return list(got.get(inner) or [] if isinstance(got, dict) else got)

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self.rm, self.nm]

    def describe(self) -> str:
        return "; ".join(p.describe() for p in self.processes)

    # -- addresses -----------------------------------------------------------------------------
    @property
    def rm_address(self) -> str:
        return f"127.0.0.1:{self.rm_ports['address']}"

    @property
    def rm_web(self) -> str:
        """``http://127.0.0.1:<port>`` of the ResourceManager's web UI and REST API (``/ws/v1/cluster``)."""
        return f"http://127.0.0.1:{self.rm_ports['webapp.address']}"

    @property
    def log_dirs(self) -> list[Path]:
        """The NodeManager's container log directories (``application_*/container_*/stderr``)."""
        return [self.log_dir]

    def env(self) -> dict[str, str]:
        """The environment a YARN client (spark-submit, ``drt --spark-master yarn``) needs."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def rest(self, path: str) -> Any:
        """GET ``/ws/v1/cluster<path>`` of the ResourceManager's REST API (JSON)."""
        req = urllib.request.Request(f"{self.rm_web}/ws/v1/cluster{path}", headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def application_ids(self, *, state: str | None = None, final_status: str | None = None) -> list[str]:
        """Ids of the applications the ResourceManager lists (``/apps?states=…&finalStatus=…``).
        The minicluster jar's shaded JSON provider serializes an application without its ``id``
        (``applicationId`` comes out empty), so the id is read from its ``trackingUrlPretty``."""
        import re

        q = "&".join(f"{k}={v}" for k, v in (("states", state), ("finalStatus", final_status)) if v)
        ids = []
        for app in self._items(f"/apps?{q}" if q else "/apps", "apps", "app"):
            m = re.search(r"application_\d+_\d+", str(app.get("id") or app.get("trackingUrlPretty") or ""))
            if m:
                ids.append(m.group(0))
        return ids

    def final_status(self, app_id: str) -> str:
        """The final status the application master reported (SUCCEEDED, FAILED, KILLED, UNDEFINED),
        from the ResourceManager's application page (its REST JSON loses fields, see above)."""
        import re

        with urllib.request.urlopen(f"{self.rm_web}/cluster/app/{app_id}", timeout=10) as r:
            page = r.read().decode(errors="replace")
        m = re.search(r"FinalStatus Reported by AM:\s*</th>\s*<td>\s*(\w+)", page)
        return m.group(1) if m else "?"

    def application_dirs(self) -> set[str]:
        """Ids of the applications whose containers left logs in the NodeManager's log directories."""
        return {p.name for d in self.log_dirs if d.is_dir() for p in d.glob("application_*")}

    def application_state(self, app_id: str) -> str:
        """``/apps/<id>/state``: NEW … RUNNING, FINISHED, FAILED, KILLED."""
        return str(self.rest(f"/apps/{app_id}/state")["state"])

    def container_logs(self, app_id: str) -> dict[str, str]:
        """``container_id/file`` → text of every log file the NodeManager keeps for ``app_id``."""
        out = {}
        for d in self.log_dirs:
            for f in sorted((d / app_id).glob("container_*/*")):
                if f.is_file():
                    out[f"{f.parent.name}/{f.name}"] = f.read_text(errors="replace")
        return out


def start_for_cli(workdir: Path) -> list[ManagedProcess]:
    """``python -m drt_servers start yarn --dir D``: the HDFS pair and a YARN over the hot cluster,
    ports and HADOOP_CONF_DIR printed."""
    from drt_servers.hdfs import hdfs_pair

    hot, cold = hdfs_pair(workdir / "hdfs")
    try:
        yarn = YarnCluster("yarn", workdir / "yarn", hot).start()
    except BaseException:
        cold.stop()
        hot.stop()
        raise
    for c in (hot, cold):
        print(f"{c.name}: namenodes {' '.join(c.namenodes)}, rpc {c.rpc_ports}")
    print(f"yarn: resourcemanager {yarn.rm_address}, web {yarn.rm_web}, nodemanager logs "
          f"{' '.join(map(str, yarn.log_dirs))}, MapReduce shuffle port {yarn.shuffle_port} "
          f"(mapred-site.xml: mapreduce.framework.name=yarn)\n"
          f"  export HADOOP_CONF_DIR={yarn.conf_dir} YARN_CONF_DIR={yarn.conf_dir}")
    return [hot, cold, *yarn.processes]
