"""A manifest streams between the copy state location and the run (issue 42): ``StateStore``
writes it through ``manifest.encode_to`` into a spooled temporary file, hashed on the way, then to
the state's filesystem a chunk at a time, and reads it back a chunk at a time (checked against its
digest before it is decoded). The bytes are those of the whole-bytes encoder of before (kept here as
the oracle), and a manifest larger than the spool threshold is never held whole (tracemalloc peak).
Real local filesystem, real gzip files."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import spill, state
from dr_toolkit.copy.state import StateStore
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.fs.uri import parse_uri


def old_encode(entries: Any, header: dict[str, Any]) -> bytes:
    """The encoder before streaming (session 25, commit 0f424f6), whole bytes: the oracle."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1, mtime=0) as gz:
        w = io.BufferedWriter(gz, buffer_size=1 << 20)
        w.write((json.dumps({"header": header}) + "\n").encode())
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        rows: list[tuple[Any, ...]] = []
        for p, e in entries.items():
            rows.append((p, *e))
            if len(rows) == 4096:
                w.write(dumps(rows).encode() + b"\n")
                rows = []
        if rows:
            w.write(dumps(rows).encode() + b"\n")
        w.flush()
    return buf.getvalue()


def _store(tmp_path: Path) -> StateStore:
    return StateStore(parse_uri(f"file://{tmp_path}/state"), LocalFileSystem(), "file:///src", "file:///dst")


def _entries(n: int, seed: int = 5) -> dict[str, mf.Entry]:
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        p = f"d{i % 37}/é{rng.getrandbits(256):064x}.parquet"  # non-ASCII, incompressible
        out[p] = mf.Entry(rng.randrange(10**9), 1.6e9 + rng.random(), f"COMPOSITE-CRC32C:{rng.getrandbits(32):08x}",
                          rng.choice([None, 1.7e9 + i]), rng.choice([None, f"{i}:1"]),
                          rng.choice([None, f"MD5-of-0MD5-of-512CRC32C:{rng.getrandbits(128):032x}"]),
                          rng.choice([None, f"t{i}"]), rng.random() < 0.1, rng.choice([None, f"X:{rng.getrandbits(256):064x}"]))
    return out


def test_the_bytes_written_are_the_whole_bytes_encoders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "SPOOL_BYTES", 4096)  # past the spool threshold: through a file on disk
    monkeypatch.setattr(state, "IO_CHUNK", 1000)  # and written/read in many chunks
    store = _store(tmp_path)
    d = _entries(9000)  # more than one 4096-row line
    header = {"manifest_id": "m1", "pending": ["a"], "filters": None}
    want = old_encode(d, header)
    assert mf.encode(d, header) == want
    monkeypatch.setattr(spill, "BATCH", 100)
    spilled = mf.entries_map(d)
    assert spilled.spilled
    for mid, entries in (("m1", d), ("m2", spilled)):
        uri, digest = store.write_manifest(mid, entries, header)
        written = Path(uri[len("file://"):]).read_bytes()
        assert written == want and digest == hashlib.sha256(want).hexdigest() == mf.digest(written)
    got = store.read_manifest("m2", digest)
    assert got is not None and got[0] == header and list(got[1].items()) == list(d.items())
    assert got[1].spilled  # type: ignore[attr-defined]
    assert store.read_manifest("m2", "0" * 64) is None  # wrong digest: nothing decoded
    assert store.read_manifest("absent") is None
    # a run that changed nothing: its header read alone, the entries those of the full manifest
    uri, same = store.write_same_as("m3", "m2", digest, {"manifest_id": "m3"})
    small = Path(uri[len("file://"):]).read_bytes()
    assert small == old_encode({}, {"manifest_id": "m3", "entries_from": "m2", "entries_digest": digest})
    assert same == mf.digest(small) and store._header("m3") == mf.read_header(small)
    got = store.read_manifest("m3", same)
    assert got is not None and list(got[1].items()) == list(d.items())
    latest = store.latest()
    assert latest is not None and latest[0] == "m3" and latest[3] == same
    assert list(latest[2].items()) == list(d.items())
    assert mf.read_header(io.BytesIO(want)) == header == mf.read_header(want)


def test_a_manifest_past_the_spool_threshold_is_never_held_whole(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # every buffer small (the spool, the chunks, the line buffer, the rows to a line, the map's batch), so
    # what a write or a read holds at its peak is a few of them, whatever the manifest's size
    monkeypatch.setattr(state, "SPOOL_BYTES", 64 << 10)
    monkeypatch.setattr(state, "IO_CHUNK", 64 << 10)
    monkeypatch.setattr(mf, "LINE_BUFFER", 64 << 10)
    monkeypatch.setattr(mf, "CHUNK_ENTRIES", 128)
    monkeypatch.setattr(spill, "BATCH", 256)
    monkeypatch.setattr(spill, "FLUSH", 256)
    monkeypatch.setattr(spill, "PAGE", 256)
    store = _store(tmp_path)
    d = _entries(22_000)
    store.write_manifest("warm", {}, {})  # pair.json and the directories, before measuring
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        uri, digest = store.write_manifest("big", d, {"manifest_id": "big"})
        write_peak = tracemalloc.get_traced_memory()[1] - base
        size = Path(uri[len("file://"):]).stat().st_size
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        got = store.read_manifest("big", digest)
        read_peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        header = store._header("big")
        header_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert size > 2 << 20  # the manifest: 32 times the spool threshold and more
    assert got is not None and got[1].spilled and len(got[1]) == len(d)  # type: ignore[attr-defined]
    assert header == {"manifest_id": "big"}
    limit = size // 2  # held whole (as before), a write or a read would need the size and more
    assert write_peak < limit, (write_peak, size)
    assert read_peak < limit, (read_peak, size)
    assert header_peak < limit, (header_peak, size)
