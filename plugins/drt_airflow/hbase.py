"""Airflow side of capability 1.3: peers and table-scope operators and a "replication caught up" sensor.

The ZooKeeper ensemble comes from the topology (``clusters.<name>.zookeeper``, default: the
hot cluster); digest credentials from the Airflow connection named by its ``conn_id`` (or
the operator's ``zk_conn_id``), passed to the library as a Credentials value — never logged
or returned to XCom. Peers point the hot cluster at the cold one: one peer per HBase policy
(``policies.hbase[].peer_id``, table-CFs from ``table_cfs``), cluster key = the cold
cluster's ``zookeeper.cluster_key``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, BaseSensorOperator

from dr_toolkit.errors import ConfigError, UnreachableError

log = logging.getLogger(__name__)


def _endpoint(cluster: str | None, zk_conn_id: str | None) -> tuple[Any, Any, Any, Any]:
    from drt_airflow.hooks import DrtHook

    hook = DrtHook()
    topo = hook.topology()
    name = cluster or topo.hot_name
    c = topo.clusters.get(name)
    if c is None or c.zookeeper is None:
        raise ConfigError(f"cluster {name!r} has no zookeeper section", where=topo.source_file)
    access = hook.access()
    # the operator's zk_conn_id names another connection for this endpoint; else the topology's
    creds = (access.get(zk_conn_id, what=f"the operator's zk_conn_id for cluster {name!r}") if zk_conn_id
             else access.endpoint(topo, name, "zookeeper"))
    return topo, c, creds, access


def _selected(topo: Any, policies: Sequence[str] | None) -> list[Any]:
    """The topology's HBase policies, or those named in ``policies`` (each must exist)."""
    if not policies:
        return list(topo.policies.hbase)
    known = {p.name: p for p in topo.policies.hbase}
    missing = sorted(set(policies) - set(known))
    if missing:
        raise ConfigError(f"no HBase policy named {', '.join(missing)}", where=topo.source_file,
                          hint=f"HBase policies: {', '.join(known) or 'none'}")
    return [known[n] for n in policies]


def run_peers(*, cluster: str | None = None, zk_conn_id: str | None = None, dry_run: bool = False,
              policies: Sequence[str] | None = None) -> dict[str, Any]:
    """Converge the peers of the topology's HBase policies (or of ``policies``); summary fit for XCom."""
    from dr_toolkit.hbase.peers import PeerCluster, converge_peers, peers_from_topology
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.zk.client import zk_session

    topo, c, creds, access = _endpoint(cluster, zk_conn_id)
    ep = c.zookeeper
    with zk_session(ep, credentials=creds) as z:
        wanted = {p.peer_id for p in _selected(topo, policies)}
        desired = [spec for spec in peers_from_topology(topo) if spec.peer_id in wanted]
        results = converge_peers(z, desired, cluster=PeerCluster(ep.hbase_znode_parent, ep.hbase_version, c.hbase_shell),
                                 dry_run=dry_run, ledger=open_ledger(topo, access))
    for r in results:
        if r.warning:
            log.warning("peer %s: %s", r.peer_id, r.warning)
    out: dict[str, Any] = {"dry_run": dry_run, "peers": [{"peer_id": r.peer_id, "changed": r.changed,
                                          "changes": [f"{ch.op} {ch.path}" for ch in r.changes]} for r in results]}
    log.info("peers: %s", ", ".join(f"{p['peer_id']}({len(p['changes'])} change(s))" for p in out["peers"]) or "none")
    return out


def run_table_sweep(*, cluster: str | None = None, fix: bool = False, dry_run: bool = False,
                    policies: Sequence[str] | None = None) -> dict[str, Any]:
    """Report (and with ``fix``, repair) protected tables lacking REPLICATION_SCOPE => 1."""
    from dr_toolkit.hbase.tables import sweep
    from drt_airflow.hooks import DrtHook

    hook = DrtHook()
    topo = hook.topology()
    c = topo.clusters[cluster or topo.hot_name]
    chosen = _selected(topo, policies)
    ns = sorted({n for p in chosen for n in p.namespaces})
    tables = sorted({t for p in chosen for t in p.tables})
    if not c.hbase_shell:
        log.warning("table sweep skipped: clusters.%s.hbase_shell is not set (no hbase shell here)",
                    cluster or topo.hot_name)
        return {"skipped": "no hbase_shell configured", "namespaces": ns, "tables": tables}
    version = c.zookeeper.hbase_version if c.zookeeper else "2.5"
    res = sweep(c.hbase_shell, namespaces=ns, tables=tables, fix=fix, dry_run=dry_run, hbase_version=version)
    if fix and not dry_run and res.lacking:
        hook.ledger(topo).audit(component="hbase", action="tables.enable", dry_run=False,
                                           status="ok" if res.fixed else "failed", target=c.hbase_shell,
                                           before=res.lacking, after={"fixed": res.fixed}, message=res.script)
    return res.to_json()


