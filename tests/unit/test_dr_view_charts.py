"""The DR view's history section rendered from a status document (no server): the SLO banner
in its three states, the SLO line only with an SLO, breach points, and escaping."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def _doc(slo: float | None, breach: str | None, rpo: float | None = 60.0) -> dict:
    buckets = [{"start": 0.0, "end": 10.0, "checks": 2, "rpo_s": 50.0, "no_recovery_point": 0, "no_go": 0,
                "lag": {"hbase": 5.0, "<img src=x>": 1.0}},
               {"start": 10.0, "end": 20.0, "checks": 1, "rpo_s": 500.0, "no_recovery_point": 0, "no_go": 1,
                "lag": {"hbase": 400.0}},
               {"start": 20.0, "end": 30.0, "checks": 1, "rpo_s": None, "no_recovery_point": 1, "no_go": 1,
                "lag": {}}]
    return {"gate": {"verdict": "GO"}, "slo": {"rpo_slo_s": slo, "rpo_s": rpo, "breach": breach},
            "history": {"since": 0.0, "until": 30.0, "bucket_s": 10.0, "checks": 4, "buckets": buckets}}


def test_breach_banner_slo_line_and_breach_points() -> None:
    from drt_airflow.plugin import render_history

    out = render_history(_doc(300.0, "RPO SLO 300s breached: the recovery point is 500s old"))
    assert 'id="slo-banner" class="banner breach">RPO SLO 300s breached' in out
    assert out.count('id="rpo-chart-slo"') == 1 and "SLO 5m" in out
    assert out.count('class="breach"') == 1  # the 500 s bucket only
    assert out.count('class="unknown"') == 1  # the bucket with no recovery point
    assert '<span id="breach-count">2</span>' in out
    assert "<img src=x>" not in out and "&lt;img src=x&gt;" in out  # a policy name is text, never markup


def test_within_slo_and_without_slo() -> None:
    from drt_airflow.plugin import render_history

    ok = render_history(_doc(3600.0, None))
    assert 'class="banner ok">RPO 1m within the SLO of 1h' in ok
    none = render_history(_doc(None, None))
    assert 'class="banner none"' in none and "rpo_slo_s" in none
    assert 'class="slo"' not in none and 'class="breach"' not in none
    empty = render_history({**_doc(None, None), "history": {"since": 0.0, "until": 30.0, "bucket_s": 10.0,
                                                            "checks": 0, "buckets": []}})
    assert "no gate checks recorded in this window" in empty
