"""HBase replication peers in HBase's ZooKeeper layout — idempotent and converging.

HBase 2.0 and later keep peers in those znodes but *learn* them through master procedures:
a peer or a state written into ZooKeeper is ignored by a running HBase 2.x (seen on HBase
2.6: not listed by ``listReplicationPeers``, no queue made, a "disabled" peer ships on). So
for ``hbase_version`` ≥ 2.0 the planned changes are made by ``hbase shell -n`` with ``shell`` (the
cluster's ``hbase_shell``, :func:`shell_script`); without it a change is refused
(:class:`~dr_toolkit.errors.ConfigError`, exit 2, naming what to configure and the shell commands to
run by hand) — the toolkit never writes a peer into ZooKeeper for HBase 2.x (issue 38 #1: such a
peer has no replication source, so no queue, and "no queue" once read as "drained"). ZooKeeper
writes remain for HBase 0.94–1.x, which do learn peers from ZooKeeper. Reading is from ZooKeeper
here; the gate reads what the running HBase holds (:mod:`dr_toolkit.hbase.live`).

Every operation reads the current znodes, plans the changes that bring them to the desired
state, and applies them (or, with ``dry_run=True``, only returns them). Running an operation
twice changes nothing the second time; a half-written peer (a crash between two znode
writes: peer znode without ``peer-state``) is repaired by the next run. Writes of one peer
are committed in one ZooKeeper transaction where possible; a connection loss in the middle
of a commit is resolved by re-reading and re-planning.

Validation happens before anything is written: a malformed cluster key, an unknown peer
id (for enable/disable) and the cluster itself as its own peer are refused with a
:class:`~dr_toolkit.errors.ConfigError` (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, DrtError
from dr_toolkit.hbase.encoding import (
    DecodeError,
    Layout,
    PeerConfig,
    decode_peer,
    decode_state,
    encode_peer,
    encode_state,
    format_table_cfs,
    parse_table_cfs,
    table_cfs_in_peer,
    uses_protobuf,
)
from dr_toolkit.hbase.tables import run_shell
from dr_toolkit.topology import ZooKeeperEndpoint, validate_cluster_key
from dr_toolkit.zk.client import ZkBadVersion, ZkNodeExists, ZkNoNode, ZkNotEmpty

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology
    from dr_toolkit.zk.client import ZkClient

_PEER_ID = re.compile(r"^[A-Za-z0-9_.]+$")  # HBase forbids '-' (it separates recovered queue ids)
_MAX_ROUNDS = 5


@dataclass(frozen=True)
class PeerCluster:
    """The HBase cluster whose peers are read and changed: where its znodes are in ZooKeeper
    (``znode_parent``), its version (the znode layout, and whether changes go through its master:
    HBase ≥ 2.0) and its ``hbase`` command (``shell``, to run ``hbase shell -n``; None: none)."""

    znode_parent: str = "/hbase"
    hbase_version: str = "2.5"
    shell: str | None = None


@dataclass(frozen=True)
class ZnodeChange:
    """One planned or applied znode change; values shown decoded (never secrets)."""

    op: str  # create | set | delete
    path: str
    before: str | None = None
    after: str | None = None


@dataclass
class Peer:
    peer_id: str
    cluster_key: str
    state: str | None  # ENABLED | DISABLED | None (peer-state znode missing: half-written peer)
    table_cfs: dict[str, list[str]] | None = None
    tcfs_znode: bool = field(default=False, repr=False)  # HBase 1.x `tableCFs` child exists
    config: PeerConfig | None = field(default=None, repr=False, compare=False)  # with HBase 2.x's filters

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"peer_id": self.peer_id, "cluster_key": self.cluster_key, "state": self.state,
                               "table_cfs": self.table_cfs}
        c = self.config
        if c is not None:
            out.update({"replicate_all": c.replicate_all, "namespaces": sorted(c.namespaces or []) or None,
                        "exclude_namespaces": sorted(c.exclude_namespaces or []) or None,
                        "exclude_table_cfs": c.exclude_table_cfs})
        return out


@dataclass
class PeerResult:
    peer_id: str
    action: str
    dry_run: bool
    changes: list[ZnodeChange] = field(default_factory=list)
    before: Peer | None = None
    after: Peer | None = None
    backend: str = "zookeeper"  # or "hbase-shell"
    script: str | None = None  # the shell script run (or that would run)
    warning: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def to_json(self) -> dict[str, Any]:
        return {"peer_id": self.peer_id, "action": self.action, "dry_run": self.dry_run, "changed": self.changed,
                "changes": [asdict(c) for c in self.changes],
                "before": self.before.to_json() if self.before else None,
                "after": self.after.to_json() if self.after else None,
                "backend": self.backend, "script": self.script, "warning": self.warning}


# --- validation ------------------------------------------------------------------------------------


def validate_peer_id(peer_id: str) -> str:
    if not _PEER_ID.match(peer_id or ""):
        raise ConfigError(f"invalid peer id {peer_id!r}",
                          hint="use letters, digits, '_' or '.'; '-' is not allowed (HBase uses it in queue names)")
    return peer_id


def normalize_cluster_key(key: str) -> tuple[tuple[str, ...], int, str]:
    hosts, port, parent = validate_cluster_key(key.strip())
    return tuple(sorted(h.lower() for h in hosts)), port, parent.rstrip("/") or "/"


def own_cluster_key(zk: ZkClient, znode_parent: str) -> str:
    """The cluster key of the ensemble ``zk`` is connected to, with ``znode_parent``."""
    return ZooKeeperEndpoint(quorum=zk.endpoint.quorum, hbase_znode_parent=znode_parent).cluster_key


def _check_not_self(cluster_key: str, own_keys: list[str]) -> None:
    mine = normalize_cluster_key(cluster_key)
    for own in own_keys:
        o = normalize_cluster_key(own)
        same_hosts = bool(set(mine[0]) & set(o[0])) or _loopback(mine[0]) and _loopback(o[0])
        if same_hosts and mine[1] == o[1] and mine[2] == o[2]:
            raise ConfigError(f"refusing to add the cluster itself as its own peer: {cluster_key}",
                              hint=f"this cluster's key is {own}; a peer must be another cluster")


def _loopback(hosts: tuple[str, ...]) -> bool:
    return all(h in ("localhost", "127.0.0.1", "::1") for h in hosts)


def _validate_table_cfs(table_cfs: dict[str, list[str]] | str | None) -> dict[str, list[str]] | None:
    if table_cfs is None:
        return None
    try:
        if isinstance(table_cfs, str):
            return parse_table_cfs(table_cfs)
        return parse_table_cfs(format_table_cfs(table_cfs))
    except DecodeError as exc:
        raise ConfigError(f"invalid table-CFs: {exc}", hint="expected ns:table:cf1,cf2;table2") from None


# --- reading ---------------------------------------------------------------------------------------


def read_peer(zk: ZkClient, peer_id: str, znode_parent: str = "/hbase") -> Peer | None:
    lay = Layout(znode_parent)
    res = zk.get_many([lay.peer(peer_id), lay.peer_state(peer_id), lay.peer_table_cfs(peer_id)])
    if res[0] is None:
        return None
    try:
        cfg = decode_peer(res[0][0])
        state = decode_state(res[1][0]) if res[1] is not None else None
    except DecodeError as exc:
        raise DrtError(f"peer {peer_id}: cannot decode: {exc}", where=f"zookeeper {zk.quorum} {lay.peer(peer_id)}",
                       hint="the znode was not written by HBase or dr-toolkit; inspect it with zkCli") from None
    tcfs = cfg.table_cfs
    if res[2] is not None:
        text = res[2][0].decode(errors="replace").strip()
        tcfs = parse_table_cfs(text) if text else None
    return Peer(peer_id, cfg.cluster_key, state, tcfs, tcfs_znode=res[2] is not None,
                config=replace(cfg, table_cfs=tcfs))


def list_peers(zk: ZkClient, znode_parent: str = "/hbase") -> list[Peer]:
    lay = Layout(znode_parent)
    ids = zk.get_children_many([lay.peers])[0] or []
    out = []
    for pid in sorted(ids):
        p = read_peer(zk, pid, znode_parent)
        if p is not None:
            out.append(p)
    return out


# --- planning and applying -------------------------------------------------------------------------


def _state_text(raw_enabled: bool) -> str:
    return "ENABLED" if raw_enabled else "DISABLED"


def _plan_add(cur: Peer | None, peer_id: str, cluster_key: str, table_cfs: dict[str, list[str]] | None,
              enabled: bool | None, lay: Layout, version: str) -> list[tuple[ZnodeChange, bytes | None]]:
    want_state = True if enabled is None else enabled
    plan: list[tuple[ZnodeChange, bytes | None]] = []
    separate_tcfs = uses_protobuf(version) and not table_cfs_in_peer(version)
    peer_value = encode_peer(PeerConfig(cluster_key, table_cfs), version)
    tcfs_text = format_table_cfs(table_cfs) if table_cfs is not None else None
    if cur is None:
        plan.append((ZnodeChange("create", lay.peer(peer_id), None, cluster_key), peer_value))
        plan.append((ZnodeChange("create", lay.peer_state(peer_id), None, _state_text(want_state)),
                     encode_state(want_state, version)))
        if separate_tcfs and tcfs_text is not None:
            plan.append((ZnodeChange("create", lay.peer_table_cfs(peer_id), None, tcfs_text), tcfs_text.encode()))
        return plan
    if normalize_cluster_key(cur.cluster_key) != normalize_cluster_key(cluster_key):
        raise ConfigError(f"peer {peer_id} already exists with cluster key {cur.cluster_key}",
                          where=lay.peer(peer_id),
                          hint=f"remove it first (drt hbase peers remove {peer_id}) to point it at {cluster_key}")
    if cur.table_cfs != table_cfs:
        if separate_tcfs:  # HBase 0.98-1.x: a tableCFs znode; empty means all tables
            op = "set" if cur.tcfs_znode else "create"
            plan.append((ZnodeChange(op, lay.peer_table_cfs(peer_id), format_table_cfs(cur.table_cfs or {}) or None,
                                     tcfs_text), (tcfs_text or "").encode()))
        else:
            plan.append((ZnodeChange("set", lay.peer(peer_id),
                                     f"{cluster_key} table-cfs={format_table_cfs(cur.table_cfs or {}) or '*'}",
                                     f"{cluster_key} table-cfs={tcfs_text or '*'}"), peer_value))
    if cur.state is None:
        plan.append((ZnodeChange("create", lay.peer_state(peer_id), None, _state_text(want_state)),
                     encode_state(want_state, version)))
    elif enabled is not None and cur.state != _state_text(enabled):
        plan.append((ZnodeChange("set", lay.peer_state(peer_id), cur.state, _state_text(enabled)),
                     encode_state(enabled, version)))
    return plan


def _apply(zk: ZkClient, plan: list[tuple[ZnodeChange, bytes | None]]) -> None:
    tx = zk.transaction()
    for ch, value in plan:
        if ch.op == "create":
            tx.create(ch.path, value or b"")
        elif ch.op == "set":
            tx.set_data(ch.path, value or b"")
        else:
            tx.delete(ch.path)
    tx.commit()


def _rb(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _rb_table_cfs(table_cfs: dict[str, list[str]]) -> str:
    items = ", ".join(f"{_rb(t if ':' in t else 'default:' + t)} => [{', '.join(_rb(c) for c in cfs)}]"
                      for t, cfs in sorted(table_cfs.items()))
    return "{ " + items + " }"


def shell_script(peer_id: str, changes: list[ZnodeChange], lay: Layout, *, cluster_key: str | None = None,
                 table_cfs: dict[str, list[str]] | None = None) -> str:
    """The ``hbase shell`` (HBase 2.x) commands that make the planned znode changes the way HBase
    itself does (``add_peer``, ``set_peer_replicate_all`` / ``set_peer_tableCFs``,
    ``enable_peer``/``disable_peer``, ``remove_peer``)."""
    pid = _rb(peer_id)
    out: list[str] = []
    for ch in changes:
        if ch.path == lay.peer(peer_id) and ch.op == "create":
            assert cluster_key is not None
            extra = f", TABLE_CFS => {_rb_table_cfs(table_cfs)}" if table_cfs is not None else ""
            out.append(f"add_peer {pid}, CLUSTER_KEY => {_rb(cluster_key)}{extra}")
        elif ch.path == lay.peer(peer_id) and ch.op == "set":
            if table_cfs is None:
                out.append(f"set_peer_replicate_all {pid}, true")
            else:
                out.append(f"set_peer_replicate_all {pid}, false")
                out.append(f"set_peer_tableCFs {pid}, {_rb_table_cfs(table_cfs)}")
        elif ch.path == lay.peer(peer_id) and ch.op == "delete":
            out.append(f"remove_peer {pid}")
        elif ch.path == lay.peer_state(peer_id) and ch.op in ("create", "set"):
            if ch.after == "DISABLED":
                out.append(f"disable_peer {pid}")
            elif ch.op == "set":  # a new peer is created ENABLED
                out.append(f"enable_peer {pid}")
    return "".join(line + "\n" for line in out)


def _converge(zk: ZkClient, peer_id: str, action: str, cluster: PeerCluster, dry_run: bool,
              planner: Callable[[Peer | None], list[tuple[ZnodeChange, bytes | None]]],
              ledger: Ledger | None, *, added: PeerConfig | None = None) -> PeerResult:
    """Plan (``planner``) and make the changes of ``action`` on ``cluster``; ``added``: the peer an
    add writes (its cluster key and table-CFs, for the ``hbase shell`` script)."""
    znode_parent, hbase_version, shell = cluster.znode_parent, cluster.hbase_version, cluster.shell
    lay = Layout(znode_parent)
    before = read_peer(zk, peer_id, znode_parent)
    plan = planner(before)
    result = PeerResult(peer_id, action, dry_run, [c for c, _ in plan], before=before)
    via_shell = shell is not None and table_cfs_in_peer(hbase_version)
    if plan and table_cfs_in_peer(hbase_version):
        result.backend = "hbase-shell"
        script = shell_script(peer_id, result.changes, lay, cluster_key=added.cluster_key if added else None,
                              table_cfs=added.table_cfs if added else None)
        result.script = script
        if not via_shell:
            # HBase 2.x never sees a peer written into ZooKeeper (no replication source, no queue: an
            # empty set the gate once read as "drained"): the toolkit does not write one (issue 38 #1).
            raise ConfigError(f"peer {peer_id}: HBase {hbase_version} learns peers only through its master, and "
                              f"no `hbase` command is configured to ask it ({action} not done; dr-toolkit never "
                              "writes a peer into ZooKeeper for HBase 2.x)",
                              where=f"zookeeper {zk.quorum} {lay.peer(peer_id)}",
                              hint="set clusters.<name>.hbase_shell to the `hbase` command, or run in `hbase "
                                   f"shell`: {script.strip().replace(chr(10), '; ')}")
    if dry_run or not plan:
        result.after = before if not plan else None
        _audit(ledger, zk, result, "dry-run" if dry_run else "unchanged")
        return result
    if via_shell:
        assert shell is not None and result.script is not None
        run_shell(shell, result.script, kerberos=getattr(zk, "kerberos", None))
        result.after = read_peer(zk, peer_id, znode_parent)
        _audit(ledger, zk, result, "ok")
        return result
    if not dry_run:
        zk.ensure_path(lay.peers)
    applied: list[ZnodeChange] = []
    cur = before
    for _round in range(_MAX_ROUNDS):
        if not plan:
            break
        try:
            _apply(zk, plan)
            applied.extend(c for c, _ in plan)
            break
        except (ZkNodeExists, ZkNoNode, ZkBadVersion, ZkNotEmpty):
            # Someone (or our own commit whose answer was lost) changed the peer: re-plan.
            cur = read_peer(zk, peer_id, znode_parent)
            plan = planner(cur)
    else:
        raise DrtError(f"peer {peer_id}: znodes kept changing while {action} ran", where=lay.peer(peer_id),
                       hint="another tool is editing this peer; try again")
    result.changes = applied or result.changes
    result.after = read_peer(zk, peer_id, znode_parent)
    _audit(ledger, zk, result, "ok")
    return result


def _audit(ledger: Ledger | None, zk: ZkClient, res: PeerResult, status: str) -> None:
    if ledger is None:
        return
    ledger.audit(component="hbase", action=f"peers.{res.action}", dry_run=res.dry_run, status=status,
                 target=f"zookeeper {zk.quorum} peer {res.peer_id}",
                 before=res.before.to_json() if res.before else None,
                 after=res.after.to_json() if res.after else [asdict(c) for c in res.changes] or None,
                 message=f"{len(res.changes)} znode change(s)")


# --- public operations ---------------------------------------------------------------------------


def add_peer(zk: ZkClient, peer_id: str, cluster_key: str, *, table_cfs: dict[str, list[str]] | str | None = None,
             cluster: PeerCluster = PeerCluster(), enabled: bool | None = None,
             own_cluster_keys: list[str] | None = None, dry_run: bool = False,
             ledger: Ledger | None = None) -> PeerResult:
    """Add peer ``peer_id`` → ``cluster_key`` (or repair / update it to that state) on ``cluster``.

    ``cluster.shell`` (the ``hbase`` command): on HBase ≥ 2.0 the change is made through ``hbase shell``
    (HBase 2.x ignores peers written into ZooKeeper); the ZooKeeper state is still what is read.

    ``enabled=None`` creates it ENABLED and leaves an existing peer's state alone. The
    cluster's own key (from the ensemble ``zk`` is connected to, plus ``own_cluster_keys``) is
    refused. An existing peer with another cluster key is refused (remove it first).
    """
    validate_peer_id(peer_id)
    znode_parent, hbase_version = cluster.znode_parent, cluster.hbase_version
    try:
        validate_cluster_key(cluster_key.strip())
    except ConfigError as exc:
        raise ConfigError(f"peer {peer_id}: {exc.what}", hint=exc.hint) from None
    cluster_key = cluster_key.strip()
    tcfs = _validate_table_cfs(table_cfs)
    if tcfs is not None and not uses_protobuf(hbase_version):
        raise ConfigError(f"peer {peer_id}: table-CFs need HBase 0.96 or later (configured: {hbase_version})")
    _check_not_self(cluster_key, [own_cluster_key(zk, znode_parent), *(own_cluster_keys or [])])
    lay = Layout(znode_parent)
    return _converge(zk, peer_id, "add", cluster, dry_run,
                     lambda cur: _plan_add(cur, peer_id, cluster_key, tcfs, enabled, lay, hbase_version), ledger,
                     added=PeerConfig(cluster_key, tcfs))


def _require(cur: Peer | None, peer_id: str, zk: ZkClient, znode_parent: str) -> Peer:
    if cur is None:
        known = [p.peer_id for p in list_peers(zk, znode_parent)]
        raise ConfigError(f"unknown peer id {peer_id!r}", where=f"zookeeper {zk.quorum} {Layout(znode_parent).peers}",
                          hint=f"known peers: {', '.join(known) or 'none'}; add it with `drt hbase peers add`")
    return cur


def set_peer_state(zk: ZkClient, peer_id: str, enabled: bool, *, cluster: PeerCluster = PeerCluster(),
                   dry_run: bool = False, ledger: Ledger | None = None) -> PeerResult:
    validate_peer_id(peer_id)
    znode_parent, hbase_version = cluster.znode_parent, cluster.hbase_version
    lay = Layout(znode_parent)

    def plan(cur: Peer | None) -> list[tuple[ZnodeChange, bytes | None]]:
        cur = _require(cur, peer_id, zk, znode_parent)
        want = _state_text(enabled)
        if cur.state == want:
            return []
        op = "create" if cur.state is None else "set"
        return [(ZnodeChange(op, lay.peer_state(peer_id), cur.state, want), encode_state(enabled, hbase_version))]

    return _converge(zk, peer_id, "enable" if enabled else "disable", cluster, dry_run, plan, ledger)


def enable_peer(zk: ZkClient, peer_id: str, **kw: Any) -> PeerResult:
    return set_peer_state(zk, peer_id, True, **kw)


def disable_peer(zk: ZkClient, peer_id: str, **kw: Any) -> PeerResult:
    return set_peer_state(zk, peer_id, False, **kw)


def remove_peer(zk: ZkClient, peer_id: str, *, cluster: PeerCluster = PeerCluster(), missing_ok: bool = True,
                dry_run: bool = False, ledger: Ledger | None = None) -> PeerResult:
    """Delete the peer's znodes (children first). An absent peer is already removed (``missing_ok``)."""
    validate_peer_id(peer_id)
    znode_parent = cluster.znode_parent
    lay = Layout(znode_parent)

    def plan(cur: Peer | None) -> list[tuple[ZnodeChange, bytes | None]]:
        if cur is None:
            if not missing_ok:
                _require(cur, peer_id, zk, znode_parent)
            return []
        children = zk.get_children_many([lay.peer(peer_id)])[0] or []
        out: list[tuple[ZnodeChange, bytes | None]] = []
        for child in sorted(children):
            out.append((ZnodeChange("delete", f"{lay.peer(peer_id)}/{child}",
                                    cur.state if child == "peer-state" else child, None), None))
        out.append((ZnodeChange("delete", lay.peer(peer_id), cur.cluster_key, None), None))
        return out

    return _converge(zk, peer_id, "remove", cluster, dry_run, plan, ledger)


