"""The verifyrep job as ``DataFrame -> DataFrame`` functions (chispa style).

The pipeline, for a source and its replica ("peer") read by Spark:

1. :func:`align` gives both sides the same columns in the same order (keys first, then the
   other columns sorted by name), so the row encoding does not depend on column order.
   A column missing on one side is null there; a column whose type differs is compared by
   its text (``CAST(... AS STRING)``) on both sides. :class:`SchemaDiff` says which.
2. :func:`with_hashes` adds, per row, ``__bucket`` (a hash of the key modulo the bucket
   count) and ``__h`` (a 64-bit xxhash of the key and every column, each followed by its
   null flag, so ``(NULL, 'a')`` and ``('a', NULL)`` differ).
3. :func:`bucket_digests` folds each bucket into ``(rows, bit_xor(h), sum(h & 0xffffffff))``
   (ANSI mode is on: no plain sum of 64-bit hashes). Buckets with equal digests on both
   sides are counted GOODROWS without a row compare (data-diff's bisection idea).
4. For the buckets that differ, :func:`key_digests` folds each key into the same digest
   (several rows under one key fold into one digest: duplicates are compared as multisets,
   never joined row by row) and :func:`classify` full-outer-joins the two sides by key
   (null-safe) into VerifyReplication's categories. :func:`rows_of` fetches the rows of the
   sampled keys for the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

BUCKET = "__bucket"
ROW_HASH = "__h"
NULL_KEY = "__nullkey"
KEY = "__key"
GOOD = "GOODROWS"
BAD = "BADROWS"
ONLY_SOURCE = "ONLY_IN_SOURCE_TABLE_ROWS"
ONLY_PEER = "ONLY_IN_PEER_TABLE_ROWS"
CONTENT = "CONTENT_DIFFERENT_ROWS"
BAD_KINDS = (ONLY_SOURCE, ONLY_PEER, CONTENT)
COUNTERS = (GOOD, BAD, *BAD_KINDS)
_LOW32 = 0xFFFFFFFF


def col(name: str) -> Column:
    """A column by its exact name (dots, spaces and backticks allowed)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


@dataclass
class SchemaDiff:
    """How the two sides' columns differ (keys excluded from nothing: a key type change shows too)."""

    only_in_source: list[str] = field(default_factory=list)
    only_in_peer: list[str] = field(default_factory=list)
    type_changes: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.only_in_source or self.only_in_peer or self.type_changes)

    def to_json(self) -> dict[str, Any]:
        return {"only_in_source": self.only_in_source, "only_in_peer": self.only_in_peer,
                "type_changes": {k: {"source": s, "peer": p} for k, (s, p) in self.type_changes.items()}}


def check_columns(df: DataFrame, columns: list[str], side: str, where: str) -> None:
    """Raise ConfigError (exit 2) naming the missing columns and the ones that exist."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(f"{side} has no column {', '.join(repr(c) for c in missing)}", where=where,
                          hint=f"its columns are: {', '.join(df.columns) or '(none)'}; check --key/--ts-column")


def align(source: DataFrame, peer: DataFrame, key: list[str], ignore: list[str] | None = None
          ) -> tuple[DataFrame, DataFrame, SchemaDiff]:
    """Give both sides the same columns, types and order; say how their schemas differ.

    Keys come first in the given order, then every other column of either side sorted by
    name. A column only one side has is NULL on the other (so a row with a value there
    counts as CONTENT_DIFFERENT). A column whose type differs is cast to STRING on both
    sides (int → bigint compares equal; 1 vs 1.0 does not). Map columns are compared as
    text, as Spark cannot hash maps.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    skip = set(ignore or [])
    s_types = {f.name: f.dataType for f in source.schema.fields if f.name not in skip}
    p_types = {f.name: f.dataType for f in peer.schema.fields if f.name not in skip}
    others = sorted((set(s_types) | set(p_types)) - set(key))
    diff = SchemaDiff(only_in_source=sorted(set(s_types) - set(p_types)),
                      only_in_peer=sorted(set(p_types) - set(s_types)))
    s_cols: list[Column] = []
    p_cols: list[Column] = []
    for name in [*key, *others]:
        st, pt = s_types.get(name), p_types.get(name)
        if st is not None and pt is not None and st != pt:
            diff.type_changes[name] = (st.simpleString(), pt.simpleString())
            s_cols.append(col(name).cast("string").alias(name))
            p_cols.append(col(name).cast("string").alias(name))
            continue
        dtype = st if st is not None else pt
        assert dtype is not None
        as_text = isinstance(dtype, MapType)
        for have, out in ((st, s_cols), (pt, p_cols)):
            expr = col(name) if have is not None else F.lit(None).cast(dtype)
            out.append((expr.cast("string") if as_text else expr).alias(name))
    return source.select(*s_cols), peer.select(*p_cols), diff


def _with_null_flags(columns: list[str]) -> list[Column]:
    out: list[Column] = []
    for c in columns:
        out += [col(c), col(c).isNull()]
    return out


