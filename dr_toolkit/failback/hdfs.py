"""Re-protect for HDFS: what the old hot cluster took after the common base, kept aside, then the
old hot brought back to the common state and up to date with the active cluster by the delta only.

``topology`` is the topology of the direction that was failed over: its ``hot`` is the old active
cluster (fenced), its ``cold`` the active one. Per HDFS policy, the pair is the policy's source on
the old hot and its first target on the active cluster.

**The common base** is the last *completed* run of the pair (:func:`dr_toolkit.copy.signals.last_completed`:
succeeded, listing proven, nothing open): its manifest lists exactly what cold was given.

- With a **common snapshot** — that run read a snapshot of the source (``snapshots: true`` on a
  snapshottable directory) and the old hot still holds it, found by its snapshot id (issue 39),
  whatever its name now — the divergence is the NameNode's diff (GETSNAPSHOTDIFF) from it to
  ``drt-failback-<run_id>``, a snapshot of the old hot taken once so that the report, the set-aside
  and the rollback read one moment; the diff is read as the copy's snapshot-diff fast-forward reads
  one (:func:`dr_toolkit.copy.plan.apply_diff`: renames, moved directories, swaps).
- Without one (a ``local_root`` cluster, snapshots off, the snapshot gone): the old hot's live
  listing against the manifest (size, mtime, change token; the file's own checksum against the one
  recorded when a token says nothing about the bytes).
- No completed run (or its manifest unreadable): one item saying the base is unknown — never "no
  divergence".

Each created or modified file is one :class:`~dr_toolkit.failback.divergence.Divergence`
(``detail.change``: created / modified / deleted, ``detail.base``: "snapshot id N (name) of run X"
or "manifest M of run X"). :func:`set_aside` moves each created or modified file, on the old hot,
to ``<parent of the policy source>/.drt-divergence/<run_id>/<policy>/<relative path>`` (a rename on
the same filesystem: outside the source tree, so neither the reverse copy's ``--delete`` nor a
forward replication touches it; never deleted by the toolkit). Deleted files need nothing kept:
their base bytes come back with the rollback.

:func:`reprotect` then, per policy:

1. refuses (ProblemFound, nothing written) while a file of the old hot's tree (listed now: written
   after the report too) is neither the base's nor equal to the active cluster's file at that path —
   a write after the base that was not set aside;
2. with a common snapshot, rolls the old hot back (DistCp ``-rdiff``-like, within the old hot):
   every file it deleted or modified after the base — and that the active cluster still holds as
   the base run left it (else the copy replaces or deletes it anyway) — is written back from the
   base snapshot (a temporary name then a rename; mtime put back): no byte crosses between
   clusters for them;
3. copies the delta from the active cluster with the copy machinery (:func:`dr_toolkit.copy.api.distcp`)
   under the *reversed* topology (its fence checks apply: the runbook must lift the old hot's
   read-only flag, and pass its fencing epoch while the fence state names the old hot), options of
   the reversed policy with ``update`` and ``delete``: the run has no base manifest for this
   direction, so it compares the two trees (size, then each side's own checksum — HDFS's
   GETFILECHECKSUM: no data read) and copies only the files that differ. The active cluster never
   holds a snapshot of the base moment (targets are not snapshotted), so the forward delta is
   always this listing compare, and the result says so. The run is recorded in the ledger under
   the policy (its manifest is the base of the reversed replication's next run) and the reversed
   policy target's watermark is set, as `drt replicate` does;
4. once that copy is done, deletes the forward gate's proof snapshot (``drtproof-<id>``, the one the
   ledger's proof row names) from the active cluster's tree: the proof is void after the failover
   and the snapshot would otherwise pin every block the active cluster deletes from then on.

Every step is idempotent: a killed set-aside or re-protect is called again and completes.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import proof
from dr_toolkit.copy.api import distcp
from dr_toolkit.copy.plan import apply_diff, filters_of, unchanged
from dr_toolkit.copy.request import CopyRequest
from dr_toolkit.copy.signals import last_completed
from dr_toolkit.copy.state import LEASE_TTL_S, StateStore, default_state_uri
from dr_toolkit.errors import ConfigError, ProblemFound, UnreachableError
from dr_toolkit.failback.divergence import Divergence
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.base import (
    DIGEST_ALGO,
    Checksum,
    FileStatus,
    FileSystem,
    is_internal,
    same_bytes,
    tmp_name,
)
from dr_toolkit.fs.uri import Location, parse_uri
from dr_toolkit.topology import HdfsPolicy
from dr_toolkit.zk.fencing import assert_copy_allowed

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

ASIDE_DIR = ".drt-divergence"
FAILBACK_SNAP_PREFIX = "drt-failback-"

__all__ = ["ASIDE_DIR", "FAILBACK_SNAP_PREFIX", "aside_uri", "divergence", "reprotect", "set_aside"]


@dataclass
class _Pair:
    """One policy's pair (source on the old hot, first target on the active cluster) and its base."""

    policy: HdfsPolicy
    target: str
    src: Location
    tgt: Location
    run: dict[str, Any] | None = None
    manifest_id: str | None = None
    header: dict[str, Any] = field(default_factory=dict)
    entries: mf.Entries | None = None
    why: str = ""  # why there is no base (entries None)

    @property
    def rel_of(self) -> Callable[[str], str]:
        return lambda rel: self.policy.source.rstrip("/") + "/" + rel


