"""Kafka consumer offsets across the mirror (DESIGN §1.2): checkpoint, lag, remap, apply.

**Never skip** (the invariant): the position applied for a group on a cold partition is such
that every record at an offset below it is a copy of a record the group had consumed on hot.
Exact where it can be proven (see :mod:`dr_toolkit.kafka.remap`), otherwise a position
provably safe under the hot cluster's ``kafka.max_clock_skew_s``, with the duplicate window.

- :func:`checkpoint` records every committed partition of every protected group on hot (the
  group's whole committed set, minus a policy's ``exclude_topics``): the committed offset, the
  last consumed record's timestamp and fingerprint with the count of identical records before
  it, and the time taken (partitions without a record to anchor on are remapped by time).
- :func:`lag` measures, per partition, the hot records not on cold by offsets and the safe
  time up to which cold provably holds hot's records.
- :func:`remap` finds where each group resumes on cold; with ``apply`` it writes all
  partitions of the group or none (rolling back on a refusal), with an audit row naming ``who``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dr_toolkit.access import Access, default_access
from dr_toolkit.errors import ConfigError, DrtError, ProblemFound, UnreachableError
from dr_toolkit.kafka.client import KafkaCluster, Record
from dr_toolkit.kafka.remap import (
    NEXT_PREFIX,
    WINDOW,
    Anchor,
    count_identical_before,
    remap_partition,
    safe_floor,
)
from dr_toolkit.retry import Retry

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

EMPTY_GROUP_STATES = ("EMPTY", "DEAD")
DEFAULT_SKEW_S = 120.0
TRIMMED = "trimmed"  # checkpoint rows whose committed offset lay below hot's log start
DUP_SEP = "#k="  # fingerprint column: "<fp>#k=<identical records before it>" (or "#k=?" unknown)


# -- clusters ----------------------------------------------------------------------------------

def cluster(topology: Topology | None, role: str, *, bootstrap: str | None = None,
            access: Access | None = None) -> KafkaCluster:
    """A client for the ``hot`` or ``cold`` cluster of the topology, or for ``bootstrap``
    (credentials: the endpoint's ``conn_id`` through ``access``)."""
    creds = None
    timeout = 10.0
    if topology is not None:
        endpoint = (topology.hot if role == "hot" else topology.cold).kafka
        name = topology.hot_name if role == "hot" else topology.cold_name
        if endpoint is None and not bootstrap:
            raise ConfigError(f"cluster {name!r} ({role}) has no kafka section", where=topology.source_file,
                              hint=f"add clusters.{name}.kafka.bootstrap_servers")
        if endpoint is not None:
            timeout = endpoint.timeout_s
            bootstrap = bootstrap or endpoint.bootstrap_servers
            creds = default_access(access).for_endpoint(endpoint, f"clusters.{name}.kafka.conn_id")
    if not bootstrap:
        raise ConfigError(f"no bootstrap servers for the {role} Kafka cluster",
                          hint="give a topology (--config) or --source-bootstrap/--target-bootstrap")
    return KafkaCluster(bootstrap, credentials=creds, timeout_s=timeout, role=role)


def skew_ms(topology: Topology | None) -> int:
    """The hot cluster's declared producer clock-skew bound, in ms."""
    ep = topology.hot.kafka if topology is not None else None
    return int(1000 * (ep.max_clock_skew_s if ep is not None else DEFAULT_SKEW_S))


def cold_topic(topology: Topology | None, topic: str) -> str:
    """The mirror's name of hot ``topic`` (MM2 replication policy of the cold endpoint)."""
    ep = topology.cold.kafka if topology is not None else None
    if ep is not None and ep.replication_policy == "default":
        return f"{ep.source_alias}.{topic}"
    return topic


def _uses_patterns(topology: Topology | None, kind: str) -> bool:
    return topology is not None and any(getattr(p, f"{kind}_regex") for p in topology.policies.kafka)


def policy_topics(topology: Topology | None, group: str | None = None, *,
                  available: Iterable[str] | None = None) -> list[str]:
    """Topics of the kafka policies (those protecting ``group`` when given): the literal names,
    then the names of ``available`` (the hot cluster's topics) their ``topics_regex`` match,
    minus what their ``topics_exclude`` match (MirrorMaker 2's selection)."""
    if topology is None:
        return []
    names = list(available or [])
    out: dict[str, None] = {}
    for p in topology.policies.kafka:
        if group is None or p.selects_group(group):
            out.update((t, None) for t in [*p.topics, *(n for n in names if p.topics_regex)] if p.selects_topic(t))
    return list(out)


def topic_excluded(topology: Topology | None, group: str, topic: str) -> bool:
    """Are ``group``'s offsets on ``topic`` left out of the checkpoint (a policy protecting the
    group names it in ``exclude_topics`` or matches it by ``topics_exclude``)?"""
    return topology is not None and any(p.excludes_topic(topic) for p in topology.policies.kafka
                                        if p.selects_group(group))


def excluded_topics(topology: Topology | None, group: str) -> set[str]:
    """The literal ``exclude_topics`` of the policies protecting ``group`` (see :func:`topic_excluded`)."""
    if topology is None:
        return set()
    return {t for p in topology.policies.kafka if p.selects_group(group) for t in p.exclude_topics}


def policy_groups(topology: Topology | None, available: Iterable[str] | None = None) -> list[str]:
    """Groups of the kafka policies: the literal ids, then the ids of ``available`` (the hot
    cluster's groups) their ``groups_regex`` match, minus what ``groups_exclude`` match."""
    out: dict[str, None] = {}
    names = sorted(available or [])
    for p in (topology.policies.kafka if topology else []):
        out.update((g, None) for g in [*p.groups, *(n for n in names if p.groups_regex)] if p.selects_group(g))
    return list(out)


def unmatched_patterns(topology: Topology | None, *, groups: Iterable[str] | None = None,
                       topics: Iterable[str] | None = None, where: str = "the hot cluster") -> list[str]:
    """One line per ``groups_regex`` / ``topics_regex`` pattern that selects nothing among
    ``groups`` / ``topics`` (those given): a pattern protecting nothing is said, not silent."""
    out: list[str] = []
    for p in (topology.policies.kafka if topology else []):
        for kind, names in (("groups", groups), ("topics", topics)):
            if names is None:
                continue
            names = list(names)
            for pattern in getattr(p, f"{kind}_regex"):
                rx = re.compile(pattern)
                matched = [n for n in names if rx.fullmatch(n)]
                if not matched:
                    out.append(f"policy {p.name!r}: {kind}_regex {pattern!r} matches no "
                               f"{'consumer group' if kind == 'groups' else 'topic'} on {where}")
                elif not any(p.selects_group(n) if kind == "groups" else p.selects_topic(n) for n in matched):
                    out.append(f"policy {p.name!r}: every {kind[:-1]} {kind}_regex {pattern!r} matches on {where} "
                               f"is excluded by {kind}_exclude")
    return out


def protected_groups(topology: Topology | None, hot: KafkaCluster | None = None, *, ledger: Ledger | None = None,
                     access: Access | None = None) -> tuple[list[str], list[str]]:
    """The groups the policies protect now, and notes: with ``groups_regex``, resolved against
    the hot cluster's live groups (``hot``, or a client opened here); when hot cannot be asked
    (an unplanned failover), against the groups the ledger holds checkpoints of, said in a note.
    Raises nothing for an unreachable hot cluster when ``ledger`` is given."""
    if not _uses_patterns(topology, "groups"):
        return policy_groups(topology), []
    try:
        if hot is not None:
            live = hot.group_ids()
        else:
            with cluster(topology, "hot", access=access) as c:
                live = c.group_ids()
    except UnreachableError as exc:
        if ledger is None:
            raise
        known = ledger.checkpointed_groups()
        return policy_groups(topology, known), [
            f"hot cluster unreachable ({exc.what}): groups_regex resolved against the {len(known)} group(s) "
            "checkpointed in the ledger", *unmatched_patterns(topology, groups=known, where="the ledger")]
    return policy_groups(topology, live), unmatched_patterns(topology, groups=live)


def _partition_counts(c: KafkaCluster, topics: list[str], have: dict[str, int] | None = None) -> dict[str, int]:
    have = c.topics() if have is None else have
    missing = [t for t in topics if t not in have]
    if missing:
        raise ConfigError(f"topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing on the "
                          f"{c.role} Kafka cluster", where=c.bootstrap,
                          hint=("create it with the hot cluster's partition count and start mirroring it"
                                if c.role == "cold" else "check the topology's kafka policies"))
    return {t: have[t] for t in topics}


def check_parity(hot: KafkaCluster, cold: KafkaCluster, topics: list[str],
                 topology: Topology | None = None) -> dict[str, int]:
    """Topics exist on both sides (under the mirror's names) with equal partition counts."""
    hot_have, cold_have = hot.topics(), cold.topics()  # both answer before anything is judged
    hot_counts = _partition_counts(hot, topics, hot_have)
    cold_counts = _partition_counts(cold, [cold_topic(topology, t) for t in topics], cold_have)
    for t in topics:
        ct = cold_topic(topology, t)
        if hot_counts[t] != cold_counts[ct]:
            raise ConfigError(f"partition count mismatch for topic {t!r}: hot has {hot_counts[t]}, "
                              f"cold has {cold_counts[ct]} ({ct})", where=f"{hot.bootstrap} / {cold.bootstrap}",
                              hint="offsets can only be carried over between equal partition counts: "
                                   "make the cold topic match the hot one and re-mirror it")
    return hot_counts


# -- checkpoint --------------------------------------------------------------------------------

def _encode_fp(prefix: str, rec: Record, dup_before: int | None) -> str:
    return f"{prefix}{rec.fingerprint}{DUP_SEP}{'?' if dup_before is None else dup_before}"


def _dup_count(c: KafkaCluster, t: str, p: int, window: list[Record], rec: Record, lo: int, skew: int) -> int | None:
    """Identical records before ``rec`` on hot, from a proven boundary: inside the window read
    already when it holds a record older than rec.timestamp − 2S, else by a search."""
    before = [r for r in window if r.offset < rec.offset]
    for i in range(len(before) - 1, -1, -1):
        if before[i].timestamp < rec.timestamp - 2 * skew:
            return sum(1 for r in before[i + 1:] if (r.timestamp, r.fingerprint) == (rec.timestamp, rec.fingerprint))
    if before and before[0].offset <= lo:  # the window reaches the log start: it is complete
        return sum(1 for r in before if (r.timestamp, r.fingerprint) == (rec.timestamp, rec.fingerprint))
    return count_identical_before(c, t, p, rec, lo, skew, lo_proves=True)


def checkpoint_row(c: KafkaCluster, group: str, t: str, p: int, off: int | None, taken_at: float,
                   skew: int, *, marks: tuple[int, int] | None = None) -> dict[str, Any]:
    """One partition's checkpoint: the committed offset, the last consumed data record (control
    records and aborted transactions are never returned: read_committed) with the number of
    identical records before it; where no record was consumed before the committed offset, the
    first unconsumed record (prefix ``@next:``); where neither exists (empty partition,
    committed at or past the end), no fingerprint: the remap then goes by ``taken_at``."""
    lo, hi = marks if marks is not None else c.watermarks(t, p)
    row: dict[str, Any] = {"group_id": group, "topic": t, "partition_id": p, "committed_offset": off,
                           "record_timestamp": None, "timestamp_type": "none", "fingerprint": None,
                           "log_start_offset": lo, "high_watermark": hi, "taken_at": taken_at}
    if off is None:
        return row
    if off < lo:
        # The group's next records were removed from hot (retention, DeleteRecords) before it
        # read them, and the record it read last with them: nothing on hot anchors the
        # position. Their copies may still be on cold — the remap resumes at cold's start.
        row["timestamp_type"] = TRIMMED
        return row
    end = min(off, hi)
    window = list(c.read(t, p, max(lo, end - WINDOW), end)) if end > lo else []
    rec: Record | None = window[-1] if window else None
    prefix = ""
    if rec is None:
        nxt = max(off, lo)
        rec = None
        if nxt < hi:
            # An open transaction hides its records and every later one from read_committed: the
            # first unconsumed record may lie at or after the last stable offset — date it with a
            # read_uncommitted read rather than fall back to the checkpoint's time (which would
            # resume after it once the transaction commits and the mirror copies it).
            lso = min(hi, c.stable_ends([(t, p)]).get((t, p), hi))
            rec = c.record_at(t, p, nxt, lso) if nxt < lso else None
            if rec is None and lso < hi:
                rec = c.record_at(t, p, max(nxt, lso), hi, committed=False)
        prefix = NEXT_PREFIX
        window = []
    if rec is not None:
        dup = _dup_count(c, t, p, window, rec, lo, skew) if window else (
            count_identical_before(c, t, p, rec, lo, skew, lo_proves=True))
        row.update(record_timestamp=rec.timestamp, timestamp_type=rec.timestamp_type,
                   fingerprint=_encode_fp(prefix, rec, dup))
    return row


def checkpoint(topology: Topology | None, ledger: Ledger | None, *, groups: list[str] | None = None,
               access: Access | None = None, source_bootstrap: str | None = None) -> dict[str, Any]:
    """Checkpoint every committed partition of the protected groups on the hot cluster (the
    group's whole committed set plus its policies' topics, minus ``exclude_topics``) and store
    it with ``Ledger.add_checkpoint`` when ``ledger`` is given. Returns ``{checkpoint_id,
    groups, partitions, taken_at, duration_s}``."""
    notes: list[str] = []
    if groups is None and _uses_patterns(topology, "groups"):
        with cluster(topology, "hot", bootstrap=source_bootstrap, access=access) as hot:
            groups, notes = protected_groups(topology, hot)
    groups = groups if groups is not None else policy_groups(topology)
    if not groups:
        raise ConfigError("no consumer groups to checkpoint" + (f" ({'; '.join(notes)})" if notes else ""),
                          where=topology.source_file if topology else None,
                          hint="list groups under policies.kafka[].groups (or groups_regex) or pass --group")
    from dr_toolkit.kafka.batch import checkpoint_many

    out = checkpoint_many(topology, ledger, list(groups), access=access, source_bootstrap=source_bootstrap)
    return {**out, "selection_notes": notes}


# -- lag ---------------------------------------------------------------------------------------

def lag(topology: Topology | None, *, topics: list[str] | None = None, access: Access | None = None,
        source_bootstrap: str | None = None, target_bootstrap: str | None = None) -> dict[str, Any]:
    """Parity and mirror lag per partition, by offsets (the failover gate's input).

    Per partition: ``records_behind`` — hot records not (provably) on cold, never 0 while hot
    holds unmirrored records whatever the producers' clocks; ``safe_time`` — the time up to
    which cold provably holds hot's records on it: when caught up, the time hot's end offset
    was read (read before cold is looked at); when behind, the oldest unmirrored record's
    timestamp minus the skew bound. ``oldest_unmirrored_ts`` in epoch seconds; ``basis`` says
    how the mirrored position was established; ``error`` when a partition could not be read."""
    topics = topics or policy_topics(topology)
    if not topics and not _uses_patterns(topology, "topics"):
        raise ConfigError("no topics to check", hint="list topics under policies.kafka[].topics or pass --topic")
    skew = skew_ms(topology)
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    with cluster(topology, "hot", bootstrap=source_bootstrap, access=access) as hot, \
            cluster(topology, "cold", bootstrap=target_bootstrap, access=access) as cold:
        if not topics:  # topics_regex: the hot cluster's topics they select now
            live = sorted(hot.topics())
            topics, notes = policy_topics(topology, available=live), unmatched_patterns(topology, topics=live)
            if not topics:
                raise ConfigError("no topics to check: " + ("; ".join(notes) or "every topic is excluded"),
                                  where=topology.source_file if topology else None,
                                  hint="check the kafka policies' topics_regex against the hot cluster's topics")
        counts = check_parity(hot, cold, topics, topology)
        for t in topics:
            ct = cold_topic(topology, t)
            parts = list(range(counts[t]))
            # every partition's ends in a few requests: hot's first (and the time before), then cold's
            read_at = time.time()
            hot_marks = hot.watermarks_many([(t, p) for p in parts])
            try:  # an open transaction hides every record from its first on from read_committed
                stable = hot.stable_ends([(t, p) for p in parts])
            except DrtError:
                stable = {}
            cold_marks = cold.watermarks_many([(ct, p) for p in parts])
            tails = _tails(hot, cold, t, ct, {k: v for k, v in hot_marks.items() if stable.get(k) == _end(v)},
                           cold_marks)
            for p in parts:
                hm, cm = hot_marks.get((t, p)), cold_marks.get((ct, p))
                marks = (read_at, hm, cm) if isinstance(hm, tuple) and isinstance(cm, tuple) else None
                if marks is not None and p in tails and _tails_match(*tails[p], marks[1], marks[2][0], skew):
                    out.append(_caught_up_row(t, p, read_at, marks[1][1], marks[2][1]))
                    continue
                try:
                    out.append(partition_lag(hot, cold, t, p, ct, skew, marks=marks, stable_end=stable.get((t, p))))
                except DrtError as exc:
                    out.append({"topic": t, "partition": p, "hot_end": None, "cold_end": None,
                                "records_behind": None, "seconds_behind": None, "oldest_unmirrored_ts": None,
                                "safe_time": None, "basis": "unreadable", "method": "error", "error": exc.message})
    checked_at = time.time()
    behind = [r["seconds_behind"] for r in out if r["seconds_behind"] is not None]
    safe = [r["safe_time"] for r in out]
    return {"checked_at": checked_at, "topics": topics, "partitions": out, "selection_notes": notes,
            "caught_up": all(r["records_behind"] == 0 for r in out),
            "max_seconds_behind": max(behind) if behind else 0.0,
            "safe_time": None if any(s is None for s in safe) or not safe else min(safe),
            "max_clock_skew_s": skew / 1000.0}


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
    return kh is not None and kh == _identical_before_last(cold_w, cs == clo, skew)


def _caught_up_row(t: str, p: int, read_at: float, hot_end: int, cold_end: int) -> dict[str, Any]:
    return {"topic": t, "partition": p, "hot_end": hot_end, "cold_end": cold_end, "records_behind": 0,
            "seconds_behind": 0.0, "oldest_unmirrored_ts": None, "safe_time": read_at, "method": "exact",
            "basis": ("caught up: cold's newest record is hot's last (timestamp, fingerprint and identical-"
                      f"record count); cold holds hot's records up to hot's end offset read at {read_at:.3f}")}


def partition_lag(hot: KafkaCluster, cold: KafkaCluster, t: str, p: int, ct: str | None = None,
                  skew: int = int(DEFAULT_SKEW_S * 1000),
                  marks: tuple[float, tuple[int, int], tuple[int, int]] | None = None,
                  stable_end: int | None = None) -> dict[str, Any]:
    """One partition's lag (see :func:`lag`). Hot's end is read first, then cold: whatever cold
    holds then was on hot before hot's end was read. ``marks``: (the time before hot's ends were
    read, hot's (start, end), cold's (start, end)) read in that order by the caller;
    ``stable_end``: hot's last stable offset read with them (read here when not given).

    An open transaction on hot hides its records and every record after it (non-transactional
    ones included, acknowledged or not) from read_committed readers — the mirror too — until it
    ends: hot's records from the last stable offset on count as unmirrored, the oldest of them
    dated by a read_uncommitted read."""
    ct = ct or t
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
    row: dict[str, Any] = {"topic": t, "partition": p, "hot_end": hhi, "cold_end": chi, "records_behind": 0,
                           "seconds_behind": 0.0, "oldest_unmirrored_ts": None, "safe_time": read_at,
                           "basis": "", "method": "empty"}
    cold_new = cold.record_at(ct, p, chi - 1, chi) if chi > clo else None
    if cold_new is None and chi > clo:  # the end offset is a marker: the last data record before it
        window = list(cold.read(ct, p, max(clo, chi - WINDOW), chi))
        cold_new = window[-1] if window else None
    if hhi <= hlo:
        row["basis"] = "hot partition empty when its end offset was read"
        return row
    if cold_new is None:
        q, method, basis = hlo, "cold_empty", "cold holds no record of this partition"
    else:
        # Copies on cold trimmed or never mirrored only lower this count (the hot position found is
        # then earlier: more records counted behind). Known limit: an at-least-once mirror that
        # re-sent an identical record (same timestamp and content) raises it — see DESIGN-kafka.
        k = count_identical_before(cold, ct, p, cold_new, clo, skew, lo_proves=True)
        r = remap_partition(hot, t, p, Anchor(cold_new.timestamp, cold_new.fingerprint, True, k), hlo, lso,
                            skew_ms=skew, lo_proves=hot_start_proves(hlo), compacted=hot.compacted(t))
        if r.method == "exact":
            q, method = int(r.target_offset or hlo), "exact"
            basis = "cold's newest record found on hot by timestamp, fingerprint and identical-record count"
        else:
            # Cold's newest record (appended on hot at or after its timestamp − S) is not provably
            # located: hot records older than its timestamp − 2S were appended before it — mirrored.
            q = safe_floor(hot, t, p, cold_new.timestamp - 2 * skew, hlo, lso)
            method = "skew_bound"
            basis = f"cold's newest record not located exactly; bounded by the clock-skew bound ({skew / 1000:g}s)"
    behind = max(0, hhi - q)
    row.update(records_behind=behind, method=method)
    if behind == 0:
        row["basis"] = f"caught up: cold holds hot's records up to hot's end offset read at {read_at:.3f}"
        return row
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
        row.update(records_behind=0, basis="only control records are unmirrored")
        return row
    ts = oldest.timestamp / 1000.0
    safe = min(read_at, ts - skew / 1000.0)
    row.update(oldest_unmirrored_ts=ts, safe_time=safe, seconds_behind=max(0.0, read_at - safe),
               basis=f"{basis}; {behind} hot record(s) unmirrored, the oldest stamped {ts:.3f} "
                     f"(safe time = that − the {skew / 1000:g}s skew bound)")
    return row


# -- remap and apply ---------------------------------------------------------------------------

def trimmed_remap(lo: int, hi: int) -> dict[str, Any]:
    """The remap of a partition checkpointed with its committed offset below hot's log start:
    cold's log start (every record on cold may be re-read; none is skipped)."""
    return {"target_offset": lo, "method": TRIMMED, "probes": 0,
            "duplicate_window": [lo, hi] if hi > lo else None, "may_reread": max(0, hi - lo)}


def _anchor(row: Mapping[str, Any]) -> Anchor | None:
    fp, ts = row.get("fingerprint"), row.get("record_timestamp")
    if not fp or ts is None:
        return None
    after = not fp.startswith(NEXT_PREFIX)
    fp = fp if after else fp[len(NEXT_PREFIX):]
    dup: int | None = None  # rows written before the count existed: unknown -> the safe fallback
    if DUP_SEP in fp:
        fp, _, k = fp.partition(DUP_SEP)
        dup = int(k) if k.isdigit() else None
    return Anchor(int(ts), fp, after=after, dup_before=dup)


def remap_rows(cold: KafkaCluster, rows: list[dict[str, Any]], topology: Topology | None = None,
               ) -> list[dict[str, Any]]:
    """Remap checkpoint rows onto the cold cluster (parity checked by the caller)."""
    skew = skew_ms(topology)
    out = []
    for row in rows:
        t, p, off = row["topic"], int(row["partition_id"]), row["committed_offset"]
        ct = cold_topic(topology, t)
        item: dict[str, Any] = {"topic": t, "cold_topic": ct, "partition": p, "source_offset": off,
                                "source_timestamp": row.get("record_timestamp")}
        if off is None:
            item.update(target_offset=None, method="none", probes=0, duplicate_window=None, may_reread=0)
        elif row.get("timestamp_type") == TRIMMED:
            item.update(trimmed_remap(*cold.watermarks(ct, p)))
        else:
            lo, hi = cold.watermarks(ct, p)
            taken = row.get("taken_at")
            item.update(remap_partition(cold, ct, p, _anchor(row), lo, hi, skew_ms=skew, compacted=cold.compacted(ct),
                                        taken_at_ms=int(float(taken) * 1000) if taken is not None else None
                                        ).as_dict())
        out.append(item)
    return out


def remap(topology: Topology | None, ledger: Ledger | None, group: str, *, apply: bool = False,
          force: bool = False, access: Access | None = None, run_id: str | None = None, who: str | None = None,
          source_bootstrap: str | None = None, target_bootstrap: str | None = None) -> dict[str, Any]:
    """Remap ``group`` onto the cold cluster; with ``apply`` write it there (see module doc).

    The checkpoint is the newest in the ledger, or a fresh one taken from the source cluster
    when ``source_bootstrap`` is given or the ledger has none (stored only when applying: a dry
    run writes no checkpoint rows, only its ``planned`` audit row)."""
    if apply and topology is not None:  # never onto a promoted (or read-only) cold cluster
        from dr_toolkit.zk.fencing import assert_offsets_apply_allowed

        assert_offsets_apply_allowed(topology, access=access)
    rows: list[dict[str, Any]] = []
    checkpoint_id = None
    if ledger is not None and not source_bootstrap:
        rows = ledger.latest_checkpoint(group)
        checkpoint_id = rows[0]["checkpoint_id"] if rows else None
    if not rows:
        try:
            ck = checkpoint(topology, ledger if apply else None, groups=[group], access=access,
                            source_bootstrap=source_bootstrap)
        except UnreachableError as exc:
            raise UnreachableError(f"no checkpoint of group {group!r} in the ledger and the source cluster "
                                   f"is unreachable: {exc.what}", where=exc.where,
                                   hint="run `drt kafka checkpoint` while the hot cluster is up") from None
        rows, checkpoint_id = ck["partitions"], ck["checkpoint_id"]
    with cluster(topology, "cold", bootstrap=target_bootstrap, access=access) as cold:
        topics = sorted({r["topic"] for r in rows})
        counts = _partition_counts(cold, [cold_topic(topology, t) for t in topics])
        for t in topics:
            n = counts[cold_topic(topology, t)]
            source_n = len({r["partition_id"] for r in rows if r["topic"] == t})
            if source_n != n:
                raise ConfigError(f"partition count mismatch for topic {t!r}: hot has {source_n}, cold has {n}",
                                  where=cold.bootstrap, hint="make the cold topic match the hot one")
        parts = remap_rows(cold, rows, topology)
        from dr_toolkit.kafka.batch import mm2_cross_check

        result: dict[str, Any] = {"group": group, "checkpoint_id": checkpoint_id, "applied": False,
                                  "target": cold.bootstrap, "partitions": parts,
                                  **mm2_cross_check(topology, access, {group: parts}, target_bootstrap)}
        result["may_reread"] = sum(int(r.get("may_reread") or 0) for r in parts)
        offsets = {(r["cold_topic"], r["partition"]): int(r["target_offset"]) for r in parts
                   if r["target_offset"] is not None and r["method"] != "none"}
        if not apply:
            before = cold.committed(group)
            if ledger is not None:
                ledger.audit(component="kafka", action="remap", dry_run=True, status="planned",
                             target=f"{group}@{cold.bootstrap}", run_id=run_id, who=who,
                             before=_offsets_json(before), after=_offsets_json(offsets))
            return result
        result.update(apply_offsets(cold, group, offsets, force=force, ledger=ledger, run_id=run_id, who=who))
        return result


def _offsets_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, int]:
    return {f"{t}[{p}]": o for (t, p), o in sorted(offsets.items())}


