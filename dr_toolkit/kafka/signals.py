"""INTERIM (failover branch): the Kafka signal reader, until the Kafka engineer's version lands.

At merge take the Kafka engineer's ``dr_toolkit/kafka/signals.py`` (lag by offsets with a
producer-clock-skew bound, group checkpoint coverage and age); the gate only needs the name
``kafka_signals`` with the :data:`~dr_toolkit.failover.model.SignalReader` signature.

Per topic: the mirror lag of every partition (``kafka.api.lag``). Safe time: the time of this
comparison when no record is behind, else the oldest newest-cold-record timestamp (CreateTime:
the producers' clocks; this interim reader applies no skew bound and says so).
"""

from __future__ import annotations

import concurrent.futures as cf
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError
from dr_toolkit.failover.model import Signal, iso, unreadable

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

KAFKA_PARALLEL = 8  # topics whose lag is read at the same time


def kafka_signals(topology: Topology, ledger: Ledger, access: Access, now: float) -> list[Signal]:
    topics: list[str] = []
    for p in topology.policies.kafka:
        topics.extend(t for t in p.topics if t not in topics)
    if not topics:
        return []
    from dr_toolkit.kafka import api

    failed: dict[str, str] = {}
    by_topic: dict[str, list[dict[str, Any]]] = {t: [] for t in topics}
    with cf.ThreadPoolExecutor(max_workers=min(KAFKA_PARALLEL, len(topics)), thread_name_prefix="drt-lag") as ex:
        futs = {t: ex.submit(api.lag, topology, topics=[t]) for t in topics}
        for t, fut in futs.items():
            try:
                doc = fut.result()
            except Exception as exc:  # noqa: BLE001 - broker down: NO_GO with the reason
                failed[t] = exc.message if isinstance(exc, DrtError) else f"{type(exc).__name__}: {exc}"
                continue
            for part in doc.get("partitions", []):
                by_topic.setdefault(str(part.get("topic")), []).append(part)
    out: list[Signal] = []
    for t in topics:
        parts = by_topic.get(t) or []
        if t in failed:
            out.append(unreadable("kafka", t, failed[t]))
            continue
        if not parts:
            out.append(unreadable("kafka", t, f"no partitions reported for topic {t}"))
            continue
        behind = sum(int(p.get("records_behind") or 0) for p in parts)
        secs = max(float(p.get("seconds_behind") or 0.0) for p in parts)
        detail = {"partitions": len(parts), "records_behind": behind, "seconds_behind": secs}
        if behind == 0:
            out.append(Signal("kafka", t, True, 0.0, now, f"comparison of both sides at {iso(now)}: none behind",
                              detail))
            continue
        cold_ts = [p.get("cold_newest_ts") for p in parts if int(p.get("records_behind") or 0)]
        known = [float(ts) for ts in cold_ts if ts is not None]
        safe = None if len(known) < len(cold_ts) or not known else min(known) / 1000.0
        out.append(Signal("kafka", t, False, secs, safe,
                          "newest mirrored record's CreateTime (interim reader: no producer-skew bound)"
                          if safe is not None else "a partition with records behind has nothing mirrored",
                          detail, f"{behind} records not yet mirrored ({secs:.0f}s behind)"))
    return out