def _pairs(topology: Topology, ledger: Ledger, access: Access) -> list[_Pair]:
    out = []
    for pol in topology.policies.hdfs:
        on_cold = [t for t in pol.targets if parse_uri(t, topology).cluster == topology.cold_name]
        if not on_cold:
            raise ConfigError(f"policy {pol.name!r} has no target on the active cluster {topology.cold_name!r}",
                              where=topology.source_file, hint="re-protect needs the target cold was given")
        src, tgt = parse_uri(pol.source, topology), parse_uri(on_cold[0], topology)
        pair = _Pair(pol, on_cold[0], src, tgt)
        _read_base(topology, ledger, access, pair)
        out.append(pair)
    return out


def _read_base(topology: Topology, ledger: Ledger, access: Access, pair: _Pair) -> None:
    """The last completed run of the pair and its manifest (header, entries), or why not."""
    run = last_completed(ledger, pair.policy.name, pair.tgt.uri)
    if run is None:
        pair.why = (f"no completed run of policy {pair.policy.name} into {pair.target}: the common base is "
                    "unknown, every file of the old hot may hold writes cold never had")
        return
    pair.run, pair.manifest_id = run, str(run["manifest_id"])
    row = ledger.manifest(pair.manifest_id)
    state = StateStore.open(default_state_uri(topology, pair.policy.options.state_dir), pair.src.uri, pair.tgt.uri,
                            topology, access)
    try:
        got = state.read_manifest(pair.manifest_id, (row or {}).get("content_digest"))
    finally:
        state.close()
    if got is None:
        pair.why = (f"the manifest {pair.manifest_id} of run {run['run_id']} (the last completed run) cannot be "
                    "read from the copy state location (missing or altered): the common base is unknown")
        return
    pair.header, pair.entries = got


def _common_snapshot(fs: FileSystem, pair: _Pair) -> tuple[str | None, str]:
    """The base run's source snapshot as the old hot names it now (found by its id), or why none."""
    name, sid = pair.header.get("source_snapshot"), pair.header.get("source_snapshot_id")
    if not fs.supports_snapshots:
        return None, f"the old hot {pair.src.uri} has no snapshots ({fs.kind})"
    if not name:
        return None, f"run {pair.run and pair.run['run_id']} read no snapshot (snapshots off or not snapshottable)"
    if sid is None:
        return None, f"run {pair.run and pair.run['run_id']} did not record which snapshot {name} was (its id)"
    infos = fs.snapshots(pair.src.path)
    now = next((n for n, i in infos.items() if i.identity == str(sid)), None)
    if now is None:
        return None, f"the base snapshot {name} ({sid}) is no longer on the old hot"
    return now, ""


