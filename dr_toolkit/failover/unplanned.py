"""Unplanned failover (the hot cluster is gone): what cold holds, and the data-loss window.

CockroachDB's PCR cutover and YugabyteDB's unplanned failover promote the standby at the
latest time it *provably* holds, and say what is lost. With the hot cluster unreachable nothing
can be compared, so every answer here comes from the cold side and the ledger:

- **HDFS**, per policy target: the listing time of the last completed replication run (the
  gate's reader, :func:`dr_toolkit.copy.signals.last_completed`: succeeded, its listing proven, no
  file open for write) — only when cold, listed now, still holds every file of that
  run's manifest with its recorded size; a file missing there (a later run killed after its
  deletions, a hand-made change) leaves no safe time and is named as known missing. When cold
  or the manifest cannot be read, that is said ("unknown"), never "none". Everything hot
  changed after that listing is unknowable.
- **Kafka**, every topic the gate gates (literal, by ``topics_regex``, the protected groups'
  committed topics — :mod:`dr_toolkit.kafka.holdings`, the gate's own reader): per partition, the
  safe time a gate check proved by the identity of the records (cold's record at offset d is hot's
  record at offset h, the records before it too), while cold still holds that record — never cold's
  newest timestamp (a record produced on cold, or a LogAppendTime cold topic, would lie); read under
  MirrorMaker 2's name on cold; the topic's safe time is the minimum over its partitions. A
  partition never proven, or one hot had and cold lacks, states none (unbounded); a pattern states
  the last time the gate resolved it on hot.
- **HBase**, per peer: the last *proven* drain time recorded by the gate (position >= WAL
  length); known missing: the WALs/bytes still queued at the last check; later edits are
  unknowable.

The recovery point is the minimum over the components' safe times. A component with no safe
time is reported as *unbounded*: its whole history after the last evidence may be missing.
The operator must type an acceptance of that window before the cold cluster is promoted.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.signals import cold_holds, last_completed
from dr_toolkit.errors import why as _why
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.hbase.live import active_master, live_region_servers
from dr_toolkit.hbase.signals import last_proven, last_seen
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.holdings import loss_rows, unstated
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.signal import iso
from dr_toolkit.zk.client import zk_session

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

ACCEPT_PHRASE = "ACCEPT DATA LOSS"


def _http_answers(url: str, timeout_s: float) -> tuple[bool, str | None]:
    """Whether an HTTP server answers at ``url``: any HTTP response counts (a standby NameNode's 403,
    a Kerberos 401 — the server is up); a refused or timed-out connection does not."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):
            return True, None
    except urllib.error.HTTPError:
        return True, None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"{url}: {getattr(exc, 'reason', None) or exc}"


def _hot_namenodes(topology: Topology) -> list[tuple[str, str]]:
    """(what, NameNode URL) of every HDFS the hot cluster's components live on, as the topology names
    them: hot's own NameNodes, a policy source given by WebHDFS address, the HBase root directories."""
    out: list[tuple[str, str]] = []
    hot = topology.hot
    if hot.hdfs is not None:
        out += [("hdfs NameNode", nn) for nn in hot.hdfs.namenodes]
    for p in topology.policies.hdfs:
        try:
            loc = parse_uri(p.source, topology)
        except Exception:  # noqa: BLE001 - a bad source is the copy's to report
            continue
        if loc.kind == "webhdfs" and loc.cluster is None:
            out += [(f"hdfs NameNode of policy {p.name}'s source", nn) for nn in loc.namenodes]
    for hp in topology.policies.hbase:
        if "://" not in hp.hbase_rootdir:
            continue  # a path on hot's own filesystem: probed above
        try:
            loc = parse_uri(hp.hbase_rootdir, topology)
        except Exception:  # noqa: BLE001
            continue
        if loc.kind == "webhdfs":
            out += [(f"hbase root directory's NameNode (peer {hp.peer_id})", nn) for nn in loc.namenodes]
    first: dict[str, str] = {}
    for what, url in out:
        first.setdefault(url, what)
    return [(what, url) for url, what in first.items()]


