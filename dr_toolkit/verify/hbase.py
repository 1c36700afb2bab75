"""`drt verify hbase://hot/ns:table hbase://cold/ns:table`: HBase tables compared cell by cell, as
HBase's VerifyReplication compares them, on Spark.

**How cells are read.** Spark executors read each side through HBase's own ``TableInputFormat``
(one Spark partition per region; each a client scan of the region server that holds it) with
the Scan VerifyReplication builds from the same options — or, with ``--read snapshot``, from a
table snapshot taken for the run, as HFiles on the cluster's HDFS through
``TableSnapshotInputFormat`` (the region servers serve no scans; the snapshot and its restore
directory are deleted when the run ends: :func:`drop_snapshots`). The reading is done in the JVM
by a small class the library ships (``java/HBaseCells.java``, compiled on first use against
Spark's jars and the HBase client jars, cached in ``~/.cache/dr-toolkit``): one row per HBase row
— ``row`` (``Bytes.toStringBinary``), ``cells`` (every cell's family, qualifier, timestamp, type
and value, raw, length-prefixed, in HBase's order: one binary value) and the row's digest ``h``/``c``
— so Python never touches a cell except those of the sampled rows (:func:`decode_cells`), and the
generic verifyrep pipeline (:mod:`dr_toolkit.verify.compare`: bucket digests first, row compare
only where they differ) compares them. Why this way: it is how a deployment reads HBase from Spark
(``hbase mapredcp`` jars on Spark's classpath, no connector to install), it reads
region-parallel, and the Scan is VerifyReplication's, so "what is compared" is HBase's own answer,
not a re-implementation (see docs/design.md for the snapshot read and the default).

**What is compared** (VerifyReplication's ``Result.compareResults``): per row, the same number of
cells and, position by position, the same family, qualifier, timestamp, type and value. Options as
VerifyReplication spells them: a time range ``[start, end)`` on cell timestamps (``--start-time``/
``--end-time``), ``--families``, ``--row-prefixes``, ``--versions N`` (default 1: the newest
version; ``all``), ``--raw`` (delete markers are cells too; without it a deleted cell is simply
absent, as VerifyReplication sees it).

**Counters.** GOODROWS, BADROWS and the three kinds count rows over the whole table. One place
where VerifyReplication counts differently: its mapper scans the peer from the first *source* row
of each region, so peer-only rows ahead of a region's first source row (or in a region with no
source row) are never counted by it; here they are ONLY_IN_PEER_TABLE_ROWS.

**HBase client jars.** ``$DRT_HBASE_CLASSPATH`` (what ``hbase mapredcp`` prints: jars,
directories or ``dir/*``), else ``hbase mapredcp`` run with the cluster's ``hbase_shell``. Hadoop
comes from Spark's own client.

**Errors.** A table missing on either side, a family missing, a time after now or a bad option:
ConfigError (exit 2), one line. A ZooKeeper quorum that does not answer, or a cluster whose
client calls time out: UnreachableError (exit 3).
"""

from __future__ import annotations

import glob
import hashlib
import math
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.javac import build_jar, cache_dir
from dr_toolkit.spark.hadoop import spark_jars_dir
from dr_toolkit.verify.compare import CONTENT, ONLY_PEER, ONLY_SOURCE
from dr_toolkit.verify.sources import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dr_toolkit.topology import Topology

SCHEME = "hbase://"
READER_CLASS = "org.drtoolkit.verify.HBaseCells"
READER_SOURCE = Path(__file__).parent / "java" / "HBaseCells.java"
KEY = "row"
TIMEOUT_MS = 20000
MAX_TS = 2**63 - 1


def is_hbase(uri: str | None) -> bool:
    return bool(uri) and str(uri).startswith(SCHEME)


