"""The HDFS signal's recorded proof and its quick path (issue 42): a gate check whose cost does not
grow with the tree.

**The full proof** is today's dry run (:func:`dr_toolkit.copy.api.probe`: hot and cold listed, the
manifest compared, GETFILECHECKSUM of kept files) — O(files). When it states a safe time (cold holds
a manifest that descends from the last completed run's, nothing on hot that no run copies), a
*proving* check (:func:`prove_target`, the ``prove`` mode) records it in the ledger as a watermark
row of component :data:`COMPONENT` (``<policy>:<target uri>``; one row per target, replaced by the
next proof, never pruned): when, the completed run and its manifest, the manifest cold holds, the
newest run of the target then, the hot snapshot that run read (by its HDFS snapshot id), and cold's
own state at the proof — taken by the NameNode *before* the listing of cold:

- cold's target snapshottable: a snapshot ``drtproof-<id>`` of it (by its id); the previous proof's
  snapshot is deleted once the new proof is recorded;
- else: GETCONTENTSUMMARY (files, directories, bytes), the target's modification time and
  :data:`SAMPLE` files of the manifest cold holds, stat'ed (size, mtime, fileId) after the listing.

The proof also records each side's **NameNode transaction id** (:mod:`dr_toolkit.copy.editlog`:
the active NameNode's ``/jmx``, with the identity of its process), read before that side's
evidence: hot's before the full check looks at hot, cold's after the proof's snapshot and before
the counters and the listing — never after (a write in between would be missed). Deleting the
previous proof's snapshot moves cold's recorded txid only when it is exactly one step from it.
Where a side's txid is read, the NameNode first rolls its edit log when that txid sits deep in a
long segment (:func:`editlog.base_state`; ``$DRT_HDFS_EDITLOG_ROLL=off`` never): the txid recorded
is the one read right after the roll, at the start of a fresh segment, so a quick read of the
events after it decodes nothing before it; where the roll cannot be made the txid is recorded as
read, and the proof's detail (``edit_log_base``) says it is not at a segment start.

**The quick path** (:func:`quick_signal`) proves the same safe time from O(changes) evidence:
the ledger unchanged since the proof (the same newest run, the same last completed run), the proof
younger than :data:`PROOF_MAX_AGE_S`, and cold unchanged since it. Per side, in order:

1. the txid now equal to the recorded one, the same NameNode process: no namespace change at all
   since (O(1): /jmx reads, no NameNode walk, no diff call);
2. else the edit log's inotify events after the recorded txid under the side's root (the
   reader's JVM; O(the NameNode's transactions since), bounded): cold — any but access-time
   updates → changed; hot — pending = the proof's count + the paths the events name;
3. else (no txid recorded, another NameNode process, no reader, not the superuser, edits purged,
   past the bound) the NameNode's snapshot diff from the proof's snapshot to now is empty, or (no
   snapshots on cold) the same counts, bytes, target mtime and sampled files; hot's changes from
   the snapshot diff of hot from the run's snapshot (by id) to now — the basis says why.

It never lists a directory: a constant number of NameNode calls (plus the stat of the sample, or
one edit-log read), whatever the tree holds.

What it cannot see, said in its basis: with the edit-log evidence on both sides, only bytes
changed on a DataNode without the NameNode (no edit); with a snapshot diff, a file rewritten in
place keeping size and mtime (TRUNCATE + APPEND + SETTIMES: the snapshot diff's documented limit,
which the edit log does see), on cold until the next full proof; without cold snapshots, any change that keeps cold's counts, bytes, target mtime and the
sampled files (a rename deeper than the target, an overwrite of the same size). Where it cannot
prove (no proof, an old proof, a run since, a snapshot gone or re-created, any call failing) it
says why: the gate falls back to the full proof (``auto``) or says NO_GO (``quick``) — never GO on
belief. Our own writes are never its evidence: cold's snapshot and counters are the NameNode's.
"""

from __future__ import annotations

