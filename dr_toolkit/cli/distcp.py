"""`drt distcp SRC DST` and `drt replicate POLICY`: file replication (DESIGN 1.1)."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import Interrupted, UsageError
from dr_toolkit.topology import DEFAULT_CONFIG, CopyOptions

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

FIELDS = ("mode", "files_total", "files_copied", "bytes_copied", "files_skipped", "files_deleted", "files_failed",
          "duration_s")


def _render(data: dict[str, Any]) -> None:
    for r in data.get("results", [data]):
        dry = " (dry run: would copy)" if r.get("dry_run") else ""
        out_console.print(f"[bold]{r['source']}[/] → [bold]{r['target']}[/]{dry}")
        out_console.print(f"  mode {r['mode']}: {r['mode_reason']}")
        out_console.print("  " + "  ".join(f"{k}={r[k]}" for k in FIELDS[1:]) +
                          (f"  manifest={r['manifest_id']}" if r.get("manifest_id") else ""))
        if r.get("basis"):
            out_console.print("  skipped as equal, by basis: " +
                              ", ".join(f"{v} by {k}" for k, v in sorted(r["basis"].items())))
        if r.get("fallback_count"):
            out_console.print(f"  {r['fallback_count']} file(s) kept without comparing: "
                              f"{r['fallbacks'][0]['reason']} (e.g. {r['fallbacks'][0]['path']})")
        if r.get("entries_skipped"):
            out_console.print(f"  {r['entries_skipped']} source entries are not regular files and were not copied: " +
                              ", ".join(f"{v} {k}" for k, v in sorted(r.get("skipped_reasons", {}).items())))
        if r.get("files_type_changed"):
            out_console.print(f"  {r['files_type_changed']} target file(s) removed for a file/directory type change")
        for f in r.get("open_files", [])[:20]:
            out_console.print(f"  [yellow]open[/] {f['path']}: {f['reason']}")
        for f in r.get("failures", [])[:20]:
            out_console.print(f"  [red]failed[/] {f['path']}: {f['error']}")
        if r.get("listing_proven") is False:
            ch = r.get("listing_changing") or []
            out_console.print(f"  [red]not proven[/] the source kept changing while it was listed ({len(ch)} "
                              f"directories, e.g. {ch[0] or '/' if ch else '?'}): what was seen is copied, "
                              f"{r.get('deletes_deferred', 0)} deletions deferred, no safe time from this run; "
                              "run again, or set snapshots: true on a snapshottable source for an atomic listing")


@contextmanager
def _sigterm() -> Iterator[threading.Event]:
    """SIGTERM stops the run like Ctrl-C: in-flight files are abandoned (temp files removed,
    nothing half-visible), the ledger row says ``interrupted``, one line and exit 130 (Ctrl-C)
    or 143 (SIGTERM)."""
    import signal

    ev = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        ev.set()
        raise KeyboardInterrupt(f"signal {signum}")

    old = None
    if threading.current_thread() is threading.main_thread():
        old = signal.signal(signal.SIGTERM, handler)
    try:
        yield ev
    except KeyboardInterrupt as exc:
        ev.set()
        signum = signal.SIGTERM if str(exc) == f"signal {signal.SIGTERM}" else signal.SIGINT
        raise Interrupted("interrupted: the run stopped; files already committed stay, nothing partial is visible",
                          signum=int(signum), hint="run it again to finish") from None
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], None] | None]:
    if not enabled:
        yield None
        return
    from rich.progress import (  # only when a bar is shown (not for --json or --dry-run)
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    bar = Progress(TextColumn("copy"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                   TextColumn("{task.fields[files]} files"), console=err_console, transient=True)
    task = bar.add_task("copy", total=None, files=0)

    def cb(kind: str, n: int) -> None:
        if kind == "plan":
            bar.update(task, total=n, completed=0)
        elif kind == "bytes":
            bar.advance(task, n)
        elif kind == "file":
            bar.update(task, files=bar.tasks[0].fields["files"] + n)

    with bar:
        yield cb


def _optional_topology(ctx: typer.Context) -> tuple[Topology | None, Ledger | None]:
    """The topology and ledger when a topology file is configured; a bare `distcp` works without."""
    st = state(ctx)
    if st.config or os.environ.get("DRT_CONFIG") or Path(DEFAULT_CONFIG).exists():
        return st.topology(), st.ledger()
    return None, None


# Hadoop DistCp's single-dash options -> what to type here (click would read `-update` as `-u`
# `-p` `-d` ... and answer "No such option: -u").
DISTCP_SPELLINGS: dict[str, str] = {
    "-update": "is spelled --update here",
    "-overwrite": "is spelled --overwrite here",
    "-delete": "is spelled --delete here (with --update or --overwrite)",
    "-m": "is --workers N here (parallel copies)",
    "-bandwidth": "is --bandwidth-mb-s MB here (a total limit)",
    "-p": "is --preserve perm,times here (ownership, ACLs and xattrs are not copied)",
    "-filters": "has no file of regexes here: use --exclude GLOB (repeat) or --include GLOB",
    "-i": "has no equivalent: every file is retried, and files that still fail are listed with exit 1",
    "-log": "has no equivalent: every run is in the ledger (drt status) and its manifest",
    "-strategy": "has no equivalent: --engine spark balances the work by bytes and file count",
    "-numListstatusThreads": "has no equivalent: the listing runs on the --workers threads",
    "-diff": "is an HDFS policy option here (snapshots: true, with drt replicate POLICY)",
    "-rdiff": "has no equivalent: a copy never rolls the target back to a snapshot",
    "-atomic": "is always on here: each file is written under a temporary name and renamed",
    "-skipcrccheck": "has no equivalent: files are compared by checksum or content",
    "-f": "has no equivalent: give the source directory (and --include GLOB)",
    "-async": "has no equivalent: drt distcp waits for the copy",
    "-direct": "has no equivalent: files are always renamed into place (atomic)",
}


def distcp_spelling(args: list[str]) -> str | None:
    """The error for a DistCp single-dash spelling in ``args`` (before ``--``), or None."""
    for a in args:
        if a == "--":
            return None
        name = a.split("=", 1)[0]
        key = "-p" if (name.startswith("-p") and not name.startswith("--") and name != "-p" and
                       set(name[2:]) <= set("rbugpcaxt")) else name
        if key in DISTCP_SPELLINGS:
            return f"DistCp's {a} {DISTCP_SPELLINGS[key]}"
    return None


def register(app: typer.Typer) -> None:
    @app.command("distcp")
    def distcp_cmd(
        ctx: typer.Context,
        source: Annotated[str, typer.Argument(help="file:///…, hdfs://<cluster>/…, webhdfs://host:port/…, s3://…")],
        target: Annotated[str, typer.Argument(help="where the tree is copied to (same URI forms)")],
        update: Annotated[bool, typer.Option("--update", help="Replace target files that differ from the source "
                                                           "(compared by checksum or content). Without --update "
                                                           "or --overwrite only missing files are copied "
                                                           "(DistCp's default).")] = False,
        overwrite: Annotated[bool, typer.Option("--overwrite", help="Rewrite every file.")] = False,
        delete: Annotated[bool, typer.Option("--delete", help="Delete target files the source no longer has.")] = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would be copied/deleted.")] = False,
        engine: Annotated[str, typer.Option("--engine", help="local (threads) or spark.")] = "local",
        workers: Annotated[int, typer.Option("--workers", min=1, max=512, help="Parallel copies.")] = 8,
        bandwidth: Annotated[float | None, typer.Option("--bandwidth-mb-s", help="Limit in MB/s (total).")] = None,
        include: Annotated[list[str] | None, typer.Option("--include", help="Glob of files to copy (repeat).")] = None,
        exclude: Annotated[list[str] | None, typer.Option("--exclude", help="Glob of files to leave (repeat).")] = None,
        append_only: Annotated[list[str] | None, typer.Option("--append-only",
                                                              help="Glob of files that only grow.")] = None,
        preserve: Annotated[str | None, typer.Option("--preserve", help="perm,times")] = None,
        spark_master: Annotated[str | None, typer.Option(
            "--spark-master", help="With --engine spark: the Spark master (local[N], spark://h:7077, yarn, "
                                   "k8s://…); default: $DRT_SPARK_MASTER, the clusters' spark.master.")] = None,
    ) -> None:
        """Copy a directory tree like Hadoop DistCp: incremental, atomic, checksummed."""
        from dr_toolkit.copy.api import distcp

        if engine not in ("local", "spark"):
            raise UsageError(f"unknown engine {engine!r}", hint="use --engine local or --engine spark")
        if spark_master is not None:
            if engine != "spark":
                raise UsageError("--spark-master needs --engine spark", hint="add --engine spark")
            from dr_toolkit.spark.session import check_master

            check_master(spark_master)
        if update and overwrite:
            raise UsageError("--update and --overwrite do not go together", hint="pick one")
        if delete and not (update or overwrite):
            raise UsageError("--delete needs --update or --overwrite (as DistCp requires)",
                             hint="add --update to make the target equal the source")
        keep = []
        for p in (preserve or "").split(","):
            p = p.strip()
            if not p:
                continue
            if p not in ("perm", "permissions", "times"):
                raise UsageError(f"unknown --preserve value {p!r}", hint="use perm, times or perm,times")
            keep.append("permissions" if p.startswith("perm") else "times")
        try:
            options = CopyOptions(update=update, overwrite=overwrite, delete=delete, include=include or [],
                                  exclude=exclude or [], append_only=append_only or [],
                                  preserve=keep, bandwidth_mb_s=bandwidth, workers=workers,
                                  engine=engine)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        st = state(ctx)
        topology, ledger = _optional_topology(ctx)
        with _sigterm() as ev, _progress(not st.json and not dry_run) as cb:
            r = distcp(source, target, topology=topology, ledger=ledger, options=options, dry_run=dry_run,
                       progress=cb, access=st.access(), cancel=ev, spark_master=spark_master)
        emit(ctx, r.to_json(), _render)
        if not r.ok:
            raise typer.Exit(1)

    @app.command("replicate")
    def replicate_cmd(
        ctx: typer.Context,
        policy: Annotated[str, typer.Argument(help="an HDFS policy of the topology")],
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would be copied/deleted.")] = False,
        engine: Annotated[str | None, typer.Option("--engine", help="Override the policy's engine.")] = None,
    ) -> None:
        """Run one HDFS policy of the topology: every target, under the policy's lease."""
        from dr_toolkit.copy.api import replicate_policy

        st = state(ctx)
        with _sigterm() as ev, _progress(not st.json and not dry_run) as cb:
            results = replicate_policy(st.topology(), policy, st.ledger(), dry_run=dry_run, engine=engine,
                                       progress=cb, access=st.access(), cancel=ev)
        rows = [r.to_json() for r in results]
        totals = {k: sum(int(r[k]) for r in rows) for k in FIELDS[1:-1]}
        out = {"policy": policy, **totals, "mode": ",".join(sorted({r["mode"] for r in rows})),
               "manifest_id": rows[0]["manifest_id"] if len(rows) == 1 else [r["manifest_id"] for r in rows],
               "duration_s": round(sum(r["duration_s"] for r in rows), 3), "results": rows}
        emit(ctx, out, _render)
        if not all(r.ok for r in results):
            raise typer.Exit(1)
