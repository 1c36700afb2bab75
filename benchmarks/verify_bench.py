"""verify_bench: `drt verify` (bucketed hash compare) vs datacompy's Spark compare, same data,
same local Spark session, same script.

    .venv/bin/python benchmarks/verify_bench.py                 # 10,000,000 rows x 10 columns
    .venv/bin/python benchmarks/verify_bench.py --rows 2000000  # scaled down

Prints: planted-difference time of both and the ratio (issue 22's goal: datacompy / drt >= 10 at
10M rows), both sets of counters, the identical-data time over the planted-difference time (goal
<= 0.5), and the driver's peak memory (JVM heap pools, and the Python process RSS) per run (goal:
the driver within 2 GiB, the default ``--driver-memory``); under the planted run, the seconds
from each of its progress messages to the next (where its time goes).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def jvm_peak_reset(spark: Any) -> None:
    for pool in spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        pool.resetPeakUsage()


def jvm_peak_mb(spark: Any) -> float:
    total = 0
    for pool in spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        if pool.getType().name() == "HEAP":
            total += pool.getPeakUsage().getUsed()
    return total / 2**20


def make_data(spark: Any, rows: int, diffs: int, base: Path) -> dict[str, Any]:
    from pyspark.sql import functions as F

    id_ = F.col("id")
    df = spark.range(rows).select(
        id_, (id_ * 7 % 1000).alias("c1"), (id_ * 1.5).alias("c2"), F.concat(F.lit("s"), (id_ % 9973).cast("string"))
        .alias("c3"), (id_ % 3 == 0).alias("c4"), F.timestamp_seconds(F.lit(1_700_000_000) + id_).alias("c5"),
        F.sha1(id_.cast("string")).substr(1, 12).alias("c6"), (id_ * 31 % 100003).cast("int").alias("c7"),
        F.when(id_ % 11 == 0, F.lit(None)).otherwise(id_ % 97).alias("c8"), (id_ / 3.0).alias("c9"))
    step = max(rows // diffs, 1)
    third = diffs // 3
    deleted = [i * step for i in range(third)]
    changed = [i * step + 1 for i in range(third)]
    added = list(range(rows, rows + diffs - 2 * third))
    src = base / "source"
    df.repartition(8).write.mode("overwrite").parquet(str(src))
    s = spark.read.parquet(str(src))
    peer = (s.filter(~F.col("id").isin(deleted))
            .withColumn("c3", F.when(F.col("id").isin(changed), F.lit("changed")).otherwise(F.col("c3")))
            .unionByName(df.limit(0).unionByName(
                spark.range(rows, rows + len(added)).select(*[F.lit(None).cast(t).alias(c) if c != "id" else F.col("id")
                                                              for c, t in df.dtypes]))))
    peer.repartition(11).write.mode("overwrite").parquet(str(base / "peer"))
    s.orderBy(F.rand(seed=3)).repartition(6).write.mode("overwrite").parquet(str(base / "same"))
    return {"deleted": len(deleted), "changed": len(changed), "added": len(added)}


def run_drt(spark: Any, base: Path, other: str, phases: list[tuple[str, float]] | None = None
            ) -> tuple[float, dict[str, int], float]:
    """One verification; ``phases``: each progress message with the seconds until the next one
    (where the run's time goes)."""
    from dr_toolkit.access import Access
    from dr_toolkit.verify.api import verify
    from dr_toolkit.verify.request import VerifyRequest

    marks: list[tuple[str, float]] = []
    jvm_peak_reset(spark)
    t = time.perf_counter()
    r = verify(VerifyRequest(source=f"file://{base}/source", target=f"file://{base}/{other}", key=["id"]),
               access=Access.none(), spark=spark, progress=lambda m: marks.append((m, time.perf_counter())))
    end = time.perf_counter()
    if phases is not None:
        phases += [(m, (marks[i + 1][1] if i + 1 < len(marks) else end) - at) for i, (m, at) in enumerate(marks)]
    return end - t, r.counters, jvm_peak_mb(spark)


def run_datacompy(spark: Any, base: Path) -> tuple[float, dict[str, int], float]:
    import datacompy

    jvm_peak_reset(spark)
    t = time.perf_counter()
    cmp = datacompy.SparkCompare(spark, spark.read.parquet(f"{base}/source"), spark.read.parquet(f"{base}/peer"),
                                 join_columns=["id"], cache_intermediates=True)
    counters = {"only_in_base": cmp.rows_only_base.count(), "only_in_compare": cmp.rows_only_compare.count(),
                "mismatched": cmp.rows_both_mismatch.count(), "common": cmp.common_row_count}
    secs = time.perf_counter() - t
    for df in (cmp.base_df, cmp.compare_df):
        df.unpersist()
    spark.catalog.clearCache()
    return secs, counters, jvm_peak_mb(spark)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--diffs", type=int, default=1000, help="planted differences (1/3 each kind)")
    ap.add_argument("--driver-memory", default="2g", help="the driver's -Xmx (goal: within 2 GiB)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from dr_toolkit.spark.session import get_session

    spark = get_session("local[2]", app_name="verify-bench", conf={
        "spark.driver.memory": args.driver_memory, "spark.ui.showConsoleProgress": "false"})
    base = Path(tempfile.mkdtemp(prefix="verify-bench-"))
    try:
        t = time.perf_counter()
        planted = make_data(spark, args.rows, args.diffs, base)
        print(f"data: {args.rows:,} rows x 10 columns of Parquet, planted {planted} "
              f"(written in {time.perf_counter() - t:.0f} s)")
        run_drt(spark, base, "same")  # warm-up (JIT, file cache) so neither side pays it in the timings
        phases: list[tuple[str, float]] = []
        d_time, d_counters, d_mem = run_drt(spark, base, "peer", phases)
        print(f"drt verify (planted):    {d_time:8.1f} s  {d_counters}  JVM heap peak {d_mem:,.0f} MB")
        for message, secs in phases:
            print(f"    {secs:6.1f} s  {message}")
        c_time, c_counters, c_mem = run_datacompy(spark, base)
        print(f"datacompy SparkCompare:  {c_time:8.1f} s  {c_counters}  JVM heap peak {c_mem:,.0f} MB")
        i_time, i_counters, i_mem = run_drt(spark, base, "same")
        print(f"drt verify (identical):  {i_time:8.1f} s  {i_counters}  JVM heap peak {i_mem:,.0f} MB")
        print(f"RATIO datacompy/drt (planted) = {c_time / d_time:.2f}x  (goal >= 10 at 10,000,000 rows)")
        print(f"RATIO identical/planted (drt) = {i_time / d_time:.2f}  (goal <= 0.5)")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"driver peak: Python RSS {rss:,.0f} MB; JVM heap peak (drt) {max(d_mem, i_mem):,.0f} MB "
              f"of -Xmx {args.driver_memory}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