import concurrent.futures as cf
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dr_toolkit.copy import editlog
from dr_toolkit.copy.editlog import EditLogUnavailable, NameNodeState
from dr_toolkit.copy.run import new_id
from dr_toolkit.copy.state import StateStore, default_state_uri
from dr_toolkit.errors import LedgerUnreachable
from dr_toolkit.errors import why as _why
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.kerberos import KerberosError
from dr_toolkit.signal import Signal, iso

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.fs.base import FileSystem
    from dr_toolkit.fs.uri import Location
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import HdfsPolicy, Topology

COMPONENT = "hdfs-proof"  # the ledger's watermark component of the recorded proofs
PROOF_MAX_AGE_S = 24 * 3600.0  # a proof older than this is not used: the full proof runs again
SAMPLE = 64  # cold files stat'ed by the bounded re-check (cold without snapshots)
SNAP_PREFIX = "drtproof-"  # cold's proof snapshots (not "drt-": those are the runs' on the source)
MODES = ("full", "prove", "quick", "auto")

#: what no quick path sees, in every quick basis
BLIND = ("a file rewritten in place keeping its size and mtime (TRUNCATE + APPEND + SETTIMES: the snapshot "
         "diff's limit)")


#: what the edit-log evidence does not see (both sides by txid or edit log)
BLIND_EDITLOG = ("bytes changed on a DataNode without the NameNode (no edit; the full proof's checksums see it)")


class Calls(Counter[str]):
    """NameNode calls made, by operation (the quick path's cost, stated in its detail)."""

    def did(self, op: str, n: int = 1) -> None:
        self[op] += n


def proof_key(policy: str, target_uri: str) -> str:
    return f"{policy}:{target_uri}"


def recorded(ledger: Ledger, policy: str, target_uri: str) -> dict[str, Any] | None:
    """The recorded proof of one target (the watermark row's detail, with ``proved_at``), or None."""
    key = proof_key(policy, target_uri)
    row = next((w for w in ledger.watermarks(COMPONENT) if w["name"] == key), None)
    return row["detail"] if row is not None and isinstance(row.get("detail"), dict) else None


def _newest(runs: list[dict[str, Any]]) -> list[Any] | None:
    return [runs[0]["run_id"], runs[0]["status"]] if runs else None


# -- the full proof, recorded ---------------------------------------------------------------------

def nn_state(fs: FileSystem, loc: Location, calls: Calls | None = None, *, segment: bool = False) -> NameNodeState:
    """The active NameNode's transaction id and identity (:func:`editlog.namenode_state`), over the
    filesystem's own HTTP session (its authentication: SPNEGO, a gateway's basic auth)."""
    if fs.kind != "webhdfs":
        raise EditLogUnavailable(f"not on HDFS ({fs.kind}): no NameNode transaction id")
    session = fs.client._session  # type: ignore[attr-defined]  # the WebHDFS session: the same authentication
    timeout = float(getattr(fs, "timeout_s", 30.0))

    def get(url: str) -> Any:
        r = session.get(url, timeout=timeout)
        r.raise_for_status()
        return r

    h = loc.cluster_config.hdfs if loc.cluster_config is not None else None
    return editlog.namenode_state(list(loc.namenodes) or list(getattr(fs, "namenodes", [])), get,
                                  list(h.rpc_addresses) if h is not None else None, calls, segment=segment)


def _user(loc: Location) -> str | None:
    return loc.cluster_config.hdfs.user if loc.cluster_config is not None and loc.cluster_config.hdfs else None


def nn_base(fs: FileSystem, loc: Location) -> editlog.Base:
    """The side's txid as the base of its evidence (:func:`editlog.base_state`): read with its
    segment's start; the NameNode's edit log rolled first when the txid is deep in a long segment (the
    roll logs in as the reader does), the base then the txid read right after the roll."""
    kerberos = getattr(fs, "kerberos", None)
    return editlog.base_state(lambda: nn_state(fs, loc, segment=True),
                              lambda st: editlog.roll_edits(st, user=_user(loc), kerberos=kerberos))


