"""Caught-up signals: one per HDFS policy target, HBase peer, Kafka topic and verified dataset.

Each signal says whether the cold cluster has caught up with the hot one for that piece, how
far behind it is (``lag_s``), the time up to which the cold cluster holds the hot cluster's
data (``watermark``, epoch seconds) and why (``detail``). Components are read concurrently,
each within a timeout. A signal that cannot be read — ZooKeeper down, a broker unreachable,
an empty ledger, a capability that is not installed — is *not caught up*, with the reason:
it can never let the gate say GO.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError
from dr_toolkit.secrets import redact

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)

COMPONENTS = ("hdfs", "hbase", "kafka", "verify")
KAFKA_PARALLEL = 8  # topics whose lag is read at the same time


@dataclass
class Signal:
    component: str
    name: str
    caught_up: bool
    lag_s: float | None = None
    watermark: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"component": self.component, "name": self.name, "caught_up": self.caught_up,
                "lag_s": None if self.lag_s is None else round(self.lag_s, 3),
                "watermark": self.watermark, "detail": self.detail, "reason": self.reason}


def unreadable(component: str, name: str, why: str) -> Signal:
    return Signal(component, name, False, None, None, {"error": redact(why)}, redact(why))


def _module(name: str) -> Any:
    """Import a capability module; raise DrtError naming it when it is not installed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise DrtError(f"capability module {name} is not available ({exc.name} missing)",
                       hint="install or build that capability; until then its signal is NO_GO") from None


