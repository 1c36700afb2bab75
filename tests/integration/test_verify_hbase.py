"""`drt verify hbase://hot/ns:table hbase://cold/ns:table` on the real HBase pair, side by side with
HBase's own VerifyReplication (hbase-mapreduce, local job runner) on the same tables.

The table ``drt:vr`` (families ``d``, REPLICATION_SCOPE 1, and ``x``, scope 0 on hot: excluded from
replication; 3 versions) gets 200 rows on hot that the real peer ships to cold, then planted
differences: rows missing on cold (deleted there), rows only on cold, a cell whose value cold
changed, an extra older version on cold, a delete on hot in the excluded family (its marker never
replicated), and a cell only hot has in the excluded family. Each option set is run by both tools
and every counter must be identical.

Our side runs in a subprocess (the CLI once, ``verify()`` for the rest): its Spark session carries
the HBase client jars (``DRT_HBASE_CLASSPATH``, what ``hbase mapredcp`` prints; here the
launcher's :func:`drt_servers.hbase.mapredcp`), which the suite's shared session does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]
TABLE = "drt:vr"
ROWS = 200
COUNTERS = ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS", "CONTENT_DIFFERENT_ROWS")


def row(i: int) -> str:
    return f"row-{i:010d}"  # as HBaseMiniServer's `put` names them


@pytest.fixture(scope="module")
def planted(hbase_clusters: tuple[Any, Any]) -> tuple[Any, Any]:
    from tests.support.fixtures_hbase import restore_hbase

    hot, cold = hbase_clusters
    restore_hbase(hot, cold)  # peer 1 enabled, whatever an earlier test left
    for c in (cold, hot):
        c.drop_table(TABLE)
        c.create_table(TABLE, "d,x", 1, 3)
    hot.alter_scope(TABLE, "x", 0)  # family x is excluded from replication
    hot.put_cell(TABLE, row(50), "d", "c", "v1", ts=1_000)  # replicated; cold changes it below
    hot.put(0, ROWS, table=TABLE, family="d", value_bytes=20)
    # one region server, one WAL, shipped in order: every row on cold means the d:c cell is there too
    cold.wait_rows(ROWS, table=TABLE)
    # planted differences (cold is written directly: it has no peer, nothing flows back)
    cold.delete(TABLE, row(10))  # ONLY_IN_SOURCE
    cold.delete(TABLE, row(11))  # ONLY_IN_SOURCE
    cold.put_cell(TABLE, row(100) + "a", "d", "q", "peer-only")  # ONLY_IN_PEER (after the first source row)
    cold.put_cell(TABLE, row(150) + "a", "d", "q", "peer-only")  # ONLY_IN_PEER
    cold.put_cell(TABLE, row(50), "d", "c", "v2", ts=1_000)  # changed cell: same coordinates, other value
    cold.put_cell(TABLE, row(60), "d", "q", "older", ts=5)  # an extra (older) version: only --versions sees it
    for c in (hot, cold):  # x:q on both (x is not replicated: written on each) ...
        c.put_cell(TABLE, row(70), "x", "q", "same", ts=2_000)
    hot.delete(TABLE, row(70), "x", "q")  # ... then deleted on hot: the marker is never replicated
    hot.put_cell(TABLE, row(80), "x", "q", "hot-only")  # a cell in the excluded family
    return hot, cold


@pytest.fixture(scope="module")
def hbase_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from drt_servers.hbase import mapredcp
    from tests.support.spark_quick import quick_jvms

    # the Spark JVM with the quick-start options (C1 only, serial GC): the tables are a few hundred rows.
    # chunks of ~8 rows: the chunk digests settle most of a 200-row table and every planted
    # difference is found through a re-read key range (the default, 4,096, would read it whole)
    return {**os.environ, "DRT_HBASE_CLASSPATH": mapredcp(), "PYTHONPATH": str(REPO),
            "SPARK_LOCAL_IP": "127.0.0.1", "DRT_HBASE_CHUNK_ROWS": "8",
            "SPARK_CONF_DIR": quick_jvms(tmp_path_factory.mktemp("spark-conf"))}


def uri(c: Any, table: str = TABLE) -> str:
    return f"hbase://{c.zk_quorum}{c.znode_parent}/{table}"


RUNNER = """
import json, sys
from dr_toolkit.access import Access
from dr_toolkit.verify.api import verify
from dr_toolkit.verify.request import VerifyRequest
src, dst, cases = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
for case in cases:
    table = case.pop("table", None)  # another table of the same clusters
    s, d = (u.rsplit("/", 1)[0] + "/" + table for u in (src, dst)) if table else (src, dst)
    r = verify(VerifyRequest(source=s, target=d, **case), access=Access.none())
    print("RESULT " + json.dumps(r.to_json()), flush=True)