@dataclass(frozen=True)
class Scan:
    """VerifyReplication's options, as dr-toolkit takes them (times in ms, ``versions`` -1 = newest only)."""

    families: tuple[str, ...] = ()
    row_prefixes: tuple[str, ...] = ()
    start_ms: int = 0
    end_ms: int = MAX_TS
    versions: int = -1
    raw: bool = False
    caching: int = 1000

    def to_json(self) -> dict[str, Any]:
        return {"families": list(self.families), "row_prefixes": list(self.row_prefixes),
                "start_ms": self.start_ms, "end_ms": None if self.end_ms == MAX_TS else self.end_ms,
                "versions": "all" if self.versions == 2**31 - 1 else (self.versions if self.versions >= 0 else 1),
                "raw": self.raw}

    def verifyrep_args(self) -> list[str]:
        """The same options as HBase's VerifyReplication command line spells them."""
        out = []
        if self.start_ms:
            out.append(f"--starttime={self.start_ms}")
        if self.end_ms != MAX_TS:
            out.append(f"--endtime={self.end_ms}")
        if self.versions >= 0:
            out.append(f"--versions={self.versions}")
        if self.families:
            out.append(f"--families={','.join(self.families)}")
        if self.row_prefixes:
            out.append(f"--row-prefixes={','.join(self.row_prefixes)}")
        if self.raw:
            out.append("--raw")
        return out


def make_scan(*, families: list[str] | str | None = None, row_prefixes: list[str] | str | None = None,
              start: float | None = None, end: float | None = None, versions: int | str | None = None,
              raw: bool = False, now: float | None = None) -> Scan:
    """Check and build the options (``start``/``end`` in epoch seconds). Bad input: ConfigError."""
    def listed(v: list[str] | str | None, what: str) -> tuple[str, ...]:
        items = v.split(",") if isinstance(v, str) else list(v or [])
        out = tuple(x.strip() for x in items if x and x.strip())
        for x in out:
            if " " in x:
                raise ConfigError(f"{what} {x!r} has a space", hint=f"{what}: comma-separated, no spaces")
        return out

    now = time.time() if now is None else now
    for name, t in (("--start-time", start), ("--end-time", end)):
        if t is not None and t > now + 1:
            raise ConfigError(f"{name} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t))} is after now",
                              hint="a verification can only be about what has been written: give a past time")
        if t is not None and t < 0:
            raise ConfigError(f"{name} is before 1970", hint="give epoch seconds or ISO 8601")
    if start is not None and end is not None and end <= start:
        raise ConfigError("--end-time is not after --start-time")
    if versions is None or versions == "":
        n = -1
    elif str(versions).strip().lower() == "all":
        n = 2**31 - 1
    else:
        try:
            n = int(str(versions))
        except ValueError:
            raise ConfigError(f"--versions {versions!r} is not a number", hint="--versions N or --versions all") \
                from None
        if n < 1:
            raise ConfigError(f"--versions must be at least 1, not {n}")
    return Scan(families=listed(families, "--families"), row_prefixes=listed(row_prefixes, "--row-prefixes"),
                start_ms=0 if start is None else int(round(start * 1000)),
                end_ms=MAX_TS if end is None else int(round(end * 1000)), versions=n, raw=raw)


@dataclass(frozen=True)
class Table:
    """One side: a cluster's ZooKeeper quorum and znode parent, and a table."""

    uri: str
    quorum: str
    parent: str
    table: str

    @property
    def display(self) -> str:
        return self.uri


