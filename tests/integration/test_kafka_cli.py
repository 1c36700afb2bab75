"""`drt kafka ...` end to end: JSON contract, and clear errors that write nothing
(parity mismatch, missing topic, unreachable broker)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dr_toolkit.ledger import Ledger
from tests.support.fixtures_kafka import (
    Rec,
    commit_after_consuming,
    committed,
    create_topic,
    drt,
    produce,
    unique,
    write_topology,
)
from tests.support.procs import free_port

pytestmark = pytest.mark.integration


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_cli_checkpoint_lag_remap_json(kafka_mirror) -> None:
    topo, ledger, topic, group, _idle, scen = kafka_mirror
    cfg = topo.source_file
    r = drt("--json", "--config", cfg, "kafka", "checkpoint")
    assert r.returncode == 0, r.stderr
    ck = json.loads(r.stdout)
    assert ck["checkpoint_id"] and len(ck["partitions"]) == 2 * len(scen)
    r = drt("--json", "--config", cfg, "kafka", "lag")
    assert r.returncode == 0, r.stderr
    lag = json.loads(r.stdout)
    assert lag["caught_up"] is True and lag["topics"] == [topic]
    assert {"topic", "partition", "hot_end", "cold_end", "records_behind", "seconds_behind",
            "oldest_unmirrored_ts", "safe_time", "basis", "method"} <= set(lag["partitions"][0])
    r = drt("--json", "--config", cfg, "kafka", "remap", "--group", group)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["applied"] is False
    assert {"topic", "partition", "source_offset", "source_timestamp", "target_offset", "method", "probes",
            "duplicate_window", "may_reread"} <= set(out["partitions"][0])
    cold = topo.cold.kafka.bootstrap_servers
    assert all(o < 0 for o in committed(cold, group, topic, len(scen)).values())  # dry run wrote nothing
    r = drt("--json", "--config", cfg, "kafka", "remap", "--group", group, "--apply")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["applied"] is True
    assert committed(cold, group, topic, len(scen))[4] == 12  # consumed nothing, 12 cold-only records first
    # Without a topology: bootstrap addresses on the command line, the checkpoint taken fresh.
    r = drt("--json", "--config", "/nonexistent/drt.yaml", "kafka", "remap", "--group", group,
            "--source-bootstrap", topo.hot.kafka.bootstrap_servers, "--target-bootstrap", cold)
    assert r.returncode == 0, r.stderr
    assert {p["partition"]: p["target_offset"] for p in json.loads(r.stdout)["partitions"]}[0] == 7 + 137


def test_cli_remap_all_groups_at_once_plans_then_applies_each_group(kafka_mirror) -> None:
    topo, ledger, topic, group, idle, scen = kafka_mirror
    cfg = topo.source_file
    cold = topo.cold.kafka.bootstrap_servers
    r = drt("--json", "--config", cfg, "kafka", "remap")
    assert r.returncode == 2 and "--group G or --all" in r.stderr
    assert drt("--json", "--config", cfg, "kafka", "checkpoint").returncode == 0
    single = json.loads(drt("--json", "--config", cfg, "kafka", "remap", "--group", group).stdout)
    r = drt("--json", "--config", cfg, "kafka", "remap", "--all")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["applied"] is False and set(plan["groups"]) <= {group, idle} and group in plan["groups"]
    ours = {p["partition"]: p["target_offset"] for p in plan["groups"][group]["partitions"]}
    assert ours == {p["partition"]: p["target_offset"] for p in single["partitions"]}  # same answer as one by one
    assert all(o < 0 for o in committed(cold, group, topic, len(scen)).values())  # a dry run wrote nothing
    planned = [e for e in ledger.audit_events() if e["action"] == "remap" and e["target"].startswith(group)]
    assert planned and all(e["status"] == "planned" for e in planned)
    r = drt("--json", "--config", cfg, "kafka", "remap", "--all", "--apply", "--who", "erin")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert done["applied"] is True and done["failed"] == [] and done["groups"][group]["applied"] is True
    now = committed(cold, group, topic, len(scen))
    assert {p: o for p, o in now.items() if ours.get(p) is not None} == {p: o for p, o in ours.items() if o is not None}
    applied = [e for e in ledger.audit_events() if e["action"] == "apply_offsets" and e["target"] == group]
    assert applied and applied[-1]["status"] == "done" and applied[-1]["actor"] == "erin"


def test_partition_count_mismatch_is_a_clear_error_and_writes_nothing(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic, group = unique("parity"), unique("g")
    create_topic(hot, topic, 2)
    create_topic(cold, topic, 3)
    produce(hot, topic, 0, [Rec(b"a", 1000)])
    ledger_url = f"sqlite:///{tmp_path}/l.db"
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[group],
                         ledger_url=ledger_url)
    commit_after_consuming(hot, group, topic, {0: 1, 1: 0})
    for args in (("kafka", "lag"), ("kafka", "remap", "--group", group, "--apply")):
        r = drt("--config", str(cfg), *args)
        assert r.returncode == 2, (args, r.stderr)
        line = _one_line(r)
        assert f"partition count mismatch for topic '{topic}'" in line and "hot has 2" in line \
            and "cold has 3" in line, line
    assert all(o < 0 for o in committed(cold, group, topic, 3).values())
    assert Ledger.open(ledger_url).audit_events(component="kafka") == []


def test_topic_missing_on_cold_is_a_clear_error(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    topic = unique("missing")
    create_topic(hot, topic, 1)
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[topic], groups=[],
                         ledger_url=f"sqlite:///{tmp_path}/l.db")
    r = drt("--config", str(cfg), "kafka", "lag")
    assert r.returncode == 2
    line = _one_line(r)
    assert f"topic {topic} missing on the cold Kafka cluster" in line and cold in line


def test_unreachable_broker_exit_3_names_the_address_and_writes_nothing(kafka_env, tmp_path: Path) -> None:
    hot, _ = kafka_env
    dead = f"127.0.0.1:{free_port()}"
    ledger_url = f"sqlite:///{tmp_path}/l.db"
    cfg = write_topology(tmp_path / "drt.yaml", hot=dead, cold=hot, topics=["t"], groups=["g"],
                         ledger_url=ledger_url, timeout_s=2)
    for args in (("kafka", "checkpoint"), ("kafka", "lag"), ("kafka", "remap", "--group", "g")):
        r = drt("--config", str(cfg), *args)
        assert r.returncode == 3, (args, r.stderr)
        line = _one_line(r)
        assert dead in line and "did not answer" in line, line
    led = Ledger.open(ledger_url)
    assert led.latest_checkpoint("g") == [] and led.audit_events(component="kafka") == []
    cfg = write_topology(tmp_path / "drt2.yaml", hot=hot, cold=dead, topics=["t"], groups=["g"],
                         ledger_url=ledger_url, timeout_s=2)
    r = drt("--config", str(cfg), "kafka", "lag")
    assert r.returncode == 3 and dead in _one_line(r)