def _base_label(pair: _Pair, snap: str | None) -> str:
    run_id = pair.run["run_id"] if pair.run else "?"
    if snap is not None:
        return f"snapshot {pair.header.get('source_snapshot_id')} ({snap}) of run {run_id}"
    return f"manifest {pair.manifest_id} of run {run_id}"


def _differs(fs: FileSystem, path: str, e: mf.Entry, s: FileStatus) -> bool:
    """``path`` (listed as ``s``) does not hold the bytes the manifest entry ``e`` recorded: another
    size; else its change token says nothing changed (a content token), else its own checksum is
    not the one recorded for the source when it was copied (SHA-256 or CRC32C of the bytes read
    here when that is what was recorded): a file rewritten with the very same bytes is unchanged."""
    if s.size != e.size:
        return True
    same_meta = unchanged(e, s)
    if same_meta and fs.content_token:
        return False
    for recorded in (e.schecksum, e.checksum):  # the source's own checksum, else the bytes written's
        verdict = _matches(fs, path, Checksum.parse(recorded))
        if verdict is not None:
            return not verdict
    return not same_meta


def _matches(fs: FileSystem, path: str, want: Checksum | None) -> bool | None:
    """``path``'s bytes have the checksum ``want`` (the filesystem's own when of that algorithm,
    else computed from the bytes read here); None when it cannot be said."""
    if want is None:
        return None
    try:
        own = fs.checksum(path) if fs.cheap_checksum else None
        if own is not None and own.algorithm == want.algorithm:
            return own == want
        if want.algorithm == DIGEST_ALGO:
            return fs.content_digest(path) == want
        if want.algorithm == "COMPOSITE-CRC32C":
            return fs.content_checksum(path) == want
    except (OSError, UnreachableError):
        return False
    return None


def _equal_files(a_fs: FileSystem, a: str, b_fs: FileSystem, b: str) -> bool:
    """Two files hold the same bytes: each side's own checksum when comparable, else read and compared."""
    sa, sb = a_fs.stat(a), b_fs.stat(b)
    if sa is None or sb is None or sa.is_dir or sb.is_dir or sa.size != sb.size:
        return False
    ca = a_fs.checksum(a) if a_fs.cheap_checksum else None
    cb = b_fs.checksum(b) if b_fs.cheap_checksum else None
    if ca is not None and ca.comparable(cb):
        return ca == cb
    return same_bytes(a_fs.read(a), b_fs.read(b))[0]


def _listing(fs: FileSystem, root: str, wanted: Callable[[str], bool]) -> dict[str, FileStatus]:
    out = {}
    for s in fs.list_files(root):
        rel = fs.relative(root, s.path)
        if rel and not is_internal(rel) and wanted(rel):
            out[rel] = s
    return out


@dataclass
class _Found:
    """What the old hot changed after the base: rel -> (change, detail)."""

    changes: dict[str, tuple[str, dict[str, Any]]]
    base: str
    snapshot: str | None = None  # the common snapshot's current name (snapshot mode)
    moment: str | None = None  # the failback snapshot read (snapshot mode)


def _by_listing(fs: FileSystem, pair: _Pair) -> dict[str, tuple[str, dict[str, Any]]]:
    entries = pair.entries or {}
    root = pair.src.path
    live = _listing(fs, root, filters_of(pair.policy.options).wanted)
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for rel, s in live.items():
        e = entries.get(rel)
        if e is None:
            out[rel] = ("created", {"size": s.size, "mtime": s.mtime})
        elif _differs(fs, fs.join(root, rel), e, s):
            out[rel] = ("modified", {"size": s.size, "mtime": s.mtime, "base_size": e.size, "base_mtime": e.mtime})
    for rel, e in entries.items():
        if rel not in live:
            out[rel] = ("deleted", {"base_size": e.size, "base_mtime": e.mtime})
    return out


