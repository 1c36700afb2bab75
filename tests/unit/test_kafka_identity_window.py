"""The identity-and-position proof of the lag (issue 38 #4) on in-memory partitions: a record on
cold counts as hot's only where the records before it are the copies of those before it on hot."""

from __future__ import annotations

from dr_toolkit.kafka import lag
from dr_toolkit.kafka.client import Record
from dr_toolkit.kafka.rows import LagRow
from tests.unit.test_kafka_search import ListPartition

SKEW = 1_000
HOT = [(10_000 + 1_000 * i, f"h{i}") for i in range(20)]


def _recs(items: list[tuple[int, str]], start: int = 0) -> list[Record]:
    return [Record(start + i, ts, "create", fp) for i, (ts, fp) in enumerate(items)]


def _lag(hot: ListPartition, cold: ListPartition) -> LagRow:
    marks = (100.0, (hot.lo, hot.hi), (cold.lo, cold.hi))
    return lag.partition_lag(hot, cold, "t", 0, "t", SKEW, marks=marks, restamped=False)  # type: ignore[arg-type]


def test_a_mirror_resend_is_passed_over_a_foreign_record_is_not() -> None:
    hot = _recs(HOT[:12])
    resent = _recs(HOT[:6] + HOT[3:12])  # an at-least-once mirror re-sent 3..5 after a restart
    assert lag.window_proves(hot, resent, hot_from_start=True)
    foreign = _recs(HOT[:9] + [(99_999, "written on cold")] + HOT[9:12])
    assert not lag.window_proves(hot, foreign, hot_from_start=True)
    gap = _recs(HOT[:5] + HOT[7:12])  # cold lacks 5 and 6 before copies of hot's newer records
    assert not lag.window_proves(hot, gap, hot_from_start=True)


def test_a_copy_of_a_later_hot_record_out_of_place_is_not_the_mirror_position() -> None:
    # cold: copies of hot's 0..2, then a record identical (timestamp too) to hot's last one
    hot = ListPartition(HOT[:10])
    cold = ListPartition(HOT[:3] + [HOT[9]])
    row = _lag(hot, cold)
    assert row.records_behind == 7 and row.proof is not None and row.proof["hot_offset"] == 2, row


def test_records_produced_on_cold_are_never_counted_and_none_proven_means_all_behind() -> None:
    hot = ListPartition(HOT[:10])
    cold = ListPartition(HOT[:3] + [(50_000 + i, f"cold{i}") for i in range(3)])
    assert _lag(hot, cold).records_behind == 7
    only_foreign = ListPartition([(50_000 + i, f"cold{i}") for i in range(3)])
    row = _lag(hot, only_foreign)
    assert row.records_behind == 10 and row.method == "unproven" and row.proof is None, row
