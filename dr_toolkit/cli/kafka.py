"""`drt kafka checkpoint | lag | remap`: consumer offsets across the mirror (DESIGN §1.2)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import ConfigError, UsageError
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
        from dr_toolkit.ledger import Ledger

        return None, (Ledger.open("sqlite:///drt-ledger.db") if need_ledger else None)
    return topo, st.ledger()


@contextlib.contextmanager
def _progress(ctx: typer.Context, what: str) -> Iterator[None]:
    if state(ctx).json:
        yield
        return
    with err_console.status(what):
        yield


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
    from dr_toolkit.kafka import api

    topo, ledger = _context(ctx, need_topology=not (source_bootstrap and group), need_ledger=True)
    with _progress(ctx, "checkpointing consumer groups…"):
        out = api.checkpoint(topo, ledger, groups=group or None, source_bootstrap=source_bootstrap,
                             access=state(ctx).access())
    emit(ctx, out, _render_checkpoint)


@kafka_app.command("lag")
def lag_cmd(
    ctx: typer.Context,
    topic: Annotated[list[str] | None, typer.Option("--topic", "-t", help="Topic(s); default: the policies'.")] = None,
    source_bootstrap: SourceOpt = None,
    target_bootstrap: TargetOpt = None,
) -> None:
    """Check topics and partition counts match, and how far the cold mirror is behind."""
    from dr_toolkit.kafka import api

    both = bool(source_bootstrap and target_bootstrap and topic)
    topo, _ = _context(ctx, need_topology=not both)
    with _progress(ctx, "measuring mirror lag…"):
        out = api.lag(topo, topics=topic or None, source_bootstrap=source_bootstrap,
                      target_bootstrap=target_bootstrap, access=state(ctx).access())
    emit(ctx, out, _render_lag)


@kafka_app.command("remap")
def remap_cmd(
    ctx: typer.Context,
    group: Annotated[str, typer.Option("--group", "-g", help="The consumer group to remap.")],
    apply: Annotated[bool, typer.Option("--apply", help="Write the offsets on cold (default: dry run).")] = False,
    force: Annotated[bool, typer.Option("--force", help="Allow moving committed offsets backwards.")] = False,
    source_bootstrap: SourceOpt = None,
    target_bootstrap: TargetOpt = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Tie the audit record to a run.")] = None,
    who: Annotated[str | None, typer.Option("--who", help="Who applies (the audit row's actor).")] = None,
) -> None:
    """Find where GROUP must resume on the cold cluster; with --apply, write it there (all
    partitions or none, only while the group is empty there, never backwards unless --force)."""
    from dr_toolkit.kafka import api

    if force and not apply:
        raise UsageError("--force only makes sense with --apply")
    topo, ledger = _context(ctx, need_topology=not (source_bootstrap and target_bootstrap), need_ledger=apply)
    with _progress(ctx, f"remapping group {group}…"):
        out = api.remap(topo, ledger, group, apply=apply, force=force, source_bootstrap=source_bootstrap,
                        target_bootstrap=target_bootstrap, run_id=run_id, access=state(ctx).access(), who=who)
    emit(ctx, out, _render_remap)


def register(app: typer.Typer) -> None:
    app.add_typer(kafka_app, name="kafka")