def _try_state(state: Callable[[], editlog.Base] | None) -> editlog.Base | None:
    if state is None:
        return None
    try:
        return state()
    except Exception:  # noqa: BLE001 - no txid recorded: the quick path uses the snapshot diff / counters
        return None


def _try_nn(state: Callable[[], NameNodeState]) -> NameNodeState | None:
    try:
        return state()
    except Exception:  # noqa: BLE001 - not read: the recorded txid stays
        return None


def _step_over(rec: NameNodeState | None, before: NameNodeState | None, after: NameNodeState | None) -> bool:
    """One transaction of ours happened between ``before`` and ``after``, and nothing else since
    ``rec``: the same NameNode process, ``before`` equal to ``rec``, ``after`` exactly one more —
    then the recorded txid may move to ``after`` (that one transaction was ours)."""
    return (rec is not None and before is not None and after is not None and editlog.not_same(rec, before) is None
            and editlog.not_same(rec, after) is None and before.txid == rec.txid and after.txid == rec.txid + 1)


def cold_baseline(fs: FileSystem, root: str, state: Callable[[], editlog.Base] | None = None) -> dict[str, Any]:
    """Cold's state as the NameNode keeps it, taken before the full proof lists cold: a snapshot
    (snapshottable target) or its counters and modification time. Raises when it cannot be read.

    With ``state`` (the NameNode's txid, :func:`nn_base`): cold's txid, read after the proof's own
    snapshot (and after the roll of the NameNode's edit log, when one is made) and before the counters
    and before the full check lists cold, is recorded as its base (``nn``; ``nn_base``: where it sits
    in its edit segment): every change after it has a later txid, every change before it is in what
    the full check sees. Unreadable: no ``nn`` (the quick path then asks the snapshot diff / counters)."""
    if fs.kind != "webhdfs":
        raise ValueError(f"cold is not on HDFS ({fs.kind}): no NameNode record of its state")
    if fs.is_snapshottable(root):
        name = SNAP_PREFIX + new_id("p")
        fs.create_snapshot(root, name)
        nn = _try_state(state)
        info = fs.snapshots(root).get(name)
        if info is None:
            raise ValueError(f"the snapshot {name} just taken of {root} is not listed")
        base: dict[str, Any] = {"kind": "snapshot", "snapshot": name, "identity": info.identity}
        if nn is not None:
            base["nn"], base["nn_base"] = nn.state.record(), nn.note
            base["nn_read"] = "after the proof's snapshot, before the full check lists cold"
        return base
    nn = _try_state(state)
    st = fs.stat(root)
    if st is None:
        raise FileNotFoundError(root)
    base = {"kind": "summary", "summary": fs.content_summary(root), "mtime": st.mtime}  # type: ignore[attr-defined]
    if nn is not None:
        base["nn"], base["nn_read"] = nn.state.record(), "before the counters and the full check's listing of cold"
        base["nn_base"] = nn.note
    return base


def _drop(fs: FileSystem, root: str, base: dict[str, Any] | None) -> bool:
    if base and base.get("kind") == "snapshot":
        try:
            fs.delete_snapshot(root, str(base["snapshot"]))
            return True
        except Exception:  # noqa: BLE001 - an orphan proof snapshot only holds space; the next proof retries
            pass
    return False


def _sample(fs: FileSystem, root: str, entries: Any, k: int = SAMPLE) -> list[list[Any]]:
    """``k`` files of the manifest cold holds (reservoir: one pass, k kept), stat'ed on cold now."""
    rnd, keep = random.Random(), []
    for i, rel in enumerate(entries):
        if i < k:
            keep.append(rel)
        elif (j := rnd.randrange(i + 1)) < k:
            keep[j] = rel
    out = []
    for rel in sorted(keep):
        st = fs.stat(fs.join(root, rel))
        out.append([rel, None, None, None] if st is None else [rel, st.size, st.mtime, st.version])
    return out


