"""The planning stage: the mode decided and the plan made (DistCp's "what to copy" step).

Over the two sides of a run (:mod:`dr_toolkit.copy.listing`) and the manifest it starts from,
:func:`plan_run` decides the mode (bootstrap, fast-forward, reconcile, snapshot diff; the reason
said by :func:`dr_toolkit.copy.plan.copy_mode`), lists what the mode needs and makes the
:class:`~dr_toolkit.copy.plan.Plan`: what to copy, append, move, delete and keep, and the
``--preserve`` fix-ups of files kept. The rules that turn listings into a plan (reconcile,
fast-forward, snapshot diffs, filters) are :mod:`dr_toolkit.copy.plan`'s; this module drives
them over the run's filesystems. Nothing here writes to the target.

The listing-based decisions are streamed (:mod:`dr_toolkit.copy.stream_plan`): the chain check
(does the target still hold the base manifest), a reconcile (bootstrap, reconcile, a full
comparison after a snapshot diff, the content comparison of files kept unproven) and a
fast-forward of a listing against the manifest are one merge pass over the source listing, the
target listing and the base manifest as sorted streams (runs spilled to a temporary directory
past :data:`~dr_toolkit.copy.stream_plan.BATCH` entries; below one batch each stays in memory,
never encoded). A snapshot diff's fast-forward stays :func:`~dr_toolkit.copy.plan.fast_forward`
(moves and what changed, over the base applied to the diff).

The run's maps — both listings (:func:`~dr_toolkit.copy.listing.list_tree` and what filters and
name checks keep of them), the base manifest (:func:`~dr_toolkit.copy.manifest.decode`) and the
next one (``Plan.keep``) — are :class:`~dr_toolkit.copy.spill.SpillMap`: a dict below
:data:`~dr_toolkit.copy.spill.BATCH` entries, a private SQLite file past it, iterated in
insertion order as the dict was. So the steps after the rules still look files up by path
(``--preserve`` drift, checksum confirmations of an HDFS source's kept files — asked in chunks —
and of the target's, filtered-out files in the way, odd entries, pending files), now in bounded
memory. The manifests themselves stream between the state location and the run
(:class:`~dr_toolkit.copy.state.StateStore`: read and written a chunk at a time, through a spooled
temporary file), a snapshot diff's replay asks a spilled base for the paths under a directory
through its index (:meth:`~dr_toolkit.copy.spill.SpillMap.sorted_keys`), and ``-p ugax`` walks the
kept paths in order from it, a chunk at a time. O(changes): the plan's copies, deletions and reads.
Still O(files): ``-log``'s per-file lines, the directory sets of pruning and odd entries
(O(directories)), and the paths a snapshot diff moves or deletes when it names a whole tree.
"""

from __future__ import annotations

import bisect
import logging
import posixpath
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import stream_plan as sp
from dr_toolkit.copy.execute import EXTRA_ATTRIBUTES
from dr_toolkit.copy.listing import (
    Found,
    Side,
    Skips,
    list_tree,
    proven_listing,
    target_listing,
    utf8_only,
    wanted_only,
)
from dr_toolkit.copy.plan import (
    FileTask,
    Plan,
    _parents,
    apply_diff,
    copy_mode,
    fast_forward,
    filters_key,
    filters_of,
    relist_diff,
)
from dr_toolkit.copy.run import Base, CopyRun, Snaps
from dr_toolkit.copy.spill import Files, SpillMap, files_map
from dr_toolkit.errors import UnreachableError
from dr_toolkit.fs.base import Checksum, FileStatus, FileSystem
from dr_toolkit.topology import CopyOptions

#: the copy's log lines keep the name they had before the stages had modules of their own (stderr)
log = logging.getLogger("dr_toolkit.copy.api")

CONFIRM_CHUNK = 8192  # kept files whose checksums are asked at once (their paths in memory, not all of them)


@dataclass
class Listed:
    """What the listings report besides the files planned: the source entries passed over, what
    the target's walk found (temporary files of killed runs, empty directories, odd entries) and,
    when a live listing is to be proven (``changing`` not None: not a dry run), the directories
    that kept changing."""

    skips: Skips = field(default_factory=Skips)
    target: Found = field(default_factory=Found)
    changing: list[str] | None = None
    deferred: int = 0  # deletions not made because the listing kept changing


