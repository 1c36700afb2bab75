"""`drt demo`: the whole cycle on the embedded default (see drt_demo/demo.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from dr_toolkit.cli.common import emit, err_console, out_console, state


def _render(s: dict[str, Any]) -> None:
    def line(text: str = "") -> None:
        out_console.print(text, markup=False, highlight=False, soft_wrap=True)

    line()
    out_console.print("[bold]dr-toolkit demo: summary[/]")
    for c in s.get("checks", []):
        line(f"  failover check {c['when']}: {c['verdict']}"
             + (f" ({len(c['reasons'])} reasons)" if c["reasons"] else "")
             + f", recovery point {c.get('recovery_point') or 'none'}")
    for comp, (t, basis) in (s.get("safe_times") or {}).items():
        line(f"    safe time {comp:<6} {t or 'none'}  ({basis})")
    line(f"  failover run {s['run_id']}: {s['failover_status']}")
    line(f"  verification report: {s.get('verify_report')}")
    line(f"  failover report:     {s.get('report')}")
    line(f"  everything else:     {s['workdir']} (topology {s['topology']}), {s['duration_s']} s")
    ui = s.get("ui")
    if ui:
        line()
        out_console.print("[bold]left running[/] (until `drt demo --stop` or the next `drt demo`):")
        line(f"  Airflow UI  {ui['url']}   login {ui['user']} / {ui['password']}")
        line(f"  DR page     {ui['dr_page']}")
        line(f"  servers     {', '.join(ui['running'])}")
        line(f"  its environment, to start Airflow's processes again by hand: {ui['env_file']}")
    if s.get("next_steps"):
        line()
        out_console.print("[bold]next steps[/]")
        for step in s["next_steps"]:
            line(f"  {step}")


def _terminal_stderr() -> IO[str]:
    """The terminal's stderr, kept before the demo points file descriptor 2 at its log file."""
    return os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(ctx: typer.Context,
             workdir: Annotated[Path, typer.Option(
                 help="Where the demo keeps its data: created, or cleared if a previous demo made it "
                      "(any other directory is refused).")] = Path("demo-data"),
             ui: Annotated[bool, typer.Option(
                 "--ui", help="Run the failover through Airflow as deployed (api-server, scheduler, dag-processor, "
                              "triggerer; LocalExecutor on PostgreSQL) and leave it and the servers running on "
                              "127.0.0.1, with the DR page; print its URL and login.")] = False,
             stop: Annotated[bool, typer.Option(
                 "--stop", help="Stop what a `drt demo --ui` left running in --workdir, and exit.")] = False,
             ) -> None:
        """Run the whole cycle on this machine: seed, replicate, checkpoint, verify, NO_GO, drain, GO, fail over,
        re-protect, switch back.

        Quiet by default: third-party output (Kafka client, Spark, warnings) goes to
        <workdir>/logs/third-party.log (-v shows it). Every time printed is ISO 8601 UTC."""
        st = state(ctx)
        if stop:
            from drt_demo.demo import stop as stop_demo

            n = stop_demo(workdir, lambda line: err_console.print(line, markup=False, highlight=False,
                                                                  soft_wrap=True))
            sys.stdout.write(f"stopped {n} process(es) left running in {workdir.resolve()}\n")
            return
        from drt_demo.demo import run

        quiet = st.json
        terminal = _terminal_stderr() if quiet else None

        def say(line: str) -> None:
            if terminal is not None:
                terminal.write(line + "\n")
            else:
                out_console.print(line, markup=False, highlight=False, soft_wrap=True)

        try:
            summary = run(workdir, say, ui=ui, quiet=st.verbose == 0)
        finally:
            if terminal is not None:
                terminal.close()
        emit(ctx, summary, _render)
