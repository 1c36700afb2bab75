"""dr_rpo_watch with dag.test() against a real Airflow home: the task rpo_slo_breached fails when
the recovery point is older than failover.rpo_slo_s (so Airflow's alerting fires), succeeds when
it is not, records each check in the ledger and sends the RPO through Airflow's metrics."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import add_verify_report, write_topology

pytestmark = [pytest.mark.airflow, pytest.mark.integration]


def _backend() -> Any:
    """A metrics backend that keeps what it is sent, registered through Airflow's own metrics seam
    (``airflow.sdk.observability.stats.initialize``, as the task runner does at start-up; no
    StatsD client is installed here). Airflow's own metrics (timers) go to the no-op base."""
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger

    class Kept(NoStatsLogger):  # type: ignore[misc]
        def __init__(self) -> None:
            self.sent: list[tuple[str, str, Any]] = []

        def gauge(self, stat: str, value: float, *_a: Any, **_kw: Any) -> None:
            self.sent.append(("gauge", stat, value))

        def incr(self, stat: str, count: int = 1, *_a: Any, **_kw: Any) -> None:
            self.sent.append(("incr", stat, count))

    return Kept()


@pytest.fixture
def metrics():
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability import stats

    backend = _backend()
    stats.initialize(factory=lambda: backend, export_legacy_names=False)
    yield backend
    stats.initialize(factory=NoStatsLogger, export_legacy_names=True)


def _world(tmp_path, monkeypatch, *, slo: float, report_age_s: float) -> Ledger:
    path = write_topology(tmp_path, zk=None, failover={"rpo_slo_s": slo},
                          verify=[{"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o",
                                   "key": ["id"]}])
    ledger = Ledger.open(load_topology(path).ledger.url)
    add_verify_report(ledger, "orders", age_s=report_age_s)  # the recovery point: when its data was read
    monkeypatch.setenv("DRT_CONFIG", str(path))
    return ledger


def test_dag_shape(airflow_home) -> None:
    from tests.support.airflow import load_dag

    dag = load_dag("dr_rpo_watch")
    assert dag.schedule == "*/5 * * * *" and dag.catchup is False
    assert set(dag.task_dict) == {"rpo_slo_breached"}
    assert dag.task_dict["rpo_slo_breached"].retries == 0
    assert "dr-toolkit" in dag.tags and "rpo_slo_s" in dag.doc_md

    from drt_airflow.plugin import DAG_IDS

    assert "dr_rpo_watch" in DAG_IDS


def test_breach_fails_the_named_task_with_the_reason_and_counts_it(airflow_home, tmp_path, monkeypatch, metrics,
                                                                    capfd) -> None:
    from tests.support.airflow import load_dag

    ledger = _world(tmp_path, monkeypatch, slo=60, report_age_s=900)
    run = load_dag("dr_rpo_watch").test()
    assert run.state == "failed"
    [ti] = run.get_task_instances()
    assert ti.task_id == "rpo_slo_breached" and ti.state == "failed"
    [row] = ledger.gate_checks()
    assert row["source"] == "dag:dr_rpo_watch.rpo_slo_breached" and row["rpo_s"] >= 900
    cap = capfd.readouterr()
    m = re.search(r"AirflowFailException: (.*)", cap.out + cap.err)  # the task's failure, as logged
    assert m, (cap.out + cap.err)[-3000:]
    assert re.fullmatch(r"RPO SLO 60s breached: the recovery point is \d+s old \(held back by verify orders\)",
                        m.group(1).strip())
    gauges = {s: v for kind, s, v in metrics.sent if kind == "gauge"}
    assert gauges["dr_toolkit.rpo_seconds"] >= 900 and gauges["dr_toolkit.rpo_slo_seconds"] == 60
    assert ("incr", "dr_toolkit.rpo_slo_breach", 1) in metrics.sent


def test_within_the_slo_the_task_succeeds_and_the_check_is_recorded(airflow_home, tmp_path, monkeypatch,
                                                                    metrics) -> None:
    from tests.support.airflow import load_dag

    ledger = _world(tmp_path, monkeypatch, slo=3600, report_age_s=900)
    run = load_dag("dr_rpo_watch").test()
    assert run.state == "success"
    [ti] = run.get_task_instances()
    out = ti.xcom_pull(task_ids="rpo_slo_breached")
    assert out["breached"] is False and out["rpo_slo_s"] == 3600 and 900 <= out["rpo_s"] < 3600
    [row] = ledger.gate_checks()
    assert out["recorded"] == row["check_id"] and row["verdict"] == "GO"
    assert not any(s == "dr_toolkit.rpo_slo_breach" for _, s, _ in metrics.sent)
    assert any(s == "dr_toolkit.rpo_seconds" for _, s, _ in metrics.sent)
