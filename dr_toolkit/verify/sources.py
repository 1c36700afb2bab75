"""What `drt verify` can read, and how each is named.

- A path URI (see :mod:`dr_toolkit.fs.uri`): ``file:///abs/dir``, ``hdfs://<cluster>/dir``,
  ``webhdfs://host:port/dir``, ``s3://bucket/prefix`` (or a bare ``/abs/dir``), read in
  ``fmt``: ``parquet`` (default), ``orc``, ``csv`` (with a header line, every column read as
  text — no schema inference pass), ``json`` (JSON lines). S3 needs ``hadoop-aws`` on
  Spark's classpath.
- ``hbase://<cluster>/<ns>:<table>``: an HBase table, compared cell by cell as VerifyReplication
  does (:mod:`dr_toolkit.verify.hbase`).
- ``table:<db>.<name>`` (or ``table:<name>``): a Spark/Hive table or a temporary view of the
  Spark session.
- ``jdbc:<driver url>``, e.g. ``jdbc:postgresql://db:5432/sales``, with the table given by
  ``table`` (``--table``, ``--peer-table``) and the user/password by a connection id
  (``--conn-id``/``--peer-conn-id``: an Airflow connection, or ``AIRFLOW_CONN_<ID>`` outside
  Airflow). The JDBC driver jar must be on Spark's classpath (``spark.jars``). Passwords
  never appear in the report, the ledger or a log: the URI is shown through ``redact``.

An existing directory without data files is an empty dataset (it takes the other side's
schema); a path that does not exist, an unknown format or files that are not in the
format are a ConfigError (exit 2).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.api import SNAP_PREFIX
from dr_toolkit.errors import ConfigError
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.secrets import redact
from dr_toolkit.signal import iso
from dr_toolkit.spark.hadoop import check_spark_uri, spark_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dr_toolkit.access import Access
    from dr_toolkit.topology import Topology

FORMATS = ("parquet", "orc", "csv", "json")


@dataclass(frozen=True)
class Dataset:
    """One side of a verification: where it is and how to read it."""

    uri: str
    fmt: str = "parquet"
    table: str | None = None  # JDBC table
    conn_id: str | None = None  # the JDBC user/password, through the caller's Access
    read_uri: str | None = None  # where it is read when not at ``uri``: a snapshot of it (:func:`pin_to_snapshot`)

    @property
    def display(self) -> str:
        """What reports and logs show: the URI without any password (plus the JDBC table)."""
        text = redact(self.uri)
        return f"{text} [{self.table}]" if self.uri.startswith("jdbc:") and self.table else text


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, redacted and cut (Spark errors are pages long)."""
    import re

    text = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if len(text) > 1 and text[0].startswith("An error occurred while calling"):
        # py4j's "An error occurred while calling o41.load." says nothing: the Java exception's
        # message follows (": org.apache.spark.SparkException: [FAILED_READ_FILE…] …")
        text = [re.sub(r"^:?\s*(?:[\w$]+\.)+[\w$]*(?:Exception|Error):\s*", "", text[1]), *text[2:]]
    return redact(text[0] if text else type(exc).__name__)[:300]


def _is_empty_dir(path: str) -> bool:
    try:
        return not any(not n.startswith(("_", ".")) for n in os.listdir(path))
    except OSError:
        return False


def precheck(ds: Dataset, *, side: str, topology: Topology | None = None) -> None:
    """The checks that need no Spark (run before a session starts): format, URI, local path."""
    if ds.uri.startswith(("table:", "hbase://")):
        return
    if ds.uri.startswith("jdbc:"):
        if not ds.table:
            raise ConfigError(f"the {side} is a JDBC URL but no table was given", where=ds.display,
                              hint="pass --table NAME (and --peer-table when the replica's differs)")
        return
    if ds.fmt not in FORMATS:
        raise ConfigError(f"unknown format {ds.fmt!r} for the {side}", where=ds.display,
                          hint=f"use one of: {', '.join(FORMATS)}")
    loc = parse_uri("file://" + ds.uri if ds.uri.startswith("/") else ds.uri, topology)
    if loc.kind == "local" and not os.path.exists(loc.path):
        raise ConfigError(f"{side} path does not exist", where=loc.path,
                          hint="check the path (a replica not copied yet?) or the cluster's local_root")
    if loc.kind != "local":
        _spark_path(loc.uri, topology)  # a scheme Spark cannot read here: one clear error, before Spark starts


