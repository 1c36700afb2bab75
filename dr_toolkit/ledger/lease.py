"""A ledger lease held by this process: acquired, renewed by a thread of its own, checked, released.

One holder for every lease of the toolkit: :meth:`dr_toolkit.ledger.Ledger.lease` (a policy's
lease, ``policy:<name>``) and the copy's target lease (``copy-target:<key>``,
:func:`dr_toolkit.copy.state.target_lock`). The ledger's row is the exclusion; this side knows
until when it is still ours: ``valid_until`` is the time of the last renewal that succeeded
(taken *before* the call) plus the TTL less a margin — no other holder can take the row before
then. How renewal goes on once that time has passed is the caller's choice
(:meth:`LeaseHolder.held`): the copy stops renewing (a run paused past its lease — SIGSTOP, a
long GC — never takes it back silently, even when nobody took it meanwhile, because another run
may have come and gone); a policy's lease keeps renewing (its holders check nothing).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from dr_toolkit.errors import LeaseHeld

#: of the TTL: a lease closer than this to its end is already lost
MARGIN = 0.1


class LeaseRows(Protocol):
    """The ledger's lease table (:class:`dr_toolkit.ledger.Ledger`)."""

    def try_acquire_lease(self, name: str, holder: str, ttl_s: float) -> bool: ...

    def release_lease(self, name: str, holder: str) -> None: ...

    def lease_holder(self, name: str) -> dict[str, Any] | None: ...


class LeaseHolder:
    """The lease ``name`` held as ``holder`` in ``ledger`` (see the module doc)."""

    def __init__(self, ledger: LeaseRows, name: str, holder: str, ttl_s: float, margin: float = MARGIN) -> None:
        self.ledger, self.name, self.holder, self.ttl_s, self.margin = ledger, name, holder, ttl_s, margin
        self.valid_until = 0.0
        self.lost = False

    def acquire(self) -> None:
        """Take the lease; :class:`LeaseHeld` (exit 1) when another live holder has it."""
        t = time.time()
        if not self.ledger.try_acquire_lease(self.name, self.holder, self.ttl_s):
            other = self.ledger.lease_holder(self.name)
            raise LeaseHeld(f"another run holds the lease {self.name!r}"
                            + (f" ({other['holder']}, until {time.ctime(other['expires_at'])})" if other else ""),
                            hint="wait for it to finish; a killed holder loses the lease when it expires")
        self.valid_until = t + self.ttl_s * (1 - self.margin)

    def valid(self) -> bool:
        """Still ours by this process's clock (no other holder can have taken it)."""
        return not self.lost and time.time() < self.valid_until

    def renew(self, *, while_valid: bool = True) -> bool:
        """Renew the row. ``while_valid``: only while :meth:`valid` — a lease that lapsed is lost for
        good. A renewal that raises is retried at the next period (the lease runs out meanwhile);
        one refused (another holder has the row) loses the lease."""
        t = time.time()
        if while_valid and not self.valid():
            self.lost = True
            return False
        try:
            ok = self.ledger.try_acquire_lease(self.name, self.holder, self.ttl_s)
        except Exception:  # noqa: BLE001 - a missed renewal is retried; the lease runs out meanwhile
            return True
        if ok:
            self.valid_until = t + self.ttl_s * (1 - self.margin)
        else:
            self.lost = True
        return ok

    @contextmanager
    def held(self, *, stop_when_lapsed: bool) -> Iterator[LeaseHolder]:
        """Acquire, renew every TTL/3 on a thread until the block ends, release (only while the row is
        still ours: the ledger deletes it ``WHERE holder``). ``stop_when_lapsed``: renew only while
        :meth:`valid` and stop once lost (the copy); else renew whatever happened (a policy's lease)."""
        self.acquire()
        stop = threading.Event()

        def _renew() -> None:
            while not stop.wait(self.ttl_s / 3):
                if not self.renew(while_valid=stop_when_lapsed) and stop_when_lapsed and self.lost:
                    return

        th = threading.Thread(target=_renew, name=f"lease-{self.name}", daemon=True)
        th.start()
        try:
            yield self
        finally:
            stop.set()
            th.join(timeout=5)
            self.ledger.release_lease(self.name, self.holder)
