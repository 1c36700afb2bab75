"""What the running HBase does, read from its own servers — never from a znode anyone may write.

HBase 2.x keeps its replication peers in ZooKeeper but *runs* the copy its master holds in memory
(peers change through master procedures; a peer written into ZooKeeper is ignored until a restart)
and ships through the replication sources its region servers run. So a "caught up" signal asks them:

* **the live region servers**: the ephemeral ``<parent>/rs/<host,port,startcode>`` znodes each region
  server keeps while its ZooKeeper session lives (HBase writes them; ``PBUF`` + ``RegionServerInfo``
  whose field 1 is the server's info port: its ``/jmx``);
* **the replication sources each one runs**: the "Replication Status" table of its ``/rs-status`` page
  (one row per peer and WAL group, rendered from the server's own replication manager) — a peer
  with no row on a live region server is not shipping that server's edits (HBase never made a source
  for it). Not the ``sub=Replication`` JMX bean: its ``source.<id>.*`` keys are JVM-wide, and a
  closed source of another region server in the same JVM removes them (seen in the test clusters);
* **what the region server wrote without a WAL**: ``…,sub=Server`` counts mutations whose client
  asked for ``SKIP_WAL`` (``mutationsWithoutWALCount`` / ``…Size``) and bulk loads (``Bulkload_num_ops``)
  since the server started — edits that replication, which reads the WAL, never ships (bulk-loaded
  files only with ``hbase.replication.bulkload.enabled``, read from the server's own ``/conf``);
* **the peers the running master holds**: the active master (``<parent>/master``: ``PBUF`` +
  ``Master`` whose field 3 is its info port) renders ``ReplicationPeerManager.listPeers`` — the
  same list ``Admin.listReplicationPeers`` and ``hbase shell list_peers`` answer — in the "Peers"
  table of its ``/master-status`` page (HBase 2.x): id, cluster key, state, replicate-all,
  namespaces, table-CFs and their excludes.

Every read that fails raises :class:`~dr_toolkit.errors.UnreachableError` naming the URL; callers
turn that into NO_GO ("cannot ask"), never into "nothing there".

**Kerberos.** A secure HBase's info servers want SPNEGO (``hbase.security.authentication.ui=kerberos``).
The pages are asked as the principal of the ZooKeeper session the servers were found through (its
connection's ``sasl`` GSSAPI: :attr:`dr_toolkit.zk.client.ZkClient.kerberos`), else the
environment's (``DRT_KERBEROS_PRINCIPAL`` + ``DRT_KERBEROS_KEYTAB``); SPNEGO names the server
``HTTP/<host in its server name>``. A server asking for Kerberos when no principal is configured, or
refusing the ticket, is a :class:`~dr_toolkit.kerberos.KerberosError` (exit 3) naming the URL.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, TypeVar

from dr_toolkit.errors import UnreachableError
from dr_toolkit.hbase.encoding import (
    DecodeError,
    Layout,
    PeerConfig,
    _pb_body,
    full_table,
    parse_fields,
    strip_metadata,
)
from dr_toolkit.hbase.peers import normalize_cluster_key

if TYPE_CHECKING:
    from dr_toolkit.zk.client import ZkClient

T = TypeVar("T")
SERVER_BEAN = "Hadoop:service=HBase,name=RegionServer,sub=Server"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class LiveServer:
    """A live region server (or the active master): its server name and where its info server listens."""

    name: str  # host,port,startcode
    host: str
    info_port: int | None  # None: the znode does not say (info server off)
    #: the Kerberos ticket holder its pages are asked with (SPNEGO); None: plain HTTP
    kerberos: Any = field(default=None, compare=False, repr=False)

    @property
    def url(self) -> str | None:
        if self.info_port is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.info_port}"


def _port(v: int | None) -> int | None:
    """An info port as HBase writes it (uint32; -1 — "no info server" — arrives as 2**32-1)."""
    return v if v is not None and 0 < v < 65536 else None


def _varint_field(raw: bytes, fieldno: int) -> int | None:
    body = _pb_body(raw)
    if body is None:
        return None
    try:
        for no, v in parse_fields(body):
            if no == fieldno and isinstance(v, int):
                return v
    except DecodeError:
        return None
    return None


def live_region_servers(zk: ZkClient, parent: str, known: Mapping[str, LiveServer] | None = None
                        ) -> list[LiveServer]:
    """The region servers HBase counts as live (``<parent>/rs``) with their info ports: one
    ``getChildren`` and one pipelined ``getData`` per server — except the servers in ``known`` (read
    earlier in the same check): a server name carries its start code, and a region server writes its
    znode once when it starts, so the same name has the same info port."""
    lay = Layout(parent)
    names = zk.get_children_many([lay.rs])[0]
    if names is None:
        raise UnreachableError(f"no {lay.rs} znode: no HBase runs under znode parent {parent}",
                               where=f"zookeeper {zk.quorum}", hint="check clusters.<hot>.zookeeper.hbase_znode_parent")
    names = sorted(names)
    known = known or {}
    new = [n for n in names if n not in known]
    datas = dict(zip(new, zk.get_many([f"{lay.rs}/{n}" for n in new]), strict=True))
    out = []
    for n in names:
        if n in known:
            out.append(known[n])
            continue
        d = datas[n]
        port = _varint_field(d[0], 1) if d is not None else None  # RegionServerInfo.infoPort
        out.append(LiveServer(n, n.split(",", 1)[0], _port(port), http_kerberos(zk)))
    return out


def active_master(zk: ZkClient, parent: str) -> LiveServer:
    """The active master (``<parent>/master``: ``Master{1: ServerName, 2: rpc_version, 3: info_port}``)."""
    path = Layout(parent)._p("master")
    raw = zk.get_many([path])[0]
    if raw is None:
        raise UnreachableError(f"no active HBase master ({path} is absent)", where=f"zookeeper {zk.quorum}",
                               hint="start the hot cluster's HBase master")
    body = _pb_body(raw[0])
    host, port, code, info = "", 0, 0, None
    try:
        for no, v in parse_fields(body or b""):
            if no == 1 and isinstance(v, bytes):
                for n2, v2 in parse_fields(v):
                    if n2 == 1 and isinstance(v2, bytes):
                        host = v2.decode()
                    elif n2 == 2 and isinstance(v2, int):
                        port = v2
                    elif n2 == 3 and isinstance(v2, int):
                        code = v2
            elif no == 3 and isinstance(v, int):
                info = v
    except DecodeError:
        host = ""
    if not host:
        raise UnreachableError(f"cannot decode the active master's znode {path}",
                               where=f"zookeeper {zk.quorum}", hint="is this an HBase 2.x cluster?")
    return LiveServer(f"{host},{port},{code}", host, _port(info), http_kerberos(zk))


def http_kerberos(zk: Any) -> Any:
    """The ticket holder HBase's info servers are asked with: the ZooKeeper session's SASL principal,
    else the environment's (``DRT_KERBEROS_PRINCIPAL``); None: plain HTTP."""
    held = getattr(zk, "kerberos", None)
    if held is not None:
        return held
    from dr_toolkit.kerberos import kerberos_wanted

    return kerberos_wanted(False)


