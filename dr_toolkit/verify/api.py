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
  hashes (xxhash64, Murmur3) of an unambiguous value sequence of each row. Keys whose digests differ are
  compared value by value: ``column_mismatches`` counts, per column, the keys that differ there
  (keys held by one row on each side), and under a tolerance a key whose values are all
  within it is GOODROWS.
- **Time window**: rows whose ``ts_column`` is NULL are outside every window; ``window.null_ts``
  counts them per side, so they are never silently left out.
- **Re-compare** (``recompare_sleep_s`` > 0): the keys that differed are read again *without
  the time window* (a source row updated during the run moves out of the window; its key is
  compared on its current rows, not counted ONLY_IN_PEER). A key now gone from both sides is
  not GOODROWS: ``recompare.gone_from_both`` counts it, and it leaves the counters.
- **Request**: every option is one :class:`dr_toolkit.verify.request.VerifyRequest`, built by
  each front door (CLI, policy, spark-submit JSON); ``verify(request, access=…)`` runs it.
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

from dr_toolkit import __version__
from dr_toolkit.errors import ConfigError
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.ledger.rows import VerifyReportRow
from dr_toolkit.ledger.store import new_id
from dr_toolkit.spark.session import get_session
from dr_toolkit.topology import VerifyPolicy
from dr_toolkit.verify import compare as C
from dr_toolkit.verify import hbase
from dr_toolkit.verify.hbase import decode_cells
from dr_toolkit.verify.report import write_html
from dr_toolkit.verify.request import VerifyRequest, policy_request
from dr_toolkit.verify.result import VerifyResult
from dr_toolkit.verify.sources import Dataset, first_line, pin_to_snapshot, precheck, read

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology
    from dr_toolkit.verify import hbase as HB

__all__ = ["VerifyRequest", "VerifyResult", "reports_dir", "verify", "verify_policy"]
log = logging.getLogger(__name__)
MAX_VALUE_CHARS = 200
Progress = Callable[[str], None]
Samples = dict[str, list[dict[str, Any]]]