def record_proof(topology: Topology, ledger: Ledger, access: Access, policy: HdfsPolicy, target: str,
                 sig: Signal, base: dict[str, Any], before: list[Any] | None, now: float,
                 hot_nn: editlog.Base | None = None) -> str | None:
    """After a full check that stated a safe time: record the proof; None, or why it was not."""
    d = sig.detail
    if sig.safe_time is None or d.get("unreplicated"):
        return "the full check stated no safe time"
    src, tgt = parse_uri(policy.source, topology), parse_uri(target, topology)
    runs = [r for r in ledger.runs(policy=policy.name, limit=500) if r["target"] == tgt.uri]
    if _newest(runs) != before or (runs and runs[0]["status"] == "running"):
        return "a run of this target started or finished during the full check"
    mrow = ledger.manifest(str(d["manifest_id"]))
    cold_mid = str(d["cold_holds_manifest"])
    crow = ledger.manifest(cold_mid)
    state = StateStore.open(default_state_uri(topology, policy.options.state_dir), src.uri, tgt.uri, topology,
                            access)
    try:
        done = state.read_manifest(str(d["manifest_id"]), (mrow or {}).get("content_digest"))
        held = done if cold_mid == d["manifest_id"] else state.read_manifest(cold_mid, (crow or {}).get(
            "content_digest"))
    finally:
        state.close()
    if done is None or held is None:
        return "a manifest could not be read back from the state location"
    hot_snap, hot_id = (mrow or {}).get("source_snapshot"), done[0].get("source_snapshot_id")
    fs = open_fs(tgt, access)
    try:
        cold = dict(base)
        if cold["kind"] == "summary":
            cold["sample"] = _sample(fs, tgt.path, held[1])
    finally:
        fs.close()
    detail = {"proved_at": now, "run_id": d["last_completed_run"], "manifest_id": d["manifest_id"],
              "cold_manifest_id": cold_mid, "newest_run": before, "safe_time": sig.safe_time,
              "files_pending": d.get("files_pending"), "hot_snapshot": hot_snap,
              "hot_snapshot_id": hot_id if hot_snap else None, "cold": cold,
              "hot_nn": hot_nn.state.record() if hot_nn is not None else None,
              "hot_nn_base": hot_nn.note if hot_nn is not None else None,
              "checked": "dry run: hot and cold listed, the manifest compared, cold's own checksum of kept files"}
    old = recorded(ledger, policy.name, tgt.uri)
    ledger.set_watermark(COMPONENT, proof_key(policy.name, tgt.uri), now, detail)
    if old and old.get("cold", {}).get("snapshot") != cold.get("snapshot") and old.get("cold", {}).get("snapshot"):
        fs = open_fs(tgt, access)
        try:
            rec = NameNodeState.of(cold.get("nn"))
            pre = _try_nn(lambda: nn_state(fs, tgt)) if rec is not None else None
            dropped = _drop(fs, tgt.path, old.get("cold"))
            post = _try_nn(lambda: nn_state(fs, tgt)) if pre is not None else None
            if dropped and _step_over(rec, pre, post):
                # the previous proof's snapshot deleted: one transaction, ours, and nothing since the
                # recorded txid before it — the recorded txid moves over it (so a quiet cold needs no read)
                assert post is not None and rec is not None
                cold["nn"] = replace(post, segment=rec.segment).record()
                cold["nn_read"] = f"{cold.get('nn_read')}; moved over the deletion of the previous proof's snapshot"
                ledger.set_watermark(COMPONENT, proof_key(policy.name, tgt.uri), now, detail)
        finally:
            fs.close()
    return None


def _hot_state(topology: Topology, access: Access, policy: HdfsPolicy) -> editlog.Base | None:
    """Hot's NameNode txid (:func:`nn_base`: after a roll of its edit log, when one is made), read
    before the full check looks at hot (None: not read — the quick path then diffs hot's snapshot)."""
    if not editlog.enabled():
        return None
    try:
        src = parse_uri(policy.source, topology)
        fs = open_fs(src, access)
    except Exception:  # noqa: BLE001 - no txid recorded for hot
        return None
    try:
        return _try_state(lambda: nn_base(fs, src))
    finally:
        fs.close()