def _by_diff(fs: FileSystem, pair: _Pair, old: str, new: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The changes from the base snapshot ``old`` to ``new`` (GETSNAPSHOTDIFF applied to the base
    manifest as a snapshot-diff fast-forward applies it); a changed file is compared with its entry."""
    entries = pair.entries or {}
    root = pair.src.path
    read_root = fs.snapshot_path(root, new)
    wanted = filters_of(pair.policy.options).wanted

    def stat_tree(rel: str, recursive: bool) -> dict[str, FileStatus] | None:
        s = fs.stat(fs.join(read_root, rel))
        if s is None:
            return {}
        if s.is_dir:
            if not recursive:
                return None
            return {r: x for x in fs.list_files(fs.join(read_root, rel))
                    if not is_internal(r := fs.relative(read_root, x.path))}
        return {rel: s}

    state, origin, changed = apply_diff(entries, fs.snapshot_diff(root, old, new), stat_tree)
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for rel, s in state.items():
        if not wanted(rel) or is_internal(rel):
            continue
        e = entries.get(rel)
        moved = origin.get(rel)
        d: dict[str, Any] = {"size": s.size, "mtime": s.mtime}
        if moved is not None and moved != rel:
            d["renamed_from"] = pair.rel_of(moved)
        if e is None:
            out[rel] = ("created", d)
        elif rel in changed:
            if _differs(fs, fs.join(read_root, rel), e, s):
                out[rel] = ("modified", {**d, "base_size": e.size, "base_mtime": e.mtime})
        elif moved is not None and moved != rel:
            was = entries[moved]
            if (was.size, was.schecksum or was.checksum) != (e.size, e.schecksum or e.checksum) \
                    or (was.schecksum or was.checksum) is None:
                out[rel] = ("modified", {**d, "base_size": e.size, "base_mtime": e.mtime})
    for rel, e in entries.items():
        if rel not in state and wanted(rel):
            out[rel] = ("deleted", {"base_size": e.size, "base_mtime": e.mtime})
    return out


def _find(fs: FileSystem, pair: _Pair, run_id: str | None, *, create: bool) -> _Found:
    """What the old hot changed after the base: by the snapshot diff base -> ``drt-failback-<run_id>``
    when there is a common snapshot (the failback snapshot taken when ``create`` and missing; a
    throw-away one, deleted after, when no ``run_id`` is given), else by its live listing."""
    snap, why = _common_snapshot(fs, pair)
    if snap is None:
        return _Found(_by_listing(fs, pair), _base_label(pair, None) + f" (no common snapshot: {why})")
    root = pair.src.path
    probe = run_id is None
    moment = FAILBACK_SNAP_PREFIX + (run_id if run_id is not None else f"probe-{uuid.uuid4().hex[:12]}")
    if not fs.snapshot_exists(root, moment):
        if not create and not probe:
            # a dry run before the failback snapshot exists: the live tree, listed
            return _Found(_by_listing(fs, pair), _base_label(pair, None)
                          + f" (dry run: {moment} not taken yet, the live tree listed)", snap)
        fs.create_snapshot(root, moment)
    try:
        changes = _by_diff(fs, pair, snap, moment)
    finally:
        if probe:
            fs.delete_snapshot(root, moment)
    return _Found(changes, _base_label(pair, snap) + (f" → {moment}" if not probe else " → now"), snap,
                  None if probe else moment)


def divergence(topology: Topology, ledger: Ledger, access: Access, *, recovery_point: float | None,
               run_id: str | None = None) -> list[Divergence]:
    """What each HDFS policy's source on the old hot took after the common base (see the module
    doc): one item per created, modified or deleted file, or one item saying the base is unknown.
    With ``run_id`` and a common snapshot, the moment read is the snapshot ``drt-failback-<run_id>``
    of the old hot (taken now if missing: the only thing written), which :func:`set_aside` and
    :func:`reprotect` read too; without ``run_id`` a throw-away snapshot is read and deleted."""
    items: list[Divergence] = []
    for pair in _pairs(topology, ledger, access):
        pol = pair.policy.name
        if pair.entries is None:
            items.append(Divergence("hdfs", pol, pair.policy.source, {
                "change": "unknown-base", "why": pair.why, "recovery_point": recovery_point}))
            continue
        fs = open_fs(pair.src, access)
        try:
            found = _find(fs, pair, run_id, create=True)
        finally:
            fs.close()
        assert pair.run is not None
        common = {"base": found.base, "base_run": pair.run["run_id"], "base_time": pair.header.get("source_time"),
                  "recovery_point": recovery_point}
        if recovery_point is not None and float(pair.header.get("source_time") or 0) > recovery_point + 1.0:
            common["note"] = "the base run listed the source after the recovery point"
        for rel, (change, d) in sorted(found.changes.items()):
            items.append(Divergence("hdfs", pol, pair.rel_of(rel), {"change": change, "rel": rel, **d, **common}))
    return items


def _aside_root(pair: _Pair, run_id: str) -> tuple[str, str]:
    """(fs path, URI) of this policy's aside directory for ``run_id`` on the old hot."""
    path = pair.src.path.rstrip("/")
    parent = posixpath.dirname(path)
    if not path or parent == path:
        raise ConfigError(f"policy {pair.policy.name}: its source {pair.policy.source} is a root: there is no "
                          "place beside it to keep the old hot's writes", where=pair.policy.source,
                          hint="make the policy's source a directory below the root")
    uri_parent = posixpath.dirname(pair.policy.source.rstrip("/"))
    tail = f"{ASIDE_DIR}/{run_id}/{pair.policy.name}"
    return posixpath.join(parent, tail), f"{uri_parent}/{tail}"  # a source at the top: /.drt-divergence/…


