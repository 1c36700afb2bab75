"""The runbook's dry run writes through the ledger's dry-run view (on SQLite and a real PostgreSQL):
every transaction but the journal's (audit events, the failover run's record) is rolled back —
decided in the ledger's transaction, so a write method nobody listed is dropped too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dr_toolkit.ledger import Ledger, ManifestRow, VerifyReportRow
from dr_toolkit.ledger.store import text

pytestmark = pytest.mark.integration
JOURNAL = ("audit_events", "failover_runs")


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path) -> Ledger:  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        return Ledger.open(f"sqlite:///{tmp_path}/ledger.db")
    return Ledger.open(request.getfixturevalue("postgres").create_database(f"dry_{uuid.uuid4().hex[:8]}"))


def rows(lg: Ledger) -> dict[str, list[Any]]:
    """Every row of every table (the schema's, whatever it holds), by table."""
    from sqlalchemy import inspect

    out = {}
    for table in sorted(inspect(lg.engine).get_table_names()):
        with lg.engine.connect() as conn:
            out[table] = sorted(map(repr, conn.execute(text(f"SELECT * FROM {table}"))))
    return out


class NewerLedger(Ledger):
    """A ledger with a write method added after the dry run was written."""

    def add_something(self, event_id: str) -> None:
        self._insert("audit_events", {"event_id": event_id, "component": "x", "action": "y", "actor": "z",
                                      "dry_run": 0, "status": "done", "at": 0.0})


def test_a_dry_run_view_writes_only_the_journal(ledger: Ledger) -> None:
    before = rows(ledger)
    dry = ledger.dry_run()
    dry.start_run(source="hdfs://hot/a", target="hdfs://cold/a", policy="p", run_id="copy-1")
    dry.finish_run("copy-1", status="succeeded")
    dry.add_manifest(ManifestRow(manifest_id="m1", source="hdfs://hot/a", target="hdfs://cold/a",
                                 location="file:///m1", entries=1, total_bytes=1, source_time=1.0, policy="p"))
    dry.set_watermark("hbase", "peer:1:seen", 1.0, {"wals_queued": 0})
    dry.add_checkpoint("c1", [{"group_id": "g", "topic": "t", "partition_id": 0, "committed_offset": 1}])
    dry.add_verify_report(VerifyReportRow(report_id="v1", source="s", target="t", counters={
        "GOODROWS": 1, "BADROWS": 0, "ONLY_IN_SOURCE_TABLE_ROWS": 0, "ONLY_IN_PEER_TABLE_ROWS": 0,
        "CONTENT_DIFFERENT_ROWS": 0}, source_rows=1, peer_rows=1, started_at=1.0, finished_at=2.0))
    dry.add_gate_check(checked_at=2.0, verdict="GO", recovery_point=1.0, components={}, reasons=[], source="dry")
    with dry.lease("policy:p"):
        assert dry.lease_holder("policy:p") is None  # taken and released inside rolled-back transactions
    assert rows(ledger) == before  # nothing but ...
    rid = dry.start_failover_run(reason="drill", execute=False)
    dry.audit(component="failover", action="run", dry_run=True, status="started", run_id=rid)
    dry.set_failover_status(rid, "succeeded")
    after = rows(ledger)
    assert {t: v for t, v in after.items() if t not in JOURNAL} == {t: v for t, v in before.items() if t not in JOURNAL}
    assert ledger.failover_run(rid)["status"] == "succeeded"  # ... the journal is written
    assert [e["action"] for e in ledger.audit_events(run_id=rid)] == ["run"]


def test_a_write_method_added_later_is_dropped_too(ledger: Ledger) -> None:
    newer = NewerLedger(ledger.engine)
    newer.dry_run().add_something("evt-dry")
    newer.add_something("evt-real")
    assert [e["event_id"] for e in ledger.audit_events(component="x")] == ["evt-real"]
