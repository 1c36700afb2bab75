"""`drt hbase status --json`'s queue entries: every field of QueueStatus but the two kept for the check
itself (``wal_names``, ``wal_length``) — built by hand since issue 42 (no deep copy per queue), so a field
added later must not be left out of the JSON."""

from __future__ import annotations

from dataclasses import asdict

from dr_toolkit.hbase.status import QueueStatus


def test_queue_json_is_every_field_but_the_internal_ones() -> None:
    q = QueueStatus(server="rs1,16020,1", peer="1", queue_id="1-rs0,16020,0", wals=2, size_of_log_queue=1,
                    position=42, current_wal="w.1", dead=True, recovered=True, claimed_by="rs2,16020,2",
                    dead_servers=["rs0,16020,0"], drained=False, basis="wal-length", reason="r",
                    wal_names=["w.1", "w.2"], wal_length=100)
    expected = asdict(q)
    del expected["wal_names"], expected["wal_length"]
    assert q.to_json() == expected
    assert list(q.to_json()) == list(expected)  # the same order as before
    q.dead_servers.append("x")
    assert q.to_json()["dead_servers"] == ["rs0,16020,0", "x"]
