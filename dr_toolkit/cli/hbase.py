"""`drt hbase peers|tables|status`: HBase replication set-up and status (capability 1.3).

Every command takes the cluster from the topology (``--cluster NAME``, default: the hot
cluster) or directly with ``--zk QUORUM --znode-parent /hbase``. Peer changes on HBase 2.x are
made through ``hbase shell`` (``clusters.<name>.hbase_shell``) and refused without it (exit 2:
HBase 2.x ignores peers written into ZooKeeper); on HBase 0.94-1.x (``hbase_version``) they are
written to ZooKeeper in HBase's own layout. ``--dry-run`` prints the changes and makes none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import EXIT_PROBLEM, ConfigError, ProblemFound, UsageError
from dr_toolkit.hbase import peers as hp
from dr_toolkit.hbase.peers import converge_peers, list_peers, peers_from_topology
from dr_toolkit.hbase.signals import checked_status
from dr_toolkit.hbase.status import parse_status_replication
from dr_toolkit.hbase.tables import sweep
from dr_toolkit.topology import Cluster, ZooKeeperEndpoint
from dr_toolkit.zk.client import zk_session

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import HBasePolicy

ClusterOpt = Annotated[str | None, typer.Option("--cluster", help="Cluster name in the topology [default: hot].")]
ZkOpt = Annotated[str | None, typer.Option("--zk", help="ZooKeeper quorum host:port,... (instead of the topology).")]
ParentOpt = Annotated[str | None, typer.Option("--znode-parent", help="HBase znode parent [default: /hbase].")]
VersionOpt = Annotated[str | None, typer.Option("--hbase-version", help="HBase version (encoding) [default: 2.5].")]
TimeoutOpt = Annotated[float | None, typer.Option("--timeout", help="ZooKeeper connect/call timeout, seconds.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show the znode changes; write nothing.")]
NsOpt = Annotated[list[str] | None, typer.Option("--namespace", help="Namespace to sweep (repeatable).")]
TblOpt = Annotated[list[str] | None, typer.Option("--table", help="Table (ns:t) to check (repeatable).")]
HbaseOpt = Annotated[str | None, typer.Option("--hbase", help="Path of the `hbase` command.")]
MethodOpt = Annotated[str, typer.Option("--method", help="enable_table_replication | alter")]
ScriptOpt = Annotated[str | None, typer.Option("--script-out", help="Also write the generated script here.")]


@dataclass
class Target:
    zk: ZooKeeperEndpoint | None
    cluster: Cluster | None
    ledger: Ledger | None
    policies: list[HBasePolicy]
    credentials: Credentials | None = None  # the topology endpoint's conn_id, resolved by the CLI's access

    @property
    def endpoint(self) -> ZooKeeperEndpoint:
        assert self.zk is not None
        return self.zk

    @property
    def parent(self) -> str:
        return self.endpoint.hbase_znode_parent

    @property
    def version(self) -> str:
        return self.zk.hbase_version if self.zk else "2.5"


def _target(ctx: typer.Context, cluster: str | None, zk: str | None, parent: str | None, version: str | None,
            timeout: float | None, *, need_ledger: bool = False, need_zk: bool = True) -> Target:
    st = state(ctx)
    topo = None
    try:
        topo = st.topology()
    except ConfigError:
        if not zk:
            raise
    c: Cluster | None = None
    ep: ZooKeeperEndpoint | None
    creds: Credentials | None = None
    if zk:
        if cluster:
            raise UsageError("--cluster and --zk do not go together", hint="name the cluster or give its quorum")
        try:
            ep = ZooKeeperEndpoint(quorum=zk, hbase_znode_parent=parent or "/hbase")
        except ValueError as exc:
            raise UsageError(f"--zk {zk!r} / --znode-parent: {exc.errors()[0]['msg']}" if hasattr(exc, "errors")
                             else str(exc)) from None
    else:
        assert topo is not None
        name = cluster or topo.hot_name
        if name not in topo.clusters:
            raise ConfigError(f"no cluster named {name!r}", where=topo.source_file,
                              hint=f"clusters: {', '.join(topo.clusters)}")
        c = topo.clusters[name]
        if c.zookeeper is None and need_zk:
            raise ConfigError(f"cluster {name!r} has no zookeeper section", where=topo.source_file,
                              hint="add clusters.<name>.zookeeper.quorum, or pass --zk")
        ep = c.zookeeper
        if need_zk:
            creds = st.access().endpoint(topo, name, "zookeeper")
        if parent and ep is not None:
            ep = ep.model_copy(update={"hbase_znode_parent": parent})
    upd: dict[str, Any] = {}
    if version:
        upd["hbase_version"] = version
    if timeout:
        upd["connect_timeout_s"] = timeout
        upd["call_timeout_s"] = timeout
    if upd and ep is not None:
        ep = ep.model_copy(update=upd)
    ledger = st.ledger() if (need_ledger and topo is not None) else None
    return Target(ep, c, ledger, list(topo.policies.hbase) if topo is not None else [], creds)


def _render_changes(data: dict[str, Any]) -> None:
    if data.get("warning"):
        err_console.print(f"warning: peer {data['peer_id']}: {data['warning']}", markup=False, highlight=False)
    if data.get("script"):
        out_console.print(f"peer [bold]{data['peer_id']}[/]: hbase shell:\n{data['script']}", highlight=False)
    verb = "would change" if data["dry_run"] else "changed"
    if not data["changes"]:
        out_console.print(f"peer [bold]{data['peer_id']}[/]: {data['action']}: nothing to do (already so)")
        return
    out_console.print(f"peer [bold]{data['peer_id']}[/]: {data['action']}: {verb} {len(data['changes'])} znode(s)")
    for ch in data["changes"]:
        out_console.print(f"  {ch['op']:6} {ch['path']}  {ch['before'] or '-'} → {ch['after'] or '-'}",
                          markup=False, highlight=False)


def _render_peers(data: list[dict[str, Any]]) -> None:
    t = Table(title="replication peers")
    for col in ("peer", "cluster key", "state", "table-cfs"):
        t.add_column(col)
    for p in data:
        tcfs = "all" if p["table_cfs"] is None else ";".join(
            f"{k}:{','.join(v)}" if v else k for k, v in p["table_cfs"].items())
        t.add_row(p["peer_id"], p["cluster_key"], p["state"] or "[red]missing[/]", tcfs)
    out_console.print(t)


def _render_status(data: dict[str, Any]) -> None:
    t = Table(title=f"replication queues under {data['znode_parent']} ({data['live_servers']} live servers)")
    for col in ("peer", "server", "queue", "WALs", "SizeOfLogQueue", "position", "dead", "claimed by", "drained"):
        t.add_column(col)
    for q in data["queues"]:
        t.add_row(q["peer"], q["server"], q["queue_id"], str(q["wals"]), str(q["size_of_log_queue"]),
                  str(q["position"]), "[red]yes[/]" if q["dead"] else "no", q["claimed_by"] or "-",
                  f"yes ({q['basis']})" if q["drained"] else "[yellow]no[/]")
    out_console.print(t)
    if data["caught_up"]:
        out_console.print("[green]caught up[/]")
    else:
        out_console.print("[yellow]not caught up[/]:")
        for r in data["reasons"]:
            out_console.print(f"  - {r}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    hb = typer.Typer(help="HBase replication: peers, table scopes, queue status.", no_args_is_help=True)
    peers_app = typer.Typer(help="Add, remove, enable, disable and list replication peers. On HBase 2.x changes go "
                                 "through `hbase shell` (clusters.<name>.hbase_shell) and are refused without it.",
                            no_args_is_help=True)
    tables_app = typer.Typer(help="Check and enable REPLICATION_SCOPE on protected tables.", no_args_is_help=True)

    def _peer_cmd(ctx: typer.Context, action: str, peer_id: str, cluster_key: str | None, table_cfs: str | None,
                  dry_run: bool, cluster: str | None, zk: str | None, parent: str | None, version: str | None,
                  timeout: float | None, disabled: bool = False) -> None:
        tg = _target(ctx, cluster, zk, parent, version, timeout, need_ledger=True)
        own = [tg.endpoint.cluster_key]
        with zk_session(tg.endpoint, credentials=tg.credentials) as z:
            kw: dict[str, Any] = {"cluster": hp.PeerCluster(tg.parent, tg.version,
                                                            tg.cluster.hbase_shell if tg.cluster else None),
                                  "dry_run": dry_run, "ledger": tg.ledger}
            if action == "add":
                assert cluster_key is not None
                res = hp.add_peer(z, peer_id, cluster_key, table_cfs=table_cfs, own_cluster_keys=own,
                                  enabled=False if disabled else None, **kw)
            elif action == "remove":
                res = hp.remove_peer(z, peer_id, **kw)
            else:
                res = hp.set_peer_state(z, peer_id, action == "enable", **kw)
        emit(ctx, res.to_json(), _render_changes)

    @peers_app.command("add")
    def add(ctx: typer.Context, peer_id: str, cluster_key: Annotated[str, typer.Argument(
                help="The peer's ZooKeeper: host1,host2:2181:/hbase")],
            table_cfs: Annotated[str | None, typer.Option("--table-cfs", help="ns:t1:cf1,cf2;t2 (default: all)")] = None,
            disabled: Annotated[bool, typer.Option("--disabled", help="Create it DISABLED.")] = False,
            dry_run: DryRunOpt = False, cluster: ClusterOpt = None, zk: ZkOpt = None, znode_parent: ParentOpt = None,
            hbase_version: VersionOpt = None, timeout: TimeoutOpt = None) -> None:
        """Add (or repair) replication peer PEER_ID → CLUSTER_KEY. Idempotent."""
        _peer_cmd(ctx, "add", peer_id, cluster_key, table_cfs, dry_run, cluster, zk, znode_parent, hbase_version,
                  timeout, disabled)

    for _action, _doc in (("remove", "Remove replication peer PEER_ID (nothing to do if absent)."),
                          ("enable", "Enable replication peer PEER_ID (peer-state ENABLED)."),
                          ("disable", "Disable replication peer PEER_ID (peer-state DISABLED).")):
        def _make(action: str) -> Any:
            def cmd(ctx: typer.Context, peer_id: str, dry_run: DryRunOpt = False, cluster: ClusterOpt = None,
                    zk: ZkOpt = None, znode_parent: ParentOpt = None, hbase_version: VersionOpt = None,
                    timeout: TimeoutOpt = None) -> None:
                _peer_cmd(ctx, action, peer_id, None, None, dry_run, cluster, zk, znode_parent, hbase_version,
                          timeout)
            return cmd
        peers_app.command(_action, help=_doc)(_make(_action))

    @peers_app.command("sync")
    def sync(ctx: typer.Context, remove_others: Annotated[bool, typer.Option(
                 "--remove-others", help="Also remove peers no HBase policy names.")] = False,
             dry_run: DryRunOpt = False, cluster: ClusterOpt = None, timeout: TimeoutOpt = None) -> None:
        """Converge the peers to the topology's HBase policies (one per policy, pointing at the cold cluster)."""
        tg = _target(ctx, cluster, None, None, None, timeout, need_ledger=True)
        desired = peers_from_topology(state(ctx).topology())
        with zk_session(tg.endpoint, credentials=tg.credentials) as z:
            results = converge_peers(z, desired, cluster=hp.PeerCluster(
                                         tg.parent, tg.version, tg.cluster.hbase_shell if tg.cluster else None),
                                     remove_others=remove_others, dry_run=dry_run, ledger=tg.ledger)
        def render(rows: list[dict[str, Any]]) -> None:
            if not rows:
                out_console.print("no HBase policies: no peers to sync")
            for r in rows:
                _render_changes(r)

        emit(ctx, [r.to_json() for r in results], render)

    @peers_app.command("list")
    def list_(ctx: typer.Context, cluster: ClusterOpt = None, zk: ZkOpt = None, znode_parent: ParentOpt = None,
              timeout: TimeoutOpt = None) -> None:
        """List replication peers with their cluster key, state and table-CFs."""
        tg = _target(ctx, cluster, zk, znode_parent, None, timeout)
        with zk_session(tg.endpoint, credentials=tg.credentials, read_only=True) as z:
            data = [p.to_json() for p in list_peers(z, tg.parent)]
        emit(ctx, data, _render_peers)

    def _tables(ctx: typer.Context, fix: bool, dry_run: bool, namespace: list[str] | None, table: list[str] | None,
                method: str, script_out: str | None, cluster: str | None, hbase: str | None) -> None:
        tg = _target(ctx, cluster, None, None, None, None, need_ledger=fix and not dry_run, need_zk=False)
        shell = hbase or (tg.cluster.hbase_shell if tg.cluster else None)
        if not shell:
            raise ConfigError("no hbase shell configured for this cluster",
                              hint="set clusters.<name>.hbase_shell in the topology, or pass --hbase PATH")
        ns = list(namespace or []) or sorted({n for p in tg.policies for n in p.namespaces})
        tbl = list(table or []) or sorted({t for p in tg.policies for t in p.tables})
        if not ns and not tbl:
            raise UsageError("no tables to check", hint="pass --namespace/--table or add hbase policies")
        res = sweep(shell, namespaces=ns, tables=tbl, fix=fix, dry_run=dry_run, method=method,
                    hbase_version=tg.version)
        if script_out and res.script:
            with open(script_out, "w") as f:
                f.write(res.script)
        if tg.ledger is not None:
            tg.ledger.audit(component="hbase", action="tables.enable", dry_run=dry_run,
                            status="ok" if res.fixed or not res.lacking else "failed", target=shell,
                            before=res.lacking, after={"fixed": res.fixed}, message=res.script)

        def render(d: dict[str, Any]) -> None:
            out_console.print(f"{d['tables_checked']} table(s) checked; {len(d['lacking'])} lack REPLICATION_SCOPE => 1")
            for x in d["lacking"]:
                out_console.print(f"  {x['table']}: {', '.join(x['families']) or '(no families found)'}",
                                  markup=False, highlight=False)
            if d["script"] and not d["fixed"]:
                out_console.print("script (hbase shell -n FILE):\n" + d["script"], markup=False, highlight=False)
            if d["fixed"]:
                out_console.print("[green]fixed[/]")

        emit(ctx, res.to_json(), render)
        if res.lacking and not res.fixed:
            raise typer.Exit(EXIT_PROBLEM)

    @tables_app.command("check")
    def check(ctx: typer.Context, namespace: NsOpt = None, table: TblOpt = None, cluster: ClusterOpt = None,
              hbase: HbaseOpt = None, method: MethodOpt = "enable_table_replication",
              script_out: ScriptOpt = None) -> None:
        """Report tables lacking REPLICATION_SCOPE => 1 (exit 1 if any) and print the fix script."""
        _tables(ctx, False, True, namespace, table, method, script_out, cluster, hbase)

    @tables_app.command("enable")
    def enable(ctx: typer.Context, namespace: NsOpt = None, table: TblOpt = None, cluster: ClusterOpt = None,
               hbase: HbaseOpt = None, method: MethodOpt = "enable_table_replication",
               script_out: ScriptOpt = None, dry_run: DryRunOpt = False) -> None:
        """Set REPLICATION_SCOPE => 1 on every family of the protected tables (via hbase shell -n)."""
        _tables(ctx, True, dry_run, namespace, table, method, script_out, cluster, hbase)

    @hb.command("status")
    def status(ctx: typer.Context,
               peer: Annotated[list[str] | None, typer.Option("--peer", help="Only this peer (repeatable).")] = None,
               settle: Annotated[float, typer.Option(
                   "--settle", help="Re-read after S seconds; the current WAL counts as drained only if "
                                    "its position did not move.")] = 0.0,
               cluster: ClusterOpt = None, zk: ZkOpt = None, znode_parent: ParentOpt = None,
               timeout: TimeoutOpt = None) -> None:
        """Replication queues per server and peer, and what the running HBase does (the peers its master
        holds, a replication source per live region server, writes without WAL); exit 0 when caught up,
        1 when not. No queue is never proof of drain: a peer HBase does not run has none."""
        tg = _target(ctx, cluster, zk, znode_parent, None, timeout)
        with zk_session(tg.endpoint, credentials=tg.credentials, read_only=True) as z:
            out = checked_status(z, tg.parent, peers=list(peer) if peer else None, settle_s=settle)
        emit(ctx, out, _render_status)
        if not out["caught_up"]:
            raise typer.Exit(EXIT_PROBLEM)

    @hb.command("parse-status")
    def parse_status(ctx: typer.Context, file: Annotated[str, typer.Argument(
            help="A file holding the output of the shell's status 'replication' ('-' for stdin)")]) -> None:
        """Parse `status 'replication'` output (AgeOfLastShippedOp, SizeOfLogQueue, Replication Lag)."""
        import sys

        if file == "-":
            text = sys.stdin.read()
        else:
            with open(file) as fh:
                text = fh.read()
        res = parse_status_replication(text)
        if not res.sources:
            raise ProblemFound("no SOURCE lines found", where=file, hint="pass the output of: status 'replication'")
        emit(ctx, res.to_json(), None)
        if not res.caught_up:
            err_console.print("not caught up: some source has SizeOfLogQueue > 0 or Replication Lag > 0")
            raise typer.Exit(EXIT_PROBLEM)

    hb.add_typer(peers_app, name="peers")
    hb.add_typer(tables_app, name="tables")
    app.add_typer(hb, name="hbase")
