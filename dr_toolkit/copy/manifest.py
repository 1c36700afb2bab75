"""Manifests: what a target holds after a run, one JSON line per file (gzip), stored next to
the target under ``<target>/.drt/manifests/<id>.jsonl.gz`` and indexed in the ledger.

Each line: ``{"p": rel path, "s": size, "m": source mtime, "c": "ALGO:hex" | null,
"tm": target mtime after commit}``. The first line is a header with the run's metadata.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dr_toolkit.fs.base import INTERNAL_DIR, FileSystem, tmp_name


@dataclass(frozen=True, slots=True)
class Entry:
    size: int
    mtime: float
    checksum: str | None = None
    tmtime: float | None = None  # the target file's mtime when this entry was recorded


Entries = dict[str, Entry]


def new_manifest_id() -> str:
    """A manifest id that sorts by creation time (nanoseconds), like the ledger's ids."""
    ns = time.time_ns()
    return f"manifest-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(ns // 10**9))}.{ns % 10**9:09d}-{uuid.uuid4().hex[:6]}"


def manifest_path(fs: FileSystem, target_root: str, manifest_id: str) -> str:
    return fs.join(target_root, f"{INTERNAL_DIR}/manifests/{manifest_id}.jsonl.gz")


def encode(entries: Entries, header: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=3, mtime=0) as gz:
        w = io.BufferedWriter(gz, buffer_size=1 << 20)
        w.write((json.dumps({"header": header}) + "\n").encode())
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        for p in sorted(entries):
            e = entries[p]
            w.write(dumps({"p": p, "s": e.size, "m": e.mtime, "c": e.checksum, "tm": e.tmtime}).encode() + b"\n")
        w.flush()
    return buf.getvalue()


def decode(data: bytes) -> tuple[dict[str, Any], Entries]:
    header: dict[str, Any] = {}
    out: Entries = {}
    loads = json.loads
    for line in _lines(data):
        d = loads(line)
        if "header" in d:
            header = d["header"]
            continue
        out[d["p"]] = Entry(d["s"], d["m"], d.get("c"), d.get("tm"))
    return header, out


def _lines(data: bytes) -> Iterator[bytes]:
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
        yield from io.BufferedReader(gz, buffer_size=1 << 20)


def write_manifest(fs: FileSystem, target_root: str, manifest_id: str, entries: Entries,
                   header: dict[str, Any]) -> tuple[str, str]:
    """Write the manifest atomically (temporary name, then rename); return (path, sha256 digest)."""
    data = encode(entries, header)
    path = manifest_path(fs, target_root, manifest_id)
    tmp = tmp_name(path, manifest_id)
    fs.write(tmp, [data])
    fs.rename(tmp, path)
    return path, hashlib.sha256(data).hexdigest()


def read_manifest(fs: FileSystem, path: str, digest: str | None = None) -> tuple[dict[str, Any], Entries] | None:
    """The manifest at ``path``; None when it is missing or does not match ``digest``."""
    try:
        data = fs.read_all(path)
    except FileNotFoundError:
        return None
    if digest and hashlib.sha256(data).hexdigest() != digest:
        return None
    return decode(data)