def plan_run(run: CopyRun, base: Base, snaps: Snaps | None, listed: Listed) -> tuple[Plan, str]:
    """Decide the mode and plan the run from ``base`` (reading the snapshot ``snaps.read`` when
    given). Returns the plan and the root the source is read from. With ``listed.changing`` given,
    a live listing (no snapshot) is proven (:func:`~dr_toolkit.copy.listing.proven_listing`) and
    the directories that kept changing are put in it.

    Target entries that are not regular files (symlinks, FIFOs, ...) are planned here, in every
    mode: one where the source has a directory or a file (a symlink planted where the source has
    a directory) is removed first, whatever ``--delete`` says, so the source's files are written
    into a real directory of the target; with ``--delete`` every other one goes too. Directories
    that held only temporary files of killed runs are pruned with ``--delete``."""
    src, tgt, options = run.src, run.tgt, run.options
    plan, read_root, src_files, tgt_files = plan_modes(run, base, snaps, listed)
    odd, tmp_found = listed.target.odd, listed.target.tmp
    if options.preserve:
        _drift(plan, src_files, tgt_files, tgt.fs, options.preserve)
        _attr_drift(plan, src, read_root, tgt, options.preserve, options.workers)
    f = filters_of(options)
    if f.active:
        # target files the filters pass over can still be in the way of the source's tree (a
        # directory of excluded files where the source now has a file): removed like any blocker
        for rel in tgt_files:
            if not f.wanted(rel) and any(p in src_files for p in _parents(rel)) and rel not in plan.blockers:
                plan.blockers.append(rel)
                plan.keep.pop(rel, None)
                if rel in plan.deletes:
                    plan.deletes.remove(rel)
    if odd:
        src_dirs: set[str] = set()
        for rel in src_files:
            for p in _parents(rel):
                if p in src_dirs:
                    break
                src_dirs.add(p)
        for path, why in odd:
            rel = tgt.fs.relative(tgt.root, path)
            if rel in src_dirs or rel in src_files or (options.delete and f.wanted(rel)):
                plan.odd.append((rel, why))
                plan.keep.pop(rel, None)
    if options.delete and tmp_found:
        plan.prune_dirs = sorted({posixpath.dirname(tgt.fs.relative(tgt.root, p)) for p in tmp_found} - {""})
    if options.delete:  # empty target directories the source does not have go too
        plan.empty_dirs = [tgt.fs.relative(tgt.root, p) for p in listed.target.empty]
    if listed.changing:  # a file moved during the listing may be listed nowhere: nothing is deleted on its word
        listed.deferred = len(plan.deletes) + len(plan.empty_dirs)
        for rel in plan.deletes:  # still on the target: the manifest keeps saying so
            if base.entries is not None and rel in base.entries:
                plan.keep[rel] = base.entries[rel]
        plan.deletes, plan.empty_dirs = [], []
        log.warning("the source kept changing while it was listed (%d directories, e.g. %s): deletions "
                    "deferred, no safe time from this run; enable snapshots for an atomic listing",
                    len(listed.changing), listed.changing[0] or "/")
    return plan, read_root


def _drift(plan: Plan, src_files: Files, tgt_files: Files, fs: FileSystem,
           preserve: Any) -> None:
    """``--preserve``: a kept file whose target permission or mtime is not the source's (changed
    on either side behind our back: a chmod or touch keeps HDFS's fileId) gets them re-applied,
    as DistCp re-applies ``-p`` to the files it skips."""
    perm = "permissions" in preserve and fs.supports_permissions
    times = "times" in preserve and fs.supports_times
    for rel in plan.keep:
        s, t = src_files.get(rel), tgt_files.get(rel)
        if s is None or t is None:
            continue
        p = s.permission if perm and s.permission and t.permission and s.permission != t.permission else None
        m = s.mtime if times and abs(s.mtime - t.mtime) > 1e-3 else None
        if p is not None or m is not None:
            plan.fixups.append((rel, p, m))


