"""The verification request (``VerifyRequest``): one value with one set of defaults and checks for
every front door — `drt verify`'s options, a verify policy, spark-submit's JSON — and the import
graph of the verify capability (it sits below the failover gate and beside its policy)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from dr_toolkit.cli import spark_submit as submit
from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import VerifyPolicy
from dr_toolkit.verify.request import DEFAULT_BUCKETS, VerifyRequest, policy_request

REPO = Path(__file__).resolve().parents[2]


def test_defaults_are_decided_once_and_lists_take_the_cli_spelling() -> None:
    r = VerifyRequest(source="file:///a", target="file:///b", key="id, region", ignore_columns="x,,y")
    assert (r.key, r.ignore_columns, r.buckets, r.sample_size, r.format) == (["id", "region"], ["x", "y"],
                                                                             DEFAULT_BUCKETS, 20, "parquet")
    assert r.to_json() == {"source": "file:///a", "target": "file:///b", "key": ["id", "region"],
                           "ignore_columns": ["x", "y"]}
    assert VerifyRequest.parse(json.dumps(r.to_json())) == r


@pytest.mark.parametrize("fields, message", [
    ({}, "missing --key"),
    ({"key": "id", "families": "d"}, "--families is for hbase:// tables only"),
    ({"key": "id", "hbase_rootdir": "hdfs://nn/hbase"}, "--hbase-rootdir is for hbase:// tables only"),
    ({"key": "id", "start_time": "2024-01-01"}, "a time window needs the timestamp column"),
    ({"key": "id", "ts_column": "ts", "start_time": "yesterday"}, "--start-time 'yesterday' is not a time"),
    ({"key": "id", "ts_column": "ts", "start_time": "2", "end_time": "1"}, "is not after --start-time"),
    ({"key": "id", "ts_column": "ts", "as_of": "1", "end_time": "2"}, "both set the end of the window"),
    ({"key": "id", "buckets": 0}, "buckets must be at least 1"),
    ({"key": "id", "abs_tol": -1}, "abs_tol must be a number >= 0"),
    ({"key": "id", "colour": "red"}, "unknown field colour"),
    ({"key": "id", "buckets": "many"}, "field buckets: Input should be a valid integer"),
])
def test_bad_requests_are_one_config_error(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        VerifyRequest.parse({"source": "file:///a", "target": "file:///b", **fields})
    assert message in err.value.message and "\n" not in err.value.message


def test_hbase_tables_take_no_key_and_as_of_ends_their_window() -> None:
    with pytest.raises(ConfigError, match="hbase:// tables take no --key"):
        VerifyRequest(source="hbase://hot/t", target="hbase://cold/t", key="id")
    r = VerifyRequest(source="hbase://hot/t", target="hbase://cold/t", as_of="1000", families="d")
    assert r.keys() == ["row"] and r.window() == (None, 1000.0, None)
    files = VerifyRequest(source="file:///a", target="file:///b", key="id", as_of="1000")
    assert files.window() == (None, None, 1000.0)  # an HDFS tree: read through the snapshot at 1000
    rows = VerifyRequest(source="file:///a", target="file:///b", key="id", ts_column="ts", as_of="1000")
    assert rows.window() == (None, 1000.0, None)  # rows stamped before it
    with pytest.raises(ConfigError, match="is after now"):
        VerifyRequest(source="file:///a", target="file:///b", key="id", as_of="2999-01-01").window()
    point = VerifyRequest(source="file:///a", target="file:///b", key="id", as_of="recovery-point")
    with pytest.raises(ConfigError, match="not resolved to a time"):
        point.window()
    assert point.wants_recovery_point and point.at(1000.0).window() == (None, None, 1000.0)


def test_a_policy_asks_what_its_reports_record() -> None:
    """The gate counts a report for a policy only when the report's request equals what the policy
    asks: the run's own fields (report path, id, the end of its window) are not part of it."""
    p = VerifyPolicy(name="orders", source="hdfs://hot/o", target="hdfs://cold/o", key=["id"], ts_column="ts",
                     abs_tol=0.5, ignore_columns=["z", "a"])
    run = policy_request(p, report_path="/r/x.html", report_id="verify-1", end_time="1000")
    assert run.fingerprint() == policy_request(p).fingerprint()
    fp = run.fingerprint()
    assert (fp["key"], fp["ts_column"], fp["ignore_columns"], fp["full_range"]) == (["id"], "ts", ["a", "z"], True)
    assert fp["options"]["abs_tol"] == 0.5 and "hdfs://" not in json.dumps(fp)  # URIs kept as digests
    hb = policy_request(VerifyPolicy(name="t", source="hbase://hot/t", target="hbase://cold/t", key=["row"]))
    assert hb.fingerprint()["options"] == {"hbase": {"families": [], "row_prefixes": [], "start_ms": 0,
                                                     "versions": 1, "raw": False}}
    assert VerifyRequest(source="hdfs://hot/o", target="hdfs://cold/o", key="id", ts_column="ts",
                         start_time="1").fingerprint()["full_range"] is False


def test_spark_submit_reads_the_same_request_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"source": "file:///a", "target": "file:///b", "key": ["id"], "abs_tol": 0.1, "families": []}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    assert submit.request_of(json.dumps(doc)) == submit.request_of(f"@{tmp_path}/r.json") == VerifyRequest(**doc)
    # bad input: one line, exit 2, before any Spark session starts
    for req, needle in (('{"source": "file:///a"}', "missing field target"), ("{x", "not valid JSON"),
                        ('{"source": "file:///a", "target": "file:///b", "key": "id", "fmt": "csv"}',
                         "unknown field fmt"), (f"@{tmp_path}/none.json", "the request file cannot be read")):
        assert submit.main(["verify", "--request", req]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("drt: error:") and needle in err[0], err


def _imports(path: Path) -> set[str]:
    """Every dr_toolkit module ``path`` imports, at module level or inside a function."""
    out: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("dr_toolkit"):
            out |= {n.module or ""} | {f"{n.module}.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names if a.name.startswith("dr_toolkit")}
    return out


def test_verify_imports_point_down_and_close_no_cycle() -> None:
    """verify never imports the failover package (the gate reads verify's signal), the topology
    never imports verify, and the verify modules import each other without a cycle."""
    pkg = REPO / "dr_toolkit" / "verify"
    mods = {f"dr_toolkit.verify.{p.stem}": _imports(p) for p in pkg.glob("*.py") if p.stem != "__init__"}
    for m, deps in mods.items():
        assert not {d for d in deps if d.startswith("dr_toolkit.failover")}, m
    assert not {d for d in _imports(REPO / "dr_toolkit" / "topology.py") if d.startswith("dr_toolkit.verify")}
    graph = {m: {d for d in deps if d in mods and d != m} for m, deps in mods.items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in graph[m]:
            assert state.get(d) != 1, " -> ".join([*path, m, d])
            if d not in state:
                visit(d, [*path, m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])