def _get(url: str, timeout: float, kerberos: Any = None) -> bytes:
    if kerberos is not None:
        return _get_spnego(url, timeout, kerberos)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            data: bytes = r.read()
            return data
    except urllib.error.HTTPError as exc:
        if exc.code == 401 and "negotiate" in (exc.headers.get("WWW-Authenticate") or "").lower():
            from dr_toolkit.kerberos import KerberosError

            raise KerberosError("the HBase info server asks for Kerberos (SPNEGO) and no principal is configured",
                                where=url, hint="give the hot ZooKeeper endpoint's connection extra.sasl.mechanism "
                                                "GSSAPI (its principal asks the info servers too), or set "
                                                "DRT_KERBEROS_PRINCIPAL and DRT_KERBEROS_KEYTAB") from None
        raise UnreachableError(f"cannot read {url}: HTTP {exc.code} {exc.reason}", where=url,
                               hint="the HBase info servers (hbase.master.info.port, hbase.regionserver.info.port) "
                                    "must be readable from the host running drt") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UnreachableError(f"cannot read {url}: {reason}", where=url,
                               hint="the HBase info servers (hbase.master.info.port, hbase.regionserver.info.port) "
                                    "must be reachable from the host running drt") from None


def _get_spnego(url: str, timeout: float, kerberos: Any) -> bytes:
    """``url`` with SPNEGO as ``kerberos``'s principal (:func:`dr_toolkit.kerberos.http_get`)."""
    import requests

    from dr_toolkit.kerberos import KerberosError, http_get

    try:
        r = http_get(url, kerberos=kerberos, timeout_s=timeout)
    except requests.RequestException as exc:
        raise UnreachableError(f"cannot read {url}: {type(exc).__name__}", where=url,
                               hint="the HBase info servers (hbase.master.info.port, hbase.regionserver.info.port) "
                                    "must be reachable from the host running drt") from None
    if r.status_code == 403:
        raise KerberosError(f"{url} refuses {kerberos.who} (HTTP 403)", where=url,
                            hint="the info server's admin users (hbase.security.authentication.spnego.admin.users) "
                                 "must include this principal")
    if r.status_code != 200:
        raise UnreachableError(f"cannot read {url}: HTTP {r.status_code}", where=url,
                               hint="the HBase info servers must answer the principal drt runs as")
    return bytes(r.content)