def _spark_path(uri: str, topology: Topology | None) -> str:
    """The Hadoop URI Spark reads: through :mod:`dr_toolkit.spark.hadoop` (HDFS HA over RPC,
    s3a, a refused or working webhdfs)."""
    return str(spark_path(check_spark_uri(uri, topology)))


def read(spark: SparkSession, ds: Dataset, *, side: str, topology: Topology | None, access: Access
         ) -> DataFrame | None:
    """Read ``ds``; None when it is an existing directory holding no data files (an empty dataset).
    (An ``hbase://`` table is read by :func:`dr_toolkit.verify.hbase.read`.)"""
    uri = ds.read_uri or ds.uri
    if uri.startswith("table:"):
        name = uri[len("table:"):]
        try:
            return spark.table(name)
        except Exception as exc:  # noqa: BLE001 - pyspark raises AnalysisException subclasses
            raise ConfigError(f"{side} table {name!r} cannot be read: {first_line(exc)}", where=ds.display,
                              hint="name an existing Spark/Hive table or view as table:<db>.<name>") from None
    if uri.startswith("jdbc:"):
        return _read_jdbc(spark, ds, side, access)
    precheck(ds if ds.read_uri is None else Dataset(uri, ds.fmt), side=side, topology=topology)
    loc = parse_uri("file://" + uri if uri.startswith("/") else uri, topology)
    if loc.kind == "local" and os.path.isdir(loc.path) and _is_empty_dir(loc.path):
        return None
    path = _spark_path(loc.uri if loc.kind != "local" else "file://" + loc.path, topology)
    reader = spark.read.format(ds.fmt)
    if ds.fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "false")
    try:
        df = reader.load(path)
    except Exception as exc:  # noqa: BLE001 - AnalysisException, SparkException, Py4JJavaError
        msg = str(exc)
        if "PATH_NOT_FOUND" in msg or "Path does not exist" in msg:
            raise ConfigError(f"{side} path does not exist", where=ds.display,
                              hint="check the path (a replica not copied yet?)") from None
        if "UNABLE_TO_INFER_SCHEMA" in msg and loc.kind == "local":
            return None
        if loc.kind != "local" and ("FileSystem" in msg or "ClassNotFound" in msg or "No FileSystem" in msg
                                    or "UnknownHost" in msg or "Connection refused" in msg):
            raise ConfigError(f"Spark cannot reach the {side}: {first_line(exc)}", where=ds.display,
                              hint="check the cluster's Hadoop client settings (hdfs.rpc_addresses, s3 endpoint, "
                                   "hadoop-aws on Spark's classpath)") from None
        raise ConfigError(f"{side} cannot be read as {ds.fmt}: {first_line(exc)}", where=ds.display,
                          hint="pass the right --format (parquet, orc, csv, json)") from None
    if ds.fmt == "json" and df.columns == ["_corrupt_record"]:
        raise ConfigError(f"{side} is not JSON lines", where=ds.display, hint="pass the right --format")
    return df


def _read_jdbc(spark: SparkSession, ds: Dataset, side: str, access: Access) -> DataFrame:
    precheck(ds, side=side)
    assert ds.table is not None
    creds = access.get(ds.conn_id, what=f"the {side}'s --conn-id")
    reader = spark.read.format("jdbc").option("url", ds.uri).option("dbtable", ds.table)
    if creds is not None:
        if creds.login:
            reader = reader.option("user", creds.login)
        if creds.password:
            reader = reader.option("password", creds.password)
        driver = (creds.extra or {}).get("driver")
        if driver:
            reader = reader.option("driver", str(driver))
    try:
        return reader.load()
    except Exception as exc:  # noqa: BLE001 - SQLException arrives wrapped in Py4JJavaError
        raise ConfigError(f"{side} JDBC table cannot be read: {first_line(exc)}", where=ds.display,
                          hint="check the URL, the table, the credentials (conn id) and that the driver jar "
                               "is in spark.jars") from None


