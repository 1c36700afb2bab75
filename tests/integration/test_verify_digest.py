"""Verification never passes a differing row: tiny frames for every case of issue 15
(nested NULLs and positions, decimal scale, map order, a map in a struct, int/long), the
float tolerance and string options, NULL timestamps in a window, the re-compare of in-flight
updates and deletes, unsupported types, the per-column breakdown and the provenance."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.errors import ConfigError
from dr_toolkit.verify.api import VerifyResult
from tests.support.fixtures_verify import verify_paths

pytestmark = [pytest.mark.integration, pytest.mark.spark]
_n = itertools.count()


def views(spark: Any, ddl_s: str, rows_s: list[tuple], ddl_p: str | None = None,
          rows_p: list[tuple] | None = None) -> tuple[str, str]:
    i = next(_n)
    spark.createDataFrame(rows_s, ddl_s).createOrReplaceTempView(f"s{i}")
    spark.createDataFrame(rows_p if rows_p is not None else rows_s, ddl_p or ddl_s).createOrReplaceTempView(f"p{i}")
    return f"table:s{i}", f"table:p{i}"


def run(spark: Any, ddl_s: str, a: Any, b: Any, ddl_p: str | None = None, **kw: Any) -> VerifyResult:
    s, p = views(spark, ddl_s, [(1, a), (2, None)], ddl_p, [(1, b), (2, None)])
    return verify_paths(s, p, ["id"], spark=spark, buckets=kw.pop("buckets", 4), **kw)


DIFFERENT = [
    ("id long, v array<string>", [None, "x"], ["x"]),
    ("id long, v array<string>", [None, "x"], ["x", None]),
    ("id long, v array<string>", [], [None, None]),
    ("id long, v array<string>", None, []),
    ("id long, v struct<a:string,b:string>", (None, "x"), ("x", None)),
    ("id long, v struct<a:string,b:string>", None, (None, None)),
    ("id long, v array<struct<a:int,b:array<int>>>", [(1, [None, 2])], [(1, [2, None])]),
    ("id long, v map<string,int>", {"a": 1, "b": 2}, {"a": 1, "b": 3}),
    ("id long, v map<string,int>", {"a": None}, {}),
    ("id long, v struct<m:map<string,array<string>>>", ({"k": [None, "x"]},), ({"k": ["x"]},)),
    ("id long, v string", "a,b", "a\",\"b"),
    ("id long, v string", "", None),
    ("id long, v decimal(10,2)", "1.50", "1.51"),
    ("id long, v double", 0.1, 0.10000000000000002),
    ("id long, v timestamp", "2024-01-01 00:00:00.000001", "2024-01-01 00:00:00.000002"),
    ("id long, v binary", b"\x00", b"\x00\x00"),
]


def _cast(ddl: str, v: Any) -> Any:
    from datetime import datetime
    from decimal import Decimal

    if v is None:
        return None
    if "decimal" in ddl:
        return Decimal(v)
    if "timestamp" in ddl:
        return datetime.fromisoformat(v)
    return v


@pytest.mark.parametrize(("ddl", "a", "b"), DIFFERENT, ids=[f"{d.split(', v ')[1]}:{a!r}~{b!r}"[:60]
                                                            for d, a, b in DIFFERENT])
def test_a_differing_value_is_never_good(spark, ddl: str, a: Any, b: Any) -> None:
    r = run(spark, ddl, _cast(ddl, a), _cast(ddl, b))
    assert r.counters["CONTENT_DIFFERENT_ROWS"] == 1, (a, b, r.counters)
    assert r.counters["GOODROWS"] == 1
    assert r.column_mismatches == {"v": 1}


def test_nested_nulls_everywhere_random(spark) -> None:
    """Random nested values with NULLs: a row equals its peer exactly when the Python values are equal."""
    import random

    rnd = random.Random(15)

    def value(depth: int = 0) -> Any:
        if rnd.random() < 0.25:
            return None
        return [(rnd.choice([None, "x", "y", ""]), [rnd.choice([None, 1, 2]) for _ in range(rnd.randint(0, 3))])
                for _ in range(rnd.randint(0, 3))]

    ddl = "id long, v array<struct<a:string,b:array<int>>>"
    src = [(i, value()) for i in range(300)]
    peer = [(i, v if rnd.random() < 0.5 else value()) for i, v in src]
    s, p = views(spark, ddl, src, ddl, peer)
    r = verify_paths(s, p, ["id"], spark=spark, buckets=16)
    differing = sum(1 for (_, a), (_, b) in zip(src, peer, strict=True) if a != b)
    assert differing > 50
    assert r.counters["CONTENT_DIFFERENT_ROWS"] == differing
    assert r.counters["GOODROWS"] == 300 - differing


EQUAL = [
    ("id long, v decimal(10,2)", "1.50", "id long, v decimal(12,4)", "1.5000"),
    ("id long, v decimal(10,2)", "1.00", "id long, v decimal(10,0)", "1"),
    ("id long, v int", 7, "id long, v bigint", 7),
    ("id long, v map<string,int>", {"a": 1, "b": 2}, None, {"b": 2, "a": 1}),
    ("id long, v struct<s:struct<m:map<string,int>>>", (({"a": 1, "b": 2},),), None, (({"b": 2, "a": 1},),)),
    ("id long, v array<map<int,string>>", [{1: "a", 2: None}], None, [{2: None, 1: "a"}]),
    ("id long, v double", -0.0, None, 0.0),
]


@pytest.mark.parametrize(("ddl_s", "a", "ddl_p", "b"), EQUAL,
                         ids=[f"{d.split(', v ')[1]}:{a!r}" [:50] for d, a, _, _ in EQUAL])
def test_equal_values_in_another_form_are_good(spark, ddl_s: str, a: Any, ddl_p: str | None, b: Any) -> None:
    r = run(spark, ddl_s, _cast(ddl_s, a), _cast(ddl_p or ddl_s, b), ddl_p)
    assert r.counters["BADROWS"] == 0, r.counters
    assert r.counters["GOODROWS"] == 2


def test_float_tolerance_and_string_options(spark) -> None:
    ddl = "id long, f double, s string"
    src = [(1, 1.0, "Abc"), (2, 100.0, " x "), (3, 5.0, "q"), (4, 1e6, "z")]
    peer = [(1, 1.0000004, "abc"), (2, 100.5, "x"), (3, 5.0, "q"), (4, 1e6 * (1 + 5e-7), "z")]
    s, p = views(spark, ddl, src, ddl, peer)
    exact = verify_paths(s, p, ["id"], spark=spark, buckets=4)
    assert exact.counters["CONTENT_DIFFERENT_ROWS"] == 3
    assert exact.column_mismatches == {"f": 3, "s": 2}
    loose = verify_paths(s, p, ["id"], spark=spark, buckets=4,
                   abs_tol=1e-6, rel_tol=1e-6, ignore_spaces=True, ignore_case=True)
    # id 2 differs by 0.5: beyond abs_tol + rel_tol*100.5; the others are within the tolerance
    assert loose.counters["CONTENT_DIFFERENT_ROWS"] == 1
    assert loose.counters["GOODROWS"] == 3
    assert loose.column_mismatches == {"f": 1}
    assert loose.compare_options["abs_tol"] == 1e-6
    rel_only = verify_paths(s, p, ["id"], spark=spark, buckets=4, rel_tol=1e-6)
    assert rel_only.counters["CONTENT_DIFFERENT_ROWS"] == 2  # strings still differ for 1 and 2
    assert rel_only.column_mismatches == {"s": 2, "f": 1}


def test_unsupported_type_is_one_config_error(spark) -> None:
    spark.sql("SELECT 1L AS id, INTERVAL '1' DAY AS d").createOrReplaceTempView("iv_s")
    with pytest.raises(ConfigError, match=r"column 'd' has type interval day"):
        verify_paths("table:iv_s", "table:iv_s", ["id"], spark=spark)
    r = verify_paths("table:iv_s", "table:iv_s", ["id"], spark=spark, ignore_columns=["d"])
    assert r.counters["GOODROWS"] == 1


def test_null_timestamps_in_a_window_are_counted(spark) -> None:
    ddl = "id long, ts timestamp, v string"
    from datetime import datetime

    t = datetime(2024, 1, 1, 12)
    s, p = views(spark, ddl, [(1, t, "a"), (2, None, "b"), (3, None, "c")], ddl,
                 [(1, t, "a"), (2, None, "changed")])
    r = verify_paths(s, p, ["id"], spark=spark, ts_column="ts", start_time="2024-01-01", end_time="2024-01-02")
    assert r.counters["GOODROWS"] == 1 and r.counters["BADROWS"] == 0
    assert r.window["null_ts"] == {"source": 2, "peer": 1}
    assert r.to_json()["window"]["null_ts"]["source"] == 2


def _write(spark: Any, path: Path, rows: list[tuple]) -> None:
    spark.createDataFrame(rows, "id long, ts long, v string").coalesce(1).write.mode("overwrite").parquet(str(path))


def test_recompare_settles_in_flight_updates_and_deletes(spark, tmp_path: Path) -> None:
    """Window [0, 1000). Key 5 was updated at the source during the run (its ts moved out of the
    window) and the update reaches the peer during the pause: GOOD, not ONLY_IN_PEER. Key 6 is
    updated at the source and has not reached the peer: CONTENT_DIFFERENT, not ONLY_IN_PEER.
    Key 7 was deleted at the source and the delete reaches the peer: gone from both, not GOOD."""
    src, peer = tmp_path / "s", tmp_path / "p"
    base = [(i, 100 + i, f"v{i}") for i in range(10)]
    _write(spark, src, [r for r in base if r[0] not in (5, 6, 7)] + [(5, 5000, "new5"), (6, 5000, "new6")])
    _write(spark, peer, base)

    def progress(msg: str) -> None:
        if "re-comparing" in msg:  # the pause: replication catches up on 5 and 7, not on 6
            _write(spark, peer, [r for r in base if r[0] not in (5, 7)] + [(5, 5000, "new5")])

    r = verify_paths(f"file://{src}", f"file://{peer}", ["id"], spark=spark, ts_column="ts", start_time="0",
               end_time="1000", recompare_sleep_s=0.01, progress=progress)
    first = r.recompare
    assert first["keys_rechecked"] == 3
    assert first["resolved"] == 1 and first["gone_from_both"] == 1
    assert r.counters["ONLY_IN_PEER_TABLE_ROWS"] == 0
    assert r.counters["CONTENT_DIFFERENT_ROWS"] == 1
    assert [s["key"]["id"] for s in r.samples["CONTENT_DIFFERENT_ROWS"]] == [6]
    assert r.counters["GOODROWS"] == 7 + 1  # 0-4, 8, 9 in the window, and 5 settled; 7 is not counted


def test_provenance_and_trend(spark, tmp_path: Path) -> None:
    from dr_toolkit.ledger import Ledger

    s, p = views(spark, "id long, v string", [(1, "a")], None, [(1, "b")])
    ledger = Ledger.open(f"sqlite:///{tmp_path}/l.db")
    r1 = verify_paths(s, p, ["id"], spark=spark, ledger=ledger, name="t", who="alice")
    r2 = verify_paths(s, s, ["id"], spark=spark, ledger=ledger, name="t", who="alice",
                report_path=str(tmp_path / "r.html"))
    prov = r2.provenance
    assert prov["who"] == "alice" and prov["run_id"] == r2.report_id
    assert prov["spark_app_id"] == spark.sparkContext.applicationId
    assert prov["tool_version"]
    assert [t["report_id"] for t in r2.trend] == [r1.report_id]
    assert r2.trend[0]["BADROWS"] == 1
    html = (tmp_path / "r.html").read_text()
    assert spark.sparkContext.applicationId in html and r1.report_id in html