def aside_uri(topology: Topology, policy: str, run_id: str, rel: str = "") -> str:
    """Where :func:`set_aside` keeps ``rel`` of ``policy`` for ``run_id`` (a URI on the old hot)."""
    pol = topology.policy(policy)
    assert isinstance(pol, HdfsPolicy)
    pair = _Pair(pol, "", parse_uri(pol.source, topology), parse_uri(pol.source, topology))
    _, uri = _aside_root(pair, run_id)
    return f"{uri}/{rel}" if rel else uri


def set_aside(topology: Topology, ledger: Ledger, access: Access, items: list[Divergence], *,
              run_id: str) -> list[Divergence]:
    """Move every created or modified file of ``items`` aside on the old hot (see the module doc),
    never deleting anything; returns the items with ``kept_at`` (the aside URI). An unknown-base
    item keeps every file of the policy's tree. Idempotent: a file already kept is never moved
    again nor overwritten (what stands at its path by then is the rollback's or the copy's)."""
    pols = {p.name: p for p in topology.policies.hdfs}
    out: list[Divergence] = []
    for it in items:
        change = it.detail.get("change")
        if it.capability != "hdfs" or change not in ("created", "modified", "unknown-base"):
            out.append(it)
            continue
        pol = pols.get(it.policy)
        if pol is None:
            raise ConfigError(f"divergence item {it.id} names HDFS policy {it.policy!r}, not in the topology",
                              where=topology.source_file, hint="set aside with the topology the report was made from")
        src = parse_uri(pol.source, topology)
        pair = _Pair(pol, "", src, src)
        aside, aside_u = _aside_root(pair, run_id)
        fs = open_fs(src, access)
        try:
            if change == "unknown-base":
                rels = sorted(_listing(fs, src.path, filters_of(pol.options).wanted))
                for rel in rels:
                    _keep(fs, fs.join(src.path, rel), f"{aside}/{rel}")
                out.append(Divergence(it.capability, it.policy, it.where, {**it.detail, "files_kept": len(rels)},
                                      aside_u))
                continue
            rel = str(it.detail["rel"])
            if not _keep(fs, fs.join(src.path, rel), f"{aside}/{rel}"):
                raise ProblemFound(f"{it.where} ({change} after the base) is neither at its path nor kept at "
                                   f"{aside_u}/{rel}", where=pol.source,
                                   hint="something moved or deleted it since the divergence report: make the "
                                        "report again (divergence) before setting aside")
            out.append(Divergence(it.capability, it.policy, it.where, dict(it.detail), f"{aside_u}/{rel}"))
        finally:
            fs.close()
    return out


