"""The HBase signal: per replication policy (peer), drain *proven* against the WAL files.

Per :class:`~dr_toolkit.topology.HBasePolicy`:

0. what the running HBase does (:mod:`dr_toolkit.hbase.live`, issue 38), read before and after the
   queues: the peer as the active master holds it (``/master-status``; a ZooKeeper value that
   differs is a problem of its own — a region server that starts loads it), a replication source
   for the peer on every live region server (its ``/rs-status``: an empty set of queues is never
   proof of drain), no mutation without WAL and no bulk load that is not replicated counted by a
   live region server (its ``/jmx`` and ``/conf``), and no protected table with ``DURABILITY =>
   SKIP_WAL``. A page that cannot be read is NO_GO saying so, never "nothing there";
1. the peer exists on the hot cluster (as the master holds it), is ENABLED, and ships to the cold
   cluster (its cluster key is the cold ZooKeeper's); its filters ship every protected table;
2. every protected table (``tables`` and the tables of ``namespaces``, read from the table
   descriptors under ``<hbase_rootdir>/data`` on the hot filesystem) has ``REPLICATION_SCOPE``
   1 on every column family — a table without it never reaches cold (safe time: none);
3. every replication queue of the peer is drained, *proven* by comparing the queue positions
   (ZooKeeper) with the WAL files' lengths (``<hbase_rootdir>/WALs``, ``oldWALs`` on the hot
   filesystem, read after the positions): see :mod:`dr_toolkit.hbase.status`.

Safe time: when drain is proven, the time the queue read began (every edit written before it
is in a WAL whose bytes the shipper had already acknowledged from the sink) — or, if earlier, two
metrics periods before the region servers' WAL-less counts were read (they are summed every
``hbase.regionserver.metrics.period``: a SKIP_WAL put made later may not be counted yet). That proof is
recorded in the ledger (watermark ``hbase``/``<peer>:proven``, only ever moving forward), so a
later check that cannot prove drain — a WAL not fully shipped, queue size only, a disabled peer
— states the last proven time as its safe time (still true: shipped edits stay shipped).
Queue size alone never produces a new safe time, so it never yields GO after the fence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import DrtError, LedgerUnreachable
from dr_toolkit.errors import why as _why
from dr_toolkit.fs import open_fs, parse_uri
from dr_toolkit.hbase.encoding import PeerConfig, full_table
from dr_toolkit.hbase.live import (
    TIMEOUT_S,
    LivePeer,
    LiveServer,
    ServerCounters,
    active_master,
    live_region_servers,
    replication_sources,
    running_peers,
    same_peer,
    server_counters,
)
from dr_toolkit.hbase.peers import normalize_cluster_key, read_peer
from dr_toolkit.hbase.status import ReplicationStatus, fs_wal_length, replication_status
from dr_toolkit.hbase.tabledesc import list_tables, read_table
from dr_toolkit.signal import Signal, iso, unreadable
from dr_toolkit.topology import HBasePolicy
from dr_toolkit.zk.client import zk_session

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.fs import FileSystem
    from dr_toolkit.hbase.status import WalLength
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import HBasePolicy, Topology
    from dr_toolkit.zk.client import ZkClient

PROVEN = "{peer}:proven"
SEEN = "{peer}:last_seen"


def hot_fs(topology: Topology, access: Access, rootdir: str) -> tuple[FileSystem, str]:
    """The hot cluster's filesystem and the absolute path of ``rootdir`` on it. ``rootdir`` is a path
    on the hot cluster's filesystem, or a URI (``webhdfs://nn:9870/hbase``) where it lives elsewhere."""
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
        if desc is not None and desc.skips_wal:
            problems.append(f"table {ns}:{t}: DURABILITY => SKIP_WAL (its writes bypass the WAL, which is what "
                            "replication ships: they never reach cold): alter it to USE_DEFAULT, SYNC_WAL or "
                            "ASYNC_WAL, then copy or verify what it holds")
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


