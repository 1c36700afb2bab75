"""HBase after a failover: what the old hot cluster took after the recovery point, kept aside, and
replication the other way (issue 40).

``topology`` is the direction that was failed over: its ``hot`` is the old active cluster (fenced),
its ``cold`` the active one. The protected tables are each HBase policy's ``tables`` and the tables
of its ``namespaces`` (listed from the table descriptors under the policy's ``hbase_rootdir`` on the
old hot cluster's filesystem; aside tables are never protected tables).

**Cells.** Every read and write is HBase's client API, run through the cluster's own ``hbase``
command (``clusters.<name>.hbase_shell``) as ``HBASE_CLASSPATH=<jar> hbase
org.drtoolkit.failback.HBaseCellTool …`` — a small class shipped with the library
(``java/HBaseCellTool.java``, compiled on first use against ``hbase classpath`` and cached in
``~/.cache/dr-toolkit``). Clusters are named by their cluster key, as CopyTable's ``--peer.adr``.

**Divergence** (:func:`divergence`, read only): per protected table, the cells of the old hot with a
timestamp at or after the recovery point that the active cluster does not hold with the same row,
family, qualifier, timestamp, type and value (the visible versions, every one; and the delete markers
of that range, read raw). One :class:`Divergence` per table with such cells: the counts, the rows and
cells listed up to :data:`LIST_BOUND` each and the totals. No recovery point: one item per table
saying the base is unknown (never "no divergence"); its cells are then every cell the active lacks,
whatever its timestamp.

**Set aside** (:func:`set_aside`): the divergent cells are copied — timestamps kept — into the aside
table ``<ns>:<table>__drt_divergence_<run id>`` on the old hot cluster (same families, every version
kept, deleted cells kept, ``REPLICATION_SCOPE => 0``), read back and checked there, and only then
deleted from the protected table, each exact version (a version delete: a later write of the active
cluster with an earlier timestamp is not shadowed). Rounds repeat until no divergent cell is visible
(deleting the newest version can uncover an older one, which goes aside the same way). A kill at any
point and a second call completes it: every cell is in the aside table before its delete is sent.
A delete marker the old hot took after the recovery point cannot be removed by a client: it is
copied aside and reported (``markers_left``). The aside tables are found again by name (every run's).

**Re-protect** (:func:`reprotect`): refuses while the old hot still holds a divergent cell (set it
aside first). Then on the active cluster, through its ``hbase`` shell: ``REPLICATION_SCOPE => 1`` on
the families of every protected table that lack it, and the reverse peer (the policy's ``peer_id``,
pointing at the old hot) — :mod:`dr_toolkit.hbase.peers` on the reversed topology. A new peer ships
only WAL edits appended after it is added, so once the running master holds it and every live region
server runs a source for it, the gap is copied: every cell of the active cluster with a timestamp in
``[recovery point, peer added + clock skew + 1 s)`` (raw: delete markers too) onto the old hot, as
``CopyTable --starttime --endtime --peer.adr`` does; and the rows whose versions were set aside are
copied whole from the active cluster (the old hot's later version may have pushed out, at a flush, the
older version both shared — with ``VERSIONS => 1`` it does). No recovery point: a full copy (from time 0),
and the result says so. The evidence is :func:`dr_toolkit.hbase.signals.checked_status` on the
reversed topology.

**Limits.** A cell the old hot wrote at the very row, column and timestamp of a cell of the active
cluster but with another value is divergence and goes aside, but the version delete that removes it
also hides the active's cell of that timestamp (HBase masks every Put of a deleted version until a major
compaction; tables with ``NEW_VERSION_BEHAVIOR`` excepted): the report lists it. A delete marker the old
hot took after the recovery point stays (``markers_left``). A write the active cluster took with a
client-set timestamp before the recovery point, before the reverse peer was added, is not in the copied
range. The divergent cells of one table are held in memory (the report lists at most
:data:`LIST_BOUND` rows and cells, with the totals).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, DrtError, ProblemFound, UnreachableError
from dr_toolkit.errors import why as _why
from dr_toolkit.failback.divergence import Divergence
from dr_toolkit.hbase import peers as hp
from dr_toolkit.hbase.signals import checked_status, hot_fs
from dr_toolkit.hbase.tabledesc import list_tables
from dr_toolkit.hbase.tables import TableScope, enable_script, run_shell
from dr_toolkit.javac import build_jar, cache_dir
from dr_toolkit.zk.client import zk_session
from dr_toolkit.zk.fencing import open_fence

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import HBasePolicy, Topology
    from dr_toolkit.zk.client import ZkClient

TOOL_CLASS = "org.drtoolkit.failback.HBaseCellTool"
TOOL_SOURCE = Path(__file__).parent / "java" / "HBaseCellTool.java"
ASIDE = "__drt_divergence_"
LIST_BOUND = 200
MAX_TS = 2**63 - 1
ROUNDS = 20
MARKERS = ("Delete", "DeleteColumn", "DeleteFamily", "DeleteFamilyVersion")


# --- cells ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    row: bytes
    family: bytes
    qualifier: bytes
    ts: int
    type: str
    value: bytes

    @classmethod
    def parse(cls, fields: list[str]) -> Cell:
        return cls(bytes.fromhex(fields[0]), bytes.fromhex(fields[1]), bytes.fromhex(fields[2]), int(fields[3]),
                   fields[4], bytes.fromhex(fields[5]) if len(fields) > 5 else b"")

    def line(self) -> str:
        return "\t".join([self.row.hex(), self.family.hex(), self.qualifier.hex(), str(self.ts), self.type,
                          self.value.hex()])

    @property
    def is_marker(self) -> bool:
        return self.type in MARKERS

    def to_json(self) -> dict[str, Any]:
        return {"row": binary(self.row), "column": f"{binary(self.family)}:{binary(self.qualifier)}", "ts": self.ts,
                "type": self.type, "value_bytes": len(self.value)}


def binary(b: bytes) -> str:
    """HBase's ``Bytes.toStringBinary``: printable ASCII as is, other bytes as ``\\xNN``."""
    return "".join(chr(c) if 32 <= c < 127 and c != 92 else f"\\x{c:02X}" for c in b)


