"""The gate with lag injected in HDFS files and in the Kafka mirror, and a broker stopped."""

from __future__ import annotations

import json
import time

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.gate import check
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support import servers
from tests.support.fixtures_failover import drt, write_topology

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def test_files_pending_is_no_go_then_go_after_the_copy(tmp_path) -> None:
    from dr_toolkit.copy.api import replicate_policy

    path = write_topology(tmp_path, zk=None, hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse",
                                                    "targets": ["hdfs://cold/warehouse"]}])
    src = tmp_path / "hot" / "warehouse"
    src.mkdir(parents=True)
    (src / "a.csv").write_text("1,2\n")
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    res = check(topo, ledger, access=Access.from_env())
    assert res.verdict == "NO_GO" and res.recovery_point is None  # never replicated: no safe time
    assert "hdfs wh:hdfs://cold/warehouse: never replicated" in " | ".join(res.reasons)

    replicate_policy(topo, "wh", ledger, access=Access.from_env())
    res = check(topo, ledger, access=Access.from_env())
    assert res.verdict == "GO", res.reasons
    assert res.signals[0].detail["files_pending"] == 0
    assert res.signals[0].detail["manifest_id"] and res.signals[0].detail["snapshot_age_s"] is not None

    listed = ledger.watermarks("hdfs")[0]["watermark"]
    written_at = time.time()
    (src / "b.csv").write_text("3,4,5\n")
    res = check(topo, ledger, access=Access.from_env())
    assert res.verdict == "NO_GO" and "1 files (6 bytes) pending" in res.reasons[0]
    assert res.recovery_point == listed and res.recovery_point < written_at  # the last completed run's listing
    replicate_policy(topo, "wh", ledger, access=Access.from_env())
    assert check(topo, ledger, access=Access.from_env()).verdict == "GO"


def _kafka_topology(tmp_path, hot: str, cold: str, topic: str):
    return write_topology(tmp_path, zk=None, kafka_hot=hot, kafka_cold=cold,
                          kafka=[{"name": "stream", "topics": [topic], "groups": []}])


def test_records_not_yet_mirrored_is_no_go_then_go_after_mirroring(tmp_path, kafka_hot, kafka_cold) -> None:
    from tests.support.fixtures_kafka import Rec, create_topic, produce, unique

    topic = unique("orders")
    for addr in (kafka_hot.address, kafka_cold.address):
        create_topic(addr, topic, 2)
    first = [Rec(f"v{i}".encode(), 1_700_000_000_000 + i * 1000, b"k") for i in range(3)]
    for p in (0, 1):
        produce(kafka_hot.address, topic, p, first)
        produce(kafka_cold.address, topic, p, first)
    path = _kafka_topology(tmp_path, kafka_hot.address, kafka_cold.address, topic)
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    assert check(topo, ledger, access=Access.from_env()).verdict == "GO"

    late = [Rec(f"late{i}".encode(), 1_700_000_010_000 + i * 1000, b"k") for i in range(2)]
    produce(kafka_hot.address, topic, 1, late)
    res = check(topo, ledger, access=Access.from_env())
    assert res.verdict == "NO_GO"
    assert res.reasons == [f"kafka {topic}: 2 hot record(s) not yet on cold in 1 partition(s)"]
    assert res.recovery_point is not None and res.recovery_point < late[0].timestamp / 1000.0
    produce(kafka_cold.address, topic, 1, late)
    assert check(topo, ledger, access=Access.from_env()).verdict == "GO"


def test_a_stopped_broker_is_no_go_never_go(tmp_path, tmp_path_factory, kafka_cold) -> None:
    from tests.support.fixtures_kafka import Rec, create_topic, produce, unique

    hot = servers.kafka_broker(tmp_path_factory.mktemp("kafka-private"), "private-hot").start()
    try:
        topic = unique("pay")
        for addr in (hot.address, kafka_cold.address):
            create_topic(addr, topic, 1)
            produce(addr, topic, 0, [Rec(b"x", 1_700_000_000_000, b"k")])
        path = _kafka_topology(tmp_path, hot.address, kafka_cold.address, topic)
        topo = load_topology(path)
        assert check(topo, Ledger.open(topo.ledger.url), access=Access.from_env()).verdict == "GO"
        hot.stop()
        r = drt("--json", "failover", "check", config=path)
        assert r.returncode == 1, r.stderr
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "NO_GO"
        sig = doc["signals"][0]
        assert sig["component"] == "kafka" and sig["caught_up"] is False
        assert hot.address in sig["reason"] or "unreachable" in sig["reason"].lower(), sig["reason"]
    finally:
        hot.kill()
