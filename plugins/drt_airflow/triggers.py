"""Triggers (run by Airflow's triggerer) for the deferrable sensors.

Thin: a trigger asks the library's existing call in a thread (``asyncio.to_thread``: the library's
clients block) every ``poll_s`` seconds and fires one :class:`TriggerEvent` when the condition
holds. Between polls it holds no worker slot and no connection. The library never imports Airflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


def drain_reasons(run_id: str) -> list[str]:
    """Why the failover run ``run_id`` is not drained yet (HBase queues, Kafka mirror), [] once it
    is or when nothing is to wait for (a dry run). Nothing is recorded: the sensor records the step."""
    from dr_toolkit.failover.runbook import Runbook
    from drt_airflow.hooks import DrtHook

    topo, access, ledger = DrtHook().get_conn()
    rb = Runbook.resume(topo, ledger, run_id, drain_timeout_s=0, access=access)
    if not rb.execute:
        return []
    _sigs, reasons, _detail = rb.drain_state()
    return list(reasons)


class DrainedTrigger(BaseTrigger):
    """Fires ``{"status": "drained", "run_id": …, "polls": n}`` once the failover run's HBase queues
    and Kafka mirror shipped everything taken before the fence (``drain_reasons`` is empty)."""

    def __init__(self, run_id: str, poll_s: float = 15.0) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.run_id = run_id
        self.poll_s = float(poll_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return "drt_airflow.triggers.DrainedTrigger", {"run_id": self.run_id, "poll_s": self.poll_s}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        polls = 0
        while True:
            polls += 1
            try:
                reasons = await asyncio.to_thread(drain_reasons, self.run_id)
            except Exception as exc:  # noqa: BLE001 - a server not answering: not drained, asked again
                reasons = [f"{type(exc).__name__}: {exc}"]
            if not reasons:
                yield TriggerEvent({"status": "drained", "run_id": self.run_id, "polls": polls})  # type: ignore[no-untyped-call]
                return
            self.log.info("failover run %s not drained yet (poll %d): %s", self.run_id, polls, "; ".join(reasons))
            await asyncio.sleep(self.poll_s)
