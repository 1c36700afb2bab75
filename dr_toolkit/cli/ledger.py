"""`drt ledger`: the ledger's upkeep — `drt ledger prune [--dry-run]` applies the topology's
``ledger.retention`` (:meth:`dr_toolkit.ledger.Ledger.prune`; what is never deleted:
:mod:`dr_toolkit.ledger.retention`)."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer

from dr_toolkit.cli.common import emit, state
from dr_toolkit.ledger.retention import DECISION_COMPONENTS, TABLES
from dr_toolkit.topology import load_topology

ledger_app = typer.Typer(help="The ledger's upkeep: prune rows past their retention.", no_args_is_help=True)

NEVER_DELETED = [
    "failover_runs, and every audit row of a failover run or of components " + ", ".join(DECISION_COMPONENTS),
    "per copy pair: its newest run, its latest completed run and every run after it, and their manifests",
    "the newest manifest of each source/target (the next run's base); a running run and its base manifest",
    "the newest checkpoints_keep_last checkpoints of each Kafka group",
    "the newest verify_keep_last reports of each dataset; the newest gate check",
    "watermarks, leases",
]


def _render(d: dict[str, Any]) -> None:
    if d.get("missing"):
        sys.stdout.write(f"ledger {d['missing']}: does not exist yet — nothing to prune\n")
        return
    verb = "would delete" if d["dry_run"] else "deleted"
    out = [f"ledger {d['ledger']}: {verb} {sum(d['deleted'].values()):,} rows in {d['duration_s']}s"
           + (" (dry run: nothing deleted)" if d["dry_run"] else "")]
    for t in TABLES:
        out.append(f"  {t}: {verb} {d['deleted'][t]:,}, {d['rows_after'][t]:,} left")
    out.append("never deleted: " + "; ".join(NEVER_DELETED))
    sys.stdout.write("\n".join(out) + "\n")


@ledger_app.command("prune")
def prune_cmd(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")] = False,
) -> None:
    """Delete the ledger's rows past the topology's ledger.retention (copy runs and manifests,
    Kafka checkpoints, verification reports, gate checks, audit rows), a batch per transaction.
    The audit of decisions and what the gate and the next copy read are never deleted.

    Never creates a ledger."""
    st = state(ctx)
    settings = load_topology(st.config).ledger.retention
    ledger = st.ledger(read_only=True)
    t0 = time.monotonic()
    now = time.time()
    if ledger.missing:
        deleted = dict.fromkeys(TABLES, 0)
        after = dict.fromkeys(TABLES, 0)
    else:
        deleted = ledger.prune(settings, now=now, dry_run=dry_run)
        after = ledger.table_rows()
        if dry_run:
            after = {t: after[t] - deleted[t] for t in TABLES}
    emit(ctx, {"ledger": ledger.url, "missing": ledger.missing, "dry_run": dry_run, "now": now,
               "retention": settings.model_dump(), "deleted": deleted, "rows_after": after,
               "never_deleted": NEVER_DELETED, "duration_s": round(time.monotonic() - t0, 3)}, _render)


def register(app: typer.Typer) -> None:
    app.add_typer(ledger_app, name="ledger")
