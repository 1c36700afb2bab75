"""The ledger's Kafka reads and writes at scale (issue 42), on SQLite and a real PostgreSQL 15:

- ``Ledger.latest_checkpoints`` finds each group's newest checkpoint by one descent of the index
  ``kafka_checkpoints_newest`` — its answer equals a scan of the whole history (random histories,
  ties on ``taken_at`` broken by ``checkpoint_id``), before and after the retention prunes it;
- ``holdings.record_proven`` rewrites only the proofs that changed: a partition whose proof is
  the one its row holds is named in one confirmation row with the check's safe time, never
  rewritten; readers (``holdings.proven_marks``) see that safe time, only ever forward (a
  partition the next check does not confirm keeps it in its own row), and the rows outlive
  ``Ledger.prune`` (watermarks are never pruned).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from sqlalchemy import text

from dr_toolkit.kafka.holdings import COMPONENT, CONFIRMED, PROVEN, proven_marks, record_proven
from dr_toolkit.kafka.rows import LagReport, LagRow
from dr_toolkit.ledger import Ledger

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path: Any) -> Ledger:
    if request.param == "sqlite":
        return Ledger.open(f"sqlite:///{tmp_path}/ledger.db", from_env=False)
    pg = request.getfixturevalue("postgres")
    return Ledger.open(pg.create_database(f"ledger_{uuid.uuid4().hex[:8]}"), from_env=False)


def _scan(ledger: Ledger, groups: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The oracle: every row read, each group's newest checkpoint (taken_at, then checkpoint_id) kept."""
    rows = ledger._query("SELECT * FROM kafka_checkpoints")
    newest: dict[str, tuple[float, str]] = {}
    for r in rows:
        key = (float(r["taken_at"]), str(r["checkpoint_id"]))
        newest[r["group_id"]] = max(newest.get(r["group_id"], key), key)
    out: dict[str, list[dict[str, Any]]] = {g: [] for g in groups}
    for r in rows:
        if r["group_id"] in out and (float(r["taken_at"]), str(r["checkpoint_id"])) == newest[r["group_id"]]:
            out[r["group_id"]].append(r)
    for g in out:
        out[g].sort(key=lambda r: (r["topic"], r["partition_id"]))
    return out


def test_latest_checkpoints_equal_a_scan_of_random_histories(ledger: Ledger) -> None:
    rng = random.Random(42)
    groups = [f"g{i:03d}" for i in range(60)]
    rows = []
    for g in groups[:-5]:  # the last 5 groups never checkpointed
        for _ in range(rng.randrange(1, 9)):
            cid = f"ckpt-{rng.randrange(10**6):06d}"
            at = float(rng.choice([100, 200, 300, 300, 400]))  # ties: the checkpoint id decides
            for t in rng.sample(["a", "b", "c"], rng.randrange(1, 4)):
                for p in range(rng.randrange(1, 4)):
                    rows.append({"checkpoint_id": cid, "group_id": g, "topic": t, "partition_id": p,
                                 "committed_offset": rng.choice([None, rng.randrange(100)]), "taken_at": at})
    uniq = {(r["checkpoint_id"], r["group_id"], r["topic"], r["partition_id"]): r for r in rows}
    with ledger._tx() as conn:
        conn.execute(text("INSERT INTO kafka_checkpoints (checkpoint_id, group_id, topic, partition_id, "
                          "committed_offset, taken_at) VALUES (:checkpoint_id, :group_id, :topic, :partition_id, "
                          ":committed_offset, :taken_at)"), list(uniq.values()))
    asked = [*groups, "nobody"]
    want = _scan(ledger, asked)
    assert ledger.latest_checkpoints(asked, chunk=7) == want
    assert ledger.latest_checkpoints(asked) == want
    assert all(ledger.latest_checkpoint(g) == want[g] for g in asked)
    from dr_toolkit.topology import Ledger as LedgerSettings

    ledger.prune(LedgerSettings.Retention(checkpoints_days=0.001, checkpoints_keep_last=1), now=10_000.0)
    assert ledger.latest_checkpoints(asked, chunk=7) == want  # the newest of each group kept, whole
    assert len(ledger._query("SELECT DISTINCT group_id, checkpoint_id FROM kafka_checkpoints")) == len(groups) - 5


def test_the_newest_checkpoint_is_one_index_descent(tmp_path: Any) -> None:
    """SQLite's plan: the group's newest checkpoint id through ``kafka_checkpoints_newest`` (a
    covering index search), its rows through the primary key — never a scan of the history."""
    ledger = Ledger.open(f"sqlite:///{tmp_path}/ledger.db", from_env=False)
    captured: list[str] = []
    real = ledger._query

    def spy(sql: str, **params: Any) -> list[dict[str, Any]]:
        captured.append(sql)
        return real(sql, **params)

    ledger._query = spy  # type: ignore[method-assign]
    ledger.latest_checkpoints(["g1", "g2"])
    with ledger._tx() as conn:
        plan = [str(r[-1]) for r in conn.execute(text("EXPLAIN QUERY PLAN " + captured[0]),
                                                 {"g0": "g1", "g1": "g2"})]
    assert any("kafka_checkpoints_newest" in p and p.startswith("SEARCH") for p in plan), plan
    assert not any(p.startswith("SCAN") and (" k" in p or " c" in p or "kafka_checkpoints" in p) for p in plan), plan


