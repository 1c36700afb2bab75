"""The HBase signal: per replication policy (peer), drain *proven* against the WAL files.

Per :class:`~dr_toolkit.topology.HBasePolicy`:

1. the peer exists on the hot cluster, is ENABLED, and ships to the cold cluster (its cluster
   key is the cold ZooKeeper's); a table-CFs restriction must include every protected table;
2. every protected table (``tables`` and the tables of ``namespaces``, read from the table
   descriptors under ``<hbase_rootdir>/data`` on the hot filesystem) has ``REPLICATION_SCOPE``
   1 on every column family — a table without it never reaches cold (safe time: none);
3. every replication queue of the peer is drained, *proven* by comparing the queue positions
   (ZooKeeper) with the WAL files' lengths (``<hbase_rootdir>/WALs``, ``oldWALs`` on the hot
   filesystem, read after the positions): see :mod:`dr_toolkit.hbase.status`.

Safe time: when drain is proven, the time the queue read began (every edit written before it
is in a WAL whose bytes the shipper had already acknowledged from the sink). That proof is
recorded in the ledger (watermark ``hbase``/``<peer>:proven``, only ever moving forward), so a
later check that cannot prove drain — a WAL not fully shipped, queue size only, a disabled peer
— states the last proven time as its safe time (still true: shipped edits stay shipped).
Queue size alone never produces a new safe time, so it never yields GO after the fence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError, LedgerUnreachable
from dr_toolkit.errors import why as _why
from dr_toolkit.hbase.encoding import PeerConfig, full_table
from dr_toolkit.signal import Signal, iso, unreadable

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.fs import FileSystem
    from dr_toolkit.hbase.peers import Peer
    from dr_toolkit.hbase.status import WalLength
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import HBasePolicy, Topology
    from dr_toolkit.zk.client import ZkClient

PROVEN = "{peer}:proven"
SEEN = "{peer}:last_seen"


def hot_fs(topology: Topology, access: Access, rootdir: str) -> tuple[FileSystem, str]:
    """The hot cluster's filesystem and the absolute path of ``rootdir`` on it. ``rootdir`` is a path
    on the hot cluster's filesystem, or a URI (``webhdfs://nn:9870/hbase``) where it lives elsewhere."""
    from dr_toolkit.fs import open_fs, parse_uri

    loc = parse_uri(rootdir if "://" in rootdir else f"hdfs://{topology.hot_name}{rootdir}", topology)
    return open_fs(loc, access), loc.path


def last_proven(ledger: Ledger, peer_id: str) -> float | None:
    name = PROVEN.format(peer=peer_id)
    for w in ledger.watermarks("hbase"):
        if w["name"] == name:
            return float(w["watermark"])
    return None


def last_seen(ledger: Ledger, peer_id: str) -> dict[str, Any] | None:
    """What the last check saw still queued for the peer (``at``, ``wals_queued``, ``bytes_behind``)."""
    name = SEEN.format(peer=peer_id)
    for w in ledger.watermarks("hbase"):
        if w["name"] == name:
            return dict(w.get("detail") or {}, at=float(w["watermark"]))
    return None


def record_proven(ledger: Ledger, peer_id: str, t: float, detail: dict[str, Any]) -> None:
    prev = last_proven(ledger, peer_id)
    if prev is None or t > prev:
        ledger.set_watermark("hbase", PROVEN.format(peer=peer_id), t, detail)


