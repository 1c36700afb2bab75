"""The caught-up gate: GO / NO_GO with every reason, and one recovery point.

The recovery point (YugabyteDB's *safe time*) is the minimum over all signals of the time up
to which the cold cluster holds the hot cluster's data. The verdict is GO only when every
signal is caught up *and*

- after the hot cluster was fenced: every signal's watermark is at or past the fencing time
  (nothing the hot cluster accepted before it stopped taking writes is missing);
- before fencing: every lag is within ``failover.max_lag_s`` (verification uses its own
  bound, ``failover.max_verify_age_s``).

A signal that cannot be read is a NO_GO. The fencing state that cannot be read is a NO_GO.
Only an unreachable ledger raises (exit 3): without it there is nothing to decide from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dr_toolkit.failover.signals import COMPONENTS, Signal, read_signals
from dr_toolkit.secrets import redact

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import Topology

GO = "GO"
NO_GO = "NO_GO"


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


@dataclass
class GateResult:
    verdict: str
    recovery_point: float | None
    signals: list[Signal]
    reasons: list[str]
    fenced_at: float | None = None
    fence: dict[str, Any] = field(default_factory=dict)
    checked_at: float = field(default_factory=time.time)

    @property
    def go(self) -> bool:
        return self.verdict == GO

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "recovery_point": iso(self.recovery_point),
            "recovery_point_epoch": self.recovery_point,
            "signals": [s.to_json() for s in self.signals],
            "reasons": self.reasons,
            "fenced_at": iso(self.fenced_at),
            "fence": self.fence,
            "checked_at": iso(self.checked_at),
        }


def read_fence(topology: Topology, credentials: Credentials | None = None) -> tuple[dict[str, Any], str | None]:
    """The fencing snapshot ({} when no ZooKeeper is configured) and an error, if unreadable."""
    if not (topology.cold.zookeeper or topology.hot.zookeeper):
        return {}, None
    try:
        from dr_toolkit.zk.fencing import open_fence

        with open_fence(topology, credentials=credentials) as fence:
            return fence.snapshot(), None
    except Exception as exc:  # noqa: BLE001 - unreadable fencing state is a NO_GO
        msg = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return {}, redact(f"fencing state unreadable: {msg}")


def decide(topology: Topology, signals: list[Signal], *, fenced_at: float | None,
           fence_error: str | None = None, now: float | None = None) -> GateResult:
    """Apply the gate's rules to signals already read."""
    now = time.time() if now is None else now
    reasons: list[str] = []
    if fence_error:
        reasons.append(fence_error)
    if not signals:
        reasons.append("no signals: the topology protects nothing (no policies)")
    max_lag = topology.failover.max_lag_s
    for s in signals:
        label = f"{s.component} {s.name}"
        if not s.caught_up:
            reasons.append(f"{label}: {s.reason or 'not caught up'}")
            continue
        if fenced_at is not None:
            if s.watermark is None or s.watermark < fenced_at:
                reasons.append(f"{label}: holds data only up to {iso(s.watermark) or 'an unknown time'}, "
                               f"before the fence at {iso(fenced_at)}")
        elif s.component != "verify" and s.lag_s is not None and s.lag_s > max_lag:
            reasons.append(f"{label}: lag {s.lag_s:.0f}s exceeds failover.max_lag_s {max_lag:g}s")
    marks = [s.watermark for s in signals]
    rp = None if (not marks or any(m is None for m in marks)) else min(m for m in marks if m is not None)
    return GateResult(GO if not reasons else NO_GO, rp, signals, reasons, fenced_at, checked_at=now)


def check(topology: Topology, ledger: Ledger, *, components: tuple[str, ...] = COMPONENTS,
          timeout_s: float | None = None, fence_credentials: Credentials | None = None) -> GateResult:
    """Read every signal and the fencing state, and decide GO / NO_GO."""
    import concurrent.futures as cf

    now = time.time()
    with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="drt-fence") as ex:
        fut = ex.submit(read_fence, topology, fence_credentials)
        signals = read_signals(topology, ledger, components=components, timeout_s=timeout_s, now=now)
        fence, fence_error = fut.result()
    st = fence.get("fencing") or {}
    fenced_at = st.get("at") if st.get("fenced_cluster") == topology.hot_name else None
    res = decide(topology, signals, fenced_at=fenced_at, fence_error=fence_error, now=now)
    res.fence = fence
    return res
