"""distcp, replicate_policy, pending: the front door of file replication.

**The invariant.** After a run that ends without failed files (exit 0), with ``update`` (the
policies' default and ``drt distcp --update``) or ``overwrite``, every regular file of the
source is a file of the target at the same relative path with the same bytes, and — with
``delete`` — the target holds no other file. Directories exist exactly as parents of files.
A file the tool cannot prove equal is compared by content; nothing is skipped on a guess.

A run (:func:`distcp`, given one :class:`~dr_toolkit.copy.request.CopyRequest`): validate the URIs
(refusing overlaps by real path, before anything is written), take the target's lease and fence,
then its stages, as DistCp separates CopyListing, the copy and CopyCommitter:

- listing (:mod:`~dr_toolkit.copy.listing`): both trees walked, a live listing proven;
- planning (:mod:`~dr_toolkit.copy.planning` over the rules of :mod:`~dr_toolkit.copy.plan`): the
  base manifest found in the state location, the mode decided (bootstrap / fast-forward /
  reconcile / snapshot diff, with the reason) and the plan made;
- copying (:mod:`~dr_toolkit.copy.copying`, each file by :mod:`~dr_toolkit.copy.execute`): staged
  moves, type-change and ``--delete`` deletions, copies on an engine, ``--preserve`` fix-ups;
- commit (:mod:`~dr_toolkit.copy.commit`): killed runs' leftovers cleaned, outcomes accounted, the
  new manifest written to the state location (never under the target), retention applied, the
  manifest indexed and the run recorded in the ledger.
"""

from __future__ import annotations

import posixpath
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy.commit import (
    LogDir,
    clean_snapshots,
    clean_tmp,
    drop_snapshot,
    finish_run,
    open_log_dir,
    record_manifest,
    write_log,
)
from dr_toolkit.copy.copying import execute, processes_mode
from dr_toolkit.copy.execute import EXTRA_ATTRIBUTES, Cancelled, proof_basis
from dr_toolkit.copy.listing import Side, resolve
from dr_toolkit.copy.plan import Plan
from dr_toolkit.copy.planning import Listed, plan_run
from dr_toolkit.copy.request import CopyRequest, Progress
from dr_toolkit.copy.run import SNAP_PREFIX, Base, CopyResult, CopyRun, Snaps, base_of, new_id
from dr_toolkit.copy.state import (
    LeaseLost,
    StateStore,
    check_outside,
    default_state_uri,
    release_fence,
    take_fence,
    target_lock,
)
from dr_toolkit.errors import ConfigError, LeaseHeld
from dr_toolkit.fs import credentials_for
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.topology import CopyOptions, HdfsPolicy
from dr_toolkit.zk.fencing import assert_copy_allowed

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

__all__ = ["SNAP_PREFIX", "CopyRequest", "CopyResult", "CopyRun", "Progress", "distcp", "distcp_sources", "new_id",
           "pending", "probe", "replicate_policy"]


