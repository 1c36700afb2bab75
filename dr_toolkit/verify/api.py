"""verifyrep on Spark: compare a dataset and its replica by key, with VerifyReplication's counters.

``verify()`` is the whole job (see :mod:`dr_toolkit.verify.compare` for the steps);
``verify_policy()`` runs a topology's verify policy. Defined answers for the edge cases:

- **Null keys**: NULL is a key value (keys are matched null-safe); ``null_keys`` counts, per
  side, the rows with a NULL in any key column.
- **Duplicate keys**: all rows under one key fold into one digest, so a key is GOODROWS
  only when both sides hold the same multiset of rows; otherwise it counts once as
  CONTENT_DIFFERENT_ROWS (or ONLY_IN_*). ``duplicate_keys`` counts and samples the keys with
  more than one row on either side, found in the buckets that were row-compared (identical
  duplicates inside a bucket whose digests match are a faithful copy and are not listed).
- **Schema differences**: reported in ``schema``; a column missing on one side is NULL there,
  a changed type is compared by text (see :func:`dr_toolkit.verify.compare.align`). A key
  column or ``ts_column`` missing on either side is a ConfigError (exit 2).
- **Empty datasets**: zero rows (or an existing directory without data files) compare like
  any other: two empty sides give all-zero counters and no difference.
- **Counters** count keys in row-compared buckets and rows in buckets whose digests match
  (the same number unless a key is duplicated). BADROWS = ONLY_IN_SOURCE_TABLE_ROWS +
  ONLY_IN_PEER_TABLE_ROWS + CONTENT_DIFFERENT_ROWS. With ``recompare_sleep_s`` > 0 the keys
  that differed are compared again after the pause (re-reading both sides); those that no
  longer differ count as GOODROWS, the rest in the category they have then.
- **Values**: compared in their canonical form (:mod:`dr_toolkit.verify.canon`): every NULL
  and position inside arrays/structs counts, ``int`` = ``bigint``, ``1.50`` = ``1.5000``, map
  order is ignored. Float columns may be compared under ``abs_tol``/``rel_tol``; strings with
  ``ignore_spaces``/``ignore_case``. A type verify cannot compare is a ConfigError (exit 2).
- **Digests**: a bucket (or key) whose rows differ never passes: its digest is two unrelated
  hashes (xxhash64, CRC32) of an unambiguous text of each row. Keys whose digests differ are
  compared value by value: ``column_mismatches`` counts, per column, the keys that differ there
  (keys held by one row on each side), and under a tolerance a key whose values are all
  within it is GOODROWS.
- **Time window**: rows whose ``ts_column`` is NULL are outside every window; ``window.null_ts``
  counts them per side, so they are never silently left out.
- **Re-compare** (``recompare_sleep_s`` > 0): the keys that differed are read again *without
  the time window* (a source row updated during the run moves out of the window; its key is
  compared on its current rows, not counted ONLY_IN_PEER). A key now gone from both sides is
  not GOODROWS: ``recompare.gone_from_both`` counts it, and it leaves the counters.
- **Provenance**: ``provenance`` holds the run id, who ran it, the tool version, the Spark
  application id and master; with a ledger and a ``name``, ``trend`` lists the earlier runs.
- **Watermark**: with ``name`` and a ledger, ``watermarks(component="verify", name)`` is set
  to the time the compared data is from (``end_time``, else the start of the run) — only
  when BADROWS = 0, so it always means "the replica is proven up to here".
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.ledger.store import new_id
from dr_toolkit.secrets import Credentials
from dr_toolkit.topology import VerifyPolicy
from dr_toolkit.verify import compare as C
from dr_toolkit.verify.canon import CompareOptions
from dr_toolkit.verify.sources import Dataset, precheck, read

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)
DEFAULT_BUCKETS = 32768
MAX_VALUE_CHARS = 200
Progress = Callable[[str], None]


@dataclass
class VerifyResult:
    """What one verification found. ``to_json()`` is the CLI's JSON (DESIGN §3)."""

    counters: dict[str, int]
    source_rows: int
    peer_rows: int
    source: str
    target: str
    key: list[str]
    duration_s: float
    started_at: float
    finished_at: float
    data_time: float
    report_id: str
    report_path: str | None = None
    name: str | None = None
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    buckets: int = 0
    buckets_compared: int = 0
    buckets_differing: int = 0
    duplicate_keys: dict[str, Any] = field(default_factory=dict)
    null_keys: dict[str, int] = field(default_factory=dict)
    schema: dict[str, Any] = field(default_factory=dict)
    window: dict[str, Any] = field(default_factory=dict)
    recompare: dict[str, Any] = field(default_factory=dict)
    bucket_chart: list[dict[str, int]] = field(default_factory=list, repr=False)
    column_mismatches: dict[str, int] = field(default_factory=dict)
    compare_options: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    trend: list[dict[str, Any]] = field(default_factory=list)
    request: dict[str, Any] = field(default_factory=dict)  # what was asked: see request_of()

    @property
    def ok(self) -> bool:
        return self.counters[C.BAD] == 0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.counters,
            "source_rows": self.source_rows, "peer_rows": self.peer_rows,
            "duration_s": round(self.duration_s, 3), "report_path": self.report_path,
            "samples": self.samples, "buckets": self.buckets, "buckets_compared": self.buckets_compared,
            "buckets_differing": self.buckets_differing, "duplicate_keys": self.duplicate_keys,
            "null_keys": self.null_keys, "schema": self.schema, "window": self.window,
            "recompare": self.recompare, "source": self.source, "target": self.target, "key": self.key,
            "name": self.name, "report_id": self.report_id, "started_at": self.started_at,
            "finished_at": self.finished_at, "data_time": self.data_time,
            "column_mismatches": self.column_mismatches, "compare_options": self.compare_options,
            "provenance": self.provenance, "trend": self.trend, "request": self.request,
        }


