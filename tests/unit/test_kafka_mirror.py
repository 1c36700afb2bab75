"""The Kafka mirror value and its typed rows (issue 23): built once from the topology or from
bootstrap addresses alone; clients only through the given Access; the partition-count check in
one place; the rows turn into the JSON of docs/contracts.md and the ledger's rows unchanged."""

from __future__ import annotations

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.kafka.rows import Checkpoint, Position, RemapRow
from dr_toolkit.secrets import Credentials
from dr_toolkit.topology import parse_topology

TOPO = ("version: 1\nclusters:\n"
        "  prod: {role: hot, kafka: {bootstrap_servers: 'h:9092', max_clock_skew_s: 2.5, conn_id: kh}}\n"
        "  dr: {role: cold, kafka: {bootstrap_servers: 'c:9092', replication_policy: default, source_alias: prod,"
        " mm2_checkpoints_topic: prod.checkpoints.internal}}\n"
        "policies:\n  kafka:\n    - {name: k, topics: [orders], groups: [billing]}\n")


def test_mirror_from_the_topology_names_cold_topics_and_resolves_credentials_through_access() -> None:
    topo = parse_topology(TOPO, "drt.yaml")
    m = Mirror.of(topo, Access.from_mapping({"kh": Credentials(login="u", password="p")}))
    assert (m.cold_topic("orders"), m.skew_ms, m.checkpoints_topic) == ("prod.orders", 2500, "prod.checkpoints.internal")
    assert (m.hot.bootstrap, m.cold.bootstrap, m.policy_groups(), m.policy_topics()) == (
        "h:9092", "c:9092", ["billing"], ["orders"])
    with m.client("hot") as hot:
        assert hot._conf["sasl.username"] == "u" and hot.bootstrap == "h:9092"
    # the hot endpoint's connection is not defined: a ConfigError naming it, never another chain
    with pytest.raises(ConfigError, match="kh"):
        Mirror.of(topo, Access.none()).client("hot")
    # bootstrap overrides win; the cold endpoint names no connection
    with Mirror.of(topo, Access.none(), target_bootstrap="x:1").client("cold") as cold:
        assert cold.bootstrap == "x:1" and "sasl.username" not in cold._conf


def test_mirror_from_addresses_alone_and_a_cluster_without_kafka() -> None:
    m = Mirror.of(None, Access.none(), source_bootstrap="h:1", target_bootstrap="c:1")
    assert (m.cold_topic("t"), m.policy_groups(), m.skew_ms) == ("t", [], 120_000)
    with pytest.raises(ConfigError, match="no bootstrap servers for the cold"):
        Mirror.of(None, Access.none(), source_bootstrap="h:1").client("cold")
    topo = parse_topology("version: 1\nclusters:\n  a: {role: hot}\n  b: {role: cold, kafka: {bootstrap_servers: 'c:1'}}\n",
                          "drt.yaml")
    with pytest.raises(ConfigError, match="cluster 'a' \\(hot\\) has no kafka section"):
        Mirror.of(topo, Access.none()).client("hot")


def test_partition_counts_are_checked_in_one_place() -> None:
    m = Mirror.of(parse_topology(TOPO, "drt.yaml"), Access.none())
    cold = KafkaCluster("c:9092", role="cold")
    m.check_counts({"orders": 3}, cold, {"prod.orders": 3})
    with pytest.raises(ConfigError, match="partition count mismatch for topic 'orders': hot has 2 in group 'g'"):
        m.check_counts({"orders": 2}, cold, {"prod.orders": 3}, basis=" in group 'g''s checkpoint")
    with pytest.raises(ConfigError, match="topic prod.orders missing on the cold Kafka cluster"):
        m.check_counts({"orders": 2}, cold, {"orders": 2})


def test_rows_turn_into_the_ledger_rows_and_the_remap_json() -> None:
    row = {"checkpoint_id": "ck1", "group_id": "g", "topic": "t", "partition_id": 1, "committed_offset": 7,
           "record_timestamp": 1000, "timestamp_type": "create", "fingerprint": "ab#k=0", "log_start_offset": 0,
           "high_watermark": 9, "taken_at": 12.5}
    assert Checkpoint.from_row(row).to_json() == row
    r = RemapRow("t", "hot.t", 1, 7, 1000, Position(9, "skew_bound", 4, (9, 12)), checked=frozenset({"mm2_target"}))
    assert r.to_json() == {"topic": "t", "cold_topic": "hot.t", "partition": 1, "source_offset": 7,
                           "source_timestamp": 1000, "target_offset": 9, "method": "skew_bound", "probes": 4,
                           "duplicate_window": [9, 12], "may_reread": 3, "mm2_target": None}
    assert RemapRow("t", "t", 0, None, None, Position(None, "none")).offset is None


def test_one_search_on_a_partition_is_never_a_whole_read() -> None:
    """One group's remap (one target per partition) searches the live partition, as the per-group
    path did: a whole read pays every record for what a few probes answer."""
    from dr_toolkit.kafka.remap import worth_reading_whole

    assert not worth_reading_whole(1, 500) and worth_reading_whole(2, 500)