def distcp(request: CopyRequest, *, access: Access, topology: Topology | None = None,
           ledger: Ledger | None = None) -> CopyResult:
    """Copy the tree at ``request.source`` to ``request.target`` (DistCp semantics; see the module
    doc). Each endpoint's ``conn_id`` is looked up through ``access`` (the fencing ZooKeeper's too);
    with a ``ledger``, the run takes the target's lease there and is recorded.

    With a topology, a run that writes (not a dry run) is refused (FencedError) when the target
    cluster is fenced or read-only, and hot → cold once the hot cluster is fenced (unless it
    holds the current ``request.fence_epoch``: the runbook's final copy) or the cold one was
    promoted (:func:`dr_toolkit.zk.fencing.assert_copy_allowed`).

    ``request.cancel``: set it (e.g. from a SIGTERM handler) to stop the run: in-flight files are
    abandoned (their temp files removed, nothing half-visible) and the run is recorded
    ``interrupted``.

    ``request.diff=(S1, S2)`` (DistCp ``-diff S1 S2``, with ``update``): the tree is read from the
    source's existing snapshot S2; when the target's last run was at S1 only the NameNode's diff
    S1 -> S2 is applied (work in proportion to the changes), else S2 is listed and compared.
    ``request.rdiff=(S2, S1)`` (DistCp ``-rdiff S2 S1``, with ``update``): the target is put back to
    the source's snapshot S1: read from it, target files S1 does not have deleted. Neither creates
    nor deletes a snapshot; both are refused (exit 2) unless the source has them."""
    t0 = time.time()
    if request.more_sources:
        raise ConfigError("distcp copies one source", hint="use distcp_sources() for several")
    options = request.options
    if topology is not None and not request.dry_run:
        # by identity, not spelling: a webhdfs:// address of a cluster's NameNode is that cluster
        assert_copy_allowed(topology, parse_uri(request.source, topology), parse_uri(request.target, topology),
                            epoch=request.fence_epoch, access=access)
    src, tgt = resolve(request.source, request.target, topology, access, request.open_fs)
    log_fs: LogDir | None = None
    try:
        _check_options(src, tgt, options)
        src.list_threads = options.list_threads
        named, options = _named_snapshot(src, options, request.diff, request.rdiff)
        if not request.dry_run and options.log_dir:
            log_fs = open_log_dir(options.log_dir, src, tgt, topology, access, request.open_fs)
        state_uri = default_state_uri(topology, options.state_dir)
        state = StateStore.open(state_uri, src.loc.uri, tgt.loc.uri, topology, access)
        try:
            check_outside(state.loc, src.loc, tgt.loc)
            creds = (credentials_for(src.loc, access), credentials_for(tgt.loc, access))
            run = CopyRun(src, tgt, state, options, ledger=ledger, dry_run=False, policy=request.policy,
                          progress=request.progress, creds=creds, spark_master=request.spark_master, t0=t0,
                          cancel=request.cancel or threading.Event(), named=named)
            if request.dry_run:
                return _run(replace(run, dry_run=True))
            try:
                with target_lock(ledger, state, tgt.loc) as lease:
                    marker = take_fence(tgt.fs, tgt.root, lease.holder or new_id("copy"))
                    tgt.marker = marker

                    def fence() -> None:  # the lease still ours (driver clock), the marker still ours (target)
                        lease.check()
                        marker.check(tgt.fs)

                    tgt.fence = fence
                    try:
                        r = _run(run)
                    finally:
                        release_fence(tgt.fs, marker)
                if log_fs is not None:
                    write_log(log_fs, r)
                return r
            except LeaseLost as exc:
                raise LeaseHeld(str(exc), where=tgt.loc.uri,
                                hint="another run may have written the target since: the next run reconciles it"
                                ) from None
        finally:
            state.close()
    finally:
        src.fs.close()
        tgt.fs.close()
        if log_fs is not None:
            log_fs.fs.close()


def _check_options(src: Side, tgt: Side, options: CopyOptions) -> None:
    """Refuse (exit 2, nothing written) a ``--preserve`` the two ends cannot honour: DistCp
    fails such a job too (ACLs and xattrs need both filesystems to support them); and a
    ``DRT_COPY_PROCESSES`` that is not auto, on or off."""
    processes_mode()
    extra = EXTRA_ATTRIBUTES.intersection(options.preserve)
    for side, what in ((src, "source"), (tgt, "target")):
        missing = sorted(a for a in extra if a not in side.fs.preservable)
        if missing:
            raise ConfigError(f"--preserve {','.join(missing)}: the {what} {side.loc.uri} ({side.fs.kind}) cannot "
                              f"{'read' if what == 'source' else 'set'} {' or '.join(missing)}",
                              hint="owner and group need local or HDFS ends, acl and xattr HDFS on both ends")


#: what a snapshot diff cannot see (said in a -diff/-rdiff run's mode_reason and in --help)
DIFF_BLIND_SPOT = ("a snapshot diff does not report a file rewritten in place (TRUNCATE + APPEND + SETTIMES "
                   "back to the same size and mtime: HDFS's own limit); a run without -diff/-rdiff compares "
                   "every file")


