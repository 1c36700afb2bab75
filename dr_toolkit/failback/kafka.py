"""Kafka's part of coming back after a failover (issue 40): the divergence of the old hot cluster,
keeping it aside, and re-protect — the reverse MirrorMaker 2 flow and the groups' offsets back.

``topology`` is the topology of the direction that was failed over: its ``hot`` is the old hot
(fenced), its ``cold`` the active cluster. Kafka records are never overwritten, so nothing here
rolls anything back.

- :func:`divergence` (read only): per gated topic-partition (the gate's own selection,
  :func:`~dr_toolkit.kafka.holdings.gated_topics`), the records the old hot holds that the active
  cluster never took from the mirror. Cold's position on hot is found by the identity of the
  records (timestamp, fingerprint, place in the log — the gate's evidence), from a proven *anchor*
  (a cold record that is the copy of a hot record at its position: the one :func:`set_aside`
  recorded, else the one the gate proved before the failover, else the newest proven among cold's
  records by :func:`~dr_toolkit.kafka.lag.mirrored_position`), then by walking both logs forward
  from it: while hot's next record is cold's next, it was mirrored; the first one that is not
  starts the divergence. Every hot record after that which is not the reverse mirror's copy of
  the active cluster's next record is divergent. A partition whose anchor cannot be proven is an
  item saying so (``unproven``), never "no divergence".
- :func:`set_aside`: copies every divergent record (key, value, headers, CreateTime) to
  ``__drt-divergence.<run_id>.<topic>`` on the old hot, same partition, retention unlimited.
  The ``__`` prefix keeps it out of MirrorMaker 2's default ``topics.exclude`` (``__.*``), out of
  the toolkit's topic listings (and so of the gate's ``topics_regex`` resolution) and of consumers'
  pattern subscriptions. Idempotent: what the aside partition already holds is checked (identity,
  in order) and only the rest is copied.
- :func:`reprotect`: (a) evidence the reverse flow runs — the active cluster's records taken
  since the failover are on the old hot (the reverse copies the walk finds), or MirrorMaker 2's
  reverse offset syncs are borne out by the records; none: ``failed`` with one line naming the
  missing flow; (b) the groups' offsets checkpointed on the active cluster and remapped onto the
  old hot with the never-skip machinery run on :meth:`Topology.reversed`, a position inside a
  divergent run moved past it (those records were never the active cluster's); (c) a JSON
  summary, with per partition the active cluster's offset the reverse flow must start at to copy
  the delta only (``reverse_start``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError, ProblemFound
from dr_toolkit.failback.divergence import Divergence
from dr_toolkit.kafka.checkpoint import checkpoint_groups
from dr_toolkit.kafka.client import KafkaCluster, Record, client_config, fingerprint
from dr_toolkit.kafka.holdings import COMPONENT as GATE_COMPONENT
from dr_toolkit.kafka.holdings import PROVEN, gated_topics
from dr_toolkit.kafka.lag import CANDIDATES, mirrored_position
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.kafka.mm2 import read_offset_syncs
from dr_toolkit.kafka.offsets import apply_offsets, remap_groups
from dr_toolkit.kafka.rows import offsets_of

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

COMPONENT = "kafka-failback"  # the ledger's watermarks of this module: anchors kept by set_aside
ANCHOR = "anchor:{topic}[{partition}]"
ASIDE_PREFIX = "__drt-divergence."
MAX_TOPIC = 249
BATCH = 500
PROOF_METHODS = ("exact", "skew_bound", "mm2_sync")


def aside_topic(run_id: str, topic: str) -> str:
    """Where the divergent records of ``topic`` are kept on the old hot cluster."""
    rid = re.sub(r"[^A-Za-z0-9_-]", "-", run_id)[:64]
    name = f"{ASIDE_PREFIX}{rid}.{topic}"
    if len(name) > MAX_TOPIC:
        name = name[:MAX_TOPIC]
    return name


# -- the walk: cold's position on hot, and what hot holds past it --------------------------------

@dataclass
class Walk:
    """One partition: hot = the old hot, cold = the active cluster (the forward mirror's names)."""

    topic: str
    partition: int
    cold_topic: str
    hot_range: tuple[int, int] = (0, 0)
    cold_range: tuple[int, int] = (0, 0)
    anchor: dict[str, Any] | None = None  # {hot_offset, cold_offset, timestamp, fingerprint, source}
    unproven: str | None = None  # why no anchor could be proven
    hot_boundary: int | None = None  # hot's first record the active cluster did not take from the mirror
    cold_boundary: int | None = None  # the active cluster's first record not from the mirror (the delta)
    runs: list[list[int]] = field(default_factory=list)  # divergent [first, last] hot offsets
    count: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    back: int = 0  # the active cluster's records since the boundary found on hot (the reverse copies)
    first_back: int | None = None  # hot offset of the first of them
    basis: str = ""
    gap: bool = False  # a reverse copy since the last divergent record (the next one starts a run)
    recopied: int = 0  # the active's records from before the boundary the reverse flow copied again
    recopy: dict[int, int] = field(default_factory=dict)  # active offset -> old hot offset of that copy

    @property
    def where(self) -> str:
        return f"{self.topic}:{self.partition}"

    def add(self, r: Record) -> None:
        """One more divergent record: the current run goes on unless a reverse copy came between."""
        if self.runs and not self.gap:
            self.runs[-1][1] = r.offset
        else:
            self.runs.append([r.offset, r.offset])
        self.gap = False
        self.count += 1
        self.first_ts = r.timestamp if self.first_ts is None else self.first_ts
        self.last_ts = r.timestamp


class _Cursor:
    def __init__(self, it: Iterator[Record]) -> None:
        self._it = it
        self.cur: Record | None = next(it, None)

    def advance(self) -> None:
        self.cur = next(self._it, None)


def _ident(stamped: bool) -> Callable[[Record], tuple[int, str]]:
    return (lambda r: (r.timestamp, r.fingerprint)) if stamped else (lambda r: (0, r.fingerprint))


def _check_anchor(hot: KafkaCluster, cold: KafkaCluster, w: Walk, a: dict[str, Any], stamped: bool) -> bool:
    """Does each cluster still hold the anchor's record at its offset, the same on both?"""
    try:
        u, d = int(a["hot_offset"]), int(a["cold_offset"])
    except (KeyError, TypeError, ValueError):
        return False
    if not (w.hot_range[0] <= u < w.hot_range[1] and w.cold_range[0] <= d < w.cold_range[1]):
        return False
    h = hot.record_at(w.topic, w.partition, u, u + 1)
    c = cold.record_at(w.cold_topic, w.partition, d, d + 1)
    ident = _ident(stamped)
    return (h is not None and c is not None and h.offset == u and c.offset == d and ident(h) == ident(c)
            and (not stamped or (h.timestamp, h.fingerprint) == (a.get("timestamp"), a.get("fingerprint"))))


def _gallop(hot: KafkaCluster, cold: KafkaCluster, w: Walk, skew: int, restamped: bool, lso: int,
            syncs: list[tuple[int, int]] | None) -> dict[str, Any] | None:
    """The newest cold record proven to be the copy of a hot record at its position, looking back
    from cold's end in growing steps (the gate's :func:`mirrored_position` on cold's log cut there)."""
    clo, chi = w.cold_range
    end, step = chi, CANDIDATES
    while end > clo:
        _q, method, _basis, proof = mirrored_position(hot, cold, w.topic, w.partition, w.cold_topic, skew,
                                                      (w.hot_range[0], lso), (clo, end), restamped=restamped,
                                                      syncs=syncs)
        if proof and method in PROOF_METHODS and "hot_offset" in proof:
            return {**proof, "source": f"identity of the records ({method})"}
        end, step = end - step, step * 2
    return None


def _records(c: KafkaCluster, t: str, p: int, start: int, end: int) -> Iterator[Record]:
    """Every record of [start, end) read in batches (one consumer per cluster: never two open)."""
    pos = start
    while pos < end:
        got = list(c.read(t, p, pos, end, max_records=BATCH))
        if not got:
            return
        yield from got
        pos = got[-1].offset + 1


def walk_partition(hot: KafkaCluster, cold: KafkaCluster, w: Walk, *, skew: int, anchors: list[dict[str, Any]],
                   reverse_ran: bool, syncs: list[tuple[int, int]] | None = None) -> Walk:
    """Fill ``w``: its anchor, boundaries and divergent runs (see the module doc)."""
    t, p, ct = w.topic, w.partition, w.cold_topic
    w.hot_range = hot.watermarks(t, p)
    w.cold_range = cold.watermarks(ct, p)
    (hlo, hhi), (clo, chi) = w.hot_range, w.cold_range
    restamped = cold.log_append_time(ct)
    stamped = not restamped
    if hhi <= hlo:
        w.hot_boundary, w.cold_boundary, w.basis = hhi, chi, "the old hot partition holds no record"
        return w
    lso = hot.stable_ends([(t, p)]).get((t, p), hhi)
    lso = max(hlo, min(int(lso), hhi))
    for a in anchors:
        if _check_anchor(hot, cold, w, a, stamped):
            w.anchor = a
            break
    if w.anchor is None and chi == clo == 0:
        w.anchor = {"hot_offset": hlo - 1, "cold_offset": -1, "source": "the active cluster never held a record "
                                                                        "of this partition"}
    if w.anchor is None:
        if reverse_ran:
            w.unproven = ("no anchor recorded before the reverse flow started (set_aside's, or the gate's proof) "
                          "still holds, and the reverse mirror's copies on the old hot make the records' identity "
                          "ambiguous")
        else:
            w.anchor = _gallop(hot, cold, w, skew, restamped, lso, syncs)
            if w.anchor is None:
                w.unproven = (f"none of the active cluster's records ({ct}[{p}] {clo}..{chi}) is a proven copy of "
                              f"an old hot record at its position: what it took from the mirror is unknown")
    if w.anchor is None:
        w.runs, w.count = [[hlo, hhi - 1]], hhi - hlo
        w.basis = w.unproven or ""
        return w
    ident = _ident(stamped)
    u, d = int(w.anchor["hot_offset"]), int(w.anchor["cold_offset"])
    hot_it = _Cursor(_records(hot, t, p, u + 1, lso))
    cold_it = _Cursor(_records(cold, ct, p, d + 1, chi))  # another consumer: read in step with hot's
    matched = 0
    recent: list[tuple[int, str]] = []
    while (h := hot_it.cur) is not None:  # mirrored: hot's next record is cold's next
        while cold_it.cur is not None and ident(cold_it.cur) != ident(h) and ident(cold_it.cur) in recent:
            cold_it.advance()  # a copy the mirror re-sent (at-least-once)
        if cold_it.cur is None or ident(cold_it.cur) != ident(h):
            break
        recent = [*recent[-63:], ident(h)]
        matched += 1
        cold_it.advance()
        hot_it.advance()
    w.hot_boundary = hot_it.cur.offset if hot_it.cur is not None else lso
    w.cold_boundary = cold_it.cur.offset if cold_it.cur is not None else chi
    # Past it: the reverse mirror's copy of the active cluster's next record (the delta), or its copy
    # again of the active's records from its log start (a reverse flow started with no stored
    # position re-copies the whole log), or divergent.
    again = _Cursor(_records(cold, ct, p, clo, w.cold_boundary)) if w.cold_boundary > clo else None
    while (h := hot_it.cur) is not None:
        if cold_it.cur is not None and ident(cold_it.cur) == ident(h):
            w.back += 1
            w.first_back = h.offset if w.first_back is None else w.first_back
            w.gap = True
            cold_it.advance()
        elif again is not None and again.cur is not None and ident(again.cur) == ident(h):
            w.recopied += 1
            w.recopy[again.cur.offset] = h.offset
            w.gap = True
            again.advance()
        else:
            w.add(h)
        hot_it.advance()
    if lso < hhi:
        w.basis = f"{hhi - lso} record offset(s) of an open transaction on the old hot not read"
    w.basis = (f"anchor: the active cluster's {ct}@{d} is the old hot's {t}@{u} ({w.anchor.get('source')}); "
               f"{matched} record(s) after it mirrored in order; " + w.basis).rstrip("; ")
    return w


# -- selection -------------------------------------------------------------------------------------

def _gated(mirror: Mirror, hot: KafkaCluster, ledger: Ledger) -> dict[str, list[str]]:
    """Per kafka policy, the gated topics (the gate's selection, on the old hot's live topics and
    its groups' newest checkpoints in the ledger)."""
    out: dict[str, list[str]] = {}
    live = hot.topics()
    groups = mirror.policy_groups(ledger.checkpointed_groups())
    cps = ledger.latest_checkpoints(groups) if groups else {}
    for pol in mirror.policies:
        committed = {g: {(str(r["topic"]), int(r["partition_id"])) for r in rows
                         if r.get("committed_offset") is not None and pol.selects_group(g)
                         and not pol.excludes_topic(str(r["topic"]))}
                     for g, rows in cps.items()}
        one = Mirror(mirror.hot, mirror.cold, mirror.access, _only(mirror.topology, pol.name), mirror.skew_ms,
                     mirror.cold_prefix)
        out[pol.name] = [t for t in gated_topics(one, available=live, committed=committed)
                         if t in live and not t.startswith(ASIDE_PREFIX)]
    return out


def _only(topology: Topology | None, policy: str) -> Topology | None:
    if topology is None:
        return None
    pols = topology.policies.model_copy(update={"kafka": [p for p in topology.policies.kafka if p.name == policy]})
    return topology.model_copy(update={"policies": pols})


def _anchors(ledger: Ledger, t: str, p: int) -> list[dict[str, Any]]:
    """Anchors known before: the one set_aside kept, then the gate's proof of this partition."""
    out: list[dict[str, Any]] = []
    for comp, name, src in ((COMPONENT, ANCHOR.format(topic=t, partition=p), "kept by set_aside"),
                            (GATE_COMPONENT, PROVEN.format(topic=t, partition=p), "the gate's proof")):
        for wm in ledger.watermarks(comp):
            if wm["name"] == name and isinstance(wm.get("detail"), dict) and "cold_offset" in wm["detail"]:
                out.append({**wm["detail"], "source": wm["detail"].get("source") or src})
    return out


def _reverse_ran(topology: Topology, access: Access) -> bool:
    """Has a reverse MirrorMaker 2 flow left its internal topics (as the topology names them)?"""
    rev = Mirror.of(topology.reversed(), access)
    found = False
    for role, topic in (("hot", rev.offset_syncs_topic), ("cold", rev.checkpoints_topic)):
        if not topic:
            continue
        try:
            with rev.client(role) as c:
                found = found or topic in c.admin.list_topics(timeout=c.timeout_s).topics
        except Exception:  # noqa: BLE001 - an unreadable side is judged by the records alone
            continue
    return found


def walks(topology: Topology, ledger: Ledger, access: Access) -> list[tuple[str, Walk]]:
    """Every gated partition's walk, by policy."""
    mirror = Mirror.of(topology, access)
    reverse_ran = _reverse_ran(topology, access)
    out: list[tuple[str, Walk]] = []
    with mirror.client("hot") as hot, mirror.client("cold") as cold:
        syncs = None
        if mirror.offset_syncs_topic:
            try:
                syncs = read_offset_syncs(hot, mirror.offset_syncs_topic)
            except DrtError:
                syncs = None
        counts = hot.topics()
        for pol, topics in _gated(mirror, hot, ledger).items():
            for t in topics:
                for p in range(counts[t]):
                    w = Walk(t, p, mirror.cold_topic(t))
                    try:
                        walk_partition(hot, cold, w, skew=mirror.skew_ms, anchors=_anchors(ledger, t, p),
                                       reverse_ran=reverse_ran,
                                       syncs=syncs.by_partition.get((t, p)) if syncs else None)
                    except DrtError as exc:
                        w.unproven = f"unreadable: {exc.message}"
                        w.runs, w.count = [], 0
                    out.append((pol, w))
    return out


def _item(pol: str, w: Walk, recovery_point: float | None) -> Divergence:
    detail: dict[str, Any] = {
        "topic": w.topic, "partition": w.partition, "active_topic": w.cold_topic,
        "first_offset": w.runs[0][0] if w.runs else None, "last_offset": w.runs[-1][1] if w.runs else None,
        "count": w.count, "runs": w.runs[:100], "runs_total": len(w.runs),
        "first_create_time": w.first_ts, "last_create_time": w.last_ts,
        "hot_boundary": w.hot_boundary, "active_boundary": w.cold_boundary, "anchor": w.anchor,
        "basis": w.basis, "recovery_point": recovery_point}
    if w.unproven:
        detail.update(unproven=w.unproven, first_offset=w.hot_range[0], last_offset=w.hot_range[1] - 1,
                      count=w.hot_range[1] - w.hot_range[0], runs=[[w.hot_range[0], w.hot_range[1] - 1]],
                      note="position unproven: every record the old hot holds of the partition is listed")
    return Divergence("kafka", pol, w.where, detail)


def divergence(topology: Topology, ledger: Ledger, access: Access, *,
               recovery_point: float | None) -> list[Divergence]:
    """What the old hot holds that the active cluster never took from the mirror: one item per
    partition holding such records, or whose position cannot be proven (read only)."""
    return [_item(pol, w, recovery_point) for pol, w in walks(topology, ledger, access) if w.count or w.unproven]


# -- set aside -------------------------------------------------------------------------------------

def _producer(topology: Topology, access: Access) -> Any:
    from confluent_kafka import Producer

    ep = topology.hot.kafka
    assert ep is not None
    conf = client_config(ep.bootstrap_servers, access.endpoint(topology, topology.hot_name, "kafka"))
    return Producer({**conf, "enable.idempotence": True, "linger.ms": 5, "acks": "all"})


def _ensure_topic(hot: KafkaCluster, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    have = hot.admin.list_topics(timeout=hot.timeout_s).topics
    if name in have:
        return
    fut = hot.admin.create_topics([NewTopic(name, partitions, replication_factor=-1, config={
        "retention.ms": "-1", "retention.bytes": "-1", "message.timestamp.type": "CreateTime"})],
        request_timeout=hot.timeout_s)[name]
    try:
        fut.result(timeout=hot.timeout_s * 2)
    except Exception as exc:  # noqa: BLE001 - created by a concurrent run: fine
        if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
            raise DrtError(f"cannot create the divergence topic {name}: {exc}", where=hot.bootstrap) from None
    deadline = time.monotonic() + max(10.0, 2 * hot.timeout_s)
    for p in range(partitions):  # a new topic's partitions answer once their leader is elected
        while True:
            try:
                hot.watermarks(name, p)
                break
            except DrtError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _raw(hot: KafkaCluster, t: str, p: int, start: int, end: int) -> Iterator[Any]:
    """The messages (key, value, headers, timestamp) of [start, end), in order."""
    yield from hot._fetch(t, p, start, end, lambda m: m, max_records=None, batch=BATCH, first=BATCH,
                          committed=True, silent=f"fetch of {t}[{p}] at offset {start}")


def set_aside(topology: Topology, ledger: Ledger, access: Access, items: list[Divergence], *,
              run_id: str) -> list[Divergence]:
    """Copy every item's divergent records to its aside topic on the old hot (never deleting
    anything); returns the items with ``kept_at``. Idempotent: the aside partition's records are
    compared with the divergent ones in order and only the rest is copied."""
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

    mirror = Mirror.of(topology, access)
    out: list[Divergence] = []
    with mirror.client("hot") as hot:
        counts = hot.topics()
        producer = None
        for it in items:
            if it.capability != "kafka":
                out.append(it)
                continue
            d = it.detail
            t, p = str(d["topic"]), int(d["partition"])
            name = aside_topic(run_id, t)
            _ensure_topic(hot, name, counts.get(t, p + 1))
            lo, hi = hot.watermarks(name, p)
            held = list(_records(hot, name, p, lo, hi)) if hi > lo else []
            want: list[Any] = []
            for first, last in d.get("runs") or []:
                want.extend(m for m in _raw(hot, t, p, int(first), int(last) + 1))
            if len(held) > len(want) or any(
                    (h.timestamp, h.fingerprint) != _msg_ident(m) for h, m in zip(held, want, strict=False)):
                raise ProblemFound(f"{name}[{p}] holds records that are not {t}[{p}]'s divergent ones in order: "
                                   "nothing copied", where=hot.bootstrap,
                                   hint="it was written by something else: give this re-protect another run id")
            if len(want) > len(held):
                producer = producer or _producer(topology, access)
                errors: list[str] = []
                for m in want[len(held):]:
                    kind, ts = m.timestamp()
                    producer.produce(name, value=m.value(), key=m.key(), partition=p, headers=m.headers() or None,
                                     timestamp=0 if kind == TIMESTAMP_NOT_AVAILABLE else ts,
                                     on_delivery=lambda err, _m, errs=errors: errs.append(str(err)) if err else None)
                    producer.poll(0)
                if producer.flush(max(30.0, hot.timeout_s * 3)) or errors:
                    raise DrtError(f"copying {t}[{p}]'s divergent records to {name} did not complete: "
                                   f"{'; '.join(errors[:3]) or 'not acknowledged'}", where=hot.bootstrap,
                                   hint="run it again: what was copied is kept and the rest follows")
            lo2, hi2 = hot.watermarks(name, p)
            kept = f"kafka://{topology.hot_name}/{name}[{p}]@{lo}..{hi2 - 1}" if want else None
            if d.get("anchor") and d["anchor"].get("cold_offset", -1) >= 0:
                ledger.set_watermark(COMPONENT, ANCHOR.format(topic=t, partition=p), time.time(),
                                     {**d["anchor"], "source": "kept by set_aside (run " + run_id + ")"})
            out.append(Divergence(it.capability, it.policy, it.where, {**d, "aside_topic": name,
                                                                           "aside_count": len(want)}, kept))
    return out


def _msg_ident(m: Any) -> tuple[int, str]:
    return int(m.timestamp()[1]), fingerprint(m.key(), m.value(), list(m.headers() or []))


# -- re-protect ------------------------------------------------------------------------------------

def _reverse_syncs(rev: Mirror, topics: list[str]) -> int:
    """How many of the reverse flow's offset syncs (MM2's, on the active cluster) are borne out by
    the records: the active's record at the upstream offset is the old hot's at the downstream."""
    if not rev.offset_syncs_topic:
        return 0
    n = 0
    try:
        with rev.client("hot") as act, rev.client("cold") as old:
            if rev.offset_syncs_topic not in act.admin.list_topics(timeout=act.timeout_s).topics:
                return 0
            syncs = read_offset_syncs(act, rev.offset_syncs_topic)
            for t in topics:
                for (st, p), pairs in syncs.by_partition.items():
                    if st != t or not pairs:
                        continue
                    up, down = pairs[-1]
                    a = act.record_at(t, p, up, up + 1)
                    o = old.record_at(rev.cold_topic(t), p, down, down + 1)
                    if a and o and a.offset == up and o.offset == down and a.fingerprint == o.fingerprint:
                        n += 1
    except DrtError:
        return n
    return n


def reprotect(topology: Topology, ledger: Ledger, access: Access, *, run_id: str, dry_run: bool = False,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Evidence of the reverse MirrorMaker 2 flow, then the groups' offsets remapped back onto the
    old hot (never skip); a JSON summary (see the module doc)."""
    say = progress or (lambda _m: None)
    rev_topo = topology.reversed()
    rev = Mirror.of(rev_topo, access)
    ws = walks(topology, ledger, access)
    say(f"kafka: {len(ws)} partition(s) walked on {topology.hot_name} against {topology.cold_name}")
    parts: dict[str, dict[str, Any]] = {}
    for _pol, w in ws:
        parts[f"{w.topic}[{w.partition}]"] = {
            "reverse_start": w.cold_boundary, "active_end": w.cold_range[1], "copied_back": w.back,
            "copied_again": w.recopied,
            "first_copy_on_old_hot": w.first_back, "divergent": w.count, "unproven": w.unproven}
    same_topic = all(rev.cold_topic(w.topic) == w.topic for _p, w in ws)
    evidence = [k for k, v in parts.items() if v["copied_back"]] if same_topic else []
    synced = _reverse_syncs(rev, sorted({w.topic for _p, w in ws}))
    summary: dict[str, Any] = {"capability": "kafka", "run_id": run_id, "active": topology.cold_name,
                               "old_hot": topology.hot_name, "partitions": parts,
                               "reverse_flow": {"copied_back_partitions": evidence, "offset_syncs_borne_out": synced,
                                                "naming": rev_topo.cold.kafka.replication_policy
                                                if rev_topo.cold.kafka else None}}
    if not evidence and not synced:
        waiting = sum(1 for v in parts.values() if (v["active_end"] or 0) > (v["reverse_start"] or 0))
        return {**summary, "status": "failed", "message": (
            f"no reverse MirrorMaker 2 flow {topology.cold_name} -> {topology.hot_name}: none of the "
            f"{waiting} partition(s) where {topology.cold_name} took records since the failover has any of them on "
            f"{topology.hot_name}, and no reverse offset sync is borne out by the records")}
    say(f"kafka: reverse flow seen ({len(evidence)} partition(s) with copies, {synced} offset sync(s))")
    # only proven runs move a position: an unproven partition's "runs" are its whole log (the reverse
    # copies too), and the remap's own never-skip position stands there
    runs = {(w.topic, w.partition): w.runs for _p, w in ws if not w.unproven}
    recopies = {(w.topic, w.partition): w.recopy for _p, w in ws}
    groups, notes = rev.protected_groups(ledger=ledger)
    if not groups:
        return {**summary, "status": "planned" if dry_run else "done", "groups": {}, "notes": notes,
                "message": "reverse flow runs; no consumer group to carry back"}
    ck = checkpoint_groups(rev, None if dry_run else ledger, groups)
    rows_by_group: dict[str, list[Any]] = {}
    for r in ck.partitions:
        rows_by_group.setdefault(r.group_id, []).append(r)
    out: dict[str, Any] = {}
    failed: list[str] = []
    with rev.client("cold") as old:
        done = remap_groups(rev, old, rows_by_group)
        for g, gr in done.groups.items():
            offsets = offsets_of(gr.rows)
            moved: dict[str, int] = {}
            reads: dict[str, int] = {}
            recopied: dict[str, int] = {}
            source = {(r.cold_topic, r.partition): r.source_offset for r in gr.rows}
            for (ct, p), off in list(offsets.items()):
                x, copy = source.get((ct, p)), recopies.get((ct, p), {})
                tgt = (copy.get(x - 1, -2) + 1 if x - 1 in copy else copy.get(x)) if x is not None else None
                if tgt is not None and tgt > off:
                    # the reverse flow copied the active's records again from its log start: the copy of
                    # the group's next record there (every one after it follows in order), not the
                    # old hot's original, after which the divergent records and the copies again lie
                    recopied[f"{ct}[{p}]"] = tgt - off
                    off = tgt
                for first, last in runs.get((ct, p), []):
                    if first <= off <= last:  # never into the divergent records as if mirrored
                        moved[f"{ct}[{p}]"] = last + 1 - off
                        off = last + 1
                    elif off < first:
                        reads[f"{ct}[{p}]"] = reads.get(f"{ct}[{p}]", 0) + last + 1 - first
                offsets[(ct, p)] = off
            entry: dict[str, Any] = {"offsets": {f"{t}[{p}]": o for (t, p), o in sorted(offsets.items())},
                                     "methods": sorted({r.method for r in gr.rows}),
                                     "may_reread": gr.may_reread, "moved_past_divergent": moved,
                                     "will_read_divergent": reads, "moved_to_copy_again": recopied}
            if not dry_run:
                try:
                    entry["applied"] = apply_offsets(old, g, offsets, force=True, ledger=ledger, run_id=run_id,
                                                     who="failback").to_json()
                except DrtError as exc:
                    entry["error"] = exc.message
                    failed.append(g)
            out[g] = entry
    say(f"kafka: {len(out)} group(s) remapped onto {topology.hot_name}" + ("" if dry_run else " and applied"))
    summary.update(groups=out, notes=notes, checkpoint_id=ck.checkpoint_id)
    if failed:
        return {**summary, "status": "failed",
                "message": f"offsets of {len(failed)} group(s) not applied on {topology.hot_name}: "
                           f"{failed[0]}: {out[failed[0]]['error']}"}
    return {**summary, "status": "planned" if dry_run else "done",
            "message": (f"reverse flow {topology.cold_name} -> {topology.hot_name} seen; {len(out)} group(s) "
                        + ("would be " if dry_run else "") + f"remapped onto {topology.hot_name}")}


__all__ = ["aside_topic", "divergence", "reprotect", "set_aside", "walk_partition"]