def with_hashes(df: DataFrame, key: list[str], buckets: int) -> DataFrame:
    """Add ``__bucket`` (key hash mod ``buckets``), ``__h`` (row hash) and ``__nullkey`` (0/1)."""
    from pyspark.sql import functions as F

    others = [c for c in df.columns if c not in key]
    key_args = _with_null_flags(key)
    null_key = reduce(lambda a, b: a | b, [col(k).isNull() for k in key])
    return df.select(
        "*",
        F.pmod(F.xxhash64(*key_args), F.lit(buckets)).cast("int").alias(BUCKET),
        F.xxhash64(F.lit("drt-row"), *key_args, *_with_null_flags(others)).alias(ROW_HASH),
        null_key.cast("int").alias(NULL_KEY),
    )


def _digest_aggs() -> list[Column]:
    from pyspark.sql import functions as F

    return [F.count(F.lit(1)).alias("n"), F.bit_xor(ROW_HASH).alias("x"),
            F.sum(col(ROW_HASH).bitwiseAND(F.lit(_LOW32))).alias("s")]


def bucket_digests(hashed: DataFrame) -> DataFrame:
    """One row per bucket: ``__bucket, n, x, s, nulls`` (rows, xor of hashes, low-32 sum, null keys)."""
    from pyspark.sql import functions as F

    return hashed.groupBy(BUCKET).agg(*_digest_aggs(), F.sum(NULL_KEY).alias("nulls"))


def with_key(hashed: DataFrame, key: list[str]) -> DataFrame:
    """Add ``__key``: the key columns as one struct (struct equality treats NULL fields as equal,
    so joining on it is null-safe, and grouping and joining by it share one partitioning)."""
    from pyspark.sql import functions as F

    return hashed.withColumn(KEY, F.struct(*[col(k) for k in key]))


def key_digests(keyed: DataFrame) -> DataFrame:
    """One row per key (null is a key value): ``__key, __bucket, n, x, s`` (a hash aggregate)."""
    from pyspark.sql import functions as F

    return keyed.groupBy(KEY).agg(F.min(BUCKET).alias(BUCKET), *_digest_aggs())


def classify(source_keys: DataFrame, peer_keys: DataFrame, key: list[str]) -> DataFrame:
    """Full outer join of two :func:`key_digests` by ``__key`` into the categories.

    Output: ``__key, keys.., __bucket, category, s_n, p_n`` with ``category`` one of
    GOODROWS, ONLY_IN_SOURCE_TABLE_ROWS, ONLY_IN_PEER_TABLE_ROWS, CONTENT_DIFFERENT_ROWS.
    ``s_n``/``p_n`` are the rows under the key on each side (> 1: a duplicate key).
    """
    from pyspark.sql import functions as F

    def side(df: DataFrame, p: str) -> DataFrame:
        return df.select(KEY, *[col(c).alias(f"{p}{c}") for c in (BUCKET, "n", "x", "s")])

    j = side(source_keys, "s_").join(side(peer_keys, "p_"), KEY, "full_outer")
    same = (j["s_n"] == j["p_n"]) & (j["s_x"] == j["p_x"]) & (j["s_s"] == j["p_s"])
    category = (F.when(j["p_n"].isNull(), F.lit(ONLY_SOURCE))
                .when(j["s_n"].isNull(), F.lit(ONLY_PEER))
                .when(same, F.lit(GOOD))
                .otherwise(F.lit(CONTENT)))
    return j.select(
        col(KEY), *[col(KEY).getField(k).alias(k) for k in key],
        F.coalesce(j[f"s_{BUCKET}"], j[f"p_{BUCKET}"]).alias(BUCKET),
        category.alias("category"), j["s_n"], j["p_n"],
    )


def rows_of(keyed: DataFrame, keys: DataFrame, key: list[str], alias: str) -> DataFrame:
    """``__key, <alias>``: the rows (a struct of the non-key columns) of ``keyed`` whose key is in ``keys``."""
    from pyspark.sql import functions as F

    others = [c for c in keyed.columns if c not in (KEY, BUCKET, ROW_HASH, NULL_KEY, *key)]
    row = F.struct(*[col(c) for c in others]) if others else F.lit(None)
    return keyed.join(keys.select(KEY), KEY, "left_semi").select(KEY, row.alias(alias))


def restrict(hashed: DataFrame, buckets: list[int]) -> DataFrame:
    """Only the rows in ``buckets`` (an IN set: a hash lookup per row)."""
    return hashed.filter(col(BUCKET).isin(buckets))


def only_keys(df: DataFrame, keys: DataFrame) -> DataFrame:
    """Rows of ``df`` whose ``__key`` is in ``keys`` (null-safe: struct equality)."""
    return df.join(keys.select(KEY), KEY, "left_semi")


def in_window(df: DataFrame, ts_column: str, start: float | None, end: float | None) -> DataFrame:
    """Rows with ``start <= ts_column < end`` (epoch seconds; either bound may be open).

    A timestamp/date column is compared as an instant; a numeric column as epoch seconds; a
    string column is cast to a timestamp. Rows whose timestamp is NULL are outside any window.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import NumericType

    if start is None and end is None:
        return df
    dtype = df.schema[ts_column].dataType
    numeric = isinstance(dtype, NumericType)
    ts = col(ts_column).cast("double") if numeric else col(ts_column).cast("timestamp")

    def bound(v: float) -> Column:
        return F.lit(v) if numeric else F.timestamp_micros(F.lit(round(v * 1_000_000)))

    conds = [ts.isNotNull()]
    if start is not None:
        conds.append(ts >= bound(start))
    if end is not None:
        conds.append(ts < bound(end))
    return df.filter(reduce(lambda a, b: a & b, conds))