def _why(exc: BaseException) -> str:
    if isinstance(exc, DrtError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


# --- HDFS -------------------------------------------------------------------------------------


def hdfs_signals(topology: Topology, ledger: Ledger, now: float) -> list[Signal]:
    """Per policy target: files/bytes still pending and the age of the source state it holds."""
    out: list[Signal] = []
    marks = {w["name"]: w for w in ledger.watermarks("hdfs")} if topology.policies.hdfs else {}
    for policy in topology.policies.hdfs:
        try:
            api = _module("dr_toolkit.copy.api")
            rows = api.pending(topology, policy.name, ledger)
        except Exception as exc:  # noqa: BLE001 - any failure is a NO_GO with its reason
            out.extend(unreadable("hdfs", f"{policy.name}:{t}", _why(exc)) for t in policy.targets)
            continue
        seen = set()
        for row in rows:
            target = str(row.get("target"))
            seen.add(target)
            name = f"{policy.name}:{target}"
            files = int(row.get("files_pending") or 0)
            nbytes = int(row.get("bytes_pending") or 0)
            wm = row.get("watermark")
            status = row.get("last_run_status")
            mark = (marks.get(name) or {}).get("detail") or {}
            detail = {"files_pending": files, "bytes_pending": nbytes, "last_run_status": status,
                      "source_time": wm, "manifest_id": mark.get("manifest_id"),
                      "source_snapshot": mark.get("source_snapshot"),
                      "snapshot_age_s": None if wm is None else round(max(0.0, now - float(wm)), 1)}
            if files == 0 and nbytes == 0 and status not in (None, "failed", "running"):
                # Nothing pending now: the cold side holds what the hot side holds as of this check.
                out.append(Signal("hdfs", name, True, 0.0, now, detail))
                continue
            reasons = []
            if files or nbytes:
                reasons.append(f"{files} files ({nbytes} bytes) pending")
            if status is None:
                reasons.append("never replicated")
            elif status in ("failed", "running"):
                reasons.append(f"last run {status}")
            wmf = float(wm) if wm is not None else None
            out.append(Signal("hdfs", name, False, None if wmf is None else max(0.0, now - wmf), wmf, detail,
                              "; ".join(reasons) or "not caught up"))
        for t in policy.targets:
            if t not in seen and not any(s.name == f"{policy.name}:{t}" for s in out):
                out.append(unreadable("hdfs", f"{policy.name}:{t}", "no pending information for this target"))
    return out


# --- HBase ------------------------------------------------------------------------------------


def hbase_signals(topology: Topology, ledger: Ledger, now: float) -> list[Signal]:
    """Per HBase peer: every replication queue of every region server drained."""
    policies = topology.policies.hbase
    if not policies:
        return []
    ep = topology.hot.zookeeper
    if ep is None:
        return [unreadable("hbase", p.peer_id, "the hot cluster has no zookeeper section") for p in policies]
    try:
        status_mod = _module("dr_toolkit.hbase.status")
        client_mod = _module("dr_toolkit.zk.client")
    except DrtError as exc:
        return [unreadable("hbase", p.peer_id, exc.message) for p in policies]
    out: list[Signal] = []
    try:
        with client_mod.zk_session(ep) as zk:
            for p in policies:
                try:
                    st = status_mod.replication_status(zk, ep.hbase_znode_parent, peers=[p.peer_id])
                    doc = st.to_json()
                except Exception as exc:  # noqa: BLE001 - NO_GO with the reason
                    out.append(unreadable("hbase", p.peer_id, _why(exc)))
                    continue
                queues = [q for q in doc.get("queues", []) if str(q.get("peer", p.peer_id)) == p.peer_id]
                wals = sum(int(q.get("size_of_log_queue") or 0) for q in queues)
                detail = {"policy": p.name, "queues": len(queues), "wals_queued": wals,
                          "dead_queues": sum(1 for q in queues if q.get("dead"))}
                if st.caught_up:
                    out.append(Signal("hbase", p.peer_id, True, 0.0, now, detail))
                else:
                    reasons = doc.get("reasons") or [f"{wals} WALs queued for peer {p.peer_id}"]
                    detail["reasons"] = reasons
                    out.append(Signal("hbase", p.peer_id, False, None, None, detail, "; ".join(map(str, reasons))))
    except Exception as exc:  # noqa: BLE001 - ZooKeeper down: every peer is NO_GO
        why = _why(exc)
        done = {s.name for s in out}
        out.extend(unreadable("hbase", p.peer_id, why) for p in policies if p.peer_id not in done)
    return out


# --- Kafka ------------------------------------------------------------------------------------


def kafka_signals(topology: Topology, ledger: Ledger, now: float) -> list[Signal]:
    """Per topic: records on the hot cluster not yet mirrored to the cold one."""
    topics: list[str] = []
    for p in topology.policies.kafka:
        topics.extend(t for t in p.topics if t not in topics)
    if not topics:
        return []
    try:
        api = _module("dr_toolkit.kafka.api")
    except DrtError as exc:
        return [unreadable("kafka", t, exc.message) for t in topics]
    # The lag of each topic is read on its own connections, several topics at once: the
    # per-partition probes are round trips, and a large topology has thousands of them.
    failed: dict[str, str] = {}
    by_topic: dict[str, list[dict[str, Any]]] = {t: [] for t in topics}
    with cf.ThreadPoolExecutor(max_workers=min(KAFKA_PARALLEL, len(topics)), thread_name_prefix="drt-lag") as ex:
        futs = {t: ex.submit(api.lag, topology, topics=[t]) for t in topics}
        for t, fut in futs.items():
            try:
                doc = fut.result()
            except Exception as exc:  # noqa: BLE001 - broker down: NO_GO with the reason
                failed[t] = _why(exc)
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
        errors = [str(p["error"]) for p in parts if p.get("error")]
        secs = max(float(p.get("seconds_behind") or 0.0) for p in parts)
        detail = {"partitions": len(parts), "records_behind": behind, "seconds_behind": secs}
        if errors:
            out.append(Signal("kafka", t, False, None, None, {**detail, "errors": errors[:5]},
                              f"cannot read lag: {errors[0]}"))
        elif behind == 0:
            out.append(Signal("kafka", t, True, 0.0, now, detail))
        else:
            out.append(Signal("kafka", t, False, secs, now - secs, detail,
                              f"{behind} records not yet mirrored ({secs:.0f}s behind)"))
    return out


# --- verification -----------------------------------------------------------------------------


def verify_signals(topology: Topology, ledger: Ledger, now: float) -> list[Signal]:
    """Per verified dataset: the last report's BADROWS and its age."""
    out: list[Signal] = []
    max_age = topology.failover.max_verify_age_s
    for p in topology.policies.verify:
        reports = ledger.verify_reports(name=p.name, limit=1)
        if not reports:
            out.append(unreadable("verify", p.name, "no verification report in the ledger"))
            continue
        r = reports[0]
        bad = int(r["badrows"] or 0)
        age = max(0.0, now - float(r["finished_at"]))
        detail = {"report_id": r["report_id"], "BADROWS": bad, "GOODROWS": int(r["goodrows"] or 0),
                  "age_s": round(age, 1), "report_path": r.get("report_path")}
        reasons = []
        if bad:
            reasons.append(f"last verification found {bad} bad rows")
        if age > max_age:
            reasons.append(f"last verification is {age:.0f}s old (max {max_age:g}s)")
        out.append(Signal("verify", p.name, not reasons, age, float(r["started_at"]), detail,
                          "; ".join(reasons) or None))
    return out


READERS: dict[str, Callable[[Topology, Ledger, float], list[Signal]]] = {
    "hdfs": hdfs_signals, "hbase": hbase_signals, "kafka": kafka_signals, "verify": verify_signals}


def _names(topology: Topology, component: str) -> list[str]:
    p = topology.policies
    if component == "hdfs":
        return [f"{x.name}:{t}" for x in p.hdfs for t in x.targets]
    if component == "hbase":
        return [x.peer_id for x in p.hbase]
    if component == "kafka":
        return list(dict.fromkeys(t for x in p.kafka for t in x.topics))
    return [x.name for x in p.verify]


def read_signals(topology: Topology, ledger: Ledger, *, components: tuple[str, ...] = COMPONENTS,
                 timeout_s: float | None = None, now: float | None = None) -> list[Signal]:
    """Read every component's signals concurrently; a component that does not answer within
    ``timeout_s`` (default: the largest endpoint timeout + 5 s) gives NO_GO signals saying so."""
    now = time.time() if now is None else now
    if timeout_s is None:
        eps: list[float] = []
        for cl in topology.clusters.values():
            if cl.zookeeper:
                eps.append(cl.zookeeper.connect_timeout_s + cl.zookeeper.call_timeout_s)
            if cl.kafka:
                eps.append(cl.kafka.timeout_s)
        timeout_s = max(eps or [10.0]) + 5.0
    ex = cf.ThreadPoolExecutor(max_workers=len(components), thread_name_prefix="drt-signal")
    futs = {c: ex.submit(READERS[c], topology, ledger, now) for c in components}
    out: list[Signal] = []
    deadline = time.monotonic() + timeout_s
    for c, fut in futs.items():
        try:
            out.extend(fut.result(timeout=max(0.0, deadline - time.monotonic())))
        except cf.TimeoutError:
            out.extend(unreadable(c, n, f"{c} did not answer within {timeout_s:g}s") for n in _names(topology, c))
        except DrtError as exc:
            if exc.exit_code == 3 and c == "verify":
                raise  # the ledger itself is unreachable: the caller exits 3
            out.extend(unreadable(c, n, exc.message) for n in _names(topology, c))
        except Exception as exc:
            log.debug("signal reader %s failed", c, exc_info=True)
            out.extend(unreadable(c, n, _why(exc)) for n in _names(topology, c))
    ex.shutdown(wait=False, cancel_futures=True)
    return out
