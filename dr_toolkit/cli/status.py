"""`drt status`: what the ledger knows."""

from __future__ import annotations

import time
from typing import Any

import typer

from dr_toolkit.cli.common import emit, out_console, state


def _ago(t: float | None) -> str:
    if not t:
        return "-"
    s = max(0, time.time() - t)
    return f"{s:.0f}s ago" if s < 120 else (f"{s / 60:.0f}m ago" if s < 7200 else f"{s / 3600:.1f}h ago")


def _render(s: dict[str, Any]) -> None:
    from rich.table import Table  # only for the readable view: `--json` does without rich

    out_console.print(f"ledger [bold]{s['ledger']}[/] (schema v{s['schema_version']})")
    t = Table(title="replication (last run per policy and target)")
    for c in ("policy", "target", "status", "mode", "files", "bytes", "failed", "finished"):
        t.add_column(c)
    for r in s["replication"]:
        t.add_row(r["policy"] or r["source"], r["target"], r["status"], r["mode"] or "-", str(r["files_copied"]),
                  str(r["bytes_copied"]), str(r["files_failed"]), _ago(r["finished_at"]))
    out_console.print(t)
    t = Table(title="kafka checkpoints")
    for c in ("group", "checkpoints", "last"):
        t.add_column(c)
    for r in s["kafka_checkpoints"]:
        t.add_row(r["group_id"], str(r["checkpoints"]), _ago(r["taken_at"]))
    out_console.print(t)
    t = Table(title="verification (last report per dataset)")
    for c in ("name", "GOODROWS", "BADROWS", "finished", "report"):
        t.add_column(c)
    for r in s["verification"]:
        t.add_row(r["name"] or r["source"], str(r["goodrows"]), str(r["badrows"]), _ago(r["finished_at"]),
                  r["report_path"] or "-")
    out_console.print(t)
    if s["failover_runs"]:
        t = Table(title="failover runs")
        for c in ("run", "status", "execute", "actor", "started"):
            t.add_column(c)
        for r in s["failover_runs"]:
            t.add_row(r["run_id"], r["status"], "yes" if r["execute"] else "dry-run", r["actor"],
                      _ago(r["started_at"]))
        out_console.print(t)


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(ctx: typer.Context) -> None:
        """Show what the ledger knows: last copies, checkpoints, verifications, failover runs."""
        emit(ctx, state(ctx).ledger().status(), _render)