def _parsed(url: str, timeout: float, parse: Callable[[str, str], T], what: str, hint: str,
            kerberos: Any = None) -> T:
    """A status page read and parsed; a page that is not what ``parse`` expects is no answer (one line,
    exit 3), never an empty result."""
    html = _get(url, timeout, kerberos).decode("utf-8", errors="replace")
    try:
        return parse(html, url)
    except DecodeError as exc:
        raise UnreachableError(f"{what}: {exc}", where=url, hint=hint) from None


def jmx_bean(server: LiveServer, query: str, timeout: float = TIMEOUT_S) -> dict[str, Any] | None:
    """One bean of the server's ``/jmx`` (None: the server has no such bean)."""
    if server.url is None:
        raise UnreachableError(f"region server {server.name} has no info server (info port not in its znode)",
                               where=server.name, hint="turn on hbase.regionserver.info.port: drt reads its /jmx")
    url = f"{server.url}/jmx?qry={urllib.parse.quote(query)}"
    raw = _get(url, timeout, server.kerberos)
    try:
        beans = json.loads(raw)["beans"]
    except (ValueError, KeyError, TypeError):
        raise UnreachableError(f"{url} did not answer JMX JSON", where=url) from None
    if not isinstance(beans, list) or not beans:
        return None
    bean = beans[0]
    return bean if isinstance(bean, dict) else None


RS_SOURCE_COLUMNS = ["PeerId", "WalGroup", "Current Log", "Size", "Queue Size", "Offset"]
NO_SOURCES = "No Replication Metrics for Peers"


def parse_rs_sources(html: str, where: str = "rs-status") -> dict[str, list[dict[str, str]]]:
    """The "Replication Status" section of a region server's ``/rs-status`` (HBase 2.x): per peer id,
    the WAL groups its replication source is shipping (``HRegionServer.getWalGroupsReplicationStatus``:
    the sources the server's replication manager runs, not a metric). ``{}`` when the page says it
    runs none; a page without the section is no answer."""
    at = html.find("Replication Status")
    if at < 0:
        raise DecodeError(f"{where}: no Replication Status section")
    # the section's table comes after its heading: the page before it (server metrics, block cache,
    # tasks, one row per online region — most of the page on a loaded server) is not parsed
    html = html[at:]
    p = _Tables()
    p.feed(html)
    p.close()
    for rows in p.tables:
        if rows and rows[0] == RS_SOURCE_COLUMNS:
            out: dict[str, list[dict[str, str]]] = {}
            for r in rows[1:]:
                if len(r) != len(RS_SOURCE_COLUMNS):
                    raise DecodeError(f"{where}: a replication status row has {len(r)} cells: {r}")
                out.setdefault(r[0], []).append(dict(zip(RS_SOURCE_COLUMNS, r, strict=True)))
            return out
    if NO_SOURCES in html:
        return {}
    raise DecodeError(f"{where}: neither a replication status table ({', '.join(RS_SOURCE_COLUMNS)}) nor "
                      f"{NO_SOURCES!r}")


def replication_sources(server: LiveServer, timeout: float = TIMEOUT_S) -> dict[str, list[dict[str, str]]]:
    """The replication sources the region server runs, by peer id, from its own ``/rs-status`` — the
    server's replication manager, not a JVM-wide metrics bean (whose ``source.<id>.*`` keys a source
    of another, closed server in the same JVM can remove or leave behind)."""
    if server.url is None:
        raise UnreachableError(f"region server {server.name} has no info server (info port not in its znode)",
                               where=server.name, hint="turn on hbase.regionserver.info.port: drt reads its "
                                                       "/rs-status and /jmx")
    return _parsed(f"{server.url}/rs-status", timeout, parse_rs_sources,
                   f"cannot read the replication sources region server {server.name} runs",
                   "drt reads the Replication Status table of HBase 2.x's /rs-status", server.kerberos)


METRICS_PERIOD_KEY = "hbase.regionserver.metrics.period"
METRICS_PERIOD_DEFAULT_MS = 5000  # HConstants.DEFAULT_REGIONSERVER_METRICS_PERIOD


BULKLOAD_KEY = "hbase.replication.bulkload.enabled"