def _attr_drift(plan: Plan, src: Side, read_root: str, tgt: Side, preserve: Any, workers: int) -> None:
    """``-p u/g/a/x``: the owner, group, ACL and xattrs of every kept file are read on both sides
    (as DistCp reads them for every file it lists with those flags) and re-applied where they
    differ."""
    which = frozenset(EXTRA_ATTRIBUTES.intersection(preserve))
    n = len(plan.keep)
    if not which or not n:
        return
    keep = plan.keep
    # in path order, CONFIRM_CHUNK paths at a time (a spilled map's are read from its index): never all of them
    rels = keep.sorted_keys() if isinstance(keep, SpillMap) else iter(sorted(keep))

    def differs(rel: str) -> dict[str, Any] | None:
        a = src.fs.attributes(src.fs.join(read_root, rel), which)
        b = tgt.fs.attributes(tgt.fs.join(tgt.root, rel), which)
        want = {k: v for k, v in a.items() if b.get(k) != v}
        return want or None

    with ThreadPoolExecutor(max(1, min(workers, n))) as pool:
        while chunk := list(islice(rels, CONFIRM_CHUNK)):
            for rel, want in zip(chunk, pool.map(differs, chunk), strict=True):
                if want:
                    plan.attr_fixups.append((rel, want))


def _diff_base(src: Side, header: dict[str, Any], snapshot: str, snaps: Snaps | None
               ) -> tuple[str | None, str, bool, bool]:
    """Which snapshot to diff from, by identity, never by name alone: the one the base run read
    (its id recorded in the base manifest), under whatever name it has now — with -diff/-rdiff,
    only when that is the snapshot the user named as the base. Returns (its name or None, why
    not, whether the base is gone — a reconcile — rather than just not usable, and whether the
    diff is proven forward: the base snapshot older than the one read, by snapshot id)."""
    rec_name, rec_id = str(header["source_snapshot"]), header.get("source_snapshot_id")
    infos = snaps.infos if snaps is not None else {}
    by_id = {i.identity: n for n, i in infos.items()}
    now = by_id.get(str(rec_id)) if rec_id is not None else None
    if snaps is not None and snaps.expected is not None:
        exp = infos.get(snaps.expected)
        if rec_id is None:
            return None, (f"the target's last run read snapshot {rec_name} and did not record which one it was "
                          f"(its snapshot id): {snapshot} listed"), False, False
        if exp is None or exp.identity != str(rec_id):
            where = f" (now named {now})" if now and now != rec_name else (" (gone)" if now is None else "")
            return None, (f"{snaps.expected} is not the snapshot the target's last run read: that was {rec_name} "
                          f"({rec_id}){where}, {snaps.expected} is "
                          f"{exp.identity if exp else 'not on the source'}: {snapshot} listed"), False, False
        now = snaps.expected
    elif rec_id is None or now is None:
        if rec_id is None and src.fs.snapshot_exists(src.root, rec_name):
            return None, (f"the base manifest does not record which snapshot {rec_name} was (its id): "
                          f"{snapshot} listed"), False, False
        return None, f"the base snapshot {rec_name} is gone (or was re-created)", True, False
    a, b = infos.get(now), infos.get(snapshot)
    forward = a is not None and b is not None and a.id is not None and b.id is not None and a.id < b.id
    return now, "", False, forward


