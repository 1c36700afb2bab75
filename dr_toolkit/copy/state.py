"""The copy state location: manifests and everything else a run remembers, outside the replica.

Where (first that applies):

1. ``CopyOptions.state_dir`` (a path or URI: ``/var/lib/drt``, ``hdfs://cold/system/drt``,
   ``s3://bucket/drt-state``), relative paths against the topology file's folder;
2. ``$DRT_STATE_DIR``;
3. with a topology: ``drt-state/`` beside the SQLite ledger, or beside the topology file;
4. without one: ``$XDG_STATE_HOME/drt`` (``~/.local/state/drt``).

It must lie outside the source and the target (checked before anything is written).

Layout, per (source, target) pair (``<pair>`` = 16 hex digits of a digest of the two URIs)::

    <state>/copy/<pair>/pair.json                 which source and target
    <state>/copy/<pair>/manifests/<id>.jsonl.gz   one per completed run (retention below)
    <state>/copy/<pair>/snapshots/<name>          a source snapshot this pair created and has not deleted
    <state>/copy/locks/<target digest>.lock       the per-target lock when no ledger is configured

Retention: the newest ``keep_manifests`` manifests are kept; older ones are deleted once
they are older than ``keep_manifests_days`` (at once when that is unset).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import posixpath
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy.execute import Cancelled
from dr_toolkit.errors import ConfigError, LeaseHeld
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.base import TMP_PREFIX, FileSystem, tmp_name
from dr_toolkit.fs.uri import Location, parse_uri
from dr_toolkit.ledger.lease import LeaseHolder
from dr_toolkit.paths import real_path

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)


def default_state_uri(topology: Topology | None, state_dir: str | None) -> str:
    """Where the copy state lives (see the module doc)."""
    base = Path(topology.source_file).resolve().parent if topology is not None and topology.source_file else None
    chosen = state_dir or os.environ.get("DRT_STATE_DIR")
    if chosen:
        if "://" in chosen:
            return chosen
        p = Path(chosen).expanduser()
        if not p.is_absolute():
            p = (base or Path.cwd()) / p
        return "file://" + str(p.resolve())
    if topology is not None:
        url = os.environ.get("DRT_LEDGER_URL") or topology.ledger.url
        if url.startswith("sqlite:///") and url not in ("sqlite:///", "sqlite:///:memory:"):
            db = Path(url[len("sqlite:///"):])
            if not db.is_absolute():
                db = (base or Path.cwd()) / db
            return "file://" + str(db.resolve().parent / "drt-state")
        if base is not None:
            return "file://" + str(base / "drt-state")
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return "file://" + str(Path(xdg).resolve() / "drt")


def pair_key(source: str, target: str) -> str:
    return hashlib.sha256(f"{source}\n{target}".encode()).hexdigest()[:16]


#: a manifest's gzip bytes are held in memory up to this size while written or checked, in a
#: temporary file (``$TMPDIR``) past it
SPOOL_BYTES = 8 << 20
#: the chunk a manifest is read from and written to the state location in
IO_CHUNK = 1 << 20


class ChunkReader(io.RawIOBase):
    """A stream of chunks (``FileSystem.read``) as a readable binary file object, the bytes hashed
    (``sha``: sha256) as they are read. Closing it closes the stream (a remote read ends there)."""

    def __init__(self, first: bytes, rest: Iterator[bytes]) -> None:
        super().__init__()
        self.sha = hashlib.sha256()
        self._rest: Iterator[bytes] | None = rest
        self._buf, self._pos = first, 0
        self.sha.update(first)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while self._pos == len(self._buf):
            nxt = next(self._rest, b"") if self._rest is not None else b""
            if not nxt:
                return 0
            self.sha.update(nxt)
            self._buf, self._pos = nxt, 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos:self._pos + n]
        self._pos += n
        return n

    def remaining(self) -> Iterator[bytes]:
        """The bytes not read yet, a chunk at a time (hashed too)."""
        return iter(lambda: self.read(IO_CHUNK), b"")

    def hexdigest(self) -> str:
        """sha256 of the bytes read so far (of the whole file once it has all been read)."""
        return self.sha.hexdigest()

    def close(self) -> None:
        rest, self._rest = self._rest, None
        close = getattr(rest, "close", None)
        if close is not None:
            close()
        super().close()


class StateStore:
    """The state of one (source, target) pair in the state location."""

    def __init__(self, loc: Location, fs: FileSystem, source: str, target: str) -> None:
        self.loc = loc
        self.fs = fs
        self.source = source
        self.target = target
        self.root = fs.join(loc.path, f"copy/{pair_key(source, target)}")

    @classmethod
    def open(cls, uri: str, source: str, target: str, topology: Topology | None,
             access: Access) -> StateStore:
        loc = parse_uri(uri, topology)
        return cls(loc, open_fs(loc, access), source, target)

    def close(self) -> None:
        self.fs.close()

    # -- paths -----------------------------------------------------------------------------------
    def manifest_path(self, manifest_id: str) -> str:
        return self.fs.join(self.root, f"manifests/{manifest_id}.jsonl.gz")

    def manifest_uri(self, manifest_id: str) -> str:
        return self.loc.uri.rstrip("/") + f"/copy/{pair_key(self.source, self.target)}/manifests/{manifest_id}.jsonl.gz"

    def _put(self, path: str, data: bytes | Iterable[bytes], size_hint: int | None = None) -> None:
        tmp = tmp_name(path, "state")
        self.fs.write(tmp, [data] if isinstance(data, bytes) else data, size_hint=size_hint)
        self.fs.rename(tmp, path)

    # -- manifests -------------------------------------------------------------------------------
    def write_manifest(self, manifest_id: str, entries: mf.Entries, header: dict[str, Any]) -> tuple[str, str]:
        """Write a manifest atomically; return (its URI, sha256 of its bytes)."""
        pair = self.fs.join(self.root, "pair.json")
        if self.fs.stat(pair) is None:
            self._put(pair, json.dumps({"source": self.source, "target": self.target}).encode())
        # encoded into a temporary file (in memory while small, on disk past SPOOL_BYTES), hashed on
        # the way, then written to the state location a chunk at a time: never whole in memory
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as f:
            size, digest = mf.encode_to(f, entries, header)
            f.seek(0)
            self._put(self.manifest_path(manifest_id), iter(lambda: f.read(IO_CHUNK), b""), size_hint=size)
        return self.manifest_uri(manifest_id), digest

    def write_same_as(self, manifest_id: str, base_id: str, base_digest: str, header: dict[str, Any]
                      ) -> tuple[str, str]:
        """A run that changed nothing: a manifest whose entries are those of ``base_id``."""
        base_header = self._header(base_id) or {}
        root = str(base_header.get("entries_from") or base_id)  # never a chain: point at the full one
        root_digest = str(base_header.get("entries_digest") or base_digest)
        return self.write_manifest(manifest_id, {}, {**header, "entries_from": root, "entries_digest": root_digest})

    def read_manifest(self, manifest_id: str, digest: str | None = None
                      ) -> tuple[dict[str, Any], mf.Entries] | None:
        """The manifest; None when it (or the manifest holding its entries) is missing or does
        not match its digest."""
        got = self._read(self.manifest_path(manifest_id), digest)
        if got is None or not got[0].get("entries_from"):
            return got
        full = self._read(self.manifest_path(str(got[0]["entries_from"])), got[0].get("entries_digest"))
        return None if full is None else (got[0], full[1])

    def _open(self, path: str) -> ChunkReader | None:
        """The file at ``path`` as a binary file object read a chunk at a time from the state
        location (None when missing)."""
        chunks = self.fs.read(path, chunk_size=IO_CHUNK)
        try:
            first = next(chunks, b"")
        except (FileNotFoundError, IsADirectoryError):
            return None
        return ChunkReader(first, chunks)

    def _header(self, manifest_id: str) -> dict[str, Any] | None:
        src = self._open(self.manifest_path(manifest_id))
        if src is None:
            return None
        with src:  # only the first buffer is read: closing it ends the read
            return mf.read_header(src)

    def _read(self, path: str, digest: str | None) -> tuple[dict[str, Any], mf.Entries] | None:
        src = self._open(path)
        if src is None:
            return None
        with src:
            if not digest:
                return mf.decode(src)
            # checked before anything is decoded: the bytes go to a temporary file (in memory while
            # small, on disk past SPOOL_BYTES) as they are hashed, and are decoded from there
            with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as f:
                for chunk in src.remaining():
                    f.write(chunk)
                if src.hexdigest() != digest:
                    return None
                f.seek(0)
                return mf.decode(f)

    def manifest_ids(self) -> list[str]:
        """The stored manifests, oldest first."""
        d = self.fs.join(self.root, "manifests")
        names = [posixpath.basename(s.path) for s in self.fs.list_files(d)]
        return sorted(n[:-len(".jsonl.gz")] for n in names if n.endswith(".jsonl.gz"))

    def latest(self) -> tuple[str, dict[str, Any], mf.Entries, str] | None:
        """The newest readable manifest of this pair (the base when no ledger indexes them),
        with the sha256 of its bytes."""
        for mid in reversed(self.manifest_ids()):
            src = self._open(self.manifest_path(mid))
            if src is None:
                continue
            with src:  # decoded as it is read, hashed on the way (the rest, if any, read for the digest)
                header, entries = mf.decode(src)
                for _ in src.remaining():
                    pass
                data_digest = src.hexdigest()
            if header.get("entries_from"):
                full = self._read(self.manifest_path(str(header["entries_from"])), header.get("entries_digest"))
                if full is None:
                    continue
                entries = full[1]
            return mid, header, entries, data_digest
        return None

    def prune(self, keep: int, max_age_days: float | None, protect: set[str], now: float | None = None) -> list[str]:
        """Apply retention; never deletes a manifest in ``protect``. Returns the ids deleted."""
        now = time.time() if now is None else now
        ids = self.manifest_ids()
        old = ids[:-keep] if keep > 0 else ids
        protect = set(protect)
        for mid in ids[-keep:] if keep > 0 else []:  # manifests holding the entries of kept ones
            h = self._header(mid)
            if h and h.get("entries_from"):
                protect.add(str(h["entries_from"]))
        out = []
        for mid in old:
            if mid in protect:
                continue
            if max_age_days is not None:
                st = self.fs.stat(self.manifest_path(mid))
                if st is not None and now - st.mtime < max_age_days * 86400:
                    continue
            self.fs.delete(self.manifest_path(mid))
            out.append(mid)
        return out

    # -- snapshots this pair created ---------------------------------------------------------------
    def note_snapshot(self, name: str) -> None:
        self._put(self.fs.join(self.root, f"snapshots/{name}"), b"")

    def forget_snapshot(self, name: str) -> None:
        self.fs.delete(self.fs.join(self.root, f"snapshots/{name}"))

    def noted_snapshots(self) -> list[str]:
        d = self.fs.join(self.root, "snapshots")
        return sorted(posixpath.basename(s.path) for s in self.fs.list_files(d))


def target_key(loc: Location) -> str:
    """The real location a target names, whatever URI spelled it: a local path resolved
    (symlinks, ``hdfs://<cluster>`` mapped to a ``local_root``), WebHDFS by its sorted NameNodes
    and path, S3 by bucket and prefix. One writer per key at a time."""
    if loc.kind == "local":
        return "file://" + real_path(loc.path)
    if loc.kind == "webhdfs":
        nns = sorted({f"{(urlparse(n).hostname or '').lower()}:{urlparse(n).port}" for n in loc.namenodes})
        return f"webhdfs://{','.join(nns)}{posixpath.normpath('/' + loc.path.strip('/'))}"
    return f"{loc.kind}://{loc.bucket or ''}/{loc.path.strip('/')}"


#: seconds a target lease lasts without renewal (renewed every third of it)
LEASE_TTL_S = float(os.environ.get("DRT_COPY_LEASE_TTL_S") or 120.0)


class LeaseLost(Cancelled):
    """This run no longer holds its target's lease (it was paused past the TTL, or another run
    took it): it stops before its next destructive step."""


class TargetLease:
    """The fencing check of a run's target lease: :meth:`check` before every destructive step.

    A ledger lease is held through the ledger's :class:`~dr_toolkit.ledger.lease.LeaseHolder`,
    renewed only while still valid (a run paused past it never takes it back silently, even when
    nobody else took it meanwhile, because another run may have come and gone). Without a ledger
    the exclusion is an flock (held until the process ends): :meth:`check` always passes."""

    def __init__(self, name: str, lease: LeaseHolder | None = None) -> None:
        self.name, self.lease = name, lease

    @property
    def holder(self) -> str | None:
        return self.lease.holder if self.lease is not None else None

    def check(self) -> None:
        if self.lease is not None and not self.lease.valid():
            self.lease.lost = True
            raise LeaseLost(f"this run lost the lease {self.name!r} (paused past its {self.lease.ttl_s:g} s, or "
                            "another run took it): stopped before writing more")


#: the fencing marker in a target's root (a temporary-file name: every listing passes over it)
FENCE_NAME = TMP_PREFIX + "fence"
#: the marker's HDFS block size: the NameNode charges a block being written against the space quota
#: at its full size until it is closed, so a marker made with the default 128 MiB could not be taken
#: under a smaller quota; 1 MiB is HDFS's smallest (dfs.namenode.fs-limits.min-block-size)
FENCE_BLOCK_SIZE = 1 << 20


@dataclass(frozen=True)
class Fence:
    """The fencing token a run holds on its target, checked without the ledger.

    Taking it (:func:`take_fence`) writes ``<target root>/.drt-tmp.fence`` anew — the integer
    token found there plus one, the holder and the time — by a temporary file renamed over it (S3:
    one PUT), so the marker gets a new change token (local: a new inode; HDFS: a new fileId; S3: a
    new ETag, the bytes being new). :meth:`check` stats the marker and compares its change token
    with the one this run wrote: a run that took the target after us rewrote it, so every
    destructive step of ours — in the driver and in every Spark executor, which need only the
    target's filesystem — stops. The check and the step that follows are two operations (see
    docs/design.md §1.1, "Exclusion")."""

    path: str
    token: int
    version: str  # the marker's change token as written by this run (its bytes when the fs has none)

    def check(self, fs: FileSystem) -> None:
        st = fs.stat(self.path)
        now = None if st is None or st.is_dir else (st.version or _fence_bytes(fs, self.path))
        if now != self.version:
            raise LeaseLost(f"another run took the target (its fencing marker {self.path} is no longer token "
                            f"{self.token} of this run): stopped before writing more")


def _fence_bytes(fs: FileSystem, path: str) -> str | None:
    try:
        return "bytes:" + hashlib.sha256(fs.read_all(path)).hexdigest()
    except (FileNotFoundError, IsADirectoryError):
        return None


def take_fence(fs: FileSystem, root: str, holder: str) -> Fence:
    """Become the target's owner for fencing: bump the marker's token (see :class:`Fence`). Called
    once the run holds the exclusion (ledger lease, flock or lock file) and before any destructive
    step; a run paused past its lease that wakes up finds the marker rewritten by whoever came next."""
    path = fs.join(root, FENCE_NAME)
    token = 0
    try:
        token = int(fs.read_all(path).split()[0])
    except (FileNotFoundError, IsADirectoryError, ValueError, IndexError, UnicodeDecodeError):
        pass
    data = f"{token + 1} {holder} {time.time():.3f}\n".encode()
    if fs.writes_in_place:  # S3: one PUT replaces the object whole
        fs.write(path, [data])
    else:
        tmp = tmp_name(path, holder)
        try:
            fs.write(tmp, [data], block_size=FENCE_BLOCK_SIZE)
        except OSError as exc:
            if "QuotaExceeded" not in str(exc):
                raise
            # not even one smallest block fits: an empty marker holds no block (its token, unread
            # next time, restarts at 1; the fence is its change token, a new fileId either way)
            fs.write(tmp, [])
        try:
            fs.rename(tmp, path)
        except Exception:
            if fs.stat(tmp) is None:  # removed as a dead run's temp file: another run is taking the target
                raise LeaseLost(f"another run took the target as this one started (its temp file {tmp} was "
                                "removed): stopped before writing anything") from None
            raise
    st = fs.stat(path)
    version = (st.version if st is not None else None) or _fence_bytes(fs, path)
    if version is None:
        raise OSError(f"the fencing marker {path} vanished as it was written")
    return Fence(path, token + 1, version)


def release_fence(fs: FileSystem, fence: Fence) -> None:
    """Remove the marker at the end of a run while it is still this run's (a run that took the
    target since keeps its own): nothing but the source's files stays under the target."""
    try:
        fence.check(fs)
        fs.delete(fence.path)
    except (LeaseLost, OSError) as exc:
        log.info("fencing marker %s left in place: %s", fence.path, exc)
    except Exception as exc:  # noqa: BLE001 - unreachable target at the end: the next run rewrites it
        log.warning("could not remove the fencing marker %s: %s", fence.path, exc)


