"""Kafka test helpers and fixtures (capability 1.2), on real Apache Kafka 4.x brokers.

``kafka_hot`` / ``kafka_cold``: two single-node KRaft clusters (session-scoped; topic and group
names are unique per test). ``mm2``: a real MirrorMaker 2 hot → cold (session-scoped, started
only by the tests that use it) for topics named ``mm-*``, DefaultReplicationPolicy (cold topics
``hot.mm-*``). :func:`mirror` is a direct copier for the tests that must control exactly which
records are on cold (offset shifts, cold-only records, partial copies).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from drt_servers.kafka import KafkaBroker, MirrorMaker2

QUIET = {"log_level": 0}


@dataclass(frozen=True)
class Rec:
    value: bytes | None
    timestamp: int
    key: bytes | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(address: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": address, **QUIET})
    for f in admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=10).values():
        f.result(timeout=15)


def produce(address: str, topic: str, partition: int, records: Sequence[Rec]) -> None:
    """Produce ``records`` in order (one request in flight: order kept across batches and retries;
    an idempotent producer would keep it too but waits ~0.5 s for its producer id)."""
    p = Producer({"bootstrap.servers": address, "linger.ms": 2, "max.in.flight.requests.per.connection": 1,
                  **QUIET})
    errors: list[Any] = []
    for r in records:
        p.produce(topic, value=r.value, key=r.key, partition=partition, timestamp=r.timestamp,
                  headers=r.headers or None, on_delivery=lambda err, _m: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(30) == 0, "produce did not complete"
    assert not errors, errors


def read_all(address: str, topic: str, partition: int) -> list[Rec]:
    """Every record of one partition, in order."""
    c = Consumer({"bootstrap.servers": address, "group.id": unique("read"), "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 10, **QUIET})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    out: list[Rec] = []
    if hi > lo:
        # Offsets without a record (compacted away, transaction markers, aborted records) make
        # the count smaller than hi - lo: read to the partition's end (EOF), not to a count.
        c.assign([TopicPartition(topic, partition, lo)])
        eof = False
        deadline = time.monotonic() + 60
        while not eof and len(out) < hi - lo:
            assert time.monotonic() < deadline, f"read_all({topic}[{partition}]) did not reach the end"
            for m in c.consume(max(1, min(500, hi - lo - len(out))), timeout=0.2):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof = True
                        continue
                    raise RuntimeError(m.error())
                if m.offset() < hi:
                    out.append(Rec(m.value(), m.timestamp()[1], m.key(), list(m.headers() or [])))
    c.close()
    return out


def mirror(hot: str, cold: str, topic: str, partition: int, *, shift: int = 0, shift_ts: int = 1) -> int:
    """Copy a hot partition to cold after ``shift`` unrelated records (the offset shift).
    Returns the number of records copied."""
    other = [Rec(f"cold-only-{i}".encode(), shift_ts + i, b"other") for i in range(shift)]
    produce(cold, topic, partition, other)
    recs = read_all(hot, topic, partition)
    produce(cold, topic, partition, recs)
    return len(recs)


def commit_after_consuming(address: str, group: str, topic: str, counts: dict[int, int]) -> None:
    """A consumer of ``group`` reads ``counts[p]`` records of each partition and commits."""
    c = Consumer({"bootstrap.servers": address, "group.id": group, "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, **QUIET})
    commits = []
    for p, n in counts.items():
        got = 0
        if n:
            c.assign([TopicPartition(topic, p, 0)])
            while got < n:
                got += len([m for m in c.consume(n - got, timeout=10) if not m.error()])
        commits.append(TopicPartition(topic, p, got))
    c.commit(offsets=commits, asynchronous=False)
    c.close()


def committed(address: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": address, "group.id": group, "enable.auto.commit": False, **QUIET})
    out = {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                          timeout=10)}
    c.close()
    return out


def write_topology(path: Path, *, hot: str, cold: str, topics: list[str], groups: list[str],
                   ledger_url: str, timeout_s: float = 5.0, skew_s: float = 0.0,
                   replication_policy: str = "identity", policy: dict[str, Any] | None = None) -> Path:
    """A topology for the two brokers. ``skew_s``: the declared producer clock-skew bound
    (the tests' records carry explicit CreateTimes; 0 means they follow the append order)."""
    doc = {
        "version": 1,
        "clusters": {
            "hot": {"role": "hot", "kafka": {"bootstrap_servers": hot, "timeout_s": timeout_s,
                                             "max_clock_skew_s": skew_s}},
            "cold": {"role": "cold", "kafka": {"bootstrap_servers": cold, "timeout_s": timeout_s,
                                               "replication_policy": replication_policy}},
        },
        "policies": {"kafka": [{"name": "stream", "topics": topics, "groups": groups, **(policy or {})}]},
        "ledger": {"url": ledger_url},
    }
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="session")
def kafka_hot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """The "hot" Kafka cluster: a real single-node KRaft broker (data on disk, kept across
    ``kill``/``start``/``restart``)."""
    proc = KafkaBroker(tmp_path_factory.mktemp("kafka-hot"), "hot").start()
    yield proc
    proc.kill()


