"""`drt distcp SRC DST` and `drt replicate POLICY`: file replication (docs/design.md §1.1)."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import EXIT_PROBLEM, Interrupted, UsageError
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
        if r.get("proof_basis"):
            out_console.print(f"  proof {r['proof_basis']}")
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
        if r.get("log_file"):
            out_console.print(f"  log {r['log_file']}")
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
    shown = False  # the bar starts with the copy's plan: a run refused before it prints nothing (issue 43 #9)

    def cb(kind: str, n: int) -> None:
        nonlocal shown
        if not shown:
            shown = True
            bar.start()
        if kind == "plan":
            bar.update(task, total=n, completed=0)
        elif kind == "bytes":
            bar.advance(task, n)
        elif kind == "file":
            bar.update(task, files=bar.tasks[0].fields["files"] + n)

    try:
        yield cb
    finally:
        if shown:
            bar.stop()


def _optional_topology(ctx: typer.Context) -> tuple[Topology | None, Ledger | None]:
    """The topology and ledger when a topology file is configured; a bare `distcp` works without."""
    st = state(ctx)
    if st.config or os.environ.get("DRT_CONFIG") or Path(DEFAULT_CONFIG).exists():
        return st.topology(), st.ledger()
    return None, None


# Hadoop DistCp's options (DistCp 3.4's `distcp` usage), each in DistCp's own spelling, so that a
# pasted `hadoop distcp -update -delete SRC DST` runs (issue 43 #8). Three kinds:
# - options of `drt distcp` under DistCp's name: -update -overwrite -delete -append -bandwidth -m
#   -p[…] -filters -i -log -strategy -numListstatusThreads -diff -rdiff, and -f FILE (its lines are
#   the sources: _DistcpCommand.parse_args); -v is drt's global -v (more logging);
# - DISTCP_IGNORED: accepted, with a note on stderr, because drt already does what they ask or
#   more (they tune DistCp's MapReduce job, or loosen a check drt keeps);
# - DISTCP_SPELLINGS: no equivalent: refused (exit 2) before parsing, saying why (click would
#   otherwise read `-atomic` as `-a` `-t` … and answer "No such option: -a").
DISTCP_SPELLINGS: dict[str, str] = {
    "-atomic": "has no equivalent: drt places each file whole under its own name (temporary name, "
               "verified, renamed) but does not swap the whole tree in at once; drop it, or copy into a "
               "new directory and rename that",
    "-tmp": "has no equivalent (it is -atomic's staging directory): each file's temporary sits beside it",
    "-async": "has no equivalent: drt distcp runs in the foreground until the copy ends; put it in the "
              "background (&) or schedule it (the dr_hdfs_replication DAG)",
    "-xtrack": "has no equivalent: with -log DIR every file deleted from the target is a line of the log",
    "-updateRoot": "has no equivalent: -p applies to files here; directories (the root among them) keep "
                   "the target's own attributes",
    "-D": "has no equivalent: Hadoop properties are not read; set the clusters in the topology file",
}
#: DistCp options accepted with no effect -> (takes a value, the note printed on stderr)
DISTCP_IGNORED: dict[str, tuple[bool, str]] = {
    "-skipcrccheck": (False, "files are still compared by checksum or content (never by size alone) and "
                             "each copy is verified"),
    "-direct": (False, "each file is still written under a temporary name and renamed into place"),
    "-copybuffersize": (True, "the copy buffer is drt's own"),
    "-blocksperchunk": (True, "files are copied whole, each by one worker"),
    "-useiterator": (False, "the listing is drt's own"),
    "-filelimit": (True, "deprecated and ignored by DistCp too"),
    "-sizelimit": (True, "deprecated and ignored by DistCp too"),
}
#: the DistCp options `drt distcp` takes under DistCp's own name (for `drt replicate`'s answer)
DISTCP_ACCEPTED = ("-update", "-overwrite", "-delete", "-append", "-bandwidth", "-m", "-p", "-filters", "-i",
                   "-log", "-strategy", "-numListstatusThreads", "-diff", "-rdiff", "-f")

#: DistCp's -p letters -> --preserve values ("b": the block size is always kept HDFS -> HDFS)
P_LETTERS = {"u": "owner", "g": "group", "p": "permissions", "a": "acl", "x": "xattr", "t": "times", "b": ""}
#: what a bare -p preserves (DistCp's default rbugpct, less what is not preserved here)
P_DEFAULT = "bugpt"
PRESERVE_WORDS = {"perm": "permissions", "permissions": "permissions", "times": "times", "owner": "owner",
                  "user": "owner", "group": "group", "acl": "acl", "xattr": "xattr"}


def distcp_spelling(args: list[str], command: str = "distcp") -> str | None:
    """The error for a DistCp option with no equivalent in ``args`` (before ``--``), or None; for
    `drt replicate` every DistCp option (a policy's options are in the topology)."""
    for a in args:
        if a == "--":
            return None
        name = a.split("=", 1)[0]
        if name.startswith("-D") and len(name) > 2:
            name = "-D"
        if name in DISTCP_SPELLINGS:
            return f"DistCp's {a} {DISTCP_SPELLINGS[name]}"
        if command == "replicate" and (name in DISTCP_ACCEPTED or name in DISTCP_IGNORED or name.startswith("-p")):
            return (f"DistCp's {a} is not an option of drt replicate: a policy's copy options are set in the "
                    "topology file (policies.hdfs[].options); or run drt distcp SRC DST with it")
    return None


def read_source_list(path: str) -> list[str]:
    """DistCp's ``-f``: a local file listing the sources, one URI or path a line (blank lines and
    ``#`` comments ignored); UsageError when it cannot be read or lists none."""
    if "://" in path and not path.startswith("file://"):
        raise UsageError(f"-f {path}: the source list is read from a local file here",
                         hint="copy it to this machine first (hdfs dfs -get) and pass its path")
    local = path[len("file://"):] if path.startswith("file://") else path
    try:
        text = Path(local).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"-f {path}: cannot read it ({type(exc).__name__}: {exc})",
                         hint="name a local file with one source URI a line") from None
    out = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if not out:
        raise UsageError(f"-f {path}: lists no source", hint="one source URI a line")
    return out


