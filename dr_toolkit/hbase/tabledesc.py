"""HBase table descriptors as HBase stores them on HDFS, and their replication scope.

HBase 2.x keeps each table's descriptor in
``<hbase.rootdir>/data/<namespace>/<table>/.tabledesc/.tableinfo.<10-digit seq>[.<len>]`` — the
newest sequence number wins — as ``PBUF`` + a ``TableSchema`` protobuf (HBase.proto)::

    message TableSchema { optional TableName table_name = 1; repeated BytesBytesPair attributes = 2;
                          repeated ColumnFamilySchema column_families = 3; ... }
    message ColumnFamilySchema { required bytes name = 1; repeated BytesBytesPair attributes = 2; ... }
    message BytesBytesPair { required bytes first = 1; required bytes second = 2; }

A column family replicates when its ``REPLICATION_SCOPE`` attribute is ``1`` (global). Reading
these files through the hot cluster's filesystem answers "does every protected table replicate?"
without an ``hbase`` shell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dr_toolkit.hbase.encoding import PB_MAGIC, DecodeError, _ld, parse_fields

if TYPE_CHECKING:
    from dr_toolkit.fs import FileSystem

_TABLEINFO = re.compile(r"^\.tableinfo\.(\d{10})(?:\.\d+)?$")


@dataclass
class TableDesc:
    namespace: str
    table: str
    scopes: dict[str, int] = field(default_factory=dict)  # family -> REPLICATION_SCOPE
    durability: str | None = None  # the table's DURABILITY (None: not set = USE_DEFAULT)

    @property
    def skips_wal(self) -> bool:
        """``DURABILITY => SKIP_WAL``: the table's writes never enter the WAL, so replication (which
        ships the WAL) never ships them."""
        return (self.durability or "").upper() == "SKIP_WAL"

    @property
    def name(self) -> str:
        return f"{self.namespace}:{self.table}"

    @property
    def unscoped(self) -> list[str]:
        return sorted(f for f, s in self.scopes.items() if s != 1)


def encode_tabledesc(namespace: str, table: str, families: dict[str, int], durability: str | None = None) -> bytes:
    """``PBUF`` + TableSchema with one ColumnFamilySchema per family (its REPLICATION_SCOPE)."""
    tn = _ld(1, namespace.encode()) + _ld(2, table.encode())
    body = _ld(1, tn)
    if durability is not None:
        body += _ld(2, _ld(1, b"DURABILITY") + _ld(2, durability.encode()))
    for fam, scope in families.items():
        attr = _ld(1, b"REPLICATION_SCOPE") + _ld(2, str(scope).encode())
        body += _ld(3, _ld(1, fam.encode()) + _ld(2, attr))
    return PB_MAGIC + body


def decode_tabledesc(raw: bytes) -> TableDesc:
    if not raw.startswith(PB_MAGIC):
        raise DecodeError("table descriptor without the PBUF magic")
    ns = q = ""
    durability: str | None = None
    scopes: dict[str, int] = {}
    for no, v in parse_fields(raw[len(PB_MAGIC):]):
        if no == 2 and isinstance(v, bytes):  # the table's own attributes (BytesBytesPair)
            kv = dict((a, b) for a, b in parse_fields(v) if isinstance(b, bytes))
            if kv.get(1) == b"DURABILITY":
                durability = kv.get(2, b"").decode(errors="replace")
        elif no == 1 and isinstance(v, bytes):
            for n2, v2 in parse_fields(v):
                if isinstance(v2, bytes):
                    if n2 == 1:
                        ns = v2.decode()
                    elif n2 == 2:
                        q = v2.decode()
        elif no == 3 and isinstance(v, bytes):
            fam, scope = "", 0
            for n2, v2 in parse_fields(v):
                if n2 == 1 and isinstance(v2, bytes):
                    fam = v2.decode()
                elif n2 == 2 and isinstance(v2, bytes):
                    kv = dict((a, b) for a, b in parse_fields(v2) if isinstance(b, bytes))
                    if kv.get(1) == b"REPLICATION_SCOPE":
                        try:
                            scope = int(kv.get(2, b"0").decode())
                        except ValueError:
                            scope = 0
            scopes[fam] = scope
    return TableDesc(ns, q, scopes, durability)


def tabledesc_path(rootdir: str, namespace: str, table: str, seq: int = 1) -> str:
    return f"{rootdir.rstrip('/')}/data/{namespace}/{table}/.tabledesc/.tableinfo.{seq:010d}"


def read_table(fs: FileSystem, rootdir: str, namespace: str, table: str) -> TableDesc | None:
    """The newest descriptor of one table; None when the table has none (it does not exist)."""
    d = f"{rootdir.rstrip('/')}/data/{namespace}/{table}/.tabledesc"
    if fs.stat(d) is None:
        return None
    best: tuple[int, str] | None = None
    for st in fs.list_files(d):
        m = _TABLEINFO.match(st.path.rsplit("/", 1)[-1])
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), st.path)
    if best is None:
        return None
    raw = b"".join(fs.read(best[1]))
    return decode_tabledesc(raw)


def list_tables(fs: FileSystem, rootdir: str, namespace: str) -> list[str] | None:
    """Tables of a namespace (directories under ``data/<ns>``); None when the namespace is absent."""
    d = f"{rootdir.rstrip('/')}/data/{namespace}"
    if fs.stat(d) is None:
        return None
    out: set[str] = set()
    prefix = d.rstrip("/") + "/"
    for st in fs.list_files(d):
        rel = st.path[len(prefix):] if st.path.startswith(prefix) else st.path
        first = rel.split("/", 1)[0]
        if first and not first.startswith("."):
            out.add(first)
    return sorted(out)
