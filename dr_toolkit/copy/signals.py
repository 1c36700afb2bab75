"""The HDFS signal of the failover gate: per policy target, is cold caught up, and up to when
does it hold everything hot accepted (its safe time)?

``safe_time`` = the listing time (``source_time``) of the last *completed* run (status
``succeeded``, its listing proven to be the tree at one moment — a snapshot, or every directory
found unchanged after the walk, see ``copy.listing.proven_listing`` — and no file open for write at
the run: an open file is copied only up to the length the NameNode knows, and a writer's hflushed
bytes before the listing may lie past it) whose manifest
cold still holds. "Holds" is checked, not assumed: a dry run
lists cold and compares it with the newest manifest (a fast-forward plan means cold holds it
exactly), and the newest manifest must descend, through its ``base_manifest_id`` chain, from
that completed run's manifest through runs that only moved cold forward whole: each later run
completed too, or deleted and moved nothing on cold (one that deleted a file's old path and then
failed to copy it at its new one leaves cold without it: :func:`_descends`). Every write hot accepted
before that listing is then on cold — newer versions replace older ones, deletions are
deletions on both sides.

- cold changed, its manifest gone, or no completed run: no safe time (NO_GO), with the reason;
- files pending now (hot changed since the listing, or files a run could not copy): not caught
  up, the safe time still stated;
- entries on hot that are never replicated (symlinks, files named like the tool's temporary
  files, devices — everything a listing passes over but empty directories): no safe time
  (NO_GO), with counts per kind and an example — they were not on cold at any time;
- hot or cold unreachable: an unreadable signal (NO_GO).
"""

from __future__ import annotations

import concurrent.futures as cf
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.api import probe
from dr_toolkit.copy.proof import MODES, prove_target, quick_signal
from dr_toolkit.copy.state import StateStore, default_state_uri
from dr_toolkit.errors import ConfigError, DrtError, LedgerUnreachable
from dr_toolkit.errors import why as _why
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.kerberos import KerberosError
from dr_toolkit.signal import Signal, iso, unreadable

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import HdfsPolicy, Topology

CHAIN_LIMIT = 1000  # manifests walked back from the newest to the last completed run
PARALLEL = 8  # policy targets probed at once by the gate


def _is_completed(r: dict[str, Any]) -> bool:
    """The run copied everything it listed, whole: succeeded, its listing proven atomic (a
    directory renamed during a live walk can hide a file from it), and no file was open for write
    (an open file is copied up to the NameNode's length, while bytes a writer hflushed before the
    listing may already be past it)."""
    detail = r.get("detail") or {}
    return r["status"] == "succeeded" and bool(r.get("manifest_id")) and not int(
        detail.get("files_open") or 0) and detail.get("listing_proven") is not False


def last_completed(ledger: Ledger, policy: str, target_uri: str) -> dict[str, Any] | None:
    """The newest run of this target that completed (:func:`_is_completed`) — the one reader of
    it for the gate and for the unplanned failover's loss window (the ledger's ``hdfs`` watermark
    moves with every run that failed no file, one that left files open included)."""
    return next((r for r in _runs(ledger, policy, target_uri) if _is_completed(r)), None)


def _runs(ledger: Ledger, policy: str, target_uri: str) -> list[dict[str, Any]]:
    """This target's runs of the policy, newest first (the 500 newest runs of the policy)."""
    return [r for r in ledger.runs(policy=policy, limit=500) if r["target"] == target_uri]


def _descends(ledger: Ledger, newest: str, ancestor: str, runs: dict[str, dict[str, Any]]) -> str | None:
    """None when the manifest cold holds (``newest``) descends from the completed run's
    (``ancestor``) through runs that only moved cold forward whole; else why not. A run after the
    completed one that did not complete may stand in the chain only if it deleted and moved
    nothing on cold: one that deleted a file's old path and then failed to copy it under its new
    one (a live tree: renamed, then appended while copied) leaves cold without a file hot held
    before the completed run's listing — found by the torture test."""
    mid: str | None = newest
    for _ in range(CHAIN_LIMIT):
        if mid is None:
            break
        if mid == ancestor:
            return None
        run = runs.get(mid)
        if run is None:
            return (f"manifest {mid}, between the one cold holds and the last completed run's, was written by "
                    f"no run of this policy known to the ledger: what it changed on cold cannot be judged")
        if not _is_completed(run):
            detail = run.get("detail") or {}
            deleted, moved = int(run.get("files_deleted") or 0), int(detail.get("files_renamed") or 0)
            if deleted or moved:
                return (f"run {run['run_id']} ({run['status']}) deleted {deleted} and moved {moved} files on cold "
                        f"without completing: a file it removed from its old path may not be at its new one; "
                        f"run the policy again")
        row = ledger.manifest(mid)
        mid = row.get("base_manifest_id") if row else None
    return f"the manifest cold holds ({newest}) does not descend from the last completed run's ({ancestor})"