@contextmanager
def target_lock(ledger: Ledger | None, state: StateStore, target: Location) -> Iterator[TargetLease]:
    """Exclude concurrent runs into one real target location (:func:`target_key`): the ledger
    lease ``copy-target:<key>`` (the same lease whoever runs: `drt distcp`, a policy, the DAG),
    renewed in the background and checked before every destructive step (:class:`TargetLease`);
    else a lock file in a local state location. A local target is also flocked itself, so a
    run with a ledger and one without (or with another state location) exclude each other.
    Raises LeaseHeld (exit 1) when another run holds it."""
    key = target_key(target)
    with _flock_target(target, key):
        if ledger is not None:
            name = f"copy-target:{key}"
            holder = LeaseHolder(ledger, name, f"copy:{os.getpid()}:{uuid.uuid4().hex[:8]}", LEASE_TTL_S)
            with holder.held(stop_when_lapsed=True):
                yield TargetLease(name, holder)
            return
        if state.loc.kind != "local":
            yield TargetLease(f"copy-target:{key}")  # no ledger and a remote state location: nothing else
            return
        d = Path(state.loc.path) / "copy" / "locks"
        d.mkdir(parents=True, exist_ok=True)
        path = d / (hashlib.sha256(key.encode()).hexdigest()[:16] + ".lock")
        with open(path, "a+") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LeaseHeld(f"another run is copying into {target.uri}", where=str(path),
                                hint="wait for it to finish") from None
            try:
                yield TargetLease(f"copy-target:{key}")
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@contextmanager
def _flock_target(target: Location, key: str) -> Iterator[None]:
    """A local target's own directory flocked (created first when missing): whatever ledger or
    state location another run uses, two runs never write one local directory at once."""
    if target.kind != "local":
        yield
        return
    root = key[len("file://"):]
    os.makedirs(root, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LeaseHeld(f"another run is copying into {root} (the real path of {target.uri})",
                            hint="wait for it to finish") from None
        yield
    finally:
        os.close(fd)


def check_outside(state: Location, *others: Location) -> None:
    """The state location must not lie inside (or contain) a replicated tree."""
    for o in others:
        if o.contains(state) or state.contains(o):
            raise ConfigError(f"the copy state location {state.uri} overlaps {o.uri}",
                              hint="set options.state_dir (or DRT_STATE_DIR) to a place outside the source and target")