@dataclass
class LiveView:
    """What the running hot HBase does (:mod:`dr_toolkit.hbase.live`), read in one go."""

    master: str | None = None
    peers: dict[str, LivePeer] | None = None  # None: the master could not be asked (master_error)
    master_error: str | None = None
    servers: list[str] = field(default_factory=list)  # live region servers (<parent>/rs)
    servers_error: str | None = None
    sources: dict[str, set[str]] = field(default_factory=dict)  # server -> replication source (queue) ids
    source_errors: dict[str, str] = field(default_factory=dict)
    without_wal: dict[str, ServerCounters] = field(default_factory=dict)  # server -> its WAL-less mutations
    counter_errors: dict[str, str] = field(default_factory=dict)
    endpoints: dict[str, LiveServer] = field(default_factory=dict, repr=False)  # server -> where it listens
    counted: bool = True  # the WAL-less counts were read (False: a view of the sources only)

    @property
    def counted_before(self) -> float | None:
        """Every mutation without WAL made before this time is in the counters read (None: none read)."""
        return min((c.counted_before for c in self.without_wal.values()), default=None)

    def to_json(self) -> dict[str, Any]:
        return {"master": self.master, "master_error": self.master_error,
                "peers": sorted(self.peers) if self.peers is not None else None,
                "region_servers": self.servers, "servers_error": self.servers_error,
                "sources": {k: sorted(v) for k, v in self.sources.items()}, "source_errors": self.source_errors,
                "mutations_without_wal": {k: v.mutations_without_wal for k, v in self.without_wal.items()},
                "counter_errors": self.counter_errors}


RS_WORKERS = 32
"""Region-server pages read at once (each read is one HTTP request to one region server's info server)."""
LIVE_DEADLINE_S = 30.0
"""One deadline for all the region-server reads of one live view: a region server that has not answered
by then is a reason naming it (NO_GO), never a server skipped. Each request's own timeout is the
smaller of :data:`~dr_toolkit.hbase.live.TIMEOUT_S` and what is left of it. A check uses the hot
ZooKeeper endpoint's ``call_timeout_s`` when smaller, but at least ``TIMEOUT_S`` (:func:`_view_deadline`;
10 s by default): the gate waits for a reader about connect + call timeout + 5 s (25 s by default), so
both views fit and the reason names the server rather than the gate's own "did not answer"."""


def _view_deadline(zk: Any) -> float:
    call = getattr(getattr(zk, "endpoint", None), "call_timeout_s", None)
    return min(LIVE_DEADLINE_S, max(TIMEOUT_S, float(call))) if call else LIVE_DEADLINE_S


def read_live(zk: ZkClient, parent: str, *, counters: bool = True, known: LiveView | None = None,
              workers: int | None = None, deadline_s: float | None = None) -> LiveView:
    """Ask the running HBase: the peers its active master holds, its live region servers, the
    replication sources each runs and (``counters``) its count of mutations written without a WAL and
    its ``/conf``. A read that fails is recorded as such (a reason, never "nothing there").

    Calls: ZooKeeper — the master znode, ``getChildren(<parent>/rs)`` and one pipelined ``getData`` per
    region server not in ``known`` (a view read earlier in the same check); HTTP — the master's
    ``/master-status`` and, per live region server, ``/rs-status`` (+ ``/conf`` and ``/jmx`` with
    ``counters``), ``workers`` (default :data:`RS_WORKERS`) at a time, all within ``deadline_s`` (default
    :data:`LIVE_DEADLINE_S`)."""
    import time
    from concurrent.futures import Future, ThreadPoolExecutor, wait

    workers = workers or RS_WORKERS
    deadline_s = deadline_s or LIVE_DEADLINE_S
    v = LiveView(counted=counters)
    end = time.monotonic() + deadline_s

    def left() -> float:
        return max(0.001, min(TIMEOUT_S, end - time.monotonic()))

    master: LiveServer | None = None
    try:
        master = active_master(zk, parent)
        v.master = master.name
    except DrtError as exc:
        v.master_error = _why(exc)
    servers: list[LiveServer] = []
    try:
        servers = live_region_servers(zk, parent, known=known.endpoints if known is not None else None)
        v.servers = [s.name for s in servers]
        v.endpoints = {s.name: s for s in servers}
    except DrtError as exc:
        v.servers_error = _why(exc)

    def sources(srv: LiveServer) -> None:
        v.sources[srv.name] = set(replication_sources(srv, left()))

    def count(srv: LiveServer) -> None:
        v.without_wal[srv.name] = server_counters(srv, left())

    def peers(m: LiveServer) -> None:
        v.peers = running_peers(m, left())

    # (what failed goes into which errors, the task)
    tasks: list[tuple[dict[str, str], str, Callable[[LiveServer], None], LiveServer]] = []
    master_errors: dict[str, str] = {}
    if master is not None:
        tasks.append((master_errors, master.name, peers, master))
    for srv in servers:
        tasks.append((v.source_errors, srv.name, sources, srv))
        if counters:
            tasks.append((v.counter_errors, srv.name, count, srv))
    if tasks:
        ex = ThreadPoolExecutor(max_workers=max(1, min(workers, len(tasks))), thread_name_prefix="drt-hbase-live")
        futures: dict[Future[None], tuple[dict[str, str], str]] = {}
        try:
            for errors, name, fn, arg in tasks:
                futures[ex.submit(fn, arg)] = (errors, name)
            _, pending = wait(futures, timeout=max(0.0, end - time.monotonic()))
        finally:
            ex.shutdown(wait=False, cancel_futures=True)
        for f, (errors, name) in futures.items():
            if f in pending or not f.done():
                errors[name] = (f"no answer within {deadline_s:g} s (the deadline of this check's reads of "
                                f"{len(servers)} region server(s), {workers} at a time)")
            elif (err := f.exception()) is not None:
                errors[name] = _why(err) if isinstance(err, DrtError) else f"{type(err).__name__}: {err}"
    if master_errors:
        v.master_error = next(iter(master_errors.values()))
    return v