def preserve_list(words: str | None, letters: str | None) -> list[str]:
    """``--preserve perm,times,owner,group,acl,xattr`` and DistCp's ``-p[ugpaxtb]`` as CopyOptions.preserve
    (-pa implies the permission, as in DistCp); UsageError for anything else."""
    keep: list[str] = []
    for w in (words or "").split(","):
        w = w.strip()
        if not w:
            continue
        if w not in PRESERVE_WORDS:
            raise UsageError(f"unknown --preserve value {w!r}",
                             hint="use perm, times, owner, group, acl, xattr (comma-separated)")
        keep.append(PRESERVE_WORDS[w])
    for ch in letters or "":
        if ch in ("r", "c", "e"):
            what = {"r": "replication", "c": "checksum type", "e": "erasure coding policy"}[ch]
            raise UsageError(f"-p{letters}: {ch} ({what}) is not preserved here (the target's own setting applies)",
                             hint=f"drop {ch!r}: -p takes u g p a x t b")
        if ch not in P_LETTERS:
            raise UsageError(f"-p{letters}: unknown letter {ch!r}", hint="-p takes u g p a x t b (e.g. -pugpt)")
        if P_LETTERS[ch]:
            keep.append(P_LETTERS[ch])
    if "acl" in keep:
        keep.append("permissions")
    return sorted(set(keep), key=keep.index)


def read_filters(path: str) -> list[str]:
    """DistCp's -filters file: one regular expression a line (blank lines ignored); UsageError
    naming the file and line for one that is not."""
    import re

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"-filters {path}: cannot read it ({type(exc).__name__}: {exc})",
                         hint="name a local file of regular expressions, one a line") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            re.compile(line)
        except re.error as exc:
            raise UsageError(f"-filters {path}, line {n}: {line!r} is not a regular expression ({exc})",
                             hint="fix that line (Python's re syntax, close to Java's)") from None
        out.append(line)
    return out


