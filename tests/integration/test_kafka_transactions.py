"""Transactions on the real hot broker: a transaction left open before acknowledged records.

Under ``read_committed`` (what MirrorMaker 2 and the toolkit read) nothing at or after the last
stable offset (LSO) of a partition is visible while a transaction there is open — including
non-transactional records acknowledged after it. The mirror cannot copy them yet, so the lag
must count them and must never say caught up (a failover then would lose acknowledged records).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from dr_toolkit.access import Access
from dr_toolkit.kafka import api
from dr_toolkit.kafka.signals import kafka_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import QUIET, T0, Rec, create_topic, produce, read_all, unique, write_topology

pytestmark = pytest.mark.integration


def test_open_transaction_before_acknowledged_records_is_never_caught_up(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic = unique("txopen")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    done = [Rec(f"d{i}".encode(), T0 + 10 * i, b"k") for i in range(3)]
    produce(hot, topic, 0, done)
    produce(cold, topic, 0, done)  # cold holds everything committed so far
    tx = Producer({"bootstrap.servers": hot, "transactional.id": unique("tid"), "linger.ms": 0,
                   "transaction.timeout.ms": 120_000, **QUIET})
    tx.init_transactions(15)
    tx.begin_transaction()
    tx.produce(topic, b"open-1", partition=0, timestamp=T0 + 100)
    tx.produce(topic, b"open-2", partition=0, timestamp=T0 + 110)
    assert tx.flush(15) == 0
    late = [Rec(f"acked{i}".encode(), T0 + 200 + i, b"k") for i in range(3)]
    produce(hot, topic, 0, late)  # acknowledged, durable on hot, invisible to read_committed
    try:
        assert read_all(cold, topic, 0) == done
        topo = load_topology(write_topology(tmp_path / "t.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                                            ledger_url=f"sqlite:///{tmp_path}/t.db", skew_s=0.01))
        res = api.lag(topo, access=Access.none())
        (row,) = res["partitions"]
        assert not res["caught_up"], row
        assert (row["records_behind"] or 0) >= 5, row  # the open transaction's 2 and the 3 acknowledged after it
        # the safe time lies before the open transaction's first record (nothing after it is on cold)
        assert row["safe_time"] is not None and row["safe_time"] <= (T0 + 100) / 1000, row
        sig = kafka_signals(topo, Ledger.open(topo.ledger.url), Access.none(), time.time())
        assert not any(s.caught_up for s in sig if s.component == "kafka" and topic in s.name), sig
    finally:
        tx.abort_transaction(15)
    # Aborted: the acknowledged records become readable; not on cold -> still behind, the oldest
    # unmirrored record now the first acknowledged one (the aborted ones are never mirrored).
    deadline = time.monotonic() + 15
    while True:
        (row,) = api.lag(topo, access=Access.none())["partitions"]
        if "open transaction" not in row["basis"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "open transaction" not in row["basis"], row
    assert row["records_behind"] >= 3 and row["oldest_unmirrored_ts"] == (T0 + 200) / 1000, row
    produce(cold, topic, 0, late)
    (row,) = api.lag(topo, access=Access.none())["partitions"]
    assert row["records_behind"] == 0, row
