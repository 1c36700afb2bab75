"""Unplanned failover (the hot cluster is gone): what cold holds, and the data-loss window.

CockroachDB's PCR cutover and YugabyteDB's unplanned failover promote the standby at the
latest time it *provably* holds, and say what is lost. With the hot cluster unreachable nothing
can be compared, so every answer here comes from the cold side and the ledger:

- **HDFS**, per policy target: the listing time of the last completed replication run (the
  ledger's ``hdfs`` watermark) — only when cold, listed now, still holds every file of that
  run's manifest with its recorded size; a file missing there (a later run killed after its
  deletions, a hand-made change) leaves no safe time and is named as known missing. When cold
  or the manifest cannot be read, that is said ("unknown"), never "none". Everything hot
  changed after that listing is unknowable.
- **Kafka**, per topic: per partition, the CreateTime of the newest record the cold cluster
  holds (the mirror copies a partition in order, so every hot record before that one is on
  cold), minus the hot cluster's declared producer clock-skew bound (``kafka.max_clock_skew_s``);
  the topic is read under MirrorMaker 2's name on cold; the topic's safe time is the minimum
  over its partitions. An empty cold partition states none (unknowable).
- **HBase**, per peer: the last *proven* drain time recorded by the gate (position >= WAL
  length); known missing: the WALs/bytes still queued at the last check; later edits are
  unknowable.

The recovery point is the minimum over the components' safe times. A component with no safe
time is reported as *unbounded*: its whole history after the last evidence may be missing.
The operator must type an acceptance of that window before the cold cluster is promoted.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import why as _why
from dr_toolkit.signal import iso

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

ACCEPT_PHRASE = "ACCEPT DATA LOSS"


def probe_hot(topology: Topology, access: Access, timeout_s: float = 5.0) -> dict[str, Any]:
    """Which of the hot cluster's services still answer: ``{"zookeeper": bool|None, "kafka": bool|None,
    "errors": {...}}`` (None: not configured)."""
    out: dict[str, Any] = {"zookeeper": None, "kafka": None, "errors": {}}
    hot = topology.hot
    if hot.zookeeper is not None:
        from dr_toolkit.zk.client import zk_session

        ep = hot.zookeeper.model_copy(update={"connect_timeout_s": min(timeout_s, hot.zookeeper.connect_timeout_s),
                                              "call_timeout_s": min(timeout_s, hot.zookeeper.call_timeout_s)})
        try:
            creds = access.endpoint(topology, topology.hot_name, "zookeeper")
            with zk_session(ep, credentials=creds) as zk:
                zk.exists("/")
            out["zookeeper"] = True
        except Exception as exc:  # noqa: BLE001 - unreachable is the expected answer here
            out["zookeeper"] = False
            out["errors"]["zookeeper"] = _why(exc)
    if hot.kafka is not None:
        from dr_toolkit.kafka.client import KafkaCluster

        try:
            creds = access.endpoint(topology, topology.hot_name, "kafka")
            with KafkaCluster(hot.kafka.bootstrap_servers, credentials=creds,
                              timeout_s=min(timeout_s, hot.kafka.timeout_s), role="hot") as k:
                k.topics()
            out["kafka"] = True
        except Exception as exc:  # noqa: BLE001
            out["kafka"] = False
            out["errors"]["kafka"] = _why(exc)
    return out


def _hdfs(topology: Topology, ledger: Ledger, access: Access) -> list[dict[str, Any]]:
    from dr_toolkit.copy.signals import cold_holds

    marks = {w["name"]: w for w in ledger.watermarks("hdfs")}
    out: list[dict[str, Any]] = []
    for p in topology.policies.hdfs:
        for t in p.targets:
            name = f"{p.name}:{t}"
            w = marks.get(name)
            if w is None:
                out.append({"component": "hdfs", "name": name, "safe_time": None,
                            "basis": "no completed replication run in the ledger",
                            "known_missing": "everything under " + p.source + " (never replicated)",
                            "unknowable": "the whole tree"})
                continue
            d = w.get("detail") or {}
            manifest = d.get("manifest_id")
            bad, note = cold_holds(topology, ledger, p, t, manifest, access) if manifest else (None, "no manifest id")
            basis = f"listing time of the last completed run (manifest {manifest})"
            later = f"changes under {p.source} after {iso(float(w['watermark']))}"
            if bad:  # cold lost files of that run (e.g. a later run killed after its deletions)
                shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
                out.append({"component": "hdfs", "name": name, "safe_time": None,
                            "basis": f"cold no longer holds the last completed run's files ({note})",
                            "known_missing": f"{len(bad)} file(s) of manifest {manifest} missing or of another "
                                             f"size on cold: {shown}", "unknowable": later})
                continue
            out.append({"component": "hdfs", "name": name, "safe_time": float(w["watermark"]),
                        "basis": f"{basis}; {note}" if bad is not None else f"{basis}; cold not checked: {note}",
                        "known_missing": None if bad is not None else f"unknown: cold not checked ({note})",
                        "unknowable": later})
    return out


def _kafka(topology: Topology, access: Access) -> list[dict[str, Any]]:
    topics = list(dict.fromkeys(t for p in topology.policies.kafka for t in p.topics))
    if not topics:
        return []
    cold = topology.cold.kafka
    if cold is None:
        return [{"component": "kafka", "name": t, "safe_time": None, "basis": "the cold cluster has no kafka section",
                 "known_missing": None, "unknowable": "every record"} for t in topics]
    from dr_toolkit.kafka.api import cold_topic, skew_ms
    from dr_toolkit.kafka.client import KafkaCluster

    skew = skew_ms(topology) / 1000.0  # the hot cluster's declared producer clock-skew bound
    out: list[dict[str, Any]] = []
    try:
        creds = access.endpoint(topology, topology.cold_name, "kafka")
        with KafkaCluster(cold.bootstrap_servers, credentials=creds, timeout_s=cold.timeout_s, role="cold") as k:
            counts = k.topics()
            for t in topics:
                ct = cold_topic(topology, t)  # MirrorMaker 2's name on cold (hot.<t> with its default policy)
                n = counts.get(ct)
                if not n:
                    out.append({"component": "kafka", "name": t, "safe_time": None,
                                "basis": f"topic {ct} is missing on the cold cluster", "known_missing": None,
                                "unknowable": "every record of the topic"})
                    continue
                newest: list[float | None] = []
                held = 0
                for part in range(n):
                    lo, hi = k.watermarks(ct, part)
                    held += max(0, hi - lo)
                    rec = k.record_at(ct, part, hi - 1, hi) if hi > lo else None
                    newest.append(None if rec is None else rec.timestamp / 1000.0 - skew)
                known = [x for x in newest if x is not None]
                empty = len(newest) - len(known)
                safe = min(known) if known and not empty else None
                out.append({"component": "kafka", "name": t, "safe_time": safe,
                            "basis": (f"newest mirrored record per partition (CreateTime) minus the producer skew "
                                      f"bound {skew:g}s; {held} records held on cold")
                            if safe is not None else f"{empty} of {n} partitions hold nothing on cold",
                            "known_missing": None,
                            "unknowable": "records produced on hot after " + (iso(safe) or "the first record")})
    except Exception as exc:  # noqa: BLE001 - cold brokers down too: nothing can be stated
        why = _why(exc)
        done = {r["name"] for r in out}
        out.extend({"component": "kafka", "name": t, "safe_time": None, "basis": f"cold brokers unreadable: {why}",
                    "known_missing": None, "unknowable": "every record"} for t in topics if t not in done)
    return out


def _hbase(topology: Topology, ledger: Ledger) -> list[dict[str, Any]]:
    from dr_toolkit.hbase.signals import last_proven, last_seen

    out = []
    for p in topology.policies.hbase:
        safe = last_proven(ledger, p.peer_id)
        seen = last_seen(ledger, p.peer_id)
        missing = None
        if seen is not None and (seen.get("wals_queued") or seen.get("bytes_behind")):
            missing = (f"at the last check ({iso(seen.get('at'))}): {seen.get('wals_queued')} WAL(s) queued, "
                       f"{seen.get('bytes_behind') or 'unknown'} bytes not shipped")
        out.append({"component": "hbase", "name": p.peer_id, "safe_time": safe,
                    "basis": f"last proven drain at {iso(safe)} (position >= WAL length, recorded by the gate)"
                    if safe is not None else "drain was never proven (no check read the WAL lengths)",
                    "known_missing": missing,
                    "unknowable": "edits written on hot after " + (iso(safe) or "replication began")})
    return out


def loss_window(topology: Topology, ledger: Ledger, access: Access, *, now: float | None = None) -> dict[str, Any]:
    """The recovery point from what cold holds, and the loss window of every component."""
    now = time.time() if now is None else now
    comps = _hdfs(topology, ledger, access) + _kafka(topology, access) + _hbase(topology, ledger)
    known = [c["safe_time"] for c in comps if c["safe_time"] is not None]
    unbounded = [f"{c['component']} {c['name']}" for c in comps if c["safe_time"] is None]
    rp = min(known) if known else None
    for c in comps:
        c["safe_time_iso"] = iso(c["safe_time"])
        c["window"] = (f"from {iso(c['safe_time'])} until hot stopped taking writes (that moment is unknown)"
                       if c["safe_time"] is not None else "unbounded: no evidence of what cold holds")
    return {"recovery_point": iso(rp), "recovery_point_epoch": rp, "computed_at": iso(now),
            "components": comps, "unbounded": unbounded,
            "statement": ("promoting cold loses, per component, what hot accepted after its safe time; "
                          + (f"{len(unbounded)} component(s) have no safe time: " + ", ".join(unbounded)
                             if unbounded else "every component states a safe time"))}