@pytest.fixture(scope="session")
def kafka_cold(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """The "cold" Kafka cluster (the mirror): a real single-node KRaft broker."""
    proc = KafkaBroker(tmp_path_factory.mktemp("kafka-cold"), "cold").start()
    yield proc
    proc.kill()


MM2_TOPICS = "mm-.*"


@pytest.fixture(scope="session")
def mm2_session(tmp_path_factory: pytest.TempPathFactory, kafka_hot: KafkaBroker,
                kafka_cold: KafkaBroker) -> Iterator[MirrorMaker2]:
    """Real MirrorMaker 2 (dedicated mode) hot → cold for topics ``mm-*``, DefaultReplicationPolicy,
    offset syncs for every record, checkpoints and group-offset syncs every second."""
    for b in (kafka_hot, kafka_cold):
        if not b.running:
            b.start()
    proc = MirrorMaker2(tmp_path_factory.mktemp("mm2"), kafka_hot.address, kafka_cold.address,
                        topics=MM2_TOPICS, groups=".*").start()
    yield proc
    proc.kill()


@pytest.fixture
def mm2(mm2_session: MirrorMaker2, kafka_env: tuple[str, str]) -> MirrorMaker2:
    """The session's MirrorMaker 2, restarted if a test stopped it (brokers up too)."""
    if not mm2_session.running:
        mm2_session.start()
    return mm2_session


@pytest.fixture
def kafka_env(kafka_hot: KafkaBroker, kafka_cold: KafkaBroker) -> Iterator[tuple[str, str]]:
    """(hot address, cold address), restarting a broker a previous test stopped."""
    for b in (kafka_hot, kafka_cold):
        if not b.running:
            b.start()
    yield kafka_hot.address, kafka_cold.address


@pytest.fixture
def kafka_durable(tmp_path: Path) -> Iterator[KafkaBroker]:
    """A broker of the test's own that the test may kill and restart (its data is on disk)."""
    broker = KafkaBroker(tmp_path / "durable", "durable").start()
    yield broker
    broker.kill()


T0 = 1_700_000_000_000


def _runs(n: int, run_lengths: list[int], start: int = T0) -> list[Rec]:
    """``n`` records whose timestamps come in runs of equal values (lengths cycled)."""
    out, ts, i = [], start, 0
    while len(out) < n:
        for _ in range(run_lengths[i % len(run_lengths)]):
            if len(out) < n:
                out.append(Rec(f"v{len(out)}".encode(), ts, f"k{len(out) % 7}".encode(), [("h", b"1")]))
        ts += 5
        i += 1
    return out


def _backwards(n: int) -> list[Rec]:
    """Timestamps that mostly grow but jump back by up to 40 ms every few records."""
    out = []
    for i in range(n):
        ts = T0 + 10 * i - (40 if i % 7 == 3 else 0) - (25 if i % 11 == 5 else 0)
        out.append(Rec(f"b{i}".encode(), ts, None))
    return out


# partition → (records, committed by the group, cold-only records first)
def _scenario() -> dict[int, tuple[list[Rec], int, int]]:
    return {
        0: (_runs(300, [1, 3, 50, 2, 17]), 137, 7),     # inside a run of 50 equal timestamps
        1: (_backwards(200), 108, 3),                    # ts of record 107 is lower than record 106's
        2: ([], 0, 4),                                   # empty partition (cold holds other records)
        3: (_runs(100, [4]), 100, 0),                    # the group consumed everything
        4: (_runs(80, [2]), 0, 12),                      # the group consumed nothing
        5: ([Rec(f"same{i}".encode(), T0, b"same") for i in range(50)], 23, 5),  # 50 share one ts
        6: ([Rec(b"dup", T0 + 7) for _ in range(5)] + _runs(10, [1], T0 + 8), 2, 2),  # identical records
    }


@pytest.fixture
def kafka_mirror(kafka_env, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A topic mirrored hot → cold with offset shifts, a group that consumed part of it on hot
    and an idle group: (topology, ledger, topic, group, idle group, scenario).

    Copied by :func:`mirror`, not MirrorMaker 2: the tests check exact cold offsets, so they
    need exactly these records on cold (a different number of cold-only records per partition
    before the copies); the real-MM2 remap is tests/integration/test_kafka_mm2.py."""
    hot, cold = kafka_env
    topic, group, idle = unique("orders"), unique("billing"), unique("idle")
    scen = _scenario()
    create_topic(hot, topic, len(scen))
    create_topic(cold, topic, len(scen))
    for p, (recs, _, shift) in scen.items():
        produce(hot, topic, p, recs)
        assert mirror(hot, cold, topic, p, shift=shift) == len(recs)
    commit_after_consuming(hot, group, topic, {p: n for p, (_, n, _) in scen.items()})
    # CreateTimes in the scenario stray at most 65 ms from the append order (partition 1).
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[group, idle],
                         ledger_url=f"sqlite:///{tmp_path}/ledger.db", skew_s=0.07)
    topo = load_topology(cfg)
    return topo, Ledger.open(topo.ledger.url), topic, group, idle, scen


REPO = Path(__file__).resolve().parents[2]


def drt(*args: str) -> subprocess.CompletedProcess[str]:
    """``drt ARGS`` as a new process from the checkout (stdout, stderr, exit code)."""
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
