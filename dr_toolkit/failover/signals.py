"""Caught-up signals: every capability's reader, run concurrently, each within a timeout.

Each capability owns its reader (signature :data:`~dr_toolkit.signal.SignalReader`,
``(topology, ledger, access, now) -> list[Signal]``); this module only holds the registry
:data:`READERS` and runs them. A reader that fails or does not answer in time gives NO_GO
signals (``unreadable``) naming the reason: it can never let the gate say GO. An unreachable
ledger (exit 3) propagates.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from dr_toolkit.copy.signals import hdfs_signals
from dr_toolkit.errors import DrtError, LedgerUnreachable
from dr_toolkit.errors import why as _why
from dr_toolkit.hbase.signals import hbase_signals
from dr_toolkit.kafka.signals import kafka_signals
from dr_toolkit.kerberos import KerberosError
from dr_toolkit.signal import COMPONENTS, Signal, SignalReader, unreadable
from dr_toolkit.verify.signals import verify_signals

T = TypeVar("T")

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)

__all__ = ["COMPONENTS", "READERS", "Signal", "read_signals", "unreadable"]

READERS: dict[str, SignalReader] = {"hdfs": hdfs_signals, "hbase": hbase_signals, "kafka": kafka_signals,
                                    "verify": verify_signals}


def names(topology: Topology, component: str) -> list[str]:
    """The signal names a component would report (for NO_GO signals when its reader fails)."""
    p = topology.policies
    if component == "hdfs":
        return [f"{x.name}:{t}" for x in p.hdfs for t in x.targets]
    if component == "hbase":
        return [x.peer_id for x in p.hbase]
    if component == "kafka":
        topics = list(dict.fromkeys(t for x in p.kafka for t in x.topics))
        patterns = [f"topics_regex:{x.name}" for x in p.kafka if x.topics_regex]
        return topics + patterns + [f"group:{g}" for g in dict.fromkeys(g for x in p.kafka for g in x.groups)]
    return [x.name for x in p.verify]


def default_timeout(topology: Topology) -> float:
    eps: list[float] = []
    for cl in topology.clusters.values():
        if cl.zookeeper:
            eps.append(cl.zookeeper.connect_timeout_s + cl.zookeeper.call_timeout_s)
        if cl.kafka:
            eps.append(cl.kafka.timeout_s)
    return max(eps or [10.0]) + 5.0


def in_background(fn: Callable[..., T], *args: Any) -> cf.Future[T]:
    """``fn(*args)`` on a daemon thread, as a future. Not a thread pool: the interpreter joins a
    pool's threads at exit, so a reader stuck past its timeout (a ZooKeeper client retrying an
    address nobody answers) would hold a finished ``drt failover check`` open for its own timeout."""
    fut: cf.Future[T] = cf.Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            fut.set_exception(exc)

    threading.Thread(target=run, name=f"drt-{getattr(fn, '__name__', 'reader')}", daemon=True).start()
    return fut


def read_signals(topology: Topology, ledger: Ledger, access: Access, *,
                 components: tuple[str, ...] = COMPONENTS, timeout_s: float | None = None,
                 now: float | None = None, hdfs: str = "full") -> list[Signal]:
    """Read the components' signals concurrently; a component that does not answer within
    ``timeout_s`` (default: the largest endpoint timeout + 5 s) gives NO_GO signals saying so.
    ``hdfs``: the HDFS signal's mode (``copy.signals.hdfs_signals``: full, prove, quick, auto)."""
    now = time.time() if now is None else now
    timeout_s = default_timeout(topology) if timeout_s is None else timeout_s
    def failed(c: str, why: str) -> list[Signal]:
        # one NO_GO per signal the component would have given; never none (a policy selecting by
        # pattern only has no name before it is read): a failed reader can never leave a GO
        return [unreadable(c, n, why) for n in names(topology, c) or [c]]

    def reader(c: str) -> SignalReader:
        if c == "hdfs" and hdfs != "full":
            return functools.partial(READERS[c], mode=hdfs)  # type: ignore[call-arg]
        return READERS[c]

    futs = {c: in_background(reader(c), topology, ledger, access, now) for c in components}
    out: list[Signal] = []
    deadline = time.monotonic() + timeout_s
    for c, fut in futs.items():
        try:
            out.extend(fut.result(timeout=max(0.0, deadline - time.monotonic())))
        except cf.TimeoutError:
            out.extend(failed(c, f"{c} did not answer within {timeout_s:g}s"))
        except DrtError as exc:
            if isinstance(exc, (LedgerUnreachable, KerberosError)):
                raise  # the ledger is unreachable, or no valid ticket (one line naming the principal): exit 3
            out.extend(failed(c, exc.message))
        except Exception as exc:
            log.debug("signal reader %s failed", c, exc_info=True)
            out.extend(failed(c, _why(exc)))
    return out