@dataclass(frozen=True)
class ServerCounters:
    """A region server's count of mutations written without a WAL and of bulk loads, as of
    ``counted_before``: the region server sums its regions' exact counters into the bean every
    ``hbase.regionserver.metrics.period`` (a fixed delay), so a mutation made in the last period may
    not be in it yet; ``counted_before`` is the read time minus twice that period. Bulk-loaded files
    reach the peer only with ``hbase.replication.bulkload.enabled`` on that server."""

    server: str
    mutations_without_wal: int
    mutations_without_wal_bytes: int
    read_at: float
    period_s: float
    bulk_loads: int = 0
    bulkload_replication: bool = False

    @property
    def counted_before(self) -> float:
        return self.read_at - 2 * self.period_s


def server_conf(server: LiveServer, timeout: float = TIMEOUT_S) -> tuple[float, bool]:
    """(``hbase.regionserver.metrics.period`` in seconds, ``hbase.replication.bulkload.enabled``) from the
    region server's own ``/conf`` (HBase's defaults — 5 s, off — where it does not set them)."""
    url = f"{server.url}/conf?format=json"
    period, bulk = METRICS_PERIOD_DEFAULT_MS / 1000.0, False
    try:
        for p in json.loads(_get(url, timeout, server.kerberos))["properties"]:
            if p.get("key") == METRICS_PERIOD_KEY:
                period = float(p["value"]) / 1000.0
            elif p.get("key") == BULKLOAD_KEY:
                bulk = str(p["value"]).strip().lower() == "true"
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UnreachableError(f"{url} did not answer the configuration as JSON", where=url) from None
    return period, bulk


def server_counters(server: LiveServer, timeout: float = TIMEOUT_S) -> ServerCounters:
    """The server's own ``sub=Server`` bean — the one whose ``tag.serverName`` is this server (a JVM that
    ran another region server before may still hold that one's bean)."""
    import time

    if server.url is None:
        raise UnreachableError(f"region server {server.name} has no info server (info port not in its znode)",
                               where=server.name, hint="turn on hbase.regionserver.info.port: drt reads its /jmx")
    period, bulk = server_conf(server, timeout)
    url = f"{server.url}/jmx?qry={urllib.parse.quote(SERVER_BEAN + '*')}"
    mine: list[dict[str, Any]] = []
    for attempt in range(3):  # Hadoop's JMX cache is rebuilt in place: a read may catch a bean without its tags
        if attempt:
            time.sleep(0.5)
        read_at = time.time()
        try:
            beans = json.loads(_get(url, timeout, server.kerberos))["beans"]
        except (ValueError, KeyError, TypeError):
            raise UnreachableError(f"{url} did not answer JMX JSON", where=url) from None
        mine = [b for b in beans if isinstance(b, dict) and b.get("tag.serverName") == server.name]
        if len(mine) == 1 and "mutationsWithoutWALCount" in mine[0]:
            break
    else:
        raise UnreachableError(f"region server {server.name}: {len(mine)} {SERVER_BEAN} bean(s) of its own with "
                               "mutationsWithoutWALCount", where=url, hint="is this an HBase 2.x region server?")
    bean = mine[0]
    return ServerCounters(server.name, int(bean.get("mutationsWithoutWALCount") or 0),
                          int(bean.get("mutationsWithoutWALSize") or 0), read_at, period,
                          int(bean.get("Bulkload_num_ops") or 0), bulk)


# --- the peers the running master holds -------------------------------------------------------------


@dataclass(frozen=True)
class LivePeer:
    peer_id: str
    state: str  # ENABLED | DISABLED
    config: PeerConfig


