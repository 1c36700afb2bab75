"""Sample "hot" data for the embedded default: a Parquet dataset, a tree of files with a
growing log, and Kafka topics with a consumer group part-way through."""

from __future__ import annotations

import random
import time
from pathlib import Path

ORDERS_ROWS = 20_000
SEED_AGE_S = 600  # the seeded data is stamped relative to now: its newest record ten minutes old


def seed_base_ms(rows: int = 0) -> int:
    """Now minus ``SEED_AGE_S`` and one second per row (the oldest row first), in ms."""
    return int((time.time() - SEED_AGE_S - rows) * 1000)


def seed_files(hot_root: Path, *, rows: int = ORDERS_ROWS, seed: int = 7) -> dict[str, int]:
    """Write the hot tree: warehouse/orders (Parquet, 4 files), warehouse/customers (CSV),
    logs/app.log (grows later), conf/ (metadata that names the hot cluster)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    base = seed_base_ms(rows)
    orders = hot_root / "warehouse" / "orders"
    orders.mkdir(parents=True, exist_ok=True)
    per_file = rows // 4
    for f in range(4):
        ids = list(range(f * per_file, (f + 1) * per_file))
        table = pa.table({
            "order_id": pa.array(ids, pa.int64()),
            "customer": pa.array([f"c{rng.randrange(500):04d}" for _ in ids]),
            "amount": pa.array([round(rng.uniform(1, 500), 2) for _ in ids]),
            "status": pa.array([rng.choice(["new", "paid", "shipped"]) for _ in ids]),
            "updated_at": pa.array([base + i * 1000 for i in ids], pa.timestamp("ms", tz="UTC")),
        })
        pq.write_table(table, orders / f"part-{f:05d}.parquet")
    customers = hot_root / "warehouse" / "customers"
    customers.mkdir(parents=True, exist_ok=True)
    (customers / "customers.csv").write_text(
        "customer,name,country\n" + "".join(f"c{i:04d},Customer {i},{rng.choice(['DE', 'FR', 'US'])}\n"
                                             for i in range(500)))
    logs = hot_root / "warehouse" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "app.log").write_text("".join(f"{i:06d} boot step {i}\n" for i in range(2000)))
    conf = hot_root / "warehouse" / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "hive-site.xml").write_text(
        "<configuration>\n  <property><name>hive.metastore.warehouse.dir</name>"
        "<value>hdfs://hot/warehouse</value></property>\n</configuration>\n")
    files = [p for p in hot_root.rglob("*") if p.is_file()]
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files), "orders_rows": rows}


def grow_log(hot_root: Path, lines: int = 500) -> int:
    """Append to the growing log (an append-only file: the next copy ships only the tail)."""
    log = hot_root / "warehouse" / "logs" / "app.log"
    start = sum(1 for _ in log.open())
    with log.open("a") as f:
        f.writelines(f"{i:06d} request handled at {time.time():.3f}\n" for i in range(start, start + lines))
    return log.stat().st_size


def seed_kafka(bootstrap: str, topics: dict[str, int], *, records_per_partition: int = 60,
               same_ts_run: int = 5, timeout_s: float = 10.0, base_ts_ms: int | None = None,
               key_prefix: str = "") -> int:
    """Produce records with explicit CreateTime timestamps, one per request; every
    ``same_ts_run`` consecutive records share a timestamp (Kafka timestamps are not unique)."""
    from confluent_kafka import Producer

    from drt_demo.mirror import create_topics

    if base_ts_ms is None:
        base_ts_ms = seed_base_ms(records_per_partition)
    create_topics(bootstrap, topics, timeout_s)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    n = 0
    for topic, parts in topics.items():
        for part in range(parts):
            for i in range(records_per_partition):
                ts = base_ts_ms + (i // same_ts_run) * 1000
                p.produce(topic, key=f"{key_prefix}{topic}-{part}-{i}".encode(), value=f"payload {i}".encode(),
                          partition=part, timestamp=ts, headers=[("seq", str(i).encode())])
                if p.flush(timeout_s) != 0:
                    raise RuntimeError(f"produce to {bootstrap} {topic}[{part}] timed out")
                n += 1
    return n


def consume_part_way(bootstrap: str, group: str, topics: dict[str, int], fraction: float = 0.6,
                     records_per_partition: int = 60, timeout_s: float = 10.0) -> dict[str, int]:
    """Commit the group at ``fraction`` of each partition (as a consumer part-way through would)."""
    from dr_toolkit.kafka.client import KafkaCluster

    # Vary the position per partition so some land inside a run of equal timestamps.
    offsets = {(topic, part): int(records_per_partition * fraction) + part
               for topic, parts in topics.items() for part in range(parts)}
    # the library's commit: one request, retried while a new broker's group coordinator loads
    with KafkaCluster(bootstrap, credentials=None, timeout_s=6 * timeout_s, role="hot") as k:
        errors = {tp: e for tp, e in k.commit(group, offsets).items() if e}
    if errors:
        raise RuntimeError(f"commit of group {group} on {bootstrap} failed: {errors}")
    return {f"{t}[{p}]": o for (t, p), o in offsets.items()}
