"""A region-server simulator: writes replication state into a real ZooKeeper the way HBase does.

No HBase can run here (DESIGN §4), so this writes the znodes HBase's region servers write
(HBase 0.96+ encodings, see dr_toolkit.hbase.encoding), following the reference document
"HBase cluster replication":

* a server registers ``/hbase/rs/<host,port,startcode>`` as an *ephemeral* znode of its own
  ZooKeeper session, and creates one queue per peer ``/hbase/replication/rs/<server>/<peer>``;
* a WAL roll adds the new WAL to every queue (empty value = position 0) before edits go in;
* shipping advances the position of the oldest WAL (``PBUF`` ReplicationHLogPosition) and
  deletes its znode when it has been read to the end *and* a newer WAL exists (the current
  WAL stays, with its position); a recovered queue is deleted when its last WAL is done;
* a server dies by losing its session (its ``/hbase/rs`` znode vanishes, its queues stay);
  another server claims them: it creates ``lock`` (ReplicationLock with its own znode as
  owner) in the dead server's replication znode, copies each queue to ``<queue>-<dead>``
  under itself, then deletes the dead server's queues and znode.

WAL files: with ``rootdir`` (a local directory standing for ``hbase.rootdir`` on the hot
cluster, e.g. ``<hot local_root>/hbase``) the simulator writes real WAL files, as HBase does on
HDFS: ``<rootdir>/WALs/<server>/<wal>`` grows with every ``write``; a WAL no queue needs any more
(shipped and rolled past) is archived to ``<rootdir>/oldWALs/<wal>``; ``create_table`` writes a
table descriptor ``<rootdir>/data/<ns>/<table>/.tabledesc/.tableinfo.0000000001`` with each
family's REPLICATION_SCOPE. The gate then proves drain by reading those files' lengths. Without
``rootdir`` lengths live only in ``SimCluster.lengths``. ``SimCluster.wal_length`` is the
callable ``replication_status(wal_length=...)`` accepts.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kazoo.client import KazooClient

from dr_toolkit.hbase.encoding import Layout, decode_position, encode_lock, encode_position

_clock = itertools.count(int(time.time() * 1000))


def _ts() -> int:
    return next(_clock)


class SimCluster:
    """A set of simulated region servers of one HBase cluster (one znode parent)."""

    def __init__(self, hosts: str, parent: str, peers: list[str], rootdir: str | os.PathLike[str] | None = None
                 ) -> None:
        self.hosts = hosts
        self.lay = Layout(parent)
        self.peers = list(peers)
        self.rootdir = Path(rootdir) if rootdir is not None else None
        self.lengths: dict[str, int] = {}
        self.wal_files: dict[str, Path] = {}
        self.servers: dict[str, RegionServerSim] = {}
        from kazoo.client import KazooClient

        self.admin = KazooClient(hosts=hosts, timeout=10)
        self.admin.start(timeout=15)
        for p in (self.lay.rs, self.lay.queues, self.lay.peers):
            self.admin.ensure_path(p)

    def add_server(self, host: str, port: int = 16020) -> RegionServerSim:
        rs = RegionServerSim(self, f"{host},{port},{_ts()}")
        self.servers[rs.name] = rs
        return rs.start()

    def wal_length(self, server: str, wal: str) -> int | None:
        return self.lengths.get(wal)

    def create_table(self, namespace: str, table: str, families: dict[str, int]) -> Path:
        """Write the table's descriptor (families -> REPLICATION_SCOPE) as HBase does under rootdir/data."""
        from dr_toolkit.hbase.tabledesc import encode_tabledesc, tabledesc_path

        assert self.rootdir is not None, "create_table needs a rootdir"
        path = Path(tabledesc_path(str(self.rootdir), namespace, table))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_tabledesc(namespace, table, families))
        return path

    def _append(self, wal: str, nbytes: int) -> None:
        """The file first, then the length the shipper reads up to (it never ships past the file)."""
        f = self.wal_files.get(wal)
        if f is not None:
            with f.open("ab") as out:
                out.write(os.urandom(nbytes) if nbytes < 1 << 16 else b"\0" * nbytes)
        self.lengths[wal] = self.lengths.get(wal, 0) + nbytes

    def _archive_if_unused(self, server: str, wal: str) -> None:
        """HBase moves a WAL to oldWALs once it was rolled past and no replication queue needs it."""
        f = self.wal_files.get(wal)
        rs = self.servers.get(server)
        if f is None or (rs is not None and rs.current_wal == wal) or not f.exists():
            return
        for q in self.admin.get_children(f"{self.lay.queues}/{server}"):
            if q != "lock" and self.admin.exists(f"{self.lay.queues}/{server}/{q}/{wal}"):
                return
        assert self.rootdir is not None
        old = self.rootdir / "oldWALs"
        old.mkdir(parents=True, exist_ok=True)
        f.rename(old / wal)
        self.wal_files[wal] = old / wal

    def close(self) -> None:
        for rs in self.servers.values():
            rs.stop_session()
        self.admin.stop()
        self.admin.close()


