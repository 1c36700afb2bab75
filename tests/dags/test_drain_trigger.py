"""drt_airflow.triggers.DrainedTrigger on real servers (ZooKeeper for the fence, the two Kafka
brokers for the mirror): serialize() round-trips through its classpath as the triggerer rebuilds
it; run() polls the library's drain state in a thread and fires once — only after the cold
cluster has the records the hot one took — and records nothing itself."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.runbook import Runbook
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

ACCESS = Access.from_env()


@pytest.fixture
def lagging(tmp_path: Any, zk_server: Any, kafka_hot: Any, kafka_cold: Any, monkeypatch: pytest.MonkeyPatch
            ) -> dict[str, Any]:
    """A topology whose Kafka policy's topic has 5 records on hot and none on cold yet."""
    from tests.support.fixtures_kafka import Rec, create_topic, produce, unique

    for b in (zk_server, kafka_hot, kafka_cold):
        if not b.running:
            b.start()
    topic = unique("orders")
    for addr in (kafka_hot.address, kafka_cold.address):
        create_topic(addr, topic, 1)
    produce(kafka_hot.address, topic, 0, [Rec(f"v{i}".encode(), 1_700_000_000_000 + i, b"k") for i in range(5)])
    path = write_topology(tmp_path, zk=zk_server.address, kafka_hot=kafka_hot.address, kafka_cold=kafka_cold.address,
                          kafka=[{"name": "stream", "topics": [topic]}])
    monkeypatch.setenv("DRT_CONFIG", str(path))
    topo = load_topology(path)
    return {"topo": topo, "ledger": open_ledger(topo, ACCESS), "topic": topic, "hot": kafka_hot.address,
            "cold": kafka_cold.address}


def _rebuilt(trigger: Any) -> Any:
    """The trigger as the triggerer rebuilds it from the database: classpath + kwargs."""
    classpath, kwargs = trigger.serialize()
    module, name = classpath.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)(**kwargs)


def test_serialize_round_trips(airflow_home: Any) -> None:
    from drt_airflow.triggers import DrainedTrigger

    t = DrainedTrigger(run_id="failover-x", poll_s=7)
    assert t.serialize() == ("drt_airflow.triggers.DrainedTrigger", {"run_id": "failover-x", "poll_s": 7.0})
    again = _rebuilt(t)
    assert type(again) is DrainedTrigger and (again.run_id, again.poll_s) == ("failover-x", 7.0)


def test_run_fires_only_once_the_mirror_caught_up(airflow_home: Any, lagging: dict[str, Any]) -> None:
    from drt_airflow.triggers import DrainedTrigger, drain_reasons

    from tests.support.fixtures_kafka import mirror

    rb = Runbook.start(lagging["topo"], lagging["ledger"], access=ACCESS, reason="trigger test", execute=True)
    assert rb.run_step("fence_hot").status == "done"
    reasons = drain_reasons(rb.run_id)
    assert reasons and any(lagging["topic"] in r for r in reasons), reasons
    trigger = _rebuilt(DrainedTrigger(run_id=rb.run_id, poll_s=0.5))

    async def scenario() -> Any:
        events = trigger.run()
        first = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(3)  # several polls: the records are not on cold, no event
        assert not first.done(), first.result() if first.done() else None
        await asyncio.to_thread(mirror, lagging["hot"], lagging["cold"], lagging["topic"], 0)
        event = await asyncio.wait_for(first, timeout=60)
        with pytest.raises(StopAsyncIteration):  # one event, then the trigger ends
            await events.__anext__()
        return event

    event = asyncio.run(scenario())
    assert event.payload["status"] == "drained" and event.payload["run_id"] == rb.run_id
    assert event.payload["polls"] >= 2, event.payload
    assert drain_reasons(rb.run_id) == []
    # the trigger records nothing: the step is recorded by the sensor when it resumes
    assert Runbook.resume(lagging["topo"], lagging["ledger"], rb.run_id, access=ACCESS).state.statuses.get(
        "wait_drain") != "done"


def test_a_dry_run_fires_at_the_first_poll(airflow_home: Any, lagging: dict[str, Any]) -> None:
    from drt_airflow.triggers import DrainedTrigger

    rb = Runbook.start(lagging["topo"], lagging["ledger"], access=ACCESS, reason="dry trigger", execute=False)

    async def first() -> Any:
        async for ev in DrainedTrigger(run_id=rb.run_id, poll_s=60).run():
            return ev
        return None

    event = asyncio.run(asyncio.wait_for(first(), timeout=60))
    assert event.payload == {"status": "drained", "run_id": rb.run_id, "polls": 1}