def _describe(cfg: PeerConfig | None, state: str | None) -> str:
    if cfg is None:
        return "absent"
    return f"{cfg.cluster_key} {state or 'no state'} {_filters(cfg)}"


def _peer_problems(zk: ZkClient, topology: Topology, policy: HBasePolicy, parent: str, view: LiveView
                   ) -> tuple[list[str], bool, PeerConfig | None]:
    """(problems, never_reaches_cold, the peer value HBase runs), from the peers the running master
    holds — never from the znode (HBase 2.x ignores a peer written there: issue 38 #1, #2). Peer
    absent / DISABLED / pointing elsewhere; the master cannot be asked; ZooKeeper's value differs from
    the running one (a region server that starts loads ZooKeeper's). ``never_reaches_cold``: absent or
    shipping to another cluster — edits do not reach cold however long one waits."""
    pid = policy.peer_id
    if view.peers is None:
        return [f"cannot ask the running HBase master which peers it runs ({view.master_error}): drt reads them "
                "from the active master's /master-status (its info server must be reachable)"], False, None
    try:
        zk_peer = read_peer(zk, pid, parent)
        zk_cfg, zk_state = (zk_peer.config, zk_peer.state) if zk_peer is not None else (None, None)
    except DrtError as exc:
        zk_cfg, zk_state = None, f"undecodable ({_why(exc)})"
    live_peer = view.peers.get(pid)
    if live_peer is None:
        extra = (" — ZooKeeper has a peer of that id, which HBase never loaded (written outside HBase: HBase 2.x "
                 "learns peers only through its master)" if zk_cfg is not None else "")
        return [f"peer {pid} is not configured on the hot cluster (the running HBase master {view.master} does not "
                f"hold it{extra}): add it through HBase — `drt hbase peers sync` with clusters.<hot>.hbase_shell "
                "set"], True, None
    out: list[str] = []
    elsewhere = False
    if live_peer.state != "ENABLED":
        out.append(f"peer {pid} is {live_peer.state}: nothing ships to cold until it is enabled")
    cold = topology.cold.zookeeper
    if cold is not None:
        try:
            same = normalize_cluster_key(live_peer.config.cluster_key) == normalize_cluster_key(cold.cluster_key)
        except DrtError:
            same = False
        if not same:
            elsewhere = True
            out.append(f"peer {pid} ships to {live_peer.config.cluster_key}, not to the cold cluster "
                       f"({cold.cluster_key})")
    if zk_cfg is None or zk_state != live_peer.state or not same_peer(zk_cfg, live_peer.config):
        out.append(f"peer {pid}: ZooKeeper holds another value ({_describe(zk_cfg, zk_state)}) than the running "
                   f"HBase master ({_describe(live_peer.config, live_peer.state)}) — written outside HBase; a region "
                   "server that starts would load ZooKeeper's: change peers only through HBase (hbase shell)")
    return out, elsewhere, live_peer.config


