"""MirrorMaker-2-style selection (``topics_regex``/``topics_exclude``/``groups_regex``/
``groups_exclude``) resolved against the real hot broker's live groups and topics when the
checkpoint, the batched remap and the failover gate's Kafka signals run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.kafka import api
from dr_toolkit.kafka.signals import kafka_signals
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_kafka import (
    T0,
    Rec,
    commit_after_consuming,
    create_topic,
    drt,
    mirror,
    produce,
    unique,
    write_topology,
)
from tests.support.procs import free_port

pytestmark = pytest.mark.integration


def test_patterns_select_live_groups_and_topics_exclude_wins(kafka_env, tmp_path: Path) -> None:
    hot, cold = kafka_env
    tag = unique("sel")
    topic, skipped = f"{tag}-orders", f"{tag}-scratch"  # both match topics_regex; scratch is excluded
    for t in (topic, skipped):
        create_topic(hot, t, 2)
        create_topic(cold, t, 2)
        for p in range(2):
            produce(hot, t, p, [Rec(f"{t}-{p}-{i}".encode(), T0 + 10 * i, b"k") for i in range(8)])
            mirror(hot, cold, t, p)
    chosen, test_group, other = f"bill-{tag}-eu", f"bill-{tag}-test", f"other-{tag}"
    for g in (chosen, test_group, other):
        commit_after_consuming(hot, g, topic, {0: 3, 1: 5})
    commit_after_consuming(hot, chosen, skipped, {0: 2, 1: 2})  # offsets on an excluded topic: not carried
    policy = {"topics": [], "topics_regex": [f"{tag}-.*"], "topics_exclude": [f"{tag}-scr.*"],
              "groups_regex": [f"bill-{tag}-.*", f"nobody-{tag}-.*"], "groups_exclude": [f"bill-{tag}-test"]}
    cfg = write_topology(tmp_path / "drt.yaml", hot=hot, cold=cold, topics=[], groups=[],
                         ledger_url=f"sqlite:///{tmp_path}/l.db", policy=policy)
    nothing = f"policy 'stream': groups_regex 'nobody-{tag}-.*' matches no consumer group on the hot cluster"

    r = drt("--config", str(cfg), "kafka", "checkpoint")
    assert r.returncode == 0 and f"note: {nothing}" in r.stderr, r.stderr  # said, on one line
    topo = load_topology(cfg)
    ledger = Ledger.open(topo.ledger.url)
    assert ledger.checkpointed_groups() == [chosen]  # the excluded and the unmatched groups are not protected
    assert {(x["topic"], x["partition_id"], x["committed_offset"]) for x in ledger.latest_checkpoint(chosen)} == \
        {(topic, 0, 3), (topic, 1, 5)}  # nothing of the excluded topic
    lag = api.lag(topo, access=Access.from_env())
    assert lag["topics"] == [topic] and lag["caught_up"], lag

    r = drt("--json", "--config", str(cfg), "kafka", "remap", "--all")
    assert r.returncode == 0, r.stderr
    rm = json.loads(r.stdout)
    assert list(rm["groups"]) == [chosen] and rm["selection_notes"] == [nothing]
    assert sorted((x["partition"], x["target_offset"], x["method"]) for x in rm["groups"][chosen]["partitions"]) \
        == [(0, 3, "exact"), (1, 5, "exact")]

    sigs = kafka_signals(topo, ledger, Access.from_env(), time.time())
    assert sorted(s.name for s in sigs) == [f"group:{chosen}", topic]
    assert all(s.detail.get("selection_notes") == [nothing] for s in sigs)
    assert all(s.caught_up for s in sigs), [s.to_json() for s in sigs]

    # Hot gone (an unplanned failover): the groups come from the ledger's checkpoints, said in a
    # note; which topics the patterns select is unknown, so their lag is NO_GO, never skipped.
    gone = write_topology(tmp_path / "gone.yaml", hot=f"127.0.0.1:{free_port()}", cold=cold, topics=[], groups=[],
                          ledger_url=f"sqlite:///{tmp_path}/l.db", policy=policy, timeout_s=1.0)
    sigs = {s.name: s for s in kafka_signals(load_topology(gone), ledger, Access.from_env(), time.time())}
    assert set(sigs) == {"topics_regex:stream", f"group:{chosen}"}, list(sigs)
    assert not any(s.caught_up for s in sigs.values())
    assert "checkpointed group(s) in the ledger" in sigs[f"group:{chosen}"].detail["selection_notes"][0]
