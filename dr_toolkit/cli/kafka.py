"""`drt kafka checkpoint | lag | remap`: consumer offsets across the mirror (docs/design.md §1.2)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import EXIT_PROBLEM, ConfigError, UsageError
from dr_toolkit.kafka import api
from dr_toolkit.kafka.batch import apply_many, remap_many
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import Topology

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger

kafka_app = typer.Typer(help="Kafka consumer offsets: checkpoint on hot, mirror lag, remap onto cold.",
                        no_args_is_help=True)

SourceOpt = Annotated[str | None, typer.Option("--source-bootstrap", help="Hot brokers (instead of the topology).")]
TargetOpt = Annotated[str | None, typer.Option("--target-bootstrap", help="Cold brokers (instead of the topology).")]


def _context(ctx: typer.Context, *, need_topology: bool, need_ledger: bool = False
             ) -> tuple[Topology | None, Ledger | None]:
    """The topology and ledger; with bootstrap addresses given, the topology file may be absent:
    then only a write (--apply) opens a ledger ($DRT_LEDGER_URL or ./drt-ledger.db) for its audit."""
    st = state(ctx)
    try:
        topo = st.topology()
    except ConfigError as exc:
        if need_topology or "not found" not in exc.what:
            raise
        return None, (Ledger.open("sqlite:///drt-ledger.db") if need_ledger else None)
    return topo, st.ledger(read_only=not need_ledger)


@contextlib.contextmanager
def _progress(ctx: typer.Context, what: str) -> Iterator[None]:
    if state(ctx).json:
        yield
        return
    with err_console.status(what):
        yield


def _say_notes(ctx: typer.Context, notes: list[str]) -> None:
    """The selection's notes (a groups_regex/topics_regex pattern selecting nothing) on stderr;
    with --json they are the document's ``selection_notes``."""
    if not state(ctx).json:
        for n in notes:
            err_console.print(f"note: {n}", markup=False, highlight=False, soft_wrap=True)


def _render_checkpoint(d: dict[str, Any]) -> None:
    t = Table(title=f"checkpoint {d['checkpoint_id']} ({d['duration_s']}s)")
    for c in ("group", "topic", "partition", "committed", "last record ts", "type", "fingerprint"):
        t.add_column(c)
    for r in d["partitions"]:
        t.add_row(r["group_id"], r["topic"], str(r["partition_id"]), str(r["committed_offset"]),
                  str(r["record_timestamp"]), r["timestamp_type"], (r["fingerprint"] or "-")[:14])
    out_console.print(t)


def _render_lag(d: dict[str, Any]) -> None:
    t = Table(title="mirror lag: " + ("caught up" if d["caught_up"] else
                                      f"behind (max {d['max_seconds_behind']:.1f}s)"))
    for c in ("topic", "partition", "hot end", "cold end", "records behind", "seconds behind", "method",
              "error"):
        t.add_column(c)
    for r in d["partitions"]:
        secs = r["seconds_behind"]
        t.add_row(r["topic"], str(r["partition"]), str(r["hot_end"]), str(r["cold_end"]),
                  str(r["records_behind"]), "-" if secs is None else f"{secs:.1f}", r["method"],
                  r.get("error") or "")
    out_console.print(t)
    for r in d["partitions"]:  # cold's position not proven by identity: say why, per partition
        if r["method"] in ("unproven", "log_append_time"):
            out_console.print(f"{r['topic']}[{r['partition']}]: {r['basis']}")


def _render_remap(d: dict[str, Any]) -> None:
    t = Table(title=f"group {d['group']} → {d['target']}: " + ("APPLIED" if d["applied"] else "dry run"))
    for c in ("topic", "partition", "source offset", "source ts", "target offset", "method", "probes",
              "may re-read"):
        t.add_column(c)
    for r in d["partitions"]:
        t.add_row(r["topic"], str(r["partition"]), str(r["source_offset"]), str(r["source_timestamp"]),
                  str(r["target_offset"]), r["method"], str(r["probes"]), str(r.get("may_reread") or 0))
    out_console.print(t)
    if not d["applied"]:
        out_console.print("dry run: nothing written; add --apply to write these offsets on the cold cluster")


@kafka_app.command("checkpoint")
def checkpoint_cmd(
    ctx: typer.Context,
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="Group(s); default: the policies'.")] = None,
    source_bootstrap: SourceOpt = None,
) -> None:
    """Record each protected group's committed offsets on hot, with the last consumed record's
    timestamp and fingerprint."""
    topo, ledger = _context(ctx, need_topology=not (source_bootstrap and group), need_ledger=True)
    with _progress(ctx, "checkpointing consumer groups…"):
        out = api.checkpoint(topo, ledger, groups=group or None, source_bootstrap=source_bootstrap,
                             access=state(ctx).access())
    _say_notes(ctx, out.get("selection_notes") or [])
    emit(ctx, out, _render_checkpoint)