@dataclass(frozen=True)
class PeerSpec:
    """A desired peer, e.g. from the topology's HBase policies."""

    peer_id: str
    cluster_key: str
    table_cfs: dict[str, list[str]] | None = None
    enabled: bool = True


def converge_peers(zk: ZkClient, desired: list[PeerSpec], *, cluster: PeerCluster = PeerCluster(),
                   remove_others: bool = False, dry_run: bool = False, ledger: Ledger | None = None,
                   ) -> list[PeerResult]:
    """Bring the peers of ``cluster`` to exactly ``desired`` (``remove_others``: also delete peers not listed)."""
    results = [add_peer(zk, s.peer_id, s.cluster_key, table_cfs=s.table_cfs, cluster=cluster, enabled=s.enabled,
                        dry_run=dry_run, ledger=ledger)
               for s in desired]
    if remove_others:
        wanted = {s.peer_id for s in desired}
        for p in list_peers(zk, cluster.znode_parent):
            if p.peer_id not in wanted:
                results.append(remove_peer(zk, p.peer_id, cluster=cluster, dry_run=dry_run, ledger=ledger))
    return results


def peers_from_topology(topology: Topology) -> list[PeerSpec]:
    """The desired peers of the hot cluster: one per HBase policy, pointing at the cold cluster."""
    if not topology.policies.hbase:
        return []
    cold = topology.cold.zookeeper
    if cold is None:
        raise ConfigError("HBase policies need clusters.<cold>.zookeeper (the peer's cluster key)",
                          where=topology.source_file, hint="add the cold cluster's zookeeper quorum")
    return [PeerSpec(p.peer_id, cold.cluster_key, dict(p.table_cfs) or None) for p in topology.policies.hbase]