def _named_snapshot(src: Side, options: CopyOptions, diff: tuple[str, str] | None,
                    rdiff: tuple[str, str] | None) -> tuple[tuple[str, str, str] | None, CopyOptions]:
    """-diff/-rdiff: (the source snapshot read, what the report says, the snapshot named as the
    target's base) and the run's options (-rdiff deletes what the snapshot does not have);
    refused (exit 2) as DistCp refuses them."""
    if diff is None and rdiff is None:
        return None, options
    if diff is not None and rdiff is not None:
        raise ConfigError("-diff and -rdiff do not go together", hint="pick one")
    flag = "-diff" if diff is not None else "-rdiff"
    a, b = diff if diff is not None else rdiff  # type: ignore[misc]
    if not options.update:
        raise ConfigError(f"{flag} needs --update (as DistCp requires)", hint="add --update")
    if not src.fs.supports_snapshots:
        raise ConfigError(f"{flag}: the source {src.loc.uri} is not on HDFS (no snapshots)",
                          hint="name snapshots of an HDFS source directory")
    if src.single:
        raise ConfigError(f"{flag}: the source {src.loc.uri} is a file", hint="name the snapshottable directory")
    if a == b:
        raise ConfigError(f"{flag} {a} {b}: the two snapshots are the same", hint="name two different snapshots")
    for name in (a, b):
        if not name or "/" in name:
            raise ConfigError(f"{flag}: {name!r} is not a snapshot name", hint="give names, not paths")
    # -diff: the source has both; -rdiff S2 S1: the source has S1 (S2 is the target's, in DistCp:
    # here the target's state is read from its manifest and listing, not from a snapshot)
    for name in (a, b) if diff is not None else (b,):
        if not src.fs.snapshot_exists(src.root, name):
            raise ConfigError(f"{flag}: the source {src.loc.uri} has no snapshot {name!r}",
                              hint=f"list them under {src.loc.uri.rstrip('/')}/.snapshot")
    if diff is not None:
        return (b, f"-diff {a} {b}", a), options
    return (b, f"-rdiff {a} {b}", a), options.model_copy(update={"delete": True})


def distcp_sources(request: CopyRequest, *, access: Access, topology: Topology | None = None,
                   ledger: Ledger | None = None) -> list[CopyResult]:
    """DistCp with several sources (``distcp SRC1 SRC2 … DST``: ``request.sources``): each source is
    copied under ``DST/<its basename>`` (a file: into ``DST`` under its name), one run per source,
    each with its own manifest and lease. Two sources of one basename are refused (ConfigError,
    exit 2) before anything is copied, as DistCp refuses duplicate names."""
    sources, target = request.sources, request.target
    if len(sources) < 2:
        raise ConfigError("distcp_sources needs two or more sources", hint="use distcp() for one")
    names: dict[str, str] = {}
    for s in sources:
        base = posixpath.basename(parse_uri(s, topology).path.rstrip("/"))
        if not base:
            raise ConfigError(f"source {s} has no name to copy it under (a root)",
                              hint="name a directory below the root, or copy it alone")
        if base in names:
            raise ConfigError(f"sources {names[base]} and {s} would both be copied to {target.rstrip('/')}/{base}",
                              hint="copy them in separate runs, to different targets")
        names[base] = s
    dests = []
    for s in sources:  # every source looked at before any is copied
        loc = parse_uri(s, topology)
        sfs = request.open_fs(loc, access)
        try:
            st = sfs.stat(loc.path)
        finally:
            sfs.close()
        if st is None:
            raise ConfigError(f"the source {s} does not exist", hint="check the path (nothing was copied)")
        dests.append(target if not st.is_dir else target.rstrip("/") + "/" + posixpath.basename(loc.path.rstrip("/")))
    return [distcp(request.to(s, d), access=access, topology=topology, ledger=ledger)
            for s, d in zip(sources, dests, strict=True)]


