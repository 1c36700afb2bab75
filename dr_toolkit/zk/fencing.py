"""Fencing: which cluster is active, and an increasing epoch that retires stale writers.

Layout under the ZooKeeper ``dr_root`` of the cold cluster (the one that survives the hot
cluster's loss; the hot cluster's when the cold one has no ZooKeeper)::

    <dr_root>/fencing              JSON {"epoch": N, "fenced_cluster": "hot", "at": epoch-s, "by": who}
    <dr_root>/active-cluster       JSON {"cluster": "cold", "epoch": N, "at": ..., "by": ...}
    <dr_root>/read-only/<cluster>  JSON {"epoch": N, "at": ..., "by": ...} — present = read-only

Every bump of the epoch is a versioned compare-and-set, so two operators racing each get a
distinct epoch. A writer remembers the epoch it started under and writes only through
:meth:`Fence.guarded_set` (one ZooKeeper transaction: *the fencing znode still has the
version I saw* + *my write*) or checks with :meth:`Fence.check_epoch` first; a writer whose
epoch is older than the current one gets :class:`~dr_toolkit.errors.FencedError` and writes
nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, FencedError
from dr_toolkit.paths import real_path
from dr_toolkit.retry import Retry
from dr_toolkit.zk import client as zk_client  # zk_session through the module: a test counts sessions
from dr_toolkit.zk.client import ZkBadVersion, ZkNodeExists, ZkNoNode

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.topology import Topology, ZooKeeperEndpoint
    from dr_toolkit.zk.client import ZkClient


@dataclass(frozen=True)
class FenceState:
    epoch: int = 0
    fenced_cluster: str | None = None
    at: float | None = None
    by: str | None = None
    version: int = -1  # znode version; -1 = the fencing znode does not exist yet

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("version")
        return d


def _dump(d: dict[str, Any]) -> bytes:
    return json.dumps(d, sort_keys=True).encode()


def _load(raw: bytes | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        v = json.loads(raw.decode())
    except (ValueError, UnicodeDecodeError):
        return {}
    return v if isinstance(v, dict) else {}


def fence_cluster_name(topology: Topology) -> str:
    """The cluster whose ZooKeeper holds the fencing state: the configured cold cluster's in either
    direction (``Topology.fence_cluster`` after a re-protect), else the other one's."""
    first = topology.fence_cluster or topology.cold_name
    other = next(n for n in topology.clusters if n != first)
    return first if topology.clusters[first].zookeeper is not None or topology.clusters[other].zookeeper is None \
        else other


def fencing_endpoint(topology: Topology) -> ZooKeeperEndpoint:
    """The ZooKeeper holding the fencing state (:func:`fence_cluster_name`)."""
    ep = topology.clusters[fence_cluster_name(topology)].zookeeper
    if ep is None:
        raise ConfigError("no ZooKeeper configured for fencing", where=topology.source_file,
                          hint="add a zookeeper section to the cold cluster (it holds the fencing znode)")
    return ep