def parse(uri: str, topology: Topology | None, side: str) -> Table:
    """``hbase://<cluster>/<ns>:<table>`` (the cluster's ``zookeeper`` section of the topology) or
    ``hbase://<zk host:port>[,…]/<znode parent>/<ns>:<table>``."""
    if not is_hbase(uri):
        raise ConfigError(f"the {side} is not an hbase:// URI", where=uri,
                          hint="both sides of an HBase verification are hbase://<cluster>/<ns>:<table>")
    u = urlparse(uri)
    path = u.path.strip("/")
    if not u.netloc or not path:
        raise ConfigError(f"the {side} names no cluster or no table", where=uri,
                          hint="hbase://<cluster>/<ns>:<table>, e.g. hbase://hot/default:orders")
    *parent_parts, table = path.split("/")
    if ":" in table and not all(table.split(":", 1)):
        raise ConfigError(f"bad table name {table!r} in the {side}", where=uri, hint="<ns>:<table> or <table>")
    if ":" in u.netloc:  # a ZooKeeper quorum given directly
        for hp in u.netloc.split(","):
            host, _, port = hp.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"bad ZooKeeper address {hp!r} in the {side}", where=uri,
                                  hint="hbase://<cluster>/<ns>:<table> or hbase://zk:2181/<parent>/<ns>:<table>")
        return Table(uri, u.netloc, "/" + "/".join(parent_parts) if parent_parts else "/hbase", table)
    if parent_parts:
        raise ConfigError(f"the {side} has a path before the table", where=uri,
                          hint="hbase://<cluster>/<ns>:<table> (the znode parent comes from the topology)")
    if topology is None:
        raise ConfigError(f"the {side} names cluster {u.netloc!r} but no topology is configured", where=uri,
                          hint="pass --config drt.yaml, or hbase://<zk host:port>/<znode parent>/<ns>:<table>")
    cluster = topology.clusters.get(u.netloc)
    if cluster is None:
        raise ConfigError(f"no cluster {u.netloc!r} in the topology", where=uri,
                          hint=f"clusters: {', '.join(sorted(topology.clusters))}")
    if cluster.zookeeper is None:
        raise ConfigError(f"cluster {u.netloc!r} has no zookeeper section", where=uri,
                          hint="set clusters.<name>.zookeeper.quorum and hbase_znode_parent")
    return Table(uri, cluster.zookeeper.quorum, cluster.zookeeper.hbase_znode_parent, table)


def check_reachable(t: Table, side: str, timeout_s: float = 5.0) -> None:
    """UnreachableError (exit 3) when no member of the table's ZooKeeper quorum answers."""
    last = "no address"
    for hp in t.quorum.split(","):
        host, _, port = hp.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except OSError as exc:
            last = exc.strerror or type(exc).__name__
    raise UnreachableError(f"the {side} HBase cluster's ZooKeeper does not answer ({last})", where=t.quorum,
                           hint=f"start the cluster or fix the quorum of {t.uri}")


# -- the client jars and our reader -------------------------------------------------------------
def client_jars(topology: Topology | None = None) -> list[str]:
    """The HBase client jars Spark needs: ``$DRT_HBASE_CLASSPATH``, else ``hbase mapredcp``."""
    text = os.environ.get("DRT_HBASE_CLASSPATH", "").strip()
    if not text and topology is not None:
        shell = next((c.hbase_shell for c in topology.clusters.values() if c.hbase_shell), None)
        if shell:
            try:
                r = subprocess.run([shell, "mapredcp"], capture_output=True, text=True, timeout=120, check=False)
            except OSError as exc:
                raise ConfigError(f"cannot run `{shell} mapredcp`: {exc}", hint="fix clusters.<name>.hbase_shell") \
                    from None
            text = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
    if not text:
        raise ConfigError("the HBase client jars are not known: Spark cannot read HBase tables",
                          hint="set DRT_HBASE_CLASSPATH to what `hbase mapredcp` prints (or hbase_shell in the "
                               "topology)")
    jars: list[str] = []
    for part in text.split(os.pathsep):
        part = part.strip()
        if not part:
            continue
        if part.endswith("*"):
            jars += sorted(glob.glob(part if part.endswith(".jar") else part.rstrip("*") + "*.jar"))
        elif os.path.isdir(part):
            jars += sorted(glob.glob(os.path.join(part, "*.jar")))
        elif part.endswith(".jar"):
            if not os.path.isfile(part):
                raise ConfigError("an HBase client jar does not exist", where=part, hint="fix DRT_HBASE_CLASSPATH")
            jars.append(part)
    if not any(os.path.basename(j).startswith(("hbase-mapreduce", "hbase-shaded-mapreduce")) for j in jars):
        raise ConfigError("the HBase client classpath has no hbase-mapreduce jar (TableInputFormat)",
                          hint="DRT_HBASE_CLASSPATH must list what `hbase mapredcp` prints")
    return jars


