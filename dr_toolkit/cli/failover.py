"""`drt failover check | run | reprotect | switchover | abort | lint | fence-status`: the gate, the
runbooks (failover, re-protect, switchover), the metadata lint."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import EXIT_PROBLEM, ConfigError
from dr_toolkit.failback.runbook import Reprotect
from dr_toolkit.failback.runbook import switchover as run_switchover
from dr_toolkit.failover.gate import check as gate_check
from dr_toolkit.failover.lint import lint as run_lint
from dr_toolkit.failover.runbook import Runbook, os_identity
from dr_toolkit.failover.unplanned import ACCEPT_PHRASE
from dr_toolkit.zk.fencing import open_fence

if TYPE_CHECKING:
    from dr_toolkit.topology import Topology


def _ago(s: float | None) -> str:
    return "-" if s is None else (f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h")


def _render_gate(d: dict[str, Any]) -> None:
    """Stacked: one signal per line, its safe time, basis and reason indented below — nothing is
    cut at 80 columns (a long value wraps at the terminal, whole)."""
    colour = "green" if d["verdict"] == "GO" else "red"
    out_console.print(f"verdict [bold {colour}]{d['verdict']}[/]", end="")
    plain = [f"  recovery point {d['recovery_point'] or 'unknown'}"
             + (f" (from {d['recovery_point_from']})" if d.get("recovery_point_from") else "")
             + (f"  (hot fenced at {d['fenced_at']})" if d.get("fenced_at") else "")]
    for s in d["signals"]:
        plain.append(f"{s['component']} {s['name']}: " + ("caught up" if s["caught_up"] else "NOT caught up")
                     + f", lag {_ago(s['lag_s'])}")
        plain.append(f"    safe time {s.get('safe_time') or 'none'}")
        if s.get("basis"):
            plain.append(f"    basis: {s['basis']}")
        if s.get("reason"):
            plain.append(f"    why: {s['reason']}")
    if d["reasons"]:
        plain.append("reasons:")
        plain += [f"- {r}" for r in d["reasons"]]
    if d.get("ledger_missing"):
        plain.append(f"note: no ledger yet at {d['ledger_missing']}: this check was not recorded (a read "
                     "command creates no ledger)")
    sys.stdout.flush()
    out_console.file.flush()
    sys.stdout.write("\n".join(plain) + "\n")


def _render_run(d: dict[str, Any]) -> None:
    kind = ("EXECUTE" if d.get("execute") else "dry run") + (", unplanned" if d.get("unplanned") else "")
    out_console.print(f"run [bold]{d['run_id']}[/] ({kind}): {d['status']}")
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


def _typed_approver(topo: Topology, *, acks: list[str], yes: bool, accept_loss: bool, json_out: bool
                    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The CLI's approver: the typed confirmation (each lint finding acknowledged, the cold cluster's
    name typed, for an unplanned run the acceptance phrase), decided as the login user."""
    def approver(req: dict[str, Any]) -> dict[str, Any]:
        findings = req.get("findings") or []
        ids = [f["id"] for f in findings]
        given = ids if "all" in acks else [i for i in acks if i in ids]
        if yes:
            return {"approved": True, "acknowledged": given, "accept_loss": accept_loss,
                    "comment": "--yes-i-am-sure", "who": os_identity()}
        if not sys.stdin.isatty() and json_out:
            raise ConfigError("promotion needs a typed confirmation",
                              hint="run interactively, or pass --yes-i-am-sure")
        if req.get("unplanned"):
            lw = req.get("loss_window") or {}
            err_console.print(f"[bold red]UNPLANNED failover[/]: recovery point {lw.get('recovery_point')}")
            for c in lw.get("components", []):
                err_console.print(f"  {c['component']} {c['name']}: safe time {c.get('safe_time_iso') or 'none'} "
                                  f"— lost: {c['window']}; known missing: {c.get('known_missing') or '-'}; "
                                  f"unknowable: {c.get('unknowable')}", markup=False, highlight=False)
        err_console.print(f"About to make [bold]{topo.cold_name}[/] the active cluster "
                          f"(recovery point {req.get('recovery_point') or 'unknown'}).")
        for f in findings:
            if f["id"] in given:
                continue
            err_console.print(f"metadata lint: {f['id']}: {f['kind']} {f['value']}: {f['excerpt']}",
                              markup=False, highlight=False)
            typed = typer.prompt("Type 'ack' to acknowledge this finding", default="", show_default=False,
                                 err=True)
            if typed.strip() == "ack":
                given.append(f["id"])
        loss_ok = False
        if req.get("unplanned"):
            typed = typer.prompt(f"Type '{ACCEPT_PHRASE}' to accept the data-loss window above", default="",
                                 show_default=False, err=True)
            loss_ok = typed.strip() == ACCEPT_PHRASE
        typed = typer.prompt(f"Type the cold cluster's name ({topo.cold_name}) to promote it",
                             default="", show_default=False, err=True)
        ok = typed.strip() == topo.cold_name and (loss_ok or not req.get("unplanned"))
        return {"approved": ok, "acknowledged": given, "accept_loss": loss_ok, "who": os_identity(),
                "comment": "typed confirmation" if ok else "confirmation not typed"}

    return approver


