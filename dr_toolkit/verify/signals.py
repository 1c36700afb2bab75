"""The verification signal: per verification policy, the last report in the ledger.

Safe time = the time the report's data was read (its ``started_at``: both sides were read after
it, so what the report found equal was on cold by then) — or, for a report pinned to a time T
(``--as-of``, an HBase policy's run: cells stamped before T; an HDFS tree read through the
replication snapshot taken at T; ``data_time`` = T), T when that is earlier: GOOD then means "cold
equals hot as of T", whatever was written after T. Caught up = no BADROWS and the report
is at most ``failover.max_verify_age_s`` old. No report → no safe time → NO_GO.

Only a report *of the policy* counts: the same source, target, key, formats, tables, ignored
columns, compare options and timestamp column, over the full range (no start time) — what the
policy's own run asks (:func:`dr_toolkit.verify.request.policy_request`, its ``fingerprint()``). A report merely *named* like
the policy (an ad-hoc `drt verify --name P --start-time <an hour ago>`) is ignored and said so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dr_toolkit.signal import Signal, iso, unreadable
from dr_toolkit.verify.request import policy_request

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology, VerifyPolicy


def verify_signals(topology: Topology, ledger: Ledger, access: Access, now: float) -> list[Signal]:
    out: list[Signal] = []
    max_age = topology.failover.max_verify_age_s
    for p in topology.policies.verify:
        named = ledger.verify_reports(name=p.name, limit=50)
        reports = [r for r in named if _of_policy(p, r)]
        if not reports:
            why = (f"no verification report of the policy in the ledger ({len(named)} report(s) named {p.name!r} "
                   f"ask something else: {_mismatch(p, named[0])})") if named else "no verification report in the ledger"
            out.append(unreadable("verify", p.name, why))
            continue
        r = reports[0]
        bad = int(r["badrows"] or 0)
        read_at = float(r["started_at"])
        pinned = (r.get("detail") or {}).get("data_time")
        as_of = min(read_at, float(pinned)) if pinned is not None else read_at
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
        snap = ((r.get("detail") or {}).get("window") or {}).get("pinned") or {}
        through = f"hot's snapshot {snap['snapshot']} of {snap['root']}, " if snap.get("snapshot") else ""
        basis = (f"report {r['report_id']}: data read from {iso(read_at)}" if as_of == read_at else
                 f"report {r['report_id']}: cold equals hot as of {iso(as_of)} ({through}read from {iso(read_at)})")
        out.append(Signal("verify", p.name, not reasons, age, as_of, basis, detail, "; ".join(reasons) or None))
    return out


def _expected(p: VerifyPolicy) -> dict[str, Any]:
    """What the policy's own run asks, as its reports store it."""
    return policy_request(p).fingerprint()


def _mismatch(p: VerifyPolicy, report: Mapping[str, Any]) -> str | None:
    """The first field in which ``report`` asked something other than the policy; None if none."""
    got = (report.get("detail") or {}).get("request") or {}
    if not got:
        return "a report without its request (written before reports recorded one)"
    want = _expected(p)
    for k, v in want.items():
        if got.get(k) != v:
            return "a start time (not the full range)" if k == "full_range" else f"another {k.replace('_', ' ')}"
    return None


def _of_policy(p: VerifyPolicy, report: Mapping[str, Any]) -> bool:
    return _mismatch(p, report) is None