def reader_jar(jars: list[str]) -> str:
    """Our reader, compiled against Spark's jars and the HBase client jars (once per content)."""
    spark_jars = spark_jars_dir()
    if spark_jars is None:
        raise ConfigError("cannot find Spark's jars to build the HBase reader against",
                          hint="install pyspark or set SPARK_HOME")
    h = hashlib.sha256(READER_SOURCE.read_bytes())
    for j in sorted(os.path.basename(x) for x in jars):
        h.update(j.encode())
    h.update(str(sorted(p.name for p in spark_jars.glob("spark-sql_*.jar"))).encode())
    dest = cache_dir() / f"drt-hbase-reader-{h.hexdigest()[:12]}.jar"
    if dest.is_file():
        return str(dest)
    cp = os.pathsep.join([str(spark_jars / "*"), *jars])
    build_jar(dest, READER_SOURCE, cp, what="the HBase reader", release="17",
              hint="check DRT_HBASE_CLASSPATH (an HBase 2.x client)")
    return str(dest)


def spark_conf(topology: Topology | None) -> dict[str, str]:
    """What a session needs to read HBase: our reader and the client jars on the driver's and the
    executors' class path (``spark.jars`` ships them to the workers). On the class path, not only in
    ``spark.jars``: HBase's ``hbase-hadoop2-compat`` puts classes into Hadoop's own package
    ``org.apache.hadoop.metrics2.lib``, and a package split across Spark's two class loaders
    (Hadoop in the application loader, ``spark.jars`` in Spark's child loader) fails with
    ``IllegalAccessError`` as soon as a region is opened client-side (the snapshot read)."""
    client = client_jars(topology)  # may run `hbase mapredcp`: once
    jars = [reader_jar(client), *client]
    path = os.pathsep.join(jars)
    return {"spark.jars": ",".join(jars), "spark.driver.extraClassPath": path, "spark.executor.extraClassPath": path}


def _reader(spark: SparkSession) -> Any:
    jvm: Any = spark.sparkContext._jvm
    try:
        cls = jvm.java.lang.Class.forName(READER_CLASS, True, jvm.Thread.currentThread().getContextClassLoader())
    except Exception:  # noqa: BLE001 - Py4JJavaError: ClassNotFoundException
        raise ConfigError("this Spark session cannot read HBase: its classpath lacks dr-toolkit's HBase reader",
                          hint="let `drt verify` start the session, or start it with "
                               "spark.jars=<dr_toolkit.verify.hbase.spark_conf()['spark.jars']>") from None
    del cls
    reader = jvm.org.drtoolkit.verify.HBaseCells
    _kerberos(reader)
    return reader


ENV_SERVER_PRINCIPAL = "DRT_HBASE_PRINCIPAL"


def _kerberos(reader: Any) -> None:
    """A secure HBase (``$DRT_HBASE_PRINCIPAL``: its servers' principal, ``hbase/_HOST@REALM``): the
    Spark JVM logs in from the keytab of ``DRT_KERBEROS_PRINCIPAL``/``DRT_KERBEROS_KEYTAB`` before any
    client is made (local Spark: the executors share the driver's login). The keytab is checked here
    first (KerberosError, exit 3, one line)."""
    server = os.environ.get(ENV_SERVER_PRINCIPAL, "").strip()
    if not server:
        return
    from dr_toolkit.kerberos import ENV_KEYTAB, KerberosConfig, KerberosError, kerberos_for

    cfg = KerberosConfig.from_env()
    if not cfg.principal or not cfg.keytab:
        raise KerberosError(f"{ENV_SERVER_PRINCIPAL} names a secure HBase but no principal and keytab are given",
                            where="verify", hint=f"set DRT_KERBEROS_PRINCIPAL and {ENV_KEYTAB}")
    kerberos_for(cfg).credentials()  # a missing keytab or unknown principal: one line now, not a JVM trace
    try:
        reader.kerberos(cfg.principal, cfg.keytab, server, cfg.krb5_conf or "")
    except Exception as exc:  # noqa: BLE001 - Py4JJavaError: the JVM's login failed
        raise KerberosError(f"the Spark JVM cannot log in as {cfg.principal}: {_java_error(exc)}",
                            where="verify", hint=f"check {ENV_KEYTAB} and KRB5_CONFIG") from None