def plan_modes(run: CopyRun, base: Base, snaps: Snaps | None, listed: Listed
               ) -> tuple[Plan, str, Files, Files]:
    """The plan of the mode that applies, the root read, the source and target files planned."""
    src, tgt, options, skips = run.src, run.tgt, run.options, listed.skips
    snapshot = snaps.read if snaps is not None else None
    read_root = src.fs.snapshot_path(src.root, snapshot) if snapshot else src.root
    reading = Side(src.loc, src.fs, read_root, src.fs.join(read_root, posixpath.basename(src.single))
                    if src.single else None, list_threads=src.list_threads)
    f = filters_of(options)
    entries = base.entries
    why = base.why_not
    header = base.header or {}
    pending = set(header.get("pending") or [])
    # a remote side's listing waits on the network: the two listings overlap on two threads. Two local
    # listings are CPU work under one interpreter lock: on two threads they take twice as long as one
    # after the other (40,936 files a side, 2 cores: 2.1-2.6 s together, 0.5-0.7 s each alone)
    with ThreadPoolExecutor(2) as pool:
        if src.fs.kind == tgt.fs.kind == "local":
            tgt_future: Future[Files] = Future()
            tgt_future.set_result(target_listing(src, tgt, listed.target))
        else:
            tgt_future = pool.submit(target_listing, src, tgt, listed.target)
        diff = None
        how_not = ""
        old: str | None = None
        forward = False
        if entries is not None and snapshot and header.get("source_snapshot") and not src.single:
            if header.get("filters") != filters_key(options):
                # the base was planned under other filters: files newly wanted are in no diff
                how_not = "the filters changed since the base (or it does not say which it used): listed"
                diff = None
            else:
                old, why_not, gone, forward = _diff_base(src, header, snapshot, snaps)
                if old is not None:
                    diff = src.fs.snapshot_diff(src.root, old, snapshot)
                elif gone:
                    why = why_not
                    entries = None
                else:
                    how_not = why_not
        moves: dict[str, str] = {}
        changed: set[str] | None = None

        def stat_read(rel: str, recursive: bool) -> Files | None:
            """``rel`` as the tree read holds it: {} when gone, a directory's files when ``recursive``."""
            s = src.fs.stat(src.fs.join(read_root, rel))
            if s is None:
                return {}
            if s.is_dir:
                return list_tree(reading, src.fs.join(read_root, rel), skips) if recursive else None
            return {rel: s}

        def restat(state: Files, changed: set[str], rels: Iterable[str]) -> None:
            """Read ``rels`` again in the tree read: each one found there is in the state and changed."""
            for rel in rels:
                fresh = stat_read(rel, False)
                if fresh:
                    state.update(fresh)
                    changed.update(fresh)

        if diff is not None and entries is not None and snapshot and not forward:
            # the base snapshot is the newer one (or no snapshot id says which is): the paths the
            # report names are listed in the snapshot read, none replayed (plan.relist_diff)
            state, changed = relist_diff(entries, diff, stat_read)
            restat(state, changed, pending)
            restat(state, changed, [r for r, e in entries.items() if e.open and r in state and r not in changed])
            src_files: Files = files_map((r, s) for r, s in state.items() if f.wanted(r))
            how = (f"snapshot diff {old} → {snapshot} ({len(diff)} entries; {old} is not proven the older: "
                   f"the paths it names listed in {snapshot})")
        elif diff is not None and entries is not None:
            pending_sorted = sorted(pending)

            def unknown(old_path: str) -> bool:  # may the base lack files below old_path?
                if f.active:
                    return True
                i = bisect.bisect_left(pending_sorted, old_path)
                return i < len(pending_sorted) and (pending_sorted[i] == old_path
                                                    or pending_sorted[i].startswith(old_path + "/"))

            state, moves, changed = apply_diff(entries, diff, stat_read, unknown)
            restat(state, changed, pending)  # files a failed run did not copy: not in any later diff
            # files open for write at the last run: bytes hflushed since, and even their close,
            # change no inode the NameNode's snapshot diff reports (a real NameNode's diff stays
            # empty): look at them again, under their new name if the diff moved them
            moved_to = {old: new for new, old in moves.items()}
            now_at = [moved_to.get(r, r) for r, e in entries.items() if e.open]
            restat(state, changed, [r for r in now_at if r in state and r not in changed])
            src_files = files_map((r, s) for r, s in state.items() if f.wanted(r))
            how = f"snapshot diff {old} → {snapshot} ({len(diff)} entries)"
        else:
            if listed.changing is not None and not snapshot and not src.single:
                files, still = proven_listing(reading, skips)
                listed.changing.extend(still)
            else:  # a snapshot (atomic by construction), one file, or a dry run
                files = list_tree(reading, skipped=skips)
            src_files = wanted_only(files, f)
            how = "source listing against the manifest (size, mtime, change token)"
            if how_not:
                how = f"{how_not}; {how}"
        tgt_all = tgt_future.result()
        tgt_files = wanted_only(tgt_all, f)
    if tgt.fs.kind != "local":
        src_files = utf8_only(src_files, skips)
    # the entries the base vouches for: the base itself unless a failed run left files pending (no copy)
    held: mf.Entries = entries if entries is not None and not pending else \
        mf.entries_map((r, e) for r, e in (entries or {}).items() if r not in pending)
    with sp.Workdir() as tmp:
        streams = _Streams(tmp, src_files, tgt_files, held, entries, pending)

        def chain_broken() -> str | None:
            broken = sp.stream_chain_break(streams.held(), streams.tgt_held(), f.wanted)
            if not broken and not tgt.fs.content_token:
                broken = _target_rewritten(tgt, held, options.workers)
            return broken

        mode, reason = copy_mode(options, manifest_id=base.manifest_id, has_base=entries is not None,
                                 why_no_base=why, target_files=len(tgt_files), how=how, chain_broken=chain_broken)
        if mode != "fast-forward":
            return sp.to_plan(sp.stream_reconcile(
                src.fs, read_root, streams.src(), tgt.fs, tgt.root, streams.tgt(), options, mode=mode, reason=reason,
                recorded=streams.recorded())), read_root, src_files, tgt_all
        if changed is None and not moves:  # a listing against the manifest: the streamed merge
            plan = sp.to_plan(sp.stream_fast_forward(streams.src(), streams.held(), options, reason=reason))
        else:  # a snapshot diff's state (moves, what changed): O(changes) rules over the base
            plan = fast_forward(src_files, held, options, reason=reason, moves=moves, changed=changed)
    if changed is None and not src.fs.content_token:  # a listing: the token alone proves nothing
        _confirm_by_checksum(src, read_root, plan, src_files, held, options.workers)
    _compare_unproven(src, read_root, tgt, plan, src_files, tgt_files, held, options, entries)
    for rel in pending:  # the target may hold an older version of a pending file: it is replaced
        if rel not in src_files and rel in tgt_files and options.delete and rel not in plan.deletes:
            plan.deletes.append(rel)
    return plan, read_root, src_files, tgt_all