def prove_target(full: Callable[..., Signal], topology: Topology, ledger: Ledger, access: Access, now: float,
                 policy: HdfsPolicy, target: str) -> Signal:
    """The full check (``full``: the signal reader of :mod:`copy.signals`), recorded as a proof when
    it states a safe time; the signal's detail says whether (``proof``)."""
    tgt = parse_uri(target, topology)
    base: dict[str, Any] | None = None
    why: str | None = None
    before: list[Any] | None = None
    hot_nn: editlog.Base | None = None
    try:
        runs = [r for r in ledger.runs(policy=policy.name, limit=500) if r["target"] == tgt.uri]
        before = _newest(runs)
        if not any(r["status"] == "succeeded" for r in runs):
            why = "no run of this target succeeded: nothing to prove"
        else:
            hot_nn = _hot_state(topology, access, policy)  # before the full check looks at hot
            fs = open_fs(tgt, access)
            try:
                cfs = fs
                base = cold_baseline(fs, tgt.path, (lambda: nn_base(cfs, tgt)) if editlog.enabled() else None)
            finally:
                fs.close()
    except LedgerUnreachable:
        raise
    except Exception as exc:  # noqa: BLE001 - the full check stands; only no proof is recorded
        why = f"cold's state could not be taken: {_why(exc)}"
    sig = full(topology, ledger, access, now, policy, target)
    if base is not None:
        try:
            why = record_proof(topology, ledger, access, policy, target, sig, base, before, now, hot_nn)
        except LedgerUnreachable:
            raise
        except Exception as exc:  # noqa: BLE001 - the full check stands; only no proof is recorded
            why = f"not recorded: {_why(exc)}"
        if why is not None:
            try:
                fs = open_fs(tgt, access)
                try:
                    _drop(fs, tgt.path, base)
                finally:
                    fs.close()
            except Exception:  # noqa: BLE001 - an orphan proof snapshot only holds space
                pass
    sig.detail["proof"] = {"recorded": why is None, "at": iso(now)} if why is None else {"recorded": False,
                                                                                          "why": why}
    if why is None and (hot_nn is not None or (base or {}).get("nn_base")):
        # where each side's recorded txid sits in its NameNode's edit log (what a quick read decodes first)
        sig.detail["proof"]["edit_log_base"] = {"hot": hot_nn.note if hot_nn is not None else None,
                                                "cold": (base or {}).get("nn_base")}
    return sig


# -- the quick path -------------------------------------------------------------------------------

def _cold_unchanged(fs: FileSystem, root: str, cold: dict[str, Any], calls: Calls) -> tuple[str | None, str]:
    """(why cold cannot be shown unchanged since the proof — or None, what showed it)."""
    if cold.get("kind") == "snapshot":
        name = str(cold["snapshot"])
        calls.did("GETSNAPSHOTLIST")
        info = fs.snapshots(root).get(name)
        if info is None or info.identity != cold.get("identity"):
            return (f"cold's proof snapshot {name} is gone or was re-created ({info.identity if info else 'absent'}, "
                    f"recorded {cold.get('identity')})"), ""
        calls.did("GETSNAPSHOTDIFF")
        diff = fs.snapshot_diff(root, name, "")
        if diff:
            e = diff[1] if len(diff) > 1 and diff[0].path == "" else diff[0]
            return (f"cold changed since the proof: the NameNode's snapshot diff from {name} names {len(diff)} "
                    f"entries (e.g. {e.type} {e.path or '.'}{' -> ' + e.target if e.target else ''})"), ""
        return None, (f"the NameNode's snapshot diff of cold from {name} ({cold.get('identity')}, taken at the "
                      "proof before cold was listed) to now is empty")
    summary, mtime, sample = cold.get("summary") or {}, cold.get("mtime"), cold.get("sample") or []
    calls.did("GETCONTENTSUMMARY")
    now_sum = fs.content_summary(root)  # type: ignore[attr-defined]
    for k in ("fileCount", "directoryCount", "length"):
        if now_sum.get(k) != summary.get(k):
            return f"cold changed since the proof: {k} {summary.get(k)} then, {now_sum.get(k)} now", ""
    calls.did("GETFILESTATUS")
    st = fs.stat(root)
    if st is None or st.mtime != mtime:
        return f"cold changed since the proof: its target's modification time moved ({mtime} -> {st and st.mtime})", ""
    for rel, size, mt, ver in sample:
        calls.did("GETFILESTATUS")
        s = fs.stat(fs.join(root, rel))
        if (None if s is None else [s.size, s.mtime, s.version]) != (None if size is None else [size, mt, ver]):
            return f"cold changed since the proof: {rel} is not as the proof found it", ""
    return None, (f"bounded re-check (cold is not snapshottable): GETCONTENTSUMMARY equal to the proof's "
                  f"({summary.get('fileCount')} files, {summary.get('directoryCount')} directories, "
                  f"{summary.get('length')} bytes), the target's mtime unchanged, {len(sample)} sampled files "
                  "unchanged (size, mtime, fileId); cannot see a change keeping all of those (a rename below the "
                  "target, an overwrite of the same size)")