class _Tables(HTMLParser):
    """Every table of a page as rows of cell texts (``th`` and ``td``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._stack: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._stack.append([])
        elif tag == "tr" and self._stack:
            self._stack[-1].append([])
        elif tag in ("td", "th") and self._stack and self._stack[-1]:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._stack and self._stack[-1]:
            self._stack[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table" and self._stack:
            self.tables.append(self._stack.pop())

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


PEER_COLUMNS = ("Peer Id", "Cluster Key", "State", "ReplicateAll", "Namespaces", "Exclude Namespaces",
                "Table Cfs", "Exclude Table Cfs")


def _namespaces(text: str) -> frozenset[str] | None:
    items = [t.strip() for t in text.split(";") if t.strip()]
    return frozenset(items) or None


def _table_cfs(text: str, where: str) -> dict[str, list[str]] | None:
    """HBase's ``ReplicationPeerConfigUtil.convertToString`` form (``ns.table:cf1,cf2;ns.t2``), read as
    HBase's own ``parseTableCFsFromConfig`` reads it — except that a name HBase would read ambiguously
    (a '.' in the table's qualifier: ``ns.a.b``) is refused rather than guessed."""
    out: dict[str, list[str]] = {}
    for tab in text.split(";"):
        tab = tab.strip()
        if not tab:
            continue
        name, _, fams = tab.partition(":")
        parts = name.strip().split(".")
        if len(parts) != 2 or not all(parts) or ":" in fams:
            raise DecodeError(f"{where}: cannot tell namespace from table in {tab!r}")
        out[f"{parts[0]}:{parts[1]}"] = [f.strip() for f in fams.split(",") if f.strip()]
    return out or None


def parse_master_peers(html: str, where: str = "master-status") -> dict[str, LivePeer]:
    """The "Peers" table of the master's ``/master-status`` page (HBase 2.x), by peer id."""
    p = _Tables()
    p.feed(html)
    p.close()
    for rows in p.tables:
        if not rows or not all(c in rows[0] for c in PEER_COLUMNS):
            continue
        head = rows[0]
        col = {c: head.index(c) for c in head}
        peers: dict[str, LivePeer] = {}
        total: int | None = None
        for r in rows[1:]:
            if len(r) == 1 and (m := re.match(r"^Total:\s*(\d+)$", r[0])):
                total = int(m.group(1))
                continue
            if len(r) != len(head):
                raise DecodeError(f"{where}: a row of the Peers table has {len(r)} cells, not {len(head)}: {r}")
            pid = r[col["Peer Id"]]
            ra = r[col["ReplicateAll"]].lower()
            if ra not in ("true", "false") or r[col["State"]] not in ("ENABLED", "DISABLED"):
                raise DecodeError(f"{where}: peer {pid}: unexpected state or ReplicateAll: {r}")
            cfg = PeerConfig(cluster_key=r[col["Cluster Key"]],
                             table_cfs=_table_cfs(r[col["Table Cfs"]], where),
                             replicate_all=ra == "true",
                             namespaces=_namespaces(r[col["Namespaces"]]),
                             exclude_table_cfs=_table_cfs(r[col["Exclude Table Cfs"]], where),
                             exclude_namespaces=_namespaces(r[col["Exclude Namespaces"]]))
            peers[pid] = LivePeer(pid, r[col["State"]], cfg)
        if total is not None and total != len(peers):
            raise DecodeError(f"{where}: the Peers table says Total: {total} but lists {len(peers)}")
        return peers
    raise DecodeError(f"{where}: no Peers table (columns {', '.join(PEER_COLUMNS)})")


def master_peers(zk: ZkClient, parent: str, timeout: float = TIMEOUT_S) -> tuple[LiveServer, dict[str, LivePeer]]:
    """The active master and the replication peers it runs (its ``/master-status`` Peers table)."""
    master = active_master(zk, parent)
    return master, running_peers(master, timeout)


def running_peers(master: LiveServer, timeout: float = TIMEOUT_S) -> dict[str, LivePeer]:
    """The replication peers the active master ``master`` runs (its ``/master-status`` Peers table)."""
    if master.url is None:
        raise UnreachableError(f"the active HBase master {master.name} has no info server (hbase.master.info.port)",
                               where=master.name, hint="turn on the master's info server: drt reads the peers "
                                                       "HBase runs from its /master-status")
    return _parsed(f"{master.url}/master-status", timeout, parse_master_peers,
                   "cannot read the peers the running master holds",
                   "drt reads the Peers table of HBase 2.x's /master-status", master.kerberos)


def same_peer(a: PeerConfig, b: PeerConfig) -> bool:
    """Do two peer values ship the same (cluster key, replicate-all, namespaces, table-CFs, excludes)?"""
    def tcfs(m: dict[str, list[str]] | None) -> dict[str, frozenset[str]]:
        return {full_table(t): frozenset(c) for t, c in (m or {}).items()}

    try:
        keys = normalize_cluster_key(a.cluster_key) == normalize_cluster_key(b.cluster_key)
    except Exception:  # noqa: BLE001 - a key that does not parse is compared as text
        keys = a.cluster_key.strip() == b.cluster_key.strip()
    return (keys and a.replicates_all == b.replicates_all
            and (a.namespaces or frozenset()) == (b.namespaces or frozenset())
            and (a.exclude_namespaces or frozenset()) == (b.exclude_namespaces or frozenset())
            and tcfs(a.table_cfs) == tcfs(b.table_cfs) and tcfs(a.exclude_table_cfs) == tcfs(b.exclude_table_cfs))


__all__ = ["LivePeer", "LiveServer", "ServerCounters", "active_master", "jmx_bean", "live_region_servers",
           "master_peers", "parse_master_peers", "replication_sources", "running_peers", "same_peer",
           "server_counters",
           "strip_metadata"]