class _Streams:
    """The run's listings and base manifest as :class:`~dr_toolkit.copy.stream_plan.SortedStream`
    (tree order; spilled as sorted runs under ``tmp`` past one batch), each made when first asked
    and read as often as needed: the chain check and the plan read the same streams."""

    def __init__(self, tmp: str, src: Files, tgt: Files, held: mf.Entries,
                 entries: mf.Entries | None, pending: set[str]) -> None:
        self.tmp, self._src, self._tgt, self._held, self._entries, self.pending = tmp, src, tgt, held, entries, pending
        self._made: dict[str, Any] = {}

    def _stream(self, name: str, items: Iterable[tuple[str, Any]], codec: Any) -> Any:
        if name not in self._made:
            self._made[name] = sp.SortedStream(items, codec, self.tmp, batch=sp.BATCH, name=name)
        return self._made[name]

    def src(self) -> sp.SortedStream[FileStatus]:
        return self._stream("src", self._src.items(), sp.STATUS)  # type: ignore[no-any-return]

    def tgt(self) -> sp.SortedStream[FileStatus]:
        return self._stream("tgt", self._tgt.items(), sp.STATUS)  # type: ignore[no-any-return]

    def tgt_held(self) -> Iterable[tuple[str, FileStatus]]:
        """The target's files but those a failed run left pending (the base does not vouch for them)."""
        if not self.pending:
            return self.tgt()
        pending = {sp.tree_key(r) for r in self.pending}
        return ((k, t) for k, t in self.tgt() if k not in pending)

    def held(self) -> sp.SortedStream[mf.Entry]:
        return self._stream("held", self._held.items(), sp.ENTRY)  # type: ignore[no-any-return]

    def recorded(self) -> sp.SortedStream[mf.Entry] | None:
        """The base manifest's entries, pending ones included: what a proof may use."""
        if self._entries is None:
            return None
        if not self.pending:
            return self.held()
        return self._stream("recorded", self._entries.items(), sp.ENTRY)  # type: ignore[no-any-return]


def _compare_unproven(src: Side, read_root: str, tgt: Side, plan: Plan, src_files: Files,
                      tgt_files: Files, held: mf.Entries, options: CopyOptions,
                      recorded: mf.Entries | None) -> None:
    """Files a run without ``--update`` kept as the target had them (recorded without a change
    token: nothing proved them equal) are compared by content, as a reconcile would, instead of
    being copied again: an ``--update`` after a plain run never re-copies a tree of equal files."""
    redo = {t.rel for t in plan.copies if t.action == "copy" and t.rel in tgt_files and t.rel in held
            and held[t.rel].version is None and held[t.rel].size == t.size}
    if not redo:
        return
    with sp.Workdir() as tmp:
        rec = None if recorded is None else \
            sp.SortedStream(((r, recorded[r]) for r in redo if r in recorded), sp.ENTRY, tmp, batch=sp.BATCH, name="rec")
        sub = sp.to_plan(sp.stream_reconcile(
            src.fs, read_root, sp.SortedStream(((r, src_files[r]) for r in redo), sp.STATUS, tmp, batch=sp.BATCH, name="src"),
            tgt.fs, tgt.root, sp.SortedStream(((r, tgt_files[r]) for r in redo), sp.STATUS, tmp, batch=sp.BATCH, name="tgt"),
            options, mode=plan.mode, reason=plan.mode_reason, recorded=rec))
    plan.copies = [t for t in plan.copies if t.rel not in redo] + sub.copies
    plan.keep.update(sub.keep)
    for k, v in sub.basis.items():
        plan.basis[k] = plan.basis.get(k, 0) + v
    plan.basis_samples.extend(sub.basis_samples[:max(0, 50 - len(plan.basis_samples))])
    plan.fallbacks.extend(sub.fallbacks)
    plan.files_read.extend(sub.files_read)


