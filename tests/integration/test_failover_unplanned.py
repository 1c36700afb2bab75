"""Unplanned failover on real servers: the hot site is lost — its own Kafka broker is killed and the
link to its HBase/ZooKeeper is cut; the toolkit fences (on the cold ZooKeeper), pauses the mirrors,
computes the recovery point from what cold holds, states the data-loss window per component, and
promotes only after the typed acceptance.

HBase is the session's real pair (hot → cold, peer ``1``). Its ZooKeeper lives inside the hot HBase
JVM, which the rest of the session shares: the topology reaches the hot ZooKeeper through a
:class:`~tests.support.netlink.TcpLink` that the test cuts (clients then get "connection refused",
as from a killed server) instead of killing the JVM."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.failover.gate import check
from dr_toolkit.failover.runbook import UNPLANNED_STEPS, Runbook, os_identity
from dr_toolkit.ledger import open_ledger
from dr_toolkit.topology import load_topology
from dr_toolkit.zk.client import connect
from dr_toolkit.zk.fencing import Fence
from tests.support import servers
from tests.support.fixtures_failover import drt, write_topology
from tests.support.netlink import TcpLink

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def fence_of(topo) -> dict:
    ep = topo.cold.zookeeper
    with connect(ep, credentials=None) as zk:
        return Fence(zk, ep.dr_root).snapshot()


@pytest.fixture
def disaster(tmp_path, tmp_path_factory, kafka_cold, hbase_worlds):
    """A hot site with its own broker (killed by the test) and the real hot HBase behind a link (cut
    by the test); the shared cold broker and the real cold HBase."""
    import uuid

    from tests.support.fixtures_kafka import Rec, commit_after_consuming, create_topic, produce, unique

    hot_hb, _ = hbase_worlds.clusters
    link = TcpLink("127.0.0.1", int(hot_hb.info["zk_port"])).start()
    # hot HBase's root directory is read through a link too: its NameNode answering means hot is up
    # (issue 38 #7: the unplanned run probes every hot component the topology names)
    nn_link = TcpLink("127.0.0.1", hot_hb.nn_http_port).start()
    hot_kafka = servers.kafka_broker(tmp_path_factory.mktemp("hot-kafka"), "hot-private").start()

    def lose_hot() -> None:
        link.cut()
        nn_link.cut()
        hot_kafka.kill()

    try:
        topic, group = unique("orders"), unique("billing")
        path = write_topology(
            tmp_path, zk=None, kafka_hot=hot_kafka.address, kafka_cold=kafka_cold.address,
            hdfs=[{"name": "wh", "source": "hdfs://hot/warehouse", "targets": ["hdfs://cold/warehouse"]}],
            hbase=[{"name": "hb", "peer_id": "1", "hbase_rootdir": f"webhdfs://{nn_link.address}{hot_hb.rootdir}"}],
            kafka=[{"name": "stream", "topics": [topic], "groups": [group]}], hbase_clusters=hbase_worlds.clusters,
            hot_extra={"zookeeper": {"quorum": link.address, "hbase_znode_parent": hot_hb.znode_parent,
                                     "dr_root": f"/drt-hot-{uuid.uuid4().hex[:8]}",
                                     "connect_timeout_s": 2, "call_timeout_s": 2}})
        topo = load_topology(path)
        ledger = open_ledger(topo, Access.from_env())
        from dr_toolkit.copy.api import replicate_policy
        from dr_toolkit.kafka.api import checkpoint

        # HDFS: replicated once; a file written afterwards is lost with hot
        src = tmp_path / "hot" / "warehouse"
        src.mkdir(parents=True)
        (src / "a.csv").write_text("1\n")
        replicate_policy(topo, "wh", ledger, access=Access.from_env())
        # Kafka: 5 records on hot, 3 mirrored; the group consumed 2 and was checkpointed
        for addr in (hot_kafka.address, kafka_cold.address):
            create_topic(addr, topic, 1)
        base = int(time.time() * 1000) - 10_000
        recs = [Rec(f"v{i}".encode(), base + i * 1000, b"k") for i in range(5)]
        produce(hot_kafka.address, topic, 0, recs)
        produce(kafka_cold.address, topic, 0, recs[:3])
        commit_after_consuming(hot_kafka.address, group, topic, {0: 2})
        checkpoint(topo, ledger, groups=[group], access=Access.from_env())
        # a gate check proves, by the identity of the records, what cold holds of the topic (issue 38 #4:
        # the unplanned window's Kafka evidence; cold's newest timestamp alone is none)
        assert check(topo, ledger, components=("kafka",), access=Access.from_env()).verdict == "NO_GO"
        # HBase: drained and proven by a gate check, then rows put on hot that never ship (peer disabled)
        world = hbase_worlds(topo)
        assert check(topo, ledger, components=("hbase",), access=Access.from_env()).verdict == "GO"
        hbase_written = time.time()
        world.lag(10)  # 10 rows of 100-byte values
        res = check(topo, ledger, components=("hbase",), access=Access.from_env())  # the last check sees them queued
        behind = next(s for s in res.signals if s.component == "hbase").detail["bytes_behind"]
        assert res.verdict == "NO_GO" and isinstance(behind, int) and behind >= 10 * 100, res.reasons
        (src / "late.csv").write_text("2\n")
        yield {"path": path, "topo": topo, "ledger": ledger, "lose_hot": lose_hot,
               "topic": topic, "group": group, "records": recs, "hbase_written": hbase_written,
               "hbase_behind": behind, "listed": ledger.watermarks("hdfs")[0]["watermark"],
               "cold": kafka_cold.address}
    finally:
        link.cut()
        nn_link.cut()
        hot_kafka.kill()


def test_unplanned_is_refused_while_the_hot_cluster_answers(disaster) -> None:
    topo, ledger = disaster["topo"], disaster["ledger"]
    out = Runbook.start(topo, ledger, access=Access.from_env(), reason="not really a disaster", execute=True,
                        unplanned=True).run()
    assert out["status"] == "failed"
    assert "the hot cluster still answers" in out["steps"][0]["message"]
    assert fence_of(topo)["fencing"]["epoch"] == 0


@pytest.mark.slow
@pytest.mark.child_process(native_abort_retries=2)  # hot's broker is killed under the process's librdkafka clients: see tests/support/child.py
def test_unplanned_failover_with_hot_killed_states_the_loss_window_and_promotes_after_acceptance(disaster) -> None:
    from tests.support.fixtures_kafka import committed

    topo, ledger, path = disaster["topo"], disaster["ledger"], disaster["path"]
    disaster["lose_hot"]()
    # the planned gate can never say GO now
    assert check(topo, ledger, timeout_s=20, access=Access.from_env()).verdict == "NO_GO"

    r = drt("--json", "failover", "run", "--unplanned", "--execute", "--yes-i-am-sure", "--reason", "site A lost",
            config=path, env={"DRT_ACTOR": "frank@ops"}, timeout=300)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    steps = {s["name"]: s for s in doc["steps"]}
    assert [s["name"] for s in doc["steps"]] == [s.value for s in UNPLANNED_STEPS]
    assert steps["fence_hot"]["status"] == "done" and steps["pause_mirrors"]["status"] == "done"
    assert steps["approval"]["status"] == "failed" and "typed acceptance" in steps["approval"]["message"]
    assert fence_of(topo)["active"] is None  # not promoted without the acceptance

    run_id = doc["run_id"]
    rb = Runbook.resume(topo, ledger, run_id, access=Access.from_env())
    req = rb.approval_request()
    lw = req["loss_window"]
    comps = {(c["component"], c["name"]): c for c in lw["components"]}
    hdfs = comps[("hdfs", "wh:hdfs://cold/warehouse")]
    kafka = comps[("kafka", disaster["topic"])]
    hbase = comps[("hbase", "1")]
    assert hdfs["safe_time"] == disaster["listed"] and "last completed run" in hdfs["basis"]
    assert "1 of 1 files present" in hdfs["basis"] and hdfs["known_missing"] is None  # cold listed now
    recs = disaster["records"]
    # what the gate check proved (cold's record 2 is hot's record 2): the oldest unmirrored record minus hot's
    # declared producer skew bound (the default 120 s: issue 20 #9), while cold still holds that record
    assert kafka["safe_time"] == recs[3].timestamp / 1000.0 - 120.0 and "proven at the check" in kafka["basis"]
    assert kafka["safe_time"] < recs[3].timestamp / 1000.0  # before the first record cold does not hold
    assert hbase["safe_time"] is not None and hbase["safe_time"] < disaster["hbase_written"]
    # what the last check measured on the real WAL (the sim wrote exactly 300 bytes)
    assert f"{disaster['hbase_behind']} bytes not shipped" in hbase["known_missing"], hbase
    assert all(c["unknowable"] and c["window"] for c in lw["components"])
    rp = lw["recovery_point_epoch"]
    assert rp == min(hdfs["safe_time"], kafka["safe_time"], hbase["safe_time"])
    with pytest.raises(ConfigError, match="typed acceptance"):
        rb.record_decision(True, "frank@ops")

    r = drt("--json", "failover", "run", "--execute", "--resume", run_id, "--yes-i-am-sure", "--accept-data-loss",
            config=path, env={"DRT_ACTOR": "frank@ops"}, timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["status"] == "succeeded" and doc["unplanned"] is True
    snap = fence_of(topo)
    assert snap["active"]["cluster"] == "cold" and snap["fencing"]["fenced_cluster"] == "hot"
    # the group resumes on cold no later than after the 2 records it had consumed (never skip); with the
    # default producer clock-skew bound the remap may settle earlier (a duplicate window, re-reading)
    pos = committed(disaster["cold"], disaster["group"], disaster["topic"], 1)
    assert set(pos) == {0} and 0 <= pos[0] <= 2
    events = ledger.audit_events(run_id=run_id, component="failover")
    appr = next(e for e in events if e["action"] == "approval" and e["status"] == "done")
    assert appr["actor"] == os_identity() and appr["after_state"]["accept_loss"] is True
    paused = next(e for e in events if e["action"] == "pause_mirrors" and e["status"] == "done")
    assert paused["after_state"]["paused"]["kafka"]["topics"] == [disaster["topic"]]
    report = json.loads((path.parent / "reports" / f"{run_id}.json").read_text())
    assert report["loss_window"]["recovery_point_epoch"] == rp
    assert "Data-loss window" in (path.parent / "reports" / f"{run_id}.html").read_text()


@pytest.mark.child_process(native_abort_retries=2)  # hot's broker is killed under the process's librdkafka clients: see tests/support/child.py
def test_unplanned_loss_window_checks_what_cold_holds_now(disaster) -> None:
    """Issue 20 #9: the HDFS safe time is the ledger's watermark only while cold still holds that run's
    files (a run killed after its deletions left a file under no name: "known missing: none" was
    false); Kafka topics are read under MirrorMaker 2's name on cold."""
    from dr_toolkit.access import Access
    from dr_toolkit.failover.unplanned import loss_window

    topo, ledger, tmp = disaster["topo"], disaster["ledger"], disaster["path"].parent
    disaster["lose_hot"]()
    lw = loss_window(topo, ledger, Access.from_env())
    hdfs = next(c for c in lw["components"] if c["component"] == "hdfs")
    assert hdfs["safe_time"] == disaster["listed"]
    (tmp / "cold" / "warehouse" / "a.csv").unlink()  # cold lost a file of the last completed run
    lw = loss_window(topo, ledger, Access.from_env())
    hdfs = next(c for c in lw["components"] if c["component"] == "hdfs")
    assert hdfs["safe_time"] is None and "a.csv" in hdfs["known_missing"], hdfs
    assert "hdfs wh:hdfs://cold/warehouse" in lw["unbounded"]
    # MirrorMaker 2's default policy names the topic hot.<topic> on cold: not "missing"
    doc = yaml.safe_load(disaster["path"].read_text())
    doc["clusters"]["cold"]["kafka"].update({"replication_policy": "default", "source_alias": "hot"})
    renamed = tmp / "renamed.yaml"
    renamed.write_text(yaml.safe_dump(doc))
    lw = loss_window(load_topology(renamed), ledger, Access.from_env())
    kafka = next(c for c in lw["components"] if c["component"] == "kafka")
    assert f"topic hot.{disaster['topic']} is missing" in kafka["basis"], kafka  # looked up under its MM2 name
