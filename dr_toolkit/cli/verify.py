"""`drt verify SRC DST --key COLS`: verifyrep on Spark (docs/design.md §1.4, docs/contracts.md).

Exit 0 when BADROWS = 0, 1 when the replica differs, 2 for bad input (a missing path, a key
column that does not exist, files not in ``--format``), 3 when a dependency is unreachable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import EXIT_PROBLEM, DrtError, UsageError
from dr_toolkit.spark.session import check_master
from dr_toolkit.topology import DEFAULT_CONFIG
from dr_toolkit.verify.api import verify, verify_policy
from dr_toolkit.verify.request import VerifyRequest

if TYPE_CHECKING:
    from dr_toolkit.cli.common import State
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology


def _render(d: dict[str, Any]) -> None:
    bad = d["BADROWS"]
    colour = "green" if not bad else "red"
    out_console.print(f"[bold {colour}]{'replica matches' if not bad else f'{bad:,} bad rows'}[/]  "
                      f"{d['source']} → {d['target']}  ({d['duration_s']:.1f} s)")
    t = Table()
    for c in ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS",
              "CONTENT_DIFFERENT_ROWS", "source_rows", "peer_rows"):
        t.add_column(c, justify="right")
    t.add_row(*(f"{d[c]:,}" for c in ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS",
                                      "CONTENT_DIFFERENT_ROWS", "source_rows", "peer_rows")))
    out_console.print(t)
    if d.get("column_mismatches"):
        out_console.print("differences by column: " + ", ".join(f"{c} {n:,}" for c, n in
                                                                 d["column_mismatches"].items()))
    nts = (d.get("window") or {}).get("null_ts") or {}
    if nts.get("source") or nts.get("peer"):
        out_console.print(f"NULL timestamps (outside the window, not compared): source {nts.get('source', 0):,}, "
                          f"peer {nts.get('peer', 0):,}")
    for kind, rows in d["samples"].items():
        if rows:
            keys = ", ".join(str(list(s["key"].values())[0] if len(s["key"]) == 1 else s["key"]) for s in rows[:10])
            out_console.print(f"{kind}: {keys}{' …' if len(rows) > 10 else ''}")
    if d["duplicate_keys"].get("source") or d["duplicate_keys"].get("peer"):
        out_console.print(f"duplicate keys: source {d['duplicate_keys']['source']}, "
                          f"peer {d['duplicate_keys']['peer']}")
    if d["report_path"]:
        out_console.print(f"report: {d['report_path']}")


def _topology_and_ledger(st: State, required: bool) -> tuple[Topology | None, Ledger | None]:
    """The topology (and its ledger) when one is configured; plain paths need neither."""
    if not required and st.config is None and not Path(DEFAULT_CONFIG).exists():
        return None, None
    return st.topology(), st.ledger()


@contextmanager
def _progress(st: State) -> Iterator[Callable[[str], None]]:
    """A progress callback: the spinner's text on stderr (nothing with --json)."""
    status = None if st.json else err_console.status("verifying…")
    if status is not None:
        status.start()
    try:
        yield (lambda msg: status.update(msg)) if status is not None else (lambda _msg: None)
    finally:
        if status is not None:
            status.stop()


@contextmanager
def _spark_quiet(st: State) -> Iterator[None]:
    """Spark's own output kept off the terminal (issue 43 #3): the JVM's start-up lines, log4j's
    WARN/ERROR lines and stack traces (a file that is not Parquet: ~100 lines before drt's one), and
    Python warnings (pyspark on pandas 3). The JVM and its Python workers inherit file descriptor 2
    when they start, so fd 2 points at a scratch log while the verification runs; Python's own
    stderr (the spinner, drt's logging, the one-line error) keeps the terminal through a copy of the
    original descriptor. The scratch log is removed at the end; with -v nothing is hidden, and an
    error says so."""
    import logging
    import os
    import sys
    import tempfile
    import warnings

    if st.verbose >= 1:
        yield
        return
    sys.stderr.flush()
    fd, log = tempfile.mkstemp(prefix="drt-verify-spark-", suffix=".log")
    saved = os.dup(2)
    old_stderr = sys.stderr
    terminal = os.fdopen(os.dup(saved), "w", buffering=1, encoding=getattr(old_stderr, "encoding", None) or "utf-8",
                         errors="backslashreplace")
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and h.stream is old_stderr]
    os.dup2(fd, 2)
    sys.stderr = terminal
    for h in handlers:
        h.setStream(terminal)
    try:
        with warnings.catch_warnings():
            log_file = os.fdopen(os.dup(fd), "a", encoding="utf-8")

            def to_log(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                       file: Any = None, line: str | None = None) -> None:
                log_file.write(warnings.formatwarning(message, category, filename, lineno, line))

            warnings.showwarning = to_log
            try:
                yield
            finally:
                log_file.close()
    except DrtError as exc:
        exc.hint = (f"{exc.hint}; " if exc.hint else "") + "-v shows Spark's own output"
        raise
    finally:
        terminal.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sys.stderr = old_stderr
        for h in handlers:
            h.setStream(old_stderr)
        terminal.close()
        os.close(fd)
        os.unlink(log)


