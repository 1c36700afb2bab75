"""The Spark copy engine: balanced groups of files copied by executors (``mapPartitions``).

Work is batched: files are grouped by bytes and by count (:func:`group_count`,
:func:`balance`), one Spark task per group, and each task opens **one** filesystem client
pair and runs :func:`dr_toolkit.copy.execute.copy_one` per file — the same commit protocol
as the local engine: temp name, verify, rename — each rename into place (and each in-place
append) after the run's fencing token is checked on the target itself
(:class:`dr_toolkit.copy.state.Fence`: executors need no ledger). So an executor killed mid-copy leaves at
most ``.drt-tmp.*`` files (never a partial file under a real name); Spark re-runs the lost
group elsewhere, and the next run removes stale temp files. Credentials travel inside the
pickled task (never in the Spark conf, logs or UI).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dr_toolkit.copy.execute import PER_FILE_COST, Outcome
from dr_toolkit.copy.job import CopyJob, outcomes
from dr_toolkit.copy.plan import FileTask
from dr_toolkit.errors import ConfigError
from dr_toolkit.spark.executor_env import check_executors, missing_module
from dr_toolkit.spark.session import get_context, release_context

GROUP_BYTES = 512 << 20  # at most about this much data per Spark task
GROUP_FILES = 5000  # and at most about this many files


def balance(tasks: list[FileTask], groups: int) -> list[list[FileTask]]:
    """Split tasks into ``groups`` of similar weight (bytes + a per-file cost), largest first."""
    groups = max(1, min(groups, len(tasks)))
    bins: list[list[FileTask]] = [[] for _ in range(groups)]
    weight = [0] * groups
    for t in sorted(tasks, key=lambda t: -(t.size - t.offset)):
        i = min(range(groups), key=weight.__getitem__)
        bins[i].append(t)
        weight[i] += t.size - t.offset + PER_FILE_COST
    return [b for b in bins if b]


def group_count(tasks: list[FileTask], parallelism: int) -> int:
    """How many groups (= Spark tasks): at least two per core, and more when the work is large, so a
    group holds at most ~GROUP_BYTES and GROUP_FILES (a lost executor redoes one small group)."""
    total = sum(t.size - t.offset for t in tasks)
    want = max(2 * parallelism, -(-total // GROUP_BYTES), -(-len(tasks) // GROUP_FILES))
    return max(1, min(len(tasks), want))


def _run_groups(job: CopyJob) -> Callable[[Iterable[list[FileTask]]], Iterator[dict[str, Any]]]:
    def run(groups: Iterable[list[FileTask]]) -> Iterator[dict[str, Any]]:
        return job(t for g in groups for t in g)  # one filesystem client per Spark task
    return run


def run_spark(job: CopyJob, tasks: list[FileTask], workers: int, master: str | None = None) -> list[Outcome]:
    """Copy on Spark: one Spark task per balanced group of files, results collected.

    The master is ``master`` (else ``$DRT_SPARK_MASTER``, else the source/target cluster's
    ``spark.master``); an existing session or context (spark-submit) is used as it is, else a bare
    SparkContext is started (no SQL session: :func:`dr_toolkit.spark.session.get_context`)."""
    if not tasks:
        return []
    from pyspark import SparkContext  # the Spark client: loaded only for a Spark copy

    cluster = job.src.cluster_config or job.tgt.cluster_config
    started = SparkContext._active_spark_context is None
    launched = SparkContext._gateway is None
    sc = get_context(master, app_name=f"drt-distcp-{job.run_id}", endpoint=cluster.spark if cluster else None)
    try:
        rows = _copy_on(sc, job, tasks, workers)
    finally:
        if started:  # ours, tuned for copying: a later verify in this process starts its own session
            release_context(sc, jvm=launched)
    return outcomes(rows)


def _copy_on(sc: Any, job: CopyJob, tasks: list[FileTask], workers: int) -> list[dict[str, Any]]:
    check_executors(sc)  # one line, before any file is touched, when the executors cannot run the tasks
    parallelism = max(workers if str(sc.master).startswith("local") else 1, sc.defaultParallelism)
    groups = balance(tasks, group_count(tasks, parallelism))
    if job.bytes_per_s:
        job.bytes_per_s = job.bytes_per_s / min(len(groups), sc.defaultParallelism)
    # parallelize slices a list of n elements into n slices: exactly one group per task, no shuffle
    try:
        rows: list[dict[str, Any]] = sc.parallelize(groups, len(groups)).mapPartitions(_run_groups(job)).collect()
    except Exception as exc:
        why = missing_module(str(exc))
        if why:  # the executors cannot run the tasks at all: one line, not a JVM trace
            raise ConfigError(why, where=str(sc.master)) from None
        raise
    return rows
