"""The DR status view in the Airflow UI, loaded in real headless Chromium from a running
`airflow api-server` bound to 127.0.0.1: signals, verdict, recovery point, DAG runs, reports, and
the RPO history chart with its SLO line and breach banner, checked in a real screenshot."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import (
    add_verify_report,
    chromium_dump_dom,
    chromium_screenshot,
    write_topology,
)
from tests.support.png import decode

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("chromium"), reason="Debian chromium is not installed")]


def _api(api, method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"{api.url}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {api.token()}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


PINK, RED, BLUE = (0xD5, 0x3F, 0x8C), (0xE5, 0x3E, 0x3E), (0x31, 0x82, 0xCE)  # SLO line, breach, RPO series


def _history(ledger: Ledger) -> None:
    """Two days of recorded checks, every 30 min: RPO 2 min, twice 15 min (above the 5 min SLO)."""
    now = time.time()
    for i in range(96):
        t = now - 2 * 86400 + i * 1800
        rpo = 900.0 if i in (30, 70) else 120.0
        ledger.add_gate_check(checked_at=t, verdict="GO", recovery_point=t - rpo, reasons=[], source="history",
                              components={"hbase 1": {"component": "hbase", "name": "1", "lag_s": rpo / 2},
                                          "verify t": {"component": "verify", "name": "t", "lag_s": rpo}})


def test_dr_status_view_in_headless_chromium(airflow_home, api_server, tmp_path, hbase_worlds, monkeypatch,
                                             request) -> None:
    from tests.support.airflow import load_dag

    path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1"}],
                          verify=[{"name": "orders-table", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}], failover={"rpo_slo_s": 300}, hbase_clusters=hbase_worlds.clusters)
    topo = load_topology(path)
    hbase_worlds(topo).lag_whole_wal()  # a rolled WAL waits in the queue, never shipped (peer disabled)
    ledger = Ledger.open(topo.ledger.url)
    add_verify_report(ledger, "orders-table", bad=2)
    _history(ledger)
    monkeypatch.setenv("DRT_CONFIG", str(path))
    assert load_dag("dr_failover").test(run_conf={"reason": "ui drill", "dry_run": True}).state == "success"
    try:
        _api(api_server, "DELETE", "/api/v2/variables/drt_config")
    except urllib.error.HTTPError:
        pass
    _api(api_server, "POST", "/api/v2/variables", {"key": "drt_config", "value": str(path)})
    # The Variable lives in the session's shared Airflow DB: later DAG tests must not read this topology.
    request.addfinalizer(lambda: _api(api_server, "DELETE", "/api/v2/variables/drt_config"))

    # the view is registered in the UI's navigation
    plugins = _api(api_server, "GET", "/api/v2/plugins")["plugins"]
    ours = next(p for p in plugins if p["name"] == "dr_toolkit")
    assert ours["external_views"][0]["href"] == "/dr-toolkit/"

    # the view checks Airflow's authentication: a forged token is refused (all-admins mode lets
    # requests without credentials in as admin, as it does for the rest of the UI)
    forged = urllib.request.Request(f"{api_server.url}/dr-toolkit/status.json",
                                    headers={"Authorization": "Bearer forged.token.value"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(forged, timeout=30)
    assert err.value.code in (401, 403)
    doc = _api(api_server, "GET", "/dr-toolkit/status.json")
    assert doc["gate"]["verdict"] == "NO_GO" and len(doc["gate"]["signals"]) == 2
    # the page's own check is recorded (source ui) and the history reads it back, downsampled
    assert ("ui", "airflow:Anonymous") in {(r["source"], r["actor"]) for r in ledger.gate_checks(limit=5)}  # all-admins
    assert doc["history"]["checks"] >= 97 and len(doc["history"]["buckets"]) <= 288
    assert max(b["rpo_s"] or 0 for b in doc["history"]["buckets"]) == 900.0
    assert doc["slo"]["rpo_slo_s"] == 300 and doc["slo"]["breach"].startswith(
        "RPO SLO 300s breached: no recovery point can be stated")

    # a real browser logs in (all-admins simple auth sets the session cookie) and renders the page
    dom = chromium_dump_dom(f"{api_server.url}/auth/token/login?next=/dr-toolkit/")
    assert "<h1>DR status</h1>" in dom, dom[:2000]
    assert 'id="verdict" class="NO_GO">NO_GO' in dom
    assert "SizeOfLogQueue=1" in dom  # the HBase signal says why
    assert "last verification found 2 bad rows" in dom
    assert 'id="recovery-point">unknown' in dom  # an HBase queue is behind: no recovery point yet
    assert "orders-table" in dom and "dr_failover" in dom  # the verification report and the DAG run
    assert "live: NO_GO (2 signals)" in dom  # the page's script fetched status.json with the session
    assert 'id="slo-banner" class="banner breach">RPO SLO 300s breached' in dom
    assert 'id="rpo-chart"' in dom and 'id="rpo-chart-slo"' in dom
    assert 'id="lag-chart-hbase"' in dom and 'id="lag-chart-verify"' in dom
    assert dom.count('class="breach"') >= 2  # the two 15-minute points above the SLO

    # the screenshot: the red breach banner above the chart, the pink SLO line across the chart,
    # the blue RPO series below and above it
    # tall enough that the chart is in view however the reasons above it wrap (their text names real
    # WAL paths, whose length varies with the machine)
    img = decode(chromium_screenshot(f"{api_server.url}/auth/token/login?next=/dr-toolkit/", tmp_path / "dr.png"))
    # the series is an anti-aliased 2-px polyline (the SLO line and banner are crisp): near-blue counts
    banner, slo_line, series = img.rows_with(RED, 600), img.rows_with(PINK, 500), img.rows_with(BLUE, 100, tol=48)
    assert banner, "no red breach banner in the screenshot"
    assert slo_line, "no SLO line in the screenshot"
    assert len(slo_line) <= 4 and max(banner) < min(slo_line)  # one thin line, below the banner
    assert series and min(series) > max(banner), tmp_path / "dr.png"  # the RPO series is drawn in the chart
