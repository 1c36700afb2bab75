"""The ledger on SQLite and on a real PostgreSQL 15: schema, records, and the per-policy lease."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from dr_toolkit.errors import LeaseHeld
from dr_toolkit.ledger import SCHEMA_VERSION, Ledger

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/ledger.db"
    pg = request.getfixturevalue("postgres")
    import uuid

    return pg.create_database(f"ledger_{uuid.uuid4().hex[:8]}")


def test_migrate_is_idempotent_and_versioned(ledger_url: str) -> None:
    a = Ledger.open(ledger_url)
    b = Ledger.open(ledger_url)  # second apply changes nothing and does not fail
    assert a.schema_version() == b.schema_version() == SCHEMA_VERSION
    assert a.migrate() == SCHEMA_VERSION


def test_runs_manifests_watermarks(ledger_url: str) -> None:
    lg = Ledger.open(ledger_url)
    run = lg.start_run(source="hdfs://hot/a", target="hdfs://cold/a", policy="p1")
    lg.add_manifest(manifest_id="m1", source="hdfs://hot/a", target="hdfs://cold/a", location="file:///x/m1.jsonl",
                    entries=3, total_bytes=30, source_time=1000.0, policy="p1")
    lg.finish_run(run, status="succeeded", mode="bootstrap", manifest_id="m1",
                  stats={"files_total": 3, "files_copied": 3, "bytes_copied": 30}, detail={"fallbacks": []})
    [r] = lg.runs(policy="p1")
    assert (r["status"], r["mode"], r["files_copied"], r["bytes_copied"], r["manifest_id"]) == \
        ("succeeded", "bootstrap", 3, 30, "m1")
    assert r["detail"] == {"fallbacks": []}
    assert lg.last_manifest(source="hdfs://hot/a", target="hdfs://cold/a")["manifest_id"] == "m1"
    lg.set_watermark("hdfs", "p1", 1000.0)
    lg.set_watermark("hdfs", "p1", 2000.0, {"manifest": "m1"})
    [w] = lg.watermarks("hdfs")
    assert w["watermark"] == 2000.0 and w["detail"] == {"manifest": "m1"}
    s = lg.status()
    assert s["replication"][0]["policy"] == "p1"


def test_checkpoints_reports_audit(ledger_url: str) -> None:
    lg = Ledger.open(ledger_url)
    lg.add_checkpoint("c1", [{"group_id": "g", "topic": "t", "partition_id": p, "committed_offset": 10 * p,
                              "record_timestamp": 5 + p, "timestamp_type": "create", "fingerprint": "f"}
                             for p in range(3)])
    time.sleep(0.01)
    lg.add_checkpoint("c2", [{"group_id": "g", "topic": "t", "partition_id": 0, "committed_offset": None}])
    latest = lg.latest_checkpoint("g")
    assert [(r["checkpoint_id"], r["committed_offset"]) for r in latest] == [("c2", None)]
    counters = {"GOODROWS": 9, "BADROWS": 1, "ONLY_IN_SOURCE_TABLE_ROWS": 1, "ONLY_IN_PEER_TABLE_ROWS": 0,
                "CONTENT_DIFFERENT_ROWS": 0}
    lg.add_verify_report(report_id="v1", source="a", target="b", counters=counters, source_rows=10, peer_rows=9,
                         started_at=1.0, finished_at=2.0, name="ds", detail={"sample": {"x": [1]}})
    assert lg.verify_reports(name="ds")[0]["badrows"] == 1
    run = lg.start_failover_run(reason="drill", execute=False)
    lg.audit(component="failover", action="fence", dry_run=True, status="planned", run_id=run,
             before={"epoch": 1}, after={"epoch": 2}, message="postgresql://u:hunter2@db/x")
    [e] = lg.audit_events(run_id=run)
    assert e["before_state"] == {"epoch": 1} and e["after_state"] == {"epoch": 2}
    assert "hunter2" not in e["message"]


def _hold_lease(url: str, name: str, started, release) -> None:  # runs in a child process
    lg = Ledger.open(url)
    with lg.lease(name, ttl_s=30):
        started.set()
        release.wait(30)


def test_lease_excludes_a_second_process(ledger_url: str) -> None:
    ctx = mp.get_context("spawn")
    started, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_lease, args=(ledger_url, "policy:warehouse", started, release))
    child.start()
    try:
        assert started.wait(60), "child did not take the lease"
        lg = Ledger.open(ledger_url)
        with pytest.raises(LeaseHeld, match="policy:warehouse"), lg.lease("policy:warehouse"):
            pass
        with lg.lease("policy:other"):  # other policies are not blocked
            pass
    finally:
        release.set()
        child.join(30)
    with Ledger.open(ledger_url).lease("policy:warehouse"):  # released when the holder finished
        pass


def test_lease_of_a_killed_holder_expires(ledger_url: str) -> None:
    lg = Ledger.open(ledger_url)
    assert lg.try_acquire_lease("policy:x", "dead-holder", ttl_s=0.2)
    assert not lg.try_acquire_lease("policy:x", "me", ttl_s=10)
    time.sleep(0.3)
    assert lg.try_acquire_lease("policy:x", "me", ttl_s=10)
