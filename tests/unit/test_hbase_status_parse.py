"""Parsing the hbase shell's `status 'replication'` output (HBase 1.x one-line and 2.x multi-line forms)."""

from __future__ import annotations

from dr_toolkit.hbase.status import parse_status_replication, wal_sort_key

STATUS_1X = """\
version 1.4.13
2 live servers
    rs1.example.com:
       SOURCE: PeerID=1, AgeOfLastShippedOp=0, SizeOfLogQueue=0, TimeStampsOfLastShippedOp=Thu Aug 20 10:19:53 UTC 2020, Replication Lag=0
       SINK  : AgeOfLastAppliedOp=0, TimeStampsOfLastAppliedOp=Thu Aug 20 10:19:53 UTC 2020
    rs2.example.com:
       SOURCE: PeerID=1, AgeOfLastShippedOp=1520, SizeOfLogQueue=3, TimeStampsOfLastShippedOp=Thu Aug 20 10:19:50 UTC 2020, Replication Lag=3200
       SINK  : AgeOfLastAppliedOp=0, TimeStampsOfLastAppliedOp=Thu Aug 20 10:19:53 UTC 2020
"""

STATUS_2X = """\
version 2.4.17
1 live servers
  rs1.example.com:
    SOURCE: PeerID=1
           Normal Queue: 1
           AgeOfLastShippedOp=0, TimeStampOfLastShippedOp=Mon Jun 01 12:00:00 UTC 2020, SizeOfLogQueue=0, \
EditsReadFromLogQueue=10, OpsShippedToTarget=10, TimeStampOfNextToReplicate=Mon Jun 01 12:00:00 UTC 2020, \
Replication Lag=0
    SOURCE: PeerID=2
           Normal Queue: 2
           AgeOfLastShippedOp=0, TimeStampOfLastShippedOp=Mon Jun 01 11:00:00 UTC 2020, SizeOfLogQueue=1, \
Replication Lag=3600000
    SINK: TimeStampStarted=1591012345678, Waiting for OPs...
"""


def test_parse_1x() -> None:
    st = parse_status_replication(STATUS_1X)
    assert st.version == "1.4.13" and st.live_servers == 2
    assert [(s.server, s.peer_id, s.size_of_log_queue, s.replication_lag, s.age_of_last_shipped_op)
            for s in st.sources] == [("rs1.example.com", "1", 0, 0, 0), ("rs2.example.com", "1", 3, 3200, 1520)]
    assert st.sources[0].timestamps_of_last_shipped_op == "Thu Aug 20 10:19:53 UTC 2020"
    assert len(st.sinks) == 2 and st.sinks[0]["AgeOfLastAppliedOp"] == "0"
    assert not st.caught_up


def test_parse_2x_multiline_sources() -> None:
    st = parse_status_replication(STATUS_2X)
    assert [(s.peer_id, s.size_of_log_queue, s.replication_lag) for s in st.sources] == [("1", 0, 0),
                                                                                         ("2", 1, 3600000)]
    assert st.sources[1].timestamps_of_last_shipped_op == "Mon Jun 01 11:00:00 UTC 2020"
    assert not st.caught_up
    only_first = STATUS_2X.split("    SOURCE: PeerID=2")[0]
    assert parse_status_replication(only_first).caught_up


def test_wal_order_by_timestamp_suffix() -> None:
    wals = ["rs1%2C16020%2C1.1700000000010", "rs1%2C16020%2C1.1700000000002", "rs1%2C16020%2C1.1700000000100"]
    assert sorted(wals, key=wal_sort_key)[0].endswith("0002")


def test_cli_parse_status(tmp_path, capsys) -> None:
    import json

    from dr_toolkit.cli.main import main

    f = tmp_path / "status.txt"
    f.write_text(STATUS_1X)
    assert main(["--json", "hbase", "parse-status", str(f)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["caught_up"] is False and doc["sources"][1]["size_of_log_queue"] == 3
    f.write_text("nothing here\n")
    assert main(["hbase", "parse-status", str(f)]) == 1
    assert "no SOURCE lines found" in capsys.readouterr().err
