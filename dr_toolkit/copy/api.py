"""distcp, replicate_policy, pending: the public entry points of file replication.

A run: validate the URIs (refusing overlaps and escapes before anything is written), clean
temporary files of killed runs, find the base manifest, decide the mode (bootstrap /
fast-forward / reconcile, with the reason), plan, execute (renames, copies, deletes), write
the new manifest next to the target and index it in the ledger.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy.execute import CopyContext, Outcome, Throttle, run_local
from dr_toolkit.copy.plan import Plan, apply_diff, chain_break, fast_forward, filters_of, reconcile
from dr_toolkit.copy.spark_engine import SparkJob, run_spark
from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.base import INTERNAL_DIR, FileStatus, FileSystem
from dr_toolkit.fs.uri import Location, parse_uri
from dr_toolkit.ledger.store import new_id
from dr_toolkit.topology import CopyOptions, HdfsPolicy

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import Topology

log = logging.getLogger(__name__)
SNAP_PREFIX = "drt-"
#: progress(kind, n): kind is "plan" (n = bytes to copy), "bytes" (n bytes sent) or "file" (n = 1)
Progress = Callable[[str, int], None]


@dataclass
class CopyResult:
    source: str
    target: str
    mode: str
    mode_reason: str
    run_id: str | None = None
    policy: str | None = None
    dry_run: bool = False
    engine: str = "local"
    files_total: int = 0
    bytes_total: int = 0
    files_copied: int = 0
    files_appended: int = 0
    files_renamed: int = 0
    bytes_copied: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    files_failed: int = 0
    files_read_for_planning: int = 0
    manifest_id: str | None = None
    base_manifest_id: str | None = None
    source_snapshot: str | None = None
    watermark: float | None = None
    duration_s: float = 0.0
    fallbacks: list[dict[str, str]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    changed_during_copy: list[str] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)  # source files opened (planning and copying)

    @property
    def ok(self) -> bool:
        return self.files_failed == 0

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["fallback_count"] = len(self.fallbacks)
        d["fallbacks"] = self.fallbacks[:100]
        d["failures"] = self.failures[:100]
        d["files_read"] = self.files_read[:1000]
        d["duration_s"] = round(self.duration_s, 3)
        if self.dry_run:
            d["files_to_copy"] = self.files_copied
            d["bytes_to_copy"] = self.bytes_copied
        return d

    def stats(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in ("files_total", "files_copied", "bytes_copied", "files_skipped",
                                                   "files_deleted", "files_failed")}


@dataclass
class _Side:
    loc: Location
    fs: FileSystem
    root: str
    single: str | None = None  # a source that is one file: list only it


def _resolve(source: str, target: str, topology: Topology | None,
             credentials: tuple[Credentials | None, Credentials | None] = (None, None)) -> tuple[_Side, _Side]:
    """Parse and check both ends; raise ConfigError (exit 2) before anything is written."""
    src = parse_uri(source, topology)
    tgt = parse_uri(target, topology)
    if src.contains(tgt):
        raise ConfigError(f"the target {target} lies inside the source {source}",
                          hint="choose a target outside the source tree")
    if tgt.contains(src):
        raise ConfigError(f"the source {source} lies inside the target {target}",
                          hint="choose a target that does not contain the source")
    if tgt.kind == "s3" and not tgt.path:
        pass  # a whole bucket is a valid target
    sfs = open_fs(src, credentials[0])
    st = sfs.stat(src.path)
    if st is None:
        raise ConfigError(f"the source {source} does not exist", hint="check the path (nothing was copied)")
    tfs = open_fs(tgt, credentials[1])
    t = tfs.stat(tgt.path) if tgt.path else None
    if t is not None and not t.is_dir:
        raise ConfigError(f"the target {target} is a file", hint="name a directory to copy into")
    if not st.is_dir:  # a single file: copy it into the target directory under its name
        return _Side(src, sfs, posixpath.dirname(src.path.rstrip("/")) or "/", src.path), _Side(tgt, tfs, tgt.path)
    return _Side(src, sfs, src.path), _Side(tgt, tfs, tgt.path)


def _listing(side: _Side, only: str | None = None) -> dict[str, FileStatus]:
    out = {}
    fs = side.fs
    for s in fs.list_files(only or side.single or side.root):
        rel = fs.relative(side.root, s.path)
        if rel:
            out[rel] = s
    return out


def _base(ledger: Ledger | None, src: _Side, tgt: _Side) -> tuple[str | None, dict[str, Any] | None,
                                                                   mf.Entries | None, str]:
    """(base manifest id, header, entries, why not usable)."""
    if ledger is not None:
        row = ledger.last_manifest(source=src.loc.uri, target=tgt.loc.uri)
        if row is None:
            return None, None, None, "no earlier manifest: first run"
        got = mf.read_manifest(tgt.fs, mf.manifest_path(tgt.fs, tgt.root, row["manifest_id"]), row["content_digest"])
        if got is None:
            return row["manifest_id"], None, None, f"manifest {row['manifest_id']} is missing or altered on the target"
        return row["manifest_id"], got[0], got[1], ""
    # without a ledger: the newest manifest stored next to the target
    names = sorted(s.path for s in tgt.fs.list_files(tgt.fs.join(tgt.root, f"{INTERNAL_DIR}/manifests"))
                   if s.path.endswith(".jsonl.gz")) if tgt.root or tgt.fs.kind == "s3" else []
    for path in reversed(names):
        got = mf.read_manifest(tgt.fs, path)
        if got is not None and got[0].get("source") == src.loc.uri:
            return str(got[0]["manifest_id"]), got[0], got[1], ""
    return None, None, None, "no earlier manifest: first run"


def _clean_tmp(tgt: _Side) -> int:
    n = 0
    for p in list(tgt.fs.list_tmp(tgt.root)):
        if tgt.fs.delete(p):
            n += 1
    return n


def _plan(src: _Side, tgt: _Side, options: CopyOptions, base_id: str | None, header: dict[str, Any] | None,
          base: mf.Entries | None, why_no_base: str, snapshot: str | None) -> tuple[Plan, str]:
    """Decide the mode and plan. Returns the plan and the root the source is read from."""
    read_root = src.fs.snapshot_path(src.root, snapshot) if snapshot else src.root
    reading = _Side(src.loc, src.fs, read_root, src.single)
    f = filters_of(options)
    with ThreadPoolExecutor(2) as pool:
        tgt_future = pool.submit(_listing, tgt)
        diff = None
        if base is not None and snapshot and header and header.get("source_snapshot"):
            old = str(header["source_snapshot"])
            if src.fs.snapshot_exists(src.root, old):
                diff = src.fs.snapshot_diff(src.root, old, snapshot)
            else:
                why_no_base = f"the base snapshot {old} is gone"
                base = None
        if diff is not None and base is not None:
            def stat_tree(rel: str, recursive: bool) -> dict[str, FileStatus] | None:
                s = src.fs.stat(src.fs.join(read_root, rel))
                if s is None:
                    return {}
                if s.is_dir:
                    return _listing(reading, src.fs.join(read_root, rel)) if recursive else None
                return {rel: s}

            state, renames = apply_diff(base, diff, stat_tree)
            src_files = {r: s for r, s in state.items() if f.wanted(r)}
            how = f"snapshot diff {header['source_snapshot'] if header else '?'} → {snapshot}"
        else:
            src_files = {r: s for r, s in _listing(reading).items() if f.wanted(r)}
            renames = {}
            how = "manifest against listing"
        tgt_files = {r: s for r, s in tgt_future.result().items() if f.wanted(r)}
    if options.overwrite:
        return reconcile(src.fs, read_root, src_files, tgt.fs, tgt.root, tgt_files, options, mode="reconcile",
                         reason="--overwrite rewrites every file", workers=options.workers), read_root
    if base is None:
        mode = "bootstrap" if base_id is None else "reconcile"
        if mode == "bootstrap" and tgt_files:
            why_no_base += f"; the target already holds {len(tgt_files)} files: compared by checksum"
        return reconcile(src.fs, read_root, src_files, tgt.fs, tgt.root, tgt_files, options, mode=mode,
                         reason=why_no_base, workers=options.workers), read_root
    broken = chain_break(base, tgt_files, f.wanted)
    if broken:
        return reconcile(src.fs, read_root, src_files, tgt.fs, tgt.root, tgt_files, options, mode="reconcile",
                         reason=broken, workers=options.workers), read_root
    return fast_forward(src_files, base, options, reason=f"target holds manifest {base_id}; {how}",
                        renames=renames), read_root


def distcp(source: str, target: str, *, topology: Topology | None = None, ledger: Ledger | None = None,
           options: CopyOptions | None = None, dry_run: bool = False, policy: str | None = None,
           progress: Progress | None = None, credentials: tuple[Credentials | None, Credentials | None] = (None, None),
           spark_master: str | None = None) -> CopyResult:
    """Copy the tree at ``source`` to ``target`` (DistCp semantics; see the module doc)."""
    t0 = time.time()
    options = options or CopyOptions()
    src, tgt = _resolve(source, target, topology, credentials)
    try:
        return _run(src, tgt, options, ledger=ledger, dry_run=dry_run, policy=policy, progress=progress,
                    credentials=credentials, spark_master=spark_master, t0=t0)
    finally:
        src.fs.close()
        tgt.fs.close()


def _run(src: _Side, tgt: _Side, options: CopyOptions, *, ledger: Ledger | None, dry_run: bool,
         policy: str | None, progress: Progress | None, credentials: tuple[Credentials | None, Credentials | None],
         spark_master: str | None, t0: float) -> CopyResult:
    run_id = new_id("copy")
    if not dry_run:
        _clean_tmp(tgt)
    base_id, header, base, why = _base(ledger, src, tgt)
    snapshot = None
    listed_at = time.time()
    if options.snapshots and src.fs.supports_snapshots and src.fs.is_snapshottable(src.root) and not dry_run:
        snapshot = SNAP_PREFIX + run_id
        src.fs.create_snapshot(src.root, snapshot)
    plan, read_root = _plan(src, tgt, options, base_id, header, base, why, snapshot)
    result = CopyResult(src.loc.uri, tgt.loc.uri, plan.mode, plan.mode_reason, policy=policy, dry_run=dry_run,
                        engine=options.engine, files_total=plan.files_total, bytes_total=plan.bytes_total,
                        base_manifest_id=base_id if base is not None else None, source_snapshot=snapshot,
                        fallbacks=plan.fallbacks, files_read_for_planning=len(plan.files_read),
                        files_read=list(plan.files_read))
    if dry_run:
        result.files_copied = len(plan.copies)
        result.bytes_copied = plan.bytes_to_copy
        result.files_renamed = len(plan.renames)
        result.files_deleted = len(plan.deletes)
        result.files_skipped = plan.files_skipped
        result.duration_s = time.time() - t0
        return result
    result.run_id = run_id
    if ledger is not None:
        ledger.start_run(source=src.loc.uri, target=tgt.loc.uri, policy=policy, base_manifest_id=result.base_manifest_id,
                         run_id=run_id)
    status = "failed"
    try:
        _execute(src, tgt, plan, read_root, options, result, run_id, progress, credentials, spark_master,
                 stable=snapshot is not None)
        manifest_id = mf.new_manifest_id()
        header_out = {"manifest_id": manifest_id, "source": src.loc.uri, "target": tgt.loc.uri, "run_id": run_id,
                      "base_manifest_id": result.base_manifest_id, "source_snapshot": snapshot,
                      "source_time": listed_at, "mode": plan.mode, "policy": policy}
        _, digest = mf.write_manifest(tgt.fs, tgt.root, manifest_id, plan.keep, header_out)
        result.manifest_id = manifest_id
        result.watermark = listed_at if result.ok else None
        if ledger is not None:
            ledger.add_manifest(manifest_id=manifest_id, source=src.loc.uri, target=tgt.loc.uri,
                                location=tgt.loc.uri.rstrip("/") + f"/{INTERNAL_DIR}/manifests/{manifest_id}.jsonl.gz",
                                entries=len(plan.keep), total_bytes=sum(e.size for e in plan.keep.values()),
                                source_time=listed_at, policy=policy, base_manifest_id=result.base_manifest_id,
                                source_snapshot=snapshot, content_digest=digest)
        if snapshot and header and header.get("source_snapshot"):
            old = str(header["source_snapshot"])
            if old.startswith(SNAP_PREFIX) and src.fs.snapshot_exists(src.root, old):
                src.fs.delete_snapshot(src.root, old)
        status = "succeeded" if result.ok else "failed"
    except BaseException:
        status = "killed"
        if snapshot:  # the next run must not take a snapshot of an unfinished run as its base
            try:
                src.fs.delete_snapshot(src.root, snapshot)
            except Exception:  # noqa: BLE001 - best effort; the error that stopped the run matters more
                log.warning("could not delete snapshot %s of %s", snapshot, src.root)
        raise
    finally:
        result.duration_s = time.time() - t0
        if ledger is not None:
            try:
                ledger.finish_run(run_id, status=status, mode=plan.mode, mode_reason=plan.mode_reason,
                                  manifest_id=result.manifest_id, base_manifest_id=result.base_manifest_id,
                                  stats=result.stats(), detail={
                                      "fallbacks": result.fallbacks[:100], "fallback_count": len(result.fallbacks),
                                      "failures": result.failures[:100], "engine": options.engine,
                                      "files_renamed": result.files_renamed, "files_appended": result.files_appended,
                                      "changed_during_copy": result.changed_during_copy[:100],
                                      "source_snapshot": snapshot, "dry_run": False})
            except Exception:
                log.exception("could not record the end of run %s", run_id)
    return result


def _execute(src: _Side, tgt: _Side, plan: Plan, read_root: str, options: CopyOptions, result: CopyResult,
             run_id: str, progress: Progress | None, credentials: tuple[Credentials | None, Credentials | None],
             spark_master: str | None, *, stable: bool) -> None:
    if progress:
        progress("plan", plan.bytes_to_copy)
    for old, new in plan.renames:  # renames first: a later copy may reuse the old name
        try:
            tgt.fs.rename(tgt.fs.join(tgt.root, old), tgt.fs.join(tgt.root, new))
            t = tgt.fs.stat(tgt.fs.join(tgt.root, new))
            e = plan.keep[new]
            plan.keep[new] = mf.Entry(e.size, e.mtime, e.checksum, t.mtime if t else None)
            result.files_renamed += 1
        except (OSError, UnreachableError, ConfigError) as exc:
            log.warning("rename %s → %s failed (%s); copying instead", old, new, exc)
            s = src.fs.stat(src.fs.join(read_root, new))
            plan.keep.pop(new, None)
            if s is not None:
                from dr_toolkit.copy.plan import FileTask

                plan.copies.append(FileTask(new, s.size, s.mtime, permission=s.permission, reason="rename failed"))
    bw = options.bandwidth_mb_s * 1e6 if options.bandwidth_mb_s else None
    if options.engine == "spark" and plan.copies:
        job = SparkJob(src.loc, tgt.loc, read_root, tgt.root, run_id, tuple(options.preserve), bw, stable,
                       credentials[0], credentials[1])
        outcomes = run_spark(job, plan.copies, options.workers, spark_master)
        for o in outcomes:
            if progress:
                progress("bytes", o.bytes)
                progress("file", 1)
    else:
        ctx = CopyContext(src.fs, tgt.fs, read_root, tgt.root, run_id, tuple(options.preserve), Throttle(bw),
                          on_bytes=(lambda n: progress("bytes", n)) if progress else None, stable_source=stable)
        outcomes = run_local(ctx, plan.copies, options.workers,
                             on_done=(lambda _o: progress("file", 1)) if progress else None)
    _account(plan, result, outcomes)
    for rel in plan.deletes:
        try:
            if tgt.fs.delete(tgt.fs.join(tgt.root, rel)):
                result.files_deleted += 1
        except (OSError, UnreachableError) as exc:
            result.files_failed += 1
            result.failures.append({"path": rel, "action": "delete", "error": str(exc)})
    result.files_skipped = plan.files_total - result.files_copied - result.files_failed - result.files_renamed


def _account(plan: Plan, result: CopyResult, outcomes: list[Outcome]) -> None:
    read = set(result.files_read)
    for o in outcomes:
        read.add(o.rel)
        if o.changed:
            result.changed_during_copy.append(o.rel)
        if o.ok:
            result.files_copied += 1
            result.files_appended += o.action == "append"
            result.bytes_copied += o.bytes
            plan.keep[o.rel] = mf.Entry(o.size, o.mtime, o.checksum, o.tmtime)
        else:
            result.files_failed += 1
            result.failures.append({"path": o.rel, "error": o.error, "attempts": o.attempts,
                                    "changed_during_copy": o.changed})
            # the target still holds whatever it held before (nothing partial is ever renamed in);
            # leaving the file out of the manifest makes the next run compare it afresh
    result.files_read = sorted(read)


def _policy(topology: Topology, name: str) -> HdfsPolicy:
    p = topology.policy(name)
    if not isinstance(p, HdfsPolicy):
        raise ConfigError(f"policy {name!r} is not an HDFS policy", where=topology.source_file,
                          hint="drt replicate runs policies listed under policies.hdfs")
    return p


def replicate_policy(topology: Topology, policy_name: str, ledger: Ledger, *, dry_run: bool = False,
                     engine: str | None = None, progress: Progress | None = None,
                     credentials: Mapping[str, Credentials | None] | None = None,
                     fence_epoch: int | None = None) -> list[CopyResult]:
    """Run one HDFS policy: one copy per target (each acknowledged separately) under the
    ledger lease ``policy:<name>``; records runs, manifests and each target's watermark.

    ``credentials`` (cluster name -> Credentials) comes from Airflow connections; without it
    each endpoint's ``conn_id`` is looked up in the environment. Once the hot cluster is
    fenced, a run is refused (FencedError) unless it holds the current ``fence_epoch`` — the
    failover runbook's final copy."""
    pol = _policy(topology, policy_name)
    if not dry_run:
        from dr_toolkit.zk.fencing import assert_replication_allowed

        assert_replication_allowed(topology, epoch=fence_epoch)
    options = pol.options if engine is None else pol.options.model_copy(update={"engine": engine})
    results: list[CopyResult] = []
    with ledger.lease(f"policy:{policy_name}"):
        for target in pol.targets:
            r = distcp(pol.source, target, topology=topology, ledger=ledger, options=options, dry_run=dry_run,
                       policy=policy_name, progress=progress,
                       credentials=_creds(topology, pol.source, target, credentials))
            if not dry_run and r.ok and r.watermark is not None:
                ledger.set_watermark("hdfs", f"{policy_name}:{target}", r.watermark, {
                    "manifest_id": r.manifest_id, "run_id": r.run_id, "mode": r.mode,
                    "source_snapshot": r.source_snapshot, "source": pol.source, "target": target})
            results.append(r)
    return results


