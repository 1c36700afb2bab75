"""The Kafka signals of the failover gate: :func:`kafka_signals` (a ``SignalReader``).

- **One signal per protected topic** — the policies' topics and every other topic a protected
  group has committed on hot (minus ``exclude_topics``: those offsets are carried over too) —
  from :func:`dr_toolkit.kafka.lag.mirror_lag` (offsets, never
  the newest timestamps). Caught up when no partition has hot records missing on cold; its
  ``safe_time`` is the minimum of the partitions' safe times (each: the time hot's end offset
  was read when caught up, else the oldest unmirrored record's timestamp minus the declared
  clock-skew bound). A partition that cannot be read makes the topic NO_GO.
- **One signal per protected group**: checkpoint coverage and age. NO_GO when the group was
  never checkpointed, when its newest checkpoint is older than its policies'
  ``max_checkpoint_age_s``, or when a partition the group has committed on hot (minus the
  policies' ``exclude_topics``) is missing from that checkpoint (or hot cannot be asked). Its
  ``safe_time`` is the checkpoint's time: offsets committed later are not carried over.

The topic signals' lag is proven incrementally (:class:`dr_toolkit.kafka.lag.Incremental`, its
trust argument in that module's doc): each check keeps, per partition, its proof and the brokers'
evidence of both logs it was made on (ledger watermarks, component :data:`PROOFS`, read back in
one query); a partition whose evidence the brokers still give keeps its proof without a record
read, one that grew has it extended from the records appended since, the others are proven
from the records. A missing or unreadable row is the full path.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError, why
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.holdings import gated_topics, record_proven, record_resolved
from dr_toolkit.kafka.lag import Incremental, mirror_lag_many
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.kafka.rows import LagReport
from dr_toolkit.secrets import redact
from dr_toolkit.signal import Signal, iso, unreadable

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.kafka.rows import LagRow
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

PARALLEL = 8
# what group_signal reads of a group's newest checkpoint (5 of its 11 columns: 400,000 rows per check at scale)
GROUP_COLUMNS = ("checkpoint_id", "topic", "partition_id", "committed_offset", "taken_at")
PROOFS = "kafka-proof"  # the ledger's watermarks of the incremental proof: one per hot partition, "<topic>[<p>]"


def _why(exc: BaseException) -> str:
    return redact(why(exc))


def topic_signal(topic: str, report: LagReport, now: float) -> Signal:
    parts = [p for p in report.partitions if p.topic == topic]
    if not parts:
        return unreadable("kafka", topic, f"no partitions reported for topic {topic}")
    errors = [p.error for p in parts if p.error]
    behind = sum(p.records_behind or 0 for p in parts)
    detail: dict[str, Any] = {"kind": "topic", "partitions": len(parts), "records_behind": behind,
                              "checked_at": report.checked_at, "max_clock_skew_s": report.max_clock_skew_s}
    if errors:
        return Signal("kafka", topic, False, None, None, "unreadable", {**detail, "errors": errors[:5]},
                      f"cannot read lag of {len(errors)} partition(s): {errors[0]}")
    safes = [(p.safe_time, p) for p in parts]
    if any(s is None for s, _ in safes):
        return Signal("kafka", topic, False, None, None, "no safe time for a partition", detail,
                      "a partition has no safe time")
    safe, worst = min(((float(s or 0.0), p) for s, p in safes), key=lambda x: x[0])
    detail["worst_partition"] = worst.partition
    basis = f"partition {worst.partition}: {worst.basis}"
    lacking = [p.partition for p in parts if p.method == "cold_lacks_partition"]
    if behind == 0 and not lacking:
        return Signal("kafka", topic, True, max(0.0, now - safe), safe, basis, detail)
    lagging = sum(1 for p in parts if p.records_behind)
    reason = f"{behind} hot record(s) not yet on cold in {lagging} partition(s)"
    if lacking:  # offsets cannot be carried over between unequal partition counts, whatever they hold
        detail["partitions_cold_lacks"] = lacking
        reason += (f"; cold lacks partition(s) {', '.join(map(str, lacking))} of topic {topic} "
                   "(partition count mismatch: make the cold topic match the hot one and re-mirror it)")
    unproven = [p for p in parts if p.method in ("log_append_time", "unproven")]
    if unproven:  # cold's position could not be proven by identity: say why, naming the topic
        detail["unproven_partitions"] = [p.partition for p in unproven]
        reason += f"; topic {topic} partition {unproven[0].partition}: {unproven[0].basis}"
    return Signal("kafka", topic, False, max(0.0, now - safe), safe, basis, detail, reason)


def group_signal(group: str, rows: list[dict[str, Any]], committed: set[tuple[str, int]] | None,
                 hot_error: str | None, max_age_s: float, now: float) -> Signal:
    """Coverage and age of ``group``'s newest checkpoint (``committed``: the partitions the
    group has committed on hot now, exclusions removed; None when hot could not be asked)."""
    name = f"group:{group}"
    if not rows:
        return Signal("kafka", name, False, None, None, "no checkpoint", {"kind": "group", "group": group},
                      f"consumer group {group!r} was never checkpointed: its offsets cannot be carried over")
    taken = max(float(r["taken_at"]) for r in rows)
    age = max(0.0, now - taken)
    have = {(str(r["topic"]), int(r["partition_id"])) for r in rows if r.get("committed_offset") is not None}
    detail: dict[str, Any] = {"kind": "group", "group": group, "checkpoint_id": rows[0].get("checkpoint_id"),
                              "age_s": round(age, 1), "max_age_s": max_age_s, "partitions": len(have)}
    basis = f"checkpoint {rows[0].get('checkpoint_id')} taken at {iso(taken)}"
    reasons = []
    if age > max_age_s:
        reasons.append(f"newest checkpoint of group {group!r} is {age:.0f}s old (bound {max_age_s:.0f}s)")
    if committed is None:
        reasons.append(f"coverage of group {group!r} cannot be checked: {hot_error}")
    else:
        missing = sorted(committed - have)
        if missing:
            detail["missing"] = [f"{t}[{p}]" for t, p in missing[:20]]
            reasons.append(f"{len(missing)} committed partition(s) of group {group!r} not in its checkpoint "
                           f"(e.g. {missing[0][0]}[{missing[0][1]}])")
    if reasons:
        return Signal("kafka", name, False, age, taken, basis, detail, "; ".join(reasons))
    return Signal("kafka", name, True, age, taken, basis, detail)


def kafka_signals(topology: Topology, ledger: Ledger, access: Access, now: float, *,
                  mirror: Mirror | None = None) -> list[Signal]:
    """Every Kafka signal of the gate (see the module doc). ``mirror``: the topology's (built
    here when None; a benchmark passes one whose clients answer from a simulated cluster)."""
    mirror = mirror or Mirror.of(topology, access)
    # The ledger's reads run beside the brokers' (each is a wait on the other side): the proofs
    # kept by the last check while hot's groups and topics are asked, the groups' newest
    # checkpoints while the lag is proven. Neither depends on what the brokers answer. Cold's
    # metadata is asked while hot's groups are, and hot's (asked beside the groups' committed
    # offsets, which it only filters) is the lag's too: each cluster's Metadata once per check
    # (mirror_lag_many's ``metadata``; each read before the lag's ``read_at``, as its own would be).
    with cf.ThreadPoolExecutor(max_workers=4, thread_name_prefix="drt-gate-ledger") as ex:
        base = ex.submit(previous_proofs, ledger)
        cold = ex.submit(_metadata, mirror, "cold")
        try:
            return _signals(topology, ledger, now, mirror, ex, base, cold)
        finally:
            cold.cancel()


def _metadata(mirror: Mirror, role: str) -> tuple[KafkaCluster, dict[str, int]]:
    """``role``'s topics (Metadata) and the client that read them (its partition leaders)."""
    with mirror.client(role) as c:
        return c, c.topics()