def _pending(diff: list[Any]) -> list[Any]:
    """The entries of hot's diff that are changes to replicate: a ``M`` of a directory whose
    children the diff names (or of the root) is only their parent."""
    parents = {e.path.rsplit("/", 1)[0] if "/" in e.path else "" for e in diff if e.path}
    return [e for e in diff if not (e.type == "M" and (e.path == "" or e.path in parents))]


def _by_editlog(fs: FileSystem, loc: Location, rec_d: Any, calls: Calls
                ) -> tuple[str, str, list[dict[str, Any]], NameNodeState | None]:
    """One side's changes since the proof from its NameNode's edit log (:mod:`editlog`):
    ``("same", basis, [], now)`` the txid is the recorded one; ``("events", basis, changes, now)``
    the events under the side's root after the recorded txid (access-time updates left out);
    ``("unknown", why, [], None)`` not known this way (the snapshot diff / counters are asked)."""
    rec = NameNodeState.of(rec_d)
    if rec is None:
        return "unknown", "no NameNode transaction id was recorded at the proof", [], None
    if not editlog.enabled():
        return "unknown", f"the edit log evidence is switched off (${editlog.ENV_SWITCH})", [], None
    try:
        now = nn_state(fs, loc, calls)
    except KerberosError:
        raise  # no valid ticket: one line naming the principal (exit 3), never a path that may say "no change"
    except Exception as exc:  # noqa: BLE001 - the diff path answers instead
        return "unknown", f"the NameNode's transaction id could not be read: {_why(exc)}", [], None
    if (other := editlog.not_same(rec, now)) is not None:
        return "unknown", other, [], None
    who = f"the active NameNode {now.rpc} (block pool {now.block_pool_id}, started {iso(now.started_ms / 1000)})"
    if now.txid == rec.txid:
        return "same", (f"{who}'s last transaction id is {now.txid}, as recorded at the proof (read before its "
                        "evidence): no namespace change at all since"), [], now
    if now.txid < rec.txid:
        return "unknown", f"{who}'s transaction id went back ({rec.txid} then, {now.txid} now)", [], None
    try:
        calls.did("getEditsFromTxid")
        edits = editlog.read_edits(now, rec.txid, [loc.path], user=_user(loc), kerberos=getattr(fs, "kerberos", None))
    except EditLogUnavailable as exc:
        return "unknown", str(exc), [], None
    except KerberosError:
        raise
    except Exception as exc:  # noqa: BLE001 - the diff path answers instead
        return "unknown", f"the edit log reader failed: {_why(exc)}", [], None
    ch = edits.changes()
    return "events", (f"{who}'s edit log from txid {rec.txid} (recorded at the proof, read before its evidence; "
                      f"{editlog.place(rec)}) to {edits.read_to}: {edits.events_read} events on the NameNode, "
                      f"{len(ch)} changing {loc.path}" + (f" ({edits.atime_only} access-time updates not counted)" if edits.atime_only
                                       else "")), ch, now