def _java_error(exc: BaseException) -> str:
    text = str(exc)
    for marker in ("Caused by: ", "java.", "org.apache."):
        i = text.find(marker)
        if i >= 0:
            return first_line(Exception(text[i:]))
    return first_line(exc)


def _unreachable_text(text: str) -> bool:
    return any(s in text for s in ("ConnectionLoss", "Connection refused", "RetriesExhausted", "SocketTimeout",
                                   "CallTimeoutException", "MasterNotRunning", "timed out", "ConnectException",
                                   "NoServerForRegion", "KeeperException"))


def describe(spark: SparkSession, t: Table, side: str) -> list[str]:
    """The table's families; ConfigError when it does not exist, UnreachableError when the cluster
    does not answer."""
    reader = _reader(spark)
    try:
        answer = str(reader.describe(t.quorum, t.parent, t.table, TIMEOUT_MS))
    except Exception as exc:  # noqa: BLE001 - Py4JJavaError
        text = str(exc)
        if _unreachable_text(text):
            raise UnreachableError(f"the {side} HBase cluster does not answer: {_java_error(exc)}", where=t.uri,
                                   hint="check that its master and region servers are up") from None
        raise ConfigError(f"the {side} table cannot be described: {_java_error(exc)}", where=t.uri) from None
    if answer == "missing":
        raise ConfigError(f"table {t.table} does not exist on the {side}", where=t.uri,
                          hint="check the table name (<ns>:<table>) and the cluster")
    return answer.split("\t")[1:]


def precheck(src: Table, peer: Table, scan: Scan) -> None:
    """The checks that need no Spark: both ZooKeeper quorums answer."""
    del scan
    check_reachable(src, "source")
    check_reachable(peer, "peer")


def check_tables(spark: SparkSession, src: Table, peer: Table, scan: Scan) -> dict[str, list[str]]:
    """Both tables exist and have every family asked for (ConfigError naming the side otherwise)."""
    out = {}
    for side, t in (("source", src), ("peer", peer)):
        fams = describe(spark, t, side)
        missing = [f for f in scan.families if f not in fams]
        if missing:
            raise ConfigError(f"table {t.table} on the {side} has no family {', '.join(missing)}", where=t.uri,
                              hint=f"its families: {', '.join(fams)}")
        out[side] = fams
    return out


READS = ("region-servers", "snapshot")


@dataclass
class Snapshots:
    """How a verification reads: ``region-servers`` (TableInputFormat) or ``snapshot``
    (TableSnapshotInputFormat over a table snapshot taken for the read; ``rootdirs`` = each side's
    ``hbase.rootdir`` URI, which the executors read). ``taken`` lists what :func:`drop_snapshots`
    deletes when the verification ends."""

    mode: str = "region-servers"
    rootdirs: dict[str, str] = field(default_factory=dict)
    taken: list[tuple[Table, str, str, str]] = field(default_factory=list)
    current: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # side -> the last one taken
    names: list[str] = field(default_factory=list)  # every snapshot taken, for the report


def make_snapshots(read_mode: str | None, rootdirs: str | list[str] | None) -> Snapshots:
    """Check ``--read`` and ``--hbase-rootdir SRC[,PEER]`` (ConfigError: exit 2)."""
    mode = (read_mode or "region-servers").strip().lower()
    if mode not in READS:
        raise ConfigError(f"--read {read_mode!r} is not a way to read HBase", hint="--read region-servers|snapshot")
    roots = rootdirs.split(",") if isinstance(rootdirs, str) else list(rootdirs or [])
    roots = [r.strip().rstrip("/") for r in roots if r and r.strip()]
    if mode == "region-servers":
        if roots:
            raise ConfigError("--hbase-rootdir is for --read snapshot only")
        return Snapshots()
    if len(roots) not in (1, 2):
        raise ConfigError("--read snapshot needs each cluster's hbase.rootdir",
                          hint="--hbase-rootdir hdfs://hot-nn:8020/hbase,hdfs://cold-nn:8020/hbase")
    for r in roots:
        u = urlparse(r)
        if u.scheme not in ("hdfs", "file", "s3a", "viewfs") or (u.scheme == "hdfs" and not u.netloc):
            raise ConfigError(f"--hbase-rootdir {r!r} is not a filesystem URI",
                              hint="the cluster's hbase.rootdir, e.g. hdfs://namenode:8020/hbase")
    return Snapshots("snapshot", {"source": roots[0], "peer": roots[-1]})


