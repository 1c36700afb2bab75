"""The ledger on SQLite and on a real PostgreSQL 15: schema, records, and the per-policy lease."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from dr_toolkit.errors import LeaseHeld
from dr_toolkit.ledger import SCHEMA_VERSION, Ledger, ManifestRow, VerifyReportRow

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
    lg.add_manifest(ManifestRow(manifest_id="m1", source="hdfs://hot/a", target="hdfs://cold/a",
                                location="file:///x/m1.jsonl", entries=3, total_bytes=30, source_time=1000.0,
                                policy="p1"))
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


def test_set_watermarks_is_set_watermark_of_each_name_in_one_call(ledger_url: str) -> None:
    """Many names at once (the gate's per-partition proofs): existing names updated, new ones
    inserted, other components untouched, the same rows as one set_watermark per name."""
    lg = Ledger.open(ledger_url)
    lg.set_watermark("kafka", "t[0]:proven", 1.0, {"old": True})
    lg.set_watermark("hdfs", "t[0]:proven", 7.0)
    lg.set_watermarks("kafka", [("t[0]:proven", 5.0, {"n": 0}), ("t[1]:proven", 6.0, None)])
    lg.set_watermarks("kafka", [])
    got = {(w["component"], w["name"]): (w["watermark"], w["detail"]) for w in lg.watermarks()}
    assert got == {("kafka", "t[0]:proven"): (5.0, {"n": 0}), ("kafka", "t[1]:proven"): (6.0, None),
                   ("hdfs", "t[0]:proven"): (7.0, None)}


def test_checkpoints_reports_audit(ledger_url: str) -> None:
    lg = Ledger.open(ledger_url)
    lg.add_checkpoint("c1", [{"group_id": "g", "topic": "t", "partition_id": p, "committed_offset": 10 * p,
                              "record_timestamp": 5 + p, "timestamp_type": "create", "fingerprint": "f"}
                             for p in range(3)])
    time.sleep(0.01)
    lg.add_checkpoint("c2", [{"group_id": "g", "topic": "t", "partition_id": 0, "committed_offset": None}])
    latest = lg.latest_checkpoint("g")
    assert [(r["checkpoint_id"], r["committed_offset"]) for r in latest] == [("c2", None)]
    lg.add_checkpoint("c3", [{"group_id": f"h{i}", "topic": "t", "partition_id": p, "committed_offset": p}
                             for i in range(7) for p in range(2)])
    many = lg.latest_checkpoints(["g", "nobody", *(f"h{i}" for i in range(7))], chunk=3)  # chunks of 3
    assert many == {g: lg.latest_checkpoint(g) for g in ["g", "nobody", *(f"h{i}" for i in range(7))]}
    assert many["nobody"] == [] and [r["partition_id"] for r in many["h6"]] == [0, 1]
    counters = {"GOODROWS": 9, "BADROWS": 1, "ONLY_IN_SOURCE_TABLE_ROWS": 1, "ONLY_IN_PEER_TABLE_ROWS": 0,
                "CONTENT_DIFFERENT_ROWS": 0}
    lg.add_verify_report(VerifyReportRow(report_id="v1", source="a", target="b", counters=counters, source_rows=10,
                                         peer_rows=9, started_at=1.0, finished_at=2.0, name="ds",
                                         detail={"sample": {"x": [1]}}))
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


# --- opening the ledger: open_ledger(topology, access), and failures as one error ------------------------

def _topology(tmp_path, ledger_yaml: str):  # type: ignore[no-untyped-def]
    from dr_toolkit.topology import load_topology

    cfg = tmp_path / "conf" / "drt.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("version: 1\nclusters:\n  a: {role: hot, local_root: a}\n  b: {role: cold, local_root: b}\n"
                   f"ledger: {ledger_yaml}\n")
    return load_topology(cfg)


def test_open_ledger_resolves_relative_sqlite_paths_against_the_topology(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import open_ledger

    monkeypatch.delenv("DRT_LEDGER_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    lg = open_ledger(_topology(tmp_path, "{url: 'sqlite:///../state/l.db'}"), Access.none())
    assert lg.url == f"sqlite:///{(tmp_path / 'state' / 'l.db').resolve()}"
    assert lg.schema_version() == SCHEMA_VERSION


def test_open_ledger_takes_the_password_from_the_connection(tmp_path, postgres) -> None:  # type: ignore[no-untyped-def]
    from dr_toolkit.access import Access
    from dr_toolkit.errors import ConfigError
    from dr_toolkit.ledger import open_ledger
    from dr_toolkit.secrets import Credentials

    url = postgres.create_database("ledger_conn")
    topo = _topology(tmp_path, f"{{url: '{url}', conn_id: drt_ledger}}")
    with pytest.raises(ConfigError, match="drt_ledger"):
        open_ledger(topo, Access.none())
    lg = open_ledger(topo, Access.from_mapping({"drt_ledger": Credentials("postgres", "p@ss:w/rd")}))
    assert lg.engine.url.password == "p@ss:w/rd"  # set on the URL object, never spliced into a string
    assert "p@ss" not in lg.url and lg.schema_version() == SCHEMA_VERSION


def test_a_ledger_that_fails_after_opening_is_one_unreachable_error(tmp_path, postgres) -> None:  # type: ignore[no-untyped-def]
    """A database dropped under a running command, a SQLite file overwritten: reads and writes
    become UnreachableError (exit 3), not a driver traceback."""
    import psycopg2

    from dr_toolkit.errors import UnreachableError

    url = postgres.create_database("ledger_dropped")
    lg = Ledger.open(url)
    lg.start_run(source="a", target="b")
    conn = psycopg2.connect(host="127.0.0.1", port=postgres.port, user="postgres", dbname="postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute('DROP DATABASE "ledger_dropped" WITH (FORCE)')
    conn.close()
    with pytest.raises(UnreachableError) as e:
        lg.status()
    assert e.value.exit_code == 3 and "ledger_dropped" in e.value.message
    assert "\n" not in e.value.message

    db = tmp_path / "l.db"
    lg = Ledger.open(f"sqlite:///{db}")
    lg.engine.dispose()
    for p in tmp_path.glob("l.db*"):
        p.write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(UnreachableError, match="not a database"):
        lg.start_run(source="a", target="b")


def test_lease_race_still_sees_integrity_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """_tx turns database failures into UnreachableError, but not the unique-key conflict the
    lease relies on."""
    lg = Ledger.open(f"sqlite:///{tmp_path}/l.db")
    assert lg.try_acquire_lease("p", "h1", 30)
    assert not lg.try_acquire_lease("p", "h2", 30)
    assert lg.try_acquire_lease("p", "h1", 30)  # renewal by the holder