def _cold_side(tgt: Location, access: Access, cold: dict[str, Any], calls: Calls) -> tuple[str | None, str, str]:
    """(why cold cannot be shown unchanged — or None, what showed it, the evidence's kind)."""
    fs = open_fs(tgt, access)
    try:
        how, text, changes, _ = _by_editlog(fs, tgt, cold.get("nn"), calls)
        if how == "same":
            return None, f"{text} (cold's txid)", "txid"
        if how == "events" and not changes:
            return None, text, "editlog"
        if how == "events":
            return (f"cold changed since the proof: {text} (e.g. {editlog.describe(changes[0])})"), "", "editlog"
        why, basis = _cold_unchanged(fs, tgt.path, cold, calls)
        if why:  # the operator learns why the slower path answered (a principal not the superuser...)
            why += f" (the edit log not used: {text})"
        return why, basis + f" (the edit log not used: {text})", str(cold.get("kind"))
    finally:
        fs.close()


def _hot_side(src: Location, access: Access, p: dict[str, Any], calls: Calls) -> tuple[int | None, str, str, str]:
    """(entries pending on hot — None: not known —, the basis, an example, the evidence's kind): from
    hot's NameNode txid / edit log since the proof's look at hot (the proof's own count of what was
    pending then, plus the paths changed since), else hot's snapshot diff from the run's snapshot."""
    fs = open_fs(src, access)
    try:
        how, text, changes, _ = _by_editlog(fs, src, p.get("hot_nn"), calls)
    finally:
        fs.close()
    then = p.get("files_pending")
    if how != "unknown" and isinstance(then, int):
        paths = editlog.changed_paths(changes, src.path)
        example = f" (e.g. {editlog.describe(changes[0])})" if changes else ""
        pend = then + len(paths)
        return pend, (f"hot since the proof's look at it (which found {then} pending): {text}"
                      + (f"; {len(paths)} paths changed{example}" if how == "events" else "")
                      + (" — at most this many pending (a path changed back, or one the proof counted, counted "
                         "again; policy filters not applied to the events)" if pend and how == "events" else "")
                      ), example, (
            "txid" if how == "same" else "editlog")
    hot_pending, basis, example = _hot_changes(src, access, p.get("hot_snapshot"), p.get("hot_snapshot_id"), calls)
    if how == "unknown" and p.get("hot_nn"):
        basis += f" (the edit log not used: {text})"
    return hot_pending, basis, example, "snapshot" if hot_pending is not None else "none"


def _hot_changes(src: Location, access: Access, snap: Any, sid: Any, calls: Calls) -> tuple[int | None, str, str]:
    """(entries changed on hot since the run's snapshot — None: not known —, the basis, an example)."""
    if not (snap and sid):
        return None, ("hot's changes since the run's listing are not known without the run's snapshot of hot "
                      "(policy option snapshots off, or hot not snapshottable): a full check counts them"), ""
    fs = open_fs(src, access)
    try:
        calls.did("GETSNAPSHOTLIST")
        info = fs.snapshots(src.path).get(str(snap))
        if info is None or info.identity != sid:
            return None, (f"hot's snapshot {snap} of the run is gone or was re-created: hot's changes since the run "
                          "are not known (a full check counts them)"), ""
        calls.did("GETSNAPSHOTDIFF")
        pend = _pending(fs.snapshot_diff(src.path, str(snap), ""))
    finally:
        fs.close()
    example = f" (e.g. {pend[0].type} {pend[0].path})" if pend else ""
    return len(pend), (f"hot since the run's listing: the NameNode's snapshot diff from {snap} ({sid}) to now names "
                       f"{len(pend)} changed entries{example} (policy filters not applied: counted whole)"), example