class Fence:
    """The fencing recipe on one ZooKeeper session (:class:`dr_toolkit.zk.client.ZkClient`)."""

    def __init__(self, zk: ZkClient, dr_root: str = "/dr-toolkit") -> None:
        self.zk = zk
        self.root = dr_root.rstrip("/") or "/dr-toolkit"

    @property
    def fencing_path(self) -> str:
        return f"{self.root}/fencing"

    @property
    def active_path(self) -> str:
        return f"{self.root}/active-cluster"

    def read_only_path(self, cluster: str) -> str:
        return f"{self.root}/read-only/{cluster}"

    # -- reads ---------------------------------------------------------------------------------
    def state(self) -> FenceState:
        try:
            raw, stat = self.zk.get(self.fencing_path)
        except ZkNoNode:
            return FenceState()
        d = _load(raw)
        return FenceState(epoch=int(d.get("epoch", 0)), fenced_cluster=d.get("fenced_cluster") or None,
                          at=d.get("at"), by=d.get("by"), version=int(stat.version))

    def active(self) -> dict[str, Any] | None:
        """The active-cluster record, or None when it was never set."""
        try:
            raw, _ = self.zk.get(self.active_path)
        except ZkNoNode:
            return None
        return _load(raw) or None

    @property
    def direction_path(self) -> str:
        return f"{self.root}/direction"

    def direction(self) -> dict[str, Any] | None:
        """The protection direction a re-protect recorded (``{"hot", "cold", "epoch", "at", "by",
        "run_id"}``), or None when none ever did (the topology's own roles)."""
        try:
            raw, _ = self.zk.get(self.direction_path)
        except ZkNoNode:
            return None
        return _load(raw) or None

    def is_read_only(self, cluster: str) -> bool:
        return self.zk.exists(self.read_only_path(cluster)) is not None

    # -- the epoch -------------------------------------------------------------------------------
    def bump(self, *, fenced_cluster: str, by: str, expected_epoch: int | None = None,
             tries: int = 5) -> FenceState:
        """Raise the epoch by one (compare-and-set) and record who fenced which cluster.

        ``expected_epoch``: fail with FencedError when the epoch is no longer that value
        (someone else fenced in between) instead of bumping past them.
        """
        self.zk.ensure_path(self.root)
        # a lost compare-and-set race (the znode changed or appeared under us) is read again
        race = Retry(tries=max(1, tries), backoff_s=0.01, max_backoff_s=0.2, retry_on=(ZkBadVersion, ZkNodeExists))
        try:
            return race(self._bump_once, fenced_cluster=fenced_cluster, by=by, expected_epoch=expected_epoch)
        except (ZkBadVersion, ZkNodeExists):
            raise FencedError("could not bump the fencing epoch: it kept changing under us",
                              where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                              hint="another operator is fencing at the same time; stop and coordinate") from None

    def _bump_once(self, *, fenced_cluster: str, by: str, expected_epoch: int | None) -> FenceState:
        cur = self.state()
        if expected_epoch is not None and cur.epoch != expected_epoch:
            raise FencedError(f"fencing epoch is {cur.epoch}, expected {expected_epoch}",
                              where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                              hint="another operator fenced in between; read the state and decide again")
        new = FenceState(epoch=cur.epoch + 1, fenced_cluster=fenced_cluster or None, at=time.time(), by=by)
        if cur.version < 0:
            self.zk.create(self.fencing_path, _dump(new.to_json()))
            version = 0
        else:
            version = int(self.zk.set(self.fencing_path, _dump(new.to_json()), cur.version).version)
        return FenceState(new.epoch, new.fenced_cluster, new.at, new.by, version)

    def check_epoch(self, epoch: int) -> FenceState:
        """Raise FencedError when ``epoch`` is not the current one — older (a stale writer) or
        newer (an epoch that was never issued: a forged or corrupted value); return the state."""
        cur = self.state()
        if epoch > cur.epoch:
            raise FencedError(f"fencing epoch {epoch} was never issued (the current epoch is {cur.epoch})",
                              where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                              hint="a writer may only use an epoch returned by a bump; stop it")
        if epoch < cur.epoch:
            raise FencedError(
                f"stale fencing epoch {epoch}: the current epoch is {cur.epoch} "
                f"(cluster {cur.fenced_cluster!r} fenced by {cur.by})",
                where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                hint="this writer works for a cluster that is no longer active; stop it")
        return cur

    def guarded_set(self, path: str, value: bytes, epoch: int) -> None:
        """Write ``value`` at ``path`` only while ``epoch`` is current — atomically.

        One transaction: check the fencing znode's version + create/set ``path``. A concurrent
        bump makes the whole transaction fail, and the write does not happen.
        """
        parent = path.rsplit("/", 1)[0]
        if parent:
            self.zk.ensure_path(parent)
        for attempt in range(3):
            cur = self.check_epoch(epoch)
            exists = self.zk.exists(path) is not None
            tx = self.zk.transaction()
            if cur.version >= 0:
                tx.check(self.fencing_path, cur.version)
            if exists:
                tx.set_data(path, value)
            else:
                tx.create(path, value)
            try:
                tx.commit()
                return
            except ZkBadVersion:
                raise FencedError(f"write to {path} refused: the fencing epoch changed while writing",
                                  where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                                  hint="this writer's epoch is stale; stop it") from None
            except (ZkNodeExists, ZkNoNode):
                if attempt == 2:  # created or deleted under us each time: someone else is writing it
                    raise

    def guarded_delete(self, path: str, epoch: int) -> None:
        cur = self.check_epoch(epoch)
        if self.zk.exists(path) is None:
            return
        tx = self.zk.transaction()
        if cur.version >= 0:
            tx.check(self.fencing_path, cur.version)
        tx.delete(path)
        try:
            tx.commit()
        except ZkNoNode:
            return
        except ZkBadVersion:
            raise FencedError(f"delete of {path} refused: the fencing epoch changed",
                              where=f"zookeeper {self.zk.quorum} {self.fencing_path}") from None

    def lift(self, *, epoch: int, cluster: str, by: str) -> FenceState:
        """Lift the fence of ``cluster`` that was raised at ``epoch`` (an aborted failover).

        Bumps the epoch (compare-and-set, expecting ``epoch``) to a state that fences no cluster —
        so every writer of the aborted run is retired — then removes the cluster's read-only
        flag under the new epoch. FencedError when someone fenced again since ``epoch``, and when
        another cluster has been made active: the active-cluster znode is read and its version is
        checked in the same transaction as the bump, so a promotion racing the lift makes one of
        the two fail — a promoted cluster's peer is never unfenced."""
        cur = self.state()
        if cur.epoch != epoch:
            raise FencedError(f"fencing epoch is {cur.epoch}, expected {epoch}",
                              where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                              hint="another operator fenced in between; read the state and decide again")
        self.zk.ensure_path(self.root)
        try:
            self.zk.create(self.active_path, b"{}")  # a znode to hold the version the transaction checks
        except ZkNodeExists:
            pass
        raw, astat = self.zk.get(self.active_path)
        active = _load(raw)
        if active.get("cluster") and active.get("cluster") != cluster:
            raise FencedError(
                f"{active.get('cluster')!r} is the active cluster (epoch {active.get('epoch')}, by {active.get('by')}): "
                f"the fence of {cluster!r} stays", where=f"zookeeper {self.zk.quorum} {self.active_path}",
                hint="the failover already promoted; undoing it is a failback (a failover in the other direction)")
        new = FenceState(epoch=cur.epoch + 1, fenced_cluster=None, at=time.time(), by=by)
        tx = self.zk.transaction()
        tx.check(self.active_path, astat.version)
        tx.set_data(self.fencing_path, _dump(new.to_json()), cur.version)
        try:
            tx.commit()
        except ZkBadVersion:
            raise FencedError("the fence was not lifted: the fencing epoch or the active cluster changed meanwhile",
                              where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                              hint="read the state (`drt failover status`) and decide again") from None
        new = FenceState(new.epoch, None, new.at, new.by, cur.version + 1)
        self.set_read_only(cluster, False, epoch=new.epoch, by=by)
        return new

    def reprotect(self, *, active: str, standby: str, by: str, run_id: str) -> FenceState:
        """Protect ``active`` onto ``standby`` (re-protect after a failover): in ONE transaction
        that checks the active-cluster znode still names ``active`` (its version) — the epoch raised
        to a state that fences nothing (every writer of the failover is retired), the direction
        recorded (``<dr_root>/direction``: ``active`` → ``standby``), ``standby``'s read-only flag and
        the mirrors-paused flag removed. FencedError when ``active`` is not the active cluster or
        the state changed meanwhile. Idempotent: when the direction already says so at the current
        epoch, nothing is written."""
        where = f"zookeeper {self.zk.quorum} {self.active_path}"
        raw, astat = self.zk.get(self.active_path) if self.zk.exists(self.active_path) else (b"", None)
        act = _load(raw)
        if act.get("cluster") != active or astat is None:
            raise FencedError(f"{active!r} is not the active cluster (the active-cluster znode says "
                              f"{act.get('cluster')!r}): nothing to re-protect from it", where=where,
                              hint="re-protect follows a failover that promoted this cluster")
        cur = self.state()
        done = self.direction() or {}
        if done.get("hot") == active and done.get("cold") == standby and done.get("epoch") == cur.epoch \
                and cur.fenced_cluster is None:
            return cur
        new = FenceState(epoch=cur.epoch + 1, fenced_cluster=None, at=time.time(), by=by)
        rec = {"hot": active, "cold": standby, "epoch": new.epoch, "at": new.at, "by": by, "run_id": run_id}
        tx = self.zk.transaction()
        tx.check(self.active_path, astat.version)
        if cur.version >= 0:
            tx.set_data(self.fencing_path, _dump(new.to_json()), cur.version)
        else:
            tx.create(self.fencing_path, _dump(new.to_json()))
        if self.zk.exists(self.direction_path) is not None:
            tx.set_data(self.direction_path, _dump(rec))
        else:
            tx.create(self.direction_path, _dump(rec))
        for path in (self.read_only_path(standby), f"{self.root}/mirrors-paused"):
            if self.zk.exists(path) is not None:
                tx.delete(path)
        try:
            tx.commit()
        except (ZkBadVersion, ZkNodeExists, ZkNoNode):
            raise FencedError("re-protect did not take: the fencing epoch or the active cluster changed meanwhile",
                              where=f"zookeeper {self.zk.quorum} {self.fencing_path}",
                              hint="read the state (`drt failover fence-status`) and run it again") from None
        return FenceState(new.epoch, None, new.at, new.by, max(cur.version, -1) + 1)

    # -- the active cluster and the read-only flag -------------------------------------------------
    def set_active(self, cluster: str, *, epoch: int, by: str, recovery_point: str | None = None,
                   recovery: dict[str, Any] | None = None) -> dict[str, Any]:
        """Name the active cluster (with the recovery point it was promoted at, when given, and the
        whole ``recovery`` record: a resumed run reads it back from here, not from the ledger)."""
        rec: dict[str, Any] = {"cluster": cluster, "epoch": epoch, "at": time.time(), "by": by}
        if recovery_point is not None:
            rec["recovery_point"] = recovery_point
        if recovery is not None:
            rec["recovery"] = recovery
        self.guarded_set(self.active_path, _dump(rec), epoch)
        return rec

    def set_read_only(self, cluster: str, read_only: bool, *, epoch: int, by: str) -> None:
        path = self.read_only_path(cluster)
        if read_only:
            self.guarded_set(path, _dump({"epoch": epoch, "at": time.time(), "by": by}), epoch)
        else:
            self.guarded_delete(path, epoch)

    def snapshot(self) -> dict[str, Any]:
        """Everything, for audit records and the status view."""
        st = self.state()
        ro_root = f"{self.root}/read-only"
        try:
            ro = sorted(self.zk.get_children(ro_root))
        except ZkNoNode:
            ro = []
        return {"fencing": st.to_json(), "active": self.active(), "direction": self.direction(), "read_only": ro}


