"""The caught-up gate: GO / NO_GO with every reason, and one recovery point.

**Recovery point = safe time** (YugabyteDB xCluster): the latest time T such that every write the
hot cluster accepted before T is on the cold cluster. Each signal states its own ``safe_time``
and the ``basis`` for it; the recovery point is the minimum over all signals, and it is stated
even when the verdict is NO_GO (it is then the point a failover *now* would recover to).

The verdict is GO only when every signal is caught up, states a safe time, and

- after the hot cluster was fenced: every safe time is at or past the fencing time plus the
  declared clock-skew bound (``failover.clock_skew_s``) — nothing the hot cluster accepted
  before it stopped taking writes is missing;
- before fencing: every signal's lag (``now - safe_time``) is within ``failover.max_lag_s``
  (verification uses its own bound, ``failover.max_verify_age_s``, applied by its reader).

**Clocks.** Every time the gate compares is epoch seconds on the clock of a host running drt:
``now`` and the HBase/verification/HDFS safe times are taken on the checking host, the fencing
time on the host that fenced. ``failover.clock_skew_s`` bounds the skew between those hosts
(0 when one host runs both, as the runbook does). Times from other clocks (Kafka CreateTime,
set by producers) are converted by their reader with the declared producer-skew bound, and the
basis says so.

A signal that cannot be read is a NO_GO. The fencing state that cannot be read is a NO_GO.
Only an unreachable ledger or a missing/expired Kerberos ticket raises (exit 3): without them there is
nothing to decide from.

**Recorded checks.** ``check(..., record="cli")`` also writes the check to the ledger's
``gate_checks`` table (verdict, recovery point, RPO = ``checked_at - recovery_point``, each
signal's lag and safe time, where it ran and who ran it): the DR view's RPO history and the
``dr_rpo_watch`` alert read it. Callers that promise to write nothing (the runbook's dry run)
never pass ``record``. A check that cannot be recorded is still a check: the error is kept in
``GateResult.record_error`` and the verdict stands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, ProblemFound
from dr_toolkit.failover.signals import default_timeout, in_background, read_signals
from dr_toolkit.secrets import redact
from dr_toolkit.signal import COMPONENTS, Signal, iso
from dr_toolkit.zk.fencing import fencing_endpoint, open_fence

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

GO = "GO"
NO_GO = "NO_GO"

__all__ = ["GO", "NO_GO", "GateResult", "check", "decide", "iso", "read_fence", "record_check", "recovery_point",
           "slo_breach"]


@dataclass
class GateResult:
    verdict: str
    recovery_point: float | None
    signals: list[Signal]
    reasons: list[str]
    fenced_at: float | None = None
    fence: dict[str, Any] = field(default_factory=dict)
    checked_at: float = field(default_factory=time.time)
    clock_skew_s: float = 0.0
    limiting: str | None = None  # the signal whose safe time is the recovery point
    recorded: str | None = None  # the gate_checks row id, when recorded
    record_error: str | None = None  # why recording failed (the verdict stands)

    @property
    def go(self) -> bool:
        return self.verdict == GO

    @property
    def rpo_s(self) -> float | None:
        """The recovery point's age at the check (seconds); None when no recovery point is stated."""
        return None if self.recovery_point is None else max(0.0, self.checked_at - self.recovery_point)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "recovery_point": iso(self.recovery_point),
            "recovery_point_epoch": self.recovery_point,
            "recovery_point_from": self.limiting,
            "rpo_s": None if self.rpo_s is None else round(self.rpo_s, 3),
            "signals": [s.to_json() for s in self.signals],
            "reasons": self.reasons,
            "fenced_at": iso(self.fenced_at),
            "fenced_at_epoch": self.fenced_at,
            "fence": self.fence,
            "checked_at": iso(self.checked_at),
            "clock": {"reference": "the clock of the host running drt (epoch seconds, UTC)",
                      "skew_bound_s": self.clock_skew_s},
            "gate_check_id": self.recorded,
            **({"record_error": self.record_error} if self.record_error else {}),
        }


def read_fence(topology: Topology, access: Access) -> tuple[dict[str, Any], str | None]:
    """The fencing snapshot ({} when no ZooKeeper is configured) and an error, if unreadable."""
    if not (topology.cold.zookeeper or topology.hot.zookeeper):
        return {}, None
    try:
        with open_fence(topology, access=access) as fence:
            return fence.snapshot(), None
    except Exception as exc:  # noqa: BLE001 - unreadable fencing state is a NO_GO
        msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return {}, redact(f"fencing state unreadable: {msg}")


