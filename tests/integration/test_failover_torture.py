"""The false-GO torture test: random interleavings on the real servers, the gate checked again and
again, and after every check its claims checked against what cold really holds.

The invariant (docs/design.md §1.5, "Every path to GO"): every safe time a signal states is a
time T such that every write hot acknowledged before T is on cold. The recovery point is the
minimum of them and GO needs one from every signal, so checking each stated safe time checks
every GO (and every recovery point a NO_GO states for an unplanned failover).

The world: real HDFS (hot HA pair → cold, a replication policy with ``--delete``), real Kafka
(hot → cold by a record copier the test drives), real HBase (hot → cold by HBase's own
replication, peer ``1``). A writer thread writes to hot while the main thread, step by step and
chosen by a seeded random generator, moves the copies forward (mirror part of a partition, enable
or disable the HBase peer, roll a WAL, kill a region server so its queue is claimed, run the HDFS
copy), toggles the writer, fences hot (writes go on: the fence binds the toolkit's writers, not
hot's clients), and checks the gate. Every write is logged with a time taken after hot
acknowledged it; after each check the test reads cold and asserts, per signal with a safe time T,
that every write logged before T is there:

- Kafka: the record's hot offset is below what the copier had copied (cold only changes when the
  test copies, never during a check);
- HBase: cold holds every row of every put acknowledged before T (read after the check: cold only
  gains rows, so a row missing then was missing at the check);
- HDFS: every file created before T is on cold at a path it had at T or later, holding at least
  the bytes appended before T, and only bytes hot wrote (read after the check; the copy only runs
  between checks).

At the end the writer stops and everything drains: the gate must then say GO (a torture that never
saw GO proved nothing), and at least one safe time per component must have been checked.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.failover.gate import check
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import write_topology

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

SEED = int(os.environ.get("DRT_TORTURE_SEED", "20261125"))
STEPS = int(os.environ.get("DRT_TORTURE_STEPS", "44"))
PARTITIONS = 2


def content(fid: int, n: int) -> bytes:
    """The bytes of logical file ``fid`` up to length ``n`` (appends extend the same stream)."""
    unit = f"<file {fid}>".encode()
    return (unit * (n // len(unit) + 1))[:n]


@dataclass
class FileLog:
    fid: int
    created: float  # acknowledged by
    paths: list[tuple[str, float, float]] = field(default_factory=list)  # (path, rename began, acknowledged by)
    lengths: list[tuple[int, float]] = field(default_factory=list)  # (length, acknowledged by)


@dataclass
class Acked:
    """What hot acknowledged, each with a time taken after the acknowledgement."""

    kafka: list[tuple[float, int, int]] = field(default_factory=list)  # (acked by, partition, offset)
    hbase: list[tuple[float, int, int]] = field(default_factory=list)  # (acked by, first row, rows)
    files: dict[int, FileLog] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Writer(threading.Thread):
    """Writes to hot while ``on`` is set: Kafka records, HBase rows, HDFS creates, appends, renames
    of whole directories, and hflushes into a file kept open (``logs/``, never renamed)."""

    def __init__(self, rng: random.Random, acked: Acked, *, kafka: str, topic: str, hbase: Any, hdfs: Any) -> None:
        super().__init__(daemon=True, name="torture-writer")
        from confluent_kafka import Producer

        self.rng, self.acked, self.topic, self.hbase, self.hdfs = rng, acked, topic, hbase, hdfs
        self.producer = Producer({"bootstrap.servers": kafka, "linger.ms": 0, "acks": "all",
                                  "enable.idempotence": False})
        self.on = threading.Event()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.writes = 0
        self.next_row = 50_000_000
        self.next_fid = 0
        self.dirs: dict[str, list[int]] = {}  # data/<dir> -> fids in it
        self.next_dir = 0
        self.open_log: str | None = None  # the file held open, hflushed into
        self.open_fid = -1

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if not self.on.wait(0.05):
                    continue
                self.one()
                self.writes += 1
                self.stop.wait(self.rng.choice([0, 0, 0.02, 0.05, 0.1]))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def one(self) -> None:
        op = self.rng.choices(["kafka", "hbase", "create", "append", "rename", "hflush"], [5, 4, 3, 2, 1, 1])[0]
        if op == "kafka":
            self.kafka(self.rng.randint(1, 4))
        elif op == "hbase":
            n = self.rng.randint(1, 8)
            first = self.next_row
            self.next_row += n
            self.hbase.put(first, n)
            with self.acked.lock:
                self.acked.hbase.append((time.time(), first, n))
        elif op == "create" or not self.dirs:
            self.create()
        elif op == "append":
            self.append()
        elif op == "rename":
            self.rename()
        else:
            self.hflush()

    def kafka(self, n: int) -> None:
        got: list[tuple[int, int]] = []

        def done(err: Any, msg: Any) -> None:
            if err is None:
                got.append((msg.partition(), msg.offset()))

        for _ in range(n):
            self.producer.produce(self.topic, value=os.urandom(8), key=b"k",
                                  partition=self.rng.randrange(PARTITIONS), on_delivery=done)
        assert self.producer.flush(30) == 0, "hot Kafka did not acknowledge the records"
        at = time.time()
        with self.acked.lock:
            self.acked.kafka.extend((at, p, o) for p, o in got)

    def create(self) -> None:
        if not self.dirs or self.rng.random() < 0.3:
            d = f"d{self.next_dir}"  # a new directory, made by the file's creation
            self.dirs[d] = []
            self.next_dir += 1
        else:
            d = self.rng.choice(sorted(self.dirs))
        fid = self.next_fid
        self.next_fid += 1
        n = self.rng.randint(1, 3000)
        began = time.time()
        self.hdfs.write(f"/data/{d}/f{fid}", content(fid, n))
        at = time.time()
        self.dirs[d].append(fid)
        with self.acked.lock:
            self.acked.files[fid] = FileLog(fid, at, [(f"{d}/f{fid}", began, at)], [(n, at)])

    def append(self) -> None:
        fids = [f for fs in self.dirs.values() for f in fs]
        if not fids:
            return
        fid = self.rng.choice(fids)
        log = self.acked.files[fid]
        old = log.lengths[-1][0]
        n = old + self.rng.randint(1, 2000)
        self.hdfs.append(f"/data/{log.paths[-1][0]}", content(fid, n)[old:])
        at = time.time()
        with self.acked.lock:
            log.lengths.append((n, at))

    def rename(self) -> None:
        d = self.rng.choice(sorted(self.dirs))
        new = f"d{self.next_dir}"
        self.next_dir += 1
        began = time.time()
        self.hdfs.rename(f"/data/{d}", f"/data/{new}")
        at = time.time()
        fids = self.dirs.pop(d)
        self.dirs[new] = fids
        with self.acked.lock:
            for fid in fids:
                self.acked.files[fid].paths.append((f"{new}/f{fid}", began, at))

    def hflush(self) -> None:
        if self.open_log is None:
            fid = self.next_fid
            self.next_fid += 1
            self.open_log, self.open_fid = f"logs/f{fid}", fid
            n = self.rng.randint(1, 500)
            began = time.time()
            self.hdfs.open_for_write(f"/data/{self.open_log}", content(fid, n))
            at = time.time()
            with self.acked.lock:
                self.acked.files[fid] = FileLog(fid, at, [(self.open_log, began, at)], [(n, at)])
            return
        log = self.acked.files[self.open_fid]
        old = log.lengths[-1][0]
        if self.rng.random() < 0.3:
            self.hdfs.close_file(f"/data/{self.open_log}")
            self.open_log = None
            return
        n = old + self.rng.randint(1, 700)
        self.hdfs.hflush(f"/data/{self.open_log}", content(log.fid, n)[old:])
        at = time.time()
        with self.acked.lock:
            log.lengths.append((n, at))

    def close(self) -> None:
        self.on.clear()
        self.stop.set()
        self.join(60)
        if self.open_log is not None:
            self.hdfs.close_file(f"/data/{self.open_log}")
            self.open_log = None
        self.producer.flush(10)


def missing_files(acked: Acked, before: float, cold: dict[str, bytes]) -> list[str]:
    """Files hot acknowledged before ``before`` that cold does not hold as the invariant requires."""
    bad: list[str] = []
    with acked.lock:
        logs = list(acked.files.values())
    for log in logs:
        if log.created >= before:
            continue
        need = max(n for n, at in log.lengths if at < before)
        done = [i for i, (_p, _b, at) in enumerate(log.paths) if at < before]
        ok_paths = [p for p, _b, _a in log.paths[done[-1]:]]  # where it was at T, or moved to since
        held = [(p, cold[p]) for p in ok_paths if p in cold]
        if not any(len(b) >= need and b == content(log.fid, len(b)) for _p, b in held):
            bad.append(f"file {log.fid} (paths {ok_paths}, {need} bytes acknowledged before T): cold holds "
                       + (", ".join(f"{p}={len(b)} bytes" + ("" if b == content(log.fid, len(b)) else " (other bytes)")
                                    for p, b in held) or "nothing"))
    return bad


def test_no_stated_safe_time_is_ever_ahead_of_what_cold_holds(
        tmp_path, zk_server, kafka_hot, kafka_cold, hbase_worlds, hdfs_hot, hdfs_cold, hot_dir, cold_dir) -> None:
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.zk.fencing import open_fence
    from drt_demo.mirror import mirror
    from tests.support.fixtures_kafka import create_topic, unique

    rng = random.Random(SEED)
    topic = unique("torture")
    for addr in (kafka_hot.address, kafka_cold.address):
        create_topic(addr, topic, PARTITIONS)
    hot_dir.mkdir("/data")
    hot_dir.mkdir("/data/logs")
    cold_dir.mkdir("/data")
    path = write_topology(
        tmp_path, zk=zk_server.address, kafka_hot=kafka_hot.address, kafka_cold=kafka_cold.address,
        hbase_clusters=hbase_worlds.clusters, hbase=[{"name": "hb", "peer_id": "1", "tables": ["default:orders"]}],
        kafka=[{"name": "stream", "topics": [topic], "groups": []}],
        hdfs=[{"name": "wh", "source": f"hdfs://hot{hot_dir.p('/data')}", "targets": [f"hdfs://cold{cold_dir.p('/data')}"],
               "options": {"delete": True}}],
        hot_extra={"kafka": {"bootstrap_servers": kafka_hot.address, "timeout_s": 5, "max_clock_skew_s": 0},
                   "hdfs": {"namenodes": hdfs_hot.namenodes, "user": "hdfs"}},
        cold_extra={"kafka": {"bootstrap_servers": kafka_cold.address, "timeout_s": 5},
                    "hdfs": {"namenodes": hdfs_cold.namenodes, "user": "hdfs"}},
        failover={"max_lag_s": 3600})
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    world = hbase_worlds(topo)  # peer 1 enabled, cold holds every row hot has, drain proven
    hot, cold = world.hot, world.cold
    acked = Acked()
    mirrored = dict.fromkeys(range(PARTITIONS), 0)  # next hot offset to copy; cold holds [0, mirrored)
    writer = Writer(random.Random(SEED + 1), acked, kafka=kafka_hot.address, topic=topic, hbase=hot, hdfs=hot_dir)
    checked: dict[str, int] = {"hdfs": 0, "kafka": 0, "hbase": 0}
    log: list[str] = []
    killed = False
    epoch: int | None = None  # the fence's epoch once hot is fenced (the copy then runs under it)

    def verify(res: Any, step: int) -> None:
        cold_tree = cold_dir.tree("/data")
        for sig in res.signals:
            if sig.safe_time is None:
                continue
            t = sig.safe_time
            if sig.component == "kafka":
                with acked.lock:
                    late = [(p, o) for at, p, o in acked.kafka if at < t and o >= mirrored[p]]
                assert not late, (f"step {step}: kafka {sig.name} safe time {t} ({sig.basis}) but hot records "
                                  f"{late[:5]} acknowledged before it are not on cold (copied up to {mirrored})")
            elif sig.component == "hbase":
                with acked.lock:
                    puts = [(first, n) for at, first, n in acked.hbase if at < t]
                for first, n in puts:
                    got = cold.count_range(first, n)
                    assert got == n, (f"step {step}: hbase {sig.name} safe time {t} ({sig.basis}) but cold holds "
                                      f"{got} of the {n} rows from {first} put before it")
            elif sig.component == "hdfs":
                bad = missing_files(acked, t, cold_tree)
                assert not bad, f"step {step}: hdfs {sig.name} safe time {t} ({sig.basis}) but " + "; ".join(bad[:5])
            checked[sig.component] = checked.get(sig.component, 0) + 1

    writer.start()
    try:
        for step in range(STEPS):
            op = rng.choices(["write-on", "write-off", "mirror", "peer", "roll", "copy", "check", "kill"],
                             [3, 1, 3, 2, 1, 3, 6, 1])[0]
            if op == "kill" and (killed or step < STEPS // 3):
                op = "check"
            log.append(op)
            if op == "write-on":
                writer.on.set()
            elif op == "write-off":
                writer.on.clear()
            elif op == "mirror":
                for p in range(PARTITIONS):
                    got = mirror(kafka_hot.address, kafka_cold.address, topic, p, mirrored[p],
                                 None if rng.random() < 0.5 else mirrored[p] + rng.randint(0, 6))
                    mirrored[p] = got.next_offset
            elif op == "peer":
                (hot.disable_peer if hot.list_peers()["1"]["enabled"] else hot.enable_peer)("1")
            elif op == "roll":
                hot.roll_wal()
            elif op == "kill":  # the region server dies: its queue waits for a claim, then ships
                killed = True
                hot.kill_region_server(0)
                hot.start_region_server()
            elif op == "copy":
                replicate_policy(topo, "wh", ledger, fence_epoch=epoch, access=Access.from_env())
            else:
                if epoch is None and rng.random() < 0.15:
                    with open_fence(topo, access=Access.from_env()) as fence:  # fenced: hot's own clients keep writing
                        epoch = fence.bump(fenced_cluster=topo.hot_name, by="torture").epoch
                    log[-1] = "fence"
                res = check(topo, ledger, access=Access.from_env())
                verify(res, step)
                log[-1] += f" check:{res.verdict}"
            assert not writer.errors, writer.errors
    finally:
        writer.close()
    assert not writer.errors, writer.errors
    assert writer.writes > 0, log

    # drain everything: the gate must come to GO, and that GO must hold too
    if not hot.list_peers()["1"]["enabled"]:
        hot.enable_peer("1")
    for p in range(PARTITIONS):
        mirrored[p] = mirror(kafka_hot.address, kafka_cold.address, topic, p, mirrored[p]).next_offset
    replicate_policy(topo, "wh", ledger, fence_epoch=epoch, access=Access.from_env())
    cold.wait_rows(hot.count(), timeout=180)
    deadline = time.monotonic() + 180
    while True:
        res = check(topo, ledger, access=Access.from_env())
        verify(res, STEPS)
        if res.verdict == "GO" or time.monotonic() > deadline:
            break
        time.sleep(1)
    print(f"torture seed {SEED}: {writer.writes} writes; safe times checked {checked}; steps {log}")
    assert res.verdict == "GO", (res.reasons, log)
    assert all(checked[c] for c in ("hdfs", "kafka", "hbase")), (checked, log)


def test_a_run_that_copied_an_open_file_states_no_new_safe_time(tmp_path, hdfs_hot, hdfs_cold, hot_dir, cold_dir
                                                                 ) -> None:
    """Found by the torture test: bytes a writer hflushed into an open file before a run's listing lie
    past the NameNode's length, which is all the run copies; that run's listing time is no safe time."""
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.copy.signals import hdfs_signals

    hot_dir.write("/data/a", b"a" * 10)
    cold_dir.mkdir("/data")
    path = write_topology(
        tmp_path, zk=None,
        hdfs=[{"name": "wh", "source": f"hdfs://hot{hot_dir.p('/data')}", "targets": [f"hdfs://cold{cold_dir.p('/data')}"]}],
        hot_extra={"hdfs": {"namenodes": hdfs_hot.namenodes, "user": "hdfs"}},
        cold_extra={"hdfs": {"namenodes": hdfs_cold.namenodes, "user": "hdfs"}})
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    (first,) = replicate_policy(topo, "wh", ledger, access=Access.from_env())
    assert first.ok and first.files_open == 0
    hot_dir.open_for_write("/data/log", b"x" * 300)  # the NameNode learns 300 (first hflush of the block)
    hot_dir.hflush("/data/log", b"y" * 600)  # readers see 900; the NameNode still says 300
    acked = time.time()
    time.sleep(0.05)
    (second,) = replicate_policy(topo, "wh", ledger, access=Access.from_env())
    assert second.ok and second.files_open == 1 and cold_dir.stat("/data/log") is None  # open: not placed
    (sig,) = hdfs_signals(topo, ledger, Access.from_env(), time.time())
    # the hflushed bytes were acknowledged before the second run's listing, and cold lacks them
    assert sig.safe_time is None or sig.safe_time < acked, (sig.safe_time, acked, sig.basis)
    assert sig.safe_time == first.source_time, sig.basis
    hot_dir.close_file("/data/log")
    (third,) = replicate_policy(topo, "wh", ledger, access=Access.from_env())
    assert third.ok and third.files_open == 0
    (sig,) = hdfs_signals(topo, ledger, Access.from_env(), time.time())
    assert sig.safe_time == third.source_time and sig.caught_up, (sig.reason, sig.basis)
