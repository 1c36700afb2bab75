"""Benchmark: the ledger over a simulated year, pruned by `Ledger.prune` (`drt ledger prune`).

The year is the retention test's (tests/integration/test_ledger_retention.py, ``simulate_year``)
at full scale: a policy copied every 5 minutes (105,120 runs and as many manifests rows), a policy
that stopped after 100 days, ad-hoc copies, runs stuck ``running``; Kafka checkpoints every 15
minutes of ``--groups`` live groups × ``--partitions`` partitions and one group gone after 100 days;
a gate check every minute (525,600); daily verification reports and Kafka/HBase audit rows;
failover and re-protect runs with their audit. Written in bulk (COPY on PostgreSQL), then
pruned with the default retention (runs and manifests 90 days, checkpoints 14 days beyond the
newest 10 per group, verify reports 365 days, gate checks 90 days, audit 365 days).

Prints, per table, the rows before and after against the bound the retention sets (the goal: the
ledger bounded, its size after a prune set by the retention window, not by the history), the
database's size before, after the prune and after VACUUM (a DELETE frees pages for reuse; VACUUM
gives them back to the file system), the prune's and the dry run's wall time, and the largest
number of rows and the longest time any one of its transactions held (the lock a copy or a gate
check writing meanwhile may wait for).

    .venv/bin/python benchmarks/ledger_retention_bench.py                     # SQLite, a year
    .venv/bin/python benchmarks/ledger_retention_bench.py --backend postgresql  # a local PostgreSQL 15
    .venv/bin/python benchmarks/ledger_retention_bench.py --days 730 --batch 5000
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dr_toolkit.ledger import Ledger
from dr_toolkit.ledger.retention import TABLES
from dr_toolkit.topology import Ledger as LedgerSettings
from tests.support import servers

REPO = Path(__file__).resolve().parents[1]
DAY = 86400.0
NOW = 1_790_000_000.0


def _simulation() -> Any:
    """The retention test's module (its simulated year is the one measured here)."""
    path = REPO / "tests" / "integration" / "test_ledger_retention.py"
    spec = importlib.util.spec_from_file_location("ledger_retention_sim", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _size(ledger: Ledger, db_file: Path | None) -> int:
    if db_file is not None:
        return sum(p.stat().st_size for p in db_file.parent.glob(db_file.name + "*"))
    with ledger.engine.connect() as conn:
        from sqlalchemy import text

        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar() or 0)


def _vacuum(ledger: Ledger, db_file: Path | None) -> None:
    from sqlalchemy import text

    with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if db_file is not None:
            conn.execute(text("VACUUM"))
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        else:
            conn.execute(text("VACUUM FULL"))