def _restore_dir(rootdir: str, name: str) -> str:
    """Where TableSnapshotInputFormat restores a snapshot's references: the root's filesystem, outside it."""
    u = urlparse(rootdir)
    return f"{u.scheme}://{u.netloc}/tmp/drt-verify-restore/{name}"


def _snapshot_for(reader: Any, t: Table, side: str, snapshots: Snapshots | None, reuse: bool
                  ) -> tuple[str, str, str]:
    """(snapshot, rootdir, restore dir) to read ``side`` from: none for a region-server read; the
    side's last snapshot when ``reuse`` (the re-read of the ranges the chunk pass found differing
    must read the same data); else one taken now (recorded for :func:`drop_snapshots`)."""
    import uuid

    if snapshots is None or snapshots.mode != "snapshot":
        return "", "", ""
    if reuse and side in snapshots.current:
        return snapshots.current[side]
    root = snapshots.rootdirs[side]
    snap = f"drt-verify-{t.table.replace(':', '_')}-{int(time.time())}-{uuid.uuid4().hex[:8]}"
    restore = _restore_dir(root, snap)
    snapshots.taken.append((t, snap, root, restore))
    snapshots.names.append(f"{side}:{snap}")
    reader.snapshot(t.quorum, t.parent, t.table, snap, TIMEOUT_MS)
    snapshots.current[side] = (snap, root, restore)
    return snap, root, restore


def _read_error(exc: BaseException, t: Table, side: str) -> Exception:
    if _unreachable_text(str(exc)):
        return UnreachableError(f"the {side} HBase cluster does not answer: {_java_error(exc)}", where=t.uri)
    return ConfigError(f"the {side} table cannot be read: {_java_error(exc)}", where=t.uri)


def _reader_args(spark: SparkSession, reader: Any, t: Table, scan: Scan, side: str, snapshots: Snapshots | None,
                 reuse: bool) -> tuple[Any, ...]:
    """The arguments ``HBaseCells.read`` and ``HBaseCells.chunks`` share: the table, the Scan's
    options and what to read it from (a snapshot taken here, or reused: :func:`_snapshot_for`)."""
    snap, root, restore = _snapshot_for(reader, t, side, snapshots, reuse)
    return (spark._jsparkSession, t.quorum, t.parent, t.table, ",".join(scan.families), ",".join(scan.row_prefixes),
            scan.start_ms, scan.end_ms, scan.versions, scan.raw, scan.caching, TIMEOUT_MS, snap, root, restore)


Range = tuple[bytes, bytes, int]  # start (inclusive), stop (exclusive; b"" = the table's end), bucket


def read(spark: SparkSession, t: Table, scan: Scan, side: str, snapshots: Snapshots | None = None,
         ranges: list[Range] | None = None, reuse: bool = False) -> DataFrame:
    """The table's rows (``row``, ``cells``, ``h``, ``c``, ``b``) as Spark reads them: through
    TableInputFormat (the region servers), or from a snapshot (``snapshots.mode == "snapshot"``: taken
    now, or the side's last one when ``reuse``). ``ranges``: only the rows in those row ranges, ``b``
    being the bucket of the range a row is in; ``None``: every row (``b`` = 0); ``[]``: no row."""
    from pyspark.sql import DataFrame

    reader = _reader(spark)
    if ranges is not None and not ranges:
        jvm: Any = spark.sparkContext._jvm
        return DataFrame(spark._jsparkSession.createDataFrame(jvm.java.util.ArrayList(), reader.schema()), spark)
    text = ",".join(f"{a.hex()}:{b.hex()}:{i}" for a, b, i in ranges or [])
    try:
        jdf = reader.read(*_reader_args(spark, reader, t, scan, side, snapshots, reuse), text)
    except Exception as exc:  # noqa: BLE001 - Py4JJavaError
        raise _read_error(exc, t, side) from None
    return DataFrame(jdf, spark)


