"""Reading a group's committed offsets never crashes the process (librdkafka issue #5040).

librdkafka's admin ListConsumerGroupOffsets dereferences the consumer-group handle an admin
client does not have when the OffsetFetch answer asks for a new coordinator (NOT_COORDINATOR, a
coordinator still loading): a segmentation fault of the whole process. The suite met it against a
freshly started broker (test_kafka_never_skip, 2026-11-29: exit 139 in its first test). The read
goes through a consumer of the group instead (`KafkaCluster.committed`). Run in a child process:
without the fix the crash is this test's failure, not the suite's end.
"""

from __future__ import annotations

import uuid

import pytest

from dr_toolkit.kafka.client import KafkaCluster

pytestmark = pytest.mark.child_process


def test_committed_offsets_of_new_groups_on_a_fresh_broker_are_read_without_a_crash(kafka_durable) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_durable.address})
    admin.create_topics([NewTopic("orders", 3, 1)])["orders"].result(timeout=30)
    kc = KafkaCluster(kafka_durable.address, timeout_s=30.0)
    try:
        # many groups, each a partition of __consumer_offsets being created and loaded: the
        # coordinator answers NOT_COORDINATOR / LOAD_IN_PROGRESS while it moves in
        groups = [f"g-{uuid.uuid4().hex[:8]}" for _ in range(12)]
        for g in groups:
            assert kc.committed(g, [("orders", p) for p in range(3)]) == {}
            assert kc.committed(g) == {}
        # a commit is read back, for named partitions and for "every partition"
        c = Consumer({"bootstrap.servers": kafka_durable.address, "group.id": groups[0], "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition("orders", 1, 5)], asynchronous=False)
        finally:
            c.close()
        assert kc.committed(groups[0], [("orders", 0), ("orders", 1)]) == {("orders", 1): 5}
        assert kc.committed(groups[0]) == {("orders", 1): 5}
        # the reads joined nothing: the group has no member
        assert kc.group_state(groups[0])[1] == 0
    finally:
        kc.close()