@contextmanager
def open_fence(topology: Topology, *, access: Access) -> Iterator[Fence]:
    """A :class:`Fence` on the topology's fencing ZooKeeper (UnreachableError when it is down).

    Credentials: the endpoint's ``conn_id`` resolved through ``access``."""
    ep = fencing_endpoint(topology)
    creds = access.endpoint(topology, fence_cluster_name(topology), "zookeeper")
    with zk_client.zk_session(ep, credentials=creds) as zk:
        yield Fence(zk, ep.dr_root)


def assert_offsets_apply_allowed(topology: Topology, *, access: Access) -> None:
    """For writers of consumer offsets onto the cold cluster (`drt kafka remap --apply`, the
    runbook's apply): refuse (FencedError) once the cold cluster is the active one — its groups'
    offsets then belong to the consumers running on it, and a remap from the old hot cluster's
    checkpoints would move them back or forward under them — or while it is marked read-only.
    Topologies without any ZooKeeper have no fencing state and are not checked."""
    if topology.cold.zookeeper is None and topology.hot.zookeeper is None:
        return
    cold = topology.cold_name
    with open_fence(topology, access=access) as fence:
        active = fence.active() or {}
        if active.get("cluster") == cold:
            raise FencedError(f"the cold cluster {cold!r} is the active cluster (promoted at epoch "
                              f"{active.get('epoch')} by {active.get('by')}): consumer offsets remapped from "
                              f"{topology.hot_name!r} are not written onto it",
                              where=f"zookeeper {fence.zk.quorum} {fence.active_path}",
                              hint="its groups' offsets are its consumers' own now; reset one by hand if needed")
        if fence.is_read_only(cold):
            raise FencedError(f"cluster {cold!r} is fenced read-only: offsets are not written onto it",
                              where=f"zookeeper {fence.zk.quorum} {fence.fencing_path}")