# --- the `hbase` command and the cell tool -------------------------------------------------------


def _shell_of(topology: Topology, first: str) -> str:
    """The ``hbase`` command of cluster ``first``, else of the other cluster (the cell tool names
    its clusters by cluster key, so any HBase 2.x install of the estate runs it)."""
    other = next(n for n in topology.clusters if n != first)
    for name in (first, other):
        shell = topology.clusters[name].hbase_shell
        if shell:
            return shell
    raise ConfigError("no `hbase` command is configured: the HBase failback reads and writes cells through it",
                      where=topology.source_file, hint=f"set clusters.{first}.hbase_shell to the `hbase` executable")


def _key(topology: Topology, name: str) -> str:
    ep = topology.clusters[name].zookeeper
    if ep is None:
        raise ConfigError(f"cluster {name} has no zookeeper section: its HBase cannot be reached",
                          where=topology.source_file, hint=f"set clusters.{name}.zookeeper (quorum, hbase_znode_parent)")
    return ep.cluster_key


def tool_jar(shell: str) -> str:
    """The cell tool compiled against ``hbase classpath`` (once per source and jar set)."""
    try:
        r = subprocess.run([shell, "classpath"], capture_output=True, text=True, timeout=300, check=False)
    except OSError as exc:
        raise ConfigError(f"cannot run `{shell} classpath`: {exc.strerror or exc}",
                          hint="set clusters.<name>.hbase_shell to the `hbase` executable") from None
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise ConfigError(f"`{shell} classpath` failed (exit {r.returncode})", hint="check the HBase installation")
    cp = lines[-1].strip()
    h = hashlib.sha256(TOOL_SOURCE.read_bytes())
    h.update("|".join(sorted(os.path.basename(p) for p in cp.split(os.pathsep))).encode())
    dest = cache_dir() / f"drt-hbase-cells-{h.hexdigest()[:12]}.jar"
    if dest.is_file():
        return str(dest)
    build_jar(dest, TOOL_SOURCE, cp, what="the HBase cell tool", release="8",
              hint="clusters.<name>.hbase_shell must be an HBase 2.x `hbase` command")
    return str(dest)