def _read_point(run: CopyRun, run_id: str) -> tuple[Snaps | None, float]:
    """What the source is read from — a snapshot (-diff/-rdiff's, never deleted here; else one this
    run takes, ``drt-<run id>``, when the policy asks and the source allows) or the live tree — and
    the time the listing stands for."""
    src, named = run.src, run.named
    snapshot = named[0] if named else None
    listed_at = time.time()
    if named is None and run.options.snapshots and src.fs.supports_snapshots and not src.single \
            and not run.dry_run and src.fs.is_snapshottable(src.root):
        snapshot = SNAP_PREFIX + run_id
        run.state.note_snapshot(snapshot)  # noted first: a killed run's snapshot is found and deleted later
        src.fs.create_snapshot(src.root, snapshot)
    if not snapshot:
        return None, listed_at
    snaps = Snaps(snapshot, src.fs.snapshots(src.root), named[2] if named else None)
    info = snaps.infos.get(snapshot)
    if named and info is not None:
        # the tree is the snapshot's: its own time, not the run's (HDFS's time of the snapshot —
        # set at its creation, and again by a renameSnapshot: never earlier than the creation)
        listed_at = min(listed_at, info.mtime)
    return snaps, listed_at


def _planned(run: CopyRun, plan: Plan, base: Base, listed: Listed, result: CopyResult) -> None:
    """What the plan says, into the result (a dry run's counters too)."""
    options, named = run.options, run.named
    if listed.changing:
        result.listing_proven, result.listing_changing = False, listed.changing
        result.deletes_deferred = listed.deferred
    if named:
        plan.mode_reason = f"{named[1]}: read from snapshot {named[0]}; {plan.mode_reason}"
        if "snapshot diff" in plan.mode_reason:
            plan.mode_reason += f"; {DIFF_BLIND_SPOT}"
    result.mode, result.mode_reason = plan.mode, plan.mode_reason
    result.policy, result.dry_run, result.engine = run.policy, run.dry_run, options.engine
    result.proof, result.proof_basis = options.proof, proof_basis(options.proof, run.src.fs.kind, run.tgt.fs.kind)
    result.files_total, result.bytes_total = plan.files_total, plan.bytes_total
    result.base_manifest_id = base.manifest_id if base.entries is not None else None
    result.fallbacks, result.basis, result.basis_samples = plan.fallbacks, plan.basis, plan.basis_samples
    result.files_read_for_planning, result.files_read = len(plan.files_read), list(plan.files_read)
    skips = listed.skips
    result.entries_skipped, result.skipped_entries, result.skipped_reasons = skips.count, skips.entries, skips.reasons
    if run.dry_run:
        result.files_copied = len(plan.copies)
        result.bytes_copied = plan.bytes_to_copy
        result.files_renamed = len(plan.moves)
        result.files_deleted = len(plan.deletes) + len(plan.blockers)
        result.files_type_changed = len(plan.blockers)
        result.files_skipped = plan.files_skipped
        result.duration_s = time.time() - run.t0


def _run(run: CopyRun) -> CopyResult:
    """One run's stages: clean-up of killed runs, the read point, planning, then (not a dry run)
    copying and commit, recorded in the ledger."""
    src, tgt, state, ledger = run.src, run.tgt, run.state, run.ledger
    run_id = new_id("copy")
    base = base_of(ledger, state, src, tgt)
    result = CopyResult(src.loc.uri, tgt.loc.uri, "", "", state_location=state.loc.uri)
    if not run.dry_run:
        if src.single:
            clean_tmp(tgt, run_id)
        if src.fs.supports_snapshots:
            clean_snapshots(src, state, base, result)
    snaps, listed_at = _read_point(run, run_id)
    snapshot = snaps.read if snaps is not None else None
    listed = Listed(changing=None if run.dry_run else [])
    try:
        plan, read_root = plan_run(run, base, snaps, listed)
        if not run.dry_run and not src.single:
            clean_tmp(tgt, run_id, listed.target.tmp)
    except BaseException:
        if snapshot:
            drop_snapshot(src, state, snapshot)
        raise
    result.source_snapshot, result.source_time = snapshot, listed_at
    _planned(run, plan, base, listed, result)
    if run.dry_run:
        return result
    result.run_id = run_id
    if ledger is not None:
        ledger.start_run(source=src.loc.uri, target=tgt.loc.uri, policy=run.policy,
                         base_manifest_id=result.base_manifest_id, run_id=run_id)
    status = "failed"
    try:
        pending = execute(run, plan, read_root, result, run_id, stable=snapshot is not None)
        info = snaps.infos.get(snaps.read) if snaps is not None else None
        record_manifest(run, plan, base, result, pending, info.identity if info is not None else None)
        status = "succeeded" if result.ok else "failed"
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, (KeyboardInterrupt, Cancelled, SystemExit)) else "killed"
        if snapshot:  # the next run must not take a snapshot of an unfinished run as its base
            drop_snapshot(src, state, snapshot)
        raise
    finally:
        result.status = status
        result.duration_s = time.time() - run.t0
        finish_run(run, plan, result, status)
    return result


