"""Manifests: what a target holds after a run, one JSON line per file (gzip), stored in the
copy state location (:mod:`dr_toolkit.copy.state`) — never under the target — and indexed in
the ledger.

Each line: ``{"p": rel path, "s": size, "m": source mtime, "v": source change token,
"sc": the source's own checksum when the bytes were copied ("ALGO:hex"), "c": CRC32C of the
bytes written ("COMPOSITE-CRC32C:hex"), "tm": target mtime after commit, "tv": target change
token, "o": 1 when the source was open for write (copied up to the length listed), "tc": the
target's own checksum after commit (HDFS targets, whose fileId is no content token)}``.
The first line is a header with the run's metadata. Entries are stored as JSON arrays,
``[p, s, m, c, tm, v, sc, tv, o, tc]`` (rows without ``tc`` are read too), up to 4096 to a line (one ``json.loads`` per line, not per
file); lines of single ``{"p": ...}`` objects (the first format) are read too. A header with
``entries_from`` holds no entries: the run changed nothing and its entries are those of the
named manifest (whose sha256 is ``entries_digest``).

``sc`` and ``c`` are recorded for the same bytes: a later run proves a file unchanged by
comparing the source's checksum *now* with ``sc`` (same algorithm, same file) and the
target's with ``c`` — like with like, whatever checksum the source cluster answers.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import marshal
import time
import uuid
from collections.abc import Iterator, MutableMapping
from typing import IO, Any, NamedTuple

from dr_toolkit.copy.spill import RowCodec, SpillMap


class Entry(NamedTuple):
    """One file of a manifest (a named tuple: a million of them are built per plan)."""

    size: int
    mtime: float
    checksum: str | None = None  # CRC32C of the bytes the target holds ("COMPOSITE-CRC32C:hex")
    tmtime: float | None = None  # the target file's mtime when this entry was recorded
    version: str | None = None  # the source's change token when copied
    schecksum: str | None = None  # the source's own checksum of the same bytes
    tversion: str | None = None  # the target's change token after commit
    open: bool = False  # the source was open for write: copied up to the length listed
    tchecksum: str | None = None  # the target's own checksum after commit (where its token is no content token)

    def with_target(self, tmtime: float | None, tversion: str | None) -> Entry:
        return self._replace(tmtime=tmtime, tversion=tversion)


#: path -> entry: a :class:`~dr_toolkit.copy.spill.SpillMap` (a dict while small, on disk past a batch) or a dict
Entries = MutableMapping[str, Entry]

#: an entry as a spilled map's row: its fields marshalled
ENTRY_ROWS: RowCodec[Entry] = RowCodec(lambda e: marshal.dumps(tuple(e)), lambda b: Entry._make(marshal.loads(b)))


def entries_map(items: Any = ()) -> SpillMap[Entry]:
    """An empty (or filled) map of entries that spills to disk past a batch."""
    return SpillMap(ENTRY_ROWS, items)


def new_manifest_id() -> str:
    """A manifest id that sorts by creation time (nanoseconds), like the ledger's ids."""
    ns = time.time_ns()
    return f"manifest-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(ns // 10**9))}.{ns % 10**9:09d}-{uuid.uuid4().hex[:6]}"


CHUNK_ENTRIES = 4096
#: the buffer a manifest's JSON lines are written through and read through (decompressed bytes)
LINE_BUFFER = 1 << 20


class _Hashing:
    """A binary file object's ``write`` passed through, the bytes counted and hashed on the way."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.size, self.sha = out, 0, hashlib.sha256()

    def write(self, b: Any) -> int:
        self.sha.update(b)
        self.size += len(b)
        self.out.write(b)
        return len(b)

    def flush(self) -> None:
        self.out.flush()


def encode_to(out: IO[bytes], entries: Entries, header: dict[str, Any]) -> tuple[int, str]:
    """The manifest written into ``out`` as it is encoded (gzip; a spilled map is read a page at a
    time): O(one line of rows) in memory whatever the number of entries. Returns (bytes written,
    sha256 of them: :func:`digest`'s value). The bytes are :func:`encode`'s."""
    hashed = _Hashing(out)
    # filename="": never the name of ``out`` (a temporary file's) in the gzip header
    with gzip.GzipFile(filename="", fileobj=hashed, mode="wb", compresslevel=1, mtime=0) as gz:
        w = io.BufferedWriter(gz, buffer_size=LINE_BUFFER)
        w.write((json.dumps({"header": header}) + "\n").encode())
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        rows: list[tuple[Any, ...]] = []
        for p, e in entries.items():  # streamed: a spilled map is read a page at a time
            # one row per file: [p, size, mtime, checksum, tmtime, version, schecksum, tversion, open, tchecksum]
            rows.append((p, *e))
            if len(rows) == CHUNK_ENTRIES:
                w.write(dumps(rows).encode() + b"\n")
                rows = []
        if rows:
            w.write(dumps(rows).encode() + b"\n")
        w.flush()
    return hashed.size, hashed.sha.hexdigest()


def encode(entries: Entries, header: dict[str, Any]) -> bytes:
    """The manifest's bytes, whole (small manifests and tests; a run writes through :func:`encode_to`)."""
    buf = io.BytesIO()
    encode_to(buf, entries, header)
    return buf.getvalue()


#: a manifest's gzip bytes, whole, or a binary file object read as a stream
Source = bytes | IO[bytes] | io.RawIOBase


def decode(src: Source) -> tuple[dict[str, Any], Entries]:
    """The header and the entries (a :class:`~dr_toolkit.copy.spill.SpillMap`: decoded a line at a
    time into a map that spills to disk past a batch). ``src``: the bytes, or a binary file object
    read as a stream (never held whole)."""
    header: dict[str, Any] = {}
    out = entries_map()
    loads = json.loads
    make = Entry._make
    for line in _lines(src):
        d = loads(line)
        if isinstance(d, list):
            out.update((r[0], make(r[1:]) if len(r) == 10 else Entry(*r[1:])) for r in d)
        elif "header" in d:
            header = d["header"]
        else:
            out[d["p"]] = Entry(d["s"], d["m"], d.get("c"), d.get("tm"), d.get("v"), d.get("sc"), d.get("tv"),
                                bool(d.get("o")))
    return header, out


def read_header(src: Source) -> dict[str, Any]:
    """Only the header line (cheap: the rest is not decompressed, nor read from a file object past
    the first buffer)."""
    for line in _lines(src):
        d = json.loads(line)
        return dict(d.get("header") or {}) if isinstance(d, dict) else {}
    return {}


def _lines(src: Source) -> Iterator[bytes]:
    f = io.BytesIO(src) if isinstance(src, bytes | bytearray | memoryview) else src
    # mode="rb": a file object opened "w+b" (a temporary file) would otherwise be taken for writing
    with gzip.GzipFile(filename="", fileobj=f, mode="rb") as gz:
        yield from io.BufferedReader(gz, buffer_size=LINE_BUFFER)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
