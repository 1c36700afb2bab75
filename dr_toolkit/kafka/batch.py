"""Many groups at once: checkpoint and remap thousands of consumer groups in one pass.

- one metadata call per cluster; the groups' committed offsets asked concurrently (the Kafka
  OffsetFetch of librdkafka takes one group per request: the requests overlap instead);
- watermarks read once per partition, and each distinct (partition, committed offset) — or,
  on cold, each distinct anchor — searched once, however many groups share it;
- the searches run on a small pool of probing consumers (each its own connection, small
  fetches, ``fetch.wait.max.ms`` = 1), never more than ``workers`` at once.

The answers are exactly those of :func:`dr_toolkit.kafka.api.checkpoint_row` and
:func:`dr_toolkit.kafka.remap.remap_partition` (same code, shared results).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from dr_toolkit.kafka.client import KafkaCluster

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

T = TypeVar("T")
K = TypeVar("K")
WORKERS = 8


class ClientPool:
    """One probing client per worker thread for one cluster, all closed together."""

    def __init__(self, make: Callable[[], KafkaCluster]) -> None:
        self._make = make
        self._local = threading.local()
        self._all: list[KafkaCluster] = []
        self._lock = threading.Lock()

    def get(self) -> KafkaCluster:
        c: KafkaCluster | None = getattr(self._local, "c", None)
        if c is None:
            c = self._make()
            self._local.c = c
            with self._lock:
                self._all.append(c)
        return c

    def stats(self) -> tuple[int, int]:
        with self._lock:
            return sum(c.fetches for c in self._all), sum(c.records_read for c in self._all)

    def close(self) -> None:
        with self._lock:
            for c in self._all:
                c.close()
            self._all.clear()


def run_all(fn: Callable[[K], T], keys: Iterable[K], workers: int) -> dict[K, T]:
    """``fn`` over every key on ``workers`` threads; the first error is raised."""
    keys = list(dict.fromkeys(keys))
    if len(keys) <= 1 or workers <= 1:
        return {k: fn(k) for k in keys}
    with cf.ThreadPoolExecutor(max_workers=min(workers, len(keys)), thread_name_prefix="drt-kafka") as ex:
        futs = {k: ex.submit(fn, k) for k in keys}
        return {k: f.result() for k, f in futs.items()}


def checkpoint_many(topology: Topology | None, ledger: Ledger | None, groups: list[str], *,
                    access: Access | None = None, source_bootstrap: str | None = None,
                    workers: int = WORKERS) -> dict[str, Any]:
    """Checkpoint ``groups`` (same rows as :func:`api.checkpoint`), sharing the work."""
    from dr_toolkit.kafka import api
    from dr_toolkit.ledger.store import new_id

    t0 = time.monotonic()
    taken_at = time.time()
    skew = api.skew_ms(topology)
    checkpoint_id = new_id("ckpt")
    with api.cluster(topology, "hot", bootstrap=source_bootstrap, access=access) as hot:
        pool = ClientPool(lambda: KafkaCluster(hot.bootstrap, credentials=None, timeout_s=hot.timeout_s,
                                               role="hot").with_conf(hot))
        try:
            have = hot.topics()
            _ = hot.admin  # one admin client shared by the threads
            committed = run_all(hot.committed, groups, workers)
            plan: dict[str, list[tuple[str, int]]] = {}
            for g in groups:
                topics = [t for t in dict.fromkeys([*api.policy_topics(topology, g, available=have),
                                                    *sorted({t for t, _ in committed[g]})])
                          if not api.topic_excluded(topology, g, t)]
                counts = api._partition_counts(hot, topics, have)
                plan[g] = [(t, p) for t in topics for p in range(counts[t])]
            parts = sorted({tp for tps in plan.values() for tp in tps})
            marks = _marks(hot, pool, parts, workers)
            keys = {(t, p, committed[g].get((t, p))) for g, tps in plan.items() for t, p in tps}
            shared = run_all(lambda k: api.checkpoint_row(pool.get(), "", k[0], k[1], k[2], taken_at, skew,
                                                          marks=marks[(k[0], k[1])]), keys, workers)
            fetches, records = pool.stats()
        finally:
            pool.close()
    rows = [{**shared[(t, p, committed[g].get((t, p)))], "group_id": g} for g in groups for t, p in plan[g]]
    duration = time.monotonic() - t0
    if ledger is not None and rows:
        ledger.add_checkpoint(checkpoint_id, list(rows))
        ledger.set_watermark("kafka", "checkpoint", taken_at,
                             {"checkpoint_id": checkpoint_id, "groups": len(groups), "duration_s": round(duration, 3)})
    return {"checkpoint_id": checkpoint_id, "groups": groups, "taken_at": taken_at, "duration_s": round(duration, 3),
            "partitions": rows, "stored": ledger is not None, "distinct_searches": len(keys),
            "fetches": fetches, "records_read": records}


def remap_many(topology: Topology | None, ledger: Ledger, groups: list[str], *, access: Access | None = None,
               target_bootstrap: str | None = None, workers: int = WORKERS, audit: bool = False,
               run_id: str | None = None, who: str | None = None) -> dict[str, Any]:
    """Remap (dry run) ``groups`` from their newest checkpoints, each distinct anchor once;
    ``audit``: one ``planned`` remap row per group in the ledger, as :func:`api.remap` writes."""
    from dr_toolkit.errors import ConfigError, DrtError
    from dr_toolkit.kafka import api
    from dr_toolkit.kafka.remap import MemoryPartition, remap_partition, worth_reading_whole

    t0 = time.monotonic()
    skew = api.skew_ms(topology)
    rows = ledger.latest_checkpoints(groups)
    missing = [g for g, r in rows.items() if not r]
    with api.cluster(topology, "cold", bootstrap=target_bootstrap, access=access) as cold:
        pool = ClientPool(lambda: KafkaCluster(cold.bootstrap, credentials=None, timeout_s=cold.timeout_s,
                                               role="cold").with_conf(cold))
        try:
            parts = sorted({(api.cold_topic(topology, r["topic"]), int(r["partition_id"]))
                            for rs in rows.values() for r in rs})
            counts = api._partition_counts(cold, sorted({t for t, _ in parts}))
            for g, rs in rows.items():  # as remap(): a checkpoint's partitions must all exist on cold
                for t in sorted({r["topic"] for r in rs}):
                    n_hot = len({r["partition_id"] for r in rs if r["topic"] == t})
                    if n_hot != counts[api.cold_topic(topology, t)]:
                        raise ConfigError(f"partition count mismatch for topic {t!r}: hot had {n_hot} in group "
                                          f"{g!r}'s checkpoint, cold has {counts[api.cold_topic(topology, t)]}",
                                          where=cold.bootstrap, hint="make the cold topic match the hot one")
            marks = _marks(cold, pool, parts, workers)

            def key(r: dict[str, Any]) -> tuple[Any, ...]:
                return (api.cold_topic(topology, r["topic"]), int(r["partition_id"]), r["committed_offset"] is None,
                        r.get("fingerprint"), r.get("record_timestamp"),
                        None if r.get("fingerprint") else r.get("taken_at"), r.get("timestamp_type") == api.TRIMMED)

            def one(k: tuple[Any, ...], reader: Any, compacted: bool) -> dict[str, Any]:
                ct, p, none, fp, ts, taken, trimmed = k
                if none:
                    return {"target_offset": None, "method": "none", "probes": 0, "duplicate_window": None,
                            "may_reread": 0}
                lo, hi = marks[(ct, p)]
                if trimmed:
                    return api.trimmed_remap(lo, hi)
                anchor = api._anchor({"fingerprint": fp, "record_timestamp": ts})
                return remap_partition(reader, ct, p, anchor, lo, hi, skew_ms=skew, compacted=compacted,
                                       use_index=not isinstance(reader, MemoryPartition),
                                       taken_at_ms=int(float(taken) * 1000) if taken is not None else None).as_dict()

            def whole(tp: tuple[str, int]) -> dict[tuple[Any, ...], dict[str, Any]]:
                """Every target of one partition from one sequential read of it (when the searches
                would cost more fetches); searched one by one if that read fails."""
                reader: Any = pool.get()
                compacted = reader.compacted(tp[0])
                try:
                    reader = MemoryPartition.load(reader, tp[0], tp[1], *marks[tp])
                except DrtError:
                    pass  # (e.g. an open transaction on cold) the searches read what they need
                return {k: one(k, reader, compacted) for k in by_partition[tp]}

            def task(t: tuple[str, Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
                if t[0] == "partition":
                    return whole(t[1])
                reader = pool.get()
                return {t[1]: one(t[1], reader, reader.compacted(t[1][0]))}

            keys = {key(r) for rs in rows.values() for r in rs}
            by_partition: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
            for k in sorted(keys, key=repr):
                by_partition.setdefault((k[0], k[1]), []).append(k)
            tasks: list[tuple[str, Any]] = []
            for tp, ks in by_partition.items():
                searches = sum(1 for k in ks if not k[2] and not k[6])
                if worth_reading_whole(searches, marks[tp][1] - marks[tp][0]):
                    tasks.append(("partition", tp))
                else:
                    tasks.extend(("key", k) for k in ks)
            shared = {k: v for got in run_all(task, tasks, workers).values() for k, v in got.items()}
            fetches, records = pool.stats()
        finally:
            pool.close()
    out = {g: [{"topic": r["topic"], "cold_topic": api.cold_topic(topology, r["topic"]),
                "partition": int(r["partition_id"]), "source_offset": r["committed_offset"], **shared[key(r)]}
               for r in rs] for g, rs in rows.items() if rs}
    mm2 = mm2_cross_check(topology, access, out, target_bootstrap)
    if audit:
        where = target_bootstrap or (topology.cold.kafka.bootstrap_servers
                                     if topology is not None and topology.cold.kafka is not None else "cold")
        for g, remapped in out.items():
            ledger.audit(component="kafka", action="remap", dry_run=True, status="planned", target=f"{g}@{where}",
                         run_id=run_id, who=who, after={f"{r['cold_topic']}[{r['partition']}]": r["target_offset"]
                                                        for r in remapped if r["target_offset"] is not None})
    return {"groups": out, "missing": missing, "duration_s": round(time.monotonic() - t0, 3),
            "distinct_searches": len(keys), "fetches": fetches, "records_read": records, **mm2}


def _marks(c: KafkaCluster, pool: ClientPool, parts: list[tuple[str, int]], workers: int,
           ) -> dict[tuple[str, int], tuple[int, int]]:
    """Every partition's (start, end): batched, and one at a time for any the batch refused."""
    from dr_toolkit.errors import DrtError

    try:
        many = c.watermarks_many(parts)
    except DrtError:
        many = {}
    marks = {tp: m for tp, m in many.items() if isinstance(m, tuple)}
    rest = [tp for tp in parts if tp not in marks]
    marks.update(run_all(lambda tp: pool.get().watermarks(*tp), rest, workers))
    return marks


