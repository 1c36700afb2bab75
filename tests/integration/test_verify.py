"""verifyrep on real files with the shared local Spark session: counters, samples, live-data
re-compare, windows, edge cases, sources (formats, Spark tables, JDBC), ledger and report."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import parse_topology
from dr_toolkit.verify.api import verify_policy
from tests.support.fixtures_verify import (
    CONTENT,
    ONLY_PEER,
    ONLY_SOURCE,
    ROWS,
    T0,
    base_frame,
    topology_file,
    verify_paths,
    write,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def keys(samples: list[dict]) -> list[int]:
    return [s["key"]["id"] for s in samples]


def test_planted_differences_are_counted_exactly(spark, planted, tmp_path: Path) -> None:
    r = verify_paths(planted.source, planted.peer, ["id"], spark=spark, report_path=str(tmp_path / "r.html"),
               sample_size=20)
    c = r.counters
    assert c["ONLY_IN_SOURCE_TABLE_ROWS"] == len(ONLY_SOURCE) == 37
    assert c["ONLY_IN_PEER_TABLE_ROWS"] == len(ONLY_PEER) == 23
    assert c["CONTENT_DIFFERENT_ROWS"] == len(CONTENT) == 41
    assert c["BADROWS"] == 37 + 23 + 41
    assert c["GOODROWS"] == ROWS - 37 - 41
    assert (r.source_rows, r.peer_rows) == (ROWS, ROWS - 37 + 23)
    # samples: the smallest keys of each kind, in key order
    assert keys(r.samples["ONLY_IN_SOURCE_TABLE_ROWS"]) == ONLY_SOURCE[:20]
    assert keys(r.samples["ONLY_IN_PEER_TABLE_ROWS"]) == ONLY_PEER[:20]
    assert keys(r.samples["CONTENT_DIFFERENT_ROWS"]) == CONTENT[:20]
    by_key = {s["key"]["id"]: s for s in r.samples["CONTENT_DIFFERENT_ROWS"]}
    assert by_key[12]["columns"][0] == "name" and by_key[12]["peer"]["name"] == "renamed"
    assert "amount" in by_key[11]["columns"] and by_key[11]["source"]["amount"] == 16.5
    # only the buckets whose digests differ were row-compared
    assert 0 < r.buckets_differing <= 101 < r.buckets_compared
    out = r.to_json()
    assert json.loads(json.dumps(out))["BADROWS"] == 101
    for f in ("source_rows", "peer_rows", "duration_s", "report_path", "samples", "buckets_compared",
              "buckets_differing", "duplicate_keys", "null_keys"):
        assert f in out
    page = Path(r.report_path).read_text()
    assert "101 bad rows" in page and "<svg" in page and f"<b>id</b>: {CONTENT[19]}" in page


def test_identical_data_in_other_order_and_layout_is_all_good(spark, planted) -> None:
    r = verify_paths(planted.source, planted.same, ["id"], spark=spark)
    assert r.counters == {"GOODROWS": ROWS, "BADROWS": 0, "ONLY_IN_SOURCE_TABLE_ROWS": 0,
                          "ONLY_IN_PEER_TABLE_ROWS": 0, "CONTENT_DIFFERENT_ROWS": 0}
    assert r.buckets_differing == 0 and r.ok


def test_column_order_does_not_matter(spark, tmp_path: Path) -> None:
    df = base_frame(spark, 2000)
    a = write(df, tmp_path / "a", 1)
    b = write(df.select(*reversed(df.columns)), tmp_path / "b", 2)
    assert verify_paths(a, b, ["id"], spark=spark).ok


def test_row_repaired_before_the_recompare_is_not_bad(spark, tmp_path: Path) -> None:
    """Keys 10 and 20 differ at the first compare; a thread repairs key 10 during the pause."""
    src = tmp_path / "src"
    peer = tmp_path / "peer"
    src.mkdir()
    peer.mkdir()
    rows = {"id": list(range(1000)), "v": [f"v{i}" for i in range(1000)]}
    pq.write_table(pa.table(rows), src / "part-0.parquet")
    good = {"id": [i for i in rows["id"] if i not in (10, 20)], "v": [f"v{i}" for i in range(1000) if i not in (10, 20)]}
    pq.write_table(pa.table(good), peer / "part-0.parquet")
    pq.write_table(pa.table({"id": [10, 20], "v": ["stale", "stale"]}), peer / "part-1.parquet")
    first_done, repaired = threading.Event(), threading.Event()

    def repair() -> None:
        first_done.wait(60)
        pq.write_table(pa.table({"id": [10, 20], "v": ["v10", "still wrong"]}), peer / ".part-1.tmp")
        os.replace(peer / ".part-1.tmp", peer / "part-1.parquet")
        repaired.set()

    def progress(msg: str) -> None:
        if "re-comparing" in msg:  # the pause begins: the thread repairs, then the pause runs out
            first_done.set()
            assert repaired.wait(60)

    t = threading.Thread(target=repair)
    t.start()
    r = verify_paths(f"file://{src}", f"file://{peer}", ["id"], spark=spark, recompare_sleep_s=0.01,
                     progress=progress)
    t.join()
    assert r.counters["CONTENT_DIFFERENT_ROWS"] == 1 and r.counters["BADROWS"] == 1
    assert r.counters["GOODROWS"] == 999
    assert keys(r.samples["CONTENT_DIFFERENT_ROWS"]) == [20]
    assert r.samples["CONTENT_DIFFERENT_ROWS"][0]["peer"] == {"v": "still wrong"}
    assert r.recompare["keys_rechecked"] == 2 and r.recompare["resolved"] == 1


def test_window_excludes_rows_outside_on_both_sides(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    src = base_frame(spark, 10_000)  # ts = T0 + id
    # outside the window [T0+1000, T0+2000): the peer lacks rows and has changed ones
    peer = (src.filter(~F.col("id").isin(5, 500, 2500, 9000))
            .withColumn("name", F.when(F.col("id").isin(6, 3000), F.lit("x")).otherwise(F.col("name")))
            .withColumn("qty", F.when(F.col("id") == 1500, F.lit(-1)).otherwise(F.col("qty"))))
    a, b = write(src, tmp_path / "a", 2), write(peer, tmp_path / "b", 3)
    assert verify_paths(a, b, ["id"], spark=spark).counters["BADROWS"] == 7
    r = verify_paths(a, b, ["id"], spark=spark, ts_column="ts", start_time=str(T0 + 1000),
               end_time="2023-11-14T22:46:40Z")  # = T0 + 2000
    assert (r.source_rows, r.peer_rows) == (1000, 1000)
    assert r.counters["BADROWS"] == 1 and keys(r.samples["CONTENT_DIFFERENT_ROWS"]) == [1500]
    assert r.window["start"] == T0 + 1000 and r.window["end"] == T0 + 2000


def test_duplicate_and_null_keys_are_reported(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    src = base_frame(spark, 1000).withColumn("id", F.when(F.col("id") == 999, F.lit(None)).otherwise(F.col("id")))
    peer = src.unionByName(src.filter(F.col("id") == 42))  # key 42 twice on the peer
    r = verify_paths(write(src, tmp_path / "a", 1), write(peer, tmp_path / "b", 2), ["id"], spark=spark)
    assert r.null_keys == {"source": 1, "peer": 1}
    assert r.duplicate_keys["peer"] == 1 and r.duplicate_keys["source"] == 0
    assert r.duplicate_keys["samples"] == [{"key": {"id": 42}, "source_rows": 1, "peer_rows": 2}]
    # the duplicated key counts once as different; the NULL key matched itself
    assert r.counters["CONTENT_DIFFERENT_ROWS"] == 1 and r.counters["BADROWS"] == 1
    assert r.counters["GOODROWS"] == 999


def test_schema_differences(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    src = base_frame(spark, 500)
    widened = src.withColumn("qty", F.col("qty").cast("bigint")).withColumn("extra", F.lit(None).cast("string"))
    r = verify_paths(write(src, tmp_path / "a", 1), write(widened, tmp_path / "b", 1), ["id"], spark=spark)
    assert r.ok, r.counters  # int -> bigint keeps every value; an all-NULL new column holds nothing
    assert r.schema["type_changes"] == {"qty": {"source": "int", "peer": "bigint"}}
    assert r.schema["only_in_peer"] == ["extra"]
    dropped = src.drop("name")
    r = verify_paths(write(src, tmp_path / "c", 1), write(dropped, tmp_path / "d", 1), ["id"], spark=spark)
    assert r.schema["only_in_source"] == ["name"]
    assert r.counters["CONTENT_DIFFERENT_ROWS"] == 500
    assert r.samples["CONTENT_DIFFERENT_ROWS"][0]["columns"] == ["name"]


def test_empty_datasets(spark, tmp_path: Path) -> None:
    (tmp_path / "e1").mkdir()
    (tmp_path / "e2").mkdir()
    r = verify_paths(f"file://{tmp_path}/e1", f"file://{tmp_path}/e2", ["id"], spark=spark)
    assert r.ok and r.source_rows == r.peer_rows == 0 and r.counters["GOODROWS"] == 0
    some = write(base_frame(spark, 10), tmp_path / "some", 1)
    r = verify_paths(f"file://{tmp_path}/e1", some, ["id"], spark=spark)
    assert r.counters["ONLY_IN_PEER_TABLE_ROWS"] == 10 and r.counters["BADROWS"] == 10
    zero = write(base_frame(spark, 10).limit(0), tmp_path / "zero", 1)  # files with a schema, no rows
    r = verify_paths(some, zero, ["id"], spark=spark)
    assert r.counters["ONLY_IN_SOURCE_TABLE_ROWS"] == 10


@pytest.mark.parametrize("fmt", ["orc", "json", "csv"])
def test_other_formats(spark, tmp_path: Path, fmt: str) -> None:
    from pyspark.sql import functions as F

    df = base_frame(spark, 300).drop("ts")
    writer = df.write.mode("overwrite").option("header", "true")
    getattr(writer, fmt)(str(tmp_path / "a"))
    changed = df.withColumn("name", F.when(F.col("id") == 7, F.lit("z")).otherwise(F.col("name")))
    getattr(changed.repartition(3).write.mode("overwrite").option("header", "true"), fmt)(str(tmp_path / "b"))
    r = verify_paths(f"file://{tmp_path}/a", f"file://{tmp_path}/b", ["id"], format=fmt, spark=spark)
    assert r.counters["CONTENT_DIFFERENT_ROWS"] == 1 and keys(r.samples["CONTENT_DIFFERENT_ROWS"]) in ([7], ["7"])


def test_spark_table_and_jdbc_sources(spark, tmp_path: Path, monkeypatch) -> None:
    from pyspark.sql import functions as F

    df = base_frame(spark, 200).drop("ts")
    df.createOrReplaceTempView("drt_verify_src")
    peer = df.filter(F.col("id") != 3)
    url = f"jdbc:derby:memory:drtverify{os.getpid()};create=true"
    peer.write.mode("overwrite").jdbc(url, "PEER_T", properties={"driver": "org.apache.derby.jdbc.EmbeddedDriver"})
    monkeypatch.setenv("AIRFLOW_CONN_DERBY_PEER", json.dumps(
        {"login": "app", "password": "s3cret-pw", "extra": {"driver": "org.apache.derby.jdbc.EmbeddedDriver"}}))
    r = verify_paths("table:drt_verify_src", url, ["id"], peer_table="PEER_T", peer_conn_id="derby_peer", spark=spark,
               report_path=str(tmp_path / "j.html"))
    assert r.counters["ONLY_IN_SOURCE_TABLE_ROWS"] == 1 and r.counters["GOODROWS"] == 199
    assert "s3cret-pw" not in json.dumps(r.to_json()) and "s3cret-pw" not in (tmp_path / "j.html").read_text()
    with pytest.raises(ConfigError, match="no table"):
        verify_paths("table:drt_verify_src", url, ["id"], spark=spark)


def test_bad_input_is_a_config_error(spark, planted, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as e:
        verify_paths(planted.source, f"file://{tmp_path}/missing", ["id"], spark=spark)
    assert e.value.exit_code == 2
    with pytest.raises(ConfigError, match="no column 'nope'.*id, name"):
        verify_paths(planted.source, planted.peer, ["nope"], spark=spark)
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "data.parquet").write_text("id,name\n1,a\n")
    with pytest.raises(ConfigError, match="cannot be read as parquet"):
        verify_paths(planted.source, f"file://{tmp_path}/csv", ["id"], spark=spark)
    with pytest.raises(ConfigError, match="unknown format"):
        verify_paths(planted.source, planted.peer, ["id"], format="xls", spark=spark)
    with pytest.raises(ConfigError, match="--ts-column"):
        verify_paths(planted.source, planted.peer, ["id"], start_time="2024-01-01", spark=spark)


def test_ledger_row_watermark_and_policy(spark, tmp_path: Path) -> None:
    hot, cold = tmp_path / "hot", tmp_path / "cold"
    df = base_frame(spark, 1000)
    write(df, hot / "orders", 2)
    write(df, cold / "orders", 3)
    cfg = topology_file(tmp_path, ["{name: orders, source: hdfs://hot/orders, target: hdfs://cold/orders, "
                                   "key: [id], ts_column: ts}"])
    topo = parse_topology(cfg.read_text(), str(cfg))
    ledger = Ledger.open(topo.ledger.url)
    before = time.time()
    r = verify_policy(topo, "orders", ledger, spark=spark, access=Access.none())
    assert r.ok and r.counters["GOODROWS"] == 1000
    assert Path(r.report_path).parent == tmp_path / "reports" and Path(r.report_path).exists()
    # the file name and the report id carry one time (the id's: verify-<yyyymmddThhmmss>-<hex>)
    assert Path(r.report_path).name == f"verify-orders-{r.report_id.split('-')[1]}Z.html", (r.report_path, r.report_id)
    row = ledger.verify_reports(name="orders")[0]
    assert row["goodrows"] == 1000 and row["badrows"] == 0 and row["report_path"] == r.report_path
    wm = [w for w in ledger.watermarks("verify") if w["name"] == "orders"]
    assert wm and wm[0]["watermark"] >= before
    # a run that finds differences is recorded but does not move the watermark
    write(df.limit(990), cold / "orders", 1)
    r2 = verify_policy(topo, "orders", ledger, spark=spark, access=Access.none())
    assert r2.counters["ONLY_IN_SOURCE_TABLE_ROWS"] == 10
    assert ledger.verify_reports(name="orders")[0]["badrows"] == 10
    assert [w for w in ledger.watermarks("verify") if w["name"] == "orders"][0]["watermark"] == wm[0]["watermark"]
