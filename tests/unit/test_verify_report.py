"""The HTML report: self-contained (no scripts, nothing fetched), escaped, readable numbers."""

from __future__ import annotations

import re
from pathlib import Path

from dr_toolkit.verify.api import VerifyResult, _chart
from dr_toolkit.verify.report import render_html, write_html


def result(**kw) -> VerifyResult:
    counters = {"GOODROWS": 99_899, "BADROWS": 3, "ONLY_IN_SOURCE_TABLE_ROWS": 1, "ONLY_IN_PEER_TABLE_ROWS": 1,
                "CONTENT_DIFFERENT_ROWS": 1}
    base = dict(
        counters=counters, source_rows=99_901, peer_rows=99_901, source="jdbc:postgresql://u:pw@db/x [t]",
        target="file:///cold/t", key=["id"], duration_s=1.5, started_at=1.7e9, finished_at=1.7e9 + 2,
        data_time=1.7e9, report_id="verify-1", name="orders",
        samples={"ONLY_IN_SOURCE_TABLE_ROWS": [{"key": {"id": 7}, "source": {"v": "<script>alert(1)</script>"}}],
                 "ONLY_IN_PEER_TABLE_ROWS": [{"key": {"id": 8}, "peer": {"v": "b"}}],
                 "CONTENT_DIFFERENT_ROWS": [{"key": {"id": 9}, "columns": ["v"], "source": {"v": "old"},
                                             "peer": {"v": "new"}}]},
        buckets=64, buckets_compared=64, buckets_differing=3,
        duplicate_keys={"source": 0, "peer": 1, "samples": [{"key": {"id": 9}, "source_rows": 1, "peer_rows": 2}]},
        null_keys={"source": 0, "peer": 0}, schema={"only_in_source": [], "only_in_peer": ["extra"],
                                                     "type_changes": {}},
        bucket_chart=_chart({i: 1000 for i in range(64)}, {3: 1, 40: 2}, 64, bars=16))
    base.update(kw)
    return VerifyResult(**base)


def test_report_is_self_contained_and_escaped(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "r.html"
    write_html(result(), str(p))
    page = p.read_text()
    assert "<script" not in page and "&lt;script&gt;" in page
    assert not re.search(r"""(src|href)=["']?https?:""", page) and "@import" not in page
    assert "99,899" in page and "3 bad rows" in page and "<svg" in page
    assert page.count('fill="#cf222e"') == 2  # two bucket groups hold the bad rows
    assert "extra" in page and "Duplicate keys" in page
    assert ":pw@" not in page and "jdbc:postgresql://u:***@db/x" in page


def test_matching_report_says_so() -> None:
    ok = {"GOODROWS": 10, "BADROWS": 0, "ONLY_IN_SOURCE_TABLE_ROWS": 0, "ONLY_IN_PEER_TABLE_ROWS": 0,
          "CONTENT_DIFFERENT_ROWS": 0}
    page = render_html(result(counters=ok, samples={}, buckets_differing=0, duplicate_keys={},
                              bucket_chart=_chart({0: 10}, {}, 64)))
    assert "Replica matches" in page and "identical digests" in page and 'fill="#cf222e"' not in page


def test_chart_folds_buckets_into_groups() -> None:
    groups = _chart({0: 5, 63: 7, 8191: 2}, {8191: 2}, 8192, bars=64)
    assert len(groups) == 64 and groups[0]["rows"] == 12 and groups[-1] == {
        "first": 8064, "last": 8191, "rows": 2, "bad": 2}