def _reprotect_approver(*, acks: list[str], yes: bool, json_out: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The CLI's approver of a re-protect: each divergence item acknowledged (``--acknowledge ID`` /
    ``all``, or typed), then the standby cluster's name typed; decided as the login user."""
    def approver(req: dict[str, Any]) -> dict[str, Any]:
        items = req.get("findings") or []
        ids = [f["id"] for f in items]
        given = ids if "all" in acks else [i for i in acks if i in ids]
        if yes:
            return {"approved": True, "acknowledged": given, "comment": "--yes-i-am-sure", "who": os_identity()}
        if not sys.stdin.isatty() and json_out:
            raise ConfigError("re-protect needs a typed confirmation", hint="run interactively, or pass --yes-i-am-sure")
        err_console.print(f"About to protect [bold]{req['active']}[/] onto [bold]{req['standby']}[/]: what "
                          f"{req['standby']} took after the recovery point ({req.get('recovery_point') or 'unknown'}) "
                          "is moved aside there, then it is brought up to date from the active cluster.")
        for f in items:
            if f["id"] in given:
                continue
            err_console.print(f"divergence: {f['id']}: {f['kind']} {f['value']}: {f['excerpt']}", markup=False,
                              highlight=False)
            typed = typer.prompt("Type 'ack' to acknowledge this item", default="", show_default=False, err=True)
            if typed.strip() == "ack":
                given.append(f["id"])
        typed = typer.prompt(f"Type the standby cluster's name ({req['standby']}) to re-protect onto it",
                             default="", show_default=False, err=True)
        ok = typed.strip() == req["standby"]
        return {"approved": ok, "acknowledged": given, "who": os_identity(),
                "comment": "typed confirmation" if ok else "confirmation not typed"}

    return approver