def _keep(fs: FileSystem, path: str, aside: str) -> bool:
    """``path`` moved to ``aside`` (True), or already there (True: never moved again, never
    overwritten); False when it is in neither place."""
    if fs.stat(aside) is not None:
        return True
    s = fs.stat(path)
    if s is None or s.is_dir:
        return False
    fs.mkdirs(posixpath.dirname(aside))
    fs.rename(path, aside)
    return True


def _restore(fs: FileSystem, root: str, snap: str, rel: str, e: mf.Entry, run_id: str) -> bool:
    """Write ``rel`` back from the base snapshot ``snap`` unless the live tree already holds its
    base bytes. A temporary name then a rename (a kill leaves a ``.drt-tmp`` file the copy cleans)."""
    live = fs.join(root, rel)
    s = fs.stat(live)
    if s is not None and not s.is_dir and not _differs(fs, live, e, s):
        return False
    if s is not None and s.is_dir:  # a directory hot made where the file was: its files were kept aside
        if any(True for _ in fs.list_files(live)):
            raise ProblemFound(f"{live} is a directory holding files where the base had a file",
                               hint="set the divergence aside first")
        fs.delete(live, recursive=True)
    for parent in _parents_of(rel):  # a file hot made where the base had a directory: kept aside by now
        p = fs.stat(fs.join(root, parent))
        if p is not None and not p.is_dir:
            raise ProblemFound(f"{fs.join(root, parent)} is a file where the base had a directory",
                               hint="set the divergence aside first")
    tmp = tmp_name(live, run_id)
    fs.mkdirs(posixpath.dirname(live))
    fs.write(tmp, fs.read(fs.join(fs.snapshot_path(root, snap), rel)), size_hint=e.size)
    if fs.supports_times:
        fs.set_times(tmp, e.mtime)
    fs.rename(tmp, live)
    return True


def _cold_holds_base(cold_fs: FileSystem, pair: _Pair, rel: str, e: mf.Entry) -> bool:
    """The active cluster still holds ``rel`` as the base run left it (size, mtime and change token
    recorded after the commit; no token recorded: its size): only then is a rollback of it worth
    doing — otherwise the reverse copy replaces or deletes it anyway."""
    s = cold_fs.stat(cold_fs.join(pair.tgt.path, rel))
    if s is None or s.is_dir or s.size != e.size:
        return False
    if e.tmtime is not None and abs(s.mtime - e.tmtime) > 1e-3:
        return False
    return e.tversion is None or s.version is None or s.version == e.tversion