def mm2_cross_check(topology: Topology | None, access: Access | None, out: dict[str, list[dict[str, Any]]],
         target_bootstrap: str | None) -> dict[str, Any]:
    """MM2's offset syncs (hot) and checkpoints (cold), each read once, cross-checked per group
    as :func:`api.remap` does; the counts of disagreements per source."""
    from dr_toolkit.errors import DrtError
    from dr_toolkit.kafka import api
    from dr_toolkit.kafka.mm2 import (
        cross_check,
        cross_check_checkpoints,
        read_all_checkpoints,
        read_offset_syncs,
    )

    res: dict[str, Any] = {}
    hot_ep = topology.hot.kafka if topology is not None else None
    cold_ep = topology.cold.kafka if topology is not None else None
    if hot_ep is not None and hot_ep.mm2_offset_syncs_topic and out:
        try:
            with api.cluster(topology, "hot", access=access) as hot:
                syncs = read_offset_syncs(hot, hot_ep.mm2_offset_syncs_topic)
            res["mm2"] = {"topic": hot_ep.mm2_offset_syncs_topic, "partitions_synced": len(syncs.by_partition),
                          "disagreements": sum(cross_check(parts, syncs) for parts in out.values())}
        except DrtError as exc:  # hot gone (the real disaster): the search alone decides
            res["mm2"] = {"topic": hot_ep.mm2_offset_syncs_topic, "error": exc.message}
    if cold_ep is not None and cold_ep.mm2_checkpoints_topic and out:
        try:
            with api.cluster(topology, "cold", bootstrap=target_bootstrap, access=access) as cold:
                cps = read_all_checkpoints(cold, cold_ep.mm2_checkpoints_topic, set(out))
            res["mm2_checkpoints"] = {
                "topic": cold_ep.mm2_checkpoints_topic,
                "partitions_checkpointed": sum(len(cps.get(g, {})) for g in out),
                "disagreements": sum(cross_check_checkpoints(parts, cps.get(g, {})) for g, parts in out.items())}
        except DrtError as exc:
            res["mm2_checkpoints"] = {"topic": cold_ep.mm2_checkpoints_topic, "error": exc.message}
    return res