@dataclass
class _Run:
    """Where one verification runs — the caller's, not the request's: the request, the credentials,
    the topology and ledger (optional for plain paths), the progress callback and the start time."""

    request: VerifyRequest
    access: Access
    topology: Topology | None
    ledger: Ledger | None
    say: Progress
    started: float = field(default_factory=time.time)


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
    """The state of one verification; methods are the passes. ``window`` is what the report says of
    the rows compared; ``data_time`` the time the compared data is from when it is not the window's
    end (a pinned snapshot's); ``samples_hook`` rewrites the samples (HBase: cell by cell)."""

    def __init__(self, run: _Run, spark: SparkSession, src: Dataset, peer: Dataset, *, start: float | None,
                 end: float | None) -> None:
        req = run.request
        self.run, self.spark, self.src, self.peer = run, spark, src, peer
        self.key, self.opts, self.buckets = req.keys(), req.options(), req.buckets
        self.ts_column, self.ignore, self.start, self.end = req.ts_column, list(req.ignore_columns), start, end
        self.schema = C.SchemaDiff()
        self.null_ts: dict[str, int] = {}
        self.cache_reads = False  # read each side once and keep it (HBase tables: remote scans)
        self.window: dict[str, Any] = {"ts_column": req.ts_column, "start": start, "end": end}
        self.data_time: float | None = None
        self.samples_hook: Callable[[Samples], Samples] | None = None
        self.settled: dict[int, int] = {}  # bucket -> rows known identical on both sides without a row read
        # HBase: each key is one row per side and its data one value (the cells): no value-by-value
        # compare (a CONTENT_DIFFERENT row differs in this column) and no duplicate keys to look for
        self.one_value: str | None = None

    @staticmethod
    def row_dict(r: Any) -> dict[str, Any]:
        """A sampled row as the report shows it."""
        return _row_dict(r)

    def prepare(self, windowed: bool = True) -> tuple[DataFrame, DataFrame]:
        """Read both sides, check columns, apply the window, align; return the hashed frames."""
        topo, access = self.run.topology, self.run.access
        s = read(self.spark, self.src, side="source", topology=topo, access=access)
        p = read(self.spark, self.peer, side="peer", topology=topo, access=access)
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
    """An HBase verification: first both tables as chunk digests folded in the reader (no Spark row
    per HBase row); the chunks identical on both sides are GOOD, and only the key ranges that
    differ are read as rows, each range a bucket. The rows come with their digest computed by the
    reader from the cells' raw bytes (row key included) — no canonical form or JSON text is built in
    Spark; ``cells`` (raw bytes) is the row's one value (``one_value``: a CONTENT_DIFFERENT row
    differs in it, no value-by-value pass) and what the samples show, cell by cell."""

    def __init__(self, run: _Run, spark: SparkSession, tables: tuple[HB.Table, HB.Table], scan: HB.Scan,
                 snapshots: HB.Snapshots, *, start: float | None, end: float | None) -> None:
        req = run.request
        # start/end bound the cells' timestamps (in the scan); the end is the time the data is from
        super().__init__(run, spark, Dataset(req.source, "hbase"), Dataset(req.target, "hbase"), start=start,
                         end=end)
        self.tables, self.scan, self.snapshots = tables, scan, snapshots
        self.cache_reads = True
        self.ranges: list[HB.Range] | None = None  # the key ranges read as rows (after the chunk pass)
        self.one_value = "cells"

    @staticmethod
    def row_dict(r: Any) -> dict[str, Any]:
        """A sampled row's cells, decoded whole (never cut like a long value)."""
        return {} if r is None else {"cells": decode_cells(r["cells"])}

    def prepare(self, windowed: bool = True) -> tuple[DataFrame, DataFrame]:
        """The first time: both tables as chunk digests (:func:`hbase.chunks`), the identical chunks
        settled as GOOD without reading a row into Spark, and only the differing key ranges read as
        rows (each range a bucket, in key order). After (the re-compare): those ranges again, from
        fresh snapshots when reading snapshots."""
        from pyspark.sql import functions as F

        if self.ranges is None:
            bits = hbase.chunk_bits()
            self.run.say(f"digesting both tables in key-range chunks of ~{2 ** bits:,} rows")
            src, peer = hbase.chunks(self.spark, self.tables, self.scan, self.snapshots, bits)
            identical, differing = hbase.compare_chunks(src, peer)
            # every chunk and every differing range is a bucket, numbered in key order
            spans: list[tuple[bytes, int | None, bytes | None]] = sorted(
                [(a, n, None) for a, n in identical] + [(a, None, b) for a, b in differing], key=lambda x: x[0])
            self.ranges = [(a, stop, i) for i, (a, n, stop) in enumerate(spans) if stop is not None]
            self.settled = {i: n for i, (_, n, _) in enumerate(spans) if n is not None}
            self.buckets = max(1, len(spans))
            rows_same = sum(self.settled.values())
            self.window["chunks"] = {"rows_per_chunk": 2 ** bits, "source": len(src), "peer": len(peer),
                                     "identical": len(identical), "rows_identical": rows_same,
                                     "ranges_read": len(self.ranges)}
            self.run.say(f"{len(identical):,} chunks ({rows_same:,} rows) identical on both sides; reading the "
                         f"{len(self.ranges):,} key ranges that differ")
        out = []
        for t, side in zip(self.tables, ("source", "peer"), strict=True):
            df = hbase.read(self.spark, t, self.scan, side, self.snapshots, ranges=self.ranges, reuse=windowed)
            out.append(df.select(
                C.col("row"), C.col("cells"), C.col("b").alias(C.BUCKET),
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


def _provenance(spark: SparkSession, report_id: str, who: str | None) -> dict[str, Any]:
    import getpass
    import socket

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


def _spark_for(run: _Run, conf: dict[str, str] | None = None) -> SparkSession:
    """A session for the job: the Hadoop client conf for the request's paths (HDFS HA, S3A) goes in at start."""
    req = run.request
    paths = [u for u in (req.source, req.target) if not u.startswith(("table:", "jdbc:", "hbase://"))]
    return get_session(req.spark_master, app_name="drt-verify", topology=run.topology, uris=paths,
                       access=run.access, conf=conf)


def verify(request: VerifyRequest, *, access: Access, topology: Topology | None = None,
           ledger: Ledger | None = None, spark: SparkSession | None = None,
           progress: Progress | None = None) -> VerifyResult:
    """Compare ``request.source`` with its replica ``request.target`` by ``request.key``; see the
    module doc for the rules and :class:`dr_toolkit.verify.request.VerifyRequest` for the options.

    Two ``hbase://<cluster>/<ns>:<table>`` URIs compare HBase tables cell by cell
    (:mod:`dr_toolkit.verify.hbase`; the row key is the key); the times bound the cells' timestamps.

    ``as_of`` (an HDFS tree): the source is read through the newest snapshot a replication run took
    of it at or before ``as_of`` (:func:`dr_toolkit.verify.sources.pin_to_snapshot`; ConfigError when
    there is none); the report's ``data_time`` is that snapshot's time. HBase tables and
    ``ts_column`` datasets take ``as_of`` as the end of the window.

    Raises ConfigError (exit 2) for bad input: a missing path, an unreadable format, a key or
    timestamp column that does not exist, a bad time, a type that cannot be compared.
    Differences are not errors: look at ``result.counters["BADROWS"]`` (the CLI exits 1 when
    it is > 0). ``request.spark_master`` (else the topology's hot ``spark.master``) is used only
    when no session exists yet — under spark-submit the submitter's session wins. ``access``
    holds the credentials of every endpoint read (JDBC ``conn_id``, the clusters' WebHDFS).
    """
    run = _Run(request, access, topology, ledger, progress or (lambda m: log.info("%s", m)))
    if request.is_hbase:
        return _verify_hbase(run, spark)
    start, end, as_of = request.window()
    pinned = None
    if as_of is not None:
        pinned = pin_to_snapshot(request.source, as_of, side="source", topology=topology, access=access)
    src = Dataset(request.source, request.format, request.table, request.conn_id,
                  read_uri=pinned.uri if pinned else None)
    peer = Dataset(request.target, request.peer_format or request.format, request.peer_table or request.table,
                   request.peer_conn_id or request.conn_id)
    precheck(src, side="source", topology=topology)
    precheck(peer, side="peer", topology=topology)
    job = _Job(run, spark or _spark_for(run), src, peer, start=start, end=end)
    if pinned:
        job.data_time = pinned.time
        job.window.update(as_of=as_of, pinned=pinned.to_json())
    try:
        return _verify(job)
    except ConfigError:
        raise
    except Exception as exc:
        if type(exc).__name__ in ("AnalysisException", "ParseException") or "AnalysisException" in str(exc)[:300]:
            raise ConfigError(f"Spark cannot compare these datasets: {first_line(exc)}",
                              where=f"{src.display} vs {peer.display}",
                              hint="check the column types (--ignore-columns leaves a column out)") from None
        raise


def _verify_hbase(run: _Run, spark: SparkSession | None) -> VerifyResult:
    """Two HBase tables, cell by cell, through the generic pipeline (see :mod:`dr_toolkit.verify.hbase`)."""
    req = run.request
    tables = hbase.parse(req.source, run.topology, "source"), hbase.parse(req.target, run.topology, "peer")
    start, end, _ = req.window()
    scan = hbase.make_scan(start=start, end=end, **req.hbase_scan_options())
    snapshots = hbase.make_snapshots(req.read, req.hbase_rootdir)
    hbase.precheck(*tables, scan)
    if spark is None:
        spark = _spark_for(run, conf=hbase.spark_conf(run.topology))
    run.say("checking both tables")
    families = hbase.check_tables(spark, *tables, scan)
    job = _HBaseJob(run, spark, tables, scan, snapshots, start=start, end=end)
    job.samples_hook = hbase.cell_diff
    job.window = {"ts_column": "cell timestamp" if start is not None or end is not None else None,
                  "start": start, "end": end, "hbase": scan.to_json(), "families": families,
                  "read": snapshots.mode, "snapshots": snapshots.names, "verifyrep_args": scan.verifyrep_args()}
    try:
        return _verify(job)
    finally:
        for line in hbase.drop_snapshots(spark, snapshots):
            log.warning("a snapshot taken for the verification could not be deleted: %s", line)


@dataclass
class _Found:
    """What the passes found (filled pass by pass)."""

    source: dict[int, tuple[Any, ...]]  # bucket -> (rows, xxhash sum, …, null keys) of each side
    peer: dict[int, tuple[Any, ...]]
    nonempty: set[int]
    differing: list[int]
    good: int
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(C.COUNTERS, 0))
    samples: Samples = field(default_factory=lambda: {k: [] for k in C.BAD_KINDS})
    duplicates: dict[str, Any] = field(default_factory=lambda: {"source": 0, "peer": 0, "samples": []})
    recompare: dict[str, Any] = field(default_factory=dict)
    bad_per_bucket: dict[int, int] = field(default_factory=dict)
    mismatches: dict[str, int] = field(default_factory=dict)


def _verify(job: _Job) -> VerifyResult:
    """Digests of every bucket, then the row compare of the buckets that differ; the result is
    written (HTML report, ledger row, watermark) as the request asks."""
    from pyspark.sql import functions as F

    say, req = job.run.say, job.run.request
    say("reading both sides")
    hs, hp = job.prepare()
    say(f"comparing {job.buckets} bucket digests")
    persisted: list[DataFrame] = []
    if job.cache_reads:
        # A remote read (HBase region servers) costs far more than a cached copy: each side is read
        # once, both at the same time (one Spark job over both tables' regions: with one region per
        # table the two scans run side by side), and kept for every later pass.
        from pyspark import StorageLevel

        # Built uncompressed: the columnar cache's compression first gathers statistics over every
        # value (seen in jstack: most of the build), and the cache lives for one verification.
        # Measured on 1,000,000 rows a side (a warm session): 21.6 s -> 17.0 s to read and digest.
        key = "spark.sql.inMemoryColumnarStorage.compressed"
        before = job.spark.conf.get(key, "true")
        job.spark.conf.set(key, "false")
        try:
            hs, hp = (h.persist(StorageLevel.MEMORY_AND_DISK) for h in (hs, hp))
            persisted += [hs, hp]
            hs.select(F.lit(0).alias("_")).unionAll(hp.select(F.lit(0).alias("_"))).count()
        finally:
            job.spark.conf.set(key, before or "true")
    # Digests and the row compare need only (key, bucket, hashes); the samples' rows are re-read from
    # their buckets. Caching the slim frames between passes measured slower than re-reading local
    # files, so they are not cached.
    sd, pd = ({r[C.BUCKET]: (r["n"], r["x"], r["s"], r["c"], r["nulls"]) for r in C.bucket_digests(
        h.select(*[C.col(k) for k in job.key], C.BUCKET, C.ROW_HASH, C.ROW_CRC, C.NULL_KEY)).collect()}
        for h in (hs, hp))
    for b, n in job.settled.items():  # identical on both sides (HBase: chunk digests)
        sd[b] = pd[b] = (n, 0, 0, 0, 0)
    nonempty = set(sd) | set(pd)
    differing = sorted(b for b in nonempty if (sd.get(b) or (0,))[:4] != (pd.get(b) or (0,))[:4])
    found = _Found(sd, pd, nonempty, differing, good=sum(v[0] for b, v in sd.items() if b not in set(differing)))
    found.recompare = {"sleep_s": req.recompare_sleep_s, "keys_rechecked": 0, "resolved": 0, "gone_from_both": 0}
    try:
        if differing:
            _row_pass(job, hs, hp, found, persisted)
    finally:
        for df in persisted:
            df.unpersist()
    found.counters[C.GOOD] = found.good
    found.counters[C.BAD] = sum(found.counters[k] for k in C.BAD_KINDS)
    result = _result(job, found)
    _record(job, result)
    return result


def _row_pass(job: _Job, hs: DataFrame, hp: DataFrame, found: _Found, persisted: list[DataFrame]) -> None:
    """Row-compare the differing buckets: classify their keys, settle values, count duplicates,
    re-compare after the pause, take the samples."""
    from pyspark.sql import functions as F

    say, req, key, differing = job.run.say, job.run.request, job.key, found.differing
    say(f"row-comparing {len(differing)} of {len(found.nonempty)} buckets")
    # The rows of the differing buckets are read once and kept: the key compare, the value
    # compare and the samples all work on them (a small part of the data when few buckets differ).
    if len(differing) < len(found.nonempty):
        hs, hp = (C.restrict(h, differing).persist() for h in (hs, hp))
        persisted += [hs, hp]
    cls = job.row_compare(hs, hp, differing, job.buckets + 1, persisted)
    say("comparing values of the keys that differ")
    cls, within_tol = _settle_values(job, cls, hs, hp, differing, persisted, found.mismatches)
    first = _counts(cls)
    found.good += first.get(C.GOOD, 0)
    if job.one_value is None:
        say("looking for duplicate keys")
        dup = cls.filter((F.col("s_n") > 1) | (F.col("p_n") > 1))
        d = dup.agg(F.sum((F.col("s_n") > 1).cast("int")).alias("s"),
                    F.sum((F.col("p_n") > 1).cast("int")).alias("p")).collect()[0]
        found.duplicates = {"source": int(d["s"] or 0), "peer": int(d["p"] or 0), "samples": [
            {"key": {k: _jsonable(r[k]) for k in key}, "source_rows": r["s_n"] or 0, "peer_rows": r["p_n"] or 0}
            for r in dup.orderBy(*[C.col(k) for k in key]).limit(req.sample_size).collect()]}
    final = cls.filter(F.col("category") != C.GOOD)
    first_bad = sum(first.get(k, 0) for k in C.BAD_KINDS)
    found.recompare["within_tolerance"] = within_tol
    counts = first
    if req.recompare_sleep_s > 0 and first_bad:
        final, counts, hs, hp = _recompare(job, final, first_bad, found, persisted)
    say("collecting samples")
    for k in C.BAD_KINDS:
        found.counters[k] = counts.get(k, 0)
    if req.sample_size > 0 and any(found.counters[k] for k in C.BAD_KINDS):
        found.samples = _samples(final, hs, hp, key, req.sample_size, job.row_dict)
        if job.samples_hook is not None:
            found.samples = job.samples_hook(found.samples)
    found.bad_per_bucket = {r[C.BUCKET]: int(r["count"]) for r in final.groupBy(C.BUCKET).count().collect()}


def _recompare(job: _Job, final: DataFrame, first_bad: int, found: _Found, persisted: list[DataFrame]
               ) -> tuple[DataFrame, dict[str, int], DataFrame, DataFrame]:
    """After the pause, compare the keys that differed again on their current rows (no window);
    returns what still differs, its counts and the frames re-read."""
    from pyspark.sql import functions as F

    sleep_s, key = job.run.request.recompare_sleep_s, job.key
    bad_keys = final.select(C.KEY, C.BUCKET).localCheckpoint(eager=True)
    bad_buckets = sorted(r[0] for r in bad_keys.select(C.BUCKET).distinct().collect())
    # The re-read may have the same plan as the first: drop the caches, or Spark answers from them.
    for df in persisted:
        df.unpersist()
    job.run.say(f"{first_bad} keys differ; re-comparing them in {sleep_s:g} s")
    time.sleep(sleep_s)
    hs, hp = job.prepare(windowed=False)  # current rows of those keys, wherever their time now is
    hs, hp = (C.only_keys(C.with_key(C.restrict(h, bad_buckets), key), bad_keys).drop(C.KEY) for h in (hs, hp))
    again = C.only_keys(job.row_compare(hs, hp, bad_buckets, job.buckets + 1, persisted), bad_keys)
    found.mismatches.clear()
    again, _ = _settle_values(job, again, hs, hp, bad_buckets, persisted, found.mismatches)
    present = again.count()
    final = again.filter(F.col("category") != C.GOOD).persist()
    persisted.append(final)
    second = _counts(final)
    still = sum(second.get(k, 0) for k in C.BAD_KINDS)
    found.recompare.update(keys_rechecked=first_bad, resolved=present - still, gone_from_both=first_bad - present)
    found.good += present - still
    return final, second, hs, hp


def _result(job: _Job, found: _Found) -> VerifyResult:
    run, req = job.run, job.run.request
    finished = time.time()
    report_id = req.report_id or new_id("verify")
    window = {k: job.window[k] for k in ("ts_column", "start", "end")}
    if job.null_ts:
        window["null_ts"] = job.null_ts
    window.update(job.window)
    sd, pd = found.source, found.peer
    return VerifyResult(
        counters=found.counters, source_rows=sum(v[0] for v in sd.values()), peer_rows=sum(v[0] for v in pd.values()),
        source=job.src.display, target=job.peer.display, key=job.key, duration_s=finished - run.started,
        started_at=run.started, finished_at=finished,
        data_time=job.data_time if job.data_time is not None else job.end if job.end is not None else run.started,
        report_id=report_id, name=req.name, samples=found.samples, buckets=job.buckets,
        buckets_compared=len(found.nonempty), buckets_differing=len(found.differing),
        duplicate_keys=found.duplicates,
        null_keys={"source": sum(v[4] or 0 for v in sd.values()), "peer": sum(v[4] or 0 for v in pd.values())},
        schema=job.schema.to_json(), window=window, recompare=found.recompare,
        bucket_chart=_chart({b: v[0] for b, v in sd.items()}, found.bad_per_bucket, job.buckets),
        column_mismatches=dict(sorted(found.mismatches.items(), key=lambda kv: (-kv[1], kv[0]))),
        compare_options=job.opts.to_json(), provenance=_provenance(job.spark, report_id, req.who),
        trend=_trend(run.ledger, req.name, job.src.display) if run.ledger is not None else [],
        request=req.fingerprint(),
    )


def _record(job: _Job, result: VerifyResult) -> None:
    """The HTML report (``report_path``), the ledger row and, when nothing differs, the watermark."""
    req, ledger = job.run.request, job.run.ledger
    if req.report_path:
        result.report_path = str(Path(req.report_path).resolve())
        write_html(result, result.report_path)
    if ledger is None:
        return
    ledger.add_verify_report(VerifyReportRow(
        report_id=result.report_id, source=result.source, target=result.target, counters=result.counters,
        source_rows=result.source_rows, peer_rows=result.peer_rows, started_at=result.started_at,
        finished_at=result.finished_at, name=req.name, report_path=result.report_path,
        detail={k: v for k, v in result.to_json().items() if k not in C.COUNTERS and k != "trend"}))
    if req.name and result.ok:
        ledger.set_watermark("verify", req.name, result.data_time,
                             detail={"report_id": result.report_id, "rows": result.source_rows})


def _settle_values(job: _Job, cls: DataFrame, hs: DataFrame, hp: DataFrame, buckets: list[int],
                   persisted: list[DataFrame], mismatches: dict[str, int]) -> tuple[DataFrame, int]:
    """Compare, value by value, the CONTENT_DIFFERENT keys held by one row per side: fill
    ``mismatches`` (column -> keys differing there) and, under a float tolerance, turn keys
    whose values are all within it into GOODROWS. Returns the new classification and that count."""
    from pyspark.sql import functions as F

    if job.one_value is not None:  # one value per row: every CONTENT_DIFFERENT row differs in it
        n = cls.filter(F.col("category") == C.CONTENT).count()
        if n:
            mismatches[job.one_value] = mismatches.get(job.one_value, 0) + n
        return cls, 0
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


def verify_policy(topology: Topology, policy_name: str, ledger: Ledger | None, *, access: Access,
                  spark: SparkSession | None = None, progress: Progress | None = None,
                  spark_master: str | None = None, who: str | None = None) -> VerifyResult:
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
    request = policy_request(policy, report_path=str(report), report_id=report_id, spark_master=spark_master,
                             who=who)
    if request.is_hbase or request.ts_column:
        # a timestamp column (or an HBase table's cell timestamps) pins the run to its start: rows written
        # while it runs are not compared, and a GOOD report means "cold equals hot as of the start"
        request = request.model_copy(update={"end_time": str(time.time())})
    else:
        # an HDFS tree whose replication takes snapshots is read through the newest one (cold equals hot
        # as of that run's listing); without one it is read live, as before
        as_of = _policy_as_of(topology, request, access)
        if as_of is not None:
            request = request.at(as_of)
    return verify(request, access=access, topology=topology, ledger=ledger, spark=spark, progress=progress)


def _policy_as_of(topology: Topology, request: VerifyRequest, access: Access) -> float | None:
    """Now, when the policy's source is an HDFS tree a replication snapshot can pin; else None (read live)."""
    try:
        if parse_uri(request.source, topology).kind != "webhdfs":
            return None
        now = time.time()
        pin_to_snapshot(request.source, now, side="source", topology=topology, access=access)
    except ConfigError as exc:
        log.info("verify policy %s reads its source live: %s", request.name, exc.message)
        return None
    return now