def run_status(*, peers: Sequence[str] | None = None, cluster: str | None = None,
               zk_conn_id: str | None = None) -> dict[str, Any]:
    from dr_toolkit.hbase.signals import checked_status
    from dr_toolkit.zk.client import zk_session

    _topo, c, creds, _access = _endpoint(cluster, zk_conn_id)
    with zk_session(c.zookeeper, credentials=creds, read_only=True) as z:
        out = checked_status(z, c.zookeeper.hbase_znode_parent, peers=list(peers) if peers else None)
    log.info("hbase replication caught_up=%s over %d queue(s); %s", out["caught_up"], len(out["queues"]),
             "; ".join(out["reasons"][:5]) or "no reasons")
    return out


class HBasePeersOperator(BaseOperator):
    """Add/repair the replication peers of the topology's HBase policies (or of ``policies``; idempotent)."""

    def __init__(self, *, cluster: str | None = None, zk_conn_id: str | None = None, dry_run: bool = False,
                 policies: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster, self.zk_conn_id, self.plan_only = cluster, zk_conn_id, dry_run
        self.policies = list(policies) if policies else None

    def execute(self, context: Any) -> dict[str, Any]:
        return run_peers(cluster=self.cluster, zk_conn_id=self.zk_conn_id, dry_run=self.plan_only,
                         policies=self.policies)


class HBaseTableSweepOperator(BaseOperator):
    """Find protected tables lacking REPLICATION_SCOPE => 1; with ``fix``, set it via hbase shell -n."""

    def __init__(self, *, cluster: str | None = None, fix: bool = False, dry_run: bool = False,
                 policies: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster, self.fix, self.plan_only = cluster, fix, dry_run
        self.policies = list(policies) if policies else None

    def execute(self, context: Any) -> dict[str, Any]:
        return run_table_sweep(cluster=self.cluster, fix=self.fix, dry_run=self.plan_only, policies=self.policies)


def status_summary(out: dict[str, Any]) -> dict[str, Any]:
    """The XCom-sized part of :func:`run_status`'s result."""
    return {"caught_up": out["caught_up"], "reasons": out["reasons"][:20], "queues": len(out["queues"]),
            "peers": out["peers"]}


class HBaseStatusOperator(BaseOperator):
    """Report the replication queues of the selected peers (report only; the failover gate decides)."""

    template_fields = ("peers",)

    def __init__(self, *, peers: Sequence[str] | None = None, cluster: str | None = None,
                 zk_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.peers = list(peers) if peers else None
        self.cluster, self.zk_conn_id = cluster, zk_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        return status_summary(run_status(peers=self.peers, cluster=self.cluster, zk_conn_id=self.zk_conn_id))


class HBaseReplicationCaughtUpSensor(BaseSensorOperator):
    """Waits until every queue of the selected peers is drained and the running HBase ships them
    (dr_toolkit.hbase.signals.checked_status: the peers its master holds, a source per live region
    server, no write without WAL). An unreachable ZooKeeper is "not yet", never "caught up"."""

    template_fields = ("peers",)

    def __init__(self, *, peers: Sequence[str] | None = None, cluster: str | None = None,
                 zk_conn_id: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("mode", "reschedule")  # a long wait frees its worker slot between pokes
        super().__init__(**kwargs)
        self.peers = list(peers) if peers else None
        self.cluster, self.zk_conn_id = cluster, zk_conn_id

    def poke(self, context: Any) -> bool:
        try:
            out = run_status(peers=self.peers, cluster=self.cluster, zk_conn_id=self.zk_conn_id)
        except UnreachableError as exc:
            log.warning("hbase replication status unknown: %s", exc.message)
            return False
        return bool(out["caught_up"])
