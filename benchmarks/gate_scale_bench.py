"""Benchmark: the gate's HDFS signal at scale (issue 42) — the quick path against the full proof.

Measured, on two real MiniDFSClusters (hot and cold, one NameNode + one DataNode each) started
here: a policy of N files (empty files in directories of 1,000, made on both clusters alike by
Hadoop's own client over RPC, ``benchmarks/java/MkTree.java``), replicated once by ``drt`` (the
completed run the gate rests on), hot's source snapshottable (the run reads its snapshot) and
cold's target snapshottable (the proof's snapshot). Then:

- the full proof (``mode="prove"``: today's dry run — both trees listed, the manifest compared,
  cold's checksum of every kept file — recorded as the proof): seconds, NameNode calls (its audit
  log), listStatus calls;
- the quick path (``mode="quick"``, what the DR page and ``dr_rpo_watch`` run): seconds (median
  of 5), NameNode calls (the audit log, and the calls the signal itself counts), listStatus calls;
  again after C changes on hot (pending: the calls stay the same, the diff's size grows);
- the NameNode's own time for the calls the quick path makes on a tree of N files (GETSNAPSHOTDIFF
  with an empty diff, GETSNAPSHOTLIST), and GETCONTENTSUMMARY (the bounded re-check when cold is
  not snapshottable): both walk the NameNode's in-memory tree, so they are the part that grows.

The edit-log path (``copy/editlog.py``, the default quick path since): the same quick checks with
the NameNodes' transaction ids (``/jmx``) and, when a txid moved, the edit log's inotify events read
by the JVM reader (``java/HdfsEdits.java`` on the MiniDFSCluster's own Hadoop jars) — seconds,
NameNode namespace calls (audit log), evidence; the reader's JVM start (an empty range); and on a
tree of 1 file and on the ``--nn-files`` tree: the txid read (``/jmx``) and the events of C
changes read after a txid — the NameNode's time for these does not depend on the tree, beside the
empty GETSNAPSHOTDIFF's, which does.

The busy NameNode (issue 42's open point, session 24): on the ``--nn-files`` NameNode (cold), its
current edit segment still holding the tree's creation, two proofs — one with the edit-log roll
switched off (``DRT_HDFS_EDITLOG_ROLL=off``: the recorded txid deep in that segment, as before),
one with it (the default: the NameNode rolls, the txid read right after is the base, at a fresh
segment's start) — each followed by C writes elsewhere on that NameNode and quick checks (the
reader then reads cold's events since the base): the quick check's seconds both ways beside the
goal, and the roll's own seconds in the proof (its JVM).

Argued, not measured: the quick path at 100,000,000 files. Its calls do not depend on the tree
(printed: the same count at every N); the NameNode's time per call is extrapolated linearly from
the time measured at N (per inode), which is stated beside the goal (< 3 s).

    .venv/bin/python benchmarks/gate_scale_bench.py --files 20000 --nn-files 100000
    .venv/bin/python benchmarks/gate_scale_bench.py --files 2000 --nn-files 0   # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from dr_toolkit.access import Access  # noqa: E402
from dr_toolkit.copy import editlog  # noqa: E402
from dr_toolkit.copy.proof import SAMPLE, nn_state  # noqa: E402
from dr_toolkit.copy.signals import hdfs_signals  # noqa: E402
from dr_toolkit.ledger import open_ledger  # noqa: E402
from dr_toolkit.topology import load_topology  # noqa: E402

GOAL_S = 3.0
TARGET_FILES = 100_000_000
MTIME_MS = 1_700_000_000_000


def build_mktree(work: Path) -> Path:
    from dr_toolkit.spark.hadoop import spark_jars_dir

    out = work / "mktree"
    out.mkdir(exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", f"{spark_jars_dir()}/*",
                    str(REPO / "benchmarks" / "java" / "MkTree.java")], check=True, capture_output=True, timeout=300)
    return out


def mktree(classes: Path, cluster: Any, root: str, n: int, mtime_ms: int = MTIME_MS) -> float:
    from dr_toolkit.spark.hadoop import spark_jars_dir

    t = time.perf_counter()
    subprocess.run(["java", "-Xmx512m", "-cp", f"{classes}:{spark_jars_dir()}/*", "MkTree",
                    f"hdfs://127.0.0.1:{cluster.rpc_port}", root, str(n), "1000", str(mtime_ms), "4"],
                   check=True, capture_output=True, timeout=3600, env={"HADOOP_USER_NAME": "hdfs", "PATH": "/usr/bin:/bin"})
    return time.perf_counter() - t


def audit_count(cluster: Any, under: str) -> tuple[int, int]:
    """(all NameNode calls, listStatus calls) the audit log holds under ``under`` so far."""
    recs = cluster.audit(under=under)
    return len(recs), sum(1 for r in recs if r.get("cmd") == "listStatus")


def nn_time(fn: Any, reps: int = 5) -> float:
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def reader_jvm_s(fs: Any, loc: Any) -> float:
    """The edit log reader's own cost with nothing to read (an empty range): the JVM's start, the
    Hadoop client's classes, a FileSystem built — what every read of the edit log pays once."""
    st = nn_state(fs, loc)
    t = time.perf_counter()
    editlog.read_edits(st, st.txid, [loc.path], user="hdfs")
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20_000, help="files of the policy (made, replicated, proven)")
    ap.add_argument("--changes", type=int, default=100, help="files written on hot after the proof")
    ap.add_argument("--nn-files", type=int, default=100_000,
                    help="files of a second tree on cold, for the NameNode's time per call at a larger size")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    from drt_servers.hdfs import HdfsCluster

    work = Path(tempfile.mkdtemp(prefix="drt-gate-scale-"))
    out: dict[str, Any] = {"files": args.files}
    hot = HdfsCluster("bench-hot", work / "hot", heap="1536m").start()
    cold = HdfsCluster("bench-cold", work / "cold", heap="1536m").start()
    try:
        classes = build_mktree(work)
        src, dst = "/bench/data", "/bench/data"
        out["mktree_s"] = round(mktree(classes, hot, src, args.files) + mktree(classes, cold, dst, args.files), 1)
        hot.allow_snapshot(src)
        cold.allow_snapshot(dst)
        (work / "state").mkdir()
        cfg = work / "drt.yaml"
        cfg.write_text(yaml.safe_dump({
            "version": 1,
            "clusters": {
                "hot": {"role": "hot", "hdfs": {"namenodes": hot.namenodes, "user": "hdfs"}},
                "cold": {"role": "cold", "hdfs": {"namenodes": cold.namenodes, "user": "hdfs"}}},
            "policies": {"hdfs": [{"name": "big", "source": f"hdfs://hot{src}", "targets": [f"hdfs://cold{dst}"],
                                   "options": {"update": True, "delete": True, "snapshots": True,
                                               "state_dir": str(work / "state")}}]},
            "ledger": {"url": f"sqlite:///{work / 'ledger.db'}"}}))
        topo = load_topology(cfg)
        access = Access.none()
        ledger = open_ledger(topo, access)
        from dr_toolkit.copy.api import replicate_policy

        t = time.perf_counter()
        (r,) = replicate_policy(topo, "big", ledger, access=access)
        out["run_s"] = round(time.perf_counter() - t, 1)
        assert r.ok, r.to_json() if hasattr(r, "to_json") else r
        out["run_mode"] = r.mode

        from drt_servers import maven

        os.environ[editlog.ENV_CLASSPATH] = maven.classpath("hdfs")  # the reader's Hadoop jars

        def signal(mode: str, edit_log: bool = True) -> Any:
            os.environ[editlog.ENV_SWITCH] = "on" if edit_log else "off"
            try:
                (s,) = hdfs_signals(topo, ledger, access, time.time(), mode=mode)
            finally:
                os.environ.pop(editlog.ENV_SWITCH, None)
            return s

        def measured(mode: str, edit_log: bool = False) -> tuple[float, Any, tuple[int, int], tuple[int, int]]:
            a0, b0 = audit_count(hot, src), audit_count(cold, dst)
            t = time.perf_counter()
            s = signal(mode, edit_log)
            dt = time.perf_counter() - t
            time.sleep(1.0)  # the audit logger
            a1, b1 = audit_count(hot, src), audit_count(cold, dst)
            return dt, s, (a1[0] - a0[0] + b1[0] - b0[0], a1[1] - a0[1] + b1[1] - b0[1]), (a1[0] - a0[0], b1[0] - b0[0])

        roll_s: list[tuple[str, float]] = []  # every roll the proofs make: (NameNode RPC, seconds)
        real_roll = editlog.roll_edits

        def timed_roll(st: Any, **k: Any) -> int:
            t = time.perf_counter()
            try:
                return real_roll(st, **k)
            finally:
                roll_s.append((st.rpc, time.perf_counter() - t))

        editlog.roll_edits = timed_roll  # type: ignore[assignment]  # the proof's rolls, timed
        dt, s, calls, _ = measured("prove", edit_log=True)  # records both sides' txids too
        assert s.caught_up and s.detail["proof"]["recorded"], (s.reason, s.detail)
        out["full_proof"] = {"s": round(dt, 2), "namenode_calls": calls[0], "list_calls": calls[1],
                             "edit_log_base": s.detail["proof"].get("edit_log_base")}
        quick = [measured("quick") for _ in range(5)]
        for _, s, _, _ in quick:
            assert s.caught_up and s.detail["path"] == "quick", (s.reason, s.detail)
        q = quick[-1]
        out["quick"] = {"s_median": round(statistics.median(x[0] for x in quick), 3),
                        "namenode_calls": q[2][0], "list_calls": q[2][1],
                        "calls_counted_by_the_signal": q[1].detail["namenode_calls"]}
        # the edit-log path, txid unchanged on both sides: /jmx reads only, no namespace call
        quick_el = [measured("quick", edit_log=True) for _ in range(5)]
        for _, s, _, _ in quick_el:  # (an access-time update since the proof would make it "editlog": printed)
            assert s.caught_up and s.detail["path"] == "quick", (s.reason, s.basis)
        qel = quick_el[-1]
        out["quick_editlog"] = {"s_median": round(statistics.median(x[0] for x in quick_el), 3),
                                "namenode_calls": qel[2][0], "list_calls": qel[2][1],
                                "calls_counted_by_the_signal": qel[1].detail["namenode_calls"],
                                "evidence": [qel[1].detail["cold_evidence"], qel[1].detail["hot_evidence"]]}
        # changes on hot after the proof: pending, the same calls
        from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

        hfs = WebHdfsFileSystem(hot.namenodes, user="hdfs")
        for i in range(args.changes):
            hfs.write(f"{src}/d0/e0/late{i}", [b"x"])
        qc = [measured("quick") for _ in range(3)]
        s = qc[-1][1]
        assert not s.caught_up and s.detail["files_pending"] == args.changes, (s.reason, s.detail)
        out["quick_after_changes"] = {"changes": args.changes, "s_median": round(statistics.median(x[0] for x in qc), 3),
                                      "namenode_calls": qc[-1][2][0], "list_calls": qc[-1][2][1],
                                      "files_pending": s.detail["files_pending"]}
        qe = [measured("quick", edit_log=True) for _ in range(3)]
        s = qe[-1][1]
        assert not s.caught_up and s.detail["files_pending"] == args.changes and s.detail["hot_evidence"] == "editlog", (
            s.reason, s.basis)
        out["quick_editlog_after_changes"] = {
            "changes": args.changes, "s_median": round(statistics.median(x[0] for x in qe), 3),
            "namenode_calls": qe[-1][2][0], "list_calls": qe[-1][2][1], "files_pending": s.detail["files_pending"],
            "calls_counted_by_the_signal": s.detail["namenode_calls"],
            "evidence": [s.detail["cold_evidence"], s.detail["hot_evidence"]]}
        # the NameNode's own time for the calls that walk its tree, at three sizes: a tree of 1 file,
        # the policy's N files, and a second tree of --nn-files made on cold now
        cfs = WebHdfsFileSystem(cold.namenodes, user="hdfs")
        snap = str(ledger.watermarks("hdfs-proof")[0]["detail"]["cold"]["snapshot"])
        sizes: dict[int, dict[str, float]] = {}

        def timed(root: str, name: str) -> dict[str, float]:
            return {"GETSNAPSHOTDIFF_empty": nn_time(lambda: cfs.snapshot_diff(root, name, "")),
                    "GETSNAPSHOTLIST": nn_time(lambda: cfs.snapshots(root)),
                    "GETCONTENTSUMMARY": nn_time(lambda: cfs.content_summary(root))}

        from dr_toolkit.fs.uri import parse_uri

        cold_loc = parse_uri(f"hdfs://cold{dst}", topo)
        jvm = [reader_jvm_s(cfs, cold_loc) for _ in range(3)]
        out["reader_jvm_s_median"] = round(statistics.median(jvm), 3)
        edits: dict[int, dict[str, float]] = {}

        def edit_log_timed(root: str, roll: bool = False) -> dict[str, float]:
            """The txid read (/jmx) and the events of --changes writes under ``root`` read after a txid
            (the reader's seconds, less its JVM start: the NameNode's part). ``roll``: the NameNode's
            edit log rolled first (``dfsadmin -rollEdits``, what its autoroll does every 500,000
            transactions by default): the NameNode reads the segment holding the txid from its start."""
            if roll:
                subprocess.run([maven.java(), "-cp", maven.classpath("hdfs"), "org.apache.hadoop.hdfs.tools.DFSAdmin",
                                "-fs", f"hdfs://127.0.0.1:{cold.rpc_port}", "-rollEdits"], check=True,
                               capture_output=True, timeout=300, env={"HADOOP_USER_NAME": "hdfs", "PATH": "/usr/bin:/bin"})
            t_jmx = nn_time(lambda: nn_state(cfs, cold_loc))
            before = nn_state(cfs, cold_loc)
            for i in range(args.changes):
                cfs.write(f"{root}/late-{time.monotonic_ns()}-{i}", [b"x"])
            now = nn_state(cfs, cold_loc)
            ts = []
            for _ in range(3):
                t = time.perf_counter()
                got = editlog.read_edits(now, before.txid, [root], user="hdfs")
                ts.append(time.perf_counter() - t)
            assert len(got.changes()) >= args.changes, (len(got.changes()), got.events_read)
            reader = statistics.median(ts)
            return {"txid_read_s": round(t_jmx, 4), "reader_s": round(reader, 3),
                    "namenode_s": round(max(0.0, reader - out["reader_jvm_s_median"]), 3),
                    "transactions": now.txid - before.txid, "events": got.events_read}

        def busy_namenode(elsewhere: str) -> dict[str, Any]:
            """Cold's NameNode busy: its current segment long (the --nn-files tree's creation). A proof
            with the roll off (the base mid-segment), C writes elsewhere on cold, quick checks; then a
            proof with the roll on (the base at a fresh segment's start), C writes, quick checks."""
            res: dict[str, Any] = {}
            for how, roll in (("mid_segment", "off"), ("segment_start", "on")):
                os.environ[editlog.ENV_ROLL] = roll
                try:
                    del roll_s[:]
                    t = time.perf_counter()
                    s = signal("prove")
                    proof_s = time.perf_counter() - t
                finally:
                    os.environ.pop(editlog.ENV_ROLL, None)
                assert s.detail["proof"]["recorded"], (s.reason, s.detail)
                rec = ledger.watermarks("hdfs-proof")[0]["detail"]
                base = editlog.NameNodeState.of(rec["cold"]["nn"])
                assert base is not None
                for i in range(args.changes):
                    cfs.write(f"{elsewhere}/busy-{how}-{i}", [b"x"])
                now = nn_state(cfs, cold_loc)
                ts, sig = [], None
                for _ in range(3):
                    t = time.perf_counter()
                    sig = signal("quick")
                    ts.append(time.perf_counter() - t)
                # cold unchanged under the policy's root (its events read): the safe time stands (hot's
                # earlier changes stay pending)
                assert sig is not None and sig.safe_time is not None and sig.detail["cold_evidence"] == "editlog", (
                    sig.reason, sig.basis)
                res[how] = {"quick_s_median": round(statistics.median(ts), 3), "proof_s": round(proof_s, 2),
                            "roll_s": {("cold " if rpc.endswith(f":{cold.rpc_port}") else "hot ") + rpc: round(x, 3)
                                       for rpc, x in roll_s},
                            "base_txid": base.txid, "segment": base.segment,
                            "into_segment": None if base.segment is None else base.txid - base.segment,
                            "transactions_since": now.txid - base.txid,
                            "cold_base": rec["cold"].get("nn_base"), "hot_base": rec.get("hot_nn_base")}
            return res

        cfs.write("/bench/tiny/f", [b""])
        cold.allow_snapshot("/bench/tiny")
        cfs.create_snapshot("/bench/tiny", "s")
        sizes[1] = timed("/bench/tiny", "s")
        edits[1] = edit_log_timed("/bench/tiny")
        sizes[args.files] = timed(dst, snap)
        if args.nn_files:
            out["mktree_nn_s"] = round(mktree(classes, cold, "/bench/nn", args.nn_files, -1), 1)
            cold.allow_snapshot("/bench/nn")
            cfs.create_snapshot("/bench/nn", "s")
            sizes[args.nn_files] = timed("/bench/nn", "s")
            edits[args.nn_files] = edit_log_timed("/bench/nn")
            out["busy_namenode"] = busy = busy_namenode("/bench/nn")
            rolled = edit_log_timed("/bench/nn", roll=True)
        out["edit_log_namenode"] = {str(k): v for k, v in edits.items()}
        if args.nn_files:
            out["edit_log_namenode"][f"{args.nn_files} after a log roll"] = rolled
        out["namenode_s"] = {str(k): {op: round(v, 4) for op, v in d.items()} for k, d in sizes.items()}
        big = max(sizes)
        slope = {op: max(0.0, (sizes[big][op] - sizes[1][op]) / (big - 1)) for op in sizes[1]}
        at = {op: sizes[1][op] + slope[op] * (TARGET_FILES - 1) for op in slope}
        # the quick path asks hot and cold side by side (two NameNodes), each side one list + one diff
        side = at["GETSNAPSHOTDIFF_empty"] + at["GETSNAPSHOTLIST"]
        snap_s = side
        out["argued_100M"] = {
            "namenode_calls": sum(q[1].detail["namenode_calls"].values()),
            "per_inode_us": {op: round(v * 1e6, 4) for op, v in slope.items()},
            "snapshot_mode_s": round(snap_s, 2),
            # cold: GETCONTENTSUMMARY + the target's stat + SAMPLE stats (each about as small a call as
            # GETSNAPSHOTLIST of a tiny tree); hot: its snapshot list and diff
            "counters_mode_s": round(max(side, at["GETCONTENTSUMMARY"] + (1 + SAMPLE) * sizes[1]["GETSNAPSHOTLIST"]),
                                     2),
        }
        print(json.dumps(out, indent=2))
        print()
        print(f"MEASURED ({args.files:,} files, real MiniDFSClusters):")
        print(f"  full proof (today's probe, recorded): {out['full_proof']['s']:.2f} s, "
              f"{out['full_proof']['namenode_calls']:,} NameNode calls, {out['full_proof']['list_calls']:,} listStatus")
        print(f"  quick path (DR page, dr_rpo_watch):   {out['quick']['s_median']:.3f} s (median of 5), "
              f"{out['quick']['namenode_calls']} NameNode calls, {out['quick']['list_calls']} listStatus   goal < {GOAL_S:g} s")
        print(f"  quick path after {args.changes} changes on hot: {out['quick_after_changes']['s_median']:.3f} s, "
              f"{out['quick_after_changes']['namenode_calls']} NameNode calls, pending {args.changes}")
        for k, d in sizes.items():
            print(f"  NameNode time, tree of {k:,} files: " + ", ".join(f"{op} {v * 1000:.1f} ms" for op, v in d.items()))
        a = out["argued_100M"]
        qe0, qe1 = out["quick_editlog"], out["quick_editlog_after_changes"]
        print(f"  quick path, edit log, txid unchanged:  {qe0['s_median']:.3f} s (median of 5), "
              f"{qe0['namenode_calls']} NameNode namespace calls, {qe0['list_calls']} listStatus, signal's calls "
              f"{qe0['calls_counted_by_the_signal']} (evidence cold/hot {qe0['evidence']})   goal < {GOAL_S:g} s")
        print(f"  quick path, edit log, after {args.changes} changes on hot: {qe1['s_median']:.3f} s, "
              f"{qe1['namenode_calls']} namespace calls, pending {qe1['files_pending']}, signal's calls "
              f"{qe1['calls_counted_by_the_signal']} (evidence {qe1['evidence']})   goal < {GOAL_S:g} s")
        print(f"  the edit log reader's JVM start (an empty range): {out['reader_jvm_s_median']:.3f} s (median of 3)")
        for k, d in edits.items():
            old = sizes[k]["GETSNAPSHOTDIFF_empty"]
            print(f"  edit log on a tree of {k:,} files: txid read (/jmx, 7 GETs) {d['txid_read_s'] * 1000:.1f} ms; "
                  f"{d['events']} events ({d['transactions']} transactions) read in {d['reader_s']:.3f} s, the "
                  f"NameNode's part ≈ {d['namenode_s'] * 1000:.0f} ms   (beside: empty GETSNAPSHOTDIFF "
                  f"{old * 1000:.1f} ms)")
        if args.nn_files:
            print(f"  edit log on a tree of {args.nn_files:,} files, its edit log rolled first: {rolled['events']} events "
                  f"({rolled['transactions']} transactions) read in {rolled['reader_s']:.3f} s, the NameNode's part ≈ "
                  f"{rolled['namenode_s'] * 1000:.0f} ms — the NameNode reads the edit segment holding the recorded "
                  "txid from its start: its cost follows the segment's transactions, not the tree")
        fb = out["full_proof"].get("edit_log_base") or {}
        print(f"  the first proof's edit-log bases: hot — {fb.get('hot')}; cold — {fb.get('cold')}")
        if args.nn_files:
            mid, seg = busy["mid_segment"], busy["segment_start"]
            print(f"  BUSY NameNode (cold, {args.nn_files:,} files, its segment holding their creation): quick check "
                  f"after {args.changes} writes elsewhere on it ({seg['transactions_since']} transactions since the "
                  f"base, read from its edit log):")
            print(f"    base mid-segment (DRT_HDFS_EDITLOG_ROLL=off, as before): {mid['quick_s_median']:.3f} s (median "
                  f"of 3; the base {mid['into_segment']} transactions into its segment)   goal < {GOAL_S:g} s")
            print(f"    base at a segment start (the proof rolled the edit log): {seg['quick_s_median']:.3f} s (median "
                  f"of 3; the base {seg['into_segment']} transactions into its segment)   goal < {GOAL_S:g} s")
            print("    the roll's own cost in the proof: " + ", ".join(f"{rpc} {x:.3f} s" for rpc, x in
                                                                   seg["roll_s"].items())
                  + f" (a JVM each; the proof {seg['proof_s']:.2f} s with it, {mid['proof_s']:.2f} s without)")
            if mid["into_segment"] and seg["into_segment"] is not None:
                per = (mid["quick_s_median"] - seg["quick_s_median"]) / max(1, mid["into_segment"] - seg["into_segment"])
                print(f"    the skip: ≈ {per * 1e6:.2f} µs per transaction before the base (so ≈ "
                      f"{per * editlog.ROLL_MIN_TXNS * 1000:.0f} ms at the roll's threshold, "
                      f"{editlog.ROLL_MIN_TXNS:,} transactions; ≈ {per * 500_000:.1f} s at 500,000, the NameNode's "
                      "own autoroll point)")
            print(f"    cold's base: {seg['cold_base']}")
        print(f"ARGUED ({TARGET_FILES:,} files): the quick path makes {a['namenode_calls']} NameNode calls whatever "
              f"the tree holds (the same at every size above); GETSNAPSHOTDIFF and GETCONTENTSUMMARY walk the "
              f"NameNode's in-memory tree: per file {a['per_inode_us']} µs (slope between 1 and {big:,} files), "
              f"so at {TARGET_FILES:,}: snapshot mode ≈ {a['snapshot_mode_s']} s, counters mode (cold not "
              f"snapshottable: GETCONTENTSUMMARY + {SAMPLE} stats) ≈ {a['counters_mode_s']} s   goal < {GOAL_S:g} s")
        e_small, e_big = edits[min(edits)], edits[max(edits)]
        seg = rolled if args.nn_files else e_big
        print(f"ARGUED ({TARGET_FILES:,} files), the edit-log path: the txid read is {e_small['txid_read_s'] * 1000:.1f} "
              f"ms on {min(edits):,} files and {e_big['txid_read_s'] * 1000:.1f} ms on {max(edits):,} (/jmx: no tree "
              f"walk), so a quick check with no change anywhere on either NameNode ≈ {qe0['s_median']:.3f} s at any "
              f"size; after changes it adds the reader: its JVM ({out['reader_jvm_s_median']:.2f} s) + the NameNode's "
              f"read of its edit segment from the segment's start to now (≈ {seg['namenode_s'] * 1000:.0f} ms for "
              f"{seg['transactions']} transactions in a fresh segment on the {max(edits):,}-file NameNode; "
              f"{e_big['namenode_s'] * 1000:.0f} ms when the segment still held the tree's creation: it grows with "
              "the segment's transactions — rolled at 500,000 by default —, not the files) ≈ "
              f"{qe1['s_median']:.2f} s here   goal < {GOAL_S:g} s; past "
              f"{editlog.MAX_EVENTS:,} events under the root or {editlog.MAX_SECONDS:g} s of reading, the snapshot "
              "diff above answers")
        return 0
    finally:
        hot.kill()
        cold.kill()
        if not args.keep:
            import shutil

            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