def probe_hot(topology: Topology, access: Access, timeout_s: float = 5.0) -> dict[str, Any]:
    """Which of the hot cluster's components still answer — every one the topology names: its
    ZooKeeper (and, through it, HBase's live region servers and active master), its Kafka brokers,
    its HDFS NameNodes (hot's own, a policy source's, the HBase root directory's):
    ``{"zookeeper"|"kafka"|"hdfs"|"hbase": bool|None (None: not configured), "answered": [what answered,
    one phrase each], "errors": {...}}``. An unplanned failover is refused while ``answered`` is not
    empty. A ``local_root`` (the embedded default) is no server and is not probed."""
    out: dict[str, Any] = {"zookeeper": None, "kafka": None, "hdfs": None, "hbase": None, "answered": [],
                           "errors": {}}
    hot = topology.hot
    if hot.zookeeper is not None:
        ep = hot.zookeeper.model_copy(update={"connect_timeout_s": min(timeout_s, hot.zookeeper.connect_timeout_s),
                                              "call_timeout_s": min(timeout_s, hot.zookeeper.call_timeout_s)})
        servers: list[Any] = []
        try:
            creds = access.endpoint(topology, topology.hot_name, "zookeeper")
            with zk_session(ep, credentials=creds) as zk:
                zk.exists("/")
                out["zookeeper"] = True
                out["answered"].append(f"zookeeper {hot.zookeeper.quorum}")
                if topology.policies.hbase:
                    parent = hot.zookeeper.hbase_znode_parent
                    try:
                        servers = [active_master(zk, parent), *live_region_servers(zk, parent)]
                    except Exception as exc:  # noqa: BLE001 - no HBase there: said in errors
                        out["errors"]["hbase"] = _why(exc)
        except Exception as exc:  # noqa: BLE001 - unreachable is the expected answer here
            out["zookeeper"] = False
            out["errors"]["zookeeper"] = _why(exc)
        for srv in servers:
            if srv.url is None:
                continue
            ok, err = _http_answers(f"{srv.url}/jmx?qry=java.lang:type=Runtime", timeout_s)
            if ok:
                out["hbase"] = True
                out["answered"].append(f"hbase server {srv.name} ({srv.url})")
            elif err:
                out["errors"].setdefault("hbase_servers", []).append(err)
    if hot.kafka is not None:
        try:
            creds = access.endpoint(topology, topology.hot_name, "kafka")
            with KafkaCluster(hot.kafka.bootstrap_servers, credentials=creds,
                              timeout_s=min(timeout_s, hot.kafka.timeout_s), role="hot") as k:
                k.topics()
            out["kafka"] = True
            out["answered"].append(f"kafka {hot.kafka.bootstrap_servers}")
        except Exception as exc:  # noqa: BLE001
            out["kafka"] = False
            out["errors"]["kafka"] = _why(exc)
    for what, nn in _hot_namenodes(topology):
        key = "hbase" if what.startswith("hbase") else "hdfs"
        ok, err = _http_answers(f"{nn.rstrip('/')}/webhdfs/v1/?op=GETFILESTATUS", timeout_s)
        if ok:
            out[key] = True
            out["answered"].append(f"{what} {nn}")
        else:
            out[key] = bool(out[key])
            out["errors"].setdefault(key if key == "hdfs" else "hbase_rootdir", []).append(err)
    return out


def _hdfs(topology: Topology, ledger: Ledger, access: Access) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in topology.policies.hdfs:
        for t in p.targets:
            name = f"{p.name}:{t}"
            # the gate's own reader of the last completed run: succeeded, its listing proven, no
            # file open for write (the ledger's watermark moves with a run that left files open,
            # whose hflushed bytes before the listing cold may not hold)
            done = last_completed(ledger, p.name, parse_uri(t, topology).uri)
            mrow = ledger.manifest(done["manifest_id"]) if done else None
            if done is None or mrow is None:
                out.append({"component": "hdfs", "name": name, "safe_time": None,
                            "basis": "no completed replication run in the ledger" if done is None else
                            f"the manifest {done['manifest_id']} of the last completed run is not in the ledger",
                            "known_missing": "everything under " + p.source + (" (never replicated)" if done is None
                                                                              else " (no manifest to check)"),
                            "unknowable": "the whole tree"})
                continue
            manifest, safe = done["manifest_id"], float(mrow["source_time"])
            bad, note = cold_holds(topology, ledger, p, t, manifest, access)
            basis = f"listing time of the last completed run (run {done['run_id']}, manifest {manifest})"
            later = f"changes under {p.source} after {iso(safe)}"
            if bad:  # cold lost files of that run (e.g. a later run killed after its deletions)
                shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
                out.append({"component": "hdfs", "name": name, "safe_time": None,
                            "basis": f"cold no longer holds the last completed run's files ({note})",
                            "known_missing": f"{len(bad)} file(s) of manifest {manifest} missing or of another "
                                             f"size on cold: {shown}", "unknowable": later})
                continue
            out.append({"component": "hdfs", "name": name, "safe_time": safe,
                        "basis": f"{basis}; {note}" if bad is not None else f"{basis}; cold not checked: {note}",
                        "known_missing": None if bad is not None else f"unknown: cold not checked ({note})",
                        "unknowable": later})
    return out


def _kafka(topology: Topology, ledger: Ledger, access: Access) -> list[dict[str, Any]]:
    """Every Kafka component the gate gates — literal topics, topics by pattern, the protected
    groups' topics, per partition — from cold and the ledger (:func:`dr_toolkit.kafka.holdings.loss_rows`,
    the same reader of "what cold holds" as the gate's)."""
    if not topology.policies.kafka:
        return []
    if topology.cold.kafka is None:
        names = list(dict.fromkeys(t for p in topology.policies.kafka for t in p.topics)) or ["*"]
        return [unstated(t, "the cold cluster has no kafka section") for t in names]
    try:
        return loss_rows(Mirror.of(topology, access), ledger)
    except Exception as exc:  # noqa: BLE001 - the ledger unreadable: nothing can be stated
        return [unstated(p.name, f"unreadable: {_why(exc)}") for p in topology.policies.kafka]


def _hbase(topology: Topology, ledger: Ledger) -> list[dict[str, Any]]:
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
    comps = _hdfs(topology, ledger, access) + _kafka(topology, ledger, access) + _hbase(topology, ledger)
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
