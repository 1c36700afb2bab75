"""HBase's znode layout and value encodings, hand-encoded (no protobuf dependency).

Layout (``zookeeper.znode.parent`` = ``/hbase`` by default)::

    /hbase/rs/<server>                                   live region servers (ephemeral)
    /hbase/replication/peers/<id>                        ReplicationPeer (cluster key, table-CFs)
    /hbase/replication/peers/<id>/peer-state             ReplicationState (ENABLED/DISABLED)
    /hbase/replication/peers/<id>/tableCFs               table-CFs string (HBase 0.98–1.x only)
    /hbase/replication/rs/<server>/<queue>/<wal>         ReplicationHLogPosition (replicated offset)
    /hbase/replication/rs/<server>/lock                  ReplicationLock (claimer of a dead server)

Encodings: HBase 0.96 and later prefix protobuf values with the magic ``PBUF``; before 0.96
values were plain strings (``ENABLED``, the cluster key, the position in decimal). Values
written through HBase's RecoverableZooKeeper may also carry its metadata header (``0xFF``,
a 4-byte id length, the id) which readers must strip; the toolkit writes values without it,
as HBase readers accept both.

Messages used (HBase's ``ZooKeeper.proto`` / ``Replication.proto``)::

    message ReplicationPeer { required string clusterkey = 1; optional string replicationEndpointImpl = 2;
                              repeated TableCF table_cfs = 5; optional bool replicate_all = 8; ... }
    message TableCF { optional TableName table_name = 1; repeated bytes families = 2; }
    message TableName { required bytes namespace = 1; required bytes qualifier = 2; }
    message ReplicationState { enum State { ENABLED = 0; DISABLED = 1; } required State state = 1; }
    message ReplicationHLogPosition { required int64 position = 1; }
    message ReplicationLock { required string lock_owner = 1; }
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

PB_MAGIC = b"PBUF"
META_MAGIC = 0xFF
PEER_STATE = "peer-state"
TABLE_CFS_ZNODE = "tableCFs"
LOCK = "lock"


class DecodeError(ValueError):
    """A znode value is not in any encoding HBase writes."""


# --- paths --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    parent: str = "/hbase"

    def _p(self, *parts: str) -> str:
        return "/".join([self.parent.rstrip("/"), *parts]) if self.parent != "/" else "/" + "/".join(parts)

    @property
    def rs(self) -> str:
        return self._p("rs")

    @property
    def replication(self) -> str:
        return self._p("replication")

    @property
    def peers(self) -> str:
        return self._p("replication", "peers")

    @property
    def queues(self) -> str:
        return self._p("replication", "rs")

    def peer(self, peer_id: str) -> str:
        return self._p("replication", "peers", peer_id)

    def peer_state(self, peer_id: str) -> str:
        return self._p("replication", "peers", peer_id, PEER_STATE)

    def peer_table_cfs(self, peer_id: str) -> str:
        return self._p("replication", "peers", peer_id, TABLE_CFS_ZNODE)


def uses_protobuf(hbase_version: str) -> bool:
    """HBase 0.96 and later write protobuf values with the ``PBUF`` magic."""
    return _version(hbase_version) >= (0, 96)


def table_cfs_in_peer(hbase_version: str) -> bool:
    """HBase 2.0 and later keep table-CFs in the ReplicationPeer message; 0.98–1.x in a ``tableCFs`` znode."""
    return _version(hbase_version) >= (2, 0)


def _version(v: str) -> tuple[int, int]:
    m = re.match(r"^(\d+)(?:\.(\d+))?", v.strip())
    if not m:
        raise DecodeError(f"HBase version {v!r} is not like 2.5 or 0.94")
    return int(m.group(1)), int(m.group(2) or 0)


# --- protobuf wire format (just what these messages need) ----------------------------------------


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(fieldno: int, wire: int) -> bytes:
    return _varint((fieldno << 3) | wire)


def _ld(fieldno: int, payload: bytes) -> bytes:
    return _key(fieldno, 2) + _varint(len(payload)) + payload


def _vi(fieldno: int, n: int) -> bytes:
    return _key(fieldno, 0) + _varint(n)


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise DecodeError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


def parse_fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """Decode a protobuf message into ``(field number, value)`` pairs (varints and bytes only)."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        fieldno, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(buf, i)
            out.append((fieldno, v))
        elif wire == 2:
            n, i = _read_varint(buf, i)
            if i + n > len(buf):
                raise DecodeError("truncated field")
            out.append((fieldno, buf[i:i + n]))
            i += n
        elif wire == 1:
            out.append((fieldno, struct.unpack("<q", buf[i:i + 8])[0]))
            i += 8
        elif wire == 5:
            out.append((fieldno, struct.unpack("<i", buf[i:i + 4])[0]))
            i += 4
        else:
            raise DecodeError(f"unsupported wire type {wire}")
    return out