def apply_many(topology: Topology | None, ledger: Ledger | None, remapped: dict[str, list[dict[str, Any]]], *,
               force: bool = False, access: Access | None = None, target_bootstrap: str | None = None,
               run_id: str | None = None, who: str | None = None, workers: int = WORKERS) -> dict[str, Any]:
    """Apply the remapped offsets of many groups (each all-or-nothing, as
    :func:`api.apply_offsets`), the groups' requests overlapped; one audit row per group."""
    from dr_toolkit.errors import DrtError
    from dr_toolkit.kafka import api

    if topology is not None:  # never onto a promoted (or read-only) cold cluster
        from dr_toolkit.zk.fencing import assert_offsets_apply_allowed

        assert_offsets_apply_allowed(topology, access=access)
    t0 = time.monotonic()
    with api.cluster(topology, "cold", bootstrap=target_bootstrap, access=access) as cold:
        _ = cold.admin

        def one(g: str) -> dict[str, Any]:
            offsets = {(r["cold_topic"], r["partition"]): int(r["target_offset"]) for r in remapped[g]
                       if r["target_offset"] is not None and r["method"] != "none"}
            try:
                return {"applied": True, **api.apply_offsets(cold, g, offsets, force=force)}
            except DrtError as exc:
                return {"applied": False, "error": exc.message}

        results = run_all(one, list(remapped), workers)
    if ledger is not None:
        for g, r in results.items():
            ledger.audit(component="kafka", action="apply_offsets", dry_run=False,
                         status="done" if r["applied"] else "failed", target=g, run_id=run_id, who=who,
                         before=r.get("before"), after=r.get("after"), message=r.get("error"))
    failed = sorted(g for g, r in results.items() if not r["applied"])
    return {"groups": results, "failed": failed, "duration_s": round(time.monotonic() - t0, 3)}
