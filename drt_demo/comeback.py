"""The demo comes back (issue 40): after its failover hot → cold, the active cluster (cold) takes
writes and the old hot takes a stray one; a re-protect protects cold onto hot (the divergence
report acknowledged item by item, each item kept aside on hot); replication runs cold → hot; a
switchover (the planned failover cold → hot, then a re-protect) makes the configured hot active
again, protected onto cold; the last line proves the round trip.

Each function takes the :class:`drt_demo.demo.Demo` that ran the failover and prints its phase
with :meth:`Demo.step`. The servers are the demo's: the second MirrorMaker 2 (cold → hot, aliases
``cold``/``hot``, DefaultReplicationPolicy: hot gets ``cold.<topic>``) is added to its servers.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drt_demo.demo import Demo

EXCURSION_RECORDS = 10  # per partition, produced on cold while it is the active cluster
EXCURSION_ROWS = 300  # HBase rows written on cold while it is active, before the re-protect
PROTECTED_BACK_ROWS = 100  # written on cold after the re-protect: shipped to hot by the reverse peer
STRAY_ROW = "written-on-old-hot"
EXCURSION = "excursion"  # the directory of the protected tree the writes after the failover go to
COLD_FILE = f"{EXCURSION}/written-on-cold.csv"
COLD_FILE_2 = f"{EXCURSION}/written-on-cold-2.csv"
STRAY_FILE = f"{EXCURSION}/written-on-old-hot.csv"


def _clusters(demo: Demo) -> tuple[Any, Any, Any, Any]:
    ctx = demo.ctx
    assert ctx.hbase is not None and ctx.kafka is not None
    return ctx.hbase[0], ctx.hbase[1], ctx.kafka[0], ctx.kafka[1]


def _stop(srv: Any) -> None:
    if srv is not None and srv.running and srv.proc is not None:
        try:
            os.killpg(srv.proc.pid, signal.SIGCONT)  # a paused MirrorMaker must be able to stop
        except OSError:
            pass
        srv.stop()


def _mirror(demo: Demo, source: str, target: str, aliases: tuple[str, str], name: str) -> Any:
    from drt_demo.demo import GROUP, KAFKA_TOPICS
    from drt_servers import kafka

    # group offsets are carried by the runbooks (checkpoint + remap), not by MirrorMaker 2
    mm2 = kafka.MirrorMaker2(demo.ctx.workdir / "servers" / name, source, target, topics="|".join(KAFKA_TOPICS),
                             groups=GROUP, policy="default", aliases=aliases,
                             extra={"sync.group.offsets.enabled": "false"})
    demo.ctx.servers.append(mm2)
    mm2.start()
    return mm2


def excursion(demo: Demo) -> dict[str, Any]:
    """The forward flows stay stopped (MirrorMaker 2 hot → cold stopped, hot's HBase peer removed);
    the active cluster cold takes writes (an HDFS file, Kafka records on its own topics, HBase rows);
    the old hot takes a stray write its clients should not have made (an HDFS file, an HBase row)."""
    from drt_demo import seed
    from drt_demo.demo import (
        HBASE_LATE_ROWS,
        HBASE_ROWS,
        HBASE_TABLE,
        KAFKA_TOPICS,
        WAREHOUSE,
        write_topology,
    )
    from drt_servers.hbase import FAMILY, PEER

    hb_hot, hb_cold, _k_hot, k_cold = _clusters(demo)
    write_topology(demo.ctx, way_back=True)  # `hbase` commands, MM2's topics (see write_topology)
    _stop(demo.ctx.mm2)
    hb_hot.remove_peer(PEER)
    cold_fs, hot_fs = demo.hdfs_client(hb_cold), demo.hdfs_client(hb_hot)
    body = "".join(f"{i},written on cold while it is the active cluster\n" for i in range(200))
    cold_fs.write(f"{WAREHOUSE}/{COLD_FILE}", data=body, encoding="utf-8", overwrite=True)
    n = seed.seed_kafka(k_cold.bootstrap, KAFKA_TOPICS, records_per_partition=EXCURSION_RECORDS,
                        base_ts_ms=int(time.time() * 1000), key_prefix="on-cold")
    first = HBASE_ROWS + HBASE_LATE_ROWS
    hb_cold.put(first, EXCURSION_ROWS, table=HBASE_TABLE)
    hot_fs.write(f"{WAREHOUSE}/{STRAY_FILE}", data="a write the old hot took after the failover\n", encoding="utf-8", overwrite=True)
    hb_hot.put_cell(HBASE_TABLE, STRAY_ROW, FAMILY, "note", "its-clients-ignored-the-fence")
    demo.step("writes after the failover", "topology: hbase_shell and MirrorMaker 2's topics set for the way "
                                          "back; forward flows stopped (MirrorMaker 2 hot → cold, hot's HBase peer "
                                          f"{PEER} removed); cold (active) took {COLD_FILE}, {n} Kafka records on "
                                          f"its own topics {', '.join(KAFKA_TOPICS)}, {EXCURSION_ROWS} HBase rows; the "
                                          f"old hot took a stray write: {STRAY_FILE} and HBase row {STRAY_ROW!r}")
    return {"cold_records": n, "cold_rows": EXCURSION_ROWS}


def reprotect(demo: Demo) -> dict[str, Any]:
    """MirrorMaker 2 cold → hot started (the reverse flow re-protect looks for), then the re-protect
    runbook on the demo's topology (the direction failed over), approved by the demo with every
    divergence item acknowledged; the divergence report printed."""
    from dr_toolkit.failback.runbook import Reprotect
    from drt_demo.demo import KAFKA_TOPICS

    _hb_hot, _hb_cold, k_hot, k_cold = _clusters(demo)
    rev = _mirror(demo, k_cold.bootstrap, k_hot.bootstrap, ("cold", "hot"), "mm2-back")
    demo.ctx.mm2_back = rev
    rev.wait_mirrored(list(KAFKA_TOPICS), timeout=180)
    demo.step("reverse mirror", f"MirrorMaker 2 cold → hot ({rev.describe()}) copied cold's records to "
                                f"{', '.join(rev.remote_topic(t) for t in KAFKA_TOPICS)} on hot")

    def approve(req: dict[str, Any]) -> dict[str, Any]:
        acks = [f["id"] for f in req.get("findings") or []]
        demo.step("re-protect approval", f"given by the demo, {len(acks)} divergence item(s) acknowledged one by "
                                         "one (an operator types them at `drt failover reprotect --acknowledge`)")
        return {"approved": True, "acknowledged": acks, "comment": "drt demo: come back", "who": "drt-demo"}

    t0 = time.monotonic()
    rp = Reprotect.start(demo.topology(), demo.ledger(), access=demo.access, reason="drt demo: come back",
                         execute=True, approver=approve, who="drt-demo")
    out = rp.run()
    demo.ctx.summary["reprotect"] = out
    demo.step("re-protect", f"{out['run_id']}: {out['status']} in {time.monotonic() - t0:.1f}s; steps: "
                            + ", ".join(f"{s['name']} {s['status']}" for s in out["steps"]))
    for s in out["steps"]:
        if s["name"] in ("divergence", "set_aside", "hdfs", "kafka", "hbase", "gate") and s.get("message"):
            demo.ctx.say(f"           {s['name']:<10} {s['message']}")
            if s["name"] == "gate" and "NO_GO" in s["message"]:
                demo.ctx.say("                      (reported, not required: the new direction catches up below)")
    demo.ctx.say("           divergence report (what the old hot took after the recovery point, kept aside):")
    for d in out["divergence"]:
        demo.ctx.say(f"           - {d['id']}  {d['capability']} {d['where']}  kept at {d['kept_at'] or '-'}")
    if out["status"] != "succeeded":
        raise RuntimeError(f"re-protect {out['run_id']} {out['status']}: " + "; ".join(
            f"{s['name']}: {s.get('message')}" for s in out["steps"] if s["status"] == "failed"))
    return out


def protected_back(demo: Demo) -> dict[str, Any]:
    """Cold (active) writes on and the reverse flows carry it to hot: an HDFS file copied by the
    ordinary replication (now cold → hot), Kafka records mirrored by MirrorMaker 2 cold → hot, HBase
    rows shipped by the reverse peer; a fresh checkpoint of the group (the switchover's gate)."""
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.failback.direction import directed
    from dr_toolkit.kafka import api
    from drt_demo import seed
    from drt_demo.demo import GROUP, HBASE_LATE_ROWS, HBASE_ROWS, HBASE_TABLE, KAFKA_TOPICS, WAREHOUSE

    hb_hot, hb_cold, _k_hot, k_cold = _clusters(demo)
    ledger = demo.ledger()
    topo = directed(demo.topology(), ledger)
    demo.hdfs_client(hb_cold).write(f"{WAREHOUSE}/{COLD_FILE_2}", data="written on cold after the re-protect\n", encoding="utf-8",
                                    overwrite=True)
    n = seed.seed_kafka(k_cold.bootstrap, KAFKA_TOPICS, records_per_partition=EXCURSION_RECORDS,
                        base_ts_ms=int(time.time() * 1000), key_prefix="protected-back")
    first = HBASE_ROWS + HBASE_LATE_ROWS + EXCURSION_ROWS
    hb_cold.put(first, PROTECTED_BACK_ROWS, table=HBASE_TABLE)
    r = replicate_policy(topo, "warehouse", ledger, access=demo.access)[0].to_json()
    demo.ctx.mm2_back.wait_mirrored(list(KAFKA_TOPICS), timeout=180)
    deadline = time.monotonic() + 180
    while (got := hb_hot.count_range(first, PROTECTED_BACK_ROWS, table=HBASE_TABLE)) < PROTECTED_BACK_ROWS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the reverse HBase peer shipped {got} of {PROTECTED_BACK_ROWS} rows to hot in 180 s")
        time.sleep(0.5)
    api.checkpoint(topo, ledger, groups=[GROUP], access=demo.access)
    demo.step("protected the other way", f"direction {topo.hot_name} → {topo.cold_name}; cold wrote on: "
                                        f"replication ({r['mode']}) copied {r['files_copied']} file(s) / "
                                        f"{r['bytes_copied']:,} bytes cold → hot, MirrorMaker 2 mirrored {n} more "
                                        f"records, the reverse HBase peer shipped {got} rows; group {GROUP} "
                                        "checkpointed on cold")
    return {"direction": [topo.hot_name, topo.cold_name], "copy": r}


def switchover(demo: Demo) -> dict[str, Any]:
    """The planned switchover back: the failover cold → hot (gate, final copy, final verify,
    promote) then the re-protect hot → cold; the forward flows (MirrorMaker 2 hot → cold, the HBase
    peer on hot — re-protect adds it) replace the reverse ones once hot is active."""
    from dr_toolkit.failback.direction import directed
    from dr_toolkit.failback.runbook import switchover as run_switchover
    from drt_demo.demo import write_topology
    from drt_servers.hbase import PEER

    hb_hot, hb_cold, k_hot, k_cold = _clusters(demo)
    ledger = demo.ledger()
    topo = directed(demo.topology(), ledger)

    def approve_failover(req: dict[str, Any]) -> dict[str, Any]:
        acks = [f["id"] for f in req.get("findings") or []]
        demo.step("switchover approval", f"failover {topo.hot_name} → {topo.cold_name} approved by the demo; gate "
                                         f"re-run: {(req.get('gate') or {}).get('verdict')}, recovery point "
                                         f"{req.get('recovery_point')}")
        return {"approved": True, "acknowledged": acks, "comment": "drt demo: switchover back"}

    def approve_reprotect(req: dict[str, Any]) -> dict[str, Any]:
        # hot is active again: the reverse flows stop, the forward MirrorMaker 2 runs again (it resumes
        # from its stored positions); the re-protect adds the forward HBase peer itself
        _stop(demo.ctx.mm2_back)
        hb_cold.remove_peer(PEER)
        demo.ctx.mm2 = _mirror(demo, k_hot.bootstrap, k_cold.bootstrap, ("hot", "cold"), "mm2")
        acks = [f["id"] for f in req.get("findings") or []]
        demo.step("switchover re-protect approval", f"reverse flows stopped (MirrorMaker 2 cold → hot, cold's peer "
                                                    f"{PEER}), MirrorMaker 2 hot → cold started again; "
                                                    f"{len(acks)} divergence item(s) to acknowledge")
        return {"approved": True, "acknowledged": acks, "comment": "drt demo: switchover back", "who": "drt-demo"}

    t0 = time.monotonic()
    out = run_switchover(topo, ledger, access=demo.access, reason="drt demo: back home", execute=True,
                         failover_approver=approve_failover, reprotect_approver=approve_reprotect, who="drt-demo")
    demo.ctx.summary["switchover"] = out
    fo, rp = out["failover"], out.get("reprotect") or {}
    demo.step("switchover failover", f"{fo['run_id']}: {fo['status']}; steps: "
                                     + ", ".join(f"{s['name']} {s['status']}" for s in fo["steps"]))
    if rp:
        demo.step("switchover re-protect", f"{rp['run_id']}: {rp['status']}; steps: "
                                           + ", ".join(f"{s['name']} {s['status']}" for s in rp["steps"])
                                           + f"; divergence items: {len(rp.get('divergence') or [])}")
    demo.step("switchover", f"{out['status']} in {time.monotonic() - t0:.1f}s")
    write_topology(demo.ctx)  # the configured direction runs again: the DAGs' topology, without the way back's
    if out["status"] != "succeeded":
        failed = [s for d in (fo, rp) for s in (d.get("steps") or []) if s["status"] == "failed"]
        raise RuntimeError(f"the switchover back {out['status']}: "
                           + "; ".join(f"{s['name']}: {s.get('message')}" for s in failed))
    return out


def _tree(client: Any, root: str) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for path, _dirs, files in client.walk(root):
        for f in files:
            full = f"{path.rstrip('/')}/{f}"
            with client.read(full) as r:  # the bytes (HDFS's own checksum differs for an appended file)
                data = r.read()
            out[full[len(root):].lstrip("/")] = (len(data), hashlib.sha256(data).hexdigest())
    return out


def proof(demo: Demo) -> dict[str, Any]:
    """The round trip, proven on the servers: ZooKeeper names hot active and the ledger the
    direction hot → cold; hot's protected tree equals cold's, file by file (SHA-256 of the bytes);
    every HBase row and Kafka record cold took while active is on hot; the stray writes are kept
    aside on hot, out of the protected data."""
    from dr_toolkit.failback.direction import recorded
    from dr_toolkit.failover.gate import check
    from dr_toolkit.zk.fencing import open_fence
    from drt_demo.demo import HBASE_LATE_ROWS, HBASE_ROWS, HBASE_TABLE, KAFKA_TOPICS, WAREHOUSE
    from drt_servers.kafka import mirror_behind

    hb_hot, hb_cold, k_hot, k_cold = _clusters(demo)
    topo, ledger = demo.topology(), demo.ledger()
    with open_fence(topo, access=demo.access) as fence:
        active = (fence.active() or {}).get("cluster")
    direction = recorded(ledger) or {}
    hot_tree, cold_tree = _tree(demo.hdfs_client(hb_hot), WAREHOUSE), _tree(demo.hdfs_client(hb_cold), WAREHOUSE)
    first = HBASE_ROWS + HBASE_LATE_ROWS
    n_rows = EXCURSION_ROWS + PROTECTED_BACK_ROWS
    rows_on_hot = hb_hot.count_range(first, n_rows, table=HBASE_TABLE)
    behind = mirror_behind(k_cold.bootstrap, k_hot.bootstrap, {t: f"cold.{t}" for t in KAFKA_TOPICS})
    stray_kept = [d for d in (demo.ctx.summary.get("reprotect") or {}).get("divergence") or [] if d.get("kept_at")]
    gate = check(topo, ledger, access=demo.access).to_json()
    ok = (active == "hot" and direction.get("hot") == "hot" and hot_tree == cold_tree and COLD_FILE in hot_tree
          and STRAY_FILE not in hot_tree
          and rows_on_hot == n_rows and not behind)
    res = {"active": active, "direction": direction, "hdfs_files_equal": hot_tree == cold_tree,
           "hdfs_files": len(hot_tree), "rows_from_cold_on_hot": rows_on_hot, "kafka_behind": len(behind),
           "kept_aside": len(stray_kept), "gate": gate["verdict"], "gate_reasons": gate["reasons"], "ok": ok}
    demo.ctx.summary["round_trip"] = res
    demo.step("round trip", f"{'proven' if ok else 'NOT proven'}: ZooKeeper names {active} active, protected "
                            f"{direction.get('hot')} → {direction.get('cold')}; hot's {WAREHOUSE} equals cold's "
                            f"({len(hot_tree)} files, byte for byte: {hot_tree == cold_tree}); the {n_rows} "
                            f"HBase rows cold wrote while active are on hot: {rows_on_hot}; cold's Kafka records on hot "
                            f"(cold.<topic>): {'all' if not behind else f'{len(behind)} partition(s) short'}; "
                            f"{len(stray_kept)} stray item(s) kept aside on hot; gate hot → cold: {gate['verdict']}")
    for r in gate["reasons"]:
        demo.ctx.say(f"           - {r}")
    if not ok:
        raise RuntimeError(f"the round trip is not proven: {res}")
    return res


def come_back(demo: Demo) -> dict[str, Any]:
    """Every phase, in order (after the demo's failover)."""
    excursion(demo)
    reprotect(demo)
    protected_back(demo)
    switchover(demo)
    return proof(demo)