def quick_signal(topology: Topology, ledger: Ledger, access: Access, now: float, policy: HdfsPolicy,
                 target: str) -> tuple[Signal | None, str | None]:
    """``(signal, None)`` when the quick path proves the safe time (the signal may still be not
    caught up: what hot changed, or unknown without its snapshot), else ``(None, why not)``.
    Lists nothing; raises only when the ledger is unreachable."""
    name = f"{policy.name}:{target}"
    calls = Calls()
    try:
        src, tgt = parse_uri(policy.source, topology), parse_uri(target, topology)
        p = recorded(ledger, policy.name, tgt.uri)
        if p is None:
            return None, "no full proof recorded for this target yet"
        proved_at = float(p["proved_at"])
        if now - proved_at > PROOF_MAX_AGE_S:
            return None, f"the last full proof ({iso(proved_at)}) is older than {PROOF_MAX_AGE_S:g}s"
        runs = [r for r in ledger.runs(policy=policy.name, limit=500) if r["target"] == tgt.uri]
        if _newest(runs) != p.get("newest_run"):
            return None, (f"run {runs[0]['run_id'] if runs else '?'} ({runs[0]['status'] if runs else 'gone'}) since "
                          f"the last full proof ({iso(proved_at)})")
        mrow = ledger.manifest(str(p["manifest_id"]))
        if mrow is None:
            return None, f"the manifest {p['manifest_id']} of the proof is no longer in the ledger"
        snap = p.get("hot_snapshot")
        # cold and hot asked side by side (two NameNodes): each side's txid, then its edit log (a JVM)
        # or its snapshot diff (one call, but the NameNode walks its tree)
        with cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="drt-hdfs-quick") as ex:
            hot_fut = ex.submit(_hot_side, src, access, p, hot_calls := Calls())
            why, cold_basis, cold_kind = _cold_side(tgt, access, p.get("cold") or {}, calls)
            hot_pending, hot_basis, example, hot_kind = hot_fut.result()
        calls.update(hot_calls)
        if why is not None:
            return None, why
    except (LedgerUnreachable, KerberosError):
        raise  # no valid ticket: one line naming the principal (exit 3), not a slower path
    except Exception as exc:  # noqa: BLE001 - any failure: nothing proven quickly
        return None, f"the quick check failed: {_why(exc)}"
    safe = float(mrow["source_time"])
    due = iso(proved_at + PROOF_MAX_AGE_S)
    basis = (f"listing of run {p['run_id']} at {iso(safe)} (manifest {p['manifest_id']}"
             + (f", snapshot {snap}" if snap else "") + f"); cold holds manifest {p['cold_manifest_id']}: proven "
             f"by the full check at {iso(proved_at)} ({p.get('checked')}) and unchanged since — {cold_basis}; "
             f"{hot_basis}; cannot see "
             + (BLIND_EDITLOG if cold_kind in ("txid", "editlog") and hot_kind in ("txid", "editlog") else BLIND)
             + f" until the next full proof (due by {due})")
    detail: dict[str, Any] = {
        "path": "quick", "proof_at": iso(proved_at), "proof_due": due, "last_completed_run": p["run_id"],
        "manifest_id": p["manifest_id"], "cold_holds_manifest": p["cold_manifest_id"], "source_snapshot": snap,
        "cold_evidence": cold_kind, "hot_evidence": hot_kind, "files_pending": hot_pending,
        "snapshot_age_s": round(max(0.0, now - safe), 1),
        "namenode_calls": dict(calls), "namenode_calls_total": sum(calls.values()), "listings": 0}
    lag = max(0.0, now - safe)
    if hot_pending is None:
        return Signal("hdfs", name, False, lag, safe, basis, detail,
                      "hot's changes since the last run are not known without its snapshot (a full check counts them)"
                      ), None
    if hot_pending:
        return Signal("hdfs", name, False, lag, safe, basis, detail,
                      f"{hot_pending} entries changed on hot since the last run{example} (pending)"), None
    return Signal("hdfs", name, True, lag, safe, basis, detail), None
