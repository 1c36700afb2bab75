"""Gate checks recorded in the ledger (``gate_checks``) and their downsampled history, on SQLite
and a real PostgreSQL; the gate records only when asked (CLI check yes, dry-run runbook no)."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.gate import check, slo_breach
from dr_toolkit.ledger import SCHEMA_VERSION, Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import add_verify_report, drt, write_topology

pytestmark = pytest.mark.integration

NOW = 1_800_000_000.0


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ledger.db"
    import uuid

    return request.getfixturevalue("postgres").create_database(f"gates_{uuid.uuid4().hex[:8]}")


def _add(lg: Ledger, at: float, rpo: float | None, *, lag: dict[str, float] | None = None,
         verdict: str = "GO") -> str:
    comps = {f"{c} x": {"component": c, "name": "x", "caught_up": True, "lag_s": v, "safe_time": at - v}
             for c, v in (lag or {}).items()}
    return lg.add_gate_check(checked_at=at, verdict=verdict, recovery_point=None if rpo is None else at - rpo,
                             components=comps, reasons=[], source="test", who="tester")


def test_rpo_is_derived_and_null_without_a_recovery_point(ledger_url: str) -> None:
    lg = Ledger.open(ledger_url)
    assert lg.schema_version() == SCHEMA_VERSION == 2
    _add(lg, NOW - 10, 42.5)
    _add(lg, NOW - 5, None, verdict="NO_GO")
    new, old = lg.gate_checks(limit=10)
    assert new["rpo_s"] is None and new["recovery_point"] is None and new["verdict"] == "NO_GO"
    assert old["rpo_s"] == pytest.approx(42.5) and old["recovery_point"] == pytest.approx(NOW - 52.5)
    assert old["source"] == "test" and old["actor"] == "tester" and old["components"] == {}


def test_history_downsamples_keeping_the_worst_and_never_hides_a_breach(ledger_url: str) -> None:
    lg = Ledger.open(ledger_url)
    _add(lg, NOW - 8 * 86400, 99999.0)  # outside the 7-day window: not shown
    for i in range(120):  # every 30 min over 2.5 days: 120 checks into 10 buckets over 7 days
        t = NOW - 2.5 * 86400 + i * 1800
        _add(lg, t, 900.0 if i == 37 else 60.0, lag={"hbase": 5.0 + (100 if i == 37 else 0), "kafka": 1.0})
    _add(lg, NOW - 60, None, verdict="NO_GO")  # no recovery point in the newest bucket
    h = lg.gate_check_history(days=7, buckets=10, now=NOW)
    assert h["checks"] == 121 and len(h["buckets"]) <= 10 and h["bucket_s"] == pytest.approx(7 * 86400 / 10)
    assert [b["start"] for b in h["buckets"]] == sorted(b["start"] for b in h["buckets"])
    assert all(b["rpo_s"] != 99999.0 for b in h["buckets"])
    worst = max(h["buckets"], key=lambda b: b["rpo_s"] or 0)
    assert worst["rpo_s"] == 900.0 and worst["lag"]["hbase"] == 105.0  # one bad check among ~17 good ones
    assert sum(b["checks"] for b in h["buckets"]) == 121
    assert h["buckets"][-1]["no_recovery_point"] == 1 and h["buckets"][-1]["no_go"] == 1
    assert h["last"]["rpo_s"] is None  # the newest check
    one = lg.gate_check_history(days=7, buckets=1, now=NOW)["buckets"]
    assert len(one) == 1 and one[0]["rpo_s"] == 900.0 and one[0]["no_recovery_point"] == 1


def test_a_version_1_ledger_gains_the_table_on_open(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    Ledger.open(url)
    with sqlite3.connect(tmp_path / "old.db") as db:  # as a version-1 ledger left it
        db.execute("DROP TABLE gate_checks")
        db.execute("DELETE FROM schema_version WHERE version = 2")
    lg = Ledger.open(url)
    assert lg.schema_version() == 2 and lg.gate_checks() == []
    _add(lg, NOW, 1.0)
    assert len(lg.gate_checks()) == 1


def test_reasons_are_stored_redacted(ledger_url: str) -> None:
    lg = Ledger.open(ledger_url)
    lg.add_gate_check(checked_at=NOW, verdict="NO_GO", recovery_point=None, components={}, source="test",
                      reasons=["kafka x: cannot reach postgresql://drt:s3cret@db/x password=hunter2"])
    [row] = lg.gate_checks()
    assert "s3cret" not in json.dumps(row) and "hunter2" not in json.dumps(row)
    assert row["reasons"][0].startswith("kafka x: cannot reach")


def test_slo_rule() -> None:
    assert slo_breach(10.0, None) is None  # no SLO: nothing breaches
    assert slo_breach(None, None) is None
    assert slo_breach(300.0, 300.0) is None  # at the SLO: not a breach
    assert "301s old" in (slo_breach(301.0, 300.0, "verify x") or "")
    assert "no recovery point" in (slo_breach(None, 300.0, "hbase peer 1") or "")


def test_gate_records_when_asked_and_a_read_only_ledger_keeps_the_verdict(tmp_path) -> None:
    path = write_topology(tmp_path, zk=None, verify=[{"name": "t", "source": "hdfs://hot/t",
                                                      "target": "hdfs://cold/t", "key": ["id"]}])
    topo = load_topology(path)
    lg = Ledger.open(topo.ledger.url)
    add_verify_report(lg, "t", age_s=600, source="hdfs://hot/t", target="hdfs://cold/t")
    res = check(topo, lg, access=Access.from_env())  # not asked: nothing recorded
    assert res.recorded is None and lg.gate_checks() == []
    res = check(topo, lg, record="test:unit", who="ops@x", access=Access.from_env())
    [row] = lg.gate_checks()
    assert row["check_id"] == res.recorded and row["source"] == "test:unit" and row["actor"] == "ops@x"
    assert row["rpo_s"] == pytest.approx(res.rpo_s) and row["rpo_s"] >= 600
    assert row["components"]["verify t"]["safe_time"] == pytest.approx(res.recovery_point)
    assert res.to_json()["rpo_s"] == pytest.approx(res.rpo_s, abs=1e-3)

    from sqlalchemy import create_engine

    ro = Ledger(create_engine(f"sqlite:///file:{tmp_path / 'ledger.db'}?mode=ro&uri=true"))  # refuses writes
    res = check(topo, ro, record="test:ro", access=Access.from_env())
    assert res.verdict == "GO" and res.recorded is None
    assert res.record_error and "not recorded" in res.record_error and "\n" not in res.record_error
    assert len(lg.gate_checks()) == 1


def test_cli_check_records_and_a_dry_run_failover_records_nothing(tmp_path, hbase_worlds) -> None:
    """The real `drt` CLI in subprocesses against the real HBase pair (drained: the gate says GO)."""
    path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1"}],
                          hbase_clusters=hbase_worlds.clusters)
    topo = load_topology(path)
    hbase_worlds(topo, lagging=False)
    lg = Ledger.open(topo.ledger.url)
    r = drt("--json", "failover", "check", config=path, env={"DRT_ACTOR": "dave@ops"})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    [row] = lg.gate_checks()
    assert doc["gate_check_id"] == row["check_id"] and row["source"] == "cli" and row["actor"] == "dave@ops"
    assert row["verdict"] == "GO" and row["rpo_s"] is not None and list(row["components"]) == ["hbase 1"]
    before = time.time()
    r = drt("--json", "failover", "run", "--reason", "drill", config=path)
    assert json.loads(r.stdout)["dry_run"] is True
    assert lg.gate_checks(since=before) == []  # the dry run's gates wrote nothing here


def test_only_a_report_of_the_policy_itself_counts_for_the_verification_signal(tmp_path) -> None:
    """Issue 20 #13: an ad-hoc `drt verify --name P` over the last hour (or another source, key,
    ...) must not turn the policy's BADROWS NO_GO into GO; a report of the policy's own source,
    target, key, options and full range does."""
    path = write_topology(tmp_path, zk=None, verify=[{"name": "t", "source": "hdfs://hot/t",
                                                      "target": "hdfs://cold/t", "key": ["id"]}])
    topo = load_topology(path)
    lg = Ledger.open(topo.ledger.url)
    mine = {"source": "hdfs://hot/t", "target": "hdfs://cold/t"}
    add_verify_report(lg, "t", bad=3, age_s=30, **mine)
    res = check(topo, lg, access=Access.from_env())
    assert res.verdict == "NO_GO" and "verify t: last verification found 3 bad rows" in res.reasons
    for other in ({"start_time": time.time() - 3600, **mine}, {"source": "hdfs://hot/t/2026", "target": mine["target"]},
                  {"key": ("id", "day"), **mine}):
        add_verify_report(lg, "t", bad=0, **other)  # named like the policy, asks something else
        res = check(topo, lg, access=Access.from_env())
        assert res.verdict == "NO_GO" and "verify t: last verification found 3 bad rows" in res.reasons, other
    lg2 = Ledger.open(f"sqlite:///{tmp_path / 'other.db'}")
    add_verify_report(lg2, "t", bad=0, start_time=time.time() - 3600, **mine)
    res = check(topo, lg2, access=Access.from_env())
    assert res.verdict == "NO_GO" and any("ask something else: a start time" in r for r in res.reasons), res.reasons
    add_verify_report(lg, "t", bad=0, **mine)
    assert check(topo, lg, access=Access.from_env()).verdict == "GO"
