"""The verify job's DataFrame -> DataFrame functions, chispa style, on the shared local session."""

from __future__ import annotations

import pytest

from dr_toolkit.errors import ConfigError
from dr_toolkit.verify import compare as C
from dr_toolkit.verify.request import parse_time

pytestmark = pytest.mark.spark


def hashes(df, key=("id",), buckets=16) -> dict:
    return {r["id"]: (r[C.BUCKET], r[C.ROW_HASH]) for r in C.with_hashes(df, list(key), buckets).collect()}


def test_row_hash_is_column_order_independent_after_align(spark) -> None:
    a = spark.createDataFrame([(1, "x", 2.0), (2, None, 3.0)], "id int, s string, d double")
    b = a.select("d", "id", "s")
    a2, b2, diff = C.align(a, b, ["id"])
    assert diff.empty and a2.columns == b2.columns == ["id", "d", "s"]
    assert hashes(a2) == hashes(b2)


def test_row_hash_is_null_safe(spark) -> None:
    df = spark.createDataFrame([(1, None, "a"), (2, "a", None)], "id int, x string, y string")
    swapped = spark.createDataFrame([(1, "a", None), (2, None, "a")], "id int, x string, y string")
    h1, h2 = hashes(df), hashes(swapped)
    assert h1[1][0] == h2[1][0]  # same key, same bucket
    assert h1[1][1] != h2[1][1] and h1[2][1] != h2[2][1]


def test_bucket_digests_ignore_row_order(spark) -> None:
    rows = [(i, f"v{i}") for i in range(200)]
    a = C.with_hashes(spark.createDataFrame(rows, "id int, v string"), ["id"], 8)
    b = C.with_hashes(spark.createDataFrame(list(reversed(rows)), "id int, v string").repartition(3), ["id"], 8)
    da = sorted(tuple(r) for r in C.bucket_digests(a).collect())
    db = sorted(tuple(r) for r in C.bucket_digests(b).collect())
    assert da == db and sum(r[1] for r in da) == 200


def test_classify_categories_and_duplicates(spark) -> None:
    schema = "id int, v string"
    src = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c"), (5, "e"), (5, "e"), (None, "n")], schema)
    peer = spark.createDataFrame([(1, "a"), (2, "B"), (4, "d"), (5, "e"), (None, "n")], schema)
    kd = [C.key_digests(C.with_key(C.with_hashes(df, ["id"], 4), ["id"])) for df in (src, peer)]
    got = {r["id"]: (r["category"], r["s_n"], r["p_n"]) for r in C.classify(*kd, ["id"]).collect()}
    assert got == {1: (C.GOOD, 1, 1), 2: (C.CONTENT, 1, 1), 3: (C.ONLY_SOURCE, 1, None),
                   4: (C.ONLY_PEER, None, 1), 5: (C.CONTENT, 2, 1), None: (C.GOOD, 1, 1)}


def test_align_reports_schema_differences(spark) -> None:
    a = spark.createDataFrame([(1, 2, "x", 3)], "id int, n int, gone string, m int")
    b = spark.createDataFrame([(1, 2, "y", "3")], "id bigint, n bigint, new string, m string")
    a2, b2, diff = C.align(a, b, ["id"])
    assert diff.only_in_source == ["gone"] and diff.only_in_peer == ["new"]
    assert diff.type_changes == {"id": ("int", "bigint"), "n": ("int", "bigint"), "m": ("int", "string")}
    assert a2.schema == b2.schema
    # int and bigint are one canonical type (compared as numbers); int vs string is compared as text
    assert a2.collect()[0].asDict() == {"id": 1, "gone": "x", "m": "3", "n": 2, "new": None}
    assert b2.collect()[0].asDict() == {"id": 1, "gone": None, "m": "3", "n": 2, "new": "y"}


def test_missing_key_column_names_what_exists(spark) -> None:
    df = spark.createDataFrame([(1,)], "id int")
    with pytest.raises(ConfigError, match="no column 'k'.*its columns are: id"):
        C.check_columns(df, ["k"], "the source", "file:///x")


def test_window_bounds(spark) -> None:
    df = spark.createDataFrame([(i, i * 10) for i in range(10)], "id int, t long")
    got = sorted(r["id"] for r in C.in_window(df, "t", 20, 50).collect())
    assert got == [2, 3, 4]  # [start, end)
    ts = df.selectExpr("id", "timestamp_seconds(t) AS ts")
    assert sorted(r["id"] for r in C.in_window(ts, "ts", None, 30).collect()) == [0, 1, 2]


def test_parse_time() -> None:
    assert parse_time("1700000000", "--start-time") == 1_700_000_000
    assert parse_time("2023-11-14T22:13:20Z", "x") == 1_700_000_000
    assert parse_time("2023-11-14 22:13:20", "x") == 1_700_000_000
    assert parse_time(None, "x") is None
    with pytest.raises(ConfigError, match="not a time"):
        parse_time("soon", "--end-time")


AMBIGUOUS = [  # two rows a hash over the values alone, or over their concatenation, would confuse
    ("id int, a string, b string", ("ab", "c"), ("a", "bc")),
    ("id int, a string, b string", ("", None), (None, "")),
    ("id int, a bigint, b bigint", (None, 5), (5, None)),
    ("id int, a string, b array<string>", ("x", None), (None, ["x"])),
    ("id int, a array<string>, b array<string>", ([None], ["x"]), (["x"], [None])),
    ("id int, a double, b boolean", (None, True), (1.0, None)),
]


@pytest.mark.parametrize(("ddl", "a", "b"), AMBIGUOUS, ids=[f"{a!r}~{b!r}" for _, a, b in AMBIGUOUS])
def test_row_hashes_keep_nulls_positions_and_boundaries(spark, ddl: str, a: tuple, b: tuple) -> None:
    ra, rb = (C.with_hashes(spark.createDataFrame([(1, *v)], ddl), ["id"], 4).collect()[0] for v in (a, b))
    assert ra[C.BUCKET] == rb[C.BUCKET]  # one key
    assert ra[C.ROW_HASH] != rb[C.ROW_HASH] and ra[C.ROW_CRC] != rb[C.ROW_CRC], (a, b)


def test_a_null_in_the_first_and_in_the_63rd_flat_column_differ(spark) -> None:
    """More than 62 flat columns: the NULL mask spans several words, each column its own bit."""
    cols = [f"c{i:02d}" for i in range(70)]
    ddl = "id int, " + ", ".join(f"{c} bigint" for c in cols)
    first = [None if i == 0 else 0 for i in range(70)]
    late = [None if i == 62 else 0 for i in range(70)]
    rows = C.with_hashes(spark.createDataFrame([(1, *first)], ddl), ["id"], 4).collect() + \
        C.with_hashes(spark.createDataFrame([(1, *late)], ddl), ["id"], 4).collect()
    assert rows[0][C.ROW_HASH] != rows[1][C.ROW_HASH] and rows[0][C.ROW_CRC] != rows[1][C.ROW_CRC]
