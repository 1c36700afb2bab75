"""Which way the estate is protected now: one place, ZooKeeper's ``<dr_root>/direction`` znode.

A re-protect writes it (:meth:`dr_toolkit.zk.fencing.Fence.reprotect`, in the transaction that
lifts the standby's fence); every edge that loads the topology (the CLI's ``State.topology``, the
Airflow hook) asks :func:`directed` for the topology of the current direction, so the gate, ``drt
status``, replication, the remap and the DR page describe the direction that runs. The ledger keeps
the history (the reprotect runs' audit events); the znode is what is current.
"""

from __future__ import annotations

from typing import Any

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import Topology
from dr_toolkit.zk.fencing import Fence, open_fence


def _has_zookeeper(topology: Topology) -> bool:
    return any(c.zookeeper is not None for c in topology.clusters.values())


def oriented(topology: Topology, direction: dict[str, Any] | None) -> Topology:
    """``topology`` as the direction record says (None: as configured). A record naming clusters
    the topology does not have is a ConfigError (another estate's ZooKeeper)."""
    if not direction:
        return topology
    hot, cold = direction.get("hot"), direction.get("cold")
    if {hot, cold} != set(topology.clusters):
        raise ConfigError(f"the protection direction in ZooKeeper names {hot!r} -> {cold!r}, which are not this "
                          f"topology's clusters ({', '.join(topology.clusters)})", where=topology.source_file,
                          hint="check failover.dr_root / the fencing ZooKeeper: it belongs to another estate")
    if hot == topology.hot_name:
        return topology
    return topology.reversed()


def current(fence: Fence, topology: Topology) -> Topology:
    """The topology of the direction the fence's ZooKeeper records."""
    return oriented(topology, fence.direction())


def directed(topology: Topology, access: Access) -> Topology:
    """The topology of the current direction (asks the fencing ZooKeeper; a topology without any
    ZooKeeper has no fencing and no direction: as configured). UnreachableError when it is down:
    nothing may run in a direction it cannot know."""
    if not _has_zookeeper(topology):
        return topology
    with open_fence(topology, access=access) as fence:
        return current(fence, topology)