def hdfs_signals(topology: Topology, ledger: Ledger, access: Access, now: float, *,
                 mode: str = "full") -> list[Signal]:
    """One signal per HDFS policy target (name ``<policy>:<target>``), in the topology's order; see
    the module doc. The targets are probed side by side (each probe is a dry run: listings and
    manifest reads, mostly waiting on the NameNodes and DataNodes).

    ``mode`` (:mod:`dr_toolkit.copy.proof`): ``full`` the dry run (O(files)); ``prove`` the dry run,
    recorded as the target's proof when it states a safe time; ``quick`` the quick path only
    (O(changes), lists nothing): where it cannot prove, NO_GO saying why (a target whose cold is not on
    HDFS — local, S3: no NameNode record of its state — is checked in full); ``auto`` the quick path,
    and the recorded full proof where it cannot prove (or cannot tell what hot changed)."""
    if mode not in MODES:
        raise ValueError(f"hdfs signal mode {mode!r}: one of {', '.join(MODES)}")
    pairs = [(policy, target) for policy in topology.policies.hdfs for target in policy.targets]
    if len(pairs) <= 1:
        return [_signal(topology, ledger, access, now, p, t, mode) for p, t in pairs]
    with cf.ThreadPoolExecutor(max_workers=min(PARALLEL, len(pairs)), thread_name_prefix="drt-hdfs-gate") as ex:
        futs = [ex.submit(_signal, topology, ledger, access, now, p, t, mode) for p, t in pairs]
        return [f.result() for f in futs]  # LedgerUnreachable propagates: the caller exits 3


def _signal(topology: Topology, ledger: Ledger, access: Access, now: float, policy: HdfsPolicy, target: str,
            mode: str) -> Signal:
    """One target's signal by ``mode`` (see :func:`hdfs_signals`)."""
    if mode == "full":
        return _target_signal(topology, ledger, access, now, policy, target)
    if mode == "quick" and (kind := _cold_kind(topology, target)) not in (None, "webhdfs"):
        # a local or S3 cold keeps no record of its state a check could diff against (no NameNode):
        # the quick path would prove nothing ever, so this target is checked in full (its tree listed)
        full = _target_signal(topology, ledger, access, now, policy, target)
        full.detail["path"] = "full"
        full.detail["quick_not_proven"] = (f"cold is not on HDFS ({kind}): no NameNode keeps a record of its "
                                           "state, so it is checked in full")
        return full
    why: str | None = None
    if mode in ("quick", "auto"):
        sig, why = quick_signal(topology, ledger, access, now, policy, target)
        if sig is not None and (mode == "quick" or sig.detail.get("files_pending") is not None):
            return sig
        if mode == "quick":
            name = f"{policy.name}:{target}"
            return Signal("hdfs", name, False, None, None, "quick check: nothing proven",
                          {"path": "quick", "why": why, "listings": 0},
                          f"the quick check proves nothing: {why}; a full check records a proof "
                          "(`drt failover check`, or the replication run's own proof)")
        why = why or "hot's changes since the run are not known without its snapshot"
    sig = prove_target(_target_signal, topology, ledger, access, now, policy, target)
    sig.detail["path"] = "full"
    if why:
        sig.detail["quick_not_proven"] = why
    return sig


def _cold_kind(topology: Topology, target: str) -> str | None:
    """The filesystem of a policy target (``local``, ``webhdfs``, ``s3``); None when it cannot be
    parsed (the check itself then says why)."""
    try:
        return parse_uri(target, topology).kind
    except DrtError:
        return None


def prove_policy(topology: Topology, policy_name: str, ledger: Ledger, access: Access,
                 now: float | None = None) -> list[Signal]:
    """The full check of one policy's targets, each recorded as its proof when it states a safe
    time (``mode="prove"``): what the replication DAG runs right after a run, so the quick path of
    the DR page and ``dr_rpo_watch`` has a proof of the newest run (until then it proves nothing:
    a run since the last proof changed cold). O(files), like the run."""
    import time

    now = time.time() if now is None else now
    pol = next((p for p in topology.policies.hdfs if p.name == policy_name), None)
    if pol is None:
        raise ConfigError(f"policy {policy_name!r} is not an HDFS policy", where=topology.source_file,
                          hint="name a policy listed under policies.hdfs")
    return [_signal(topology, ledger, access, now, pol, t, "prove") for t in pol.targets]


def _proof(run: dict[str, Any]) -> str:
    """What proved that run's files equal (its ``proof_basis``; runs before the field: checksum)."""
    d = run.get("detail") or {}
    return ("proof " + str(d.get("proof_basis") or d.get("proof") or "checksum (each side's own checksum)")
            + " (at that run; cold checked now by size, mtime, change token and its own checksum)")


