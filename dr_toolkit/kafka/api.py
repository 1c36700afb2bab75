"""Kafka consumer offsets across the mirror (docs/design.md §1.2): checkpoint, lag, remap one group —
the entry points that answer with the JSON documents of docs/contracts.md (the CLI's ``--json``, the
Airflow operators' XCom, the runbook's audit). Many groups at once: :mod:`dr_toolkit.kafka.batch`.

Each builds the :class:`~dr_toolkit.kafka.mirror.Mirror` once (from the topology, or from the
bootstrap addresses alone) with the caller's ``access``, runs the typed core on the mirror
(:func:`~dr_toolkit.kafka.checkpoint.checkpoint_groups`, :func:`~dr_toolkit.kafka.lag.mirror_lag`,
:func:`~dr_toolkit.kafka.offsets.remap_groups`) and turns its values into JSON.

**Never skip**: see :mod:`dr_toolkit.kafka.offsets`. :func:`remap` with ``apply`` writes all
partitions of the group or none (rolling back on a refusal), with an audit row naming ``who``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import UnreachableError
from dr_toolkit.kafka.checkpoint import checkpoint_groups
from dr_toolkit.kafka.lag import mirror_lag
from dr_toolkit.kafka.mirror import WORKERS, Mirror, cold_topic, skew_ms
from dr_toolkit.kafka.offsets import apply_offsets, audit_planned, remap_groups
from dr_toolkit.kafka.rows import Checkpoint, offsets_of
from dr_toolkit.zk.fencing import assert_offsets_apply_allowed

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

__all__ = ["checkpoint", "cold_topic", "lag", "protected_groups", "remap", "skew_ms"]


def protected_groups(topology: Topology, *, access: Access, ledger: Ledger | None = None,
                     ) -> tuple[list[str], list[str]]:
    """The groups the policies protect now, and notes (see :meth:`Mirror.protected_groups`)."""
    return Mirror.of(topology, access).protected_groups(ledger=ledger)


def checkpoint(topology: Topology | None, ledger: Ledger | None, *, access: Access, groups: list[str] | None = None,
               source_bootstrap: str | None = None, workers: int = WORKERS) -> dict[str, Any]:
    """Checkpoint the protected groups (or ``groups``) on the hot cluster and store it in
    ``ledger`` when given. Returns ``{checkpoint_id, groups, partitions, taken_at, duration_s, …}``."""
    mirror = Mirror.of(topology, access, source_bootstrap=source_bootstrap)
    return checkpoint_groups(mirror, ledger, groups, workers=workers).to_json()


def lag(topology: Topology | None, *, access: Access, topics: list[str] | None = None,
        source_bootstrap: str | None = None, target_bootstrap: str | None = None) -> dict[str, Any]:
    """Parity and mirror lag per partition, by offsets (see :func:`dr_toolkit.kafka.lag.mirror_lag`)."""
    mirror = Mirror.of(topology, access, source_bootstrap=source_bootstrap, target_bootstrap=target_bootstrap)
    return mirror_lag(mirror, topics).to_json()


def _newest(mirror: Mirror, ledger: Ledger | None, group: str, *, fresh: bool, store: bool,
            ) -> tuple[str | None, list[Checkpoint]]:
    """The group's newest checkpoint in the ledger, or a fresh one (``fresh``, or none stored)
    taken from the hot cluster and stored when ``store``."""
    if ledger is not None and not fresh:
        rows = [Checkpoint.from_row(r) for r in ledger.latest_checkpoint(group)]
        if rows:
            return rows[0].checkpoint_id, rows
    try:
        ck = checkpoint_groups(mirror, ledger if store else None, [group])
    except UnreachableError as exc:
        raise UnreachableError(f"no checkpoint of group {group!r} in the ledger and the source cluster "
                               f"is unreachable: {exc.what}", where=exc.where,
                               hint="run `drt kafka checkpoint` while the hot cluster is up") from None
    return ck.checkpoint_id, [replace(r, checkpoint_id=ck.checkpoint_id) for r in ck.partitions]


def remap(topology: Topology | None, ledger: Ledger | None, group: str, *, access: Access, apply: bool = False,
          force: bool = False, run_id: str | None = None, who: str | None = None,
          source_bootstrap: str | None = None, target_bootstrap: str | None = None) -> dict[str, Any]:
    """Remap ``group`` onto the cold cluster; with ``apply`` write it there.

    The checkpoint is the newest in the ledger, or a fresh one taken from the source cluster
    when ``source_bootstrap`` is given or the ledger has none (stored only when applying: a dry
    run writes no checkpoint rows, only its ``planned`` audit row)."""
    if apply and topology is not None:  # never onto a promoted (or read-only) cold cluster
        assert_offsets_apply_allowed(topology, access=access)
    mirror = Mirror.of(topology, access, source_bootstrap=source_bootstrap, target_bootstrap=target_bootstrap)
    checkpoint_id, rows = _newest(mirror, ledger, group, fresh=bool(source_bootstrap), store=apply)
    with mirror.client("cold") as cold:
        done = remap_groups(mirror, cold, {group: rows})
        parts = done.groups[group].rows
        result: dict[str, Any] = {"group": group, "checkpoint_id": checkpoint_id, "applied": False,
                                  "target": cold.bootstrap, "partitions": [r.to_json() for r in parts], **done.mm2,
                                  "may_reread": sum(r.position.may_reread for r in parts)}
        if not apply:
            if ledger is not None:
                audit_planned(ledger, done, run_id=run_id, who=who, before={group: cold.committed(group)})
            return result
        result.update(apply_offsets(cold, group, offsets_of(parts), force=force, ledger=ledger,
                                    run_id=run_id, who=who).to_json())
        return result