def _target_rewritten(tgt: Side, held: mf.Entries, workers: int) -> str | None:
    """A target whose change token is no content token (HDFS): every file the manifest holds must
    still answer the checksum recorded after its commit (one GETFILECHECKSUM each, as DistCp
    ``-update`` asks); why not, or None."""
    if not held:
        return None

    def why(rel: str) -> str | None:
        want = Checksum.parse(held[rel].tchecksum)
        if want is None:
            return f"target {rel}: no checksum of its own recorded (its fileId is no content token): compared"
        try:
            got = tgt.fs.checksum(tgt.fs.join(tgt.root, rel))
        except (OSError, UnreachableError) as exc:
            return f"target {rel}: its checksum could not be read ({exc})"
        return None if got == want else f"target changed: {rel} was rewritten in place (its checksum is not the " \
                                         "one recorded)"

    keys = iter(held)  # in chunks: the manifest's paths are never all in memory (held may be on disk)
    with ThreadPoolExecutor(max(1, min(workers, len(held)))) as pool:
        while rels := list(islice(keys, CONFIRM_CHUNK)):
            for w in pool.map(why, rels):
                if w:
                    return w
    return None


def _confirm_by_checksum(src: Side, read_root: str, plan: Plan, src_files: Files,
                         held: mf.Entries, workers: int) -> None:
    """A source whose change token is not a content token (HDFS: ``TRUNCATE`` + ``APPEND`` keep
    the fileId, ``SETTIMES`` puts mtime back): a file kept because size, mtime and token are as
    recorded is kept only when the source's own checksum (GETFILECHECKSUM: computed by the
    DataNodes from the stored CRCs, no data through this process) is still the one recorded for
    the bytes copied; else it is copied. Snapshot-diff fast-forwards trust the NameNode's diff and
    ask nothing per unchanged file (their point: work in proportion to the changes) — and the
    real GETSNAPSHOTDIFF reports nothing for such a rewrite when size and mtime come back (found
    by the randomized test): a documented limit of snapshot mode (docs/design.md)."""
    keys = (r for r in plan.keep if r in src_files and r in held)
    first = list(islice(keys, CONFIRM_CHUNK))
    if not first:
        return

    def same(rel: str) -> bool:
        want = Checksum.parse(held[rel].schecksum)
        if want is None:
            return False
        try:
            got = src.fs.checksum(src.fs.join(read_root, rel))
        except (OSError, UnreachableError):
            return False
        return got == want

    changed: list[str] = []  # asked in chunks (the kept paths may be on disk), popped after: keep is not
    with ThreadPoolExecutor(max(1, min(workers, len(first)))) as pool:  # changed while it is read
        cands = first
        while cands:
            changed += [rel for rel, ok in zip(cands, pool.map(same, cands), strict=True) if not ok]
            cands = list(islice(keys, CONFIRM_CHUNK))
    n = 0
    for rel in changed:
        s = src_files[rel]
        plan.keep.pop(rel)
        n += 1
        plan.copies.append(FileTask(rel, s.size, s.mtime, permission=s.permission, version=s.version,
                                    block_size=s.block_size, reason="changed (its checksum is not the one recorded)"))
    for key in ("size, mtime and change token as recorded", "snapshot diff: unchanged", "snapshot diff: moved"):
        if key in plan.basis:
            left = plan.basis.pop(key)
            cut = min(n, left)
            n -= cut
            if left - cut > 0:
                plan.basis[f"{key}, and the source's own checksum as recorded"] = left - cut