def _creds(topology: Topology, source: str, target: str, by_cluster: Mapping[str, Credentials | None] | None
           ) -> tuple[Credentials | None, Credentials | None]:
    if not by_cluster:
        return None, None
    a, b = parse_uri(source, topology).cluster, parse_uri(target, topology).cluster
    return (by_cluster.get(a) if a else None), (by_cluster.get(b) if b else None)


def pending(topology: Topology, policy_name: str, ledger: Ledger) -> list[dict[str, Any]]:
    """Per target: what a run would copy now (planned, nothing copied), its watermark and last run."""
    pol = _policy(topology, policy_name)
    marks = {w["name"]: w for w in ledger.watermarks("hdfs")}
    runs = ledger.runs(policy=policy_name, limit=200)
    out = []
    for target in pol.targets:
        r = distcp(pol.source, target, topology=topology, ledger=ledger, options=pol.options, dry_run=True,
                   policy=policy_name)
        w = marks.get(f"{policy_name}:{target}")
        last = next((x for x in runs if x["target"] == r.target), None)
        out.append({"target": target, "files_pending": r.files_copied + r.files_deleted + r.files_renamed,
                    "bytes_pending": r.bytes_copied, "watermark": w["watermark"] if w else None,
                    "last_run_status": last["status"] if last else None, "mode": r.mode})
    return out