class _DistcpCommand(TyperCommand):
    """DistCp's spellings that click cannot take as they are: a bare ``-p`` (no letters) is ``-p`` +
    :data:`P_DEFAULT` (click would take the next word, the source, as its letters); ``-f FILE`` is
    replaced by the sources it lists; the options of :data:`DISTCP_IGNORED` are taken out (their
    notes kept in ``ctx.meta["distcp_notes"]``, printed once the command is accepted)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        out: list[str] = []
        notes: list[str] = []
        done = False
        i = 0
        while i < len(args):
            a = args[i]
            name, eq, value = a.partition("=")
            if done:
                out.append(a)
            elif a == "--":
                done = True
                out.append(a)
            elif a == "-p":
                out.append("-p" + P_DEFAULT)
            elif name == "-f":
                if not eq:
                    if i + 1 >= len(args):
                        raise UsageError("-f needs a value: a local file listing the sources, one a line")
                    i += 1
                    value = args[i]
                out.extend(read_source_list(value))
            elif name in DISTCP_IGNORED:
                takes, why = DISTCP_IGNORED[name]
                if takes and not eq:
                    if i + 1 >= len(args):
                        raise UsageError(f"DistCp's {name} needs a value")
                    i += 1
                notes.append(f"note: DistCp's {name} is accepted and has no effect here: {why}")
            else:
                out.append(a)
            i += 1
        ctx.meta["distcp_notes"] = notes
        return super().parse_args(ctx, out)


def register(app: typer.Typer) -> None:
    @app.command("distcp", cls=_DistcpCommand)
    def distcp_cmd(
        ctx: typer.Context,
        sources: Annotated[list[str], typer.Argument(
            metavar="SOURCE", help="file:///…, hdfs://<cluster>/…, webhdfs://host:port/…, s3://…; several: "
                                      "each is copied to TARGET/<its name>", show_default=False)],
        target: Annotated[str, typer.Argument(help="where the tree is copied to (same URI forms)")],
        update: Annotated[bool, typer.Option("--update", "-update", help="Replace target files that differ from the source "
                                                           "(compared by checksum or content). Without --update "
                                                           "or --overwrite only missing files are copied "
                                                           "(DistCp's default).")] = False,
        overwrite: Annotated[bool, typer.Option("--overwrite", "-overwrite", help="Rewrite every file.")] = False,
        delete: Annotated[bool, typer.Option("--delete", "-delete",
                                             help="Delete target files the source no longer has.")] = False,
        append: Annotated[bool, typer.Option("--append", "-append", help=(
            "DistCp's -append (with --update): a target file shorter than its source gets the source's "
            "tail appended when its bytes are the source's prefix (proven by SHA-256 or the composite "
            "CRC32C), else it is copied whole; --append-only GLOB does this for some files only."))] = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would be copied/deleted.")] = False,
        engine: Annotated[str, typer.Option("--engine", help="local (threads) or spark.")] = "local",
        workers: Annotated[int, typer.Option("--workers", "-m", min=1, max=512,
                                             help="Parallel copies.")] = 8,
        strategy: Annotated[str, typer.Option("--strategy", "-strategy", help="dynamic: each worker takes the next "
                                              "chunk of files when done; uniformsize: the files split up front "
                                              "into one list of equal bytes per worker.")] = "dynamic",
        list_threads: Annotated[int, typer.Option("--list-threads", "-numListstatusThreads", min=1, max=128, help=(
            "Threads listing the source (its top directories' subtrees in parallel)."))] = 1,
        bandwidth: Annotated[float | None, typer.Option("--bandwidth-mb-s", help="Limit in MB/s (total).")] = None,
        bandwidth_per_map: Annotated[float | None, typer.Option("-bandwidth", metavar="MB", min=0.0, help=(
            "DistCp's -bandwidth: MB/s per worker (DistCp: per map); the total limit is this × -m."),
            show_default=False)] = None,
        include: Annotated[list[str] | None, typer.Option("--include", help="Glob of files to copy (repeat).")] = None,
        exclude: Annotated[list[str] | None, typer.Option("--exclude", help="Glob of files to leave (repeat).")] = None,
        filters: Annotated[str | None, typer.Option("--filters", "-filters", metavar="FILE", help=(
            "A file of regular expressions, one a line: a file whose path relative to the source "
            "(\"/a/b.txt\"), or one of its directories, matches one whole is not copied."))] = None,
        append_only: Annotated[list[str] | None, typer.Option("--append-only",
                                                              help="Glob of files that only grow.")] = None,
        proof: Annotated[str, typer.Option("--proof", help=(
            "What proves a target file equal to its source. checksum (default): each side's own checksum — "
            "HDFS→HDFS the DataNodes' MD5-of-MD5-of-CRC32C, a function of each 512-byte chunk's CRC32C (a "
            "chunk rewritten with other bytes of the same CRC32C passes, as with DistCp -update); a local "
            "target is read back. content: every file kept is read on both sides and compared byte for "
            "byte (each run a full comparison) and every file copied is read back and its SHA-256 compared "
            "with the source bytes read. The run's JSON says which (proof, proof_basis)."))] = "checksum",
        preserve: Annotated[str | None, typer.Option("--preserve", help="perm,times,owner,group,acl,xattr "
                                                     "(owner/group: the target's superuser on HDFS; "
                                                     "acl/xattr: HDFS on both ends)")] = None,
        p_letters: Annotated[str | None, typer.Option("-p", metavar="[ugpaxtb]", help=(
            "DistCp's spelling of --preserve: u owner, g group, p perm, a acl (+perm), x xattr, t times, "
            "b block size (always kept HDFS→HDFS); bare -p = -pbugpt."), show_default=False)] = None,
        ignore_failures: Annotated[bool, typer.Option("--ignore-failures", "-i", help=(
            "DistCp's -i. Always so here: a file that still fails after its retries is listed and the "
            "run goes on; the exit code is then 1."))] = False,
        log_dir: Annotated[str | None, typer.Option("--log", "-log", metavar="DIR", help=(
            "Write <DIR>/<run id>.jsonl: the run, then one line per file copied, skipped, deleted or "
            "failed (a path or URI)."))] = None,
        diff: Annotated[tuple[str, str] | None, typer.Option("--diff", "-diff", metavar="S1 S2", help=(
            "With --update: copy the source's snapshot S2, applying only the snapshot diff S1→S2 when "
            "the target's last run read the snapshot now named S1 — the same snapshot, by its HDFS "
            "snapshot id, not a later one given its name — else S2 is listed and the run says why. A "
            "snapshot diff does not report a file rewritten in place (TRUNCATE + APPEND + SETTIMES back "
            "to its size and mtime: HDFS's own limit); a run without -diff compares every file."),
            show_default=False)] = None,
        rdiff: Annotated[tuple[str, str] | None, typer.Option("--rdiff", "-rdiff", metavar="S2 S1", help=(
            "With --update: put the target back to the source's snapshot S1 (files S1 lacks are "
            "deleted): when the target's last run read S2 (by its snapshot id), the paths the diff "
            "S2→S1 names are listed in S1, else S1 is listed. The same limit as -diff."),
            show_default=False)] = None,
        spark_master: Annotated[str | None, typer.Option(
            "--spark-master", help="With --engine spark: the Spark master (local[N], spark://h:7077, yarn, "
                                   "k8s://…); default: $DRT_SPARK_MASTER, the clusters' spark.master.")] = None,
    ) -> None:
        """Copy a directory tree like Hadoop DistCp: incremental, atomic, checksummed.

        DistCp's own spellings work as they are (-update -overwrite -delete -append -bandwidth -m -p…
        -filters -i -log -strategy -numListstatusThreads -diff -rdiff; -f FILE: the sources it lists;
        -v: more logging). Accepted with no effect (a note says so): -skipcrccheck -direct
        -copybuffersize -blocksperchunk -useiterator -filelimit -sizelimit. No equivalent (refused,
        saying why): -atomic -tmp -async -xtrack -updateRoot -D.
        """
        from dr_toolkit.copy.api import distcp, distcp_sources
        from dr_toolkit.copy.request import CopyRequest

        del ignore_failures  # the behaviour, always (see its help)
        if engine not in ("local", "spark"):
            raise UsageError(f"unknown engine {engine!r}", hint="use --engine local or --engine spark")
        if strategy not in ("dynamic", "uniformsize"):
            raise UsageError(f"unknown -strategy {strategy!r}", hint="use dynamic or uniformsize")
        if spark_master is not None:
            if engine != "spark":
                raise UsageError("--spark-master needs --engine spark", hint="add --engine spark")
            from dr_toolkit.spark.session import check_master

            check_master(spark_master)
        if update and overwrite:
            raise UsageError("--update and --overwrite do not go together", hint="pick one")
        if append and not update:
            raise UsageError("-append needs --update (as DistCp requires)", hint="add -update")
        if bandwidth_per_map is not None:
            if bandwidth is not None:
                raise UsageError("-bandwidth and --bandwidth-mb-s do not go together",
                                 hint="pick one: -bandwidth is per worker, --bandwidth-mb-s the total")
            bandwidth = bandwidth_per_map * workers
        if delete and not (update or overwrite):
            raise UsageError("--delete needs --update or --overwrite (as DistCp requires)",
                             hint="add --update to make the target equal the source")
        if (diff or rdiff) and not update:
            raise UsageError(f"{'-diff' if diff else '-rdiff'} needs --update (as DistCp requires)", hint="add --update")
        if diff and rdiff:
            raise UsageError("-diff and -rdiff do not go together", hint="pick one")
        if (diff or rdiff) and len(sources) > 1:
            raise UsageError(f"{'-diff' if diff else '-rdiff'} takes one source (the snapshottable directory)",
                             hint="copy one source at a time")
        keep = preserve_list(preserve, p_letters)
        regexes = read_filters(filters) if filters is not None else []
        if append:
            append_only = [*(append_only or []), "*"]
        try:
            options = CopyOptions(update=update, overwrite=overwrite, delete=delete, include=include or [],
                                  exclude=exclude or [], exclude_regex=regexes, append_only=append_only or [],
                                  preserve=keep, bandwidth_mb_s=bandwidth, workers=workers, engine=engine,
                                  strategy=strategy, log_dir=log_dir, list_threads=list_threads,
                                  proof=proof)  # checked by CopyOptions (one line, exit 2)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        st = state(ctx)
        for note in ctx.meta.get("distcp_notes", []):
            err_console.print(note, markup=False, highlight=False)
        topology, ledger = _optional_topology(ctx)
        where: dict[str, Any] = {"access": st.access(), "topology": topology, "ledger": ledger}
        with _sigterm() as ev, _progress(not st.json and not dry_run and err_console.is_terminal) as cb:
            request = CopyRequest(sources[0], target, options=options, dry_run=dry_run, progress=cb, cancel=ev,
                                  spark_master=spark_master, diff=diff, rdiff=rdiff,
                                  more_sources=tuple(sources[1:]))
            if len(sources) == 1:
                r = distcp(request, **where)
                emit(ctx, r.to_json(), _render)
                if not r.ok:
                    raise typer.Exit(EXIT_PROBLEM)
                return
            results = distcp_sources(request, **where)
        rows = [r.to_json() for r in results]
        totals = {k: sum(int(r[k]) for r in rows) for k in FIELDS[1:-1]}
        emit(ctx, {"sources": sources, "target": target, **totals,
                   "duration_s": round(sum(r["duration_s"] for r in rows), 3), "results": rows}, _render)
        if not all(r.ok for r in results):
            raise typer.Exit(EXIT_PROBLEM)

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
        with _sigterm() as ev, _progress(not st.json and not dry_run and err_console.is_terminal) as cb:
            results = replicate_policy(st.topology(), policy, st.ledger(), dry_run=dry_run, engine=engine,
                                       progress=cb, access=st.access(), cancel=ev)
        rows = [r.to_json() for r in results]
        totals = {k: sum(int(r[k]) for r in rows) for k in FIELDS[1:-1]}
        out = {"policy": policy, **totals, "mode": ",".join(sorted({r["mode"] for r in rows})),
               "manifest_id": rows[0]["manifest_id"] if len(rows) == 1 else [r["manifest_id"] for r in rows],
               "duration_s": round(sum(r["duration_s"] for r in rows), 3), "results": rows}
        emit(ctx, out, _render)
        if not all(r.ok for r in results):
            raise typer.Exit(EXIT_PROBLEM)