def _live_problems(policy: HBasePolicy, before: LiveView, after: LiveView, queue_servers: list[str]
                   ) -> tuple[list[str], bool]:
    """(problems, edits_never_reach_cold) from what the region servers run: a live region server with
    no replication source for the peer is not shipping (an empty set of queues is no proof of drain);
    one that counted mutations without a WAL holds edits replication never ships. ``before`` and
    ``after`` were read either side of the queue read: a peer or source that changed between them,
    or a server live at the queue read that neither saw, proves nothing."""
    pid = policy.peer_id
    out: list[str] = []
    never = False
    for view in (before, after):
        if view.servers_error:
            out.append(f"cannot read the hot cluster's live region servers: {view.servers_error}")
        for srv, err in sorted(view.source_errors.items()):
            out.append(f"cannot read the replication sources region server {srv} runs: {err}")
        for srv, err in sorted(view.counter_errors.items()):
            out.append(f"cannot read region server {srv}'s count of mutations without WAL: {err}")
        for srv in view.servers:  # every live server read, or its error said: never one skipped
            if srv not in view.sources and srv not in view.source_errors:
                out.append(f"cannot read the replication sources region server {srv} runs: not read")
            if view.counted and srv not in view.without_wal and srv not in view.counter_errors:
                out.append(f"cannot read region server {srv}'s count of mutations without WAL: not read")
    if not before.servers_error and not after.servers_error:
        if not after.servers:
            out.append("no live region server (none registered in ZooKeeper): no replication source runs")
        seen = set(before.servers) | set(after.servers)
        late = sorted(set(queue_servers) - seen)
        if late:
            out.append(f"region server(s) {', '.join(late)} went live while read: check again")
        for view in (before, after):
            for srv in view.servers:
                if srv in view.sources and pid not in view.sources[srv]:
                    never = True
                    out.append(f"region server {srv} runs no replication source for peer {pid} (none in its "
                               "/rs-status): HBase is not shipping its edits — an empty queue set is no proof of drain")
        for srv, c in sorted(after.without_wal.items()):
            if c.mutations_without_wal > 0:
                never = True
                out.append(f"region server {srv} took {c.mutations_without_wal} mutation(s) without WAL "
                           f"({c.mutations_without_wal_bytes} bytes; a client's SKIP_WAL) "
                           "since it started: replication never ships them — copy or verify the tables they went to; "
                           "the count resets when the region server restarts")
            if c.bulk_loads > 0 and not c.bulkload_replication:
                never = True
                out.append(f"region server {srv} took {c.bulk_loads} bulk load(s) since it started and "
                           "hbase.replication.bulkload.enabled is off there: bulk-loaded files never reach cold — "
                           "copy or verify the tables they went to, or turn bulk-load replication on; the count "
                           "resets when the region server restarts")
    if before.peers is not None and after.peers is not None:
        b, a = before.peers.get(pid), after.peers.get(pid)
        if (b is None) != (a is None) or (b is not None and a is not None and (
                b.state != a.state or not same_peer(b.config, a.config))):
            out.append(f"peer {pid} changed on the running HBase while read: check again")
    return list(dict.fromkeys(out)), never


def live_status_reasons(peer_ids: list[str], before: LiveView, after: LiveView, queue_servers: list[str]
                        ) -> list[str]:
    """`drt hbase status`'s view of the live evidence for ``peer_ids``: each must be a peer the running
    master holds, with a replication source on every live region server; no region server may have
    counted writes that bypass the WAL; a page that cannot be read says so."""
    out: list[str] = []
    if after.peers is None:
        out.append(f"cannot ask the running HBase master which peers it runs ({after.master_error})")
    for pid in peer_ids:
        if after.peers is not None and pid not in after.peers:
            out.append(f"peer {pid} is not a peer the running HBase master {after.master} holds: HBase ships nothing "
                       "for it (a peer only in ZooKeeper has no replication source and no queue)")
            continue
        out.extend(_live_problems(HBasePolicy(name=pid, peer_id=pid), before, after, queue_servers)[0])
    if not peer_ids:
        out.extend(_live_problems(HBasePolicy(name="-", peer_id="\0"), before, after, queue_servers)[0])
        out = [r for r in out if "runs no replication source" not in r]
    return list(dict.fromkeys(out))


@dataclass
class _Prepared:
    """What a policy's check read before the queues (from ``before``, its table descriptors)."""

    policy: HBasePolicy
    peer_reasons: list[str]
    never_reaches: bool
    running: PeerConfig | None
    wal_length: WalLength | None
    fs_error: str | None
    table_reasons: list[str]
    tables: list[str]
    families: dict[str, list[str]]


