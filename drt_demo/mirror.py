"""A direct record copier hot → cold, one partition to the same partition, keeping key, value,
headers and the record timestamp (CreateTime): for tests and benchmarks that must control
exactly which records cold holds (the demo and the mirror tests run real MirrorMaker 2,
``drt_servers.kafka.MirrorMaker2``). ``create_topics`` is the demo's seeding helper too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MirrorProgress:
    topic: str
    partition: int
    next_offset: int  # next hot offset to copy
    copied: int = 0


def create_topics(bootstrap: str, topics: dict[str, int], timeout_s: float = 10.0) -> None:
    """Create ``{topic: partitions}`` on ``bootstrap`` (existing topics are left as they are)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=timeout_s).topics
    new = [NewTopic(t, num_partitions=n, replication_factor=1) for t, n in topics.items() if t not in existing]
    if new:
        for fut in admin.create_topics(new, operation_timeout=timeout_s).values():
            fut.result(timeout=timeout_s)


def mirror(hot: str, cold: str, topic: str, partition: int, start: int, end: int | None = None,
           timeout_s: float = 10.0) -> MirrorProgress:
    """Copy hot records ``[start, end)`` of one partition to the same cold partition.

    ``end`` None copies up to the hot high watermark. Returns where the next call resumes.
    """
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = Consumer({"bootstrap.servers": hot, "group.id": "drt-embedded-mirror", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, "session.timeout.ms": 6000})
    p = Producer({"bootstrap.servers": cold, "linger.ms": 0, "enable.idempotence": False})
    progress = MirrorProgress(topic, partition, start)
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
        stop = high if end is None else min(end, high)
        if start >= stop:
            return progress
        c.assign([TopicPartition(topic, partition, start)])
        misses = 0
        while progress.next_offset < stop and misses < 20:
            msg = c.poll(0.5)
            if msg is None:
                misses += 1
                continue
            if msg.error():
                raise RuntimeError(f"mirror fetch {topic}[{partition}]: {msg.error()}")
            offset = msg.offset()
            if offset is None or offset >= stop:
                break
            p.produce(topic, key=msg.key(), value=msg.value(), headers=msg.headers(), partition=partition,
                      timestamp=msg.timestamp()[1])
            if p.flush(timeout_s) != 0:
                raise RuntimeError(f"mirror produce to {cold} {topic}[{partition}] timed out")
            progress.next_offset = offset + 1
            progress.copied += 1
            misses = 0
    finally:
        c.close()
    return progress