# -- chunk digests: the fast path for identical key ranges -------------------------------------
CHUNK_ROWS = 4096


def chunk_bits() -> int:
    """log2 of the rows a chunk holds on average: ``$DRT_HBASE_CHUNK_ROWS`` (rounded to a power of
    two), else 4,096. Smaller: fewer rows re-read per difference, more digests for the driver."""
    text = os.environ.get("DRT_HBASE_CHUNK_ROWS", "").strip()
    try:
        n = int(text) if text else CHUNK_ROWS
    except ValueError:
        raise ConfigError(f"DRT_HBASE_CHUNK_ROWS={text!r} is not a number",
                          hint="rows per chunk digest, e.g. 4096") from None
    if n < 1:
        raise ConfigError(f"DRT_HBASE_CHUNK_ROWS must be at least 1, not {n}")
    return max(0, min(30, round(math.log2(n))))


Chunk = tuple[bytes, bool, int, int, int]  # first row key, starts at a boundary key, rows, two digest sums


def chunks(spark: SparkSession, tables: tuple[Table, Table], scan: Scan, snapshots: Snapshots | None,
           bits: int) -> tuple[list[Chunk], list[Chunk]]:
    """Both tables as chunk digests (``HBaseCells.chunks``), read in one Spark job."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    reader = _reader(spark)
    frames: list[DataFrame] = []
    for t, side in zip(tables, ("source", "peer"), strict=True):
        try:
            jdf = reader.chunks(*_reader_args(spark, reader, t, scan, side, snapshots, False), bits)
        except Exception as exc:  # noqa: BLE001 - Py4JJavaError
            raise _read_error(exc, t, side) from None
        frames.append(DataFrame(jdf, spark).withColumn("side", F.lit(len(frames))))
    out: tuple[list[Chunk], list[Chunk]] = ([], [])
    try:
        rows = frames[0].unionByName(frames[1]).collect()
    except Exception as exc:  # noqa: BLE001 - Py4JJavaError: a task failed reading a region
        raise _read_error(exc, tables[0], "source or peer") from None
    for r in rows:
        out[r["side"]].append((bytes(r["first"]), bool(r["boundary"]), int(r["n"]), int(r["h1"]), int(r["h2"])))
    return out


def _joined(records: list[Chunk]) -> list[tuple[bytes, bytes | None, int, int, int]]:
    """One side's records as whole chunks ``(start, stop, rows, h1, h2)`` in key order: a record
    that does not start at a boundary key continues the chunk before it (a region end cut it), and
    is added to it; the first chunk starts at b"" (the table's start); ``stop`` is the next chunk's
    start (None: the table's end)."""
    mask = 2**64 - 1
    out: list[list[Any]] = []
    for first, boundary, n, h1, h2 in sorted(records):
        if out and not boundary:
            out[-1][2] += n
            out[-1][3] = (out[-1][3] + h1) & mask
            out[-1][4] = (out[-1][4] + h2) & mask
        else:
            out.append([first if boundary else b"", None, n, h1 & mask, h2 & mask])
    for a, b in zip(out, out[1:], strict=False):
        a[1] = b[0]
    return [(a[0], a[1], a[2], a[3], a[4]) for a in out]


def compare_chunks(source: list[Chunk], peer: list[Chunk]) -> tuple[list[tuple[bytes, int]], list[tuple[bytes, bytes]]]:
    """The chunk digests of both sides as ``(identical, differing)``: ``identical`` — chunks both
    sides hold with the same bounds, row count and digest sums, as ``(start, rows)``; ``differing`` —
    every other part of the key space where either side has rows, as disjoint, merged row ranges
    ``(start, stop)`` (stop b"" = the table's end), in key order. Each side's chunks cover its rows
    once and an identical chunk is a chunk of both, so the two lists never overlap and every row is
    in exactly one of them."""
    s, p = _joined(source), _joined(peer)
    pk = {c[0]: c for c in p}
    identical = [(c[0], c[2]) for c in s if pk.get(c[0]) == c]
    same = {start for start, _ in identical}
    merged: list[list[Any]] = []  # [start, stop]; stop None: the table's end
    for start, stop in sorted(((c[0], c[1]) for c in [*s, *p] if c[0] not in same), key=lambda x: x[0]):
        last = merged[-1] if merged else None
        if last is not None and (last[1] is None or start <= last[1]):  # overlaps or touches: one range
            if stop is None or (last[1] is not None and stop > last[1]):
                last[1] = stop
            continue
        merged.append([start, stop])
    return identical, [(a, b if b is not None else b"") for a, b in merged]


def drop_snapshots(spark: SparkSession, snapshots: Snapshots) -> list[str]:
    """Delete every snapshot a verification took and its restore directory; the ones that could not
    be deleted are returned (as ``cluster: name: why``) for the caller to report."""
    left: list[str] = []
    if not snapshots.taken:
        return left
    reader = _reader(spark)
    while snapshots.taken:
        t, snap, root, restore = snapshots.taken.pop()
        try:
            reader.dropSnapshot(t.quorum, t.parent, snap, root, restore, TIMEOUT_MS)
        except Exception as exc:  # noqa: BLE001 - Py4JJavaError
            left.append(f"{t.uri}: snapshot {snap}: {_java_error(exc)}")
    return left


_TYPES = {0: "Minimum", 4: "Put", 8: "Delete", 10: "DeleteFamilyVersion", 12: "DeleteColumn", 14: "DeleteFamily",
          255: "Maximum"}
_PLAIN = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz `~!@#$%^&*()-_=+[]{}|;:'\",.<>/?")


def string_binary(b: bytes) -> str:
    """HBase's ``Bytes.toStringBinary``: printable ASCII as is, every other byte as ``\\xHH``."""
    return "".join(chr(x) if x in _PLAIN else f"\\x{x:02X}" for x in b)


def decode_cells(data: bytes | bytearray | str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The reader's ``cells`` bytes (``HBaseCells.encodeCells``; hex text accepted too) as a list of
    ``{family, qualifier, ts, type, value}`` (texts as ``Bytes.toStringBinary``); a list is already that."""
    if data is None:
        return []
    if isinstance(data, list):
        return data
    b = bytes.fromhex(data) if isinstance(data, str) else bytes(data)
    out, i = [], 0

    def field_() -> bytes:
        nonlocal i
        n = int.from_bytes(b[i:i + 4], "big")
        v = b[i + 4:i + 4 + n]
        i += 4 + n
        return v

    while i < len(b):
        fam, qual = field_(), field_()
        ts = int.from_bytes(b[i:i + 8], "big", signed=True)
        typ = b[i + 8]
        i += 9
        value = field_()
        out.append({"family": string_binary(fam), "qualifier": string_binary(qual), "ts": ts,
                    "type": _TYPES.get(typ, str(typ)), "value": string_binary(value)})
    return out


def cell_diff(samples: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """For rows whose content differs, keep only the cells that differ: ``source.cells`` = cells
    the source has and the peer lacks (or holds with another value, timestamp or type), and the
    other way round."""
    for kind in (ONLY_SOURCE, ONLY_PEER):
        for item in samples.get(kind, []):
            for side in ("source", "peer"):
                if isinstance(item.get(side), dict) and "cells" in item[side]:
                    item[side]["cells"] = decode_cells(item[side]["cells"])
    for item in samples.get(CONTENT, []):
        s = decode_cells((item.get("source") or {}).get("cells"))
        p = decode_cells((item.get("peer") or {}).get("cells"))

        def key(c: dict[str, Any]) -> tuple[Any, ...]:
            return (c.get("family"), c.get("qualifier"), c.get("ts"), c.get("type"), c.get("value"))

        sk, pk = [key(c) for c in s], [key(c) for c in p]
        item["source"] = {"cells": [c for c, k in zip(s, sk, strict=True) if k not in pk]}
        item["peer"] = {"cells": [c for c, k in zip(p, pk, strict=True) if k not in sk]}
        item["cells"] = {"source": len(s), "peer": len(p)}
    return samples
