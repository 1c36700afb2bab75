"""The queue reader's consistency (issue 20 #4): the queues are read in several ZooKeeper rounds,
and HBase may claim a dead server's queue between two of them — a multi-op that deletes it under
the dead server and creates it, positions and all, under a live one. Read naively, the dead queue
is listed but its WALs are gone (read as drained) and the claimed one is never seen: a false
"drain proven". The reader re-reads the structure and retries until it is stable.

ZooKeeper is an in-memory tree here: what is tested is our reader's handling of a change between
its rounds, which a real server cannot be made to produce on cue (the real claim is exercised by
tests/integration/test_hbase_status.py with a killed region server)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dr_toolkit.hbase.encoding import encode_position, encode_state
from dr_toolkit.hbase.status import QueuesChanging, replication_status

P = "/hbase"
DEAD, LIVE = "dead,16020,1", "live,16020,2"
WAL = "dead%2C16020%2C1.1700000000000"


class TreeZk:
    """get_children_many / get_many over a dict of znodes; ``before_call[n]`` mutates the tree just
    before the n-th read call (1-based) is answered."""

    quorum = "tree:2181"

    def __init__(self, tree: dict[str, bytes], before_call: dict[int, Any] | None = None) -> None:
        self.tree = tree
        self.calls = 0
        self.before_call = before_call or {}

    def _tick(self) -> None:
        self.calls += 1
        if self.calls in self.before_call:
            self.before_call[self.calls](self.tree)

    def _children(self, p: str) -> list[str] | None:
        if p not in self.tree:
            return None
        return sorted({k[len(p) + 1:].split("/")[0] for k in self.tree if k.startswith(p + "/")})

    def get_children_many(self, paths: Sequence[str]) -> list[list[str] | None]:
        self._tick()
        return [self._children(p) for p in paths]

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None]:
        self._tick()
        return [(self.tree[p], None) if p in self.tree else None for p in paths]


def tree() -> dict[str, bytes]:
    q = f"{P}/replication/rs"
    return {P: b"", f"{P}/rs": b"", f"{P}/rs/{LIVE}": b"", f"{P}/replication": b"",
            f"{P}/replication/peers": b"", f"{P}/replication/peers/1": b"",
            f"{P}/replication/peers/1/peer-state": encode_state(True), q: b"", f"{q}/{LIVE}": b"",
            f"{q}/{DEAD}": b"", f"{q}/{DEAD}/1": b"", f"{q}/{DEAD}/1/{WAL}": encode_position(10)}


def claim(t: dict[str, bytes]) -> None:
    """HBase's claim of the dead server's queue 1 by the live server (one multi-op)."""
    q = f"{P}/replication/rs"
    pos = t.pop(f"{q}/{DEAD}/1/{WAL}")
    del t[f"{q}/{DEAD}/1"]
    del t[f"{q}/{DEAD}"]
    t[f"{q}/{LIVE}/1-{DEAD}"] = b""
    t[f"{q}/{LIVE}/1-{DEAD}/{WAL}"] = pos


def wal_length(server: str, wal: str, position: int) -> int:
    return 4096  # the WAL holds edits past every position in this tree


@pytest.mark.parametrize("call", [2, 3, 4, 5])
def test_a_queue_claimed_between_the_reader_s_rounds_is_never_read_as_drained(call: int) -> None:
    st = replication_status(TreeZk(tree(), {call: claim}), P, peers=["1"], wal_length=wal_length)
    assert not st.caught_up, st
    assert [(q.server, q.queue_id, q.position) for q in st.queues if q.wals] in (
        [(DEAD, "1", 10)], [(LIVE, f"1-{DEAD}", 10)]), st.queues


def test_queues_that_never_hold_still_are_no_answer() -> None:
    counter = {"n": 0}

    def roll(t: dict[str, bytes]) -> None:  # a new WAL queued before every read: never the same twice
        counter["n"] += 1
        q = f"{P}/replication/rs/{LIVE}/1"
        t.setdefault(q, b"")
        t[f"{q}/live%2C16020%2C2.{1700000000000 + counter['n']}"] = encode_position(0)

    with pytest.raises(QueuesChanging, match="changed while they were read"):
        replication_status(TreeZk(tree(), dict.fromkeys(range(1, 200), roll)), P, peers=["1"], wal_length=wal_length)