@dataclass(frozen=True)
class Pinned:
    """A tree read as it was at a time: through the HDFS snapshot ``name`` of ``root`` (taken at
    ``time``), readable at ``uri``."""

    uri: str
    root: str
    name: str
    time: float

    def to_json(self) -> dict[str, Any]:
        return {"snapshot": self.name, "root": self.root, "snapshot_time": self.time, "read_from": self.uri}


def pin_to_snapshot(uri: str, t: float, *, side: str, topology: Topology | None, access: Access) -> Pinned:
    """``uri`` (an HDFS tree) as it was at ``t``: the newest snapshot a replication run took of the
    snapshottable directory holding it (copy policies with ``snapshots: true`` take one per run, named
    ``drt-<run id>``, at their listing; :func:`dr_toolkit.copy.api._run`) at or before ``t``.
    ConfigError (exit 2) in one line when it cannot be: not HDFS, no snapshottable directory above it,
    no such snapshot at or before ``t``, or a later run still in progress (cold is being changed)."""
    import posixpath

    if uri.startswith("kafka://"):
        raise ConfigError(f"the {side} is a Kafka topic: it cannot be read as of a time", where=uri,
                          hint="a topic keeps no snapshot of a moment: verify without --as-of")
    loc = parse_uri("file://" + uri if uri.startswith("/") else uri, topology)
    if loc.kind != "webhdfs":
        raise ConfigError(f"the {side} cannot be read as of a time: only HDFS trees (through the replication "
                          f"runs' snapshots) and hbase:// tables can", where=redact(uri),
                          hint="drop --as-of, or give a --ts-column to bound the rows by time")
    fs = open_fs(loc, access)
    root = loc.path.rstrip("/") or "/"
    while not fs.is_snapshottable(root):
        if root == "/":
            raise ConfigError(f"no snapshottable directory holds the {side}: it cannot be read as of a time",
                              where=redact(uri), hint="hdfs dfsadmin -allowSnapshot <the copy policy's source "
                                                      "root>, and set snapshots: true on the copy policy")
        root = posixpath.dirname(root) or "/"
    taken: dict[str, float] = {}  # name -> when HDFS took it (the snapshot root's modification time)
    with fs._errors(root):  # type: ignore[attr-defined]  # WebHDFS: LISTSTATUS of <root>/.snapshot
        listed = fs.client.list(posixpath.join(root, ".snapshot"), status=True)  # type: ignore[attr-defined]
    for name, st in listed:
        if name.startswith(SNAP_PREFIX):
            taken[name] = float(st["modificationTime"]) / 1000
    before = [n for n, at in taken.items() if at <= t]
    if not before:
        raise ConfigError(f"no replication snapshot of {root} was taken at or before {iso(t)}"
                          + (f" (the oldest kept is from {iso(min(taken.values()))})" if taken else " (none kept)"),
                          where=redact(uri), hint="verify as of a later time (--as-of recovery-point), or run the "
                                                  "copy policy with snapshots: true")
    chosen = max(before, key=lambda n: taken[n])
    if len(taken) > 1:  # a finished run deletes its base's snapshot: two mean the newest run is still copying
        last_at, last = max((at, n) for n, at in taken.items())
        raise ConfigError(f"a replication run that listed {root} at {iso(last_at)} (snapshot {last}) has not "
                          f"finished: cold is being changed", where=redact(uri), hint="verify again when it has finished")
    rel = loc.path.rstrip("/")[len(root.rstrip("/")):]
    target = fs.snapshot_path(root, chosen) + rel
    base = loc.uri.rstrip("/")
    if not base.endswith(loc.path.rstrip("/")):
        raise ConfigError(f"the {side}'s URI does not end with its path: it cannot be pinned", where=redact(uri),
                          hint="give the tree as hdfs://<cluster>/<path>")
    return Pinned(base[:len(base) - len(loc.path.rstrip("/"))] + target, root, chosen, taken[chosen])