def _row(t: str, p: int, safe: float | None, cold_offset: int | None = 5, behind: int = 0,
         error: str | None = None) -> LagRow:
    proof = None if cold_offset is None else {"cold_offset": cold_offset, "timestamp": 1000 + cold_offset,
                                              "fingerprint": f"fp{cold_offset}", "hot_offset": cold_offset + 2}
    return LagRow(t, p, 10, 8, records_behind=behind, safe_time=safe, method="exact" if proof else "empty",
                  proof=proof, error=error)


def _check(ledger: Ledger, at: float, rows: list[LagRow], carried: set[tuple[str, int]] | None) -> None:
    record_proven(ledger, LagReport(at + 1, sorted({r.topic for r in rows}), rows, [], 120.0),
                  {r.topic: 4 for r in rows}, carried=carried)


def _rows(ledger: Ledger) -> dict[str, tuple[float, float]]:
    return {str(w["name"]): (float(w["watermark"]), float(w["updated_at"])) for w in ledger.watermarks(COMPONENT)}


def _safe(ledger: Ledger) -> dict[tuple[str, int], float]:
    marks = {str(w["name"]): w for w in ledger.watermarks(COMPONENT)}
    return {tp: float(w["watermark"]) for tp, w in proven_marks(marks).items()}


@pytest.mark.parametrize("told", [False, True], ids=["compared", "carried"])
def test_unchanged_proofs_are_confirmed_not_rewritten_and_stay_forward(ledger: Ledger, told: bool) -> None:
    """``told``: the lag says which proofs it carried (the gate's way: those rows are not read
    back); else every row is read and compared."""
    tps = [("t", p) for p in range(4)]
    _check(ledger, 100.0, [_row(t, p, 100.0, cold_offset=None if p == 3 else 5) for t, p in tps],
           set() if told else None)
    first = _rows(ledger)
    assert set(first) == {PROVEN.format(topic=t, partition=p) for t, p in tps}  # every proof written once

    # the same proofs at a later check: no partition's row rewritten, their safe time 200 through one row
    _check(ledger, 200.0, [_row(t, p, 200.0, cold_offset=None if p == 3 else 5) for t, p in tps],
           set(tps) if told else None)
    second = _rows(ledger)
    assert {n: v for n, v in second.items() if n != CONFIRMED} == first
    assert second[CONFIRMED][0] == 200.0
    assert _safe(ledger) == dict.fromkeys(tps, 200.0)
    # a row holding another proof than the one confirmed (a concurrent check wrote it) keeps its own time
    marks = {str(w["name"]): w for w in ledger.watermarks(COMPONENT)}
    other = {**marks[PROVEN.format(topic="t", partition=0)]["detail"], "cold_offset": 9}
    assert proven_marks({**marks, PROVEN.format(topic="t", partition=0): {"watermark": 150.0, "detail": other}}
                        )[("t", 0)]["watermark"] == 150.0

    # partition 0 proven by a newer record (rewritten), 1 unreadable, 2 behind now (safe time earlier),
    # 3 confirmed again: every safe time only ever forward, 1's and 2's kept in their own rows
    _check(ledger, 300.0, [_row("t", 0, 300.0, cold_offset=7), _row("t", 1, None, error="down"),
                           _row("t", 2, 150.0, behind=3), _row("t", 3, 300.0, cold_offset=None)],
           {("t", 3)} if told else None)
    third = _rows(ledger)
    assert _safe(ledger) == {("t", 0): 300.0, ("t", 1): 200.0, ("t", 2): 200.0, ("t", 3): 300.0}
    assert third[PROVEN.format(topic="t", partition=3)] == first[PROVEN.format(topic="t", partition=3)]
    assert third[PROVEN.format(topic="t", partition=1)][0] == 200.0  # written when it left the confirmation

    # a confirmation never moves a different proof: partition 0's row now holds cold offset 7
    marks = {str(w["name"]): w for w in ledger.watermarks(COMPONENT)}
    assert proven_marks(marks)[("t", 0)]["detail"]["cold_offset"] == 7
    assert "confirmed_at" in proven_marks(marks)[("t", 3)]["detail"]

    from dr_toolkit.topology import Ledger as LedgerSettings

    ledger.prune(LedgerSettings.Retention(), now=300.0 + 10 * 365 * 86400.0)  # watermarks are never pruned
    assert _safe(ledger) == {("t", 0): 300.0, ("t", 1): 200.0, ("t", 2): 200.0, ("t", 3): 300.0}