"""


def ours(env: dict[str, str], hot: Any, cold: Any, cases: list[dict[str, Any]], tmp: Path, table: str = TABLE
         ) -> list[dict[str, Any]]:
    r = subprocess.run([sys.executable, "-c", RUNNER, uri(hot, table), uri(cold, table), json.dumps(cases)],
                       capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(ln[len("RESULT "):]) for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]


# The job client's completion poll (Job.waitForCompletion: mapreduce.client.completion.pollinterval,
# 5,000 ms by default): VerifyReplication's local job here maps in ~4 s and then waited up to 5 s more
# to be seen done. A client setting only: the job, its input and its counters are HBase's as before.
FAST_POLL = "-Dmapreduce.client.completion.pollinterval=100"
AHEAD = "drt:ahead"
CUT_APART = "drt:chunks"


@pytest.fixture(scope="module")
def ahead(planted) -> str:
    """``drt:ahead``: 3 rows shipped to cold, then a row only cold has that sorts before the first
    source row (test_peer_only_rows_ahead…)."""
    hot, cold = planted
    for c in (cold, hot):
        c.drop_table(AHEAD)
        c.create_table(AHEAD, "d", 1)
    hot.put(0, 3, table=AHEAD, family="d")
    cold.wait_rows(3, table=AHEAD)
    cold.put_cell(AHEAD, "a-peer-only", "d", "q", "x")  # sorts before row-0000000000
    return AHEAD


@pytest.fixture(scope="module")
def cut_apart(planted) -> str:
    """``drt:chunks``: 400 rows, the two sides' regions split at different keys, 12 random changes
    on cold (test_random_changes_with_regions_cut_apart…)."""
    import random

    hot, cold = planted
    table, n = CUT_APART, 400
    rng = random.Random(2026)
    for c, splits in ((cold, [row(50), row(175), row(300)]), (hot, [row(100), row(250)])):
        c.drop_table(table)
        c.create_table(table, "d", 1, splits=splits)
    hot.put(0, n, table=table, family="d", value_bytes=20)
    cold.wait_rows(n, table=table)
    for i in rng.sample(range(n), 12):
        what = rng.choice(["delete", "change", "peer-only"])
        if what == "delete":
            cold.delete(table, row(i))
        elif what == "change":
            cold.put_cell(table, row(i), "d", "q", "changed")
        else:
            cold.put_cell(table, row(i) + "x", "d", "q", "peer-only")  # after source row i, in its region
    return table


@pytest.fixture(scope="module")
def theirs(planted, ahead, cut_apart, tmp_path_factory: pytest.TempPathFactory
           ) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """VerifyReplication's counters by (table, option set), for every one the tests compare with
    (the tables after their fixtures are only read): each its own job, one after the other in one
    JVM (:func:`drt_servers.hbase.verify_replications`: the JVM's start and class loading once, not
    nine times), C1 only (a few hundred rows). The CLI test and the "snapshot" case both ask for the
    default option set, "versions" and "snapshot-versions" for ``--versions=3`` (our side reads in
    two ways; theirs reads the region servers either way)."""
    from drt_servers.hbase import QUICK_JVM, verify_replications

    hot, _ = planted
    keys = list(dict.fromkeys([(TABLE, ()), *((TABLE, tuple(args)) for _c, args, _e in CASES.values()),
                               (ahead, ()), (cut_apart, ())]))
    outs = verify_replications(hot, [(t, "1", [FAST_POLL, *args]) for t, args in keys],
                               workdir=tmp_path_factory.mktemp("verifyrep"), jvm_options=QUICK_JVM)
    return dict(zip(keys, outs, strict=True))


def counters(d: dict[str, Any]) -> dict[str, int]:
    return {k: int(d[k]) for k in COUNTERS}


def test_cli_counts_every_planted_difference_like_verifyreplication(planted, theirs, hbase_env, tmp_path: Path
                                                                     ) -> None:
    hot, cold = planted
    report = tmp_path / "vr.html"
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "verify", uri(hot), uri(cold),
                        "--report", str(report)], capture_output=True, text=True, env=hbase_env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 1, r.stderr[-3000:]  # differences: exit 1
    out = json.loads(r.stdout)
    vr = theirs[(TABLE, ())]
    assert counters(out) == counters(vr)
    # and what they are: 2 rows gone from cold, 2 rows only on cold, rows 50 (changed value), 70 (delete
    # not replicated) and 80 (excluded family) differ; the extra old version of row 60 is not looked at
    assert counters(out) == {"GOODROWS": ROWS - 5, "BADROWS": 7, "ONLY_IN_SOURCE_TABLE_ROWS": 2,
                             "ONLY_IN_PEER_TABLE_ROWS": 2, "CONTENT_DIFFERENT_ROWS": 3}
    s = out["samples"]
    assert [x["key"]["row"] for x in s["ONLY_IN_SOURCE_TABLE_ROWS"]] == [row(10), row(11)]
    assert [x["key"]["row"] for x in s["ONLY_IN_PEER_TABLE_ROWS"]] == [row(100) + "a", row(150) + "a"]
    content = {x["key"]["row"]: x for x in s["CONTENT_DIFFERENT_ROWS"]}
    assert sorted(content) == [row(50), row(70), row(80)]
    changed = content[row(50)]  # only the differing cell, on each side
    assert changed["source"]["cells"] == [{"family": "d", "qualifier": "c", "ts": 1000, "type": "Put", "value": "v1"}]
    assert changed["peer"]["cells"] == [{"family": "d", "qualifier": "c", "ts": 1000, "type": "Put", "value": "v2"}]
    assert content[row(70)]["source"]["cells"] == [] and content[row(70)]["peer"]["cells"][0]["value"] == "same"
    assert content[row(80)]["source"]["cells"][0]["value"] == "hot-only" and content[row(80)]["peer"]["cells"] == []
    html = report.read_text()
    assert "CONTENT_DIFFERENT_ROWS = 3" in html and "v2" in html
    # most of the table settled by chunk digests (chunks of ~8 rows here), the rest read row by row
    chunks = out["window"]["chunks"]
    assert chunks["rows_identical"] >= ROWS // 2 and 1 <= chunks["ranges_read"] <= 7, chunks
    assert f"{chunks['ranges_read']} key ranges read row by row" in html


CASES = {
    # newest 3 versions: the extra old version on cold is a difference too
    "versions": ({"versions": "3"}, ["--versions=3"], {"CONTENT_DIFFERENT_ROWS": 4, "GOODROWS": ROWS - 6}),
    # the replicated family only: x's differences (70, 80) are out of scope
    "families": ({"families": "d"}, ["--families=d"], {"CONTENT_DIFFERENT_ROWS": 1, "GOODROWS": ROWS - 3}),
    # raw: delete markers are cells — rows 10 and 11 are on cold as their markers (content, not missing)
    "raw": ({"raw": True}, ["--raw"], {"CONTENT_DIFFERENT_ROWS": 5, "ONLY_IN_SOURCE_TABLE_ROWS": 0}),
    # rows 100..199 only: the two peer-only rows and nothing else
    "row-prefixes": ({"row_prefixes": "row-00000001"}, ["--row-prefixes=row-00000001"],
                     {"GOODROWS": 100, "BADROWS": 2, "ONLY_IN_PEER_TABLE_ROWS": 2, "ONLY_IN_SOURCE_TABLE_ROWS": 0}),
    # cells stamped in [1 s, 1.5 s) after the epoch: row 50's d:c only (v1 on hot, v2 on cold)
    "time-range": ({"start_time": "1", "end_time": "1.5"}, ["--starttime=1000", "--endtime=1500"],
                   {"GOODROWS": 0, "BADROWS": 1, "CONTENT_DIFFERENT_ROWS": 1}),
    # from 3 s on: the planted old stamps (d:c 1 s, x:q 2 s, the 5 ms version) are out; row 80's x:q is in
    "since": ({"start_time": "3"}, ["--starttime=3000"], {"CONTENT_DIFFERENT_ROWS": 1, "ONLY_IN_SOURCE_TABLE_ROWS": 2}),
    # read from a table snapshot of each side (TableSnapshotInputFormat over the HFiles on each
    # cluster's HDFS; the region servers serve no scan): the same counts. Last: a snapshot flushes.
    "snapshot": ({"read": "snapshot"}, [], {"GOODROWS": ROWS - 5, "BADROWS": 7, "ONLY_IN_SOURCE_TABLE_ROWS": 2,
                                            "ONLY_IN_PEER_TABLE_ROWS": 2, "CONTENT_DIFFERENT_ROWS": 3}),
    "snapshot-versions": ({"read": "snapshot", "versions": "3"}, ["--versions=3"],
                          {"CONTENT_DIFFERENT_ROWS": 4, "GOODROWS": ROWS - 6}),
}


@pytest.fixture(scope="module")
def ours_by_case(planted, ahead, cut_apart, hbase_env, tmp_path_factory: pytest.TempPathFactory
                 ) -> dict[str, dict[str, Any]]:
    """Every option set through ``verify()`` in one process (one Spark start for all of them), and
    the default one on the tables ``ahead`` and ``cut_apart``."""
    hot, cold = planted
    names = [*CASES, AHEAD, CUT_APART]
    cases = [dict(CASES[n][0]) for n in CASES] + [{"table": ahead}, {"table": cut_apart}]
    for case in cases:
        if case.get("read") == "snapshot":
            case["hbase_rootdir"] = [hot.rootdir_uri, cold.rootdir_uri]
    results = ours(hbase_env, hot, cold, cases, tmp_path_factory.mktemp("ours"))
    return dict(zip(names, results, strict=True))


@pytest.mark.parametrize("name", list(CASES))
def test_options_count_as_verifyreplication_counts(ours_by_case, theirs, name: str) -> None:
    case, args, expect = CASES[name]
    out = ours_by_case[name]
    vr = theirs[(TABLE, tuple(args))]
    assert counters(out) == counters(vr), (case, out["samples"])
    for k, v in expect.items():
        assert out[k] == v, (k, counters(out))
    assert out["window"]["verifyrep_args"] == args
    assert out["window"]["read"] == case.get("read", "region-servers")
    assert len(out["window"]["snapshots"]) == (2 if case.get("read") == "snapshot" else 0)


def test_the_snapshots_a_verification_took_are_deleted(planted, ours_by_case) -> None:
    """The snapshot cases above took a snapshot of each side and restored it for reading: both the
    snapshots (``<rootdir>/.hbase-snapshot``) and the restore directories are gone after."""
    import requests

    for c in planted:
        for path in (f"{c.rootdir}/.hbase-snapshot", "/tmp/drt-verify-restore"):
            r = requests.get(f"http://127.0.0.1:{c.nn_http_port}/webhdfs/v1{path}",
                             params={"op": "LISTSTATUS", "user.name": "root"}, timeout=30)
            assert r.ok, (c.name, path, r.status_code, r.text[:300])  # both exist once a snapshot was read
            names = [f["pathSuffix"] for f in r.json()["FileStatuses"]["FileStatus"]]
            assert not [n for n in names if n.startswith("drt-verify-")], (c.name, path, names)


def drt(env: dict[str, str], tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "verify", *args], capture_output=True,
                          text=True, env=env, cwd=tmp, timeout=600)


def one_error_line(r: subprocess.CompletedProcess[str], code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("drt: error")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(planted, hbase_env, tmp_path: Path) -> None:
    hot, cold = planted
    line = one_error_line(drt(hbase_env, tmp_path, uri(hot), uri(cold, "drt:nope")), 2)
    assert "drt:nope does not exist on the peer" in line
    line = one_error_line(drt(hbase_env, tmp_path, uri(hot), uri(cold), "--families", "d,zz"), 2)
    assert "has no family zz" in line
    line = one_error_line(drt(hbase_env, tmp_path, uri(hot), uri(cold), "--end-time", "2999-01-01"), 2)
    assert "is after now" in line
    line = one_error_line(drt(hbase_env, tmp_path, uri(hot), "file:///tmp"), 2)
    assert "not an hbase:// URI" in line


def test_unreachable_cluster_is_exit_3(planted, hbase_env, tmp_path: Path) -> None:
    from drt_servers.process import free_port

    hot, _ = planted
    dead = f"hbase://127.0.0.1:{free_port()}/hbase/{TABLE}"
    line = one_error_line(drt(hbase_env, tmp_path, uri(hot), dead), 3)
    assert "does not answer" in line


def test_peer_only_rows_ahead_of_the_first_source_row_are_counted_here_not_by_verifyreplication(
        ours_by_case, theirs, ahead) -> None:
    """The one documented difference: VerifyReplication's mapper scans the peer from the first
    source row of its region, so a peer-only row before it is never counted; drt counts it
    (the table: the ``ahead`` fixture)."""
    mine, vr = ours_by_case[AHEAD], theirs[(ahead, ())]
    assert (mine["GOODROWS"], mine["ONLY_IN_PEER_TABLE_ROWS"]) == (3, 1)
    assert (vr["GOODROWS"], vr["ONLY_IN_PEER_TABLE_ROWS"]) == (3, 0)


def test_random_changes_with_regions_cut_apart_count_as_verifyreplication_counts(
        ours_by_case, theirs, cut_apart) -> None:
    """The chunk digests where the two tables' regions are split at different keys (a chunk is
    cut by region ends differently on each side) and random changes land anywhere on cold: rows
    gone, cells changed, rows only on cold (the ``cut_apart`` fixture). Counted exactly as
    VerifyReplication counts them, and most of the table settled by chunk digests without a row
    read."""
    mine, vr = ours_by_case[CUT_APART], theirs[(cut_apart, ())]
    assert counters(mine) == counters(vr), mine["samples"]
    assert mine["BADROWS"] > 0
    chunks = mine["window"]["chunks"]
    assert chunks["rows_identical"] >= 400 // 2 and chunks["ranges_read"] >= 1, chunks