def table_problems(fs: FileSystem, rootdir: str, policy: HBasePolicy
                   ) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(problems, tables checked, families per table): protected tables missing or without
    REPLICATION_SCOPE 1."""
    from dr_toolkit.hbase.tabledesc import list_tables, read_table

    problems: list[str] = []
    wanted: list[tuple[str, str]] = []
    for ns in policy.namespaces:
        names = list_tables(fs, rootdir, ns)
        if names is None:
            problems.append(f"namespace {ns}: no table descriptors under {rootdir}/data/{ns} on the hot cluster "
                            "(cannot verify replication scope)")
            continue
        wanted.extend((ns, t) for t in names)
    for t in policy.tables:
        ns, sep, q = t.partition(":")
        pair = (ns, q) if sep else ("default", t)
        if pair not in wanted:
            wanted.append(pair)
    families: dict[str, list[str]] = {}
    for ns, t in wanted:
        desc = read_table(fs, rootdir, ns, t)
        if desc is not None:
            families[f"{ns}:{t}"] = sorted(desc.scopes)
        if desc is None:
            problems.append(f"table {ns}:{t}: no table descriptor under {rootdir}/data (table missing?)")
        elif not desc.scopes:
            problems.append(f"table {ns}:{t}: no column families in its descriptor")
        elif desc.unscoped:
            problems.append(f"table {ns}:{t}: column families {', '.join(desc.unscoped)} have no "
                            "REPLICATION_SCOPE => 1 (their writes never reach cold): run `drt hbase tables enable`")
    return problems, [f"{ns}:{t}" for ns, t in wanted], families


def filter_problems(cfg: PeerConfig, policy: HBasePolicy, families: dict[str, list[str]]) -> list[str]:
    """Protected tables, families and namespaces the peer's filters leave out, by HBase's own rule
    (``replicate_all``, ``namespaces``, ``table_cfs``, ``exclude_namespaces``, ``exclude_table_cfs``):
    their writes never reach cold through this peer."""
    out: list[str] = []
    for ns in policy.namespaces:
        if not cfg.replicates_namespace(ns):
            out.append(f"peer {policy.peer_id} does not ship namespace {ns} (its filters: "
                       f"{_filters(cfg)}): new tables there never reach cold")
    for t in [*policy.tables, *families]:
        table = full_table(t)
        fams = families.get(table) or []
        if not cfg.replicates(table):
            out.append(f"peer {policy.peer_id} does not ship protected table {table} ({_filters(cfg)})")
            continue
        left = [f for f in fams if not cfg.replicates(table, f)]
        if left:
            out.append(f"peer {policy.peer_id} does not ship column families {', '.join(left)} of protected table "
                       f"{table} ({_filters(cfg)})")
    return list(dict.fromkeys(out))


def _filters(cfg: PeerConfig) -> str:
    parts = [f"replicate_all={str(cfg.replicates_all).lower()}"]
    for label, v in (("namespaces", sorted(cfg.namespaces or [])), ("table_cfs", cfg.table_cfs),
                     ("exclude_namespaces", sorted(cfg.exclude_namespaces or [])),
                     ("exclude_table_cfs", cfg.exclude_table_cfs)):
        if v:
            parts.append(f"{label}={v}")
    return ", ".join(parts)


def _peer_problems(zk: ZkClient, topology: Topology, policy: HBasePolicy, parent: str
                   ) -> tuple[list[str], bool, Peer | None]:
    """(problems, never_reaches_cold, peer): peer absent / half-written / DISABLED / pointing
    elsewhere. ``never_reaches_cold``: absent or shipping to another cluster — edits do not reach
    cold however long one waits (a DISABLED peer's queue ships once enabled)."""
    from dr_toolkit.hbase.peers import normalize_cluster_key, read_peer

    peer = read_peer(zk, policy.peer_id, parent)
    if peer is None:
        return [f"peer {policy.peer_id} is not configured on the hot cluster: run `drt hbase peers sync`"], True, None
    out: list[str] = []
    elsewhere = False
    if peer.state is None:
        out.append(f"peer {policy.peer_id} has no peer-state znode (half-written)")
    elif peer.state != "ENABLED":
        out.append(f"peer {policy.peer_id} is {peer.state}: nothing ships to cold until it is enabled")
    cold = topology.cold.zookeeper
    if cold is not None:
        try:
            same = normalize_cluster_key(peer.cluster_key) == normalize_cluster_key(cold.cluster_key)
        except DrtError:
            same = False
        if not same:
            elsewhere = True
            out.append(f"peer {policy.peer_id} ships to {peer.cluster_key}, not to the cold cluster "
                       f"({cold.cluster_key})")
    return out, elsewhere, peer


def _one(zk: ZkClient, topology: Topology, ledger: Ledger, access: Access, policy: HBasePolicy,
         parent: str, now: float) -> Signal:
    from dr_toolkit.hbase.status import fs_wal_length, replication_status

    peer_reasons, never_reaches, peer = _peer_problems(zk, topology, policy, parent)
    wal_length: WalLength | None = None
    fs_error = None
    table_reasons: list[str] = []
    tables: list[str] = []
    families: dict[str, list[str]] = {}
    try:
        fs, root = hot_fs(topology, access, policy.hbase_rootdir)
        wal_length = fs_wal_length(fs, root)
        table_reasons, tables, families = table_problems(fs, root, policy)
    except Exception as exc:  # noqa: BLE001 - no filesystem: drain cannot be proven, scope not verified
        wal_length = None  # the same filesystem: its WAL lengths cannot be read either
        fs_error = _why(exc)
        table_reasons = [f"cannot read table descriptors on the hot filesystem: {fs_error}"]
    filter_reasons = filter_problems(peer.config, policy, families) if peer is not None and peer.config else []
    st = replication_status(zk, parent, peers=[policy.peer_id], wal_length=wal_length)
    queue_reasons = [r for r in st.reasons if f"peer {policy.peer_id} " not in r]
    detail: dict[str, Any] = {
        "policy": policy.name, "queues": len(st.queues), "wals_queued": sum(q.wals for q in st.queues),
        "dead_queues": sum(1 for q in st.queues if q.dead), "basis": st.basis, "proven": st.proven,
        "peer_state": st.peers.get(policy.peer_id), "tables": tables[:50],
        "queue_detail": [q.to_json() for q in st.queues[:20]]}
    if fs_error:
        detail["filesystem_error"] = fs_error
    reasons = peer_reasons + filter_reasons + table_reasons + queue_reasons
    behind: int | None = 0
    for q in st.queues:
        if q.wals == 1 and not q.dead and not q.recovered and wal_length is not None and q.current_wal:
            length = wal_length(q.server, q.current_wal, q.position)
            if length is not None and behind is not None:
                behind += max(0, length - q.position)
        elif q.wals:
            behind = None  # whole WALs queued: their lengths are not summed
    detail["bytes_behind"] = behind
    ledger.set_watermark("hbase", SEEN.format(peer=policy.peer_id), now,
                         {"wals_queued": detail["wals_queued"], "bytes_behind": behind, "basis": st.basis})
    # A proof of drain is a safe time only for a peer that ships every protected edit to cold: a
    # drained queue of a peer that filters a table out, ships elsewhere, or misses a scope says
    # nothing about those edits — it is neither recorded nor used (issue 20 #10).
    unscoped = [r for r in table_reasons if "REPLICATION_SCOPE" in r or "no table descriptor" in r]
    if st.proven and not reasons:
        record_proven(ledger, policy.peer_id, st.read_at, {"queues": len(st.queues), "checked_at": now})
    if never_reaches or filter_reasons or unscoped:
        safe, basis = None, ("writes of a protected table never reach cold (no peer, a peer shipping elsewhere or "
                             "filtering it out, or no replication scope)")
    elif st.proven and not queue_reasons:
        safe = st.read_at
        basis = (f"drain proven: every queue's position >= its WAL file's length "
                 f"({len(st.queues)} queues read at {iso(st.read_at)})")
    else:
        safe = last_proven(ledger, policy.peer_id)
        now_basis = {"queue-size": "queue size only (SizeOfLogQueue=0; WAL lengths unknown)",
                     "settled": "positions settled (no proof)"}.get(st.basis, "drain not proven")
        basis = (f"last proven drain at {iso(safe)} (ledger); now: {now_basis}" if safe is not None
                 else f"never proven drained; now: {now_basis}")
        if not reasons and safe is None:
            reasons.append("drain cannot be proven (no WAL file lengths) and was never proven before")
    lag = None if safe is None else max(0.0, now - safe)
    return Signal("hbase", policy.peer_id, not reasons, lag, safe, basis, detail, "; ".join(reasons) or None)


def hbase_signals(topology: Topology, ledger: Ledger, access: Access, now: float) -> list[Signal]:
    policies = topology.policies.hbase
    if not policies:
        return []
    ep = topology.hot.zookeeper
    if ep is None:
        return [unreadable("hbase", p.peer_id, "the hot cluster has no zookeeper section") for p in policies]
    from dr_toolkit.zk.client import zk_session

    out: list[Signal] = []
    try:
        creds = access.endpoint(topology, topology.hot_name, "zookeeper")
        with zk_session(ep, credentials=creds) as zk:
            for p in policies:
                try:
                    out.append(_one(zk, topology, ledger, access, p, ep.hbase_znode_parent, now))
                except Exception as exc:
                    if isinstance(exc, LedgerUnreachable):
                        raise
                    out.append(unreadable("hbase", p.peer_id, _why(exc)))
    except Exception as exc:
        if isinstance(exc, LedgerUnreachable):
            raise
        why = _why(exc)
        done = {s.name for s in out}
        out.extend(unreadable("hbase", p.peer_id, why) for p in policies if p.peer_id not in done)
    return out


def proven_safe_times(topology: Topology, ledger: Ledger) -> dict[str, float | None]:
    """Per peer, the last proven drain time recorded in the ledger (unplanned failover)."""
    return {p.peer_id: last_proven(ledger, p.peer_id) for p in topology.policies.hbase}


__all__ = ["hbase_signals", "last_proven", "last_seen", "proven_safe_times", "record_proven", "table_problems"]