def register(app: typer.Typer) -> None:
    fo = typer.Typer(help="Fail over, re-protect the other way, switch back: gate, runbooks, lint.",
                     no_args_is_help=True)
    app.add_typer(fo, name="failover")

    @fo.command("check")
    def check(ctx: typer.Context,
              timeout: Annotated[float | None, typer.Option(help="Seconds to wait for each component.")] = None
              ) -> None:
        """The caught-up gate: GO (exit 0) or NO_GO with every reason (exit 1); 3 if the ledger is down."""
        st = state(ctx)
        ledger = st.ledger(read_only=True)
        # a progress line on a terminal's stderr while every component is asked (up to --timeout each)
        with err_console.status("failover check: asking HDFS, HBase, Kafka and ZooKeeper (each within --timeout) …"):
            res = gate_check(st.topology(), ledger, timeout_s=timeout, access=st.access(), record="cli",
                             hdfs="prove")  # the full check, recorded as the quick path's proof
        doc = res.to_json()
        if ledger.missing:  # a read command creates no ledger: this check is not recorded
            doc["ledger_missing"] = ledger.missing
            doc["gate_check_id"] = None
        emit(ctx, doc, _render_gate)
        if not res.go:
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("run")
    def run(ctx: typer.Context,
            execute: Annotated[bool, typer.Option("--execute", help="Really do it (default: dry run).")] = False,
            resume: Annotated[str | None, typer.Option("--resume", metavar="RUN",
                                                       help="Resume this run: skip the steps done (a run killed after it made cold "
                                                            "active finishes without asking the gate again).")] = None,
            reason: Annotated[str | None, typer.Option("--reason", help="Why (goes to the audit log).")] = None,
            unplanned: Annotated[bool, typer.Option(
                "--unplanned", help="The hot cluster is unreachable: promote cold at the recovery point it "
                                    "holds, after the typed acceptance of the data-loss window.")] = False,
            yes: Annotated[bool, typer.Option("--yes-i-am-sure",
                                              help="Skip the typed confirmation before promotion.")] = False,
            acknowledge: Annotated[list[str] | None, typer.Option(
                "--acknowledge", metavar="PATH:LINE",
                help="Acknowledge a metadata-lint finding (repeat; 'all' for every one shown).")] = None,
            accept_loss: Annotated[bool, typer.Option(
                "--accept-data-loss", help="Unplanned: accept the data-loss window without the typed phrase "
                                           "(only with --yes-i-am-sure).")] = False,
            drain_timeout: Annotated[float | None, typer.Option(
                help="Seconds to wait for drain [default: failover.drain_timeout_s].")] = None,
            ) -> None:
        """The failover runbook: fence, drain, copy, verify, Kafka offsets, gate, approval, promote, report."""
        st = state(ctx)
        topo = st.topology()
        if execute and topo.cold.zookeeper is None and topo.hot.zookeeper is None:  # refused before any record
            raise ConfigError("failover run --execute: no ZooKeeper configured — fence_hot keeps the fencing "
                              "znode there, so the run would stop at its first step", where=topo.source_file,
                              hint="add a zookeeper section to the cold cluster (or run without --execute "
                                   "for a dry run)")
        ledger, access = st.ledger(), st.access()
        approver = _typed_approver(topo, acks=list(acknowledge or []), yes=yes, accept_loss=accept_loss,
                                   json_out=st.json)
        if resume:
            rb = Runbook.resume(topo, ledger, resume, access=access, execute=execute if execute else None,
                                approver=approver, drain_timeout_s=drain_timeout)
        else:
            rb = Runbook.start(topo, ledger, access=access, reason=reason or "", execute=execute,
                               unplanned=unplanned, approver=approver, drain_timeout_s=drain_timeout)
        if not st.json:
            err_console.print(f"failover run {rb.run_id} ({'EXECUTE' if rb.execute else 'dry run'}"
                              f"{', unplanned' if rb.unplanned else ''})")
        t0 = time.monotonic()
        out = rb.run()
        out["duration_s"] = round(time.monotonic() - t0, 3)
        emit(ctx, out, _render_run)
        if out["status"] not in ("succeeded",):
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("reprotect")
    def reprotect(ctx: typer.Context,
                  execute: Annotated[bool, typer.Option("--execute", help="Really do it (default: dry run).")] = False,
                  resume: Annotated[str | None, typer.Option("--resume", metavar="RUN",
                                                             help="Resume this re-protect run: skip the steps done.")] = None,
                  reason: Annotated[str | None, typer.Option("--reason", help="Why (goes to the audit log).")] = None,
                  yes: Annotated[bool, typer.Option("--yes-i-am-sure", help="Skip the typed confirmation.")] = False,
                  acknowledge: Annotated[list[str] | None, typer.Option(
                      "--acknowledge", metavar="ID",
                      help="Acknowledge a divergence item (repeat; 'all' for every one shown).")] = None,
                  ) -> None:
        """After a failover: protect the active cluster onto the old hot one. What the old hot took after
        the recovery point is listed (the divergence report), acknowledged and moved aside; the old hot
        is brought up to date by the delta; replication then runs the other way."""
        st = state(ctx)
        ledger, access = st.ledger(), st.access()
        approver = _reprotect_approver(acks=list(acknowledge or []), yes=yes, json_out=st.json)
        if resume:
            rp = Reprotect.resume(st.configured_topology(), ledger, resume, access=access, approver=approver)
        else:
            rp = Reprotect.start(st.topology(), ledger, access=access, reason=reason or "", execute=execute,
                                 approver=approver)
        if not st.json:
            err_console.print(f"re-protect run {rp.run_id} ({'EXECUTE' if rp.execute else 'dry run'}): "
                              f"{rp.topology.cold_name} -> {rp.topology.hot_name}")
        t0 = time.monotonic()
        out = rp.run()
        out["duration_s"] = round(time.monotonic() - t0, 3)
        emit(ctx, out, _render_run)
        if out["status"] != "succeeded":
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("switchover")
    def switchover_cmd(ctx: typer.Context,
                       execute: Annotated[bool, typer.Option("--execute", help="Really do it (default: dry run).")] = False,
                       reason: Annotated[str | None, typer.Option("--reason", help="Why (goes to the audit log).")] = None,
                       yes: Annotated[bool, typer.Option("--yes-i-am-sure",
                                                         help="Skip the typed confirmations.")] = False,
                       acknowledge: Annotated[list[str] | None, typer.Option(
                           "--acknowledge", metavar="ID",
                           help="Acknowledge a metadata-lint finding or divergence item ('all': every one).")] = None,
                       ) -> None:
        """Planned, zero-loss role swap: the failover runbook in the current direction (fence, drain, copy,
        verify, gate GO, approval, promote), then a re-protect the other way. Resume either half on its own
        (`failover run --resume RUN`, `failover reprotect --resume RUN`)."""
        st = state(ctx)
        topo, ledger, access = st.topology(), st.ledger(), st.access()
        acks = list(acknowledge or [])
        out = run_switchover(topo, ledger, access=access, reason=reason or "", execute=execute,
                             failover_approver=_typed_approver(topo, acks=acks, yes=yes, accept_loss=False,
                                                               json_out=st.json),
                             reprotect_approver=_reprotect_approver(acks=acks, yes=yes, json_out=st.json))
        def render(d: dict[str, Any]) -> None:
            for part in ("failover", "reprotect"):
                if d.get(part):
                    _render_run(d[part])
            out_console.print(f"switchover: {d['status']}")
        emit(ctx, out, render)
        if out["status"] != "succeeded":
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("abort")
    def abort(ctx: typer.Context,
              run_id: Annotated[str, typer.Argument(metavar="RUN", help="The failover run to abort.")],
              reason: Annotated[str, typer.Option("--reason", help="Why (goes to the audit log).")] = "",
              ) -> None:
        """Abort a failover run that has not promoted: lift its fence (audited with who and why).
        Refused (exit 2, nothing written: not the ledger, not ZooKeeper) once cold is active."""
        st = state(ctx)
        if not reason.strip():
            raise ConfigError("an abort needs a reason", hint="pass --reason TEXT (it goes to the audit log)")
        rb = Runbook.resume(st.topology(), st.ledger(), run_id, access=st.access())
        out = rb.abort(reason)
        emit(ctx, out, lambda d: out_console.print(f"run {d['run_id']}: {d['status']} — {d['message']}",
                                                   markup=False, highlight=False))

    @fo.command("lint")
    def lint(ctx: typer.Context,
             path: Annotated[list[str] | None, typer.Option("--path", help="Extra file or directory to scan.")] = None
             ) -> None:
        """Find hot-cluster-specific values (namenodes, hosts, buckets) in replicated metadata and config."""
        res = run_lint(state(ctx).topology(), path or [])
        emit(ctx, res, _render_lint)
        if not res["clean"]:
            raise typer.Exit(EXIT_PROBLEM)

    @fo.command("fence-status")
    def fence_status(ctx: typer.Context) -> None:
        """Show the fencing epoch, the active cluster and the read-only flags."""
        st = state(ctx)
        with open_fence(st.topology(), access=st.access()) as fence:
            emit(ctx, fence.snapshot())

