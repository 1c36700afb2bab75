"""What cold holds of hot's Kafka topics — one reader per capability, used by the failover gate
(:func:`dr_toolkit.kafka.signals.kafka_signals`) and by the unplanned loss window
(:func:`dr_toolkit.failover.unplanned.loss_window`) alike (issue 38 #6).

- **Which topics** (:func:`gated_topics`): the policies' literal topics, the topics their
  ``topics_regex`` select among hot's topics, and every topic a protected group committed (its
  offsets are carried over, so its lag is gated) minus exclusions. The gate resolves them on the
  live hot cluster; with hot gone, the same function is given what the ledger knows: the topics
  the gate's last resolution of each pattern found on hot (:data:`RESOLVED`), the topics it proved
  partitions of, and the topics of the protected groups' newest checkpoints.
- **Per partition, what cold provably holds**: the gate's lag finds cold's position on hot by the
  identity of the records (:func:`dr_toolkit.kafka.lag.mirrored_position`) and records, per
  partition, the safe time it proved with the cold record that proves it (:data:`PROVEN`,
  :func:`record_proven`, only ever moving forward; a proof the next check finds unchanged is not
  rewritten: one :data:`CONFIRMED` row names it with that check's safe time, read through
  :func:`proven_marks`). With hot gone (:func:`loss_rows`), a
  partition's safe time is that proven one while cold still holds that very record (same offset,
  timestamp and fingerprint) — never cold's newest timestamp, which a record produced on cold
  directly, or a LogAppendTime cold topic, would make a lie. Partitions hot had (by the ledger)
  and cold lacks are named and state none.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import why
from dr_toolkit.signal import iso

if TYPE_CHECKING:
    from dr_toolkit.kafka.client import KafkaCluster
    from dr_toolkit.kafka.mirror import Mirror
    from dr_toolkit.kafka.rows import LagReport, LagRow
    from dr_toolkit.ledger import Ledger

COMPONENT = "kafka"  # the ledger's watermarks of this module
PROVEN = "{topic}[{partition}]:proven"
RESOLVED = "topics_regex:{policy}:resolved"
# one row: the partitions whose kept proof the last gate check confirmed, with that check's safe time
CONFIRMED = "proven:confirmed"
# a lag row's method when cold's safe time needs no record on cold (hot empty, or nothing proven held)
NOTHING_HELD = ("empty", "cold_empty", "unproven", "log_append_time")
_PROVEN_RX = re.compile(r"^(?P<topic>.+)\[(?P<partition>\d+)\]:proven$")


def gated_topics(mirror: Mirror, *, available: Iterable[str] | None,
                 committed: Mapping[str, Iterable[tuple[str, int]]]) -> list[str]:
    """Every topic whose lag is gated: the policies' topics (``topics_regex`` matched among
    ``available``, hot's topics or what the ledger knew of them) and every topic a protected
    group committed (``committed``: per group, its partitions minus the policies' exclusions)."""
    return list(dict.fromkeys([*mirror.policy_topics(available=sorted(available or [])),
                               *sorted({t for tps in committed.values() for t, _p in tps})]))


def _marks(ledger: Ledger) -> dict[str, dict[str, Any]]:
    return {str(w["name"]): w for w in ledger.watermarks(COMPONENT)}


def _ident(detail: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A proven row's proof and facts, without the check that made it (equal: the same proof)."""
    if not isinstance(detail, Mapping):
        return None
    return {k: v for k, v in detail.items() if k != "checked_at"}


def _key(detail: Mapping[str, Any]) -> list[Any]:
    """What a confirmation names a partition's proof by: cold's proving record's offset (or, when
    nothing needed holding, the method that said so) and the hot records not on cold then."""
    return [detail.get("cold_offset", detail.get("nothing_needed")), detail.get("records_behind")]


def _confirmed(mark: Mapping[str, Any] | None) -> tuple[float | None, float | None, dict[tuple[str, int], Any]]:
    """The :data:`CONFIRMED` row: (its safe time, the check's time, (topic, partition) → the key of
    the proof it confirmed)."""
    if mark is None or not isinstance(mark.get("detail"), Mapping):
        return None, None, {}
    d = mark["detail"]
    parts = {(str(t), int(p)): k for t, ps in (d.get("partitions") or {}).items() for p, k in ps.items()}
    return float(mark["watermark"]), d.get("checked_at"), parts


def proven_marks(marks: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Each partition's proven row as a reader must take it: its own row, its safe time moved to
    the :data:`CONFIRMED` row's when that row confirms the same proof (same key) at a later time
    (the detail then says ``confirmed_at``)."""
    safe, at, conf = _confirmed(marks.get(CONFIRMED))
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for name, w in marks.items():
        m = _PROVEN_RX.match(name)
        if not m:
            continue
        tp = (m["topic"], int(m["partition"]))
        d = w.get("detail")
        if (safe is not None and tp in conf and isinstance(d, Mapping) and _key(d) == conf[tp]
                and safe > float(w["watermark"])):
            w = {**w, "watermark": safe, "detail": {**d, "confirmed_at": at}}
        out[tp] = dict(w)
    return out


def record_proven(ledger: Ledger, report: LagReport, partitions: Mapping[str, int], *,
                  carried: Collection[tuple[str, int]] | None = None) -> None:
    """Keep, per partition, the safe time the gate's lag proved and the cold record that proves it
    (or that hot's partition was empty then), only ever moving forward; ``partitions``: hot's
    partition count per topic.

    Only what changed is written (issue 42: 100,000 partitions per check at scale, most of them
    unchanged): a partition whose proof is the one its row holds and whose safe time moved
    forward is named, with its proof's key, in one :data:`CONFIRMED` row carrying that safe time
    (every caught-up partition of a check has the same one: the time hot's ends were read); the
    others' rows are rewritten. A partition the previous confirmation named and this one does not
    has that safe time written into its own row first (never backwards). Readers take the rows
    through :func:`proven_marks`, which moves a row's safe time only when the confirmation names
    the row's own proof (its key), and the unplanned window then still checks on cold that the
    proving record is there.

    ``carried``: the partitions whose proof the lag carried unchanged (:class:`lag.Incremental`:
    both logs' evidence as at the proof): those at the check's safe time are named in the
    confirmation without their rows being read; only the others' rows are read back (by name).
    None: every row is read and compared. One transaction (``set_watermarks``: one batched upsert)."""
    kept: list[tuple[LagRow, str, dict[str, Any]]] = []
    for row in report.partitions:
        if row.error or row.safe_time is None:
            continue
        if row.proof is not None:
            proof: dict[str, Any] = {**row.proof, "method": row.method}
        elif row.method in NOTHING_HELD:
            # hot's partition was empty, or cold was proven to hold none of its records: the safe time
            # lies before hot's oldest record and stays true whatever cold holds later
            proof = {"nothing_needed": row.method}
        else:
            continue
        kept.append((row, PROVEN.format(topic=row.topic, partition=row.partition),
                     {**proof, "partitions": partitions.get(row.topic), "records_behind": row.records_behind}))
    confirmed: dict[str, dict[str, Any]] = {}
    safe: float | None = None
    if carried:
        safe = max((float(r.safe_time or 0.0) for r, _n, _i in kept if (r.topic, r.partition) in carried), default=None)
    if carried is None:
        marks = _marks(ledger)
    else:
        ask = [CONFIRMED]
        for row, name, ident in kept:
            if (row.topic, row.partition) in carried and float(row.safe_time or 0.0) == safe:
                confirmed.setdefault(row.topic, {})[str(row.partition)] = _key(ident)
            else:
                ask.append(name)
        marks = {str(w["name"]): w for w in ledger.watermarks_named(COMPONENT, ask)}
    prev_safe, _prev_at, prev_conf = _confirmed(marks.get(CONFIRMED))
    if prev_conf and carried is not None:  # the rows a confirmation named before and may not now: read back
        more = [PROVEN.format(topic=t, partition=p) for t, p in prev_conf if str(p) not in confirmed.get(t, {})]
        marks.update({str(w["name"]): w for w in ledger.watermarks_named(COMPONENT, [n for n in more
                                                                                    if n not in marks])})
    effective = proven_marks(marks)
    items: list[tuple[str, float, dict[str, Any]]] = []
    written: set[str] = set()
    for row, name, ident in kept:
        if str(row.partition) in confirmed.get(row.topic, {}):
            continue
        prev = marks.get(name)
        eff = effective.get((row.topic, row.partition))
        ahead = eff is None or float(eff["watermark"]) < float(row.safe_time or 0.0)  # only ever forward
        if prev is not None and ahead and _ident(prev.get("detail")) == ident:
            safe = float(row.safe_time or 0.0) if safe is None else safe
            if float(row.safe_time or 0.0) == safe:  # the same proof, confirmed at this check's safe time
                confirmed.setdefault(row.topic, {})[str(row.partition)] = _key(ident)
                continue
        if not ahead:
            continue
        items.append((name, float(row.safe_time or 0.0), {**ident, "checked_at": report.checked_at}))
        written.add(name)
    if prev_safe is not None:
        for (t, p), key in prev_conf.items():  # named before, not now: its safe time into its own row
            name = PROVEN.format(topic=t, partition=p)
            w = marks.get(name)
            d = (w or {}).get("detail")
            if (name in written or str(p) in confirmed.get(t, {}) or w is None or not isinstance(d, Mapping)
                    or _key(d) != key or float(w["watermark"]) >= prev_safe):
                continue
            items.append((name, prev_safe, dict(d)))
    if confirmed or prev_conf:
        items.append((CONFIRMED, safe if safe is not None else float(prev_safe or 0.0),
                      {"checked_at": report.checked_at, "partitions": confirmed}))
    ledger.set_watermarks(COMPONENT, items)


def record_resolved(ledger: Ledger, policy: str, at: float, topics: Mapping[str, int]) -> None:
    """The topics (and their partition counts) ``policy``'s ``topics_regex`` selected on hot at
    ``at`` (read before hot's topics were listed): a topic created on hot later holds only records
    written after ``at``."""
    name = RESOLVED.format(policy=policy)
    prev = next((w for w in ledger.watermarks_named(COMPONENT, [name]) if str(w["name"]) == name), None)
    if prev is None or float(prev["watermark"]) < at:
        ledger.set_watermark(COMPONENT, name, at, {"topics": sorted(topics), "partitions": dict(topics)})


def _known(ledger: Ledger, mirror: Mirror) -> tuple[dict[str, dict[int, dict[str, Any]]], dict[str, Any],
                                                    dict[str, set[tuple[str, int]]], list[str]]:
    """What the ledger knows: proofs by topic and partition, each pattern's last resolution, the
    protected groups' newest checkpointed partitions, and notes."""
    proofs: dict[str, dict[int, dict[str, Any]]] = {}
    resolved: dict[str, Any] = {}
    marks = _marks(ledger)
    for (t, p), w in proven_marks(marks).items():
        proofs.setdefault(t, {})[p] = w
    for name, w in marks.items():
        if name.startswith("topics_regex:") and name.endswith(":resolved"):
            resolved[name[len("topics_regex:"):-len(":resolved")]] = w
    groups = mirror.policy_groups(ledger.checkpointed_groups())
    committed: dict[str, set[tuple[str, int]]] = {}
    for g, rows in ledger.latest_checkpoints(groups).items():
        committed[g] = {(str(r["topic"]), int(r["partition_id"])) for r in rows
                        if r.get("committed_offset") is not None and not mirror.topic_excluded(g, str(r["topic"]))}
    notes = [f"hot cluster unreachable: the topics and groups are those the ledger knows ({len(groups)} protected "
             f"group(s) checkpointed, {len(resolved)} topics_regex resolution(s) recorded by the gate)"]
    return proofs, resolved, committed, notes


def _partition(cold: KafkaCluster, ct: str, p: int, w: dict[str, Any] | None) -> tuple[float | None, str]:
    """One partition's safe time with hot gone: the gate's proven one while cold still holds the
    record that proved it."""
    if w is None:
        return None, "no gate check proved cold's position on hot by the identity of its records"
    d = w.get("detail") or {}
    safe, at = float(w["watermark"]), iso(d.get("checked_at"))
    again = f", the same proof confirmed at the check of {iso(d['confirmed_at'])}" if d.get("confirmed_at") else ""
    if d.get("nothing_needed"):
        return safe, (f"at the check of {at}{again} hot's partition was empty or cold was proven to hold none of its "
                      f"records ({d['nothing_needed']}): the safe time lies before hot's oldest record")
    off = int(d["cold_offset"])
    rec = cold.record_at(ct, p, off, off + 1)
    if rec is None or rec.offset != off or (rec.timestamp, rec.fingerprint) != (d.get("timestamp"),
                                                                                 d.get("fingerprint")):
        return None, (f"cold no longer holds the record (offset {off}) that proved its position at the check of {at}: "
                      "what it holds now is no evidence")
    return safe, (f"proven at the check of {at}{again}: cold's record at offset {off} is hot's at offset "
                  f"{d.get('hot_offset')} (identity), {d.get('records_behind')} hot record(s) not yet on cold then; "
                  "cold still holds it")


def unstated(name: str, basis: str) -> dict[str, Any]:
    """A loss-window row of a Kafka component about which nothing can be stated (``basis``: why):
    no safe time, every record unknowable."""
    return {"component": "kafka", "name": name, "safe_time": None, "basis": basis, "known_missing": None,
            "unknowable": "every record"}


def loss_rows(mirror: Mirror, ledger: Ledger) -> list[dict[str, Any]]:
    """The unplanned loss window's Kafka components, from cold and the ledger only: one per gated
    topic (per partition the proven safe time, see :func:`_partition`; none for a partition hot
    had and cold lacks, or a LogAppendTime cold topic), one per ``topics_regex`` pattern (the last
    time the gate resolved it on hot: a topic created later holds only later records)."""
    out: list[dict[str, Any]] = []
    proofs, resolved, committed, notes = _known(ledger, mirror)
    for pol in mirror.policies:
        if not pol.topics_regex:
            continue
        w = resolved.get(pol.name)
        safe = float(w["watermark"]) if w is not None else None
        out.append({"component": "kafka", "name": f"topics_regex:{pol.name}", "safe_time": safe,
                    "basis": (f"the gate's last resolution of topics_regex on hot ({len((w.get('detail') or {}).get('topics') or [])} "
                              "topic(s), each stated below)" if w is not None
                              else "topics_regex was never resolved on hot by a gate check: which topics it selects "
                                   "is unknown"),
                    "known_missing": None,
                    "unknowable": "topics matching the pattern created on hot after " + (iso(safe) or "replication began")})
    available = {t for w in resolved.values() for t in ((w.get("detail") or {}).get("topics") or [])}
    hot_counts: dict[str, int] = {}
    for w in resolved.values():
        for t, n in ((w.get("detail") or {}).get("partitions") or {}).items():
            hot_counts[t] = max(hot_counts.get(t, 0), int(n))
    available |= {t for t in proofs if any(p.selects_topic(t) for p in mirror.policies)}
    topics = gated_topics(mirror, available=available, committed=committed)
    if not topics:
        return out
    try:
        with mirror.client("cold") as cold:
            have = cold.topics()
            for t in topics:
                out.append(_topic_row(cold, mirror, t, have, proofs.get(t, {}), committed, notes,
                                      hot_counts.get(t, 0)))
    except Exception as exc:  # noqa: BLE001 - cold brokers down too: nothing can be stated
        done = {r["name"] for r in out}
        out.extend(unstated(t, f"cold brokers unreadable: {why(exc)}") for t in topics if t not in done)
    return out


def _topic_row(cold: KafkaCluster, mirror: Mirror, t: str, have: Mapping[str, int], proofs: dict[int, dict[str, Any]],
               committed: Mapping[str, set[tuple[str, int]]], notes: list[str], hot_count: int) -> dict[str, Any]:
    ct = mirror.cold_topic(t)
    row: dict[str, Any] = {"component": "kafka", "name": t, "safe_time": None, "known_missing": None,
                           "unknowable": "every record of the topic", "notes": notes}
    n_cold = have.get(ct, 0)
    # hot's partitions as the ledger knew them: the gate's count, the checkpoints' partitions
    n_hot = max([int((w.get("detail") or {}).get("partitions") or 0) for w in proofs.values()]
                + [p + 1 for p in proofs] + [p + 1 for tps in committed.values() for tt, p in tps if tt == t]
                + [hot_count])
    if not n_cold:
        return {**row, "basis": f"topic {ct} is missing on the cold cluster"}
    restamped = False
    with contextlib.suppress(Exception):
        restamped = cold.log_append_time(ct)
    parts: list[dict[str, Any]] = []
    for p in range(max(n_hot, n_cold)):
        if p >= n_cold:
            safe, basis = None, f"hot has partition {p} (the ledger's last view of hot) and cold lacks it"
        elif restamped and ((proofs.get(p) or {}).get("detail") or {}).get("method") != "mm2_sync":
            safe, basis = None, (f"cold topic {ct} has message.timestamp.type=LogAppendTime: its timestamps are "
                                 "the cold broker's, never hot's; no position was proven by MirrorMaker 2's "
                                 "offset syncs either")
        else:
            safe, basis = _partition(cold, ct, p, proofs.get(p))
        parts.append({"partition": p, "safe_time": safe, "basis": basis})
    row["partitions"] = parts
    unproven = [x for x in parts if x["safe_time"] is None]
    lacking = [x["partition"] for x in parts if x["partition"] >= n_cold]
    if lacking:
        row["known_missing"] = (f"partition(s) {', '.join(map(str, lacking))}: hot has them, cold lacks them "
                                f"({ct} has {n_cold})")
    if unproven:
        first = unproven[0]
        return {**row, "basis": f"{len(unproven)} of {len(parts)} partition(s) state no safe time; partition "
                                f"{first['partition']}: {first['basis']}"}
    worst = min(parts, key=lambda x: float(x["safe_time"]))  # by time alone: equal times (one check's) tie
    safe = worst["safe_time"]
    return {**row, "safe_time": safe, "basis": f"partition {worst['partition']}: {worst['basis']}",
            "unknowable": "records produced on hot after " + (iso(safe) or "the first record")}