class RegionServerSim:
    def __init__(self, cluster: SimCluster, name: str) -> None:
        self.c = cluster
        self.name = name
        self.session: KazooClient | None = None
        self.current_wal: str | None = None

    @property
    def zk(self) -> KazooClient:
        return self.c.admin

    @property
    def znode(self) -> str:
        return f"{self.c.lay.queues}/{self.name}"

    def start(self) -> RegionServerSim:
        from kazoo.client import KazooClient

        self.session = KazooClient(hosts=self.c.hosts, timeout=10)
        self.session.start(timeout=15)
        self.session.create(f"{self.c.lay.rs}/{self.name}", b"", ephemeral=True)
        for peer in self.c.peers:
            self.zk.ensure_path(f"{self.znode}/{peer}")
        self.roll()
        return self

    # -- writing
    def roll(self) -> str:
        """Start a new WAL; it enters every normal queue before any edit is appended to it."""
        host, port, _ = self.name.split(",")
        wal = f"{host}%2C{port}%2C{self.name.split(',')[2]}.{_ts()}"
        if self.c.rootdir is not None:
            f = self.c.rootdir / "WALs" / self.name / wal
            f.parent.mkdir(parents=True, exist_ok=True)
            f.touch()
            self.c.wal_files[wal] = f
        for peer in self.c.peers:
            self.zk.create(f"{self.znode}/{peer}/{wal}", b"")
        self.c.lengths[wal] = 0
        previous, self.current_wal = self.current_wal, wal
        if previous is not None:
            self.c._archive_if_unused(self.name, previous)
        return wal

    def write(self, nbytes: int) -> None:
        """Append ``nbytes`` of edits to the current WAL (the file grows when the cluster has a rootdir)."""
        assert self.current_wal is not None
        self.c._append(self.current_wal, nbytes)

    # -- shipping
    def queues(self) -> list[str]:
        return [q for q in self.zk.get_children(self.znode) if q != "lock"]

    def ship(self, queue: str, budget: int | None = None) -> int:
        """Ship up to ``budget`` bytes (all when None) from ``queue``; return bytes shipped."""
        qpath = f"{self.znode}/{queue}"
        recovered = "-" in queue
        shipped = 0
        while True:
            wals = sorted(self.zk.get_children(qpath), key=lambda w: int(w.rsplit(".", 1)[1]))
            if not wals:
                if recovered:
                    self.zk.delete(qpath)
                return shipped
            wal = wals[0]
            pos = decode_position(self.zk.get(f"{qpath}/{wal}")[0])
            length = self.c.lengths[wal]
            step = length - pos if budget is None else min(length - pos, budget - shipped)
            pos += step
            shipped += step
            finished = pos >= length
            if finished and (len(wals) > 1 or recovered):
                self.zk.delete(f"{qpath}/{wal}")
                if not recovered:
                    self.c._archive_if_unused(self.name, wal)
                continue
            if step:
                self.zk.set(f"{qpath}/{wal}", encode_position(pos))
            if not finished or budget is not None and shipped >= budget or len(wals) == 1:
                return shipped

    def drain(self) -> None:
        for q in self.queues():
            self.ship(q)

    # -- failure
    def stop_session(self) -> None:
        if self.session is not None:
            try:
                self.session.stop()
                self.session.close()
            except Exception:  # noqa: BLE001 - the server may be down in a fault test
                pass
            self.session = None

    def die(self) -> None:
        """Lose the ZooKeeper session: the ephemeral /hbase/rs znode goes, the queues stay."""
        self.stop_session()

    def claim(self, dead: RegionServerSim | str, *, finish: bool = True) -> list[str]:
        """Race for ``lock`` on the dead server's queues; copy them under this server.

        ``finish=False`` stops after copying (the dead server's znodes and lock stay), as in
        the reference's "right before 1.1.1.3 is able to clean up the old znodes" picture.
        Returns the new (recovered) queue ids; [] when another server holds the lock.
        """
        from kazoo.exceptions import NodeExistsError

        dead_name = dead if isinstance(dead, str) else dead.name
        dz = f"{self.c.lay.queues}/{dead_name}"
        try:
            self.zk.create(f"{dz}/lock", encode_lock(self.znode))
        except NodeExistsError:
            return []
        new: list[str] = []
        for q in [q for q in self.zk.get_children(dz) if q != "lock"]:
            nq = f"{q}-{dead_name}"
            tx = self.zk.transaction()
            tx.create(f"{self.znode}/{nq}", b"")
            for wal in self.zk.get_children(f"{dz}/{q}"):
                tx.create(f"{self.znode}/{nq}/{wal}", self.zk.get(f"{dz}/{q}/{wal}")[0])
            tx.commit()
            new.append(nq)
        if finish:
            self.zk.delete(dz, recursive=True)
        return new


def populate(zk: Any, parent: str, servers: int, peers: int, wals: int, *, dead_every: int = 0) -> None:
    """Write a large queue tree quickly (benchmarks): pipelined async creates, no sessions per server."""
    lay = Layout(parent)
    for base in (lay.rs, lay.queues, lay.peers):
        zk.ensure_path(base)
    from kazoo.exceptions import NodeExistsError, NoNodeError

    pending: list[Any] = []

    def flush() -> None:
        for r in pending:
            try:
                r.get(timeout=30)
            except (NodeExistsError, NoNodeError):
                pass
        pending.clear()

    names = [f"rs{i:04d}.example.com,16020,{1700000000000 + i}" for i in range(servers)]
    for i, n in enumerate(names):
        if not (dead_every and i % dead_every == 0):
            pending.append(zk.create_async(f"{lay.rs}/{n}", b""))
        pending.append(zk.create_async(f"{lay.queues}/{n}", b""))
    flush()
    for n in names:
        for p in range(1, peers + 1):
            pending.append(zk.create_async(f"{lay.queues}/{n}/{p}", b""))
    flush()
    for n in names:
        host = n.split(",")[0]
        for p in range(1, peers + 1):
            for w in range(wals):
                wal_name = f"{host}%2C16020%2C{n.split(',')[2]}.{1700000000000 + w}"
                pending.append(zk.create_async(f"{lay.queues}/{n}/{p}/{wal_name}", encode_position(w * 1000)))
            if len(pending) > 5000:
                flush()
    flush()
