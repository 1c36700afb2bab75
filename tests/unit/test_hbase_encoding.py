"""HBase znode value encodings (hand-encoded protobuf with the PBUF magic, and pre-0.96 strings)."""

from __future__ import annotations

import struct

import pytest

from dr_toolkit.hbase.encoding import (
    DecodeError,
    Layout,
    PeerConfig,
    decode_lock,
    decode_peer,
    decode_position,
    decode_state,
    encode_lock,
    encode_peer,
    encode_position,
    encode_state,
    parse_queue_id,
    parse_table_cfs,
)


def test_state_bytes_match_hbase_protobuf() -> None:
    # ReplicationState { required State state = 1; } ENABLED=0, DISABLED=1
    assert encode_state(True) == b"PBUF\x08\x00"
    assert encode_state(False) == b"PBUF\x08\x01"
    assert encode_state(True, "0.94") == b"ENABLED"
    assert decode_state(b"PBUF\x08\x01") == "DISABLED"
    assert decode_state(b"DISABLED") == "DISABLED"


def test_position_bytes_match_hbase_protobuf() -> None:
    # ReplicationHLogPosition { required int64 position = 1; } — 254 is varint fe 01
    assert encode_position(254) == b"PBUF\x08\xfe\x01"
    assert decode_position(b"PBUF\x08\xfe\x01") == 254
    assert decode_position(b"") == 0  # a freshly queued WAL
    assert decode_position(b"254") == 254  # pre-0.96
    assert decode_position(struct.pack(">q", 123456789)) == 123456789
    big = 2**40 + 7
    assert decode_position(encode_position(big)) == big


def test_peer_protobuf_round_trip_and_bytes() -> None:
    raw = encode_peer(PeerConfig("zk1,zk2:2181:/hbase"))
    # field 1 (clusterkey, length-delimited) then field 8 (replicate_all = true)
    assert raw == b"PBUF\x0a\x13zk1,zk2:2181:/hbase\x40\x01"
    cfg = decode_peer(raw)
    assert cfg.cluster_key == "zk1,zk2:2181:/hbase" and cfg.table_cfs is None and cfg.replicate_all is True
    with_cfs = decode_peer(encode_peer(PeerConfig("zk:2181:/hbase", {"ns:t": ["a", "b"], "t2": []})))
    assert with_cfs.table_cfs == {"ns:t": ["a", "b"], "t2": []} and with_cfs.replicate_all is False
    assert decode_peer(b"zk:2181:/hbase") == PeerConfig("zk:2181:/hbase")


def test_recoverable_zookeeper_metadata_header_is_stripped() -> None:
    ident = b"12345@rs1.example.com"
    header = bytes([0xFF]) + struct.pack(">i", len(ident)) + ident
    assert decode_state(header + b"PBUF\x08\x01") == "DISABLED"
    assert decode_position(header + encode_position(99)) == 99
    assert decode_peer(header + encode_peer(PeerConfig("a:1:/h"))).cluster_key == "a:1:/h"


def test_lock_owner() -> None:
    owner = "/hbase/replication/rs/rs1,16020,1700000000000"
    assert decode_lock(encode_lock(owner)) == owner
    assert decode_lock(owner.encode()) == owner


def test_queue_ids_with_dead_servers_and_dashed_hosts() -> None:
    assert parse_queue_id("2") == ("2", [])
    assert parse_queue_id("2-1.1.1.2,60020,123456790") == ("2", ["1.1.1.2,60020,123456790"])
    assert parse_queue_id("2-1.1.1.2,60020,123456790-1.1.1.3,60020,123456630") == (
        "2", ["1.1.1.2,60020,123456790", "1.1.1.3,60020,123456630"])
    assert parse_queue_id("peer1-rs-a-1.example.com,16020,17-rs-b.example.com,16020,18") == (
        "peer1", ["rs-a-1.example.com,16020,17", "rs-b.example.com,16020,18"])


def test_table_cfs_syntax() -> None:
    assert parse_table_cfs("ns:t1:cf1,cf2;t2;t3:cf") == {"ns:t1": ["cf1", "cf2"], "t2": [], "t3": ["cf"]}
    with pytest.raises(DecodeError):
        parse_table_cfs("a:b:c:d")
    with pytest.raises(DecodeError):
        parse_table_cfs("t1:bad cf")


def test_layout_under_any_parent() -> None:
    lay = Layout("/hbase-x")
    assert lay.peer_state("1") == "/hbase-x/replication/peers/1/peer-state"
    assert lay.queues == "/hbase-x/replication/rs" and lay.rs == "/hbase-x/rs"
    assert Layout("/").peers == "/replication/peers"
