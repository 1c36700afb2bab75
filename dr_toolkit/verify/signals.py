"""The verification signal: per verification policy, the last report in the ledger.

Safe time = the time the report's data was read (its ``started_at``: both sides were read after
it, so what the report found equal was on cold by then). Caught up = no BADROWS and the report
is at most ``failover.max_verify_age_s`` old. No report → no safe time → NO_GO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr_toolkit.failover.model import Signal, iso, unreadable

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology


def verify_signals(topology: Topology, ledger: Ledger, access: Access, now: float) -> list[Signal]:
    out: list[Signal] = []
    max_age = topology.failover.max_verify_age_s
    for p in topology.policies.verify:
        reports = ledger.verify_reports(name=p.name, limit=1)
        if not reports:
            out.append(unreadable("verify", p.name, "no verification report in the ledger"))
            continue
        r = reports[0]
        bad = int(r["badrows"] or 0)
        read_at = float(r["started_at"])
        age = max(0.0, now - read_at)
        detail = {"report_id": r["report_id"], "BADROWS": bad, "GOODROWS": int(r["goodrows"] or 0),
                  "age_s": round(age, 1), "report_path": r.get("report_path")}
        reasons = []
        if bad:
            reasons.append(f"last verification found {bad} bad rows")
        if age > max_age:
            reasons.append(f"last verification is {age:.0f}s old (max {max_age:g}s)")
        if bad:  # cold differed from hot when read: no time up to which cold provably holds hot's data
            out.append(Signal("verify", p.name, False, age, None,
                              f"report {r['report_id']} (data read from {iso(read_at)}) found differences",
                              detail, "; ".join(reasons)))
            continue
        out.append(Signal("verify", p.name, not reasons, age, read_at,
                          f"report {r['report_id']}: data read from {iso(read_at)}", detail,
                          "; ".join(reasons) or None))
    return out
