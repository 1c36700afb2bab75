"""INTERIM (failover branch): the HDFS signal reader, until the copy engineer's version lands.

At merge take the copy engineer's ``dr_toolkit/copy/signals.py``; the gate only needs the name
``hdfs_signals`` with the :data:`~dr_toolkit.failover.model.SignalReader` signature.

Per policy target: files and bytes a run would copy now (a comparison of both sides done by
this check) and the last completed run. Safe time: the time of this comparison when nothing is
pending (the check compared both sides itself, listing after ``now``), else the listing time of
the last completed run whose manifest cold holds (the ledger's ``hdfs`` watermark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr_toolkit.errors import DrtError
from dr_toolkit.failover.model import Signal, iso, unreadable

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology


def hdfs_signals(topology: Topology, ledger: Ledger, access: Access, now: float) -> list[Signal]:
    from dr_toolkit.copy import api

    out: list[Signal] = []
    marks = {w["name"]: w for w in ledger.watermarks("hdfs")} if topology.policies.hdfs else {}
    for policy in topology.policies.hdfs:
        try:
            rows = api.pending(topology, policy.name, ledger)
        except Exception as exc:  # noqa: BLE001 - any failure is a NO_GO with its reason
            why = exc.message if isinstance(exc, DrtError) else f"{type(exc).__name__}: {exc}"
            out.extend(unreadable("hdfs", f"{policy.name}:{t}", why) for t in policy.targets)
            continue
        for row in rows:
            name = f"{policy.name}:{row['target']}"
            files = int(row.get("files_pending") or 0)
            nbytes = int(row.get("bytes_pending") or 0)
            wm = row.get("watermark")
            status = row.get("last_run_status")
            mark = (marks.get(name) or {}).get("detail") or {}
            detail = {"files_pending": files, "bytes_pending": nbytes, "last_run_status": status,
                      "source_time": wm, "manifest_id": mark.get("manifest_id"),
                      "source_snapshot": mark.get("source_snapshot"),
                      "snapshot_age_s": None if wm is None else round(max(0.0, now - float(wm)), 1)}
            wmf = float(wm) if wm is not None else None
            if files == 0 and nbytes == 0 and status not in (None, "failed", "running"):
                out.append(Signal("hdfs", name, True, 0.0, now,
                                  f"comparison of both sides done by this check at {iso(now)}: nothing pending",
                                  detail))
                continue
            reasons = []
            if files or nbytes:
                reasons.append(f"{files} files ({nbytes} bytes) pending")
            if status is None:
                reasons.append("never replicated")
            elif status in ("failed", "running"):
                reasons.append(f"last run {status}")
            basis = (f"listing time of the last completed run (manifest {mark.get('manifest_id')})"
                     if wmf is not None else "no completed run: cold holds no listing of hot")
            out.append(Signal("hdfs", name, False, None if wmf is None else max(0.0, now - wmf), wmf, basis,
                              detail, "; ".join(reasons) or "not caught up"))
    return out
