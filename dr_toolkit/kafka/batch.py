"""Many groups at once (thousands): remap them from their newest checkpoints and apply them —
the entry points answering with JSON (the CLI's ``remap --all``, the failover runbook).

The same path as one group's remap (:func:`dr_toolkit.kafka.api.remap`):
:func:`dr_toolkit.kafka.offsets.remap_groups` shares every search among the groups and
:func:`dr_toolkit.kafka.offsets.apply_groups` writes each group all-or-nothing
(:func:`~dr_toolkit.kafka.offsets.apply_offsets`). Checkpoint
many groups with :func:`dr_toolkit.kafka.api.checkpoint` (``groups=[…]``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from dr_toolkit.kafka.mirror import WORKERS, Mirror
from dr_toolkit.kafka.offsets import apply_groups, audit_planned, remap_groups
from dr_toolkit.kafka.rows import Checkpoint
from dr_toolkit.zk.fencing import assert_offsets_apply_allowed

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology


def remap_many(topology: Topology, ledger: Ledger, groups: list[str], *, access: Access, workers: int = WORKERS,
               audit: bool = False, run_id: str | None = None, who: str | None = None) -> dict[str, Any]:
    """Remap (dry run) ``groups`` from their newest checkpoints, each distinct anchor once;
    ``audit``: one ``planned`` remap row per group in the ledger. Returns ``{groups: {group:
    [partition rows]}, missing, duration_s, distinct_searches, fetches, records_read, mm2…}``."""
    mirror = Mirror.of(topology, access)
    newest = ledger.latest_checkpoints(groups)
    missing = [g for g, r in newest.items() if not r]
    with mirror.client("cold") as cold:
        done = remap_groups(mirror, cold, {g: [Checkpoint.from_row(r) for r in rs]
                                         for g, rs in newest.items() if rs}, workers=workers)
    if audit:
        audit_planned(ledger, done, run_id=run_id, who=who)
    return {"groups": done.rows_json(), "missing": missing, "duration_s": done.duration_s,
            "distinct_searches": done.distinct_searches, "fetches": done.fetches, "records_read": done.records_read,
            **done.mm2}


def apply_many(topology: Topology, ledger: Ledger | None, remapped: dict[str, list[dict[str, Any]]], *,
               access: Access, force: bool = False, run_id: str | None = None, who: str | None = None,
               workers: int = WORKERS) -> dict[str, Any]:
    """Apply the remapped offsets of many groups (``remap_many``'s ``groups``), each
    all-or-nothing, the groups' requests overlapped; one audit row per group."""
    assert_offsets_apply_allowed(topology, access=access)  # never onto a promoted (or read-only) cold cluster
    t0 = time.monotonic()
    mirror = Mirror.of(topology, access)
    todo = {g: {(r["cold_topic"], int(r["partition"])): int(r["target_offset"]) for r in rows
                if r["target_offset"] is not None and r["method"] != "none"} for g, rows in remapped.items()}
    with mirror.client("cold") as cold:
        got = apply_groups(cold, todo, force=force, workers=workers)
    results: dict[str, dict[str, Any]] = {
        g: ({"applied": False, "error": r.message} if isinstance(r, Exception) else r.to_json()) for g, r in got.items()}
    if ledger is not None:
        for g, r in results.items():
            ledger.audit(component="kafka", action="apply_offsets", dry_run=False,
                         status="done" if r["applied"] else "failed", target=g, run_id=run_id, who=who,
                         before=r.get("before"), after=r.get("after"), message=r.get("error"))
    failed = sorted(g for g, r in results.items() if not r["applied"])
    return {"groups": results, "failed": failed, "duration_s": round(time.monotonic() - t0, 3)}
