"""The DR status view in the Airflow UI, loaded in real headless Chromium from a running
`airflow api-server` bound to 127.0.0.1: signals, verdict, recovery point, DAG runs, reports."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.integration.test_failover_runbook import hbase_world
from tests.support.fixtures_failover import add_verify_report, chromium_dump_dom, write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("chromium"), reason="Debian chromium is not installed")]


def _api(api, method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"{api.url}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {api.token()}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def test_dr_status_view_in_headless_chromium(airflow_home, api_server, tmp_path, zk_server, monkeypatch,
                                             request) -> None:
    from tests.support.airflow import load_dag

    if not zk_server.running:
        zk_server.start()
    path = write_topology(tmp_path, zk=zk_server.address, hbase=[{"name": "hb", "peer_id": "1"}],
                          verify=[{"name": "orders-table", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}])
    topo = load_topology(path)
    hbase_world(topo, lagging=True)
    add_verify_report(Ledger.open(topo.ledger.url), "orders-table", bad=2)
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

    # a real browser logs in (all-admins simple auth sets the session cookie) and renders the page
    dom = chromium_dump_dom(f"{api_server.url}/auth/token/login?next=/dr-toolkit/")
    assert "<h1>DR status</h1>" in dom, dom[:2000]
    assert 'id="verdict" class="NO_GO">NO_GO' in dom
    assert "SizeOfLogQueue=1" in dom  # the HBase signal says why
    assert "last verification found 2 bad rows" in dom
    assert 'id="recovery-point">unknown' in dom  # an HBase queue is behind: no recovery point yet
    assert "orders-table" in dom and "dr_failover" in dom  # the verification report and the DAG run
    assert "live: NO_GO (2 signals)" in dom  # the page's script fetched status.json with the session