def apply_offsets(cold: KafkaCluster, group: str, offsets: Mapping[tuple[str, int], int], *, force: bool = False,
                  ledger: Ledger | None = None, run_id: str | None = None, who: str | None = None,
                  on_commit: Callable[[], None] | None = None, deadline_s: float | None = None,
                  retry: Retry | None = None) -> dict[str, Any]:
    """Write ``offsets`` for ``group`` on ``cold``: all partitions or none, in effect.

    Refuses (ProblemFound, nothing written) when the group has members or a partition would
    move backwards (unless ``force``). The commit is one request; when the broker fails during
    it, it is retried (``retry``, within ``deadline_s``) and the result read back. When any
    partition's commit is refused, or the group is left mixed, the partitions already written
    are rolled back to their previous offsets (those that had none cannot be un-committed:
    reported). ``on_commit`` is called just before the request is sent (fault injection)."""
    target = f"{group}@{cold.bootstrap}"

    def audit(status: str, before: Any, after: Any, message: str) -> None:
        if ledger is not None:
            ledger.audit(component="kafka", action="apply_offsets", dry_run=False, status=status, target=target,
                         run_id=run_id, who=who, before=before, after=after, message=message)

    if not offsets:
        audit("skipped", None, None, "no partition has a committed offset to carry over")
        return {"applied": True, "written": 0,
                "reason": "the group has no committed offset on the source: nothing to carry over"}
    parts = list(offsets)
    state, members = cold.group_state(group)
    before = cold.committed(group, parts)
    if members or state not in EMPTY_GROUP_STATES:
        msg = (f"group {group!r} is not empty on the cold cluster (state {state}, {members} member(s)): "
               "nothing written")
        audit("failed", _offsets_json(before), None, msg)
        raise ProblemFound(msg, where=cold.bootstrap, hint="stop the group's consumers on the cold cluster, "
                                                           "then apply again")
    backwards = {tp: (before[tp], o) for tp, o in offsets.items() if tp in before and o < before[tp]}
    if backwards and not force:
        listed = ", ".join(f"{t}[{p}] {b}→{n}" for (t, p), (b, n) in sorted(backwards.items()))
        msg = f"applying would move committed offsets of group {group!r} backwards ({listed}): nothing written"
        audit("failed", _offsets_json(before), _offsets_json(offsets), msg)
        # Typically MirrorMaker 2's sync.group.offsets.enabled: it writes an empty group's offsets on
        # cold from a newer hot position than our checkpoint (and never moves them back itself).
        raise ProblemFound(msg, where=cold.bootstrap, hint=(
            "cold holds a later position (MirrorMaker 2's sync.group.offsets writes an empty group's offsets "
            "there): while hot is up, take a fresh `drt kafka checkpoint` and remap again; else pass --force "
            "to move back to the remap's never-skip position (consumers re-read those records)"))
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
        errors = reconnecting(lambda: cold.commit(group, offsets))
        refused = {tp: e for tp, e in errors.items() if e}
        if refused:
            last_error = "; ".join(f"{t}[{p}]: {e}" for (t, p), e in sorted(refused.items()))
    except UnreachableError as exc:
        last_error = exc.what
    try:
        after = reconnecting(lambda: cold.committed(group, parts))
    except UnreachableError as exc:
        msg = f"commit of group {group!r} not confirmed: {last_error or exc.what}"
        audit("failed", _offsets_json(before), None, msg)
        raise UnreachableError(msg, where=cold.bootstrap,
                               hint="when the broker is back, run the remap with --apply again "
                                    "(it completes or confirms the commit)") from None
    if not last_error and all(after.get(tp) == o for tp, o in offsets.items()):
        audit("done", _offsets_json(before), _offsets_json(after), f"applied {len(offsets)} partition(s)")
        return {"applied": True, "written": len(offsets), "before": _offsets_json(before),
                "after": _offsets_json(after)}
    # Refused or mixed: put back what was written (all-or-nothing in effect).
    changed = {tp: before[tp] for tp in parts if after.get(tp) != before.get(tp) and tp in before}
    unrevertable = sorted(tp for tp in parts if after.get(tp) != before.get(tp) and tp not in before)
    rollback = ""
    if changed:
        try:
            reconnecting(lambda: cold.commit(group, changed))
            rollback = f"; rolled back {len(changed)} partition(s) to their previous offsets"
        except UnreachableError as exc:
            rollback = f"; rollback failed ({exc.what}): the group may be MIXED"
    if unrevertable:
        rollback += ("; " + ", ".join(f"{t}[{p}]" for t, p in unrevertable)
                     + " had no previous offset and keep the new one")
    try:
        final = reconnecting(lambda: cold.committed(group, parts)) if changed else after
    except UnreachableError:
        final = {}
    state_word = ("unchanged" if all(final.get(tp) == before.get(tp) for tp in parts)
                  else "MIXED (some partitions new, some old)")
    msg = f"commit of group {group!r} failed ({last_error or 'not confirmed'}){rollback}; the group is {state_word}"
    audit("failed", _offsets_json(before), _offsets_json(final), msg)
    raise ProblemFound(msg, where=cold.bootstrap, hint="fix the cause and apply again")