def _given(meta: tuple[KafkaCluster, dict[str, int]]) -> Callable[[], tuple[KafkaCluster, dict[str, int]]]:
    return lambda: meta


def _signals(topology: Topology, ledger: Ledger, now: float, mirror: Mirror, ex: cf.ThreadPoolExecutor,
             base: cf.Future[dict[tuple[str, int], dict[str, Any]]],
             cold_meta: cf.Future[tuple[KafkaCluster, dict[str, int]]]) -> list[Signal]:
    groups = mirror.policy_groups()
    hot_meta: tuple[KafkaCluster, dict[str, int]] | None = None
    committed: dict[str, set[tuple[str, int]]] = {}
    hot_error: str | None = None
    live_topics: list[str] = []
    live: dict[str, int] | None = None
    notes: list[str] = []
    patterns = any(p.groups_regex or p.topics_regex for p in topology.policies.kafka)
    if groups or patterns:
        try:
            with mirror.client("hot") as hot:
                # hot's Metadata, asked beside hot's groups (listed, then their committed offsets,
                # which it only filters); it is the lag's too
                listed_at = time.time()  # before hot's topics are listed
                hot_topics = ex.submit(hot.topics)
                if patterns:  # MM2-style selection: resolved against hot's live groups and topics
                    groups, notes = mirror.protected_groups(hot)
                got = hot.committed_many(groups, hot_topics.result) if groups else {}
                have = hot_topics.result()
                hot_meta = (hot, have)
                if patterns and mirror.uses_patterns("topics"):
                    live = have
                    live_topics = sorted(live)
                    notes += mirror.unmatched_patterns(topics=live_topics)
                    for p in topology.policies.kafka:
                        if p.topics_regex:  # for the unplanned window: which topics hot had then
                            with contextlib.suppress(Exception):  # an unwritable ledger: no record
                                record_resolved(ledger, p.name, listed_at,
                                                {t: n for t, n in live.items() if p.selects_topic(t)})
                for g in groups:
                    mine = got[g]
                    out_t = {t for t in {tp[0] for tp in mine} if mirror.topic_excluded(g, t)}
                    committed[g] = {tp for tp in mine if tp[0] not in out_t} if out_t else set(mine)
        except Exception as exc:  # noqa: BLE001 - hot unreachable: coverage unknown -> NO_GO
            hot_error = _why(exc)
            if patterns:  # the groups the patterns select among those checkpointed before
                with contextlib.suppress(Exception):  # an unreadable ledger is reported per group below
                    groups = mirror.policy_groups(ledger.checkpointed_groups())
                    notes.append(f"hot cluster unreachable: groups_regex resolved against the {len(groups)} "
                                 "checkpointed group(s) in the ledger")
    checkpoints = ex.submit(ledger.latest_checkpoints, groups, columns=GROUP_COLUMNS) if groups else None
    # The offsets of every committed topic are carried over (the checkpoint holds them all), so
    # every such topic's mirror lag is gated too, not only the policies' topics: a group resumed
    # on a copy that lacks records would skip them.
    topics = gated_topics(mirror, available=live_topics, committed=committed)
    out: list[Signal] = []
    if hot_error is not None and any(p.topics_regex for p in topology.policies.kafka):
        # which topics the patterns select is unknown: their lag cannot be gated -> NO_GO
        out.extend(unreadable("kafka", f"topics_regex:{p.name}", hot_error)
                   for p in topology.policies.kafka if p.topics_regex)
    if topics:
        # every topic's lag in one pass (metadata once, ListOffsets shared by all topics): lag.mirror_lag_many
        inc = Incremental(base.result())
        try:
            known: dict[str, Callable[[], tuple[KafkaCluster, dict[str, int]]]] = {"cold": cold_meta.result}
            if hot_meta is not None and hot_error is None:
                known["hot"] = _given(hot_meta)
            reports, _stats = mirror_lag_many(mirror, topics, incremental=inc, metadata=known)
        except Exception as exc:  # noqa: BLE001 - broker down, bad config: NO_GO with the reason
            reports = {t: DrtError(_why(exc)) for t in topics}
        if inc.fresh:
            with contextlib.suppress(Exception):  # an unwritable ledger: the next check takes the full path
                ledger.set_watermarks(PROOFS, [(f"{t}[{p}]", float(d["at"]), d) for (t, p), d in inc.fresh.items()])
        proven: list[LagRow] = []
        checked = 0.0
        counts: dict[str, int] = {}
        for t in topics:
            report = reports.get(t)
            if report is None:  # never: every topic is answered; a topic left out is NO_GO all the same
                out.append(unreadable("kafka", t, f"no lag answer for topic {t}"))
            elif isinstance(report, BaseException):
                out.append(unreadable("kafka", t, _why(report)))
            else:
                out.append(topic_signal(t, report, now))
                proven.extend(report.partitions)
                checked = max(checked, report.checked_at)
                counts[t] = 1 + max((r.partition for r in report.partitions), default=-1)
        if proven:
            with contextlib.suppress(Exception):  # the unplanned window's evidence; never the gate's
                record_proven(ledger, LagReport(checked, sorted(counts), proven, [], mirror.skew_ms / 1000.0), counts,
                              carried=inc.carried)
    if not groups:
        return _noted(out, notes)
    try:
        newest: dict[str, list[dict[str, Any]]] | None = checkpoints.result() if checkpoints else None
        ledger_error = None
    except Exception as exc:  # noqa: BLE001 - ledger unreadable: every group NO_GO with the reason
        newest, ledger_error = None, _why(exc)
    for g in groups:
        if newest is None:
            out.append(unreadable("kafka", f"group:{g}", str(ledger_error)))
            continue
        rows = newest.get(g, [])
        ages = [p.max_checkpoint_age_s for p in topology.policies.kafka if p.selects_group(g)]
        out.append(group_signal(g, rows, committed.get(g), hot_error, min(ages) if ages else 1800.0, now))
    return _noted(out, notes)


def previous_proofs(ledger: Ledger) -> dict[tuple[str, int], dict[str, Any]]:
    """The last checks' per-partition proofs and their evidence (one query); none when the ledger
    cannot be read (every partition then takes the full path)."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    try:
        rows = ledger.watermarks(PROOFS)
    except Exception:  # noqa: BLE001 - no base: the full path
        return out
    for w in rows:
        name, d = str(w["name"]), w.get("detail")
        t, _, rest = name.rpartition("[")
        if not t or not rest.endswith("]") or not rest[:-1].isdigit() or not isinstance(d, dict):
            continue
        out[(t, int(rest[:-1]))] = d
    return out


def _noted(signals: list[Signal], notes: list[str]) -> list[Signal]:
    """Every Kafka signal carries the selection's notes (a ``groups_regex``/``topics_regex``
    pattern that selects nothing on hot): said where the gate's answer is read, never a NO_GO by
    itself (a pattern may be meant for groups not created yet)."""
    for s in signals:
        if notes:
            s.detail["selection_notes"] = list(notes)
    return signals