def recovery_point(signals: list[Signal]) -> tuple[float | None, str | None]:
    """The minimum safe time over ``signals`` and the signal it comes from; (None, name) when one
    signal states none (no recovery point can be stated), (None, None) without signals."""
    best: tuple[float, str] | None = None
    for s in signals:
        label = f"{s.component} {s.name}"
        if s.safe_time is None:
            return None, label
        if best is None or s.safe_time < best[0]:
            best = (s.safe_time, label)
    return (best[0], best[1]) if best else (None, None)


def decide(topology: Topology, signals: list[Signal], *, fenced_at: float | None,
           fence_error: str | None = None, now: float | None = None) -> GateResult:
    """Apply the gate's rules to signals already read (pure: no I/O)."""
    now = time.time() if now is None else now
    skew = topology.failover.clock_skew_s
    reasons: list[str] = []
    if fence_error:
        reasons.append(fence_error)
    if not signals:
        reasons.append("no signals: the topology protects nothing (no policies)")
    max_lag = topology.failover.max_lag_s
    # an HBase policy's own max_lag_s bounds its peer's signal (the tightest when peers are shared)
    peer_lag: dict[str, float] = {}
    for p in topology.policies.hbase:
        if p.max_lag_s is not None:
            peer_lag[p.peer_id] = min(p.max_lag_s, peer_lag.get(p.peer_id, p.max_lag_s))
    for s in signals:
        label = f"{s.component} {s.name}"
        if not s.caught_up:
            reasons.append(f"{label}: {s.reason or 'not caught up'}")
            continue
        if s.safe_time is None:
            reasons.append(f"{label}: no safe time can be stated ({s.reason or s.basis or 'no basis'})")
            continue
        if fenced_at is not None:
            if s.safe_time < fenced_at + skew:
                reasons.append(f"{label}: cold holds data only up to {iso(s.safe_time)} ({s.basis}), "
                               f"before the fence at {iso(fenced_at)}"
                               + (f" + {skew:g}s clock skew" if skew else ""))
        elif s.component != "verify":
            lag = max(0.0, now - s.safe_time)
            own = peer_lag.get(s.name) if s.component == "hbase" else None
            bound, setting = (own, "policies.hbase[].max_lag_s") if own is not None else (max_lag, "failover.max_lag_s")
            if lag > bound:
                reasons.append(f"{label}: lag {lag:.0f}s exceeds {setting} {bound:g}s")
    rp, limiting = recovery_point(signals)
    return GateResult(GO if not reasons else NO_GO, rp, signals, reasons, fenced_at, checked_at=now,
                      clock_skew_s=skew, limiting=limiting)


def unprotected(topology: Topology, fence: dict[str, Any]) -> str | None:
    """A NO_GO reason when another cluster than this topology's hot one is the active cluster
    (ZooKeeper's active-cluster znode): after a failover nothing protects the new active cluster
    until a re-protect, and this direction's signals describe a copy nobody writes to."""
    active = fence.get("active") or {}
    name = active.get("cluster")
    if not name or name == topology.hot_name:
        return None
    return (f"{name} is the active cluster (promoted at epoch {active.get('epoch')} by {active.get('by')}): "
            f"nothing protects it yet — re-protect it onto {topology.hot_name if name == topology.cold_name else 'the other cluster'} "
            "(`drt failover reprotect`)")


def fenced_at_of(topology: Topology, fence: dict[str, Any]) -> float | None:
    st = fence.get("fencing") or {}
    at = st.get("at")
    return float(at) if st.get("fenced_cluster") == topology.hot_name and at is not None else None


def slo_breach(rpo_s: float | None, slo_s: float | None, limiting: str | None = None) -> str | None:
    """The RPO SLO rule, in one place (the DR view, ``dr_rpo_watch``, any DAG): why the SLO is
    breached, in one line, or None. No SLO (``failover.rpo_slo_s`` unset): never breached. No
    recovery point stated: breached (the recovery point's age is unbounded, not "fine").
    At exactly the SLO: not breached."""
    if slo_s is None:
        return None
    if rpo_s is None:
        return (f"RPO SLO {slo_s:g}s breached: no recovery point can be stated"
                + (f" ({limiting} states no safe time)" if limiting else ""))
    if rpo_s > slo_s:
        return (f"RPO SLO {slo_s:g}s breached: the recovery point is {rpo_s:.0f}s old"
                + (f" (held back by {limiting})" if limiting else ""))
    return None