def strip_metadata(raw: bytes) -> bytes:
    """Remove RecoverableZooKeeper's ``0xFF <len:int32> <id>`` header when present."""
    if raw[:1] == bytes([META_MAGIC]) and len(raw) >= 5:
        (n,) = struct.unpack(">i", raw[1:5])
        if 0 <= n <= len(raw) - 5:
            return raw[5 + n:]
    return raw


def _pb_body(raw: bytes) -> bytes | None:
    raw = strip_metadata(raw)
    return raw[len(PB_MAGIC):] if raw.startswith(PB_MAGIC) else None


# --- ReplicationPeer --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerConfig:
    cluster_key: str
    table_cfs: dict[str, list[str]] | None = None  # None: all tables; {table: []} all CFs of table
    endpoint_impl: str | None = None
    replicate_all: bool | None = None
    extra_fields: tuple[tuple[int, int | bytes], ...] = field(default=(), compare=False)
    # HBase >= 2.0 filters (ReplicationPeer fields 6, 9, 10), as HBase reads them: None when absent
    namespaces: frozenset[str] | None = None
    exclude_table_cfs: dict[str, list[str]] | None = None
    exclude_namespaces: frozenset[str] | None = None

    @property
    def replicates_all(self) -> bool:
        if self.replicate_all is not None:
            return self.replicate_all
        return not (self.table_cfs or self.namespaces)

    def replicates(self, table: str, family: str | None = None) -> bool:
        """HBase's own rule (``ReplicationPeerConfig.needToReplicate``): does this peer ship
        ``table`` (``ns:name``; no namespace = ``default``) — with ``family``, that family; without,
        any family of it? ``replicate_all`` absent: true, unless the peer lists table-CFs or
        namespaces (HBase 1.x semantics, and what HBase 2.x's peer upgrader makes of such a peer)."""
        name = full_table(table)
        ns = name.split(":", 1)[0]
        if self.replicates_all:
            if self.exclude_namespaces and ns in self.exclude_namespaces:
                return False
            ex = {full_table(t): cfs for t, cfs in (self.exclude_table_cfs or {}).items()}
            if name not in ex:
                return True
            cfs = ex[name]
            return bool(cfs) and (family is None or family not in cfs)
        if self.namespaces is None and self.table_cfs is None:
            return False
        if self.namespaces and ns in self.namespaces:
            return True
        tc = {full_table(t): cfs for t, cfs in (self.table_cfs or {}).items()}
        return name in tc and (family is None or not tc[name] or family in tc[name])

    def replicates_namespace(self, namespace: str) -> bool:
        """Would a *new* table of ``namespace`` (no table-CFs entry yet) be shipped?"""
        if self.replicates_all:
            return not (self.exclude_namespaces and namespace in self.exclude_namespaces)
        return bool(self.namespaces and namespace in self.namespaces)


def full_table(table: str) -> str:
    """``ns:name`` with the ``default`` namespace spelled out."""
    return table if ":" in table else f"default:{table}"


def _split_table(table: str) -> tuple[bytes, bytes]:
    ns, sep, q = table.partition(":")
    return (ns.encode(), q.encode()) if sep else (b"default", table.encode())


def _join_table(ns: bytes, q: bytes) -> str:
    return q.decode() if ns in (b"", b"default") else f"{ns.decode()}:{q.decode()}"