# -- which cluster an address is ----------------------------------------------------------------
# The fence is keyed by cluster identity, never by how a URI is spelled: ``hdfs://hot/x``,
# ``webhdfs://<any of hot's NameNodes>/x`` (127.0.0.1, localhost, the host's name, [::1], upper
# case, a trailing dot, the default port) and a ``file://`` path under hot's ``local_root`` are all
# hot. An address the topology does not name is asked what it is (the block pool its NameNode
# serves, over its HTTP server's /jmx) only while a fence is up; one that cannot be identified is
# refused then.

FOREIGN = "<not a cluster of the topology>"
UNKNOWN = "<unidentified>"
_DEFAULT_PORT = {"http": 9870, "https": 9871}


@dataclass(frozen=True)
class Identity:
    """Which topology cluster a copy's endpoint is: ``cluster`` (a name, :data:`FOREIGN` or
    :data:`UNKNOWN`) and ``how`` it was decided."""

    cluster: str
    how: str


def _is_local_ip(ip: Any) -> bool:
    import socket

    if ip.is_loopback or ip.is_unspecified:
        return True
    fam = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(fam, socket.SOCK_DGRAM) as s:
            s.bind((str(ip), 0))  # binds only to an address of this host's own interfaces
        return True
    except OSError:
        return False


