"""No secret value (ZooKeeper digest password, S3 keys, connection passwords) reaches the CLI
output, DEBUG logs, the ledger's audit events, the reports, Airflow task logs or XCom."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import drt, write_topology

pytestmark = [pytest.mark.integration]

ZK_PASSWORD = "Zk-Secret-4711-xyzzy"
S3_SECRET = "S3cretKeyValue-0451-plugh"
S3_ACCESS = "AKIADRTTESTKEY0451"
SECRETS = (ZK_PASSWORD, S3_SECRET, S3_ACCESS)


@pytest.fixture
def secret_env(tmp_path, hbase_worlds, monkeypatch):
    """Both clusters' ZooKeeper endpoints (the real HBase pair's) use the digest connection ``zk_dr``."""
    monkeypatch.setenv("AIRFLOW_CONN_ZK_DR", f"zookeeper://drt:{ZK_PASSWORD}@127.0.0.1:2181")
    monkeypatch.setenv("AIRFLOW_CONN_S3_COLD", f"aws://{S3_ACCESS}:{S3_SECRET}@")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_ACCESS)
    zk_extra = {"conn_id": "zk_dr"}
    path = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1"}],
                          cold_extra={"s3": {"bucket": "cold-bucket", "conn_id": "s3_cold"}},
                          hbase_clusters=hbase_worlds.clusters)
    # give both clusters' ZooKeeper endpoints the digest connection
    import yaml

    doc = yaml.safe_load(path.read_text())
    for c in doc["clusters"].values():
        c["zookeeper"].update(zk_extra)
    path.write_text(yaml.safe_dump(doc))
    hbase_worlds(load_topology(path), lagging=False)
    monkeypatch.setenv("DRT_CONFIG", str(path))
    return path


def _assert_clean(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, f"secret {s[:6]}... found in {where}"


def _ledger_dump(path: Path) -> str:
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    return json.dumps([ledger.audit_events(), ledger.failover_runs(), ledger.status()], default=str)


def test_cli_failover_with_debug_logging_leaks_no_secret(secret_env, tmp_path) -> None:
    r = drt("-vv", "--json", "failover", "run", "--execute", "--yes-i-am-sure", "--reason", "secret test",
            config=secret_env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "DEBUG" in r.stderr  # debug logging really was on
    _assert_clean(r.stdout + r.stderr, "drt output")
    r2 = drt("-vv", "--json", "failover", "check", config=secret_env)
    _assert_clean(r2.stdout + r2.stderr, "drt failover check output")
    for f in (tmp_path / "reports").iterdir():
        _assert_clean(f.read_text(), str(f))
    _assert_clean(_ledger_dump(secret_env), "the ledger")


@pytest.mark.airflow
@pytest.mark.slow
def test_dag_run_with_debug_logging_leaks_no_secret_to_task_logs_or_xcom(secret_env, airflow_home, caplog,
                                                                         capfd) -> None:
    from tests.support.airflow import load_dag

    caplog.set_level(logging.DEBUG)
    logging.getLogger().setLevel(logging.DEBUG)
    run = load_dag("dr_failover").test(run_conf={"reason": "secret drill", "dry_run": True})
    assert run.state == "success"
    out, err = capfd.readouterr()
    _assert_clean(out + err + caplog.text, "task logs")
    xcoms = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in run.get_task_instances()}
    _assert_clean(json.dumps(xcoms, default=str), "XCom")
    for root, _dirs, files in os.walk(airflow_home / "logs"):
        for name in files:
            _assert_clean(Path(root, name).read_text(errors="replace"), f"log file {name}")
    _assert_clean(_ledger_dump(secret_env), "the ledger")
