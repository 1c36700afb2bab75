"""Ledger retention (issue 42): `Ledger.prune` / `drt ledger prune` over a simulated year, on SQLite
and on the real PostgreSQL 15 the suite starts.

The year (:func:`simulate_year`, also the benchmark's: benchmarks/ledger_retention_bench.py) is
written straight into the tables in bulk: one policy copied every 5 minutes all year (105,120
runs and as many manifests rows, failed runs and runs that left a file open among them, a run
still running at the end), one policy that stopped 100 days in (its last completed run is past
the cutoff), ad-hoc `drt distcp` runs, a run stuck ``running`` for 200 days; Kafka checkpoints of
3 live groups × 2 partitions and one group gone after 100 days; gate checks; verification reports;
failover and re-protect runs with their audit; Kafka and HBase audit rows. Scaled to run in
well under 60 s per backend: checkpoints every 60 minutes instead of 15 and gate checks every
15 minutes instead of every minute (``SCALE``; the benchmark runs the full 15-minute / 1-minute
year).

After the prune: the rows left are exactly those the retention keeps (an oracle computed from the
generated rows), rows older than the cutoffs are only protected ones, the protected rows are all
there, and the gate's readers — ``copy.signals.last_completed`` and the manifest chain it walks,
``Ledger.last_manifest``, ``Ledger.latest_checkpoints``, the verify gate's reports, ``status()`` —
answer the same as before. Every transaction of the prune deletes at most ``batch`` rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.ledger.retention import DECISION_COMPONENTS, TABLES, completed_run
from dr_toolkit.topology import Ledger as LedgerSettings

pytestmark = pytest.mark.integration

DAY = 86400.0
NOW = 1_790_000_000.0  # the simulated year's end
#: the test's scale: (checkpoint every s, gate check every s); the benchmark's year: (900, 60)
SCALE = {"checkpoint_every_s": 3600.0, "gate_every_s": 900.0}
LIVE = ("warehouse", "hdfs://hot/warehouse", "hdfs://cold/warehouse")
STALE = ("logs", "hdfs://hot/logs", "hdfs://cold/logs")
ADHOC = (None, "file:///data/adhoc", "hdfs://cold/adhoc")
STUCK = ("raw", "hdfs://hot/raw", "hdfs://cold/raw")
ORPHAN = (None, "file:///data/orphan", "hdfs://cold/orphan")
GROUPS = ("orders", "payments", "audit-log")
GONE_GROUP = "legacy"


@dataclass
class Sim:
    """The rows written, per table (the oracle's input)."""

    now: float
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    def count(self) -> dict[str, int]:
        return {t: len(self.rows.get(t, [])) for t in TABLES}


def _ok(files_open: int = 0, proven: bool = True) -> str:
    return json.dumps({"files_open": files_open, "listing_proven": proven, "proof_basis": "checksum"})


def simulate_year(ledger: Ledger, *, now: float = NOW, days: int = 365, run_every_s: float = 300.0,
                  checkpoint_every_s: float = 900.0, gate_every_s: float = 60.0, partitions: int = 2,
                  chunk: int = 20_000) -> Sim:
    """Write a year of ledger rows ending at ``now`` in bulk (see the module doc)."""
    sim = Sim(now)
    start = now - days * DAY
    r = sim.rows

    def copy_pair(key: tuple[str | None, str, str], t0: float, t1: float, every: float, tag: str, *,
                  end_incomplete: bool = False) -> None:
        policy, source, target = key
        base: str | None = None
        i = 0
        t = t0
        while t < t1:
            run_id, mid = f"copy-{tag}-{i:07d}", f"m-{tag}-{i:07d}"
            manifest: str | None = mid
            status, detail = "succeeded", _ok()
            if i % 37 == 36:
                status, detail, manifest = "failed", json.dumps({"failures": 1}), None
            elif i % 53 == 52:
                detail = _ok(files_open=1)  # succeeded with a file open: not completed
            if manifest:
                r["manifests"].append({
                    "manifest_id": mid, "policy": policy, "source": source, "target": target,
                    "location": f"file:///state/{mid}.jsonl", "base_manifest_id": base, "source_snapshot": None,
                    "entries": 1000 + i, "total_bytes": 10**6 + i, "content_digest": f"d{i}",
                    "source_time": t, "created_at": t + 60})
            r["replication_runs"].append({
                "run_id": run_id, "policy": policy, "source": source, "target": target, "mode": "fast-forward",
                "mode_reason": None, "status": status, "base_manifest_id": base, "manifest_id": manifest,
                "started_at": t, "finished_at": t + 90, "files_total": 1000, "files_copied": 3,
                "bytes_copied": 3000, "files_skipped": 0, "files_deleted": 0, "files_failed": int(status == "failed"),
                "detail": detail})
            if manifest:
                base = manifest
            i += 1
            t += every
        if end_incomplete:  # the newest runs did not complete: a file left open, then one still running
            last = r["replication_runs"][-1]
            last["detail"] = _ok(files_open=2)
            r["replication_runs"].append({**last, "run_id": f"copy-{tag}-running", "status": "running",
                                          "manifest_id": None, "base_manifest_id": base, "started_at": t,
                                          "finished_at": None, "detail": None})

    copy_pair(LIVE, start, now - 200, run_every_s, "wh", end_incomplete=True)
    # a run of the live policy whose process died 200 days ago: still 'running', on its base manifest
    wh_base = next(m for m in r["manifests"] if m["created_at"] >= now - 201 * DAY)["manifest_id"]
    r["replication_runs"].append({**r["replication_runs"][-1], "run_id": "copy-wh-stuck", "status": "running",
                                  "manifest_id": None, "base_manifest_id": wh_base, "started_at": now - 200 * DAY,
                                  "finished_at": None, "detail": None})
    copy_pair(STALE, start, start + 100 * DAY, run_every_s, "logs", end_incomplete=False)
    # the stale policy's last two runs failed: its latest completed run is older than its newest
    for row in r["replication_runs"][-2:]:
        if row["manifest_id"]:
            r["manifests"] = [m for m in r["manifests"] if m["manifest_id"] != row["manifest_id"]]
        row.update(status="failed", manifest_id=None)
    copy_pair(ADHOC, start + 10 * DAY, start + 40 * DAY, DAY, "adhoc")
    # a run stuck 'running' since 200 days ago, on a base manifest written the day before
    copy_pair(STUCK, start, now - 201 * DAY, DAY, "raw")
    stuck_base = r["manifests"][-1]["manifest_id"]
    r["replication_runs"].append({**r["replication_runs"][-1], "run_id": "copy-raw-stuck", "status": "running",
                                  "manifest_id": None, "base_manifest_id": stuck_base,
                                  "started_at": now - 200 * DAY, "finished_at": None, "detail": None})

    # manifests no run row names (runs recorded by an older ledger, since restored): the newest is
    # still the next run's base
    for i in range(5):
        mid = f"m-orphan-{i}"
        r["manifests"].append({"manifest_id": mid, "policy": None, "source": ORPHAN[1], "target": ORPHAN[2],
                               "location": f"file:///state/{mid}.jsonl", "base_manifest_id": None,
                               "source_snapshot": None, "entries": 1, "total_bytes": 1, "content_digest": "d",
                               "source_time": now - (200 - i) * DAY, "created_at": now - (200 - i) * DAY})

    def checkpoints(group: str, t1: float) -> None:
        t, i = start, 0
        while t < t1:
            for p in range(partitions):
                r["kafka_checkpoints"].append({
                    "checkpoint_id": f"ck-{i:06d}", "group_id": group, "topic": f"{group}-events",
                    "partition_id": p, "committed_offset": 1000 * i + p, "record_timestamp": int(t * 1000),
                    "timestamp_type": "create", "fingerprint": f"f{i}", "log_start_offset": 0,
                    "high_watermark": 1000 * i + 10, "taken_at": t})
            t += checkpoint_every_s
            i += 1

    for g in GROUPS:
        checkpoints(g, now)
    checkpoints(GONE_GROUP, start + 100 * DAY)

    t, i = start, 0
    while t < now:
        r["gate_checks"].append({
            "check_id": f"gate-{i:07d}", "checked_at": t, "verdict": "GO" if i % 11 else "NO_GO",
            "recovery_point": t - 240, "rpo_s": 240.0, "limiting": "hdfs:warehouse",
            "components": json.dumps({"hdfs:warehouse": {"component": "hdfs", "lag_s": 240}}),
            "reasons": "[]", "source": "dag:dr_rpo_watch.check", "actor": "airflow"})
        t += gate_every_s
        i += 1

    counters = {"goodrows": 100, "badrows": 0, "only_in_source_table_rows": 0, "only_in_peer_table_rows": 0,
                "content_different_rows": 0, "source_rows": 100, "peer_rows": 100}
    for d in range(days):
        t = start + d * DAY
        for name, src in (("sales", "hdfs://hot/sales"), ("users", "hbase://hot/users")):
            r["verify_reports"].append({"report_id": f"v-{name}-{d:04d}", "name": name, "source": src,
                                        "target": src.replace("hot", "cold"), **counters, "started_at": t,
                                        "finished_at": t + 600, "report_path": None, "detail": "{}"})
        if d % 7 == 0 and d < 60:  # ad-hoc verifications early in the year only
            r["verify_reports"].append({"report_id": f"v-adhoc-{d:04d}", "name": None, "source": "file:///adhoc",
                                        "target": "file:///adhoc-copy", **counters, "started_at": t,
                                        "finished_at": t + 60, "report_path": None, "detail": "{}"})
        r["audit_events"].append(_audit(f"evt-kafka-{d:04d}", None, "kafka", "apply_offsets", t + 100))
        r["audit_events"].append(_audit(f"evt-hbase-{d:04d}", None, "hbase", "peers.enable", t + 200))

    for n, (day, component) in enumerate([(20, "failover"), (150, "failover"), (160, "reprotect"), (300, "failover")]):
        rid = f"{component}-run-{n}"
        t = start + day * DAY
        r["failover_runs"].append({"run_id": rid, "actor": "ops", "reason": "drill", "execute": 1,
                                   "status": "succeeded", "started_at": t, "finished_at": t + 900, "detail": None})
        for k, action in enumerate(("run", "gate", "fence", "approval", "promote")):
            r["audit_events"].append(_audit(f"evt-{rid}-{k}", rid, component, action, t + k))
        r["audit_events"].append(_audit(f"evt-{rid}-kafka", rid, "kafka", "apply_offsets", t + 10))
    for day, component in ((30, "direction"), (31, "switchover")):
        r["audit_events"].append(_audit(f"evt-{component}", None, component, "set", start + day * DAY))

    _bulk(ledger, sim.rows, chunk)
    return sim


def _audit(event_id: str, run_id: str | None, component: str, action: str, at: float) -> dict[str, Any]:
    return {"event_id": event_id, "run_id": run_id, "component": component, "action": action, "target": None,
            "actor": "ops", "dry_run": 0, "status": "done", "before_state": None, "after_state": None,
            "message": None, "at": at}


def _bulk(ledger: Ledger, rows: dict[str, list[dict[str, Any]]], chunk: int) -> None:
    """Insert the rows: PostgreSQL's COPY (the simulation is setup, not what is measured), else
    executemany in one transaction."""
    from sqlalchemy import column, insert, table

    if ledger.engine.dialect.name == "postgresql":
        import csv
        import io

        raw = ledger.engine.raw_connection()
        try:
            cur = raw.cursor()
            for name, items in rows.items():
                if not items:
                    continue
                cols = list(items[0])
                buf = io.StringIO()
                w = csv.writer(buf)
                for it in items:
                    w.writerow(["" if it[c] is None else it[c] for c in cols])
                buf.seek(0)
                cur.copy_expert(f"COPY {name} ({', '.join(cols)}) FROM STDIN WITH (FORMAT csv)", buf)
            raw.commit()
        finally:
            raw.close()
        return
    with ledger.engine.begin() as conn:
        for name, items in rows.items():
            if not items:
                continue
            stmt = insert(table(name, *(column(c) for c in items[0])))
            for i in range(0, len(items), chunk):
                conn.execute(stmt, items[i:i + chunk])


# --- the oracle: what the retention keeps, computed from the rows written ---------------------------

def expected_kept(sim: Sim, s: LedgerSettings.Retention) -> dict[str, set[Any]]:
    from dr_toolkit.copy.signals import _is_completed

    now, rows = sim.now, sim.rows
    cut_runs = now - s.runs_days * DAY  # type: ignore[operator]
    runs_of: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for x in rows["replication_runs"]:
        runs_of[(x["policy"], x["source"], x["target"])].append(x)
    floors, kept_runs = {}, set()
    for key, rs in runs_of.items():
        done = [x for x in rs if _is_completed({**x, "detail": json.loads(x["detail"] or "null")})]
        anchor = max(x["started_at"] for x in done) if done else max(x["started_at"] for x in rs)
        floors[key] = min(cut_runs, anchor)
        kept_runs |= {x["run_id"] for x in rs if x["started_at"] >= floors[key] or x["status"] == "running"}
    held = {m for x in rows["replication_runs"] if x["run_id"] in kept_runs
            for m in (x["manifest_id"], x["base_manifest_id"]) if m}
    newest: dict[tuple[str, str], float] = {}
    for m in rows["manifests"]:
        pair = (m["source"], m["target"])
        newest[pair] = max(newest.get(pair, m["created_at"]), m["created_at"])
    kept_manifests = {m["manifest_id"] for m in rows["manifests"]
                      if m["manifest_id"] in held
                      or m["created_at"] >= min(cut_runs, newest[(m["source"], m["target"])],
                                                floors.get((m["policy"], m["source"], m["target"]), cut_runs))}
    cut_ck = now - s.checkpoints_days * DAY  # type: ignore[operator]
    cps: dict[str, dict[str, float]] = defaultdict(dict)
    for c in rows["kafka_checkpoints"]:
        cps[c["group_id"]][c["checkpoint_id"]] = max(cps[c["group_id"]].get(c["checkpoint_id"], 0.0), c["taken_at"])
    kept_ck = set()
    for g, by_id in cps.items():
        ranked = sorted(by_id.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        kept_ck |= {(g, cid) for n, (cid, t) in enumerate(ranked) if n < s.checkpoints_keep_last or t >= cut_ck}
    cut_v = now - s.verify_days * DAY  # type: ignore[operator]
    by_ds: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for v in rows["verify_reports"]:
        by_ds[("name", v["name"]) if v["name"] else ("source", v["source"])].append(v)
    kept_v = set()
    for vs in by_ds.values():
        vs = sorted(vs, key=lambda v: (v["finished_at"], v["report_id"]), reverse=True)
        kept_v |= {v["report_id"] for n, v in enumerate(vs) if n < s.verify_keep_last or v["finished_at"] >= cut_v}
    cut_g = now - s.gate_checks_days * DAY  # type: ignore[operator]
    newest_gate = max(rows["gate_checks"], key=lambda g: (g["checked_at"], g["check_id"]))["check_id"]
    kept_g = {g["check_id"] for g in rows["gate_checks"] if g["checked_at"] >= cut_g or g["check_id"] == newest_gate}
    cut_a = now - s.audit_days * DAY  # type: ignore[operator]
    fruns = {f["run_id"] for f in rows["failover_runs"]}
    kept_a = {a["event_id"] for a in rows["audit_events"]
              if a["at"] >= cut_a or a["component"] in DECISION_COMPONENTS or a["run_id"] in fruns}
    return {"replication_runs": kept_runs, "manifests": kept_manifests, "kafka_checkpoints": kept_ck,
            "verify_reports": kept_v, "gate_checks": kept_g, "audit_events": kept_a, "failover_runs": fruns}


def actual(ledger: Ledger) -> dict[str, set[Any]]:
    q = ledger._query
    return {"replication_runs": {r["run_id"] for r in q("SELECT run_id FROM replication_runs")},
            "manifests": {r["manifest_id"] for r in q("SELECT manifest_id FROM manifests")},
            "kafka_checkpoints": {(r["group_id"], r["checkpoint_id"])
                                  for r in q("SELECT DISTINCT group_id, checkpoint_id FROM kafka_checkpoints")},
            "verify_reports": {r["report_id"] for r in q("SELECT report_id FROM verify_reports")},
            "gate_checks": {r["check_id"] for r in q("SELECT check_id FROM gate_checks")},
            "audit_events": {r["event_id"] for r in q("SELECT event_id FROM audit_events")},
            "failover_runs": {r["run_id"] for r in q("SELECT run_id FROM failover_runs")}}


# --- what the gate, the next copy and `drt status` read ---------------------------------------------

def readers(ledger: Ledger) -> dict[str, Any]:
    from dr_toolkit.copy.signals import _descends, _runs, last_completed

    out: dict[str, Any] = {}
    for policy, source, target in (LIVE, STALE, STUCK):
        done = last_completed(ledger, policy, target)
        newest = ledger.last_manifest(source=source, target=target)
        runs = _runs(ledger, policy, target)
        chain = _descends(ledger, newest["manifest_id"], done["manifest_id"],
                          {x["manifest_id"]: x for x in runs if x.get("manifest_id")}) if done and newest else "-"
        out[policy] = {"last_completed": done, "manifest": ledger.manifest(done["manifest_id"]) if done else None,
                       "last_manifest": newest, "chain": chain, "newest_run": runs[0] if runs else None}
    out["adhoc_last_manifest"] = ledger.last_manifest(source=ADHOC[1], target=ADHOC[2])
    out["orphan_last_manifest"] = ledger.last_manifest(source=ORPHAN[1], target=ORPHAN[2])
    out["stuck_runs"] = ledger._query("SELECT * FROM replication_runs WHERE status = 'running' ORDER BY run_id")
    out["stuck_bases"] = [ledger.manifest(x["base_manifest_id"]) for x in out["stuck_runs"]]
    out["latest_checkpoints"] = ledger.latest_checkpoints([*GROUPS, GONE_GROUP])
    out["verify"] = {n: ledger.verify_reports(name=n, limit=50)[0] for n in ("sales", "users")}
    out["last_gate_check"] = ledger.gate_checks(limit=1)
    status = ledger.status()
    for c in status["kafka_checkpoints"]:
        c.pop("checkpoints")  # how many checkpoints a group has: the one figure a prune changes
    out["status"] = status
    out["failover_runs"] = ledger.failover_runs(limit=100)
    out["decisions"] = {c: ledger.audit_events(component=c, limit=10**6) for c in DECISION_COMPONENTS}
    out["failover_audit"] = {f["run_id"]: ledger.audit_events(run_id=f["run_id"]) for f in out["failover_runs"]}
    return out


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Ledger:
    if request.param == "sqlite":
        return Ledger.open(f"sqlite:///{tmp_path}/ledger.db", from_env=False)
    pg = request.getfixturevalue("postgres")
    return Ledger.open(pg.create_database(f"retention_{uuid.uuid4().hex[:8]}"), from_env=False)


def _deletes_per_transaction(ledger: Ledger) -> list[int]:
    """Rows deleted by each transaction from now on (engine events)."""
    from sqlalchemy import event

    per_tx: list[int] = []
    current = [0]

    def after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            current[0] += max(0, cursor.rowcount)

    def commit(conn: Any) -> None:
        per_tx.append(current[0])
        current[0] = 0

    event.listen(ledger.engine, "after_cursor_execute", after)
    event.listen(ledger.engine, "commit", commit)
    return per_tx


def test_a_simulated_year_is_pruned_to_its_retention_and_the_gate_reads_the_same(ledger: Ledger) -> None:
    sim = simulate_year(ledger, checkpoint_every_s=SCALE["checkpoint_every_s"], gate_every_s=SCALE["gate_every_s"])
    settings = LedgerSettings.Retention()
    written = ledger.table_rows()
    assert written == sim.count()
    before = readers(ledger)
    assert before["warehouse"]["last_completed"] is not None and before["warehouse"]["chain"] is None
    assert before["logs"]["last_completed"]["started_at"] < NOW - 260 * DAY  # past the 90-day cutoff

    dry = ledger.prune(settings, now=NOW, dry_run=True)
    assert ledger.table_rows() == written  # a dry run deletes nothing
    per_tx = _deletes_per_transaction(ledger)
    batch = 2000
    deleted = ledger.prune(settings, now=NOW, batch=batch)
    assert deleted == dry  # the dry run counted exactly what the prune deleted
    assert per_tx and max(per_tx) <= batch  # bounded transactions
    assert sum(per_tx) == sum(deleted.values())

    # the protected rows are there, and every reader answers as before
    assert readers(ledger) == before
    # the rows left are exactly those the retention keeps
    kept = expected_kept(sim, settings)
    got = actual(ledger)
    for t in TABLES:
        assert got[t] == kept[t], (t, len(got[t]), len(kept[t]), sorted(got[t] ^ kept[t])[:5])
    after = ledger.table_rows()
    assert {t: written[t] - after[t] for t in TABLES} == deleted
    assert deleted["failover_runs"] == 0

    # bounded as configured: a live pair keeps ~90 days of 5-minute runs (+ the runs kept for its chain)
    per_day = 288
    live = ledger._query("SELECT COUNT(*) AS n FROM replication_runs WHERE policy = 'warehouse'")[0]["n"]
    assert 90 * per_day <= live <= 90 * per_day + 5
    old = ledger._query("SELECT policy, status FROM replication_runs WHERE started_at < :c",
                        c=NOW - 90 * DAY)
    # past the cutoff: only the stopped policy's chain from its latest completed run, the ad-hoc pair's
    # newest, the runs still 'running' and the latest completed run of the policy that stopped
    assert len(old) <= 10 and {r["policy"] for r in old} <= {"logs", None, "raw", "warehouse"}
    assert [r["status"] for r in old if r["policy"] == "warehouse"] == ["running"]
    ck = ledger._query("SELECT group_id, COUNT(DISTINCT checkpoint_id) AS n FROM kafka_checkpoints "
                       "GROUP BY group_id")
    per_group = {r["group_id"]: r["n"] for r in ck}
    assert per_group[GONE_GROUP] == settings.checkpoints_keep_last
    every = SCALE["checkpoint_every_s"]
    assert all(abs(per_group[g] - 14 * DAY / every) <= 1 for g in GROUPS)
    assert after["gate_checks"] <= 90 * DAY / SCALE["gate_every_s"] + 1
    assert after["verify_reports"] == written["verify_reports"]  # a year of daily reports: all within 365 days

    stuck = ledger._query("SELECT * FROM replication_runs WHERE run_id = 'copy-raw-stuck'")
    assert stuck and ledger.manifest(stuck[0]["base_manifest_id"]) is not None
    assert len(before["stuck_runs"]) == 3 and all(before["stuck_bases"])
    assert before["orphan_last_manifest"]["manifest_id"] == "m-orphan-4"
    assert {e["event_id"] for e in ledger.audit_events(limit=10**6)} >= {
        a["event_id"] for a in sim.rows["audit_events"] if a["run_id"] or a["component"] in DECISION_COMPONENTS}

    # a second prune finds nothing more; a shorter retention prunes further but keeps the protected rows
    assert sum(ledger.prune(settings, now=NOW).values()) == 0
    short = settings.model_copy(update={"runs_days": 1.0, "checkpoints_days": 1.0, "verify_days": 1.0,
                                        "gate_checks_days": 1.0, "audit_days": 1.0})
    ledger.prune(short, now=NOW)
    assert readers(ledger) == before
    for t in TABLES:
        assert actual(ledger)[t] == expected_kept(sim, short)[t], t


def test_retention_none_keeps_everything(tmp_path: Path) -> None:
    lg = Ledger.open(f"sqlite:///{tmp_path}/l.db", from_env=False)
    sim = simulate_year(lg, days=30, run_every_s=3600, checkpoint_every_s=DAY, gate_every_s=3600, now=NOW)
    forever = LedgerSettings.Retention(runs_days=None, checkpoints_days=None, verify_days=None,
                                       gate_checks_days=None, audit_days=None)
    assert sum(lg.prune(forever, now=NOW + 10**8).values()) == 0
    assert lg.table_rows() == sim.count()
    assert sum(lg.dry_run().prune(LedgerSettings.Retention(runs_days=1.0), now=NOW).values()) > 0
    assert lg.table_rows() == sim.count()  # the dry-run view of a ledger never deletes


def test_a_checkpoint_larger_than_a_batch_goes_over_several_transactions(ledger: Ledger) -> None:
    old = NOW - 30 * DAY
    for n, t in enumerate((old, old + 1, old + 2, NOW - 60)):
        ledger.add_checkpoint(f"ck-{n}", [{"group_id": "big", "topic": f"t{p % 3}", "partition_id": p,
                                           "committed_offset": p, "taken_at": t} for p in range(25)])
    ledger.add_checkpoint("ck-small", [{"group_id": "small", "topic": "t", "partition_id": 0, "taken_at": old}])
    newest = ledger.latest_checkpoints(["big", "small"])
    settings = LedgerSettings.Retention(checkpoints_days=1.0, checkpoints_keep_last=1)
    assert ledger.prune(settings, now=NOW, dry_run=True)["kafka_checkpoints"] == 75
    per_tx = _deletes_per_transaction(ledger)
    assert ledger.prune(settings, now=NOW, batch=10)["kafka_checkpoints"] == 75
    assert max(per_tx) <= 10 and sum(per_tx) == 75
    assert ledger.latest_checkpoints(["big", "small"]) == newest  # the newest of each group, whole
    assert ledger.table_rows()["kafka_checkpoints"] == 26


def test_completed_run_is_the_gates_test() -> None:
    """The ledger cannot import copy.signals (a layer above it): its copy of the gate's test of a
    completed run must agree with it on every kind of run."""
    from dr_toolkit.copy.signals import _is_completed

    details: list[Any] = [None, {}, {"files_open": 0}, {"files_open": 1}, {"files_open": "2"}, {"files_open": None},
                          {"listing_proven": True}, {"listing_proven": False}, {"listing_proven": None},
                          {"files_open": 0, "listing_proven": False}, {"files_open": 3, "listing_proven": True}]
    for status in ("succeeded", "failed", "running", "killed", "interrupted"):
        for manifest in (None, "", "m1"):
            for d in details:
                row = {"status": status, "manifest_id": manifest, "detail": d}
                assert completed_run(status, manifest, json.dumps(d)) == _is_completed(row), row


def _drt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=120)


def test_drt_ledger_prune(tmp_path: Path) -> None:
    (tmp_path / "drt.yaml").write_text(
        "version: 1\nclusters:\n  a: {role: hot, local_root: a}\n  b: {role: cold, local_root: b}\n"
        "ledger: {url: 'sqlite:///state/l.db', retention: {runs_days: 30, gate_checks_days: 7}}\n")
    r = _drt("--json", "ledger", "prune", cwd=tmp_path)  # no ledger yet: nothing pruned, none created
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["missing"] and not (tmp_path / "state").exists()
    lg = Ledger.open(f"sqlite:///{tmp_path}/state/l.db", from_env=False)
    now = __import__("time").time()
    sim = simulate_year(lg, now=now, days=60, run_every_s=3600, checkpoint_every_s=DAY, gate_every_s=3600)
    lg.engine.dispose()
    r = _drt("ledger", "prune", "--dry-run", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dry = json.loads(r.stdout)
    assert dry["dry_run"] and dry["retention"]["runs_days"] == 30 and dry["deleted"]["replication_runs"] > 0
    assert lg.table_rows() == sim.count()
    r = _drt("ledger", "prune", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert done["deleted"] == dry["deleted"] and done["rows_after"] == dry["rows_after"] == lg.table_rows()
    r = _drt("ledger", "prune", cwd=tmp_path)
    assert r.returncode == 0 and "deleted 0 rows" in r.stdout and "never deleted:" in r.stdout, r