def _target_signal(topology: Topology, ledger: Ledger, access: Access, now: float, policy: HdfsPolicy,
                   target: str) -> Signal:
    """The signal of one policy target."""
    name = f"{policy.name}:{target}"
    try:
        target_uri = parse_uri(target, topology).uri
        runs = _runs(ledger, policy.name, target_uri)
        done = next((x for x in runs if _is_completed(x)), None)
        r = probe(topology, policy.name, target, ledger, access)
    except DrtError as exc:
        if isinstance(exc, (LedgerUnreachable, KerberosError)):
            raise  # no ledger, or no valid ticket (one line naming the principal, exit 3): nothing to judge
        return unreadable("hdfs", name, _why(exc))
    except Exception as exc:  # noqa: BLE001 - any failure is a NO_GO with its reason
        return unreadable("hdfs", name, _why(exc))
    files = r.files_copied + r.files_deleted + r.files_renamed
    detail: dict[str, Any] = {"files_pending": files, "bytes_pending": r.bytes_copied, "mode": r.mode,
                              "mode_reason": r.mode_reason, "cold_holds_manifest": r.base_manifest_id,
                              "last_completed_run": done["run_id"] if done else None}
    if done is None:
        return Signal("hdfs", name, False, None, None, "no completed run", detail,
                      "never replicated completely (no run of this target succeeded)")
    mrow = ledger.manifest(done["manifest_id"])
    if mrow is None:
        return Signal("hdfs", name, False, None, None, "manifest not indexed", detail,
                      f"the manifest {done['manifest_id']} of run {done['run_id']} is not in the ledger")
    detail["manifest_id"] = mrow["manifest_id"]
    detail["source_snapshot"] = mrow.get("source_snapshot")
    if r.mode != "fast-forward" or r.base_manifest_id is None:
        why: str | None = r.mode_reason or "cold holds no manifest"
    else:
        by_manifest = {x["manifest_id"]: x for x in runs if x.get("manifest_id")}
        why = _descends(ledger, r.base_manifest_id, mrow["manifest_id"], by_manifest)
    if why is not None:
        return Signal("hdfs", name, False, None, None, "cold does not hold a completed run", detail,
                      f"cold no longer holds the last completed run's files: {why}")
    safe = float(mrow["source_time"])
    detail["snapshot_age_s"] = round(max(0.0, now - safe), 1)  # how old the source state cold holds is
    basis = (f"listing of run {done['run_id']} at {iso(safe)} (manifest {mrow['manifest_id']}"
             + (f", snapshot {mrow['source_snapshot']}" if mrow.get("source_snapshot") else "")
             + f"); cold holds manifest {r.base_manifest_id} (checked against a listing of cold now); "
             + _proof(done))
    unreplicated = {k: v for k, v in r.skipped_reasons.items() if k != "empty directory"}
    if unreplicated:  # symlinks, temp-named files, devices on hot: never copied, so never on cold
        detail["unreplicated"] = unreplicated
        example = next((e["path"] for e in r.skipped_entries if e["reason"] != "empty directory"), "")
        return Signal("hdfs", name, False, None, None, basis, detail,
                      f"{sum(unreplicated.values())} entries on hot are never replicated ("
                      + ", ".join(f"{n} {k}" for k, n in sorted(unreplicated.items()))
                      + f"; e.g. {example}): replace them with regular files or exclude them")
    if files:
        return Signal("hdfs", name, False, max(0.0, now - safe), safe, basis, detail,
                      f"{files} files ({r.bytes_copied} bytes) pending since the last run")
    return Signal("hdfs", name, True, max(0.0, now - safe), safe, basis, detail)


def cold_holds(topology: Topology, ledger: Ledger, policy: HdfsPolicy, target: str, manifest_id: str,
               access: Access) -> tuple[list[str] | None, str]:
    """For an unplanned failover (hot unreachable): does cold still hold what the run that wrote
    ``manifest_id`` put there? Reads the manifest (state location) and lists cold only; returns
    the paths the manifest lists that are missing on cold or of another size, and a note — or
    ``(None, why)`` when either cannot be read (then nothing can be said about cold)."""
    try:
        src, tgt = parse_uri(policy.source, topology), parse_uri(target, topology)
        row = ledger.manifest(manifest_id)
        state = StateStore.open(default_state_uri(topology, policy.options.state_dir), src.uri, tgt.uri, topology,
                                access)
        try:
            got = state.read_manifest(manifest_id, (row or {}).get("content_digest"))
        finally:
            state.close()
        if got is None:
            return None, f"manifest {manifest_id} cannot be read from the state location (missing or altered)"
        entries = got[1]
        fs = open_fs(tgt, access)
        try:
            root = tgt.path.rstrip("/")
            listing = {fs.relative(root, st.path): st for st in fs.list_files(tgt.path)}
        finally:
            fs.close()
    except Exception as exc:  # noqa: BLE001 - unreadable: the caller states nothing about cold
        return None, _why(exc)
    bad = sorted(rel for rel, e in entries.items() if (st := listing.get(rel)) is None or st.size != e.size)
    return bad, (f"cold listed now against manifest {manifest_id}: {len(entries) - len(bad)} of {len(entries)} "
                 "files present with the recorded size")