@dataclass
class ToolOut:
    cells: list[Cell]
    families: dict[str, int]
    result: list[str]


def run_tool(shell: str, *args: str, cells: list[Cell] | None = None, timeout_s: float = 1800.0) -> ToolOut:
    """``hbase org.drtoolkit.failback.HBaseCellTool ARGS`` (cells on stdin); ProblemFound naming the
    command when it fails."""
    jar = tool_jar(shell)
    prev = os.environ.get("HBASE_CLASSPATH")
    env = {**os.environ, "HBASE_CLASSPATH": jar + (os.pathsep + prev if prev else "")}
    cmd = [shell, TOOL_CLASS, *args]
    stdin = "".join(c.line() + "\n" for c in cells or [])
    try:
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise UnreachableError(f"the HBase cell tool did not finish within {timeout_s:g}s", where=" ".join(cmd[:4]),
                               hint="check that both HBase clusters (masters, region servers) are up") from None
    out = ToolOut([], {}, [])
    err = None
    for ln in p.stdout.splitlines():
        kind, _, rest = ln.partition("\t")
        if kind == "C":
            out.cells.append(Cell.parse(rest.split("\t")))
        elif kind == "F":
            fam, _, scope = rest.partition("\t")
            out.families[fam] = int(scope or 0)
        elif kind == "R":
            out.result = rest.split("\t")
        elif kind == "E":
            err = rest
    if p.returncode != 0 or err is not None or not out.result:
        why = err or (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise ProblemFound(f"HBase cell tool `{args[0]}` failed: {why[:400]}", where=" ".join(cmd[:4] + cmd[4:6]),
                           hint="check that both HBase clusters are up and the table exists on both")
    return out


# --- what is protected -----------------------------------------------------------------------------


def full_name(table: str) -> str:
    return table if ":" in table else f"default:{table}"


def is_aside(table: str) -> bool:
    return ASIDE in table


def aside_name(table: str, run_id: str) -> str:
    """``<ns>:<table>__drt_divergence_<run id>`` (the run id's characters HBase does not allow become ``_``)."""
    return f"{full_name(table)}{ASIDE}{re.sub(r'[^A-Za-z0-9_.-]', '_', run_id)}"


def protected_tables(topology: Topology, access: Access, policy: HBasePolicy) -> list[str]:
    """The policy's tables and the tables of its namespaces on the old hot cluster (aside tables never)."""
    out = [full_name(t) for t in policy.tables]
    if policy.namespaces:
        fs, root = hot_fs(topology, access, policy.hbase_rootdir)
        for ns in policy.namespaces:
            out.extend(f"{ns}:{t}" for t in list_tables(fs, root, ns) or [])
    return sorted({t for t in out if not is_aside(t)})


def _start_ms(recovery_point: float | None) -> int:
    return 0 if recovery_point is None else max(0, math.floor(recovery_point * 1000))


def divergent_cells(topology: Topology, table: str, start_ms: int) -> tuple[list[Cell], int]:
    """(the cells of the old hot's ``table`` from ``start_ms`` the active cluster lacks, cells read)."""
    shell = _shell_of(topology, topology.hot_name)
    out = run_tool(shell, "diff", _key(topology, topology.hot_name), _key(topology, topology.cold_name), table,
                   str(start_ms), str(MAX_TS))
    return out.cells, int(out.result[0])


def _coord(c: Cell) -> tuple[bytes, bytes, bytes, int]:
    return c.row, c.family, c.qualifier, c.ts


def set_aside_versions(topology: Topology, access: Access, policy: HBasePolicy, table: str
                       ) -> set[tuple[bytes, bytes, bytes, int]]:
    """The versions of ``table`` kept in its aside tables (every run's): their version deletes on the
    old hot are set_aside's own, not divergence."""
    shell = _shell_of(topology, topology.hot_name)
    out: set[tuple[bytes, bytes, bytes, int]] = set()
    for aside in aside_tables(topology, access, policy, table):
        out |= {_coord(c) for c in run_tool(shell, "scan", _key(topology, topology.hot_name), aside, "0",
                                            str(MAX_TS)).cells if c.type == "Put"}
    return out


def _detail(table: str, cells: list[Cell], read: int, start_ms: int, recovery_point: float | None) -> dict[str, Any]:
    rows = sorted({c.row for c in cells})
    types: dict[str, int] = {}
    for c in cells:
        types[c.type] = types.get(c.type, 0) + 1
    return {"table": table, "recovery_point": recovery_point, "start_ms": start_ms,
            "base": "unknown" if recovery_point is None else "recovery point",
            "cells": len(cells), "rows": len(rows), "types": types, "cells_read": read,
            "rows_listed": [binary(r) for r in rows[:LIST_BOUND]],
            "cells_listed": [c.to_json() for c in cells[:LIST_BOUND]],
            "listed_all": len(cells) <= LIST_BOUND and len(rows) <= LIST_BOUND}


def divergence(topology: Topology, ledger: Ledger, access: Access, *, recovery_point: float | None
               ) -> list[Divergence]:
    """READ ONLY: per protected table, the cells the old hot holds from the recovery point on that the
    active cluster lacks (one item per table that has any). ``recovery_point`` None: one item per table
    saying the base is unknown, counting every cell the active lacks."""
    del ledger
    items: list[Divergence] = []
    start = _start_ms(recovery_point)
    for policy in topology.policies.hbase:
        for table in protected_tables(topology, access, policy):
            cells, read = divergent_cells(topology, table, start)
            if any(c.type == "Delete" for c in cells):  # the version deletes of an earlier set_aside are ours
                ours = set_aside_versions(topology, access, policy, table)
                cells = [c for c in cells if not (c.type == "Delete" and _coord(c) in ours)]
            if not cells and recovery_point is not None:
                continue
            detail = _detail(table, cells, read, start, recovery_point)
            if recovery_point is None:
                detail["message"] = ("no recovery point is known: the base both clusters share is unknown, so every "
                                     f"cell of {table} on the old hot that the active cluster lacks ({len(cells)}) "
                                     "is counted as divergent")
            items.append(Divergence("hbase", policy.name, table, detail))
    return items


# --- set aside -----------------------------------------------------------------------------------


def _set_aside_table(topology: Topology, table: str, aside: str, start_ms: int) -> dict[str, Any]:
    shell = _shell_of(topology, topology.hot_name)
    hot = _key(topology, topology.hot_name)
    run_tool(shell, "aside", hot, table, aside)
    kept: set[Cell] = set(run_tool(shell, "scan", hot, aside, "0", str(MAX_TS)).cells)
    moved = 0
    for _round in range(ROUNDS):
        cells, _read = divergent_cells(topology, table, start_ms)
        # a version delete this function sent (its Put is in the aside table) is ours, not divergence
        ours = {_coord(c) for c in kept if c.type == "Put"}
        cells = [c for c in cells if not (c.type == "Delete" and _coord(c) in ours)]
        new = [c for c in cells if c not in kept]
        if new:
            run_tool(shell, "put", hot, aside, cells=new)
            kept = set(run_tool(shell, "scan", hot, aside, "0", str(MAX_TS)).cells)
            missing = [c for c in new if c not in kept]
            if missing:
                raise ProblemFound(f"{len(missing)} cell(s) of {table} are not in the aside table {aside} after they "
                                   "were written there: nothing was deleted", where=f"hbase://{topology.hot_name}/{aside}",
                                   hint="check the old hot cluster's region servers and run again")
        puts = [c for c in cells if not c.is_marker]
        if not puts:
            markers = [c for c in cells if c.is_marker]
            return {"aside": aside, "cells_kept": len([c for c in kept if not c.is_marker]),
                    "cells_moved_now": moved, "markers_left": len(markers),
                    "markers_listed": [c.to_json() for c in markers[:LIST_BOUND]]}
        run_tool(shell, "delete", hot, table, cells=puts)
        moved += len(puts)
    raise ProblemFound(f"{table}: divergent cells kept appearing after {ROUNDS} rounds of setting them aside",
                       where=f"hbase://{topology.hot_name}/{table}",
                       hint="is something still writing to the old hot cluster? it must be fenced")


def set_aside(topology: Topology, ledger: Ledger, access: Access, items: list[Divergence], *, run_id: str
              ) -> list[Divergence]:
    """Keep every HBase item's cells on the old hot in ``<ns>:<table>__drt_divergence_<run id>`` (copied,
    checked there, then their exact versions deleted from the protected table). Idempotent and
    resumable after a kill at any point. Returns the items with ``kept_at`` = ``hbase://<old hot>/<aside>``."""
    del access
    out: list[Divergence] = []
    for item in items:
        if item.capability != "hbase":
            out.append(item)
            continue
        table = str(item.detail.get("table") or item.where)
        aside = aside_name(table, run_id)
        done = _set_aside_table(topology, table, aside, int(item.detail.get("start_ms") or 0))
        ledger.audit(component="failback", action="hbase.set_aside", dry_run=False, status="ok", run_id=run_id,
                     target=f"hbase://{topology.hot_name}/{table}", after=done,
                     message=f"{done['cells_kept']} cell(s) kept in {aside}")
        out.append(Divergence(item.capability, item.policy, item.where, {**item.detail, "set_aside": done},
                              kept_at=f"hbase://{topology.hot_name}/{aside}"))
    return out


# --- re-protect ----------------------------------------------------------------------------------


@contextmanager
def _zk(topology: Topology, access: Access, name: str) -> Iterator[ZkClient]:
    ep = topology.clusters[name].zookeeper
    if ep is None:
        raise ConfigError(f"cluster {name} has no zookeeper section", where=topology.source_file)
    with zk_session(ep, credentials=access.endpoint(topology, name, "zookeeper")) as zk:
        yield zk


def recovery_of(topology: Topology, access: Access) -> tuple[str | None, float | None, bool]:
    """(the active cluster the fence names, its recovery point, whether a recovery record exists)."""
    with open_fence(topology, access=access) as fence:
        active = fence.active() or {}
    rec = active.get("recovery") or {}
    rp = rec.get("recovery_point_epoch")
    return active.get("cluster"), float(rp) if rp is not None else None, bool(rec)


def running(evidence: dict[str, Any], peer_id: str) -> list[str]:
    """What the live evidence lacks for ``peer_id`` to run: the master holding it, a source for it on
    every live region server (empty: it runs)."""
    live = evidence.get("live") or {}
    out: list[str] = []
    if live.get("master_error") or live.get("peers") is None:
        out.append(f"the running master could not be asked ({live.get('master_error')})")
    elif peer_id not in live["peers"]:
        out.append(f"the running master {live.get('master')} does not hold peer {peer_id}")
    servers = live.get("region_servers") or []
    if not servers:
        out.append("no live region server")
    for srv in servers:
        if peer_id not in (live.get("sources") or {}).get(srv, []):
            out.append(f"region server {srv} runs no replication source for peer {peer_id}")
    return out


def _evidence(zk: ZkClient, parent: str, peer_id: str, timeout_s: float) -> tuple[dict[str, Any], list[str]]:
    deadline = time.monotonic() + timeout_s
    while True:
        ev = checked_status(zk, parent, peers=[peer_id])
        lacking = running(ev, peer_id)
        if not lacking or time.monotonic() > deadline:
            return ev, lacking
        time.sleep(1.0)


def _scopes(shell: str, key: str, tables: list[str]) -> list[TableScope]:
    out = []
    for t in tables:
        fams = run_tool(shell, "families", key, t)
        if fams.result[:1] == ["missing"]:
            raise ConfigError(f"protected table {t} does not exist on the active cluster",
                              hint="create it there (same families) before re-protecting")
        out.append(TableScope(t, fams.families))
    return out


def aside_tables(topology: Topology, access: Access, policy: HBasePolicy, table: str) -> list[str]:
    """The aside tables of ``table`` on the old hot cluster (every run's)."""
    ns, _, q = full_name(table).partition(":")
    fs, root = hot_fs(topology, access, policy.hbase_rootdir)
    return [f"{ns}:{t}" for t in list_tables(fs, root, ns) or [] if t.startswith(f"{q}{ASIDE}")]


def _restore_rows(topology: Topology, rev: Topology, access: Access, policy: HBasePolicy, tables: list[str],
                  say: Callable[[str], None]) -> dict[str, int]:
    """The rows whose versions were set aside, copied whole from the active cluster onto the old hot:
    a version the old hot wrote after the recovery point may have pushed out (a flush or a compaction
    keeps VERSIONS of them) the older version both clusters shared, which no copy from the recovery
    point on brings back."""
    out: dict[str, int] = {}
    shell = _shell_of(rev, rev.hot_name)
    for t in tables:
        cells: list[Cell] = []
        for aside in aside_tables(topology, access, policy, t):
            cells += [c for c in run_tool(shell, "scan", _key(topology, topology.hot_name), aside, "0",
                                          str(MAX_TS)).cells if not c.is_marker]
        if cells:
            res = run_tool(shell, "rows", _key(rev, rev.hot_name), t, _key(rev, rev.cold_name), t, cells=cells)
            out[t] = int(res.result[1])
            say(f"hbase: {out[t]} row(s) of {t} whose versions were set aside copied whole from {rev.hot_name}")
    return out


def reprotect(topology: Topology, ledger: Ledger, access: Access, *, run_id: str, dry_run: bool = False,
              progress: Callable[[str], None] | None = None, evidence_timeout_s: float = 120.0) -> dict[str, Any]:
    """The old hot brought up to date by the delta since the recovery point and the reverse peer
    running on the active cluster (see the module's text). JSON-able result."""
    say = progress or (lambda _m: None)
    if not topology.policies.hbase:
        return {"status": "done", "message": "no HBase policy: nothing to re-protect", "policies": []}
    try:
        return _reprotect(topology, ledger, access, run_id=run_id, dry_run=dry_run, say=say,
                          evidence_timeout_s=evidence_timeout_s)
    except DrtError as exc:
        ledger.audit(component="failback", action="hbase.reprotect", dry_run=dry_run, status="failed", run_id=run_id,
                     message=_why(exc))
        return {"status": "failed", "message": _why(exc)}


def _reprotect(topology: Topology, ledger: Ledger, access: Access, *, run_id: str, dry_run: bool,
               say: Callable[[str], None], evidence_timeout_s: float) -> dict[str, Any]:
    active, rp, recorded = recovery_of(topology, access)
    if active != topology.cold_name:
        raise ConfigError(f"the fence names {active or 'no cluster'} as active, not {topology.cold_name}: HBase "
                          "re-protect runs after a failover to it", hint="run the failover first")
    rev = topology.reversed()
    new_hot, new_cold = rev.hot_name, rev.cold_name
    start = _start_ms(rp)
    mode = "delta" if rp is not None else "full"
    why_full = None if rp is not None else (
        "full copy because the recovery point is unknown" + ("" if recorded else " (no recovery record on the fence)"))
    shell_active = rev.hot.hbase_shell
    ep = rev.hot.zookeeper
    if ep is None or rev.cold.zookeeper is None:
        raise ConfigError("both clusters need a zookeeper section for HBase re-protect", where=topology.source_file)
    result: dict[str, Any] = {"mode": mode, "recovery_point": rp, "start_ms": start, "policies": []}
    if why_full:
        result["full_copy_because"] = why_full
    for policy in topology.policies.hbase:
        tables = protected_tables(topology, access, policy)
        left = {}
        for t in tables:
            cells, _read = divergent_cells(topology, t, start)
            puts = [c for c in cells if not c.is_marker]
            if puts:
                left[t] = len(puts)
        if left:
            raise ProblemFound(f"the old hot {topology.hot_name} still holds cells written after the recovery point "
                               f"that the active cluster lacks ({', '.join(f'{t}: {n}' for t, n in left.items())}): "
                               "copying onto it would bury them", hint="set them aside first (acknowledge the "
                               "divergence report; the runbook sets them aside), then re-protect")
        scopes = _scopes(_shell_of(rev, new_hot), _key(rev, new_hot), tables)
        lacking = [s for s in scopes if s.lacking]
        scope_script = enable_script(lacking, method="alter", hbase_version=ep.hbase_version) if lacking else None
        pr: dict[str, Any] = {"policy": policy.name, "peer_id": policy.peer_id, "tables": tables,
                              "scopes_set": {s.table: s.lacking for s in lacking}, "scope_script": scope_script}
        result["policies"].append(pr)
        cluster = hp.PeerCluster(ep.hbase_znode_parent, ep.hbase_version, shell_active)
        with _zk(rev, access, new_hot) as zk:
            if scope_script and not dry_run:
                if not shell_active:
                    raise ConfigError(f"cluster {new_hot} has no hbase_shell: table scopes cannot be set on it",
                                      hint=f"set clusters.{new_hot}.hbase_shell, or run: {scope_script}")
                say(f"hbase: REPLICATION_SCOPE => 1 on {', '.join(s.table for s in lacking)} ({new_hot})")
                run_shell(shell_active, scope_script)
            peer = hp.add_peer(zk, policy.peer_id, _key(rev, new_cold),
                               table_cfs=dict(policy.table_cfs) or None, cluster=cluster, enabled=True,
                               dry_run=dry_run, ledger=ledger)
            pr["peer"] = peer.to_json()
            if dry_run:
                pr["copy"] = {t: {"from": new_hot, "to": new_cold, "start_ms": start, "end_ms": "peer added"}
                              for t in tables}
                continue
            say(f"hbase: peer {policy.peer_id} {new_hot} -> {new_cold} ({'added' if peer.changed else 'present'})")
            ev, lacking_live = _evidence(zk, ep.hbase_znode_parent, policy.peer_id, evidence_timeout_s)
            if lacking_live:
                pr["evidence"] = ev
                raise ProblemFound(f"peer {policy.peer_id} on {new_hot} does not run: {'; '.join(lacking_live)}",
                                   hint="check the active cluster's master and region servers, then run again")
            added_at = time.time()
            end = int((added_at + topology.failover.clock_skew_s + 1.0) * 1000)
            copied = {}
            for t in tables:
                say(f"hbase: copying {t} [{start}, {end}) ms {new_hot} -> {new_cold}")
                out = run_tool(_shell_of(rev, new_hot), "copy", _key(rev, new_hot), t, _key(rev, new_cold), t,
                               str(start), str(end))
                copied[t] = int(out.result[0])
            pr["copy"] = {"start_ms": start, "end_ms": end, "cells": copied}
            pr["rows_restored"] = _restore_rows(topology, rev, access, policy, tables, say)
            pr["evidence"] = checked_status(zk, ep.hbase_znode_parent, peers=[policy.peer_id])
            still = running(pr["evidence"], policy.peer_id)
            if still:
                raise ProblemFound(f"peer {policy.peer_id} on {new_hot} stopped running: {'; '.join(still)}")
    status = "planned" if dry_run else "done"
    n_cells = sum(sum((p.get("copy") or {}).get("cells", {}).values()) for p in result["policies"]
                  if isinstance((p.get("copy") or {}).get("cells"), dict))
    peers = ", ".join(p["peer_id"] for p in result["policies"])
    msg = (f"would add peer(s) {peers} on {new_hot} -> {new_cold} and copy the cells since "
           f"{'the recovery point' if rp is not None else 'time 0 (' + str(why_full) + ')'}" if dry_run else
           f"peer(s) {peers} run on {new_hot} -> {new_cold}; {n_cells} cell(s) copied ({mode}"
           f"{'' if rp is not None else ': ' + str(why_full)})")
    result.update({"status": status, "message": msg})
    ledger.audit(component="failback", action="hbase.reprotect", dry_run=dry_run, status=status, run_id=run_id,
                 target=f"hbase {new_hot} -> {new_cold}", after={k: v for k, v in result.items() if k != "policies"},
                 message=msg)
    return result


__all__ = ["aside_name", "divergence", "reprotect", "set_aside"]
