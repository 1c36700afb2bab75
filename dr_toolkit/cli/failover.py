"""`drt failover check | run | lint | fence-status`: the gate, the runbook, the metadata lint."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer
from rich.table import Table

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import EXIT_PROBLEM, ConfigError


def _ago(s: float | None) -> str:
    return "-" if s is None else (f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h")


def _render_gate(d: dict[str, Any]) -> None:
    colour = "green" if d["verdict"] == "GO" else "red"
    out_console.print(f"verdict [bold {colour}]{d['verdict']}[/]  recovery point {d['recovery_point'] or 'unknown'}"
                      + (f"  (hot fenced at {d['fenced_at']})" if d.get("fenced_at") else ""))
    t = Table()
    for c in ("component", "name", "caught up", "lag", "why"):
        t.add_column(c)
    for s in d["signals"]:
        t.add_row(s["component"], s["name"], "yes" if s["caught_up"] else "[red]no[/]", _ago(s["lag_s"]),
                  s["reason"] or "")
    out_console.print(t)
    for r in d["reasons"]:
        out_console.print(f"- {r}", markup=False, highlight=False)


def _render_run(d: dict[str, Any]) -> None:
    out_console.print(f"run [bold]{d['run_id']}[/] ({'EXECUTE' if d['execute'] else 'dry run'}): {d['status']}")
    for s in d["steps"]:
        out_console.print(f"  {s['name']:<14} {s['status']:<9} {s.get('message') or ''}", markup=False,
                          highlight=False)


def _render_lint(d: dict[str, Any]) -> None:
    out_console.print(f"{d['files_scanned']} files scanned; "
                      + ("[green]no hot-cluster values found[/]" if d["clean"]
                         else f"[red]{len(d['findings'])} hot-cluster values found[/]"))
    for f in d["findings"]:
        out_console.print(f"{f['path']}:{f['line']}: {f['kind']} {f['value']}: {f['excerpt']}", markup=False,
                          highlight=False)


def register(app: typer.Typer) -> None:
    fo = typer.Typer(help="Fail over from the hot cluster to the cold one: gate, runbook, lint.",
                     no_args_is_help=True)
    app.add_typer(fo, name="failover")

    @fo.command("check")
    def check(ctx: typer.Context,
              timeout: Annotated[float | None, typer.Option(help="Seconds to wait for each component.")] = None
              ) -> None:
        """The caught-up gate: GO (exit 0) or NO_GO with every reason (exit 1); 3 if the ledger is down."""
        from dr_toolkit.failover.gate import check as gate_check

        st = state(ctx)
        res = gate_check(st.topology(), st.ledger(), timeout_s=timeout)
        emit(ctx, res.to_json(), _render_gate)
        if not res.go:
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("run")
    def run(ctx: typer.Context,
            execute: Annotated[bool, typer.Option("--execute", help="Really do it (default: dry run).")] = False,
            resume: Annotated[str | None, typer.Option("--resume", metavar="RUN",
                                                       help="Resume this run: skip the steps done.")] = None,
            reason: Annotated[str | None, typer.Option("--reason", help="Why (goes to the audit log).")] = None,
            yes: Annotated[bool, typer.Option("--yes-i-am-sure",
                                              help="Skip the typed confirmation before promotion.")] = False,
            drain_timeout: Annotated[float | None, typer.Option(
                help="Seconds to wait for drain [default: failover.drain_timeout_s].")] = None,
            ) -> None:
        """The failover runbook: fence, drain, copy, verify, Kafka offsets, gate, approval, promote, report."""
        from dr_toolkit.failover.runbook import Runbook

        st = state(ctx)
        topo, ledger = st.topology(), st.ledger()

        def approver(req: dict[str, Any]) -> bool:
            if yes:
                return True
            if not sys.stdin.isatty() and st.json:
                raise ConfigError("promotion needs a typed confirmation",
                                  hint="run interactively, or pass --yes-i-am-sure")
            err_console.print(f"About to make [bold]{topo.cold_name}[/] the active cluster "
                              f"(recovery point {req.get('recovery_point') or 'unknown'}).")
            if req.get("metadata_lint"):
                err_console.print(f"metadata lint: {req['metadata_lint']}", markup=False, highlight=False)
            typed = typer.prompt(f"Type the cold cluster's name ({topo.cold_name}) to promote it",
                                 default="", show_default=False, err=True)
            return bool(typed.strip() == topo.cold_name)

        kw: dict[str, Any] = {"approver": approver, "drain_timeout_s": drain_timeout}
        if resume:
            rb = Runbook.resume(topo, ledger, resume, execute=execute if execute else None, **kw)
        else:
            rb = Runbook.start(topo, ledger, reason=reason or "", execute=execute, **kw)
        if not st.json:
            err_console.print(f"failover run {rb.run_id} ({'EXECUTE' if rb.execute else 'dry run'})")
        t0 = time.monotonic()
        out = rb.run()
        out["duration_s"] = round(time.monotonic() - t0, 3)
        emit(ctx, out, _render_run)
        if out["status"] not in ("succeeded",):
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("lint")
    def lint(ctx: typer.Context,
             path: Annotated[list[str] | None, typer.Option("--path", help="Extra file or directory to scan.")] = None
             ) -> None:
        """Find hot-cluster-specific values (namenodes, hosts, buckets) in replicated metadata and config."""
        from dr_toolkit.failover.lint import lint as run_lint

        res = run_lint(state(ctx).topology(), path or [])
        emit(ctx, res, _render_lint)
        if not res["clean"]:
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("fence-status")
    def fence_status(ctx: typer.Context) -> None:
        """Show the fencing epoch, the active cluster and the read-only flags."""
        from dr_toolkit.zk.fencing import open_fence

        with open_fence(state(ctx).topology()) as fence:
            emit(ctx, fence.snapshot())

