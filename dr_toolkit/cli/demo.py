"""`drt demo`: the whole cycle on the embedded default (see drt_demo/demo.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dr_toolkit.cli.common import emit, err_console, out_console, state


def _render(s: dict[str, Any]) -> None:
    out_console.print()
    out_console.print("[bold]dr-toolkit demo: summary[/]")
    for c in s.get("checks", []):
        colour = "green" if c["verdict"] == "GO" else "red"
        out_console.print(f"  failover check {c['when']}: [{colour}]{c['verdict']}[/]"
                          + (f" ({len(c['reasons'])} reasons)" if c["reasons"] else "")
                          + f", recovery point {c.get('recovery_point') or 'none'}")
    for comp, (t, basis) in (s.get("safe_times") or {}).items():
        out_console.print(f"    safe time {comp:<6} {t or 'none'}  ({basis})", markup=False, highlight=False)
    out_console.print(f"  failover run {s['run_id']}: {s['failover_status']}")
    out_console.print(f"  verification report: {s.get('verify_report')}")
    out_console.print(f"  failover report:     {s.get('report')}")
    out_console.print(f"  everything else:     {s['workdir']} (topology {s['topology']}), {s['duration_s']} s")


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(ctx: typer.Context,
             workdir: Annotated[Path, typer.Option(help="Where the demo keeps its data (wiped first).")] = Path(
                 "demo-data")) -> None:
        """Run the whole cycle on this machine: seed, replicate, checkpoint, verify, NO_GO, drain, GO, fail over."""
        from drt_demo.demo import run

        quiet = state(ctx).json

        def say(line: str) -> None:
            (err_console if quiet else out_console).print(line, markup=False, highlight=False)

        emit(ctx, run(workdir, say), _render)