def request_of(source: str, target: str, *, key: list[str], fmt: str, peer_format: str | None, table: str | None,
               peer_table: str | None, ignore_columns: list[str] | None, ts_column: str | None,
               start: float | None, options: dict[str, Any]) -> dict[str, Any]:
    """What a verification was asked to compare, as stored with its report: the gate counts a
    report for a verify policy only when this equals what the policy asks (a last-hour ad-hoc
    run named like the policy proves nothing about the whole dataset). Source and target are
    kept as digests of the URIs as given (a URI may carry credentials)."""
    import hashlib

    def digest(uri: str) -> str:
        return hashlib.sha256(uri.encode()).hexdigest()[:16]

    return {"source": digest(source), "target": digest(target), "key": list(key), "format": fmt,
            "peer_format": peer_format or fmt, "table": table, "peer_table": peer_table or table,
            "ignore_columns": sorted(ignore_columns or []), "ts_column": ts_column, "full_range": start is None,
            "options": options}


def parse_time(value: str | float | None, option: str) -> float | None:
    """Epoch seconds from ``1700000000``, ``2024-05-01``, ``2024-05-01T12:00:00Z`` (UTC if no zone)."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except ValueError:
        pass
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{option} {value!r} is not a time",
                          hint="use ISO 8601 (2024-05-01T12:00:00Z) or epoch seconds") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


RECOVERY_POINT = "recovery-point"


def resolve_as_of(value: str | float | None, topology: Topology | None, ledger: Ledger | None,
                  access: Access | None = None, now: float | None = None) -> float | None:
    """``--as-of``: a time (ISO 8601 or epoch seconds, not after now), or ``recovery-point``: the
    failover gate's current recovery point over HDFS, HBase and Kafka (the verification's own
    signal left out: it would be circular). No recovery point (a component cannot state one):
    ProblemFound (exit 1) with the gate's reasons; an unreachable component: its reason."""
    from dr_toolkit.errors import ProblemFound

    if value is None or value == "":
        return None
    now = time.time() if now is None else now
    if str(value).strip().lower() != RECOVERY_POINT:
        t = parse_time(value, "--as-of")
        assert t is not None
        if t > now + 1:
            raise ConfigError(f"--as-of {value} is after now",
                              hint="a verification can only be about what has been written: give a past time")
        return t
    if topology is None or ledger is None:
        raise ConfigError("--as-of recovery-point needs the topology and its ledger",
                          hint="pass --config drt.yaml (the gate reads every protected component)")
    from dr_toolkit.failover.gate import check

    res = check(topology, ledger, components=("hdfs", "hbase", "kafka"), access=access, now=now)
    if res.recovery_point is None:
        raise ProblemFound("the gate states no recovery point to verify as of: "
                           + ("; ".join(res.reasons) or "no component states a safe time"),
                           hint="run `drt failover check` for the details, or pass --as-of TIME")
    return float(res.recovery_point)


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float):
        return v
    if isinstance(v, str):
        return v if len(v) <= MAX_VALUE_CHARS else v[:MAX_VALUE_CHARS] + "…"
    if isinstance(v, dt.datetime | dt.date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes | bytearray):
        return _jsonable(bytes(v).hex())
    if hasattr(v, "asDict"):
        return {k: _jsonable(x) for k, x in v.asDict().items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return _jsonable(str(v))


def _row_dict(r: Any) -> dict[str, Any]:
    return {} if r is None else {k: _jsonable(v) for k, v in r.asDict().items()}


def _samples(final: DataFrame, hs: DataFrame, hp: DataFrame, key: list[str], n: int,
             row_dict: Callable[[Any], dict[str, Any]] = _row_dict) -> dict[str, list[dict[str, Any]]]:
    """Per bad kind, up to ``n`` keys (smallest first) with their rows side by side: one read of
    each side, restricted to the samples' buckets."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("category").orderBy(*[C.col(k) for k in key])
    picked = (final.filter(F.col("category") != C.GOOD).withColumn("_rank", F.row_number().over(order))
              .filter(F.col("_rank") <= n).localCheckpoint(eager=True))
    rows = sorted(picked.collect(), key=lambda r: r["_rank"])
    buckets = sorted({r[C.BUCKET] for r in rows})
    s_rows, p_rows = ({tuple(r[C.KEY]): row_dict(r["row"])
                       for r in C.rows_of(C.with_key(C.restrict(h, buckets), key), picked, key, "row").collect()}
                      for h in (hs, hp))
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in C.BAD_KINDS}
    for r in rows:
        k, kind = tuple(r[C.KEY]), r["category"]
        item: dict[str, Any] = {"key": {c: _jsonable(r[c]) for c in key}}
        s, p = s_rows.get(k, {}), p_rows.get(k, {})
        if kind == C.CONTENT:
            cols = sorted(c for c in set(s) | set(p) if s.get(c) != p.get(c))
            item.update(columns=cols, source={c: s.get(c) for c in cols}, peer={c: p.get(c) for c in cols})
            if (r["s_n"] or 0) > 1 or (r["p_n"] or 0) > 1:
                item["rows"] = {"source": r["s_n"], "peer": r["p_n"]}
        elif kind == C.ONLY_SOURCE:
            item["source"] = s
        else:
            item["peer"] = p
        out[kind].append(item)
    return out


class _Job:
    """The state of one verification; methods are the passes."""

    def __init__(self, spark: SparkSession, src: Dataset, peer: Dataset, key: list[str], *,
                 topology: Topology | None, ts_column: str | None, start: float | None, end: float | None,
                 ignore: list[str], buckets: int, progress: Progress, opts: CompareOptions,
                 access: Access | None) -> None:
        self.spark, self.src, self.peer, self.key = spark, src, peer, key
        self.topology, self.ts_column, self.start, self.end = topology, ts_column, start, end
        self.ignore, self.buckets, self.progress = ignore, buckets, progress
        self.opts, self.access = opts, access
        self.schema = C.SchemaDiff()
        self.null_ts: dict[str, int] = {}
        self.cache_reads = False  # read each side once and keep it (HBase tables: remote scans)

    @staticmethod
    def row_dict(r: Any) -> dict[str, Any]:
        """A sampled row as the report shows it."""
        return _row_dict(r)

    def prepare(self, windowed: bool = True) -> tuple[DataFrame, DataFrame]:
        """Read both sides, check columns, apply the window, align; return the hashed frames."""
        s = read(self.spark, self.src, side="source", topology=self.topology, access=self.access)
        p = read(self.spark, self.peer, side="peer", topology=self.topology, access=self.access)
        if s is None and p is None:
            from pyspark.sql.types import StringType, StructField, StructType

            empty = self.spark.createDataFrame([], StructType([StructField(k, StringType()) for k in self.key]))
            s = p = empty
        elif s is None:
            assert p is not None
            s = self.spark.createDataFrame([], p.schema)
        elif p is None:
            p = self.spark.createDataFrame([], s.schema)
        need = [*self.key, *([self.ts_column] if self.ts_column else [])]
        C.check_columns(s, need, "the source", self.src.display)
        C.check_columns(p, need, "the peer", self.peer.display)
        if self.ts_column and windowed and (self.start is not None or self.end is not None):
            self.null_ts = {"source": C.null_times(s, self.ts_column), "peer": C.null_times(p, self.ts_column)}
            s = C.in_window(s, self.ts_column, self.start, self.end)
            p = C.in_window(p, self.ts_column, self.start, self.end)
        s, p, self.schema = C.align(s, p, self.key, self.ignore, self.opts)
        return (C.with_hashes(s, self.key, self.buckets, self.opts),
                C.with_hashes(p, self.key, self.buckets, self.opts))

    def row_compare(self, hs: DataFrame, hp: DataFrame, buckets: list[int], nonempty: int, keep: list[DataFrame]
                    ) -> DataFrame:
        """Classify the keys of ``buckets`` (cached, and appended to ``keep`` for the caller to drop)."""
        if len(buckets) < nonempty:
            hs, hp = C.restrict(hs, buckets), C.restrict(hp, buckets)
        cls = C.classify(C.key_digests(C.with_key(hs, self.key)), C.key_digests(C.with_key(hp, self.key)),
                         self.key).persist()
        keep.append(cls)
        return cls


class _HBaseJob(_Job):
    """An HBase verification: the rows come with their digest computed by the reader from the cells'
    raw bytes (row key included), so ``prepare`` only adds the bucket — no canonical form or JSON
    text is built in Spark; ``cells`` (raw bytes) is kept for the value compare and the samples."""

    @staticmethod
    def row_dict(r: Any) -> dict[str, Any]:
        """A sampled row's cells, decoded whole (never cut like a long value)."""
        from dr_toolkit.verify.hbase import decode_cells

        return {} if r is None else {"cells": decode_cells(r["cells"])}

    def prepare(self, windowed: bool = True) -> tuple[DataFrame, DataFrame]:
        from pyspark.sql import functions as F

        from dr_toolkit.verify.canon import encode_row

        out = []
        for ds, side in ((self.src, "source"), (self.peer, "peer")):
            df = read(self.spark, ds, side=side, topology=self.topology, access=self.access)
            assert df is not None
            out.append(df.select(
                C.col("row"), C.col("cells"),
                F.pmod(F.xxhash64(encode_row([C.col("row")])), F.lit(self.buckets)).cast("int").alias(C.BUCKET),
                C.col("h").alias(C.ROW_HASH), C.col("c").alias(C.ROW_CRC), F.lit(0).alias(C.NULL_KEY)))
        return out[0], out[1]


def _counts(cls: DataFrame) -> dict[str, int]:
    return {r["category"]: int(r["count"]) for r in cls.groupBy("category").count().collect()}


def _chart(rows_per_bucket: dict[int, int], bad_per_bucket: dict[int, int], buckets: int,
           bars: int = 64) -> list[dict[str, int]]:
    """Fold the buckets into at most ``bars`` groups for the report's chart."""
    bars = max(1, min(bars, buckets))
    out = [{"first": g * buckets // bars, "last": (g + 1) * buckets // bars - 1, "rows": 0, "bad": 0}
           for g in range(bars)]
    for b, n in rows_per_bucket.items():
        out[b * bars // buckets]["rows"] += n
    for b, n in bad_per_bucket.items():
        out[b * bars // buckets]["bad"] += n
    return out


def _spark_for(topology: Topology | None, spark_master: str | None, uris: list[str], access: Access | None
               ) -> SparkSession:
    """A session for the job: the Hadoop client conf for ``uris`` (HDFS HA, S3A) goes in at start."""
    from dr_toolkit.spark.session import get_session

    paths = [u for u in uris if not u.startswith(("table:", "jdbc:"))]
    return get_session(spark_master, app_name="drt-verify", topology=topology, uris=paths, access=access)


def _provenance(spark: SparkSession, report_id: str, who: str | None) -> dict[str, Any]:
    import getpass
    import socket

    from dr_toolkit import __version__

    try:
        user = who or getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        user = who or "unknown"
    sc = spark.sparkContext
    return {"run_id": report_id, "who": user, "host": socket.gethostname(), "tool": "dr-toolkit",
            "tool_version": __version__, "spark_version": spark.version, "spark_app_id": sc.applicationId,
            "spark_master": sc.master}


def _trend(ledger: Ledger, name: str | None, source: str, limit: int = 10) -> list[dict[str, Any]]:
    rows = [r for r in ledger.verify_reports(name=name, limit=limit * 3) if name or r["source"] == source]
    return [{"report_id": r["report_id"], "finished_at": r["finished_at"], "BADROWS": r["badrows"],
             "GOODROWS": r["goodrows"], "source_rows": r["source_rows"], "peer_rows": r["peer_rows"]}
            for r in rows[:limit]]


def verify(source: str, target: str, key: list[str], *, topology: Topology | None = None, fmt: str = "parquet",
           start_time: str | None = None, end_time: str | None = None, ts_column: str | None = None,
           recompare_sleep_s: float = 0, report_path: str | None = None, sample_size: int = 20,
           buckets: int | None = None, spark: SparkSession | None = None, ledger: Ledger | None = None,
           name: str | None = None, peer_format: str | None = None, table: str | None = None,
           peer_table: str | None = None, conn_id: str | None = None, peer_conn_id: str | None = None,
           credentials: Credentials | None = None, peer_credentials: Credentials | None = None,
           ignore_columns: list[str] | None = None, progress: Progress | None = None,
           options: CompareOptions | None = None, access: Access | None = None, spark_master: str | None = None,
           who: str | None = None, hbase_options: dict[str, Any] | None = None,
           report_id: str | None = None, as_of: float | None = None) -> VerifyResult:
    """Compare ``source`` with its replica ``target`` by ``key``; see the module doc for the rules.

    Two ``hbase://<cluster>/<ns>:<table>`` URIs compare HBase tables cell by cell
    (:mod:`dr_toolkit.verify.hbase`; ``key`` is ignored, the row key is the key):
    ``hbase_options`` takes ``families``, ``row_prefixes``, ``versions`` (N or "all") and ``raw``;
    ``start_time``/``end_time`` bound the cells' timestamps.

    ``as_of`` (epoch s; files only — HBase tables and ``ts_column`` datasets take it as ``end_time``):
    the source, an HDFS tree, is read through the newest snapshot a replication run took of it at
    or before ``as_of`` (:func:`dr_toolkit.verify.sources.pin_to_snapshot`; ConfigError when there
    is none); the report's ``data_time`` is that snapshot's time.

    Raises ConfigError (exit 2) for bad input: a missing path, an unreadable format, a key or
    timestamp column that does not exist, a bad time, a type that cannot be compared.
    Differences are not errors: look at ``result.counters["BADROWS"]`` (the CLI exits 1 when
    it is > 0). ``spark_master`` (else the topology's hot ``spark.master``) is used only when
    no session exists yet — under spark-submit the submitter's session wins.
    """
    started = time.time()
    say: Progress = progress or (lambda m: log.info("%s", m))
    from dr_toolkit.verify.hbase import is_hbase

    if is_hbase(source) or is_hbase(target):
        return _verify_hbase(source, target, topology=topology, start_time=start_time, end_time=end_time,
                             hbase_options=hbase_options or {}, recompare_sleep_s=recompare_sleep_s,
                             report_path=report_path, sample_size=sample_size, buckets=buckets, spark=spark,
                             ledger=ledger, name=name, say=say, access=access, spark_master=spark_master, who=who,
                             started=started, report_id=report_id)
    opts = options or CompareOptions()
    key = [k.strip() for k in key if k and k.strip()]
    if not key:
        raise ConfigError("no key columns given", hint="pass --key COL[,COL...]")
    start, end = parse_time(start_time, "--start-time"), parse_time(end_time, "--end-time")
    if (start is not None or end is not None) and not ts_column:
        raise ConfigError("a time window needs the timestamp column", hint="pass --ts-column COL")
    if start is not None and end is not None and end <= start:
        raise ConfigError(f"--end-time {end_time} is not after --start-time {start_time}")
    n_buckets = int(buckets or DEFAULT_BUCKETS)
    if n_buckets < 1:
        raise ConfigError(f"buckets must be at least 1, not {n_buckets}")
    pinned = None
    if as_of is not None:
        if ts_column or end is not None:
            raise ConfigError("--as-of and --end-time both set the end of the window: give one")
        from dr_toolkit.verify.sources import pin_to_snapshot

        pinned = pin_to_snapshot(source, as_of, side="source", topology=topology, access=access)
    src = Dataset(source, fmt, table, conn_id, credentials, read_uri=pinned.uri if pinned else None)
    peer = Dataset(target, peer_format or fmt, peer_table or table, peer_conn_id or conn_id,
                   peer_credentials or credentials)
    precheck(src, side="source", topology=topology)
    precheck(peer, side="peer", topology=topology)
    if spark is None:
        spark = _spark_for(topology, spark_master, [source, target], access)
    job = _Job(spark, src, peer, key, topology=topology, ts_column=ts_column, start=start, end=end,
               ignore=list(ignore_columns or []), buckets=n_buckets, progress=say, opts=opts, access=access)
    try:
        return _verify(job, spark, src, peer, key, started=started, say=say, n_buckets=n_buckets,
                       recompare_sleep_s=recompare_sleep_s, sample_size=sample_size, end=end, start=start,
                       ts_column=ts_column, report_path=report_path, ledger=ledger, name=name, who=who,
                       report_id=report_id, data_time=pinned.time if pinned else None,
                       extra_window={"as_of": as_of, "pinned": pinned.to_json()} if pinned else None,
                       request=request_of(source, target, key=key, fmt=fmt, peer_format=peer_format, table=table,
                                          peer_table=peer_table, ignore_columns=ignore_columns, ts_column=ts_column,
                                          start=start, options=opts.to_json()))
    except ConfigError:
        raise
    except Exception as exc:
        from dr_toolkit.verify.sources import first_line

        if type(exc).__name__ in ("AnalysisException", "ParseException") or "AnalysisException" in str(exc)[:300]:
            raise ConfigError(f"Spark cannot compare these datasets: {first_line(exc)}",
                              where=f"{src.display} vs {peer.display}",
                              hint="check the column types (--ignore-columns leaves a column out)") from None
        raise


def _verify_hbase(source: str, target: str, *, topology: Topology | None, start_time: str | None,
                  end_time: str | None, hbase_options: dict[str, Any], recompare_sleep_s: float,
                  report_path: str | None, sample_size: int, buckets: int | None, spark: SparkSession | None,
                  ledger: Ledger | None, name: str | None, say: Progress, access: Access | None,
                  spark_master: str | None, who: str | None, started: float,
                  report_id: str | None = None) -> VerifyResult:
    """Two HBase tables, cell by cell, through the generic pipeline (see :mod:`dr_toolkit.verify.hbase`)."""
    from dr_toolkit.verify import hbase

    unknown = set(hbase_options) - {"families", "row_prefixes", "versions", "raw", "read", "rootdirs"}
    if unknown:
        raise ConfigError(f"unknown HBase verification option(s): {', '.join(sorted(unknown))}")
    src_t = hbase.parse(source, topology, "source")
    peer_t = hbase.parse(target, topology, "peer")
    start, end = parse_time(start_time, "--start-time"), parse_time(end_time, "--end-time")
    scan = hbase.make_scan(start=start, end=end, families=hbase_options.get("families"),
                           row_prefixes=hbase_options.get("row_prefixes"), versions=hbase_options.get("versions"),
                           raw=bool(hbase_options.get("raw")))
    snapshots = hbase.make_snapshots(hbase_options.get("read"), hbase_options.get("rootdirs"))
    n_buckets = int(buckets or DEFAULT_BUCKETS)
    if n_buckets < 1:
        raise ConfigError(f"buckets must be at least 1, not {n_buckets}")
    hbase.precheck(src_t, peer_t, scan)
    if spark is None:
        from dr_toolkit.spark.session import get_session

        spark = get_session(spark_master, app_name="drt-verify", topology=topology, access=access,
                            conf=hbase.spark_conf(topology))
    say("checking both tables")
    families = hbase.check_tables(spark, src_t, peer_t, scan)
    src = Dataset(source, "hbase", hbase=(src_t, scan, snapshots))
    peer = Dataset(target, "hbase", hbase=(peer_t, scan, snapshots))
    key = [hbase.KEY]
    job = _HBaseJob(spark, src, peer, key, topology=topology, ts_column=None, start=None, end=None, ignore=[],
                    buckets=n_buckets, progress=say, opts=CompareOptions(), access=access)
    job.cache_reads = True
    request = request_of(source, target, key=key, fmt="hbase", peer_format=None, table=None, peer_table=None,
                         ignore_columns=None, ts_column=None, start=start,
                         options={"hbase": {k: v for k, v in scan.to_json().items() if k != "end_ms"}})
    windowed = start is not None or end is not None
    try:
        return _verify(job, spark, src, peer, key, started=started, say=say, n_buckets=n_buckets,
                       recompare_sleep_s=recompare_sleep_s, sample_size=sample_size, start=start, end=end,
                       ts_column="cell timestamp" if windowed else None, report_path=report_path, ledger=ledger,
                       name=name, who=who, report_id=report_id, request=request, samples_hook=hbase.cell_diff,
                       extra_window={"hbase": scan.to_json(), "families": families, "read": snapshots.mode,
                                     "snapshots": snapshots.names,
                                     "verifyrep_args": scan.verifyrep_args()})
    finally:
        for line in hbase.drop_snapshots(spark, snapshots):
            log.warning("a snapshot taken for the verification could not be deleted: %s", line)


def _verify(job: _Job, spark: SparkSession, src: Dataset, peer: Dataset, key: list[str], *, started: float,
            say: Progress, n_buckets: int, recompare_sleep_s: float, sample_size: int, start: float | None,
            end: float | None, ts_column: str | None, report_path: str | None, ledger: Ledger | None,
            name: str | None, who: str | None, request: dict[str, Any], report_id: str | None = None,
            samples_hook: Callable[[dict[str, list[dict[str, Any]]]], dict[str, list[dict[str, Any]]]] | None = None,
            extra_window: dict[str, Any] | None = None, data_time: float | None = None) -> VerifyResult:
    from pyspark.sql import functions as F

    say("reading both sides")
    hs, hp = job.prepare()
    say(f"comparing {n_buckets} bucket digests")
    persisted: list[DataFrame] = []
    if job.cache_reads:
        # A remote read (HBase region servers) costs far more than a cached copy: each side is read
        # once, both at the same time (one Spark job over both tables' regions: with one region per
        # table the two scans run side by side), and kept for every later pass.
        from pyspark import StorageLevel

        hs, hp = (h.persist(StorageLevel.MEMORY_AND_DISK) for h in (hs, hp))
        persisted += [hs, hp]
        hs.select(F.lit(0).alias("_")).unionAll(hp.select(F.lit(0).alias("_"))).count()
    # Digests and the row compare need only (key, bucket, hashes); the samples' rows are re-read from
    # their buckets. Caching the slim frames between passes measured slower than re-reading local
    # files, so they are not cached.
    slim_s, slim_p = (h.select(*[C.col(k) for k in key], C.BUCKET, C.ROW_HASH, C.ROW_CRC, C.NULL_KEY)
                      for h in (hs, hp))
    sd = {r[C.BUCKET]: (r["n"], r["x"], r["s"], r["c"], r["nulls"]) for r in C.bucket_digests(slim_s).collect()}
    pd = {r[C.BUCKET]: (r["n"], r["x"], r["s"], r["c"], r["nulls"]) for r in C.bucket_digests(slim_p).collect()}
    nonempty = set(sd) | set(pd)
    differing = sorted(b for b in nonempty if (sd.get(b) or (0,))[:4] != (pd.get(b) or (0,))[:4])
    differing_set = set(differing)
    good = sum(v[0] for b, v in sd.items() if b not in differing_set)
    counters = dict.fromkeys(C.COUNTERS, 0)
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in C.BAD_KINDS}
    duplicates: dict[str, Any] = {"source": 0, "peer": 0, "samples": []}
    recompare: dict[str, Any] = {"sleep_s": recompare_sleep_s, "keys_rechecked": 0, "resolved": 0,
                                 "gone_from_both": 0}
    bad_per_bucket: dict[int, int] = {}
    mismatches: dict[str, int] = {}
    try:
        if differing:
            say(f"row-comparing {len(differing)} of {len(nonempty)} buckets")
            # The rows of the differing buckets are read once and kept: the key compare, the value
            # compare and the samples all work on them (a small part of the data when few buckets differ).
            if len(differing) < len(nonempty):
                hs, hp = (C.restrict(h, differing).persist() for h in (hs, hp))
                persisted += [hs, hp]
            cls = job.row_compare(hs, hp, differing, n_buckets + 1, persisted)
            say("comparing values of the keys that differ")
            cls, within_tol = _settle_values(job, cls, hs, hp, differing, persisted, mismatches)
            first = _counts(cls)
            good += first.get(C.GOOD, 0)
            say("looking for duplicate keys")
            dup = cls.filter((F.col("s_n") > 1) | (F.col("p_n") > 1))
            d = dup.agg(F.sum((F.col("s_n") > 1).cast("int")).alias("s"),
                        F.sum((F.col("p_n") > 1).cast("int")).alias("p")).collect()[0]
            duplicates = {"source": int(d["s"] or 0), "peer": int(d["p"] or 0), "samples": [
                {"key": {k: _jsonable(r[k]) for k in key}, "source_rows": r["s_n"] or 0, "peer_rows": r["p_n"] or 0}
                for r in dup.orderBy(*[C.col(k) for k in key]).limit(sample_size).collect()]}
            final = cls.filter(F.col("category") != C.GOOD)
            first_bad = sum(first.get(k, 0) for k in C.BAD_KINDS)
            recompare["within_tolerance"] = within_tol
            if recompare_sleep_s > 0 and first_bad:
                bad_keys = final.select(C.KEY, C.BUCKET).localCheckpoint(eager=True)
                bad_buckets = sorted(r[0] for r in bad_keys.select(C.BUCKET).distinct().collect())
                # The re-read may have the same plan as the first: drop the caches, or Spark answers from them.
                for df in persisted:
                    df.unpersist()
                say(f"{first_bad} keys differ; re-comparing them in {recompare_sleep_s:g} s")
                time.sleep(recompare_sleep_s)
                hs, hp = job.prepare(windowed=False)  # current rows of those keys, wherever their time now is
                hs, hp = (C.only_keys(C.with_key(C.restrict(h, bad_buckets), key), bad_keys).drop(C.KEY)
                          for h in (hs, hp))
                again = C.only_keys(job.row_compare(hs, hp, bad_buckets, n_buckets + 1, persisted), bad_keys)
                mismatches.clear()
                again, _ = _settle_values(job, again, hs, hp, bad_buckets, persisted, mismatches)
                present = again.count()
                final = again.filter(F.col("category") != C.GOOD).persist()
                persisted.append(final)
                second = _counts(final)
                still = sum(second.get(k, 0) for k in C.BAD_KINDS)
                gone = first_bad - present
                resolved = present - still
                recompare.update(keys_rechecked=first_bad, resolved=resolved, gone_from_both=gone)
                good += resolved
                counts = second
            else:
                counts = first
            say("collecting samples")
            for k in C.BAD_KINDS:
                counters[k] = counts.get(k, 0)
            if sample_size > 0 and any(counters[k] for k in C.BAD_KINDS):
                samples = _samples(final, hs, hp, key, sample_size, job.row_dict)
                if samples_hook is not None:
                    samples = samples_hook(samples)
            bad_per_bucket = {r[C.BUCKET]: int(r["count"]) for r in final.groupBy(C.BUCKET).count().collect()}
    finally:
        for df in persisted:
            df.unpersist()
    counters[C.GOOD] = good
    counters[C.BAD] = sum(counters[k] for k in C.BAD_KINDS)
    finished = time.time()
    report_id = report_id or new_id("verify")
    window: dict[str, Any] = {"ts_column": ts_column, "start": start, "end": end}
    if job.null_ts:
        window["null_ts"] = job.null_ts
    window.update(extra_window or {})
    result = VerifyResult(
        counters=counters, source_rows=sum(v[0] for v in sd.values()), peer_rows=sum(v[0] for v in pd.values()),
        source=src.display, target=peer.display, key=key, duration_s=finished - started, started_at=started,
        finished_at=finished, data_time=data_time if data_time is not None else end if end is not None else started,
        report_id=report_id,
        name=name, samples=samples, buckets=n_buckets, buckets_compared=len(nonempty),
        buckets_differing=len(differing), duplicate_keys=duplicates,
        null_keys={"source": sum(v[4] or 0 for v in sd.values()), "peer": sum(v[4] or 0 for v in pd.values())},
        schema=job.schema.to_json(), window=window, recompare=recompare,
        bucket_chart=_chart({b: v[0] for b, v in sd.items()}, bad_per_bucket, n_buckets),
        column_mismatches=dict(sorted(mismatches.items(), key=lambda kv: (-kv[1], kv[0]))),
        compare_options=job.opts.to_json(), provenance=_provenance(spark, report_id, who),
        trend=_trend(ledger, name, src.display) if ledger is not None else [],
        request=request,
    )
    if report_path:
        from dr_toolkit.verify.report import write_html

        result.report_path = str(Path(report_path).resolve())
        write_html(result, result.report_path)
    if ledger is not None:
        ledger.add_verify_report(report_id=result.report_id, source=result.source, target=result.target,
                                 counters=counters, source_rows=result.source_rows, peer_rows=result.peer_rows,
                                 started_at=started, finished_at=finished, name=name,
                                 report_path=result.report_path,
                                 detail={k: v for k, v in result.to_json().items()
                                         if k not in C.COUNTERS and k != "trend"})
        if name and result.ok:
            ledger.set_watermark("verify", name, result.data_time,
                                 detail={"report_id": result.report_id, "rows": result.source_rows})
    return result


def _settle_values(job: _Job, cls: DataFrame, hs: DataFrame, hp: DataFrame, buckets: list[int],
                   persisted: list[DataFrame], mismatches: dict[str, int]) -> tuple[DataFrame, int]:
    """Compare, value by value, the CONTENT_DIFFERENT keys held by one row per side: fill
    ``mismatches`` (column -> keys differing there) and, under a float tolerance, turn keys
    whose values are all within it into GOODROWS. Returns the new classification and that count."""
    from pyspark.sql import functions as F

    single = cls.filter((F.col("category") == C.CONTENT) & (F.col("s_n") == 1) & (F.col("p_n") == 1))
    ks, kp = (C.with_key(C.restrict(h, buckets), job.key) for h in (hs, hp))
    mm = C.column_mismatches(ks, kp, single, job.key, job.opts).persist()
    persisted.append(mm)
    for r in mm.select(F.explode("__mm").alias("c")).groupBy("c").count().collect():
        mismatches[r["c"]] = mismatches.get(r["c"], 0) + int(r["count"])
    if not job.opts.tolerant:
        return cls, 0
    ok = mm.filter(F.size("__mm") == 0).select(C.KEY).persist()
    persisted.append(ok)
    n = ok.count()
    if not n:
        return cls, 0
    flagged = ok.withColumn("__ok", F.lit(True))
    out = (cls.join(flagged, C.KEY, "left_outer")
           .withColumn("category", F.when(F.col("__ok"), F.lit(C.GOOD)).otherwise(F.col("category")))
           .drop("__ok").persist())
    persisted.append(out)
    return out, n


def reports_dir(topology: Topology, policy: VerifyPolicy) -> Path:
    """Where a policy's reports go: ``report_dir`` or ``failover.reports_dir`` (relative to the topology file)."""
    return topology.reports_dir(policy.report_dir)


def verify_policy(topology: Topology, policy_name: str, ledger: Ledger | None, *,
                  spark: SparkSession | None = None, progress: Progress | None = None,
                  access: Access | None = None, spark_master: str | None = None,
                  who: str | None = None) -> VerifyResult:
    """Run the verify policy ``policy_name``: the report goes to its reports directory, the
    result to the ledger (and the watermark ``verify/<policy>``). With a ``ts_column``, or for HBase
    tables (``hbase://`` source and target, ``key: [row]``), the data compared is what was written
    before the run started (``end_time`` = now: cells stamped before it)."""
    policy = topology.policy(policy_name)
    if not isinstance(policy, VerifyPolicy):
        raise ConfigError(f"policy {policy_name!r} is not a verify policy", where=topology.source_file,
                          hint="name one listed under policies.verify")
    report_id = new_id("verify")  # the report file is named with its id's time (one time for both)
    stamp = report_id.split("-")[1] + "Z"
    report = reports_dir(topology, policy) / f"verify-{policy.name}-{stamp}.html"
    from dr_toolkit.verify.hbase import is_hbase

    # a timestamp column (or an HBase table's cell timestamps) pins the run to its start: rows written
    # while it runs are not compared, and a GOOD report means "cold equals hot as of the start"
    end = str(time.time()) if policy.ts_column or is_hbase(policy.source) else None
    # an HDFS tree whose replication takes snapshots is read through the newest one (cold equals hot
    # as of that run's listing); without one it is read live, as before
    as_of = None if end is not None else _policy_as_of(topology, policy, access)
    return verify(policy.source, policy.target, list(policy.key), topology=topology, fmt=policy.format,
                  ts_column=policy.ts_column, end_time=end, recompare_sleep_s=policy.recompare_sleep_s, as_of=as_of,
                  report_path=str(report), spark=spark, ledger=ledger, name=policy.name, progress=progress,
                  options=policy.compare_options(), ignore_columns=list(policy.ignore_columns), access=access,
                  spark_master=spark_master, who=who, report_id=report_id)


def _policy_as_of(topology: Topology, policy: VerifyPolicy, access: Access | None) -> float | None:
    """Now, when the policy's source is an HDFS tree a replication snapshot can pin; else None (read live)."""
    from dr_toolkit.fs.uri import parse_uri
    from dr_toolkit.verify.sources import pin_to_snapshot

    try:
        if parse_uri(policy.source, topology).kind != "webhdfs":
            return None
        now = time.time()
        pin_to_snapshot(policy.source, now, side="source", topology=topology, access=access)
    except ConfigError as exc:
        log.info("verify policy %s reads its source live: %s", policy.name, exc.message)
        return None
    return now
