"""The copy stage: the plan applied to the target (DistCp's copy mappers, and the deletions its
committer makes).

:func:`execute` runs a :class:`~dr_toolkit.copy.plan.Plan` in order — moves staged through
temporary names (swaps and cycles), entries in the way of the source's tree and ``--delete``
deletions, the copies on an engine (a thread pool, local copy processes, or Spark), then the
``--preserve`` fix-ups of files kept — checking the run's fence before every destructive step.
Each file is copied and placed by :func:`dr_toolkit.copy.execute.copy_one` (temporary name,
verification, atomic rename); the outcomes are accounted by :func:`dr_toolkit.copy.commit.account`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from dr_toolkit.copy.commit import account, file_log, prune
from dr_toolkit.copy.execute import CopyContext, Outcome, Throttle, run_local
from dr_toolkit.copy.job import CopyJob
from dr_toolkit.copy.listing import Side
from dr_toolkit.copy.plan import FileTask, Plan
from dr_toolkit.copy.processes import PROCESS_MIN_FILES, run_processes
from dr_toolkit.copy.run import CopyResult, CopyRun
from dr_toolkit.copy.spark_engine import run_spark
from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.base import FileSystem, stage_name
from dr_toolkit.fs.webhdfs import credentials_for_executors
from dr_toolkit.secrets import redact
from dr_toolkit.topology import CopyOptions

#: the copy's log lines keep the name they had before the stages had modules of their own (stderr)
log = logging.getLogger("dr_toolkit.copy.api")


@contextmanager
def executor_tokens(job: CopyJob, src_fs: FileSystem, tgt_fs: FileSystem) -> Iterator[None]:
    """Spark executors hold no Kerberos ticket: for each kerberized WebHDFS side the driver fetches
    a delegation token with its own ticket and ships it inside the pickled job (never in the Spark
    conf, a log or the UI: :mod:`dr_toolkit.copy.spark_engine`); the tokens are cancelled when the
    job ends, whatever its outcome. A side that is not kerberized ships its credentials as before."""
    tokens: list[tuple[FileSystem, str]] = []
    stop = threading.Event()
    renewer: threading.Thread | None = None
    try:
        job.src_credentials, t1 = credentials_for_executors(src_fs, job.src_credentials)
        if t1:
            tokens.append((src_fs, t1))
        job.tgt_credentials, t2 = credentials_for_executors(tgt_fs, job.tgt_credentials)
        if t2:
            tokens.append((tgt_fs, t2))
        if tokens:
            log.info("Spark executors copy with %d HDFS delegation token(s) fetched by the driver", len(tokens))
            renewer = threading.Thread(target=_renew_tokens, args=(tokens, stop), name="drt-token-renewer",
                                       daemon=True)
            renewer.start()
        yield
    finally:
        stop.set()
        if renewer is not None:
            renewer.join(timeout=30)
        for fs, token in tokens:
            try:
                fs.cancel_delegation_token(token)  # type: ignore[attr-defined]  # a WebHdfsFileSystem
            except Exception as exc:  # noqa: BLE001 - the copy's outcome stands; the token still expires
                log.warning("a delegation token could not be cancelled (%s); it expires by itself (the "
                            "NameNode's dfs.namenode.delegation.token.renew-interval)", redact(str(exc)))


def _renew_tokens(tokens: list[tuple[FileSystem, str]], stop: threading.Event) -> None:
    """The driver renews the executors' tokens (with its own ticket, itself renewed from the keytab)
    at half of what is left of each, so a job longer than the NameNode's renew interval (1 day by
    default) keeps them valid — up to their maximum lifetime (7 days by default): past it, or when
    a renewal fails for good, the executors' requests are refused (SecurityException ->
    KerberosError: the files fail and the run says so, never a silent skip)."""
    wait = 0.0
    while not stop.wait(wait):
        nearest = None
        for fs, token in tokens:
            try:
                ends = fs.renew_delegation_token(token)  # type: ignore[attr-defined]  # a WebHdfsFileSystem
                nearest = ends if nearest is None else min(nearest, ends)
            except Exception as exc:  # noqa: BLE001 - tried again soon; the executors fail loudly if it expires
                log.warning("a delegation token could not be renewed (%s); trying again", redact(str(exc)))
                nearest = time.time() + 60 if nearest is None else min(nearest, time.time() + 60)
        wait = min(max(((nearest or time.time() + 7200) - time.time()) / 2, 1.0), 3600.0)


def execute(run: CopyRun, plan: Plan, read_root: str, result: CopyResult, run_id: str, *,
             stable: bool) -> set[str]:
    """Moves (staged), deletions, copies, pruning. Returns the paths left pending (failed)."""
    src, tgt, options, progress = run.src, run.tgt, run.options, run.progress
    creds, spark_master, cancel = run.creds, run.spark_master, run.cancel
    fs, root = tgt.fs, tgt.root
    pending: set[str] = set()
    gone: list[str] = []  # paths whose parents may now be empty
    deleted: list[tuple[str, str]] = []  # (rel, why) for the -log file
    if progress:
        progress("plan", plan.bytes_to_copy)
    # 1. moves, stage one: every source out of the way (swaps and cycles need it)
    staged: list[tuple[str, str, str]] = []
    for i, (old, new) in enumerate(plan.moves):
        tmp = stage_name(root, run_id, i)  # a counter: no two staged paths share a name
        tgt.check()
        try:
            fs.rename(fs.join(root, old), tmp)
            staged.append((old, new, tmp))
            gone.append(old)
        except (OSError, UnreachableError, ConfigError) as exc:
            log.warning("move %s → %s failed (%s); copying instead", old, new, exc)
            _copy_instead(src, read_root, plan, new)
    # 2. target entries that are not regular files in the way of the source's tree (a symlink where
    # the source has a directory: never followed) or, with --delete, not the source's; then target
    # files in the way of a type change, then --delete
    for rel, what in plan.odd:
        tgt.check()
        try:
            if fs.delete(fs.join(root, rel)):
                result.entries_deleted += 1
                result.deleted_entries.append({"path": rel, "reason": what})
            gone.append(rel)
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": f"remove {what}", "error": str(exc)})
    for rel, why in [(r, "type change") for r in plan.blockers] + [(r, "delete") for r in plan.deletes]:
        tgt.check()
        try:
            if fs.delete(fs.join(root, rel)):
                result.files_deleted += 1
                result.files_type_changed += why == "type change"
                deleted.append((rel, why))
            gone.append(rel)
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": why, "error": str(exc)})
            pending.add(rel)  # still on the target: the next run deletes it
    tgt.check()
    for d in prune(fs, root, gone, plan):
        result.entries_deleted += 1
        result.deleted_entries.append({"path": d, "reason": "directory the source does not have"})
    # 3. moves, stage two: into place
    for old, new, tmp in staged:
        tgt.check()
        try:
            fs.rename(tmp, fs.join(root, new))
            t = fs.stat(fs.join(root, new))
            e = plan.keep.get(new)  # absent: the file also changed and is copied over below
            if e is not None:
                plan.keep[new] = e.with_target(t.mtime if t else None, t.version if t else None)
            result.files_renamed += 1
        except (OSError, UnreachableError, ConfigError) as exc:
            log.warning("move %s → %s failed (%s); copying instead", old, new, exc)
            try:
                fs.delete(tmp)
            except (OSError, UnreachableError):
                pass
            _copy_instead(src, read_root, plan, new)
    # 4. copies
    bw = options.bandwidth_mb_s * 1e6 if options.bandwidth_mb_s else None
    job = CopyJob(src.loc, tgt.loc, read_root, tgt.root, run_id, tuple(options.preserve), bw, stable,
                  creds[0], creds[1], live_root=src.root if stable else None, fence=tgt.marker, proof=options.proof)
    if options.engine == "spark" and plan.copies:
        tgt.check()  # the executors check the marker; the driver's lease is checked before and after
        with executor_tokens(job, src.fs, tgt.fs):  # a kerberized HDFS: executors get delegation tokens
            outcomes = run_spark(job, plan.copies, options.workers, spark_master)
        for o in outcomes:
            if progress:
                progress("bytes", o.bytes)
                progress("file", 1)
    elif _on_processes(src, tgt, options, len(plan.copies), bw):
        tgt.check()

        def done(o: Outcome) -> None:
            if progress:
                progress("bytes", o.bytes)
                progress("file", 1)

        outcomes = run_processes(job, plan.copies, min(options.workers, os.cpu_count() or 1), cancel=cancel,
                                 check=tgt.check, on_done=done, strategy=options.strategy)
    else:
        ctx = CopyContext(src.fs, tgt.fs, read_root, tgt.root, run_id, tuple(options.preserve), Throttle(bw),
                          on_bytes=(lambda n: progress("bytes", n)) if progress else None, stable_source=stable,
                          cancel=cancel, live_root=src.root if stable else None, fence=tgt.fence,
                          proof=options.proof)
        outcomes = run_local(ctx, plan.copies, options.workers,
                             on_done=(lambda _o: progress("file", 1)) if progress else None,
                             strategy=options.strategy)
    pending |= account(plan, result, outcomes)
    for rel, perm, mtime in plan.fixups:  # 5. --preserve drift on files kept as they are
        if rel not in plan.keep:
            continue
        tgt.check()
        path = fs.join(root, rel)
        try:
            if perm is not None:
                fs.set_permission(path, perm)
            if mtime is not None:
                fs.set_times(path, mtime)
            t = fs.stat(path)  # a chmod or utime changes a local target's token (ctime): recorded anew
            e = plan.keep[rel]
            plan.keep[rel] = e.with_target(mtime if mtime is not None else (t.mtime if t else None),
                                           t.version if t else None)
            result.attributes_reapplied += 1
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": "preserve", "error": str(exc)})
            pending.add(rel)
    for rel, attrs in plan.attr_fixups:  # -p u/g/a/x drift on files kept as they are
        if rel not in plan.keep:
            continue
        tgt.check()
        try:
            fs.set_attributes(fs.join(root, rel), attrs)
            result.attributes_reapplied += 1
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": "preserve", "error": str(exc)})
            pending.add(rel)
    tgt.check()  # the manifest is recorded only by a run that held the target throughout
    result.files_skipped = max(0, plan.files_total - result.files_copied - result.files_failed)
    if options.log_dir:
        result.file_log = file_log(plan, outcomes, deleted)
    return pending


def processes_mode() -> str:
    """``DRT_COPY_PROCESSES``: ``auto`` (the default), ``on`` or ``off`` (checked before anything
    is written: ConfigError, exit 2)."""
    how = os.environ.get("DRT_COPY_PROCESSES", "auto").strip().lower() or "auto"
    if how not in ("auto", "on", "off"):
        raise ConfigError(f"DRT_COPY_PROCESSES={how!r} is not one of auto, on, off", where="environment",
                          hint="unset it for the default (auto)")
    return how


def _on_processes(src: Side, tgt: Side, options: CopyOptions, files: int, bw: float | None) -> bool:
    """Local to local is bound by the interpreter (one lock for every thread): on more than one
    core and with no bandwidth limit, the files are copied by processes (:func:`run_processes`)
    when there are enough of them to pay for starting the processes, or always with
    ``DRT_COPY_PROCESSES=on``; never with ``off``."""
    how = processes_mode()
    return (how != "off" and src.fs.kind == tgt.fs.kind == "local" and bw is None
            and min(options.workers, os.cpu_count() or 1) > 1 and (how == "on" or files >= PROCESS_MIN_FILES))


def _copy_instead(src: Side, read_root: str, plan: Plan, new: str) -> None:
    s = src.fs.stat(src.fs.join(read_root, new))
    plan.keep.pop(new, None)
    if s is not None and not s.is_dir:
        plan.copies.append(FileTask(new, s.size, s.mtime, permission=s.permission, reason="move failed",
                                    version=s.version, block_size=s.block_size))


