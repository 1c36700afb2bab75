"""`drt status`: what the ledger knows.

The readable view is stacked (one item per line, its details indented below it), never a
table: nothing is cut at 80 columns — a long report path is printed whole. Every time is ISO
8601 UTC with its age. The first line after the ledger is the last failover check: verdict,
recovery point and RPO (its age), against ``failover.rpo_slo_s`` when one is set.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

from dr_toolkit.cli.common import emit, state
from dr_toolkit.failback.direction import recorded


def iso(t: float | None) -> str:
    """An epoch as ISO 8601 UTC (``2026-11-25T17:04:32Z``), or ``-``."""
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(t)))


def duration(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0.0, float(s))
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h" if s < 172800 else f"{s / 86400:.1f}d"


def when(t: float | None, now: float | None = None) -> str:
    """``2026-11-25T17:04:32Z (3m ago)``."""
    if t is None:
        return "-"
    now = time.time() if now is None else now
    return f"{iso(t)} ({duration(now - float(t))} ago)"


def last_check(ledger: Any, slo_s: float | None) -> dict[str, Any] | None:
    rows = ledger.gate_checks(limit=1)
    if not rows:
        return None
    r = rows[0]
    rpo = r.get("rpo_s")
    return {"verdict": r["verdict"], "checked_at": r["checked_at"], "checked_at_iso": iso(r["checked_at"]),
            "recovery_point": r.get("recovery_point"),
            "recovery_point_iso": iso(r["recovery_point"]) if r.get("recovery_point") is not None else None,
            "rpo_s": rpo, "limiting": r.get("limiting"), "source": r.get("source"), "actor": r.get("actor"),
            "rpo_slo_s": slo_s,
            "slo_breached": None if slo_s is None else (rpo is None or float(rpo) > float(slo_s)),
            "reasons": r.get("reasons") or []}


def _copy_counts(r: dict[str, Any]) -> str:
    """What a copy run did. A run that stopped (interrupted, killed) before its end records no
    counters — the copy counts what it placed only when every file is back (issue 43 #10) — so its
    zeros are not shown as "0 files": the line says what was planned and what that means."""
    counts = f"{r['files_copied']:,} files, {r['bytes_copied']:,} bytes, {r['files_failed']} failed"
    if r["status"] not in ("interrupted", "killed"):
        return counts
    planned = r.get("files_total")
    of = f" of {planned:,} planned" if planned else ""
    if r["files_copied"] or r["bytes_copied"] or r["files_failed"]:
        return f"{r['files_copied']:,}{of} files placed, {r['bytes_copied']:,} bytes, {r['files_failed']} failed"
    return (f"{format(planned, ',') + ' files planned' if planned else 'files planned'}, how many were placed "
            "before the stop is not recorded (a run counts them only at its end); each file placed is whole and "
            "stays, the next run keeps it and copies the rest")


def _render(s: dict[str, Any]) -> None:
    now = time.time()
    out: list[str] = []
    if s.get("missing"):
        out.append(f"ledger {s['missing']}: does not exist yet — nothing recorded (the first copy, checkpoint, "
                   "verification or failover run creates it)")
    else:
        out.append(f"ledger {s['ledger']} (schema v{s['schema_version']})")
    d = s.get("direction") or {}
    if d.get("run_id"):  # a re-protect recorded a direction: say which way runs now
        out.append(f"protected: {d['hot']} -> {d['cold']}" + (" (as configured)" if d.get("as_configured") else
                                                            " (the other way round from the topology file)")
                   + f", since re-protect run {d['run_id']}")
    c = s.get("last_check")
    if c is None:
        out.append("last failover check: none (run `drt failover check`)")
    else:
        rpo = "none (no recovery point)" if c["rpo_s"] is None else duration(c["rpo_s"])
        slo = ""
        if c.get("rpo_slo_s") is not None:
            slo = f" — SLO {duration(c['rpo_slo_s'])}: {'BREACHED' if c['slo_breached'] else 'met'}"
        out.append(f"last failover check: {c['verdict']} at {when(c['checked_at'], now)} by {c.get('source')}")
        out.append(f"  recovery point {c['recovery_point_iso'] or 'none'}"
                   + (f" (limited by {c['limiting']})" if c.get("limiting") else "") + f", RPO {rpo}{slo}")
        for r in c.get("reasons") or []:
            out.append(f"  - {r}")
    out.append("replication (last run per policy and target):" if s["replication"] else "replication: none")
    for r in s["replication"]:
        out.append(f"  {r['policy'] or r['source']} → {r['target']}")
        end = "stopped" if r["status"] in ("interrupted", "killed") else "finished"
        out.append(f"    {r['status']}, {r['mode'] or '-'}: {_copy_counts(r)}; {end} {when(r['finished_at'], now)}")
    out.append("kafka checkpoints:" if s["kafka_checkpoints"] else "kafka checkpoints: none")
    for r in s["kafka_checkpoints"]:
        out.append(f"  group {r['group_id']}: {r['checkpoints']} checkpoint(s), last {when(r['taken_at'], now)}")
    out.append("verification (last report per dataset):" if s["verification"] else "verification: none")
    for r in s["verification"]:
        out.append(f"  {r['name'] or r['source']}: GOODROWS {r['goodrows']:,}, BADROWS {r['badrows']:,}; "
                   f"finished {when(r['finished_at'], now)}")
        if r.get("report_path"):
            out.append(f"    report {r['report_path']}")
    out.append("failover runs:" if s["failover_runs"] else "failover runs: none")
    for r in s["failover_runs"]:
        out.append(f"  {r['run_id']}: {r['status']}, {'executed' if r['execute'] else 'dry run'}, by {r['actor']}, "
                   f"started {when(r['started_at'], now)}")
    sys.stdout.write("\n".join(out) + "\n")


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(ctx: typer.Context) -> None:
        """Show what the ledger knows: the last failover check (verdict, recovery point, RPO), copies,
        checkpoints, verifications, failover runs.

        A read command: it never creates a ledger (one that does not exist yet is shown empty)."""
        st = state(ctx)
        ledger = st.ledger(read_only=True)
        data = ledger.status()
        # the planned file count of each last run (a stopped run records no other count)
        planned = {(r["source"], r["target"], r["started_at"]): r.get("files_total")
                   for r in ledger.runs(limit=500)} if data["replication"] else {}
        for r in data["replication"]:
            r["files_total"] = planned.get((r["source"], r["target"], r["started_at"]))
        if ledger.missing:
            data["ledger"] = f"sqlite:///{ledger.missing}"
        data["missing"] = ledger.missing
        topo = st.topology()
        data["last_check"] = last_check(ledger, topo.failover.rpo_slo_s)
        rec = recorded(ledger)
        data["direction"] = {"hot": topo.hot_name, "cold": topo.cold_name, "as_configured": not topo.is_reversed,
                             "since": (rec or {}).get("at"), "run_id": (rec or {}).get("run_id")}
        emit(ctx, data, _render)