def _watch_transactions(ledger: Ledger) -> list[tuple[int, float]]:
    """(rows deleted, seconds held) of every transaction from now on."""
    from sqlalchemy import event

    out: list[tuple[int, float]] = []
    cur = {"rows": 0, "t0": 0.0}

    def begin(conn: Any) -> None:
        cur["rows"], cur["t0"] = 0, time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            cur["rows"] += max(0, cursor.rowcount)

    def commit(conn: Any) -> None:
        out.append((int(cur["rows"]), time.perf_counter() - cur["t0"]))

    event.listen(ledger.engine, "begin", begin)
    event.listen(ledger.engine, "after_cursor_execute", after)
    event.listen(ledger.engine, "commit", commit)
    return out


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--groups", type=int, default=3, help="live Kafka groups (each --partitions partitions)")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--batch", type=int, default=None, help="rows per transaction (default: the retention's)")
    args = ap.parse_args()

    sim_mod = _simulation()
    sim_mod.GROUPS = tuple(f"group-{i:03d}" for i in range(args.groups))
    settings = LedgerSettings.Retention()
    batch = args.batch or settings.batch
    work = Path(tempfile.mkdtemp(prefix="drt-bench-ledger-"))
    work.chmod(0o755)
    pg = None
    db_file: Path | None = None
    try:
        if args.backend == "sqlite":
            db_file = work / "ledger.db"
            url = f"sqlite:///{db_file}"
        else:
            (work / "pg").mkdir()
            (work / "pg").chmod(0o755)
            pg = servers.Postgres(work / "pg")
            pg.start()
            url = pg.create_database("ledger_bench")
        ledger = Ledger.open(url, from_env=False)
        t = time.perf_counter()
        sim = sim_mod.simulate_year(ledger, now=NOW, days=args.days, run_every_s=300.0, checkpoint_every_s=900.0,
                                    gate_every_s=60.0, partitions=args.partitions)
        written = ledger.table_rows()
        print(f"simulated {args.days} days on {args.backend} in {time.perf_counter() - t:.1f}s: "
              f"{sum(written.values()):,} rows ({', '.join(f'{k} {v:,}' for k, v in written.items())})")
        assert written == sim.count()
        size_before = _size(ledger, db_file)

        t = time.perf_counter()
        dry = ledger.prune(settings, now=NOW, dry_run=True)
        dry_s = time.perf_counter() - t
        txs = _watch_transactions(ledger)
        t = time.perf_counter()
        deleted = ledger.prune(settings, now=NOW, batch=batch)
        prune_s = time.perf_counter() - t
        after = ledger.table_rows()
        size_after = _size(ledger, db_file)
        t = time.perf_counter()
        _vacuum(ledger, db_file)
        vacuum_s = time.perf_counter() - t
        size_vacuumed = _size(ledger, db_file)
        assert deleted == dry, (deleted, dry)

        # the bound each table's retention sets, for this simulation's rates
        live_groups = args.groups * args.partitions
        bound = {
            "replication_runs": int(settings.runs_days * 288) + 20,  # type: ignore[operator]
            "manifests": int(settings.runs_days * 288) + 20,  # type: ignore[operator]
            "kafka_checkpoints": int(settings.checkpoints_days * 96 + 1) * live_groups  # type: ignore[operator]
            + settings.checkpoints_keep_last * args.partitions,
            "verify_reports": int(min(args.days, settings.verify_days or args.days) * 2) + 20,
            "gate_checks": int(settings.gate_checks_days * 1440) + 1,  # type: ignore[operator]
            "audit_events": int(min(args.days, settings.audit_days or args.days) * 2) + 50,
            "failover_runs": written["failover_runs"],
        }
        print(f"\n{'table':<18} {'before':>10} {'deleted':>10} {'after':>9} {'bound (retention)':>18}  met?")
        for tname in TABLES:
            ok = after[tname] <= bound[tname]
            print(f"{tname:<18} {written[tname]:>10,} {deleted[tname]:>10,} {after[tname]:>9,} "
                  f"{bound[tname]:>18,}  {'yes' if ok else 'NO'}")
        total_ok = all(after[t] <= bound[t] for t in TABLES)
        big = max(txs, key=lambda x: x[0]) if txs else (0, 0.0)
        longest = max((s for _, s in txs), default=0.0)
        longest_delete = max((s for n, s in txs if n), default=0.0)
        print(f"\nsize: {_mib(size_before)} before, {_mib(size_after)} after the prune (pages freed for reuse), "
              f"{_mib(size_vacuumed)} after VACUUM{' FULL' if db_file is None else ''} ({vacuum_s:.1f}s)")
        print(f"prune: {prune_s:.1f}s for {sum(deleted.values()):,} rows in {len(txs)} transactions "
              f"({sum(deleted.values()) / max(prune_s, 1e-9):,.0f} rows/s); dry run {dry_s:.1f}s")
        print(f"largest transaction: {big[0]:,} rows (batch {batch:,}); longest deleting transaction "
              f"{longest_delete * 1000:.0f} ms (the longest a writer waits on SQLite; PostgreSQL locks the rows "
              f"only); longest of any, reads included, {longest * 1000:.0f} ms")
        print(f"goal — the ledger bounded by its retention (every table at or under its bound): "
              f"{'met' if total_ok else 'NOT met'}; no transaction over the batch: "
              f"{'met' if big[0] <= batch else 'NOT met'}; a year pruned in < 60 s: "
              f"{'met' if prune_s < 60 else 'NOT met'}")
        ledger.engine.dispose()
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
