"""Remap consumer groups onto the cold cluster and apply them there (docs/design.md §1.2): one path for
any number of groups — one group is a list of one.

**Never skip** (the invariant): the position applied for a group on a cold partition is such
that every record at an offset below it is a copy of a record the group had consumed on hot.
Exact where it can be proven (see :mod:`dr_toolkit.kafka.remap`), otherwise a position
provably safe under the hot cluster's ``kafka.max_clock_skew_s``, with the duplicate window.

- :func:`remap_groups` finds where each group resumes on cold from its checkpoint: watermarks read
  once per partition, each distinct anchor searched once however many groups share it (a
  partition with many targets read once, whole: :class:`~dr_toolkit.kafka.remap.MemoryPartition`),
  on a small pool of probing clients; MirrorMaker 2's offset syncs and checkpoints read once and
  used as second, re-read-only translations.
- :func:`apply_offsets` writes one group's offsets: all partitions or none (rolling back on a
  refusal), only while the group is empty on cold, never backwards unless forced.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError, ProblemFound, UnreachableError
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.mirror import WORKERS, ClientPool, Mirror, marks_of, run_all
from dr_toolkit.kafka.mm2 import cross_check, cross_check_checkpoints, read_all_checkpoints, read_offset_syncs
from dr_toolkit.kafka.remap import (
    DUP_SEP,
    NEXT_PREFIX,
    Anchor,
    LogTraits,
    MemoryPartition,
    PartitionReader,
    remap_partition,
    worth_reading_whole,
)
from dr_toolkit.kafka.rows import (
    LOG_APPEND_TIME,
    NONE,
    TRIMMED,
    Checkpoint,
    Position,
    RemapRow,
    offsets_json,
    offsets_of,
)
from dr_toolkit.retry import Retry

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger

EMPTY_GROUP_STATES = ("EMPTY", "DEAD")

# One search: (cold topic, partition, no commit, fingerprint, timestamp, taken_at when no fingerprint, trimmed)
Key = tuple[str, int, bool, str | None, int | None, float | None, bool]


@dataclass(frozen=True)
class GroupRemap:
    group: str
    checkpoint_id: str | None
    rows: list[RemapRow]

    @property
    def may_reread(self) -> int:
        return sum(r.position.may_reread for r in self.rows)


@dataclass(frozen=True)
class Remapped:
    """The remap of many groups (those with a checkpoint) on one cold cluster."""

    target: str  # the cold brokers
    groups: dict[str, GroupRemap]
    duration_s: float
    distinct_searches: int
    fetches: int
    records_read: int
    mm2: dict[str, Any] = field(default_factory=dict)  # {"mm2": …, "mm2_checkpoints": …} as read

    def rows_json(self) -> dict[str, list[dict[str, Any]]]:
        return {g: [r.to_json() for r in gr.rows] for g, gr in self.groups.items()}


def anchor_of(fingerprint: str | None, timestamp: int | None) -> Anchor | None:
    """The record a checkpoint anchors on (None: no record: the remap goes by time)."""
    if not fingerprint or timestamp is None:
        return None
    after = not fingerprint.startswith(NEXT_PREFIX)
    fp = fingerprint if after else fingerprint[len(NEXT_PREFIX):]
    dup: int | None = None  # rows written before the count existed: unknown -> the safe fallback
    if DUP_SEP in fp:
        fp, _, k = fp.partition(DUP_SEP)
        dup = int(k) if k.isdigit() else None
    return Anchor(int(timestamp), fp, after=after, dup_before=dup)


def _key(mirror: Mirror, r: Checkpoint) -> Key:
    return (mirror.cold_topic(r.topic), r.partition_id, r.committed_offset is None, r.fingerprint,
            r.record_timestamp, None if r.fingerprint else r.taken_at, r.trimmed)


def _position(k: Key, reader: PartitionReader, compacted: bool, marks: tuple[int, int], skew: int,
              restamped: bool = False) -> Position:
    ct, p, none, fp, ts, taken, trimmed = k
    if none:
        return NONE
    lo, hi = marks
    if trimmed:
        # committed below hot's log start: cold's log start (every record on cold may be re-read)
        return Position(lo, TRIMMED, 0, (lo, hi) if hi > lo else None)
    if restamped:
        # A LogAppendTime cold topic: its timestamps are the cold broker's clock, not hot's, so no
        # timestamp search on it proves anything (issue 38 #5): cold's log start, every record may
        # be re-read — MirrorMaker 2's own translation (re-read only) may narrow it afterwards.
        return Position(lo, LOG_APPEND_TIME, 0, (lo, hi) if hi > lo else None)
    return remap_partition(reader, ct, p, anchor_of(fp, ts), lo, hi, skew_ms=skew,
                           log=LogTraits(use_index=not isinstance(reader, MemoryPartition), compacted=compacted),
                           taken_at_ms=int(float(taken) * 1000) if taken is not None else None).position()


def remap_groups(mirror: Mirror, cold: KafkaCluster, checkpoints: Mapping[str, list[Checkpoint]], *,
                 workers: int = WORKERS) -> Remapped:
    """Remap every group of ``checkpoints`` (its newest checkpoint's rows) onto ``cold``."""
    t0 = time.monotonic()
    rows = dict(checkpoints)
    cold_have = cold.topics()
    for g, rs in rows.items():  # a checkpoint's partitions must all exist on cold, as many as on hot
        hot_counts: dict[str, int] = {}
        for r in rs:
            hot_counts[r.topic] = hot_counts.get(r.topic, 0) + 1
        mirror.check_counts(hot_counts, cold, cold_have, basis=f" in group {g!r}'s checkpoint")
    keys = {_key(mirror, r) for rs in rows.values() for r in rs}
    cold.topic_configs_many(sorted({k[0] for k in keys}))  # one DescribeConfigs, shared by the pool
    pool = ClientPool(lambda: mirror.client("cold").seeded(cold))
    try:
        marks = marks_of(cold, pool, sorted({(k[0], k[1]) for k in keys}), workers)
        by_partition: dict[tuple[str, int], list[Key]] = {}
        for k in sorted(keys, key=repr):
            by_partition.setdefault((k[0], k[1]), []).append(k)

        def whole(tp: tuple[str, int]) -> dict[Key, Position]:
            """Every target of one partition from one sequential read of it (when the searches
            would cost more fetches); searched one by one if that read fails."""
            live = pool.get()
            reader: PartitionReader = live
            compacted, restamped = live.compacted(tp[0]), live.log_append_time(tp[0])
            try:
                reader = MemoryPartition.load(reader, tp[0], tp[1], *marks[tp])
            except DrtError:
                pass  # (e.g. an open transaction on cold) the searches read what they need
            return {k: _position(k, reader, compacted, marks[tp], mirror.skew_ms, restamped)
                    for k in by_partition[tp]}

        def task(t: tuple[str, Any]) -> dict[Key, Position]:
            if t[0] == "partition":
                return whole(t[1])
            reader = pool.get()
            k: Key = t[1]
            return {k: _position(k, reader, reader.compacted(k[0]), marks[(k[0], k[1])], mirror.skew_ms,
                                 reader.log_append_time(k[0]))}

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
    out = {g: GroupRemap(g, rs[0].checkpoint_id if rs else None, [
        RemapRow(r.topic, mirror.cold_topic(r.topic), r.partition_id, r.committed_offset, r.record_timestamp,
                 shared[_key(mirror, r)]) for r in rs]) for g, rs in rows.items()}
    out, mm2 = _mm2_cross_check(mirror, cold, out)
    return Remapped(cold.bootstrap, out, round(time.monotonic() - t0, 3), len(keys), fetches, records, mm2)


def _mm2_cross_check(mirror: Mirror, cold: KafkaCluster, out: dict[str, GroupRemap],
                     ) -> tuple[dict[str, GroupRemap], dict[str, Any]]:
    """MM2's offset syncs (hot) and checkpoints (cold), each read once, cross-checked per group;
    the counts of disagreements per source (or the error that kept them unread)."""
    res: dict[str, Any] = {}
    if mirror.offset_syncs_topic and out:
        topic = mirror.offset_syncs_topic
        try:
            with mirror.client("hot") as hot:
                syncs = read_offset_syncs(hot, topic)
            n = 0
            for g, gr in out.items():
                rows, d = cross_check(gr.rows, syncs)
                out[g], n = GroupRemap(g, gr.checkpoint_id, rows), n + d
            res["mm2"] = {"topic": topic, "partitions_synced": len(syncs.by_partition), "disagreements": n}
        except DrtError as exc:  # hot gone (the real disaster): the search alone decides
            res["mm2"] = {"topic": topic, "error": exc.message}
    if mirror.checkpoints_topic and out:
        topic = mirror.checkpoints_topic
        try:
            cps = read_all_checkpoints(cold, topic, set(out))
            n = 0
            for g, gr in out.items():
                rows, d = cross_check_checkpoints(gr.rows, cps.get(g, {}))
                out[g], n = GroupRemap(g, gr.checkpoint_id, rows), n + d
            res["mm2_checkpoints"] = {"topic": topic, "partitions_checkpointed": sum(len(cps.get(g, {})) for g in out),
                                      "disagreements": n}
        except DrtError as exc:
            res["mm2_checkpoints"] = {"topic": topic, "error": exc.message}
    return out, res


def audit_planned(ledger: Ledger, remapped: Remapped, *, run_id: str | None, who: str | None,
                  before: Mapping[str, Mapping[tuple[str, int], int]] | None = None) -> None:
    """One ``planned`` remap row per group (a dry run: nothing written on cold)."""
    for g, gr in remapped.groups.items():
        ledger.audit(component="kafka", action="remap", dry_run=True, status="planned",
                     target=f"{g}@{remapped.target}", run_id=run_id, who=who,
                     before=offsets_json(before[g]) if before is not None and g in before else None,
                     after=offsets_json(offsets_of(gr.rows)))


# -- apply -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Applied:
    """One group's offsets written on cold (or nothing to write: ``reason``)."""

    written: int
    before: dict[str, int] | None = None
    after: dict[str, int] | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.reason is not None:
            return {"applied": True, "written": self.written, "reason": self.reason}
        return {"applied": True, "written": self.written, "before": self.before, "after": self.after}


def _refuse_unless_writable(cold: KafkaCluster, group: str, offsets: Mapping[tuple[str, int], int],
                            before: Mapping[tuple[str, int], int], force: bool,
                            audit: Callable[[str, Any, Any, str], None]) -> None:
    """ProblemFound (audited, nothing written) when the group has members on cold or a
    partition would move backwards (unless ``force``)."""
    state, members = cold.group_state(group)
    if members or state not in EMPTY_GROUP_STATES:
        msg = (f"group {group!r} is not empty on the cold cluster (state {state}, {members} member(s)): "
               "nothing written")
        audit("failed", offsets_json(before), None, msg)
        raise ProblemFound(msg, where=cold.bootstrap, hint="stop the group's consumers on the cold cluster, "
                                                           "then apply again")
    backwards = {tp: (before[tp], o) for tp, o in offsets.items() if tp in before and o < before[tp]}
    if backwards and not force:
        listed = ", ".join(f"{t}[{p}] {b}→{n}" for (t, p), (b, n) in sorted(backwards.items()))
        msg = f"applying would move committed offsets of group {group!r} backwards ({listed}): nothing written"
        audit("failed", offsets_json(before), offsets_json(offsets), msg)
        # Typically MirrorMaker 2's sync.group.offsets.enabled: it writes an empty group's offsets on
        # cold from a newer hot position than our checkpoint (and never moves them back itself).
        raise ProblemFound(msg, where=cold.bootstrap, hint=(
            "cold holds a later position (MirrorMaker 2's sync.group.offsets writes an empty group's offsets "
            "there): while hot is up, take a fresh `drt kafka checkpoint` and remap again; else pass --force "
            "to move back to the remap's never-skip position (consumers re-read those records)"))


def _roll_back(cold: KafkaCluster, group: str, parts: list[tuple[str, int]], before: Mapping[tuple[str, int], int],
               after: Mapping[tuple[str, int], int], reconnecting: Callable[[Callable[[], Any]], Any],
               ) -> tuple[str, dict[tuple[str, int], int]]:
    """Put back what a refused or mixed commit wrote (all-or-nothing in effect): what was done,
    and the offsets read back."""
    changed = {tp: before[tp] for tp in parts if after.get(tp) != before.get(tp) and tp in before}
    unrevertable = sorted(tp for tp in parts if after.get(tp) != before.get(tp) and tp not in before)
    said = ""
    if changed:
        try:
            reconnecting(lambda: cold.commit(group, changed))
            said = f"; rolled back {len(changed)} partition(s) to their previous offsets"
        except UnreachableError as exc:
            said = f"; rollback failed ({exc.what}): the group may be MIXED"
    if unrevertable:
        said += ("; " + ", ".join(f"{t}[{p}]" for t, p in unrevertable) + " had no previous offset and keep the new one")
    try:
        final = reconnecting(lambda: cold.committed(group, parts)) if changed else dict(after)
    except UnreachableError:
        final = {}
    return said, final


def apply_offsets(cold: KafkaCluster, group: str, offsets: Mapping[tuple[str, int], int], *, force: bool = False,
                  ledger: Ledger | None = None, run_id: str | None = None, who: str | None = None,
                  on_commit: Callable[[], None] | None = None, deadline_s: float | None = None,
                  retry: Retry | None = None) -> Applied:
    """Write ``offsets`` for ``group`` on ``cold``: all partitions or none, in effect.

    Refuses (ProblemFound, nothing written) when the group has members or a partition would
    move backwards (unless ``force``). The commit is one request; when the broker fails during
    it, it is retried (``retry``, within ``deadline_s``) and the result read back. When any
    partition's commit is refused, or the group is left mixed, the partitions already written
    are rolled back to their previous offsets (those that had none cannot be un-committed:
    reported). ``on_commit`` is called just before the request is sent (fault injection).
    Each outcome is one ``apply_offsets`` audit row when ``ledger`` is given."""
    target = f"{group}@{cold.bootstrap}"

    def audit(status: str, before: Any, after: Any, message: str) -> None:
        if ledger is not None:
            ledger.audit(component="kafka", action="apply_offsets", dry_run=False, status=status, target=target,
                         run_id=run_id, who=who, before=before, after=after, message=message)

    if not offsets:
        audit("skipped", None, None, "no partition has a committed offset to carry over")
        return Applied(0, reason="the group has no committed offset on the source: nothing to carry over")
    parts = list(offsets)
    before = cold.committed(group, parts)
    _refuse_unless_writable(cold, group, offsets, before, force, audit)
    deadline = deadline_s if deadline_s is not None else max(30.0, 3 * cold.timeout_s)
    policy = (retry or Retry(tries=None, backoff_s=0.5, max_backoff_s=2.0)).with_(
        deadline_s=deadline, retry_on=(UnreachableError,))

    def reconnecting(fn: Callable[[], Any]) -> Any:
        def call() -> Any:
            try:
                return fn()
            except UnreachableError:
                cold.close()  # a fresh connection: a restarted broker is reached at once, not after backoff
                raise
        return policy(call)

    if on_commit is not None:
        on_commit()
    last_error = ""
    try:
        refused = {tp: e for tp, e in reconnecting(lambda: cold.commit(group, offsets)).items() if e}
        last_error = "; ".join(f"{t}[{p}]: {e}" for (t, p), e in sorted(refused.items()))
    except UnreachableError as exc:
        last_error = exc.what
    try:
        after = reconnecting(lambda: cold.committed(group, parts))
    except UnreachableError as exc:
        msg = f"commit of group {group!r} not confirmed: {last_error or exc.what}"
        audit("failed", offsets_json(before), None, msg)
        raise UnreachableError(msg, where=cold.bootstrap,
                               hint="when the broker is back, run the remap with --apply again "
                                    "(it completes or confirms the commit)") from None
    if not last_error and all(after.get(tp) == o for tp, o in offsets.items()):
        audit("done", offsets_json(before), offsets_json(after), f"applied {len(offsets)} partition(s)")
        return Applied(len(offsets), offsets_json(before), offsets_json(after))
    rollback, final = _roll_back(cold, group, parts, before, after, reconnecting)
    state_word = ("unchanged" if all(final.get(tp) == before.get(tp) for tp in parts)
                  else "MIXED (some partitions new, some old)")
    msg = f"commit of group {group!r} failed ({last_error or 'not confirmed'}){rollback}; the group is {state_word}"
    audit("failed", offsets_json(before), offsets_json(final), msg)
    raise ProblemFound(msg, where=cold.bootstrap, hint="fix the cause and apply again")


def apply_groups(cold: KafkaCluster, offsets: Mapping[str, Mapping[tuple[str, int], int]], *, force: bool = False,
                 workers: int = WORKERS) -> dict[str, Applied | DrtError]:
    """:func:`apply_offsets` for many groups (each all-or-nothing), their requests overlapped;
    each group's outcome, or the error that stopped it."""
    _ = cold.admin

    def one(g: str) -> Applied | DrtError:
        try:
            return apply_offsets(cold, g, offsets[g], force=force)
        except DrtError as exc:
            return exc

    return run_all(one, list(offsets), workers)
