"""Mirror lag and parity, by offsets (docs/design.md §1.2; the failover gate's input).

Per partition: the hot records not (provably) on cold, and the safe time up to which cold
provably holds hot's records — never from the newest timestamps alone, whatever the
producers' clocks.

**The incremental proof** (issue 42; :class:`Incremental`, used by the gate through
:func:`mirror_lag_many`). A check proves each partition by reading records (the tail, else the
search). It keeps, per partition, what it proved (the row: position, method, the cold record that
is the copy of hot's at ``hot_offset``, the oldest unmirrored record's timestamp) together with
the *evidence* the brokers gave of both logs when the proof was made: per side the topic id
(Metadata v12), the log start offset, the end offset (high watermark) and the leader epoch at
which both were answered (ListOffsets v6 asked at the epoch Metadata named: a broker whose
partition moved to another epoch refuses it), and hot's last stable offset. The next check reads
the same evidence (a few requests, no record) and:

- **unchanged** (every field equal on both sides) → the previous proof holds, carried without
  reading a record. Why that is sound: a proof is a statement about the records below the two
  end offsets. Those records can change only by (a) appending — the end offset moves; (b)
  removing the head (retention, DeleteRecords) — the log start moves; (c) truncation, which a
  broker performs only when a partition changes leader (a follower truncating to the new
  leader's log; an unclean election losing acknowledged records and writing new ones at the same
  offsets) — every leader change bumps the leader epoch; (d) deleting the topic and creating it
  again under the same name (offsets restart) — a new topic id; (e) a transaction ending — a
  marker is appended (the end moves) and the last stable offset moves. A record produced on
  cold directly is an append on cold (its end moves). Neither a producer nor the mirror can
  set any of these fields: they are the brokers' own. Not seen: compaction (it removes superseded
  records below the end without moving any field; the full path does not see it either — a
  proof states which hot records have a copy, and compaction on hot removes none that cold
  lacks), and anyone rewriting a broker's segment files on disk.
- **grown** (same topic ids, log starts and epochs; ends moved forward; no open transaction on
  hot; the previous method ``exact`` on a CreateTime cold topic) → the proof is **extended** by
  reading only the records appended since: cold's records after the proven cold offset must be,
  in order, the copies (timestamp and fingerprint, CreateTime) of hot's records after the proven
  hot offset — a mirror's re-send of a record already matched is passed over; anything else (a
  record produced on cold, a copy out of place, a LogAppendTime-stamped record) ends the
  extension and the partition takes the full path. The chain from the proven pair is a longer
  identity window than :data:`IDENTITY_WINDOW` (every record since the proven pair, which was
  itself proven with its window). More than :data:`EXTEND_MAX` new offsets on a side → full path.
- anything else — a new topic id, a moved log start, a new epoch, an end that moved backwards, a
  LogAppendTime cold topic, no evidence (not PLAINTEXT, a partition refused), no ledger row, a
  row older than ``max_age_s``, a row proven under other inputs (the skew bound, MirrorMaker 2's
  offset-syncs topic), a row that proved no position (``unproven``, ``log_append_time``,
  ``cold_empty``: a proof may appear without either log changing, from MM2's offset syncs) — the
  full path (tail, then search), as every check did before.

The ledger's rows are only the base (what was proven, and the evidence it was proven on), never
the evidence: a row is used only when the live brokers' evidence equals its own.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dr_toolkit.errors import ConfigError, DrtError
from dr_toolkit.kafka.client import KafkaCluster, Record
from dr_toolkit.kafka.mirror import DEFAULT_SKEW_S, WORKERS, ClientPool, Mirror, partition_counts, run_all
from dr_toolkit.kafka.mm2 import OffsetSyncs, read_offset_syncs
from dr_toolkit.kafka.remap import (
    WINDOW,
    Anchor,
    LogTraits,
    count_identical_before,
    identical_offsets,
    remap_partition,
    safe_floor,
)
from dr_toolkit.kafka.rows import LagReport, LagRow

IDENTITY_WINDOW = 8  # records before a match that must be the copies of those before it on hot
CANDIDATES = 16  # cold's newest records tried as proof of its position, newest first
TAIL_FIRST = IDENTITY_WINDOW + 2  # the gate's first tail: hot's last record, the window and one more
Tail = tuple[list[Record], list[Record], int, int]  # hot's records, cold's, hot's window start, cold's
TAIL_CHUNK = 2000  # partitions read together by one client (mirror_lag_many)
LACKING = "cold_lacks_partition"  # a lag row's method: hot has the partition, cold's topic has fewer
EXTEND_MAX = 512  # new offsets per side an incremental proof reads to extend a proof (more: the full path)
# rows with no proven position (NO_GO, every record behind): never carried — a proof may appear without
# the logs changing (MirrorMaker 2's offset syncs configured or written later)
NO_POSITION = ("unproven", "log_append_time", "cold_empty", "error", LACKING)
MAX_PROOF_AGE_S = 6 * 3600.0  # a carried proof is re-proven from the records at least this often
Evidence = tuple[str, int, int, int]  # topic id, log start offset, end offset, leader epoch (wire.log_evidence)


@dataclass
class Incremental:
    """The incremental proof's state for one check (see the module doc): ``previous``, the last
    check's per-partition rows read back from the ledger (hot topic, partition) → detail;
    filled here: ``fresh``, the rows this check proved from records or extended (to be written
    back), ``carried`` (the partitions whose proof was carried unchanged) and ``counts``
    (carried, extended, full, no_evidence)."""

    previous: Mapping[tuple[str, int], Mapping[str, Any]]
    max_age_s: float = MAX_PROOF_AGE_S
    fresh: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    carried: set[tuple[str, int]] = field(default_factory=set)  # the partitions whose proof was carried


def mirror_lag(mirror: Mirror, topics: list[str] | None = None) -> LagReport:
    """Parity and mirror lag per partition, by offsets (the failover gate's input).

    Per partition: ``records_behind`` — hot records not (provably) on cold, never 0 while hot
    holds unmirrored records whatever the producers' clocks; ``safe_time`` — the time up to
    which cold provably holds hot's records on it: when caught up, the time hot's end offset
    was read (read before cold is looked at); when behind, the oldest unmirrored record's
    timestamp minus the skew bound. ``oldest_unmirrored_ts`` in epoch seconds; ``basis`` says
    how the mirrored position was established; ``error`` when a partition could not be read."""
    topics = topics or mirror.policy_topics()
    if not topics and not mirror.uses_patterns("topics"):
        raise ConfigError("no topics to check", hint="list topics under policies.kafka[].topics or pass --topic")
    skew = mirror.skew_ms
    out: list[LagRow] = []
    notes: list[str] = []
    with mirror.client("hot") as hot, mirror.client("cold") as cold:
        if not topics:  # topics_regex: the hot cluster's topics they select now
            live = sorted(hot.topics())
            topics, notes = mirror.policy_topics(available=live), mirror.unmatched_patterns(topics=live)
            if not topics:
                raise ConfigError("no topics to check: " + ("; ".join(notes) or "every topic is excluded"),
                                  where=mirror.source_file,
                                  hint="check the kafka policies' topics_regex against the hot cluster's topics")
        hot_have, cold_have = hot.topics(), cold.topics()  # both answer before anything is judged
        syncs = _offset_syncs(mirror, hot)
        counts = partition_counts(hot, topics, hot_have)
        # Cold holding more partitions than hot is a parity error (records there hot never had); cold
        # holding fewer is lag: hot's partitions cold lacks are reported per partition, all behind.
        mirror.check_counts({t: n for t, n in counts.items() if cold_have.get(mirror.cold_topic(t), 0) > n}, cold,
                            cold_have)
        partition_counts(cold, [mirror.cold_topic(t) for t in topics], cold_have)
        for t in topics:
            ct = mirror.cold_topic(t)
            parts = list(range(counts[t]))
            on_cold = [p for p in parts if p < cold_have[ct]]
            # The cold broker restamps every record of a LogAppendTime topic: its timestamps are its
            # own clock, never hot's — no evidence of which hot records it holds (issue 38 #5).
            restamped = cold.log_append_time(ct)
            # every partition's ends in a few requests: hot's first (and the time before), then cold's
            read_at = time.time()
            hot_marks = hot.watermarks_many([(t, p) for p in parts])
            try:  # an open transaction hides every record from its first on from read_committed
                stable = hot.stable_ends([(t, p) for p in parts])
            except DrtError:
                stable = {}
            cold_marks = cold.watermarks_many([(ct, p) for p in on_cold])
            tails = _tails(hot, cold, t, ct, {k: v for k, v in hot_marks.items() if stable.get(k) == _end(v)},
                           cold_marks)
            for p in parts:
                if p >= cold_have[ct]:
                    out.append(_lacking_row(hot, t, p, ct, cold_have[ct], read_at, hot_marks.get((t, p)),
                                            stable.get((t, p)), skew))
                    continue
                hm, cm = hot_marks.get((t, p)), cold_marks.get((ct, p))
                marks = (read_at, hm, cm) if isinstance(hm, tuple) and isinstance(cm, tuple) else None
                if (not restamped and marks is not None and p in tails
                        and _tails_match(*tails[p], marks[1], marks[2][0], skew)):
                    out.append(_caught_up_row(t, p, read_at, marks[1][1], marks[2][1], tails[p][1][-1],
                                              tails[p][0][-1].offset))
                    continue
                try:
                    out.append(partition_lag(hot, cold, t, p, ct, skew, marks=marks, stable_end=stable.get((t, p)),
                                             restamped=restamped, syncs=syncs.by_partition.get((t, p))))
                except DrtError as exc:
                    out.append(LagRow(t, p, None, None, None, None, None, None, "unreadable", "error", exc.message))
    return LagReport(time.time(), topics, out, notes, skew / 1000.0)


def mirror_lag_many(mirror: Mirror, topics: list[str], *, workers: int = WORKERS,
                    chunk: int = TAIL_CHUNK, incremental: Incremental | None = None,
                    metadata: Mapping[str, Callable[[], tuple[KafkaCluster, dict[str, int]]]] | None = None,
                    ) -> tuple[dict[str, LagReport | DrtError], dict[str, int]]:
    """:func:`mirror_lag` of each topic (the gate's input), its cost growing with the partitions,
    not with topics × partitions: metadata once per cluster, MM2's offset syncs once, the topics'
    configs in one DescribeConfigs, every partition's ends in ListOffsets requests shared by all
    topics (hot's, hot's stable offsets and cold's at the same time, after the time ``read_at``), the tails
    read :data:`TAIL_CHUNK` partitions per fetch loop on a pool of ``workers`` clients per side
    (first the last :data:`TAIL_FIRST` records, then :data:`WINDOW` for partitions the short tail
    did not prove), and every partition left unproven searched one by one on the pool. Each
    partition's row is the one :func:`mirror_lag` gives (the tails are proofs read from the
    records whatever their length; a tail that proves nothing only sends the partition on to the
    search). A topic that cannot be checked maps to its error (the others still answer).

    ``incremental``: the last check's proofs (see the module doc): each side's ends are then read
    with their evidence (:func:`log_evidence`), a partition whose evidence is unchanged keeps its
    proof, one that grew has it extended from the records appended since, and only the others are
    proven from the records; ``incremental.fresh`` receives the rows to keep for the next check.

    ``metadata``: per role ("hot", "cold"), the cluster's metadata the caller has read already
    (or is reading: each is called here, once) as (the client that read it, topic → partition
    count); this function's clients take its partition leaders (:meth:`KafkaCluster.seeded`)
    instead of asking Metadata again (the gate: hot's is read for the groups' committed offsets,
    cold's while they are asked). Either is read before ``read_at``, as this function's own
    would be; what is judged from it is only which partitions exist on each side.

    Returns (topic → report or error, request counts)."""
    skew = mirror.skew_ms
    out: dict[str, LagReport | DrtError] = {}
    stats: dict[str, int] = {"metadata": 0, "list_offsets": 0, "describe_configs": 0, "tail_chunks": 0, "searches": 0}
    with mirror.client("hot") as hot, mirror.client("cold") as cold:
        known = metadata or {}

        def meta(c: KafkaCluster, role: str) -> dict[str, int]:
            if role not in known:
                return c.topics()
            src, have = known[role]()
            if src is not c:
                c.seeded(src)
            return have

        with cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="drt-metadata") as ex:  # two clusters at once
            hot_meta, cold_meta = ex.submit(meta, hot, "hot"), ex.submit(meta, cold, "cold")
            hot_have, cold_have = hot_meta.result(), cold_meta.result()  # both answer before anything is judged
        stats["metadata"] += sum(role not in known for role in ("hot", "cold"))
        syncs = _offset_syncs(mirror, hot)
        counts: dict[str, int] = {}
        for t in topics:
            try:
                have_t = partition_counts(hot, [t], hot_have)
                ct = mirror.cold_topic(t)
                mirror.check_counts({t: c for t, c in have_t.items() if cold_have.get(ct, 0) > c}, cold, cold_have)
                partition_counts(cold, [ct], cold_have)
                counts[t] = have_t[t]
            except DrtError as exc:
                out[t] = exc
        if not counts:
            return out, stats
        hot_parts = [(t, p) for t in counts for p in range(counts[t])]
        cold_parts = [(mirror.cold_topic(t), p) for t in counts for p in range(min(counts[t],
                                                                                     cold_have[mirror.cold_topic(t)]))]

        def hot_side() -> tuple[dict[tuple[str, int], Evidence], dict[tuple[str, int], Any]]:
            ev = log_evidence(hot, hot_parts) if incremental is not None else {}
            marks: dict[tuple[str, int], Any] = {tp: (e[1], e[2]) for tp, e in ev.items()}
            marks.update(hot.watermarks_many([tp for tp in hot_parts if tp not in marks]))
            return ev, marks

        def hot_stable() -> dict[tuple[str, int], int]:
            try:  # an open transaction hides every record from its first on from read_committed
                return hot.stable_ends(hot_parts)
            except DrtError:
                return {}

        def cold_side() -> tuple[dict[tuple[str, int], Evidence], dict[tuple[str, int], Any]]:
            ev = log_evidence(cold, cold_parts) if incremental is not None else {}
            marks: dict[tuple[str, int], Any] = {tp: (e[1], e[2]) for tp, e in ev.items()}
            marks.update(cold.watermarks_many([tp for tp in cold_parts if tp not in marks]))
            return ev, marks

        # Hot's ends (with their evidence), hot's stable offsets and cold's ends are asked at once
        # (separate requests; hot and cold are two clusters). Nothing judged depends on which answers
        # first: a caught-up proof states that cold holds copies of hot's records below hot's end —
        # records read afterwards, by identity — and its safe time is ``read_at``, taken before any
        # is asked; a carried proof needs each side's evidence equal to its own at the proof,
        # whenever each was read; and a stable offset equal to the end read says no transaction was
        # open below that end, whichever was read first (one begun in between starts at or past it).
        # The topics' configs (DescribeConfigs: whether cold stamps LogAppendTime, whether hot's topic
        # is compacted — for the searches) are asked beside the ends: nothing is judged before both answer.
        read_at = time.time()
        with cf.ThreadPoolExecutor(max_workers=5, thread_name_prefix="drt-ends") as ex:
            cold_conf = ex.submit(cold.topic_configs_many, [mirror.cold_topic(t) for t in counts])
            hot_conf = ex.submit(hot.topic_configs_many, list(counts))
            hot_f, stable_f, cold_f = ex.submit(hot_side), ex.submit(hot_stable), ex.submit(cold_side)
            try:
                hot_ev, hot_marks = hot_f.result()
                stable = stable_f.result()
                cold_ev, cold_marks = cold_f.result()
            except DrtError as exc:
                for t in counts:
                    out[t] = exc
                return out, stats
            cold_conf.result()
            hot_conf.result()
        stats["describe_configs"] += 2
        restamped = {t: cold.log_append_time(mirror.cold_topic(t)) for t in counts}
        stats["list_offsets"] += 5
        if incremental is not None:
            stats["evidence"] = stats.get("evidence", 0) + 2
        hot_pool = ClientPool(lambda: mirror.client("hot").seeded(hot))
        cold_pool = ClientPool(lambda: mirror.client("cold").seeded(cold))
        try:
            rows: dict[tuple[str, int], LagRow] = {}
            eligible = {k: v for k, v in hot_marks.items() if stable.get(k) == _end(v) and not restamped[k[0]]}
            left = [(t, p) for t, p in hot_parts if p < cold_have[mirror.cold_topic(t)]]
            carried: set[tuple[str, int]] = set()
            inputs = [skew, mirror.offset_syncs_topic]  # what a proof depends on besides the two logs
            if incremental is not None:
                extend: dict[tuple[str, int], Mapping[str, Any]] = {}
                for tp in left:
                    ctp = (mirror.cold_topic(tp[0]), tp[1])
                    prev, he, ce = incremental.previous.get(tp), hot_ev.get(tp), cold_ev.get(ctp)
                    if he is None or ce is None:
                        incremental.counts["no_evidence"] += 1
                        continue
                    if (prev is None or not _fresh(prev, read_at, incremental.max_age_s) or prev.get("k") != inputs
                            or prev.get("m") in NO_POSITION):
                        continue
                    row = _carried(prev, tp, he, ce, stable.get(tp), restamped[tp[0]], read_at, skew)
                    if row is not None:
                        rows[tp] = row
                        carried.add(tp)
                    elif _extensible(prev, he, ce, stable.get(tp), restamped[tp[0]]):
                        extend[tp] = prev
                incremental.counts["carried"] += len(carried)
                incremental.carried |= carried
                if extend:
                    keys = list(extend)
                    parts = [tuple(keys[i:i + chunk]) for i in range(0, len(keys), chunk)]
                    stats["extend_chunks"] = len(parts)

                    def ext(part: tuple[tuple[str, int], ...]) -> dict[tuple[str, int], LagRow]:
                        return _extend_many(hot_pool.get(), cold_pool.get(), mirror,
                                            tuple((tp, extend[tp]) for tp in part), hot_marks, cold_marks, read_at, skew)

                    for ext_rows in run_all(ext, parts, workers).values():
                        rows.update(ext_rows)
                    incremental.counts["extended"] += sum(1 for tp in extend if tp in rows)
                left = [tp for tp in left if tp not in rows]
            for size in (TAIL_FIRST, WINDOW):
                todo = [(t, p) for t, p in left if (t, p) in eligible]
                chunks = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
                stats["tail_chunks"] += len(chunks)

                def tails_of(part: tuple[tuple[str, int], ...], size: int = size) -> dict[tuple[str, int], Tail]:
                    return _tails_many(hot_pool.get(), cold_pool.get(), mirror, part, hot_marks, cold_marks, size)

                got: dict[tuple[str, int], Tail] = {}
                for res in run_all(tails_of, [tuple(c) for c in chunks], workers).values():
                    got.update(res)
                for (t, p), (hw, cw, hs, cs) in got.items():
                    hm, cm = hot_marks[(t, p)], cold_marks[(mirror.cold_topic(t), p)]
                    if (isinstance(hm, tuple) and isinstance(cm, tuple)
                            and _tails_match(hw, cw, hs, cs, hm, cm[0], skew)):
                        rows[(t, p)] = _caught_up_row(t, p, read_at, hm[1], cm[1], cw[-1], hw[-1].offset)
                left = [tp for tp in left if tp not in rows]

            def one(tp: tuple[str, int]) -> LagRow:
                t, p = tp
                ct = mirror.cold_topic(t)
                h, c = hot_pool.get(), cold_pool.get()
                if p >= cold_have[ct]:
                    return _lacking_row(h, t, p, ct, cold_have[ct], read_at, hot_marks.get((t, p)),
                                        stable.get((t, p)), skew)
                hm, cm = hot_marks.get((t, p)), cold_marks.get((ct, p))
                marks = (read_at, hm, cm) if isinstance(hm, tuple) and isinstance(cm, tuple) else None
                try:
                    return partition_lag(h, c, t, p, ct, skew, marks=marks, stable_end=stable.get((t, p)),
                                         restamped=restamped[t], syncs=syncs.by_partition.get((t, p)))
                except DrtError as exc:
                    return LagRow(t, p, None, None, None, None, None, None, "unreadable", "error", exc.message)

            rest = [tp for tp in hot_parts if tp not in rows]
            stats["searches"] += len(rest)
            rows.update(run_all(one, rest, workers))
            (hf, hr), (cf_, cr) = hot_pool.stats(), cold_pool.stats()
            stats["fetches"], stats["records_read"] = hf + cf_, hr + cr
        finally:
            hot_pool.close()
            cold_pool.close()
    checked = time.time()
    if incremental is not None:
        incremental.counts["full"] += len(rest)
        for tp, row in rows.items():
            ctp = (mirror.cold_topic(tp[0]), tp[1])
            if tp in carried or tp not in hot_ev or ctp not in cold_ev or row.error or row.method == LACKING:
                continue
            if (row.hot_end, row.cold_end) != (hot_ev[tp][2], cold_ev[ctp][2]):
                continue  # proven on other ends than the evidence's (never: the marks are the evidence's)
            incremental.fresh[tp] = {**_kept(row, hot_ev[tp], cold_ev[ctp], stable.get(tp), restamped[tp[0]], read_at),
                                     "k": inputs}
    for t, n in counts.items():
        out[t] = LagReport(checked, [t], [rows[(t, p)] for p in range(n)], [], skew / 1000.0)
    return out, stats


def log_evidence(c: KafkaCluster, tps: list[tuple[str, int]]) -> dict[tuple[str, int], Evidence]:
    """Each partition's evidence (topic id, log start, end, leader epoch; see the module doc),
    from the brokers (:func:`dr_toolkit.kafka.wire.log_evidence`) — or from the client itself
    when it reads it (``evidence_many``: the benchmark's simulated cluster). Partitions without
    evidence are left out; none at all (not PLAINTEXT, Metadata refused) is an empty answer."""
    from dr_toolkit.kafka import wire

    if not tps:
        return {}
    own = getattr(c, "evidence_many", None)
    try:
        if own is not None:
            return dict(own(tps))
        ev, n = wire.log_evidence(c.bootstrap, c._conf, c.timeout_s, tps)
    except Exception:  # noqa: BLE001 - no evidence is never an error: every partition takes the full path
        return {}
    c.list_offsets_requests += n
    return ev


def _fresh(prev: Mapping[str, Any], now: float, max_age_s: float) -> bool:
    try:
        return 0.0 <= now - float(prev["at"]) <= max_age_s
    except (KeyError, TypeError, ValueError):
        return False


def _kept(row: LagRow, he: Evidence, ce: Evidence, stable_end: int | None, restamped: bool,
          read_at: float) -> dict[str, Any]:
    """What the ledger keeps of a partition's proof for the next check: the evidence of both logs
    it was made on and the row's facts (position, method, proof, oldest unmirrored timestamp)."""
    return {"h": list(he), "c": list(ce), "s": stable_end, "r": restamped, "m": row.method,
            "b": row.records_behind, "o": row.oldest_unmirrored_ts, "pf": row.proof, "at": read_at}


def _carried(prev: Mapping[str, Any], tp: tuple[str, int], he: Evidence, ce: Evidence, stable_end: int | None,
             restamped: bool, read_at: float, skew: int) -> LagRow | None:
    """The previous row, when both logs' evidence is what it was proven on (None otherwise)."""
    if (list(he) != list(prev.get("h") or []) or list(ce) != list(prev.get("c") or [])
            or stable_end != prev.get("s") or restamped != prev.get("r")):
        return None
    behind, oldest, method = prev.get("b"), prev.get("o"), str(prev.get("m"))
    if not isinstance(behind, int) or method in ("error", LACKING):
        return None
    since = (f"unchanged since the check of {float(prev['at']):.3f} (topic ids, log starts, end offsets and leader "
             "epochs of both partitions as then: no record below the ends can have changed); its proof carried "
             f"({method})")
    if behind == 0:
        return LagRow(tp[0], tp[1], he[2], ce[2], safe_time=read_at, method=method, proof=prev.get("pf"), basis=(
            f"caught up: cold holds hot's records up to hot's end offset read at {read_at:.3f}; {since}"))
    if oldest is None:
        return None
    safe = min(read_at, float(oldest) - skew / 1000.0)
    return LagRow(tp[0], tp[1], he[2], ce[2], records_behind=behind, seconds_behind=max(0.0, read_at - safe),
                  oldest_unmirrored_ts=float(oldest), safe_time=safe, method=method, proof=prev.get("pf"),
                  basis=(f"{since}; {behind} hot record(s) unmirrored, the oldest stamped {float(oldest):.3f} (safe "
                         f"time = that − the {skew / 1000:g}s skew bound)"))


def _extensible(prev: Mapping[str, Any], he: Evidence, ce: Evidence, stable_end: int | None, restamped: bool) -> bool:
    """May the previous proof be extended by the records appended since (see the module doc)?"""
    ph, pc, pf = prev.get("h") or [], prev.get("c") or [], prev.get("pf") or {}
    if len(ph) != 4 or len(pc) != 4 or restamped or prev.get("r") or prev.get("m") != "exact":
        return False
    if not isinstance(pf.get("hot_offset"), int) or not isinstance(pf.get("cold_offset"), int):
        return False
    same = (he[0], he[1], he[3]) == (ph[0], ph[1], ph[3]) and (ce[0], ce[1], ce[3]) == (pc[0], pc[1], pc[3])
    return (same and he[2] >= ph[2] and ce[2] >= pc[2] and stable_end == he[2]
            and he[2] - pf["hot_offset"] - 1 <= EXTEND_MAX and ce[2] - pf["cold_offset"] - 1 <= EXTEND_MAX)


def _extend_many(hot: KafkaCluster, cold: KafkaCluster, mirror: Mirror,
                 part: tuple[tuple[tuple[str, int], Mapping[str, Any]], ...], hot_marks: Mapping[tuple[str, int], Any],
                 cold_marks: Mapping[tuple[str, int], Any], read_at: float, skew: int) -> dict[tuple[str, int], LagRow]:
    """:func:`_extended` of many partitions: the records appended since each proof, one fetch loop per side."""
    hr, cr = [], []
    for (t, p), prev in part:
        pf = prev["pf"]
        hr.append((t, p, int(pf["hot_offset"]) + 1, int(hot_marks[(t, p)][1])))
        cr.append((mirror.cold_topic(t), p, int(pf["cold_offset"]) + 1, int(cold_marks[(mirror.cold_topic(t), p)][1])))
    try:
        hw, cw = hot.read_many(hr), cold.read_many(cr)
    except DrtError:
        return {}  # the full path reports the error per partition
    out: dict[tuple[str, int], LagRow] = {}
    for ((t, p), prev), (_, _, hs, he), (ct, _, cs, ce) in zip(part, hr, cr, strict=True):
        hot_new = hw.get((t, p), [] if hs >= he else None)
        cold_new = cw.get((ct, p), [] if cs >= ce else None)
        if hot_new is None or cold_new is None:
            continue  # not read whole: the full path
        row = _extended(t, p, prev, hot_new, cold_new, he, ce, read_at, skew)
        if row is not None:
            out[(t, p)] = row
    return out


def _extended(t: str, p: int, prev: Mapping[str, Any], hot_new: list[Record], cold_new: list[Record], hot_end: int,
              cold_end: int, read_at: float, skew: int) -> LagRow | None:
    """The previous proof (cold's record at ``cold_offset`` is the copy of hot's at ``hot_offset``)
    extended by the records appended since: cold's new records must be, in order, the copies of
    hot's new records (a re-send of one already matched passed over); None when they are not."""
    pf = prev["pf"]
    seen = {(pf.get("timestamp"), pf.get("fingerprint"))}
    i, last = 0, None
    for c in cold_new:
        if c.timestamp_type == "log_append":
            return None  # stamped by the cold broker: never hot's timestamp
        ident = (c.timestamp, c.fingerprint)
        if i < len(hot_new) and ident == (hot_new[i].timestamp, hot_new[i].fingerprint):
            seen.add(ident)
            i, last = i + 1, c
        elif ident not in seen:
            return None  # produced on cold, or a copy out of place: the full path decides
    proof = dict(pf) if last is None else (_proof(last, hot_new[i - 1].offset) or dict(pf))
    q = hot_new[i - 1].offset + 1 if i else int(pf["hot_offset"]) + 1
    since = (f"the proof of the check of {float(prev['at']):.3f} extended: cold's {len(cold_new)} record(s) appended "
             f"since its proven offset {pf['cold_offset']} are, in order, the copies of hot's after offset "
             f"{pf['hot_offset']} (timestamps and fingerprints; topic ids, log starts and leader epochs unchanged)")
    if i == len(hot_new):  # every hot record up to the end read is on cold (trailing offsets hold no record)
        return LagRow(t, p, hot_end, cold_end, safe_time=read_at, method="exact", proof=proof, basis=(
            f"caught up: cold holds hot's records up to hot's end offset read at {read_at:.3f}; {since}"))
    oldest = hot_new[i]
    ts = oldest.timestamp / 1000.0
    safe = min(read_at, ts - skew / 1000.0)
    behind = max(0, hot_end - q)
    return LagRow(t, p, hot_end, cold_end, records_behind=behind, seconds_behind=max(0.0, read_at - safe),
                  oldest_unmirrored_ts=ts, safe_time=safe, method="exact", proof=proof,
                  basis=(f"{since}; {behind} hot record(s) unmirrored, the oldest stamped {ts:.3f} (safe time = that "
                         f"− the {skew / 1000:g}s skew bound)"))


def _tails_many(hot: KafkaCluster, cold: KafkaCluster, mirror: Mirror, part: tuple[tuple[str, int], ...],
                hot_marks: Mapping[tuple[str, int], Any], cold_marks: Mapping[tuple[str, int], Any], size: int
                ) -> dict[tuple[str, int], Tail]:
    """:func:`_tails` of many topics' partitions (the last ``size`` records), one fetch loop per side."""
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for t, p in part:
        hm, cm = hot_marks.get((t, p)), cold_marks.get((mirror.cold_topic(t), p))
        if isinstance(hm, tuple) and isinstance(cm, tuple) and hm[1] > hm[0] and cm[1] > cm[0]:
            ranges[(t, p)] = (max(hm[0], hm[1] - size), max(cm[0], cm[1] - size))
    if not ranges:
        return {}
    try:
        hw = hot.read_many([(t, p, hs, hot_marks[(t, p)][1]) for (t, p), (hs, _) in ranges.items()])
        cw = cold.read_many([(mirror.cold_topic(t), p, cs, cold_marks[(mirror.cold_topic(t), p)][1])
                             for (t, p), (_, cs) in ranges.items()])
    except DrtError:
        return {}  # the partitions are searched one at a time, which reports the error per partition
    return {(t, p): (hw[(t, p)], cw[(mirror.cold_topic(t), p)], hs, cs) for (t, p), (hs, cs) in ranges.items()
            if (t, p) in hw and (mirror.cold_topic(t), p) in cw}


def _offset_syncs(mirror: Mirror, hot: KafkaCluster) -> OffsetSyncs:
    """MirrorMaker 2's offset syncs (``clusters.<hot>.kafka.mm2_offset_syncs_topic``), read once;
    none when not configured or unreadable (they are only ever a second proof, checked on the records)."""
    if not mirror.offset_syncs_topic:
        return OffsetSyncs()
    try:
        return read_offset_syncs(hot, mirror.offset_syncs_topic)
    except DrtError:
        return OffsetSyncs()


def _lacking_row(hot: KafkaCluster, t: str, p: int, ct: str, n_cold: int, read_at: float, hm: Any,
                 stable_end: int | None, skew: int) -> LagRow:
    """A partition hot has and cold lacks (cold's topic has fewer partitions): every record of it is
    unmirrored; the safe time lies before its oldest (method ``cold_lacks_partition``; a NO_GO
    whatever it holds — offsets cannot be carried over between unequal partition counts)."""
    basis = (f"hot has partition {p}, cold's {ct} has {n_cold} partition(s): the partition count differs and no "
             "record of this partition is on cold")
    if not isinstance(hm, tuple):
        return LagRow(t, p, None, None, None, None, None, None, basis, "error",
                      f"hot Kafka cluster refused the offsets of {t}[{p}]: {hm}")
    hlo, hhi = hm
    row = LagRow(t, p, hhi, None, records_behind=max(0, hhi - hlo), safe_time=read_at, basis=basis,
                 method=LACKING)
    if hhi <= hlo:
        return row
    lso = hhi if stable_end is None else max(hlo, min(int(stable_end), hhi))
    oldest = hot.record_at(t, p, hlo, lso) if hlo < lso else hot.record_at(t, p, hlo, hhi, committed=False)
    if oldest is None:
        return replace(row, safe_time=None, seconds_behind=None,
                       basis=basis + "; hot's oldest record could not be read: no safe time")
    ts = oldest.timestamp / 1000.0
    safe = min(read_at, ts - skew / 1000.0)
    return replace(row, oldest_unmirrored_ts=ts, safe_time=safe, seconds_behind=max(0.0, read_at - safe))


def _end(marks: Any) -> int | None:
    return int(marks[1]) if isinstance(marks, tuple) else None


def hot_start_proves(hlo: int) -> bool:
    """May hot's log start serve as the boundary of an identical-record count in the lag? Only
    at offset 0: once retention or DeleteRecords removed hot's head, cold may still hold copies
    of removed records identical to a later one, and counting from the start would then match
    cold's newest record with a hot record cold does not hold (caught up while one behind)."""
    return hlo == 0


def _tails(hot: KafkaCluster, cold: KafkaCluster, t: str, ct: str, hot_marks: Mapping[tuple[str, int], Any],
           cold_marks: Mapping[tuple[str, int], Any]) -> dict[int, tuple[list[Record], list[Record], int, int]]:
    """The last :data:`WINDOW` records of every partition on both clusters, read together (hot's
    ranges end at the end offsets read before cold's), as (hot's, cold's, hot's window start,
    cold's window start); partitions that could not be read whole are left out."""
    ranges: dict[int, tuple[int, int]] = {}
    for (topic, p), hm in hot_marks.items():
        cm = cold_marks.get((ct, p))
        if topic == t and isinstance(hm, tuple) and isinstance(cm, tuple) and hm[1] > hm[0] and cm[1] > cm[0]:
            ranges[p] = (max(hm[0], hm[1] - WINDOW), max(cm[0], cm[1] - WINDOW))
    if not ranges:
        return {}
    try:
        hw = hot.read_many([(t, p, hs, hot_marks[(t, p)][1]) for p, (hs, _) in ranges.items()])
        cw = cold.read_many([(ct, p, cs, cold_marks[(ct, p)][1]) for p, (_, cs) in ranges.items()])
    except DrtError:
        return {}  # the partitions are read one at a time, which reports the error per partition
    return {p: (hw[(t, p)], cw[(ct, p)], hs, cs) for p, (hs, cs) in ranges.items()
            if (t, p) in hw and (ct, p) in cw}


def _identical_before_last(window: list[Record], whole: bool, skew: int) -> int | None:
    """How many records identical to the window's last one lie before it, counted from a proven
    boundary inside the window (a record older than its timestamp − 2S: every record before
    that one is older than its timestamp) or from the window's start when ``whole`` (it holds
    every record the count may include); None when the window holds no boundary."""
    last = window[-1]
    k = 0
    for r in reversed(window[:-1]):
        if r.timestamp < last.timestamp - 2 * skew:
            return k
        if r.timestamp == last.timestamp and r.fingerprint == last.fingerprint:
            k += 1
    return k if whole else None


def _tails_match(hot_w: list[Record], cold_w: list[Record], hs: int, cs: int, hot_marks: tuple[int, int],
                 clo: int, skew: int) -> bool:
    """Caught up, proven from the two tails alone: hot's last record (at its end offset − 1) and
    cold's newest are identical (timestamp and fingerprint) with the same number of identical
    records before them — the answer the identical-record search of :func:`partition_lag` gives
    (cold's newest is the copy of hot's last), without its searches."""
    if not hot_w or not cold_w:
        return False
    (hlo, hot_end), h, c = hot_marks, hot_w[-1], cold_w[-1]
    if h.offset != hot_end - 1:  # hot's last record, not one before trailing control records
        return False
    if (h.timestamp, h.fingerprint) != (c.timestamp, c.fingerprint):
        return False
    # Hot's log start is a boundary only when nothing was ever removed from its head (see
    # hot_start_proves); cold's may always serve (a trimmed cold only lowers its count: not caught up).
    kh = _identical_before_last(hot_w, hs == hlo and hot_start_proves(hlo), skew)
    return (kh is not None and kh == _identical_before_last(cold_w, cs == clo, skew)
            and window_proves(hot_w, cold_w, hot_from_start=hs == hlo))


def _identity(r: Record) -> tuple[int, str]:
    return r.timestamp, r.fingerprint


def _content(r: Record) -> tuple[int, str]:
    return 0, r.fingerprint


def window_proves(hot_w: list[Record], cold_w: list[Record], *, hot_from_start: bool,
                  need: int = IDENTITY_WINDOW, stamped: bool = True) -> bool:
    """Is cold's record ``cold_w[-1]`` the copy of hot's ``hot_w[-1]`` *at its position*? The
    identity of a record is its timestamp and fingerprint (key, value, headers) and its place in
    the log: read backwards, the records before it on cold must be the copies of the records before
    it on hot — ``need`` of them, or every one hot holds before it (``hot_from_start``: ``hot_w``
    begins at hot's log start). A record on cold identical to a hot record already matched is a
    mirror's re-send (at-least-once) and is passed over; any other record — one hot never had
    (produced on cold directly), or a hot record cold holds out of place — refuses the proof.
    So a record written on cold, even one equal to a hot record, never makes the records hot has
    and cold lacks before it count as mirrored. ``stamped`` False: cold's timestamps are not hot's
    (a LogAppendTime cold topic) and identity is the fingerprint alone, in sequence."""
    ident = _identity if stamped else _content
    if not hot_w or not cold_w or ident(hot_w[-1]) != ident(cold_w[-1]):
        return False
    seen = {ident(hot_w[-1])}
    i, j, matched = len(hot_w) - 2, len(cold_w) - 2, 0
    while matched < need and i >= 0:
        if j < 0:
            return False  # cold holds fewer records than hot before the match
        c = ident(cold_w[j])
        if c == ident(hot_w[i]):
            seen.add(c)
            i, j, matched = i - 1, j - 1, matched + 1
        elif c in seen:
            j -= 1  # a re-sent copy of a record already matched
        else:
            return False
    return matched >= need or hot_from_start or matched >= 1


def _caught_up_row(t: str, p: int, read_at: float, hot_end: int, cold_end: int, proof: Record | None = None,
                   hot_offset: int | None = None) -> LagRow:
    return LagRow(t, p, hot_end, cold_end, safe_time=read_at, method="exact", basis=(
        "caught up: cold's newest record is hot's last (timestamp, fingerprint, identical-record count, "
        f"and the {IDENTITY_WINDOW} records before it are the copies of those before it on hot); "
        f"cold holds hot's records up to hot's end offset read at {read_at:.3f}"),
        proof=_proof(proof, hot_offset))


def _proof(rec: Record | None, hot_offset: int | None) -> dict[str, Any] | None:
    """What the ledger keeps of a proven position: cold's record (offset and identity) that is the
    copy of hot's record at ``hot_offset`` — checked again on cold when hot is gone."""
    if rec is None or hot_offset is None:
        return None
    return {"cold_offset": rec.offset, "timestamp": rec.timestamp, "fingerprint": rec.fingerprint,
            "hot_offset": hot_offset}


def partition_lag(hot: KafkaCluster, cold: KafkaCluster, t: str, p: int, ct: str | None = None,
                  skew: int = int(DEFAULT_SKEW_S * 1000),
                  marks: tuple[float, tuple[int, int], tuple[int, int]] | None = None,
                  stable_end: int | None = None, restamped: bool | None = None,
                  syncs: list[tuple[int, int]] | None = None) -> LagRow:
    """One partition's lag (see :func:`lag`). Hot's end is read first, then cold: whatever cold
    holds then was on hot before hot's end was read. ``marks``: (the time before hot's ends were
    read, hot's (start, end), cold's (start, end)) read in that order by the caller;
    ``stable_end``: hot's last stable offset read with them (read here when not given).

    An open transaction on hot hides its records and every record after it (non-transactional
    ones included, acknowledged or not) from read_committed readers — the mirror too — until it
    ends: hot's records from the last stable offset on count as unmirrored, the oldest of them
    dated by a read_uncommitted read. ``restamped``: the cold topic is LogAppendTime (asked here
    when not given): its timestamps are the cold broker's, never evidence."""
    ct = ct or t
    if restamped is None:
        restamped = cold.log_append_time(ct)
    if marks is None:
        read_at = time.time()
        hm = hot.watermarks_many([(t, p)]).get((t, p))  # the end offset (read_uncommitted), not the LSO
        if not isinstance(hm, tuple):
            raise DrtError(f"hot Kafka cluster refused the offsets of {t}[{p}]: {hm}", where=hot.bootstrap)
        hlo, hhi = hm
        if stable_end is None:
            stable_end = hot.stable_ends([(t, p)]).get((t, p))
        clo, chi = cold.watermarks(ct, p)
    else:
        read_at, (hlo, hhi), (clo, chi) = marks
    lso = hhi if stable_end is None else max(hlo, min(int(stable_end), hhi))
    row = LagRow(t, p, hhi, chi, safe_time=read_at)
    if hhi <= hlo:
        return replace(row, basis="hot partition empty when its end offset was read")
    q, method, basis, proof = mirrored_position(hot, cold, t, p, ct, skew, (hlo, lso), (clo, chi),
                                                restamped=restamped, syncs=syncs)
    behind = max(0, hhi - q)
    row = replace(row, records_behind=behind, method=method, proof=proof)
    if behind == 0:
        return replace(row, basis=f"caught up: cold holds hot's records up to hot's end offset read at {read_at:.3f} "
                                  f"({basis})")
    oldest = hot.record_at(t, p, q, lso) if q < lso else None
    if oldest is None and lso < hhi:
        # Nothing committed between q and the open transaction: the oldest unmirrored record is
        # the first one from the last stable offset on (the transaction's own, or one after it).
        oldest = hot.record_at(t, p, max(q, lso), hhi, committed=False)
        basis += (f"; an open transaction on hot at offset {lso} hides {hhi - lso} record(s) from "
                  "read_committed readers (the mirror too) until it ends")
        if oldest is None:
            raise hot.unreachable(f"read_uncommitted fetch of {t}[{p}] at offset {max(q, lso)}")
    if oldest is None:  # nothing readable after q (markers only): caught up as far as data goes
        return replace(row, records_behind=0, basis="only control records are unmirrored")
    ts = oldest.timestamp / 1000.0
    safe = min(read_at, ts - skew / 1000.0)
    return replace(row, oldest_unmirrored_ts=ts, safe_time=safe, seconds_behind=max(0.0, read_at - safe),
                   basis=f"{basis}; {behind} hot record(s) unmirrored, the oldest stamped {ts:.3f} "
                         f"(safe time = that − the {skew / 1000:g}s skew bound)")




def _window_at(hot: KafkaCluster, cold: KafkaCluster, t: str, ct: str, p: int, h: int, d: int, hlo: int,
               clo: int, *, stamped: bool = True) -> bool:
    """:func:`window_proves` for hot's record at ``h`` and cold's at ``d``: the records before each,
    read on both clusters (offsets without a record — markers, compaction — make a range hold fewer)."""
    hs = max(hlo, h - 4 * IDENTITY_WINDOW)
    hot_w = list(hot.read(t, p, hs, h + 1))
    cold_w = list(cold.read(ct, p, max(clo, d - 8 * IDENTITY_WINDOW), d + 1))
    return (bool(hot_w) and hot_w[-1].offset == h and bool(cold_w) and cold_w[-1].offset == d
            and window_proves(hot_w, cold_w, hot_from_start=hs == hlo, stamped=stamped))


def _by_offset_syncs(hot: KafkaCluster, cold: KafkaCluster, t: str, ct: str, p: int, syncs: list[tuple[int, int]],
                     hot_range: tuple[int, int], cold_range: tuple[int, int], stamped: bool,
                     ) -> tuple[int, str, dict[str, Any]] | None:
    """MirrorMaker 2's offset syncs (upstream u = downstream d, newest first, at most
    :data:`CANDIDATES`) as evidence — each checked on the records themselves: hot's record at u and
    cold's at d, and the records before them, are the same (:func:`window_proves`; by fingerprint
    alone when cold's timestamps are not hot's). A sync anyone wrote that the records do not bear
    out proves nothing. Returns (q = u + 1, basis, proof) for the first one that holds."""
    (hlo, lso), (clo, chi) = hot_range, cold_range
    tried = 0
    for u, d in reversed(syncs):
        if not (hlo <= u < lso and clo <= d < chi):
            continue
        if tried >= CANDIDATES:
            break
        tried += 1
        if _window_at(hot, cold, t, ct, p, u, d, hlo, clo, stamped=stamped):
            rec = cold.record_at(ct, p, d, d + 1)
            if rec is None or rec.offset != d:
                continue
            return u + 1, (f"MirrorMaker 2's offset sync {t}[{p}]@{u} -> {ct}@{d}, borne out by the records "
                           f"({'fingerprints' if not stamped else 'timestamps and fingerprints'} of the record and "
                           f"the {IDENTITY_WINDOW} before it on both clusters)"), _proof(rec, u) or {}
    return None


def mirrored_position(hot: KafkaCluster, cold: KafkaCluster, t: str, p: int, ct: str, skew: int,
                      hot_range: tuple[int, int], cold_range: tuple[int, int], *, restamped: bool,
                      syncs: list[tuple[int, int]] | None = None) -> tuple[int, str, str, dict[str, Any] | None]:
    """Cold's position on hot — q such that every hot record before q is on cold — found by the
    identity of the records, never by a timestamp alone (issue 38 #4, #5): (q, method, basis, the
    proof to keep). ``hot_range``: hot's (log start, last stable offset); ``cold_range``: cold's
    (log start, end).

    Cold's newest records are tried newest first (at most :data:`CANDIDATES`): a record counts
    only when it is found on hot — timestamp, fingerprint and identical-record count from a proven
    boundary (``exact``: q = after it) — *and* sits on cold where the mirror puts it: the records
    before it on cold are the copies of those before it on hot (:func:`window_proves`). A record
    found on hot at its position whose exact place among identical records is not provable (a
    trimmed head, a compacted gap, a run too long) bounds q by the clock-skew bound of its — hot's —
    timestamp (``skew_bound``). A record hot never had (produced on cold directly), a copy out of
    place, or a record restamped by the cold broker proves nothing and is passed over; when none
    of them proves anything, q is hot's log start (every hot record counts as unmirrored).
    ``syncs``: MirrorMaker 2's offset syncs of the partition, tried (each checked on the records)
    when no record proved cold's position — the one proof on a LogAppendTime cold topic."""
    hlo, lso = hot_range
    clo, chi = cold_range
    if restamped:
        by_sync = _by_offset_syncs(hot, cold, t, ct, p, syncs or [], hot_range, cold_range, stamped=False)
        if by_sync is not None:
            return by_sync[0], "mm2_sync", (f"cold topic {ct} has message.timestamp.type=LogAppendTime (its timestamps "
                                            f"are the cold broker's, never used); {by_sync[1]}"), by_sync[2]
        return hlo, "log_append_time", (
            f"cold topic {ct} has message.timestamp.type=LogAppendTime: the cold broker restamps every "
            "mirrored record, so its timestamps are its own clock, never hot's, and cannot show which hot "
            "records it holds; every hot record counts as unmirrored (set message.timestamp.type=CreateTime "
            "on the cold topic — MirrorMaker 2 does not copy it — and re-mirror)"), None
    tail = list(cold.read(ct, p, max(clo, chi - WINDOW), chi)) if chi > clo else []
    if not tail:
        return hlo, "cold_empty", "cold holds no record of this partition", None
    compacted = hot.compacted(t)
    tried = restamped_seen = 0
    for rec in reversed(tail):
        if tried >= CANDIDATES:
            break
        if rec.timestamp_type == "log_append":  # stamped by the cold broker: never hot's timestamp
            restamped_seen += 1
            continue
        tried += 1
        # Copies on cold trimmed or never mirrored only lower this count (the hot position found is
        # then earlier: more records counted behind). Known limit: an at-least-once mirror that
        # re-sent an identical record (same timestamp and content) raises it — see docs/design.md §1.2.
        k = count_identical_before(cold, ct, p, rec, clo, skew, lo_proves=True)
        r = remap_partition(hot, t, p, Anchor(rec.timestamp, rec.fingerprint, True, k), hlo, lso,
                            skew_ms=skew, log=LogTraits(lo_proves=hot_start_proves(hlo), compacted=compacted))
        skipped = "" if rec is tail[-1] else (
            f" ({tried - 1} newer record(s) on cold are no proven copies of hot records: produced on cold "
            "directly, or copies out of place; never counted as mirrored)")
        if r.method == "exact" and r.matched_offset is not None:
            if _window_at(hot, cold, t, ct, p, r.matched_offset, rec.offset, hlo, clo):
                return (int(r.target_offset or hlo), "exact",
                        "cold's newest proven copy found on hot by timestamp, fingerprint, identical-record count "
                        f"and the {IDENTITY_WINDOW} records before it{skipped}", _proof(rec, r.matched_offset))
            continue
        # Not exactly placed among identical records: is it hot's record at all, where the mirror puts it?
        b = safe_floor(hot, t, p, rec.timestamp - 2 * skew, hlo, lso)
        found = identical_offsets(hot, t, p, rec.timestamp, rec.fingerprint, b, lso, stop_after=1)
        if found and _window_at(hot, cold, t, ct, p, found[0], rec.offset, hlo, clo):
            # hot's record (hot's timestamp), appended on hot at or after its timestamp − S: hot
            # records stamped < its timestamp − 2S were appended before it — mirrored before it.
            return (b, "skew_bound", "cold's newest proven copy of a hot record not placed exactly among identical "
                                     f"records; bounded by the clock-skew bound ({skew / 1000:g}s){skipped}",
                    _proof(rec, found[0]))
    by_sync = _by_offset_syncs(hot, cold, t, ct, p, syncs or [], hot_range, cold_range,
                               stamped=not restamped_seen)
    if by_sync is not None:
        return by_sync[0], "mm2_sync", by_sync[1], by_sync[2]
    why = (f"{restamped_seen} of cold's newest records carry the cold broker's LogAppendTime; "
           if restamped_seen else "")
    return hlo, "unproven", (
        f"{why}none of cold's newest {tried} record(s) is a proven copy of a hot record at its position "
        "(records produced on cold directly, or copies out of place): cold's position on hot is unknown and every "
        "hot record counts as unmirrored"), None
