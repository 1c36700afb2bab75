"""The DR page at a glance (issue 43 #5), on a real SQLite ledger and a topology whose servers are
down (free ports): the first load answers at once with the last recorded verdict while the live
check runs behind (it waited ~10 s on the components' timeouts); with fresh data the history
charts span the checks recorded, so the NO_GO episode shows (a 7-day chart was one dot); a Kafka
basis says its times in ISO 8601, not epoch seconds."""

from __future__ import annotations

import re
import time

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import write_topology
from tests.support.procs import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

VERIFY = [{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o", "key": ["id"]}]


def _ledger(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from drt_airflow import plugin

    path = write_topology(tmp_path, zk=f"127.0.0.1:{free_port()}", verify=VERIFY)
    monkeypatch.setenv("DRT_CONFIG", str(path))
    plugin._CACHE.clear()
    return Ledger.open(load_topology(path).ledger.url)


def _check(ledger: Ledger, t: float, verdict: str, rpo: float | None) -> None:
    ledger.add_gate_check(checked_at=t, verdict=verdict, recovery_point=None if rpo is None else t - rpo,
                          reasons=[] if verdict == "GO" else ["verify orders: not caught up"], source="dag:dr_rpo_watch",
                          components={"verify orders": {"component": "verify", "name": "orders",
                                                        "caught_up": verdict == "GO", "lag_s": rpo,
                                                        "safe_time": None if rpo is None else t - rpo}})


def test_first_load_is_the_last_recorded_verdict_at_once_and_the_live_check_runs_behind(
        airflow_home, tmp_path, monkeypatch) -> None:
    from drt_airflow import plugin

    ledger = _ledger(tmp_path, monkeypatch)
    now = time.time()
    _check(ledger, now - 120, "GO", 60.0)

    doc = plugin.page_status(who="airflow:test")
    # not the live check (ZooKeeper and the rest are down: it says NO_GO after their timeouts) but
    # the ledger's last verdict, served without waiting for it
    assert doc.get("recorded") is True and doc["gate"]["verdict"] == "GO", doc
    html = plugin.render(doc)
    assert re.search(r"\(the last recorded check, of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, \d+s ago, by "
                     r"dag:dr_rpo_watch; a live check is running: this page reloads when it is done\)", html), html
    assert "if (true) { location.reload(); return; }" in html
    assert "<b id='active-cluster'>being checked</b>" in html

    live = plugin.status(who="airflow:test")  # what status.json answers: waits for the check behind
    assert "recorded" not in live and live["gate"]["verdict"] == "NO_GO", live
    again = plugin.page_status(who="airflow:test")
    assert "recorded" not in again and again["generated_at"] == live["generated_at"]
    assert "if (false)" in plugin.render(again)
    assert [r["source"] for r in ledger.gate_checks(limit=2)] == ["ui", "dag:dr_rpo_watch"]  # one live check


def test_fresh_history_spans_its_checks_and_shows_the_no_go_episode(airflow_home, tmp_path, monkeypatch) -> None:
    from drt_airflow import plugin

    ledger = _ledger(tmp_path, monkeypatch)
    now = time.time()
    for i in range(40):  # the last 20 minutes, a check every 30 s: GO, a NO_GO episode (RPO 15 min), GO
        t = now - 1200 + i * 30
        no_go = 15 <= i < 22
        _check(ledger, t, "NO_GO" if no_go else "GO", 900.0 if no_go else 60.0)

    hist = plugin._history(ledger, plugin.HISTORY_DAYS)
    assert len(hist["buckets"]) >= 30 and sum(1 for b in hist["buckets"] if b["no_go"]) >= 5, hist["buckets"]
    assert hist["checks"] == 40 and hist.get("window_days") == plugin.HISTORY_DAYS
    html = plugin.render_history({"history": hist, "slo": {"rpo_slo_s": 300.0}, "gate": None})
    assert re.search(r'<h2 id="history-span">Recovery point age \(RPO\), since the first recorded check \(2\dm; '
                     r"none in the last 7 days before it\)</h2>", html), html[:600]
    chart = html.split('<svg id="rpo-chart"', 1)[1].split("</svg>", 1)[0]
    points = re.findall(r'<polyline class="series"[^>]* points="([^"]+)"', chart)
    assert points and len(points[0].split()) >= 30, chart[:2000]  # a line, not one dot
    assert chart.count('class="breach"') >= 5  # the NO_GO episode, above the 5 min SLO


def test_a_kafka_basis_reads_in_iso_not_epoch_seconds(airflow_home) -> None:
    from drt_airflow import plugin

    t = 1795921594.364
    basis = (f"partition 0: caught up: cold holds hot's records up to hot's end offset read at {t:.3f} "
             "(hot's clock)")
    doc = {"generated_at": time.time(), "errors": [], "history": None, "slo": None, "dag_runs": {},
           "gate": {"verdict": "GO", "recovery_point": "2026-11-29T03:06:34.364+00:00", "fence": {},
                    "reasons": [f"kafka orders: a record stamped {t} not mirrored"],
                    "signals": [{"component": "kafka", "name": "orders", "caught_up": True, "lag_s": 1.0,
                                 "safe_time": "2026-11-29T03:06:34.364+00:00", "basis": basis, "reason": ""}]}}
    html = plugin.render(doc)
    assert "1795921594" not in html
    assert "end offset read at 2026-11-29T03:06:34.364+00:00 (hot&#x27;s clock)" in html
    assert "a record stamped 2026-11-29T03:06:34.364+00:00 not mirrored" in html