def host_key(host: str) -> frozenset[str]:
    """The addresses a host name stands for (resolved; every address of this machine is one key,
    ``this-host``), so any spelling of one host compares equal: case, a trailing dot, brackets."""
    import ipaddress
    import socket

    h = host.strip().strip("[]").rstrip(".").lower()
    try:
        infos = socket.getaddrinfo(h, None)
        ips = {ipaddress.ip_address(str(i[4][0]).split("%", 1)[0]) for i in infos}
    except (OSError, ValueError, UnicodeError):
        return frozenset({h})
    if any(_is_local_ip(ip) for ip in ips):
        return frozenset({"this-host"})
    return frozenset(str(ip) for ip in ips) or frozenset({h})


def _nn_key(url: str) -> tuple[frozenset[str], int | None]:
    from urllib.parse import urlparse

    p = urlparse(url if "://" in url else f"http://{url}")
    try:
        port = p.port
    except ValueError:
        port = None
    scheme = {"webhdfs": "http", "swebhdfs": "https"}.get(p.scheme.lower(), p.scheme.lower())
    return host_key(p.hostname or ""), port if port is not None else _DEFAULT_PORT.get(scheme)


def _same_namenode(a: str, b: str) -> bool:
    (ha, pa), (hb, pb) = _nn_key(a), _nn_key(b)
    return pa == pb and bool(ha & hb)


def static_identity(topology: Topology, loc: Any) -> Identity:
    """Which cluster ``loc`` (a :class:`dr_toolkit.fs.uri.Location`) is, from the topology alone:
    named (``hdfs://<cluster>``, an S3 bucket), one of a cluster's NameNodes by address, a local path
    under a cluster's ``local_root``; :data:`FOREIGN` for a local path or bucket no cluster holds;
    :data:`UNKNOWN` for a WebHDFS address no cluster lists."""
    if loc.cluster:
        return Identity(loc.cluster, "named in the URI")
    if loc.kind == "webhdfs":
        for name, c in topology.clusters.items():
            if c.hdfs is None:
                continue
            for nn in c.hdfs.namenodes:
                if any(_same_namenode(mine, nn) for mine in loc.namenodes):
                    return Identity(name, f"NameNode {nn} of cluster {name!r}")
        return Identity(UNKNOWN, "a WebHDFS address the topology does not list")
    if loc.kind == "local":
        from pathlib import Path

        mine = real_path(loc.path)
        for name, c in topology.clusters.items():
            if c.local_root is None:
                continue
            root = Path(c.local_root)
            if not root.is_absolute() and topology.source_file:
                root = Path(topology.source_file).resolve().parent / root
            r = real_path(str(root))
            if mine == r or mine.startswith(r.rstrip("/") + "/"):
                return Identity(name, f"under cluster {name!r}'s local_root {r}")
    return Identity(FOREIGN, "no cluster of the topology holds it")


