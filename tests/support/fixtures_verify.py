"""Fixtures for verification tests: real Parquet datasets of 100,000 rows written by the shared
local Spark session, with differences of every kind planted at known keys."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROWS = 100_000
ONLY_SOURCE = sorted({7, 19, 4_321, 50_000, 99_999} | set(range(60_000, 60_032)))  # 37 keys gone from the peer
ONLY_PEER = sorted(range(200_000, 200_023))  # 23 keys only the peer has
CONTENT = sorted({3, 11, 12, 77_777} | set(range(80_000, 80_037)))  # 41 keys whose content differs
T0 = 1_700_000_000  # 2023-11-14T22:13:20Z


def base_frame(spark: Any, n: int = ROWS, start: int = 0) -> Any:
    """``id, name, amount, qty, ts, note``: deterministic content, some NULL notes."""
    from pyspark.sql import functions as F

    return spark.range(start, start + n).select(
        F.col("id"),
        F.concat(F.lit("name-"), F.col("id").cast("string")).alias("name"),
        (F.col("id") * 1.5).alias("amount"),
        (F.col("id") % 1000).cast("int").alias("qty"),
        F.timestamp_seconds(F.lit(T0) + F.col("id")).alias("ts"),
        F.when(F.col("id") % 10 == 0, F.lit(None)).otherwise(F.concat(F.lit("n"), (F.col("id") % 97).cast("string")))
        .alias("note"),
    )


def plant(source: Any, spark: Any) -> Any:
    """The peer: ONLY_SOURCE rows deleted, ONLY_PEER rows added, CONTENT rows changed
    (a number, a string, a NULL that became a value and a value that became NULL)."""
    from pyspark.sql import functions as F

    peer = source.filter(~F.col("id").isin(ONLY_SOURCE))
    changed = F.col("id").isin(CONTENT)
    peer = peer.select(
        "id",
        F.when(changed & (F.col("id") % 2 == 0), F.lit("renamed")).otherwise(F.col("name")).alias("name"),
        F.when(changed & (F.col("id") % 2 == 1), F.col("amount") + 0.25).otherwise(F.col("amount")).alias("amount"),
        "qty", "ts",
        F.when(changed & F.col("note").isNull(), F.lit("was null"))
        .when(changed & (F.col("id") % 3 == 0), F.lit(None))
        .otherwise(F.col("note")).alias("note"),
    )
    return peer.unionByName(base_frame(spark, len(ONLY_PEER), ONLY_PEER[0]))


def write(df: Any, path: Path, parts: int, shuffle: bool = False) -> str:
    from pyspark.sql import functions as F

    if shuffle:
        df = df.orderBy(F.rand(seed=7))
    df.repartition(parts).write.mode("overwrite").parquet(str(path))
    return f"file://{path}"


def topology_file(base: Path, policies: list[str]) -> Path:
    """A topology with clusters ``hot``/``cold`` under ``base`` (local roots), the given verify
    policy lines (YAML flow mappings), a SQLite ledger and ``reports`` as the reports dir."""
    cfg = base / "drt.yaml"
    lines = "".join(f"    - {p}\n" for p in policies)
    cfg.write_text(f"""version: 1
clusters:
  hot: {{role: hot, local_root: {base / "hot"}}}
  cold: {{role: cold, local_root: {base / "cold"}}}
policies:
  verify:
{lines}ledger: {{url: 'sqlite:///{base}/ledger.db'}}
failover: {{reports_dir: reports}}
""")
    return cfg


@dataclass
class Planted:
    source: str
    peer: str
    same: str  # the source's rows again, in another order and file layout


@pytest.fixture(scope="session")
def planted(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Planted:
    """Source (100,000 rows, 3 files), its planted-difference peer (5 files, shuffled), and
    an identical copy in another order and layout (7 files, shuffled)."""
    d = tmp_path_factory.mktemp("verify-planted")
    src = base_frame(spark)
    return Planted(source=write(src, d / "source", 3), peer=write(plant(src, spark), d / "peer", 5, True),
                   same=write(src, d / "same", 7, True))


def verify_paths(source: str, target: str, key: list[str] | None = None, **kw: Any) -> Any:
    """``verify()`` of the request with these fields (:class:`VerifyRequest`'s names: ``format``,
    ``ts_column``, ``abs_tol``, …), credentials from the environment; ``spark``, ``ledger``,
    ``topology`` and ``progress`` go to ``verify()`` itself."""
    from dr_toolkit.access import Access
    from dr_toolkit.verify.api import verify
    from dr_toolkit.verify.request import VerifyRequest

    where = {k: kw.pop(k) for k in ("spark", "ledger", "topology", "progress") if k in kw}
    return verify(VerifyRequest(source=source, target=target, key=key or [], **kw), access=Access.from_env(), **where)
