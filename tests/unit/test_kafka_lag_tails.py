"""The lag's identical-record proof on in-memory partitions: the tail comparison (the caught-up
fast path) and the search agree, and neither takes hot's trimmed log start as a boundary."""

from __future__ import annotations

from dr_toolkit.kafka import lag
from dr_toolkit.kafka.rows import LagRow
from tests.unit.test_kafka_search import ListPartition

A = (5_000, "fp-a")  # identical records: same timestamp, same fingerprint
SKEW = 1_000


def _lag(hot: ListPartition, cold: ListPartition) -> LagRow:
    marks = (100.0, (hot.lo, hot.hi), (cold.lo, cold.hi))
    return lag.partition_lag(hot, cold, "t", 0, "t", SKEW, marks=marks, restamped=False)  # type: ignore[arg-type]


def _tails(hot: ListPartition, cold: ListPartition) -> bool:
    return lag._tails_match(hot.recs, cold.recs, hot.lo, cold.lo, (hot.lo, hot.hi), cold.lo, SKEW)


def test_two_identical_records_and_one_copy_is_one_behind() -> None:
    hot, cold = ListPartition([(1_000, "x"), A, A]), ListPartition([(1_000, "x"), A])
    assert _lag(hot, cold).records_behind == 1
    assert not _tails(hot, cold)
    cold = ListPartition([(1_000, "x"), A, A])
    assert _lag(hot, cold).records_behind == 0 and _tails(hot, cold)


def test_a_trimmed_hot_head_is_not_a_boundary() -> None:
    # Hot's first copy of A was removed by retention; cold holds the copy of that one only.
    # Counting from hot's log start would pair cold's A with hot's remaining A: caught up, wrong.
    hot, cold = ListPartition([A], start=1), ListPartition([A])
    assert _lag(hot, cold).records_behind == 1
    assert not _tails(hot, cold)


def test_a_boundary_inside_the_tail_proves_the_count_whatever_the_log_start() -> None:
    # A record older than A's timestamp − 2S before the identical run: the count starts there.
    hot = ListPartition([(1_000, "old"), A, A], start=40)
    cold = ListPartition([(1_000, "old"), A, A], start=7)
    assert _tails(hot, cold) and _lag(hot, cold).records_behind == 0
    assert not _tails(hot, ListPartition([(1_000, "old"), A], start=7))
