"""The dr_kafka_offsets DAG and the Kafka operator/sensor, run against the real test brokers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dr_toolkit.ledger import Ledger
from tests.support.fixtures_kafka import T0, Rec, create_topic, produce, unique, write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow]


def test_dag_checkpoints_and_reports_lag(airflow_home, kafka_mirror, monkeypatch) -> None:
    from tests.support.airflow import load_dag

    topo, ledger, topic, group, _idle, scen = kafka_mirror
    monkeypatch.setenv("DRT_CONFIG", topo.source_file)
    run = load_dag("dr_kafka_offsets").test()
    assert run.state == "success"
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    report = tis["lag_report"].xcom_pull(task_ids="lag_report")
    assert report["caught_up"] is True and len(report["partitions"]) == len(scen)
    rows = ledger.latest_checkpoint(group)
    assert rows and rows[0]["checkpoint_id"] == report["checkpoint_id"]
    assert {r["partition_id"]: r["committed_offset"] for r in rows}[0] == 137

    # the policy's own DAG, on the policy's schedule (default */15), checkpoints its groups and
    # updates its Asset
    dag = load_dag("dr_kafka_offsets__stream")
    assert dag.timetable.expression == "*/15 * * * *"
    assert [o.uri for o in dag.get_task("checkpoint").outlets] == ["x-drt://kafka/stream"]
    run2 = dag.test()
    assert run2.state == "success"
    newest = ledger.latest_checkpoint(group)
    assert newest and newest[0]["checkpoint_id"] != report["checkpoint_id"]
    lag = {ti.task_id: ti for ti in run2.get_task_instances()}["lag_report"].xcom_pull(task_ids="lag_report")
    assert lag["caught_up"] is True and len(lag["partitions"]) == len(scen)


def test_sensor_and_operators_use_kafka_connections(airflow_home, kafka_env, tmp_path: Path, monkeypatch) -> None:
    from drt_airflow.kafka import KafkaCheckpointOperator, KafkaMirrorCaughtUpSensor, KafkaRemapOperator

    hot, cold = kafka_env
    topic, group = unique("sensor"), unique("g")
    create_topic(hot, topic, 1)
    create_topic(cold, topic, 1)
    recs = [Rec(f"s{i}".encode(), T0 + i) for i in range(5)]
    produce(hot, topic, 0, recs)
    produce(cold, topic, 0, recs[:3])
    # The topology names unreachable addresses: the Kafka connections' extra must win.
    cfg = write_topology(tmp_path / "drt.yaml", hot="127.0.0.1:1", cold="127.0.0.1:2", topics=[topic],
                         groups=[group], ledger_url=f"sqlite:///{tmp_path}/l.db")
    monkeypatch.setenv("DRT_CONFIG", str(cfg))
    for name, addr in (("HOT", hot), ("COLD", cold)):
        monkeypatch.setenv(f"AIRFLOW_CONN_DRT_KAFKA_{name}", json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": addr, "group.id": "ignored"}}))
    sensor = KafkaMirrorCaughtUpSensor(task_id="caught_up", hot_conn_id="drt_kafka_hot",
                                       cold_conn_id="drt_kafka_cold")
    assert sensor.mode == "reschedule"  # a long wait does not hold a worker slot
    assert sensor.poke({}) is False
    produce(cold, topic, 0, recs[3:])
    assert sensor.poke({}) is True
    unreachable = KafkaMirrorCaughtUpSensor(task_id="down", hot_conn_id="drt_kafka_hot")
    assert unreachable.poke({}) is False  # cold from the topology: 127.0.0.1:2 does not answer

    from tests.support.fixtures_kafka import commit_after_consuming

    commit_after_consuming(hot, group, topic, {0: 2})
    out = KafkaCheckpointOperator(task_id="ck", hot_conn_id="drt_kafka_hot").execute({})
    assert out["partitions"] == 1 and "bootstrap" not in json.dumps(out)
    res = KafkaRemapOperator(task_id="remap", group=group, hot_conn_id="drt_kafka_hot",
                             cold_conn_id="drt_kafka_cold").execute({})
    assert res["partitions"][0]["target_offset"] == 2 and res["applied"] is False
    assert Ledger.open(f"sqlite:///{tmp_path}/l.db").latest_checkpoint(group)