def _prepare(zk: ZkClient, topology: Topology, access: Access, policy: HBasePolicy, parent: str, before: LiveView,
             filesystems: dict[str, tuple[Any, str] | Exception]) -> _Prepared:
    peer_reasons, never_reaches, running = _peer_problems(zk, topology, policy, parent, before)
    wal_length: WalLength | None = None
    fs_error = None
    table_reasons: list[str] = []
    tables: list[str] = []
    families: dict[str, list[str]] = {}
    try:
        if policy.hbase_rootdir not in filesystems:
            try:
                filesystems[policy.hbase_rootdir] = hot_fs(topology, access, policy.hbase_rootdir)
            except Exception as exc:  # noqa: BLE001 - kept, said below for every policy of this rootdir
                filesystems[policy.hbase_rootdir] = exc
        got = filesystems[policy.hbase_rootdir]
        if isinstance(got, Exception):
            raise got
        fs, root = got
        wal_length = fs_wal_length(fs, root)
        table_reasons, tables, families = table_problems(fs, root, policy)
    except Exception as exc:  # noqa: BLE001 - no filesystem: drain cannot be proven, scope not verified
        wal_length = None  # the same filesystem: its WAL lengths cannot be read either
        fs_error = _why(exc)
        table_reasons = [f"cannot read table descriptors on the hot filesystem: {fs_error}"]
    return _Prepared(policy, peer_reasons, never_reaches, running, wal_length, fs_error, table_reasons, tables,
                     families)