def record_check(ledger: Ledger, res: GateResult, *, source: str, who: str | None = None) -> str | None:
    """Write ``res`` to the ledger's ``gate_checks``; the row id, or None (and ``res.record_error``)
    when the ledger refuses the write. Signals' reasons and bases are not stored (only lags, safe
    times and the gate's redacted reasons), so nothing secret reaches the history."""
    comps = {f"{s.component} {s.name}": {"component": s.component, "name": s.name, "caught_up": s.caught_up,
                                          "lag_s": None if s.lag_s is None else round(s.lag_s, 3),
                                          "safe_time": s.safe_time}
             for s in res.signals}
    try:
        res.recorded = ledger.add_gate_check(checked_at=res.checked_at, verdict=res.verdict,
                                             recovery_point=res.recovery_point, components=comps,
                                             reasons=res.reasons, source=source, limiting=res.limiting, who=who)
    except Exception as exc:  # noqa: BLE001 - the verdict stands; the failure is reported with it
        msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        res.record_error = redact(f"the check was not recorded in the ledger: {msg}")
    return res.recorded


def check(topology: Topology, ledger: Ledger, *, access: Access, components: tuple[str, ...] = COMPONENTS,
          timeout_s: float | None = None, now: float | None = None,
          record: str | None = None, who: str | None = None, hdfs: str = "full") -> GateResult:
    """Read every signal and the fencing state, and decide GO / NO_GO. With ``record`` (where the
    check runs: ``cli``, ``dag:<dag>.<task>``, ``ui``) the check is written to ``gate_checks``.
    ``hdfs``: how the HDFS signal proves cold holds the last completed run (``copy.proof``):
    ``full`` the dry run (O(files)), ``prove`` the same recorded as a proof, ``quick`` from what
    changed since the recorded proof only (never a listing: the DR page, ``dr_rpo_watch``),
    ``auto`` quick, else the recorded full proof."""
    import concurrent.futures as cf

    now = time.time() if now is None else now
    timeout_s = default_timeout(topology) if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    fut = in_background(read_fence, topology, access)
    signals = read_signals(topology, ledger, access, components=components, timeout_s=timeout_s, now=now,
                           hdfs=hdfs)
    try:  # the fencing state within the same time as the signals (the ZooKeeper connect may take longer)
        fence, fence_error = fut.result(timeout=max(0.0, deadline - time.monotonic()))
    except cf.TimeoutError:
        fence, fence_error = {}, (f"fencing state unreadable: zookeeper {fencing_endpoint(topology).quorum}: did not "
                                  f"answer within {timeout_s:g}s — check that the quorum is up and reachable, or "
                                  "raise --timeout")
    fence_error = fence_error or unprotected(topology, fence)
    res = decide(topology, signals, fenced_at=fenced_at_of(topology, fence), fence_error=fence_error, now=now)
    res.fence = fence
    if record:
        record_check(ledger, res, source=record, who=who)
    return res


def verify_as_of(topology: Topology | None, ledger: Ledger | None, access: Access) -> float:
    """``--as-of recovery-point``: the failover gate's current recovery point over HDFS, HBase and
    Kafka (the verification's own signal left out: it would be circular). No recovery point (a
    component cannot state one): ProblemFound (exit 1) with the gate's reasons. The front doors
    (`drt verify`, spark-submit) resolve it here (the verify capability sits below the gate)."""
    if topology is None or ledger is None:
        raise ConfigError("--as-of recovery-point needs the topology and its ledger",
                          hint="pass --config drt.yaml (the gate reads every protected component)")
    res = check(topology, ledger, components=("hdfs", "hbase", "kafka"), access=access, now=time.time())
    if res.recovery_point is None:
        raise ProblemFound("the gate states no recovery point to verify as of: "
                           + ("; ".join(res.reasons) or "no component states a safe time"),
                           hint="run `drt failover check` for the details, or pass --as-of TIME")
    return float(res.recovery_point)
