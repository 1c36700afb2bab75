"""The Kafka launcher's pure parts (no JVM): cluster ids StorageTool accepts, the test config."""

from __future__ import annotations

import base64
from pathlib import Path

from drt_servers.kafka import MirrorMaker2, _cluster_id, broker_config


def test_cluster_ids_are_16_bytes_and_never_look_like_an_option() -> None:
    ids = {_cluster_id() for _ in range(2000)}  # 1 in 64 raw draws starts with '-'
    assert len(ids) == 2000
    for cid in ids:
        assert not cid.startswith("-") and len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_broker_config_keeps_old_records_and_binds_loopback(tmp_path: Path) -> None:
    cfg = broker_config(tmp_path, 1234, 1235)
    assert cfg["listeners"] == "PLAINTEXT://127.0.0.1:1234,CONTROLLER://127.0.0.1:1235"
    assert cfg["log.retention.ms"] == -1  # tests write CreateTimes years old
    assert cfg["log.cleaner.enable"] == "true"


def test_mm2_names_follow_the_aliases_and_policy(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("drt_servers.maven.classpath", lambda c: "/nonexistent.jar")
    d = MirrorMaker2(tmp_path, "127.0.0.1:1", "127.0.0.1:2", topics="mm-.*")
    assert (d.remote_topic("t"), d.checkpoints_topic, d.offset_syncs_topic) == \
        ("hot.t", "hot.checkpoints.internal", "mm2-offset-syncs.cold.internal")
    i = MirrorMaker2(tmp_path / "i", "127.0.0.1:1", "127.0.0.1:2", policy="identity", aliases=("a", "b"))
    assert (i.remote_topic("t"), i.checkpoints_topic, i.offset_syncs_topic) == \
        ("t", "a.checkpoints.internal", "mm2-offset-syncs.b.internal")
    text = (tmp_path / "i" / "mm2.properties").read_text()
    assert "a->b.enabled=true" in text and "IdentityReplicationPolicy" in text and "offset.lag.max=0" in text