def namenode_block_pool(url: str, timeout_s: float = 5.0, *, kerberos: bool = False) -> str:
    """The identity of the namespace a NameNode serves: its block pool id, as its HTTP server's /jmx
    NameNodeInfo bean reports it (``BP-<random>-<ip>-<created ms>``, made when the namespace was
    formatted). Every NameNode of one namespace — an HA pair — reports the same one; two clusters
    never do, even when they share a ClusterId (federation, or test clusters formatted alike).
    With SPNEGO when ``kerberos`` (or the environment names a principal): production NameNodes
    put their whole web UI, /jmx too, behind it. Raises OSError/ValueError (a server asking for
    Kerberos with no credentials: KerberosError, exit 3)."""
    from dr_toolkit.kerberos import http_get, kerberos_wanted

    base = url.rstrip("/")
    # requests' errors (connection refused, a timeout) are OSErrors
    r = http_get(f"{base}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo", timeout_s=timeout_s,
                 kerberos=kerberos_wanted(kerberos))
    if r.status_code != 200:
        raise OSError(f"{base}/jmx answered HTTP {r.status_code}")
    beans = json.loads(r.content.decode()).get("beans") or []
    bp = beans[0].get("BlockPoolId") if beans else None
    if not bp:
        raise ValueError(f"{base}/jmx has no NameNodeInfo BlockPoolId")
    return str(bp)


def asked_identity(topology: Topology, loc: Any, timeout_s: float = 5.0) -> Identity:
    """A WebHDFS address the topology does not list, identified by asking it: the block pool its
    NameNode serves against each topology cluster's (asked the same way). :data:`FOREIGN` only when
    the address and every topology HDFS cluster answered and none matched; else :data:`UNKNOWN`."""
    theirs: str | None = None
    errors: list[str] = []
    for nn in loc.namenodes:
        try:
            theirs = namenode_block_pool(nn, timeout_s)
            break
        except (OSError, ValueError) as exc:
            errors.append(f"{nn}: {type(exc).__name__}: {exc}")
    if theirs is None:
        return Identity(UNKNOWN, "its NameNode did not say its block pool (" + "; ".join(errors) + ")")
    unread: list[str] = []
    for name, c in topology.clusters.items():
        if c.hdfs is None:
            continue
        ids: set[str] = set()
        for nn in c.hdfs.namenodes:
            try:
                ids.add(namenode_block_pool(nn, timeout_s, kerberos=bool(c.hdfs.kerberos)))
            except (OSError, ValueError):
                continue
        if theirs in ids:
            return Identity(name, f"its NameNode serves block pool {theirs}, cluster {name!r}'s")
        if not ids:
            unread.append(name)
    if unread:
        return Identity(UNKNOWN, f"block pool {theirs}, and cluster(s) {', '.join(unread)} did not say theirs")
    return Identity(FOREIGN, f"block pool {theirs} is no topology cluster's")


def _endpoint(topology: Topology, end: Any) -> Identity | None:
    if end is None:
        return None
    if isinstance(end, str):
        return Identity(end, "given")
    return static_identity(topology, end)


def _fence_up(fence: Fence, st: FenceState, active: dict[str, Any]) -> bool:
    if st.fenced_cluster or active.get("cluster"):
        return True
    try:
        return bool(fence.zk.get_children(f"{fence.root}/read-only"))
    except ZkNoNode:
        return False


def _spell(end: Any) -> str:
    return str(getattr(end, "uri", end))


