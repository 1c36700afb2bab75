"""The gate's vocabulary, shared by every capability and kept below them all: a :class:`Signal`.

Each capability reads its own signals (``dr_toolkit/copy/signals.py``,
``dr_toolkit/kafka/signals.py``, ``dr_toolkit/hbase/signals.py``,
``dr_toolkit/verify/signals.py``) with the signature :data:`SignalReader`;
``dr_toolkit/failover/signals.py`` runs them concurrently and ``gate.py`` decides.

**Safe time** (YugabyteDB xCluster's definition): the latest time T such that every write the
hot cluster accepted before T is held by the cold cluster. A signal states its own safe time
and the basis for it; the recovery point is the minimum over all signals. A signal that
cannot state one (``safe_time is None``) is NO_GO. Times are epoch seconds on the checking
host's clock; where a time comes from another clock (Kafka CreateTime from producers) the
reader applies the declared skew bound and says so in ``basis``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dr_toolkit.secrets import redact

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

COMPONENTS = ("hdfs", "hbase", "kafka", "verify")


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


@dataclass
class Signal:
    component: str  # one of COMPONENTS
    name: str  # policy:target, peer id, topic or group, dataset
    caught_up: bool
    lag_s: float | None = None  # how far behind (now - safe_time, or the component's own measure)
    safe_time: float | None = None  # epoch seconds; None: no safe time can be stated -> NO_GO
    basis: str = ""  # how safe_time was established, in words an operator can check
    detail: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None  # why not caught up / why no safe time

    def to_json(self) -> dict[str, Any]:
        return {"component": self.component, "name": self.name, "caught_up": self.caught_up,
                "lag_s": None if self.lag_s is None else round(self.lag_s, 3),
                "safe_time": iso(self.safe_time), "safe_time_epoch": self.safe_time,
                "basis": self.basis, "detail": self.detail, "reason": self.reason}


def unreadable(component: str, name: str, why: str) -> Signal:
    """A signal that could not be read: not caught up, no safe time, the reason redacted."""
    why = redact(why)
    return Signal(component, name, False, None, None, "unreadable", {"error": why}, why)


SignalReader = Callable[["Topology", "Ledger", "Access", float], list[Signal]]
"""``reader(topology, ledger, access, now) -> signals``: one capability's signals, read at ``now``."""
