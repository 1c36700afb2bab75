"""Which way the estate is protected now: the ledger's ``direction`` events.

A re-protect changes the direction in one ZooKeeper transaction (:meth:`dr_toolkit.zk.fencing.
Fence.reprotect`: the standby's fence lifted, the epoch raised, the fence's own record of it in
``<dr_root>/direction``) and then records it in the ledger (audit component ``direction``: one
event per change, never pruned — the history across round trips). Every edge that loads the
topology (the CLI's ``State.topology``, the Airflow hook) asks :func:`directed` for the topology of
the latest recorded direction, so the gate, ``drt status``, replication, the remap and the DR page
describe the direction that runs. Reading it needs no ZooKeeper: a command whose ZooKeeper is down
still runs (and the fence checks refuse what they must). Between the transaction and its ledger
event (a killed re-protect, resumed to completion) the edges still see the old direction, where the
fence refuses every copy into the active cluster and the gate says NO_GO (nothing protects it).
"""

from __future__ import annotations

import time
from typing import Any

from dr_toolkit.errors import ConfigError
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import Topology

COMPONENT = "direction"


def recorded(ledger: Ledger) -> dict[str, Any] | None:
    """The latest direction a re-protect recorded (``{"hot", "cold", "epoch", "run_id"}``), or None
    (never re-protected: the topology's own roles)."""
    last: dict[str, Any] | None = None
    for e in ledger.audit_events(component=COMPONENT, limit=100_000):
        if e.get("status") == "done" and not e.get("dry_run") and isinstance(e.get("after_state"), dict):
            last = e["after_state"]
    return last


def record(ledger: Ledger, direction: dict[str, Any], *, run_id: str, who: str | None = None) -> None:
    """Record a change of direction (the re-protect's ``lift_standby`` step, after the ZooKeeper
    transaction)."""
    ledger.audit(component=COMPONENT, action="reprotect", dry_run=False, status="done", run_id=run_id,
                 target=str(direction["cold"]), after={"at": time.time(), **direction},
                 message=f"protected {direction['hot']} -> {direction['cold']}", who=who)


def oriented(topology: Topology, direction: dict[str, Any] | None) -> Topology:
    """``topology`` as the direction record says (None: as configured). A record naming clusters
    the topology does not have is a ConfigError (a renamed cluster, another estate's ledger)."""
    if not direction:
        return topology
    hot, cold = direction.get("hot"), direction.get("cold")
    if {hot, cold} != set(topology.clusters):
        raise ConfigError(f"the ledger's protection direction names {hot!r} -> {cold!r}, which are not this "
                          f"topology's clusters ({', '.join(topology.clusters)})", where=topology.source_file,
                          hint="a cluster was renamed in the topology, or the ledger belongs to another estate: "
                               "name the clusters as the ledger does")
    if hot == topology.hot_name:
        return topology
    return topology.reversed()


def directed(topology: Topology, ledger: Ledger) -> Topology:
    """The topology of the direction the ledger last recorded (as configured when none)."""
    return oriented(topology, recorded(ledger))