def encode_peer(cfg: PeerConfig, hbase_version: str = "2.5") -> bytes:
    if not uses_protobuf(hbase_version):
        return cfg.cluster_key.encode()
    body = _ld(1, cfg.cluster_key.encode())
    if cfg.endpoint_impl:
        body += _ld(2, cfg.endpoint_impl.encode())
    if cfg.table_cfs is not None and table_cfs_in_peer(hbase_version):
        for table in sorted(cfg.table_cfs):
            ns, q = _split_table(table)
            tcf = _ld(1, _ld(1, ns) + _ld(2, q))
            for fam in cfg.table_cfs[table]:
                tcf += _ld(2, fam.encode())
            body += _ld(5, tcf)
    if table_cfs_in_peer(hbase_version):
        replicate_all = cfg.replicate_all if cfg.replicate_all is not None else cfg.table_cfs is None
        body += _vi(8, int(replicate_all))
    return PB_MAGIC + body


def decode_peer(raw: bytes) -> PeerConfig:
    body = _pb_body(raw)
    if body is None:
        text = strip_metadata(raw).decode(errors="replace").strip()
        if not text:
            raise DecodeError("empty peer znode")
        return PeerConfig(cluster_key=text)
    key: str | None = None
    impl: str | None = None
    tcfs: dict[str, list[str]] | None = None
    replicate_all: bool | None = None
    namespaces: set[str] = set()
    exclude_ns: set[str] = set()
    exclude_tcfs: dict[str, list[str]] | None = None
    for fno, v in parse_fields(body):
        if fno == 1 and isinstance(v, bytes):
            key = v.decode()
        elif fno == 2 and isinstance(v, bytes):
            impl = v.decode() or None
        elif fno in (5, 9) and isinstance(v, bytes):
            name, fams = _table_cf(v)
            if fno == 5:
                tcfs = tcfs or {}
                tcfs[name] = fams
            else:
                exclude_tcfs = exclude_tcfs or {}
                exclude_tcfs[name] = fams
        elif fno == 6 and isinstance(v, bytes):
            namespaces.add(v.decode())
        elif fno == 10 and isinstance(v, bytes):
            exclude_ns.add(v.decode())
        elif fno == 8 and isinstance(v, int):
            replicate_all = bool(v)
    if key is None:
        raise DecodeError("ReplicationPeer without clusterkey")
    return PeerConfig(cluster_key=key, table_cfs=tcfs, endpoint_impl=impl, replicate_all=replicate_all,
                      namespaces=frozenset(namespaces) or None, exclude_table_cfs=exclude_tcfs,
                      exclude_namespaces=frozenset(exclude_ns) or None)


def _table_cf(v: bytes) -> tuple[str, list[str]]:
    """A ``TableCF`` message: (table name, families)."""
    ns, q, fams = b"default", b"", []
    for f2, v2 in parse_fields(v):
        if f2 == 1 and isinstance(v2, bytes):
            for f3, v3 in parse_fields(v2):
                if f3 == 1 and isinstance(v3, bytes):
                    ns = v3
                elif f3 == 2 and isinstance(v3, bytes):
                    q = v3
        elif f2 == 2 and isinstance(v2, bytes):
            fams.append(v2.decode())
    return _join_table(ns, q), fams


# --- table-CFs string (HBase 0.98–1.x `tableCFs` znode and the shell's syntax) ----------------------


def format_table_cfs(table_cfs: dict[str, list[str]]) -> str:
    """``{"t1": ["cf1", "cf2"], "t2": []}`` → ``t1:cf1,cf2;t2``."""
    return ";".join(f"{t}:{','.join(c)}" if c else t for t, c in sorted(table_cfs.items()))


