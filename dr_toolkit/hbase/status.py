"""HBase replication status from ZooKeeper (queues, positions, dead servers) and from `status 'replication'`.

Reading: the live servers (``/hbase/rs``), the peers and their ``peer-state``, and every
queue ``/hbase/replication/rs/<server>/<queue>/<wal>`` are read level by level with
pipelined asynchronous calls on one session (four round trips in all), never one znode at
a time. Of each queue's WALs only the oldest one's value is read: it is the WAL being
shipped, the only one whose position HBase records (``all_positions=True`` reads them all).

When is a queue drained? HBase deletes a WAL's znode once it has shipped all of it *and*
a newer WAL exists; the WAL the region server is still writing stays in the queue with the
offset shipped so far. So:

* a queue with no WAL is drained;
* a queue with more than one WAL is not (``SizeOfLogQueue`` > 0: whole WALs wait);
* a *recovered* queue (``<peer>-<deadserver>``, claimed from a dead server) never gets new
  edits and is deleted when finished, so any WAL left in it is data not yet shipped;
* any queue still held by a dead server (not in ``/hbase/rs``) is not drained — unclaimed,
  or claimed (``lock`` znode) but not yet transferred;
* a live server's queue holding only its current WAL: whether bytes are left in that WAL
  is not in ZooKeeper (HBase keeps the shipped offset there, not the file length). The
  toolkit decides, in this order, and says which it used in ``basis``:
  ``wal-length`` — the WAL file's *readable* length was read (``wal_length(server, wal,
  position)``; built in: :func:`fs_wal_length`, which looks in ``<rootdir>/WALs/<server>/<wal>``,
  ``…/<server>-splitting/`` and ``<rootdir>/oldWALs/<wal>`` through the hot cluster's filesystem)
  and the position reached it. This is *proof* of drain. The NameNode's length is not enough:
  for the WAL a region server is writing (open, hflushed) real HDFS reports only the completed
  blocks — 0 inside the first block — while the edits are readable (seen on HBase 2.6 / Hadoop
  3.3: NameNode length 0, 21964 bytes readable, position 14903, peer disabled: the old check
  "proved" drain with 50 rows unshipped). So for a WAL in the live ``WALs/<server>/`` directory
  the length is the NameNode's plus whatever can still be read from there on (WebHDFS ``OPEN``
  at ``max(length, position)``, at most ``probe_bytes``); a read that fails gives no length
  (never proof). The read order keeps it safe: positions are read first, lengths after, and a
  WAL can only grow;
  ``settled`` — ``settle_s`` > 0 and the position and WAL did not move across a second read
  ``settle_s`` later (no proof: an idle shipper also does not move);
  ``queue-size`` — neither was available, so HBase's own metric is used: ``SizeOfLogQueue``
  = 0 (only the current WAL left). This is the weakest basis and is reported as such; it
  never proves drain (the gate never says GO on it after the fence).

Caught up = every queue of every selected peer drained, no queue held by a dead server,
and every selected peer exists (and is ENABLED if it still has data queued).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import EXIT_UNREACHABLE, DrtError
from dr_toolkit.hbase.encoding import (
    LOCK,
    DecodeError,
    Layout,
    decode_lock,
    decode_position,
    decode_state,
    parse_queue_id,
    server_from_lock_owner,
)

if TYPE_CHECKING:
    from dr_toolkit.fs import FileSystem
    from dr_toolkit.zk.client import ZkClient

WalLength = Callable[[str, str, int], "int | None"]
"""``wal_length(server, wal, position)``: the WAL's length as far as readers can see it (at least
up to where it goes beyond ``position``), or None when unknown."""


@dataclass
class QueueStatus:
    server: str
    peer: str
    queue_id: str
    wals: int
    size_of_log_queue: int
    position: int
    current_wal: str | None
    dead: bool
    recovered: bool
    claimed_by: str | None = None
    dead_servers: list[str] = field(default_factory=list)
    drained: bool = False
    basis: str | None = None
    reason: str | None = None
    wal_names: list[str] = field(default_factory=list, repr=False)
    wal_length: int | None = field(default=None, repr=False)  # the length read for the proof (one read a check)

    def to_json(self) -> dict[str, Any]:
        # every field but wal_names and wal_length, built directly (asdict deep-copies: 3,000 queues
        # of 1,000 region servers cost it a second)
        return {"server": self.server, "peer": self.peer, "queue_id": self.queue_id, "wals": self.wals,
                "size_of_log_queue": self.size_of_log_queue, "position": self.position,
                "current_wal": self.current_wal, "dead": self.dead, "recovered": self.recovered,
                "claimed_by": self.claimed_by, "dead_servers": list(self.dead_servers), "drained": self.drained,
                "basis": self.basis, "reason": self.reason}


@dataclass
class ReplicationStatus:
    caught_up: bool
    queues: list[QueueStatus]
    reasons: list[str]
    peers: dict[str, str | None]  # peer id -> ENABLED | DISABLED | None (half-written)
    live_servers: list[str]
    znode_parent: str
    read_s: float = 0.0
    read_at: float = 0.0  # wall-clock time (epoch s) before the first znode was read
    peer_reasons: dict[str, list[str]] = field(default_factory=dict, repr=False)  # per selected peer

    @property
    def proven(self) -> bool:
        """Caught up and every queue's drain proven (empty, or position >= the WAL file's length)."""
        return self.caught_up and all(q.basis in ("empty", "wal-length") for q in self.queues)

    @property
    def basis(self) -> str:
        """The weakest basis used over the queues (``empty`` < ``wal-length`` < ``settled`` < ``queue-size``)."""
        order = ["empty", "wal-length", "settled", "queue-size"]
        used = [q.basis for q in self.queues if q.basis in order]
        return max(used, key=order.index) if used else "empty"

    def for_peer(self, peer_id: str) -> ReplicationStatus:
        """The status of one peer out of a read of several (one queue read for every policy of a check):
        its queues, their reasons and its own peer reasons — as ``replication_status(peers=[peer_id])``."""
        queues = [q for q in self.queues if q.peer == peer_id]
        reasons = [q.reason for q in queues if not q.drained and q.reason]
        reasons += self.peer_reasons.get(peer_id, [])
        return ReplicationStatus(caught_up=not reasons, queues=queues, reasons=reasons,
                                 peers={p: s for p, s in self.peers.items() if p == peer_id},
                                 live_servers=self.live_servers, znode_parent=self.znode_parent,
                                 read_s=self.read_s, read_at=self.read_at,
                                 peer_reasons={peer_id: self.peer_reasons.get(peer_id, [])})

    def to_json(self) -> dict[str, Any]:
        return {"caught_up": self.caught_up, "proven": self.proven, "basis": self.basis,
                "queues": [q.to_json() for q in self.queues],
                "reasons": self.reasons, "peers": self.peers, "live_servers": len(self.live_servers),
                "znode_parent": self.znode_parent, "read_s": round(self.read_s, 3)}


def wal_sort_key(wal: str) -> tuple[int, str]:
    """WAL names end in their creation time in ms (``host%2C16020%2C1700000000000.1700000012345``)."""
    m = re.search(r"\.(\d+)(?:\.meta)?$", wal)
    return (int(m.group(1)) if m else 0, wal)


SNAPSHOT_TRIES = 4
LENGTH_WORKERS = 16
"""WAL lengths read at once (each a few filesystem calls: stat, a read past the position, the server's
WAL directory): a check over 1,000 region servers × 3 peers reads up to 3,000 of them."""


class QueuesChanging(DrtError):
    """The replication queues changed while they were read, every time they were read."""

    exit_code = EXIT_UNREACHABLE


def _structure(zk: ZkClient, lay: Layout) -> tuple[Any, ...]:
    """Live servers, and per queue holder its queues and their WAL names (positions left out)."""
    live_l, servers_l = zk.get_children_many([lay.rs, lay.queues])
    servers = sorted(servers_l or [])
    queue_lists = zk.get_children_many([f"{lay.queues}/{s}" for s in servers])
    qpaths = [(s, q) for s, qs in zip(servers, queue_lists, strict=True) for q in sorted(qs or []) if q != LOCK]
    wal_lists = zk.get_children_many([f"{lay.queues}/{s}/{q}" for s, q in qpaths])
    return (tuple(sorted(live_l or [])),
            tuple((s, q, tuple(sorted(w or []))) for (s, q), w in zip(qpaths, wal_lists, strict=True)))


def _snapshot(zk: ZkClient, lay: Layout, all_positions: bool = False
              ) -> tuple[list[str], dict[str, str | None], list[QueueStatus]]:
    """A consistent reading of the queues. The reads take several ZooKeeper rounds, and a dead
    server's queue claimed between two of them would be read as empty on the dead server and not
    at all on the live one (a false drain). So the structure (live servers, queues, WAL names) is
    read again after the positions: if it differs from what the rounds saw, read again; if it
    keeps changing, no answer (:class:`QueuesChanging`: the signal is NO_GO, never GO)."""
    for _ in range(SNAPSHOT_TRIES):
        live, peers, queues, seen = _read_once(zk, lay, all_positions)
        if _structure(zk, lay) == seen:
            return live, peers, queues
    raise QueuesChanging(f"the replication queues under {lay.queues} changed while they were read "
                         f"({SNAPSHOT_TRIES} times): a queue being claimed or WALs rolling",
                         where=f"zookeeper {zk.quorum}", hint="check again in a moment")


def _read_once(zk: ZkClient, lay: Layout, all_positions: bool
               ) -> tuple[list[str], dict[str, str | None], list[QueueStatus], tuple[Any, ...]]:
    live_l, servers_l, peers_l = zk.get_children_many([lay.rs, lay.queues, lay.peers])
    live = sorted(live_l or [])
    servers = sorted(servers_l or [])
    peer_ids = sorted(peers_l or [])
    # round 2: queue ids of every server, peer states
    queue_lists = zk.get_children_many([f"{lay.queues}/{s}" for s in servers])
    states_raw = zk.get_many([lay.peer_state(p) for p in peer_ids])
    peers: dict[str, str | None] = {}
    for pid, raw in zip(peer_ids, states_raw, strict=True):
        try:
            peers[pid] = decode_state(raw[0]) if raw is not None else None
        except DecodeError:
            peers[pid] = None
    # round 3: WAL lists of every queue, lock owners
    qpaths: list[tuple[str, str]] = []
    locked: list[str] = []
    for s, qs in zip(servers, queue_lists, strict=True):
        for q in sorted(qs or []):
            if q == LOCK:
                locked.append(s)
            else:
                qpaths.append((s, q))
    wal_lists = zk.get_children_many([f"{lay.queues}/{s}/{q}" for s, q in qpaths])
    locks_raw = zk.get_many([f"{lay.queues}/{s}/{LOCK}" for s in locked])
    lock_owner = {s: server_from_lock_owner(decode_lock(r[0])) if r is not None else None
                  for s, r in zip(locked, locks_raw, strict=True)}
    # round 4: the position of the WAL each queue is reading (its oldest). HBase only ever
    # records a position for that WAL; the others wait at 0, so reading them adds nothing.
    wal_paths: list[str] = []
    ordered: list[list[str]] = []
    for (s, q), wals in zip(qpaths, wal_lists, strict=True):
        names = sorted(wals or [], key=wal_sort_key)
        ordered.append(names)
        for w in (names if all_positions else names[:1]):
            wal_paths.append(f"{lay.queues}/{s}/{q}/{w}")
    positions_raw = zk.get_many(wal_paths)
    pos: dict[str, int] = {}
    gone: set[str] = set()
    for path, raw in zip(wal_paths, positions_raw, strict=True):
        if raw is None:
            gone.add(path)  # shipped and deleted between the listing and the read
            continue
        try:
            pos[path] = decode_position(raw[0])
        except DecodeError:
            pos[path] = -1
    live_set = set(live)
    queues: list[QueueStatus] = []
    for (s, q), all_names in zip(qpaths, ordered, strict=True):
        names = [w for w in all_names if f"{lay.queues}/{s}/{q}/{w}" not in gone]
        peer, dead_from = parse_queue_id(q)
        cur = names[0] if names else None
        queues.append(QueueStatus(
            server=s, peer=peer, queue_id=q, wals=len(names), size_of_log_queue=max(0, len(names) - 1),
            position=pos.get(f"{lay.queues}/{s}/{q}/{cur}", 0) if cur else 0, current_wal=cur,
            dead=s not in live_set, recovered=bool(dead_from), claimed_by=lock_owner.get(s),
            dead_servers=dead_from, wal_names=names))
    seen = (tuple(live), tuple((s, q, tuple(sorted(w or []))) for (s, q), w in zip(qpaths, wal_lists, strict=True)))
    return live, peers, queues, seen


def replication_status(zk: ZkClient, znode_parent: str = "/hbase", *, peers: list[str] | None = None,
                       wal_length: WalLength | None = None, settle_s: float = 0.0,
                       all_positions: bool = False) -> ReplicationStatus:
    """Read every replication queue and decide whether the selected peers are caught up.

    ``peers``: only these peer ids (default: all). ``wal_length(server, wal)``: the WAL file's
    length when known (exact basis); ``settle_s``: re-read positions after this many seconds
    and require them unchanged (see the module docstring for the rules). ``all_positions``:
    also read the positions of the WALs waiting behind the current one (always 0 in HBase).
    """
    t0 = time.monotonic()
    read_at = time.time()
    lay = Layout(znode_parent)
    live, peer_states, queues = _snapshot(zk, lay, all_positions)
    if peers is not None:
        queues = [q for q in queues if q.peer in set(peers)]
    second: dict[tuple[str, str], QueueStatus] | None = None
    if settle_s > 0 and any(not q.dead and not q.recovered and q.wals == 1 for q in queues):
        time.sleep(settle_s)
        second = {(q.server, q.queue_id): q for q in _snapshot(zk, lay)[2]}
    lengths = _read_lengths(queues, wal_length) if wal_length is not None else {}
    reasons: list[str] = []
    for q in queues:
        _judge(q, lengths, second)
        if not q.drained and q.reason:
            reasons.append(q.reason)
    selected = peers if peers is not None else sorted(peer_states)
    peer_reasons: dict[str, list[str]] = {}
    for pid in selected:
        mine = peer_reasons.setdefault(pid, [])
        if pid not in peer_states:
            mine.append(f"peer {pid} is not configured under {lay.peers}")
        elif peer_states[pid] is None:
            mine.append(f"peer {pid} has no peer-state znode (half-written): run `drt hbase peers add` again")
        elif peer_states[pid] == "DISABLED" and any(q.peer == pid and not q.drained for q in queues):
            mine.append(f"peer {pid} is DISABLED: its queues do not drain until it is enabled")
        reasons.extend(mine)
    queues.sort(key=lambda q: (q.peer, q.server, q.queue_id))
    return ReplicationStatus(caught_up=not reasons, queues=queues, reasons=reasons,
                             peers={p: peer_states.get(p) for p in selected if p in peer_states},
                             live_servers=live, znode_parent=znode_parent, read_s=time.monotonic() - t0,
                             read_at=read_at, peer_reasons=peer_reasons)


def _needs_length(q: QueueStatus) -> bool:
    """Only a live server's own queue holding one WAL is judged by the WAL's length (see _judge)."""
    return q.wals == 1 and not q.dead and not q.recovered and bool(q.current_wal)


def _read_lengths(queues: list[QueueStatus], wal_length: WalLength) -> dict[tuple[str, str, int], int | None]:
    """Every WAL length the judgement needs, each (server, WAL, position) read once, ``LENGTH_WORKERS`` at
    a time. Called after every position was read (a WAL only grows: a length read later proves more,
    never less). A read that raises makes the whole status raise, as a serial read would."""
    from concurrent.futures import ThreadPoolExecutor

    keys = list(dict.fromkeys((q.server, q.current_wal or "", q.position) for q in queues if _needs_length(q)))
    if not keys:
        return {}
    if len(keys) == 1:
        return {keys[0]: wal_length(*keys[0])}
    with ThreadPoolExecutor(max_workers=min(LENGTH_WORKERS, len(keys)), thread_name_prefix="drt-wal-length") as ex:
        return dict(zip(keys, ex.map(lambda k: wal_length(*k), keys), strict=True))


WAL_MAGIC = b"PWAL"


def wal_header_end(head: bytes) -> int:
    """Where a WAL's edits start: after ``PWAL`` and its varint-delimited ``WALHeader`` (protobuf).
    HBase records position 0 for a WAL it has shipped nothing from, header included; 0 when the
    bytes are not a protobuf WAL (or too short to tell)."""
    if not head.startswith(WAL_MAGIC):
        return 0
    n = shift = 0
    for i, b in enumerate(head[4:14]):
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return 4 + i + 1 + n
    return 0


def fs_wal_length(fs: FileSystem, rootdir: str = "/hbase", probe_bytes: int = 1 << 20) -> WalLength:
    """``wal_length(server, wal, position)`` on the hot cluster's filesystem: the WAL is looked up in
    ``<rootdir>/WALs/<server>/<wal>``, ``<rootdir>/WALs/<server>-splitting/<wal>`` (a dead server's
    WALs being split) and ``<rootdir>/oldWALs/<wal>`` (archived); None when it is in none of them.

    Split and archived WALs are closed: their length is exact. A WAL in the live directory may be
    the one being written, whose NameNode length leaves out the block under construction (0 in
    its first block): the bytes readable from ``max(length, position)`` on (at most
    ``probe_bytes``) are added. Real HBase also lists a freshly rolled WAL in the queue only a
    moment after edits may go into it, so the newer WALs of the server's live directory that are
    not that WAL count too (their edits, past the header). A WAL holding only its header has
    nothing to ship (HBase records position 0 for it). A failed read gives None: no proof."""
    root = rootdir.rstrip("/")

    def readable(path: str, start: int) -> int | None:
        n = 0
        try:
            for chunk in fs.read(path, offset=start, length=probe_bytes):
                n += len(chunk)
                if n >= probe_bytes:
                    break
        except (OSError, ValueError):
            return None
        return n

    def header_end(path: str) -> int | None:
        try:
            head = b"".join(fs.read(path, offset=0, length=4096))
        except (OSError, ValueError):
            return None
        return wal_header_end(head)

    def live_length(server: str, wal: str, path: str, size: int, position: int) -> int | None:
        start = max(size, position)
        more = readable(path, start)
        if more is None:
            return None
        end = start + more if more else size
        if position == 0 and end > 0:
            h = header_end(path)
            if h is None:
                return None
            if end <= h:
                end = 0  # the header only: no edit to ship
        # newer WALs of this server not (yet) in the queue
        for st in fs.list_files(f"{root}/WALs/{server}"):
            name = st.path.rsplit("/", 1)[-1]
            if name.endswith(".meta") or wal_sort_key(name) <= wal_sort_key(wal):
                continue
            n = readable(st.path, 0)
            h = header_end(st.path)
            if n is None or h is None:
                return None
            if n > h:
                end = max(end, position) + (n - h)
        return end

    def length(server: str, wal: str, position: int = 0) -> int | None:
        if not wal:
            return None
        live = f"{root}/WALs/{server}/{wal}"
        st = fs.stat(live)
        if st is not None and not st.is_dir:
            return live_length(server, wal, live, int(st.size), position)
        for path in (f"{root}/WALs/{server}-splitting/{wal}", f"{root}/oldWALs/{wal}"):
            st = fs.stat(path)
            if st is not None and not st.is_dir:
                return int(st.size)
        return None

    return length


def _judge(q: QueueStatus, lengths: dict[tuple[str, str, int], int | None],
           second: dict[tuple[str, str], QueueStatus] | None) -> None:
    where = f"{q.server} queue {q.queue_id}"
    if q.wals == 0:
        q.drained, q.basis = True, "empty"
        return
    if q.dead:
        q.drained = False
        if q.claimed_by:
            q.reason = f"{where}: dead server's queue ({q.wals} WALs) claimed by {q.claimed_by}, transfer not finished"
        else:
            q.reason = f"{where}: unclaimed queue of dead server ({q.wals} WAL(s), nobody is shipping them)"
        return
    if q.recovered:
        q.reason = (f"{where}: recovered queue from {', '.join(q.dead_servers)} still holds {q.wals} WAL(s) "
                    f"(position {q.position} in {q.current_wal})")
        return
    if q.wals > 1:
        q.reason = f"{where}: SizeOfLogQueue={q.size_of_log_queue} (whole WALs not yet shipped)"
        return
    length = lengths.get((q.server, q.current_wal or "", q.position))
    q.wal_length = length
    if length is not None:
        q.basis = "wal-length"
        q.drained = q.position >= length
        if not q.drained:
            q.reason = f"{where}: {length - q.position} bytes left to ship in {q.current_wal}"
        return
    if second is not None:
        q.basis = "settled"
        again = second.get((q.server, q.queue_id))
        q.drained = again is not None and again.wal_names == q.wal_names and again.position == q.position
        if not q.drained:
            q.reason = f"{where}: still shipping (position or WALs moved while settling)"
        return
    q.basis, q.drained = "queue-size", True


# --- `status 'replication'` text ------------------------------------------------------------------

_KV = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*=\s*([^,]*?)\s*(?=,\s*[A-Za-z][A-Za-z ]*?\s*=|$)")
_INT_FIELDS = {"AgeOfLastShippedOp": "age_of_last_shipped_op", "SizeOfLogQueue": "size_of_log_queue",
               "Replication Lag": "replication_lag", "AgeOfLastAppliedOp": "age_of_last_applied_op"}
_TEXT_FIELDS = {"TimeStampsOfLastShippedOp": "timestamps_of_last_shipped_op",
                "TimeStampOfLastShippedOp": "timestamps_of_last_shipped_op",
                "TimeStampsOfLastAppliedOp": "timestamps_of_last_applied_op", "PeerID": "peer_id"}


@dataclass
class ShellSource:
    server: str
    peer_id: str | None = None
    age_of_last_shipped_op: int | None = None
    size_of_log_queue: int | None = None
    timestamps_of_last_shipped_op: str | None = None
    replication_lag: int | None = None
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class ShellStatus:
    version: str | None
    live_servers: int | None
    sources: list[ShellSource]
    sinks: list[dict[str, str]]

    @property
    def caught_up(self) -> bool:
        """Every source reports SizeOfLogQueue=0 and (where given) Replication Lag=0."""
        return bool(self.sources) and all(
            s.size_of_log_queue == 0 and (s.replication_lag in (0, None)) for s in self.sources)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "live_servers": self.live_servers, "caught_up": self.caught_up,
                "sources": [asdict(s) for s in self.sources], "sinks": self.sinks}


def _kv(text: str) -> dict[str, str]:
    return {m.group(1).strip(): m.group(2).strip() for m in _KV.finditer(text.strip().strip(","))}


def parse_status_replication(text: str) -> ShellStatus:
    """Parse the hbase shell's ``status 'replication'`` (HBase 1.x one-line and 2.x multi-line forms)."""
    version = live = None
    sources: list[ShellSource] = []
    sinks: list[dict[str, str]] = []
    server = ""
    mode: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := re.match(r"^version\s+(\S+)", line):
            version = m.group(1)
            continue
        if m := re.match(r"^(\d+)\s+live servers?", line):
            live = int(m.group(1))
            continue
        if m := re.match(r"^SOURCE\s*:\s*(.*)$", line):
            sources.append(ShellSource(server=server))
            mode = "source"
            line = m.group(1)
        elif m := re.match(r"^SINK\s*:\s*(.*)$", line):
            sinks.append({"server": server})
            mode = "sink"
            line = m.group(1)
        elif line.endswith(":") and "=" not in line:
            server, mode = line[:-1].strip(), None
            continue
        if mode is None or "=" not in line:
            continue
        kv = _kv(line)
        if mode == "sink":
            sinks[-1].update(kv)
            continue
        src = sources[-1]
        src.fields.update(kv)
        for k, v in kv.items():
            if k in _INT_FIELDS:
                try:
                    setattr(src, _INT_FIELDS[k], int(v))
                except ValueError:
                    pass
            elif k in _TEXT_FIELDS:
                setattr(src, _TEXT_FIELDS[k], v)
    return ShellStatus(version, live, sources, sinks)
