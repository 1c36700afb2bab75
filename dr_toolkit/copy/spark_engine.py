"""The Spark copy engine: balanced groups of files copied by executors (``mapPartitions``).

Each executor rebuilds the filesystems from :class:`SparkJob` (pickled into the tasks) and
runs :func:`dr_toolkit.copy.execute.copy_one` per file, the same commit protocol as the local
engine: temp name, verify, rename.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dr_toolkit.copy.execute import PER_FILE_COST, CopyContext, Outcome, Throttle, copy_one
from dr_toolkit.copy.plan import FileTask
from dr_toolkit.fs.uri import Location
from dr_toolkit.secrets import Credentials


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


@dataclass
class SparkJob:
    """Everything an executor needs to rebuild the filesystems (pickled into the tasks)."""

    src: Location
    tgt: Location
    src_root: str
    tgt_root: str
    run_id: str
    preserve: tuple[str, ...]
    bytes_per_s: float | None
    stable_source: bool
    src_credentials: Credentials | None = None
    tgt_credentials: Credentials | None = None

    def __call__(self, tasks: Iterable[FileTask]) -> Iterator[dict[str, Any]]:
        from dr_toolkit.fs import open_fs_credentials

        ctx = CopyContext(open_fs_credentials(self.src, self.src_credentials),
                          open_fs_credentials(self.tgt, self.tgt_credentials),
                          self.src_root, self.tgt_root, self.run_id, self.preserve, Throttle(self.bytes_per_s),
                          stable_source=self.stable_source)
        for t in tasks:
            yield copy_one(ctx, t).to_dict()


def run_spark(job: SparkJob, tasks: list[FileTask], workers: int, master: str | None = None) -> list[Outcome]:
    """Copy on Spark: one partition per balanced group of files, results collected."""
    if not tasks:
        return []
    from dr_toolkit.spark.session import get_session

    spark = get_session(master, app_name=f"drt-distcp-{job.run_id}")
    groups = balance(tasks, max(workers, spark.sparkContext.defaultParallelism) * 2)
    if job.bytes_per_s:
        job.bytes_per_s = job.bytes_per_s / min(len(groups), spark.sparkContext.defaultParallelism)
    # one partition per group: key by group index, partition by that key, drop the key
    rdd = spark.sparkContext.parallelize(list(enumerate(groups)), len(groups)).partitionBy(
        len(groups), lambda k: int(k)).flatMap(lambda kv: kv[1])
    rows = rdd.mapPartitions(job).collect()
    return [Outcome(**r) for r in rows]