def parse_table_cfs(text: str) -> dict[str, list[str]]:
    """Parse ``ns:t1:cf1,cf2;t2`` / ``t1:cf1;t2`` (the shell's and HBase 1.x's syntax)."""
    out: dict[str, list[str]] = {}
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) == 1:
            out[parts[0]] = []
        elif len(parts) == 2:
            # t:cf1,cf2 (default namespace) — HBase's own parser reads it this way
            out[parts[0]] = [c.strip() for c in parts[1].split(",") if c.strip()]
        elif len(parts) == 3:
            out[f"{parts[0]}:{parts[1]}"] = [c.strip() for c in parts[2].split(",") if c.strip()]
        else:
            raise DecodeError(f"table-CFs item {item!r} is not table[:cf1,cf2]")
    for table, cfs in out.items():
        if not re.match(r"^[A-Za-z0-9_.\-]+(:[A-Za-z0-9_.\-]+)?$", table) or any(
                not re.match(r"^[A-Za-z0-9_.\-]+$", c) for c in cfs):
            raise DecodeError(f"table-CFs item {table}:{','.join(cfs)} has an invalid table or family name")
    return out


# --- ReplicationState ----------------------------------------------------------------------------


def encode_state(enabled: bool, hbase_version: str = "2.5") -> bytes:
    if not uses_protobuf(hbase_version):
        return b"ENABLED" if enabled else b"DISABLED"
    return PB_MAGIC + _vi(1, 0 if enabled else 1)


def decode_state(raw: bytes) -> str:
    """``ENABLED`` or ``DISABLED``."""
    body = _pb_body(raw)
    if body is None:
        text = strip_metadata(raw).decode(errors="replace").strip().upper()
        if text in ("ENABLED", "DISABLED"):
            return text
        raise DecodeError(f"peer-state value {text!r} is neither ENABLED nor DISABLED")
    for fno, v in parse_fields(body):
        if fno == 1 and isinstance(v, int):
            return "ENABLED" if v == 0 else "DISABLED"
    return "ENABLED"  # proto2 default of the enum


# --- WAL position and lock -----------------------------------------------------------------------


def encode_position(position: int, hbase_version: str = "2.5") -> bytes:
    if not uses_protobuf(hbase_version):
        return str(position).encode()
    return PB_MAGIC + _vi(1, position)


def decode_position(raw: bytes) -> int:
    """The replicated offset in the WAL; an empty value (a freshly queued WAL) is 0."""
    raw = strip_metadata(raw)
    if not raw:
        return 0
    body = _pb_body(raw)
    if body is not None:
        for fno, v in parse_fields(body):
            if fno == 1 and isinstance(v, int):
                return v
        return 0
    text = raw.decode(errors="replace").strip()
    if text.isdigit():
        return int(text)
    if len(raw) == 8:  # some versions wrote Bytes.toBytes(long)
        return int(struct.unpack(">q", raw)[0])
    raise DecodeError(f"WAL position value {raw!r} is not a number")


def encode_lock(owner: str, hbase_version: str = "2.5") -> bytes:
    if not uses_protobuf(hbase_version):
        return owner.encode()
    return PB_MAGIC + _ld(1, owner.encode())


def decode_lock(raw: bytes) -> str:
    """The lock owner: the claiming region server's znode (or name)."""
    body = _pb_body(raw)
    if body is None:
        return strip_metadata(raw).decode(errors="replace").strip()
    for fno, v in parse_fields(body):
        if fno == 1 and isinstance(v, bytes):
            return v.decode()
    return ""


# --- queue ids -------------------------------------------------------------------------------------

_SERVER = re.compile(r"^[^,]+,\d+,\d+$")


def parse_queue_id(queue_id: str) -> tuple[str, list[str]]:
    """``2-host1,60020,123-host2,60020,456`` → (``2``, [dead servers in claim order]).

    Host names may hold ``-``: parts are re-joined until they form ``host,port,startcode``.
    """
    peer, sep, rest = queue_id.partition("-")
    if not sep:
        return queue_id, []
    dead: list[str] = []
    acc = ""
    for part in rest.split("-"):
        acc = f"{acc}-{part}" if acc else part
        if _SERVER.match(acc):
            dead.append(acc)
            acc = ""
    if acc:  # not a server name after all: keep it whole
        dead.append(acc)
    return peer, dead


def server_from_lock_owner(owner: str) -> str:
    """A lock owner may be the claimer's full znode path; return the server name."""
    return owner.rstrip("/").rsplit("/", 1)[-1]