def _judge_policy(ledger: Ledger, pr: _Prepared, st: ReplicationStatus, before: LiveView, after: LiveView,
                  now: float) -> Signal:
    policy = pr.policy
    peer_reasons, never_reaches, running = pr.peer_reasons, pr.never_reaches, pr.running
    wal_length, fs_error, table_reasons = pr.wal_length, pr.fs_error, pr.table_reasons
    filter_reasons = filter_problems(running, policy, pr.families) if running is not None else []
    running_peer = (before.peers or {}).get(policy.peer_id)
    running_state = running_peer.state if running_peer is not None else None
    live_reasons, live_never = _live_problems(policy, before, after, st.live_servers)
    queue_reasons = [r for r in st.reasons if f"peer {policy.peer_id} " not in r]
    detail: dict[str, Any] = {
        "policy": policy.name, "queues": len(st.queues), "wals_queued": sum(q.wals for q in st.queues),
        "dead_queues": sum(1 for q in st.queues if q.dead), "basis": st.basis, "proven": st.proven,
        "peer_state": running_state, "zookeeper_peer_state": st.peers.get(policy.peer_id),
        "live": after.to_json(), "tables": pr.tables[:50],
        "queue_detail": [q.to_json() for q in st.queues[:20]]}
    if fs_error:
        detail["filesystem_error"] = fs_error
    reasons = peer_reasons + filter_reasons + table_reasons + live_reasons + queue_reasons
    behind: int | None = 0
    for q in st.queues:
        if q.wals == 1 and not q.dead and not q.recovered and wal_length is not None and q.current_wal:
            length = q.wal_length  # read once, for the judgement (status._read_lengths)
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
    unscoped = [r for r in table_reasons if "REPLICATION_SCOPE" in r or "no table descriptor" in r
                or "SKIP_WAL" in r]
    # The WAL-less count lags the region servers' own counters by up to two metrics periods: a proof
    # stands only for writes the count read after it had seen (issue 38 #3).
    counted = after.counted_before
    proof_at = min(st.read_at, counted) if counted is not None else st.read_at
    if st.proven and not reasons:
        record_proven(ledger, policy.peer_id, proof_at, {"queues": len(st.queues), "checked_at": now,
                                                         "queue_read_at": st.read_at})
    if never_reaches or filter_reasons or unscoped or live_never:
        safe, basis = None, ("writes of a protected table never reach cold (no peer HBase runs, a peer shipping "
                             "elsewhere or filtering it out, no replication scope, a region server without a "
                             "replication source for the peer, or writes that bypass the WAL)")
    elif st.proven and not queue_reasons and not live_reasons:
        safe = proof_at
        basis = (f"drain proven: every queue's position >= its WAL file's length "
                 f"({len(st.queues)} queues read at {iso(st.read_at)}), a replication source for the peer on each of "
                 f"{len(after.servers)} live region server(s), no mutation without WAL counted before "
                 f"{iso(counted) if counted is not None else '?'}")
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
    """One signal per HBase policy. The live views, the queues and each rootdir's filesystem are read
    once for all of them (not once per policy): before, the peers the master runs and the sources of
    every live region server; then each policy's peer value and table descriptors; then the queues of
    every policy's peer in one snapshot per rootdir (WAL lengths read after every position); after,
    the master, the sources, the WAL-less counts and ``/conf`` of every live region server."""
    policies = topology.policies.hbase
    if not policies:
        return []
    ep = topology.hot.zookeeper
    if ep is None:
        return [unreadable("hbase", p.peer_id, "the hot cluster has no zookeeper section") for p in policies]
    done: dict[int, Signal] = {}
    try:
        creds = access.endpoint(topology, topology.hot_name, "zookeeper")
        with zk_session(ep, credentials=creds) as zk:
            parent = ep.hbase_znode_parent
            deadline = _view_deadline(zk)
            before = read_live(zk, parent, counters=False, deadline_s=deadline)
            filesystems: dict[str, tuple[Any, str] | Exception] = {}
            prepared: dict[int, _Prepared] = {}
            for i, p in enumerate(policies):
                try:
                    prepared[i] = _prepare(zk, topology, access, p, parent, before, filesystems)
                except Exception as exc:
                    if isinstance(exc, LedgerUnreachable):
                        raise
                    done[i] = unreadable("hbase", p.peer_id, _why(exc))
            statuses: dict[int, ReplicationStatus] = {}
            groups: dict[str, list[int]] = {}
            for i in prepared:
                groups.setdefault(policies[i].hbase_rootdir, []).append(i)
            for idx in groups.values():
                try:
                    st = replication_status(zk, parent, peers=list(dict.fromkeys(policies[i].peer_id for i in idx)),
                                            wal_length=prepared[idx[0]].wal_length)
                except Exception as exc:
                    if isinstance(exc, LedgerUnreachable):
                        raise
                    done.update((i, unreadable("hbase", policies[i].peer_id, _why(exc))) for i in idx)
                    continue
                statuses.update((i, st.for_peer(policies[i].peer_id)) for i in idx)
            after = read_live(zk, parent, known=before, deadline_s=deadline)
            for i, st in statuses.items():
                try:
                    done[i] = _judge_policy(ledger, prepared[i], st, before, after, now)
                except Exception as exc:
                    if isinstance(exc, LedgerUnreachable):
                        raise
                    done[i] = unreadable("hbase", policies[i].peer_id, _why(exc))
    except Exception as exc:
        if isinstance(exc, LedgerUnreachable):
            raise
        why = _why(exc)
        for i, p in enumerate(policies):
            done.setdefault(i, unreadable("hbase", p.peer_id, why))
    return [done[i] for i in range(len(policies))]


def proven_safe_times(topology: Topology, ledger: Ledger) -> dict[str, float | None]:
    """Per peer, the last proven drain time recorded in the ledger (unplanned failover)."""
    return {p.peer_id: last_proven(ledger, p.peer_id) for p in topology.policies.hbase}


__all__ = ["hbase_signals", "last_proven", "last_seen", "proven_safe_times", "record_proven", "table_problems"]


def checked_status(zk: ZkClient, parent: str, *, peers: list[str] | None = None, settle_s: float = 0.0
                   ) -> dict[str, Any]:
    """The queues of ``peers`` (all when None) judged with the live evidence read before and after
    them (:func:`live_status_reasons`): the one "caught up" of `drt hbase status` and the Airflow
    sensor. No queue is never proof of drain — a peer HBase does not run has none."""
    deadline = _view_deadline(zk)
    before = read_live(zk, parent, counters=False, deadline_s=deadline)
    st = replication_status(zk, parent, peers=peers, settle_s=settle_s)
    after = read_live(zk, parent, known=before, deadline_s=deadline)
    extra = live_status_reasons(list(peers) if peers else sorted(st.peers), before, after, st.live_servers)
    st.reasons.extend(r for r in extra if r not in st.reasons)
    st.caught_up = st.caught_up and not extra
    return {**st.to_json(), "live": after.to_json()}