def register(app: typer.Typer) -> None:
    @app.command("verify")
    def verify_cmd(
        ctx: typer.Context,
        source: Annotated[str | None, typer.Argument(
            help="Source dataset: file:///dir, hdfs://<cluster>/dir, webhdfs://h:p/dir, s3://b/p, "
                 "table:db.name or jdbc:<url> (with --table).")] = None,
        target: Annotated[str | None, typer.Argument(help="Its replica, in the same forms.")] = None,
        key: Annotated[str | None, typer.Option("--key", "-k", help="Key column(s), comma-separated.")] = None,
        fmt: Annotated[str, typer.Option("--format", "-f", help="parquet, orc, csv (header) or json.")] = "parquet",
        peer_format: Annotated[str | None, typer.Option("--peer-format", help="The replica's format, if other.")
                               ] = None,
        start_time: Annotated[str | None, typer.Option(
            "--start-time", help="Window start (ISO 8601 or epoch s), inclusive.")] = None,
        end_time: Annotated[str | None, typer.Option("--end-time", help="Window end, exclusive.")] = None,
        ts_column: Annotated[str | None, typer.Option("--ts-column", help="Timestamp column of the window.")
                             ] = None,
        recompare_sleep: Annotated[float, typer.Option(
            "--recompare-sleep", help="Seconds to wait, then re-compare the keys that differed.")] = 0.0,
        report: Annotated[str | None, typer.Option("--report", help="Write the HTML report here.")] = None,
        policy: Annotated[str | None, typer.Option("--policy", help="Run this verify policy of the topology.")
                          ] = None,
        table: Annotated[str | None, typer.Option("--table", help="JDBC table (both sides).")] = None,
        peer_table: Annotated[str | None, typer.Option("--peer-table", help="The replica's JDBC table.")] = None,
        conn_id: Annotated[str | None, typer.Option("--conn-id", help="Connection with the JDBC user/password.")
                           ] = None,
        peer_conn_id: Annotated[str | None, typer.Option("--peer-conn-id", help="The replica's connection.")
                                ] = None,
        ignore_columns: Annotated[str | None, typer.Option(
            "--ignore-columns", help="Columns not to compare, comma-separated.")] = None,
        buckets: Annotated[int | None, typer.Option("--buckets", help="Hash buckets (default 32768).")] = None,
        sample_size: Annotated[int, typer.Option("--sample-size", help="Sample keys per counter.")] = 20,
        name: Annotated[str | None, typer.Option("--name", help="Dataset name for the ledger and watermark.")
                        ] = None,
        spark_master: Annotated[str | None, typer.Option(
            "--spark-master", help="Spark master (local[N], spark://h:7077, yarn, k8s://…); default: the topology's "
                                   "spark.master, $DRT_SPARK_MASTER, local[2].")] = None,
        abs_tol: Annotated[float, typer.Option("--abs-tol", min=0, help="Float columns: absolute tolerance.")] = 0.0,
        rel_tol: Annotated[float, typer.Option("--rel-tol", min=0, help="Float columns: relative tolerance "
                                                                        "(|a-b| <= abs_tol + rel_tol*|b|).")] = 0.0,
        ignore_spaces: Annotated[bool, typer.Option("--ignore-spaces", help="Strip spaces around strings.")] = False,
        ignore_case: Annotated[bool, typer.Option("--ignore-case", help="Compare strings case-insensitively.")
                               ] = False,
        families: Annotated[str | None, typer.Option(
            "--families", help="hbase://: only these column families (comma-separated).")] = None,
        row_prefixes: Annotated[str | None, typer.Option(
            "--row-prefixes", help="hbase://: only rows starting with one of these (comma-separated).")] = None,
        versions: Annotated[str | None, typer.Option(
            "--versions", help="hbase://: compare the newest N versions of each cell, or `all` (default 1).")
                            ] = None,
        raw: Annotated[bool, typer.Option(
            "--raw", help="hbase://: raw scan: delete markers and deleted cells are compared too.")] = False,
        read_mode: Annotated[str | None, typer.Option(
            "--read", help="hbase://: `region-servers` (TableInputFormat, the default) or `snapshot` (a table "
                           "snapshot per side read as HFiles from HDFS, deleted after; needs --hbase-rootdir).")
                             ] = None,
        hbase_rootdir: Annotated[str | None, typer.Option(
            "--hbase-rootdir", help="hbase:// with --read snapshot: each cluster's hbase.rootdir, SRC[,PEER] "
                                    "(hdfs://nn:8020/hbase).")] = None,
        as_of: Annotated[str | None, typer.Option(
            "--as-of", help="Compare both sides as they were at T (ISO 8601 or epoch s), or `recovery-point`: "
                            "the failover gate's current one. hbase:// (cells stamped before T), "
                            "--ts-column datasets, HDFS trees (the replication snapshot taken at or before T).")] = None,
    ) -> None:
        """Compare a dataset with its replica by key (HBase VerifyReplication's counters).

        Exit 1 when BADROWS > 0. Example: drt verify file:///data/hot/orders file:///data/cold/orders
        --key order_id --report orders.html. HBase tables, cell by cell as VerifyReplication compares
        them: drt verify hbase://hot/ns:table hbase://cold/ns:table [--start-time T --end-time T]
        [--families f1,f2] [--row-prefixes p1,p2] [--versions N|all] [--raw] (no --key: the row key is
        the key; the times bound the cells' timestamps).
        """
        st = state(ctx)
        if spark_master is not None:
            check_master(spark_master)
        if policy:
            if source or target:
                raise UsageError("--policy takes SRC and DST from the topology; do not pass them too")
            topo, ledger = _topology_and_ledger(st, True)
            assert topo is not None
            with _spark_quiet(st), _progress(st) as progress:
                result = verify_policy(topo, policy, ledger, progress=progress, access=st.access(),
                                       spark_master=spark_master)
        else:
            if not source or not target:
                raise UsageError("missing SRC and DST", hint="drt verify SRC DST --key COLS (or --policy NAME)")
            request = VerifyRequest.parse({k: v for k, v in dict(
                source=source, target=target, key=key, format=fmt, peer_format=peer_format, start_time=start_time,
                end_time=end_time, ts_column=ts_column, recompare_sleep_s=recompare_sleep, report_path=report,
                table=table, peer_table=peer_table, conn_id=conn_id, peer_conn_id=peer_conn_id,
                ignore_columns=ignore_columns, buckets=buckets, sample_size=sample_size, name=name,
                spark_master=spark_master, abs_tol=abs_tol, rel_tol=rel_tol, ignore_spaces=ignore_spaces,
                ignore_case=ignore_case, families=families, row_prefixes=row_prefixes, versions=versions, raw=raw,
                read=read_mode, hbase_rootdir=hbase_rootdir, as_of=as_of).items() if v is not None},
                where="drt verify")
            topo, ledger = _topology_and_ledger(st, request.wants_recovery_point)
            if request.wants_recovery_point:
                # the gate and its signals (copy, Kafka, HBase modules): only with --as-of gate
                from dr_toolkit.failover.gate import verify_as_of

                request = request.at(verify_as_of(topo, ledger, st.access()))
            with _spark_quiet(st), _progress(st) as progress:
                result = verify(request, access=st.access(), topology=topo, ledger=ledger, progress=progress)
        emit(ctx, result.to_json(), _render)
        if not result.ok:
            raise typer.Exit(EXIT_PROBLEM)
