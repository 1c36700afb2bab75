"""Each fixture talks to a real server: these prove it answers (docs/contracts.md, the real servers)."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.integration


def test_zookeeper_create_and_read(zk) -> None:
    path = f"/fixture-test/{uuid.uuid4().hex}"
    zk.create(path, b"hello", makepath=True)
    data, stat = zk.get(path)
    assert data == b"hello" and stat.version == 0


def test_zookeeper_kill_and_restart(zk_server, zk) -> None:
    zk.ensure_path("/survives-restart")
    zk_server.kill()
    assert not zk_server.running
    zk_server.start()
    from kazoo.client import KazooClient

    c = KazooClient(hosts=zk_server.address, timeout=5)
    c.start(timeout=15)
    try:
        assert c.exists("/survives-restart") is not None  # data dir persisted across the crash
    finally:
        c.stop()


@pytest.mark.parametrize("which", ["kafka_hot", "kafka_cold"])
def test_kafka_produce_fetch_commit(which: str, request: pytest.FixtureRequest) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = request.getfixturevalue(which)
    topic = f"fixture-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.address})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=10)
    p = Producer({"bootstrap.servers": broker.address, "linger.ms": 0})
    for i in range(3):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp=1_700_000_000_000 + i)
        p.flush(10)
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": broker.address, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    for _ in range(50):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.value(), m.timestamp()[1]))
        if len(got) == 3:
            break
    assert [v for v, _ in got] == [b"v0", b"v1", b"v2"]
    assert got[2][1] == 1_700_000_000_002
    c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    committed = c.committed([TopicPartition(topic, 0)], timeout=10)
    assert committed[0].offset == 2
    c.close()


def test_postgres_query(postgres) -> None:
    import sqlalchemy as sa

    url = postgres.create_database("fixture_test")
    eng = sa.create_engine(url)
    with eng.connect() as conn:
        assert conn.execute(sa.text("SELECT 40 + 2")).scalar() == 42
        assert "PostgreSQL 15" in conn.execute(sa.text("SELECT version()")).scalar()
    eng.dispose()


def test_s3_put_get(s3_server) -> None:
    s3 = s3_server.client()
    s3.create_bucket(Bucket="fixture")
    s3.put_object(Bucket="fixture", Key="a/b.txt", Body=b"payload")
    assert s3.get_object(Bucket="fixture", Key="a/b.txt")["Body"].read() == b"payload"


@pytest.mark.spark
def test_spark_job(spark) -> None:
    from pyspark.sql import functions as F

    df = spark.range(1000).withColumn("m", F.col("id") % 7)
    assert df.groupBy("m").count().count() == 7
    assert df.agg(F.sum("id")).first()[0] == 499500