def _parents_of(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _guard(src_fs: FileSystem, pair: _Pair, cold_fs: FileSystem) -> list[str]:
    """The files of the old hot's tree now that the reverse copy may overwrite or delete and that
    nothing keeps: not the base's (by size, mtime and change token, else by the checksum recorded),
    and not equal to the active cluster's file at that path. Read from a listing of the live tree,
    not from the report: a file written on the old hot after the report (its writers not stopped)
    is found too."""
    entries = pair.entries or {}
    root = pair.src.path
    bad = []
    for rel, s in sorted(_listing(src_fs, root, filters_of(pair.policy.options).wanted).items()):
        e = entries.get(rel)
        if e is not None and unchanged(e, s):
            continue
        path = src_fs.join(root, rel)
        if e is not None and not _differs(src_fs, path, e, s):
            continue  # the base's bytes (a file restored from the common snapshot)
        if _equal_files(src_fs, path, cold_fs, cold_fs.join(pair.tgt.path, rel)):
            continue  # what the active cluster holds (a file the reverse copy wrote)
        bad.append(rel)
    return bad


def reprotect(topology: Topology, ledger: Ledger, access: Access, *, run_id: str, dry_run: bool = False,
              progress: Callable[[str], None] | None = None, fence_epoch: int | None = None) -> dict[str, Any]:
    """Bring each HDFS policy's source on the old hot back to the common base and then up to date
    with the active cluster by the delta only (see the module doc). ``fence_epoch``: the fencing
    epoch the runbook holds, passed to the copies into the old hot (refused without it while the
    fence state names the old hot as fenced). Returns {"status": "done" | "failed" | "planned",
    "message", "policies": [per policy: base, rollback, copy counters, mode]}."""
    say = progress or (lambda _m: None)
    rev = topology.reversed()
    per: list[dict[str, Any]] = []
    failed: list[str] = []
    for pair in _pairs(topology, ledger, access):
        per.append(_reprotect_one(topology, rev, ledger, access, pair, run_id, dry_run, say, fence_epoch))
        if per[-1]["status"] == "failed":
            failed.append(pair.policy.name)
    copied = sum(int(p.get("files_copied") or 0) for p in per)
    nbytes = sum(int(p.get("bytes_copied") or 0) for p in per)
    restored = sum(int(p.get("files_restored") or 0) for p in per)
    if dry_run:
        status, msg = "planned", (f"hdfs: {len(per)} policies; would restore {restored} files from the common "
                                  f"snapshot and copy {copied} files ({nbytes} bytes) from {topology.cold_name}")
    elif failed:
        status, msg = "failed", f"hdfs: {', '.join(failed)} not brought up to date (see each policy's failures)"
    else:
        status, msg = "done", (f"hdfs: {len(per)} policies up to date with {topology.cold_name}: {restored} files "
                               f"restored from the common snapshot, {copied} files ({nbytes} bytes) copied")
    return {"status": status, "message": msg, "policies": per}


def _reprotect_one(topology: Topology, rev: Topology, ledger: Ledger, access: Access, pair: _Pair, run_id: str,
                   dry_run: bool, say: Callable[[str], None], fence_epoch: int | None) -> dict[str, Any]:
    name = pair.policy.name
    out: dict[str, Any] = {"policy": name, "old_hot": pair.policy.source, "active": pair.target}
    src_fs, cold_fs = open_fs(pair.src, access), open_fs(pair.tgt, access)
    try:
        if pair.entries is None:
            found = _Found({rel: ("created", {}) for rel in _listing(src_fs, pair.src.path,
                                                                   filters_of(pair.policy.options).wanted)},
                           f"none ({pair.why})")
        else:
            found = _find(src_fs, pair, run_id, create=not dry_run)
        out["base"] = found.base
        _aside, aside_u = _aside_root(pair, run_id)
        bad = _guard(src_fs, pair, cold_fs)
        if bad:
            msg = (f"{len(bad)} files the old hot changed after the base are still in {pair.policy.source}, not "
                   f"set aside, and differ from {pair.target} (e.g. {bad[0]})")
            if dry_run:
                out.update(status="failed", message=msg + ": set them aside first")
                return out
            raise ProblemFound(msg, where=pair.policy.source,
                               hint=f"set the divergence aside first (kept under {aside_u}), then re-protect")
        say(f"hdfs {name}: base {found.base}; {len(found.changes)} changes on the old hot after it, kept or equal")
        if not dry_run:  # the rollback writes into the old hot: the reverse copy's fence checks, first
            assert_copy_allowed(rev, pair.tgt, pair.src, epoch=fence_epoch, access=access)
        restored = 0
        if found.snapshot is not None and (found.moment is not None or dry_run) and pair.entries is not None:
            todo = sorted(rel for rel, (c, _d) in found.changes.items() if c in ("deleted", "modified"))
            out["rollback"] = f"{len(todo)} files deleted or modified on the old hot, from snapshot {found.snapshot}"
            for rel in todo:
                if not _cold_holds_base(cold_fs, pair, rel, pair.entries[rel]):
                    continue  # the active cluster changed or deleted it too: the copy brings its state
                if dry_run:
                    restored += 1
                elif _restore(src_fs, pair.src.path, found.snapshot, rel, pair.entries[rel], run_id):
                    restored += 1
                    say(f"hdfs {name}: restored {rel} from {found.snapshot}")
        else:
            out["rollback"] = "no common snapshot: the reverse copy compares every file"
        out["files_restored"] = restored
    finally:
        src_fs.close()
        cold_fs.close()
    out.update(_forward(rev, ledger, access, pair, dry_run, say, fence_epoch))
    if not dry_run and out["status"] == "done":
        out["proof_snapshot_deleted"] = _drop_forward_proof(ledger, access, pair)
    return out


def _drop_forward_proof(ledger: Ledger, access: Access, pair: _Pair) -> str | None:
    """The forward gate's proof snapshot (``drtproof-<id>``, :mod:`dr_toolkit.copy.proof`) on the
    active cluster's tree, deleted once the old hot is re-protected: that proof is void after the
    failover (runs since), nothing deletes it later (the next forward proof is of the other
    direction), and it would pin the blocks of every file the active cluster deletes. Only the
    snapshot the ledger's proof row names, and only with the proof prefix. Returns its name, or None."""
    rec = proof.recorded(ledger, pair.policy.name, pair.tgt.uri)
    snap = ((rec or {}).get("cold") or {}).get("snapshot")
    if not isinstance(snap, str) or not snap.startswith(proof.SNAP_PREFIX):
        return None
    fs = open_fs(pair.tgt, access)
    try:
        if not fs.supports_snapshots or not fs.snapshot_exists(pair.tgt.path, snap):
            return None
        fs.delete_snapshot(pair.tgt.path, snap)
        return snap
    finally:
        fs.close()


def _forward(rev: Topology, ledger: Ledger, access: Access, pair: _Pair, dry_run: bool,
             say: Callable[[str], None], fence_epoch: int | None) -> dict[str, Any]:
    """The delta from the active cluster into the old hot: one run of the reversed policy."""
    rpol = rev.policy(pair.policy.name)
    assert isinstance(rpol, HdfsPolicy)
    target = rpol.targets[0]
    opts = rpol.options.model_copy(update={"update": True, "delete": True, "overwrite": False})
    files = 0

    def copy_progress(kind: str, n: int) -> None:
        nonlocal files
        if kind == "plan":
            say(f"hdfs {pair.policy.name}: {n} bytes to copy from {rpol.source}")
        elif kind == "file":
            files += n
            say(f"hdfs {pair.policy.name}: {files} files copied")

    req = CopyRequest(rpol.source, target, options=opts, dry_run=dry_run, policy=rpol.name, progress=copy_progress,
                      fence_epoch=fence_epoch)
    with ledger.lease(f"policy:{rpol.name}", ttl_s=LEASE_TTL_S):
        r = distcp(req, access=access, topology=rev, ledger=ledger)
        if not dry_run and r.ok and r.watermark is not None:
            ledger.set_watermark("hdfs", f"{rpol.name}:{target}", r.watermark, {
                "manifest_id": r.manifest_id, "run_id": r.run_id, "mode": r.mode, "source_snapshot": r.source_snapshot,
                "source": rpol.source, "target": target})
    forward = (f"no common snapshot on {rev.hot_name}: listing compare" if r.base_manifest_id is None
               else f"from manifest {r.base_manifest_id}")
    status = "planned" if dry_run else ("done" if r.ok else "failed")
    return {"status": status, "forward": forward, "copy_run_id": r.run_id, "mode": r.mode,
            "mode_reason": r.mode_reason, "files_copied": r.files_copied, "bytes_copied": r.bytes_copied,
            "files_deleted": r.files_deleted, "files_skipped": r.files_skipped, "files_failed": r.files_failed,
            "failures": r.failures[:20], "manifest_id": r.manifest_id,
            "message": f"{r.files_copied} files ({r.bytes_copied} bytes) copied, {r.files_deleted} deleted"
                       + ("" if r.ok or dry_run else f", {r.files_failed} failed")}
