"""The DR page's state line, from a live status on real servers: after a failover it says so
(active cluster, since when, by whom) instead of a bare GO; with ZooKeeper unreachable it says
"unknown" with the reason; DAG runs are links; the check's age is shown (and cached)."""

from __future__ import annotations

import re

import pytest

from dr_toolkit.access import Access
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import add_verify_report, write_topology
from tests.support.procs import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

VERIFY = [{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o", "key": ["id"]}]


def _page(monkeypatch, path) -> str:  # type: ignore[no-untyped-def]
    from drt_airflow import plugin

    monkeypatch.setenv("DRT_CONFIG", str(path))
    plugin._CACHE.clear()
    return plugin.render(plugin.status(who="airflow:test"))


def test_after_a_failover_the_page_says_failed_over_by_whom_and_when(airflow_home, zk_server, tmp_path,
                                                                      monkeypatch) -> None:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.zk.fencing import open_fence
    from tests.support.airflow import load_dag

    path = write_topology(tmp_path, zk=zk_server.address, verify=VERIFY)
    topo = load_topology(path)
    add_verify_report(Ledger.open(topo.ledger.url), "orders")
    monkeypatch.setenv("DRT_CONFIG", str(path))
    assert load_dag("dr_rpo_watch").test().state in ("success", "failed")  # a run to link to
    html = _page(monkeypatch, path)
    assert "Active cluster <b id='active-cluster'>hot</b> (no failover recorded" in html, html[:2000]
    assert re.search(r"<a href='/dags/dr_rpo_watch/runs/manual__[^']+'>manual__", html)
    assert re.search(r"live check of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, \d+s ago; re-run at most\s+every 60s", html)

    with open_fence(topo, access=Access.from_env()) as fence:
        st = fence.bump(fenced_cluster="hot", by="alice@ops")
        fence.set_active("cold", epoch=st.epoch, by="alice@ops")
    html = _page(monkeypatch, path)
    m = re.search(r"<b id='failed-over'>Failed over</b>: active cluster <b id='active-cluster'>cold</b> since "
                  r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC), by alice@ops", html)
    assert m, html[:3000]


def test_zookeeper_unreachable_is_unknown_with_the_reason(airflow_home, tmp_path, monkeypatch) -> None:
    path = write_topology(tmp_path, zk=f"127.0.0.1:{free_port()}", verify=VERIFY)
    html = _page(monkeypatch, path)
    m = re.search(r"Active cluster <b id='active-cluster'>unknown</b> — fencing state unreadable: ([^<]+)", html)
    assert m and "cannot connect" in m.group(1), html[:3000]
    assert "not set" not in html