@kafka_app.command("lag")
def lag_cmd(
    ctx: typer.Context,
    topic: Annotated[list[str] | None, typer.Option("--topic", "-t", help="Topic(s); default: the policies'.")] = None,
    source_bootstrap: SourceOpt = None,
    target_bootstrap: TargetOpt = None,
) -> None:
    """Check topics and partition counts match, and how far the cold mirror is behind."""
    both = bool(source_bootstrap and target_bootstrap and topic)
    topo, _ = _context(ctx, need_topology=not both)
    with _progress(ctx, "measuring mirror lag…"):
        out = api.lag(topo, topics=topic or None, source_bootstrap=source_bootstrap,
                      target_bootstrap=target_bootstrap, access=state(ctx).access())
    _say_notes(ctx, out.get("selection_notes") or [])
    emit(ctx, out, _render_lag)


@kafka_app.command("remap")
def remap_cmd(
    ctx: typer.Context,
    group: Annotated[str | None, typer.Option("--group", "-g", help="The consumer group to remap.")] = None,
    all_groups: Annotated[bool, typer.Option("--all", help=(
        "Every group of the policies at once, from their newest checkpoints (shared searches; "
        "with --apply each group all-or-nothing)."))] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Write the offsets on cold (default: dry run).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Allow moving committed offsets backwards.")] = False,
    source_bootstrap: SourceOpt = None,
    target_bootstrap: TargetOpt = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Tie the audit record to a run.")] = None,
    who: Annotated[str | None, typer.Option("--who", help="Who applies (the audit row's actor).")] = None,
) -> None:
    """Find where GROUP must resume on the cold cluster; with --apply, write it there (all
    partitions or none, only while the group is empty there, never backwards unless --force)."""
    if force and not apply:
        raise UsageError("--force only makes sense with --apply")
    if all_groups == (group is not None):
        raise UsageError("give --group G or --all", hint="e.g. drt kafka remap --group billing")
    if all_groups:
        _remap_all(ctx, apply=apply, force=force, run_id=run_id, who=who)
        return
    assert group is not None
    topo, ledger = _context(ctx, need_topology=not (source_bootstrap and target_bootstrap), need_ledger=apply)
    with _progress(ctx, f"remapping group {group}…"):
        out = api.remap(topo, ledger, group, apply=apply, force=force, source_bootstrap=source_bootstrap,
                        target_bootstrap=target_bootstrap, run_id=run_id, access=state(ctx).access(), who=who)
    emit(ctx, out, _render_remap)


def _remap_all(ctx: typer.Context, *, apply: bool, force: bool, run_id: str | None, who: str | None) -> None:
    st = state(ctx)
    topo, ledger = st.topology(), st.ledger()
    groups, notes = api.protected_groups(topo, ledger=ledger, access=st.access())
    if not groups:
        raise ConfigError("no consumer groups in the topology" + (f" ({'; '.join(notes)})" if notes else ""),
                          hint="list them under policies.kafka[].groups or groups_regex")
    _say_notes(ctx, notes)
    with _progress(ctx, f"remapping {len(groups)} group(s)…"):
        rm = remap_many(topo, ledger, groups, access=st.access(), audit=not apply, run_id=run_id, who=who)
        applied = (apply_many(topo, ledger, rm["groups"], force=force, access=st.access(), run_id=run_id,
                              who=who) if apply and rm["groups"] else None)
    out: dict[str, Any] = {
        "groups": {g: {"partitions": parts, "may_reread": sum(int(r.get("may_reread") or 0) for r in parts),
                       **({} if applied is None else applied["groups"].get(g, {}))}
                   for g, parts in rm["groups"].items()},
        "not_checkpointed": rm["missing"], "applied": applied is not None, "selection_notes": notes,
        "failed": [] if applied is None else applied["failed"],
        **{k: rm[k] for k in ("duration_s", "distinct_searches", "fetches", "mm2", "mm2_checkpoints") if k in rm}}
    emit(ctx, out, _render_remap_all)
    if out["failed"] or (apply and out["not_checkpointed"]):
        raise typer.Exit(EXIT_PROBLEM)


def _render_remap_all(d: dict[str, Any]) -> None:
    t = Table(title=f"{len(d['groups'])} group(s): " + ("APPLIED" if d["applied"] else "dry run"))
    for c in ("group", "partitions", "exact", "may re-read", "result"):
        t.add_column(c)
    for g, r in sorted(d["groups"].items()):
        result = ("applied" if r.get("applied") else f"FAILED: {r.get('error')}") if d["applied"] else "planned"
        t.add_row(g, str(len(r["partitions"])), str(sum(1 for p in r["partitions"] if p["method"] == "exact")),
                  str(r["may_reread"]), result)
    out_console.print(t)
    if d["not_checkpointed"]:
        out_console.print(f"never checkpointed (not remapped): {', '.join(d['not_checkpointed'])}")
    if not d["applied"]:
        out_console.print("dry run: nothing written; add --apply to write these offsets on the cold cluster")


def register(app: typer.Typer) -> None:
    app.add_typer(kafka_app, name="kafka")