def assert_copy_allowed(topology: Topology, source_cluster: Any, target_cluster: Any, *,
                        access: Access, epoch: int | None = None) -> None:
    """For every copy into a cluster of the topology (`drt replicate`, `drt distcp`, the runbook):
    refuse (FencedError) to write into a read-only or fenced cluster, and — for hot → cold — once
    the hot cluster is fenced (unless the writer holds the current ``epoch``: the runbook's final
    copy) or once the cold cluster has been made active (after promotion nothing replicates into
    it from the old hot cluster, whatever the epoch). Topologies without any ZooKeeper have no
    fencing state and are not checked.

    ``source_cluster``/``target_cluster``: a cluster name, or the copy's
    :class:`~dr_toolkit.fs.uri.Location` — identified by cluster, not by spelling
    (:func:`static_identity`; while a fence is up, an address the topology does not list is asked
    the block pool its NameNode serves, :func:`asked_identity`). While a fence is up, a write to an
    address that cannot be identified, or from one into the cold cluster, is refused: it may be the
    fenced cluster under a name the topology does not know. Copies into a place that is no cluster of the topology (a
    local path outside every ``local_root``, another bucket, a NameNode of another block pool) are
    not checked."""
    if target_cluster is None or (topology.cold.zookeeper is None and topology.hot.zookeeper is None):
        return
    tgt = _endpoint(topology, target_cluster)
    assert tgt is not None
    if tgt.cluster == FOREIGN:
        return
    with open_fence(topology, access=access) as fence:
        st = fence.check_epoch(epoch) if epoch is not None else fence.state()
        active = fence.active() or {}
        where = f"zookeeper {fence.zk.quorum} {fence.fencing_path}"
        where_active = f"zookeeper {fence.zk.quorum} {fence.active_path}"
        if tgt.cluster == UNKNOWN:
            if not _fence_up(fence, st, active):
                return
            tgt = asked_identity(topology, target_cluster)
            if tgt.cluster == FOREIGN:
                return
            if tgt.cluster == UNKNOWN:
                raise FencedError(
                    f"target {_spell(target_cluster)} is no cluster the topology names and could not be identified "
                    f"({tgt.how}): while the fence is up (epoch {st.epoch}, fenced {st.fenced_cluster!r}, active "
                    f"{active.get('cluster')!r}) such writes are refused", where=where,
                    hint="write hdfs://<cluster>/path, or list that NameNode under clusters.<name>.hdfs.namenodes")
        target_name = tgt.cluster
        if fence.is_read_only(target_name) or (st.fenced_cluster == target_name and epoch is None):
            raise FencedError(f"cluster {target_name!r} is fenced (epoch {st.epoch}, by {st.by}): "
                              f"writes into it are refused ({_spell(target_cluster)}: {tgt.how})", where=where,
                              hint="it is no longer the active cluster; copy into the active one")
        if target_name != topology.cold_name:
            return
        src = _endpoint(topology, source_cluster)
        if src is None or src.cluster == FOREIGN:
            return
        if src.cluster == UNKNOWN:
            if not _fence_up(fence, st, active):
                return
            src = asked_identity(topology, source_cluster)
            if src.cluster == FOREIGN:
                return
            if src.cluster == UNKNOWN:
                raise FencedError(
                    f"source {_spell(source_cluster)} is no cluster the topology names and could not be identified "
                    f"({src.how}): while the fence is up (epoch {st.epoch}, fenced {st.fenced_cluster!r}) a copy "
                    f"from it into {target_name!r} may be replication from the fenced cluster and is refused",
                    where=where,
                    hint="write hdfs://<cluster>/path, or list that NameNode under clusters.<name>.hdfs.namenodes")
        source_name = src.cluster
        if source_name != topology.hot_name:
            return
        if active.get("cluster") == target_name:
            raise FencedError(f"the cold cluster {target_name!r} is the active cluster (promoted at epoch "
                              f"{active.get('epoch')} by {active.get('by')}): replication from {source_name!r} "
                              f"({_spell(source_cluster)}: {src.how}) into it is refused", where=where_active,
                              hint="after a failover, set up replication in the new direction")
        if epoch is not None:
            return
        if st.fenced_cluster == topology.hot_name:
            raise FencedError(f"the hot cluster {topology.hot_name!r} is fenced (epoch {st.epoch}, by {st.by}): "
                              "replication into the cold cluster is stopped",
                              where=f"zookeeper {fence.zk.quorum} {fence.fencing_path}",
                              hint="after a failover, set up replication in the new direction; the runbook's "
                                   "final copy runs under its own epoch")