def _policy(topology: Topology, name: str) -> HdfsPolicy:
    p = topology.policy(name)
    if not isinstance(p, HdfsPolicy):
        raise ConfigError(f"policy {name!r} is not an HDFS policy", where=topology.source_file,
                          hint="drt replicate runs policies listed under policies.hdfs")
    return p


def replicate_policy(topology: Topology, policy_name: str, ledger: Ledger, *, dry_run: bool = False,
                     access: Access, engine: str | None = None, progress: Progress | None = None,
                     fence_epoch: int | None = None, cancel: threading.Event | None = None) -> list[CopyResult]:
    """Run one HDFS policy: one copy per target (each acknowledged separately) under the
    ledger lease ``policy:<name>`` (and each target's ``copy-target:<uri>`` lease, the one
    `drt distcp` takes); records runs, manifests and each target's watermark.

    Once the hot cluster is fenced, a run is refused (FencedError) unless it holds the current
    ``fence_epoch`` — the failover runbook's final copy. Every endpoint's credentials (the
    fencing ZooKeeper's too) come from ``access``."""
    pol = _policy(topology, policy_name)
    options = pol.options if engine is None else pol.options.model_copy(update={"engine": engine})
    results: list[CopyResult] = []
    with ledger.lease(f"policy:{policy_name}"):
        for target in pol.targets:
            r = distcp(CopyRequest(pol.source, target, options=options, dry_run=dry_run, policy=policy_name,
                                   progress=progress, cancel=cancel, fence_epoch=fence_epoch),
                       access=access, topology=topology, ledger=ledger)
            if not dry_run and r.ok and r.watermark is not None:
                ledger.set_watermark("hdfs", f"{policy_name}:{target}", r.watermark, {
                    "manifest_id": r.manifest_id, "run_id": r.run_id, "mode": r.mode,
                    "source_snapshot": r.source_snapshot, "source": pol.source, "target": target})
            results.append(r)
    return results


def probe(topology: Topology, policy_name: str, target: str, ledger: Ledger, access: Access) -> CopyResult:
    """What a run of one policy target would do now (a dry run: planned, nothing copied). Whatever the
    policy's ``proof``, the probe asks whether cold still holds the last manifest the way a listing run
    does (size, mtime, change token, the target's own checksum): ``proof: content`` would make every
    probe a reconcile reading every byte of both sides."""
    pol = _policy(topology, policy_name)
    options = pol.options.model_copy(update={"proof": "checksum"}) if pol.options.proof != "checksum" else pol.options
    return distcp(CopyRequest(pol.source, target, options=options, dry_run=True, policy=policy_name),
                  access=access, topology=topology, ledger=ledger)


def pending(topology: Topology, policy_name: str, ledger: Ledger, access: Access) -> list[dict[str, Any]]:
    """Per target: what a run would copy now (planned, nothing copied), its watermark and last run."""
    pol = _policy(topology, policy_name)
    marks = {w["name"]: w for w in ledger.watermarks("hdfs")}
    runs = ledger.runs(policy=policy_name, limit=200)
    out = []
    for target in pol.targets:
        r = probe(topology, policy_name, target, ledger, access)
        w = marks.get(f"{policy_name}:{target}")
        last = next((x for x in runs if x["target"] == r.target), None)
        out.append({"target": target, "files_pending": r.files_copied + r.files_deleted + r.files_renamed,
                    "bytes_pending": r.bytes_copied, "watermark": w["watermark"] if w else None,
                    "last_run_status": last["status"] if last else None, "mode": r.mode,
                    "base_manifest_id": r.base_manifest_id})
    return out
