"""The queue reader's consistency (issue 20 #4), on the real ZooKeeper: the queues are read in
several ZooKeeper rounds, and HBase may claim a dead server's queue between two of them — one
multi-op that deletes it under the dead server and creates it, positions and all, under a live one.
Read naively, the dead queue is listed but its WALs are gone (read as drained) and the claimed one
is never seen: a false "drain proven". The reader re-reads the structure and retries until it is
stable.

The znodes are HBase's replication layout, written into a real ZooKeeper; the claim is a real
ZooKeeper transaction, committed just before the reader's n-th read round is sent (a real server
cannot be made to claim on cue; HBase's own claim is exercised by
tests/integration/test_hbase_status.py with a killed region server)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from dr_toolkit.hbase.encoding import encode_position, encode_state
from dr_toolkit.hbase.status import QueuesChanging, replication_status

pytestmark = pytest.mark.integration

DEAD, LIVE = "dead,16020,1", "live,16020,2"
WAL = "dead%2C16020%2C1.1700000000000"


class Rounds:
    """Our ZooKeeper client, with ``before[n]`` run (on the real server) just before the n-th read
    round (1-based) is sent."""

    def __init__(self, zk: Any, before: dict[int, Callable[[], None]]) -> None:
        self.zk, self.before, self.calls = zk, before, 0
        self.quorum = zk.quorum

    def _tick(self) -> None:
        self.calls += 1
        if self.calls in self.before:
            self.before[self.calls]()

    def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        self._tick()
        return self.zk.get_children_many(paths)

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None]:
        self._tick()
        return self.zk.get_many(paths)


def layout(zk: Any, p: str) -> None:
    q = f"{p}/replication/rs"
    for path, value in [(p, b""), (f"{p}/rs", b""), (f"{p}/rs/{LIVE}", b""), (f"{p}/replication", b""),
                        (f"{p}/replication/peers", b""), (f"{p}/replication/peers/1", b""),
                        (f"{p}/replication/peers/1/peer-state", encode_state(True)), (q, b""), (f"{q}/{LIVE}", b""),
                        (f"{q}/{DEAD}", b""), (f"{q}/{DEAD}/1", b""), (f"{q}/{DEAD}/1/{WAL}", encode_position(10))]:
        zk.create(path, value)


def claimer(zk: Any, p: str) -> Callable[[], None]:
    """HBase's claim of the dead server's queue 1 by the live server: one ZooKeeper transaction."""
    def claim() -> None:
        q = f"{p}/replication/rs"
        pos, _ = zk.get(f"{q}/{DEAD}/1/{WAL}")
        (zk.transaction().delete(f"{q}/{DEAD}/1/{WAL}").delete(f"{q}/{DEAD}/1").delete(f"{q}/{DEAD}")
         .create(f"{q}/{LIVE}/1-{DEAD}").create(f"{q}/{LIVE}/1-{DEAD}/{WAL}", pos).commit())
    return claim


def wal_length(server: str, wal: str, position: int) -> int:
    return 4096  # the WAL holds edits past every position here


@pytest.mark.parametrize("call", [2, 3, 4, 5])
def test_a_queue_claimed_between_the_reader_s_rounds_is_never_read_as_drained(zkc, hbase_parent, call: int) -> None:
    layout(zkc, hbase_parent)
    st = replication_status(Rounds(zkc, {call: claimer(zkc, hbase_parent)}), hbase_parent, peers=["1"],
                            wal_length=wal_length)
    assert not st.caught_up, st
    assert [(q.server, q.queue_id, q.position) for q in st.queues if q.wals] in (
        [(DEAD, "1", 10)], [(LIVE, f"1-{DEAD}", 10)]), st.queues
    assert not zkc.exists(f"{hbase_parent}/replication/rs/{DEAD}")  # the claim did happen, on the server


def test_queues_that_never_hold_still_are_no_answer(zkc, hbase_parent) -> None:
    layout(zkc, hbase_parent)
    counter = {"n": 0}
    q = f"{hbase_parent}/replication/rs/{LIVE}/1"

    def roll() -> None:  # a new WAL queued before every read round: never the same twice
        counter["n"] += 1
        if not zkc.exists(q):
            zkc.create(q)
        zkc.create(f"{q}/live%2C16020%2C2.{1700000000000 + counter['n']}", encode_position(0))

    with pytest.raises(QueuesChanging, match="changed while they were read"):
        replication_status(Rounds(zkc, dict.fromkeys(range(1, 200), roll)), hbase_parent, peers=["1"],
                           wal_length=wal_length)
