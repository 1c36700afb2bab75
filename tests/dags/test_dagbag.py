"""Every DAG file loads with zero import errors, carries docs, and parses fast enough to
import nothing heavy at top level (checked by module inspection, not by timing). Every policy's
own `schedule` reaches Airflow as that policy's DAG's timetable (nothing evaluates cron by hand),
replicate/verify tasks declare Assets, linked verifications are Asset-triggered, and a topology
that cannot be read is one import error saying why — never a silently empty DagBag."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.airflow
REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
EXAMPLE = REPO / "examples" / "production.yaml"
HEAVY = ("pyspark", "confluent_kafka", "kazoo", "boto3", "hdfs")
MANUAL = {"dr_hdfs_replication", "dr_kafka_offsets", "dr_hbase_replication", "dr_verify", "dr_failover",
          "dr_reprotect"}


def _bag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def _topology(tmp_path: Path, **edit: Any) -> Path:
    """examples/production.yaml with its policies edited (kind → list of policy dicts)."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    for kind, policies in edit.items():
        doc["policies"][kind] = policies
    p = tmp_path / "drt.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_dagbag_has_no_import_errors(airflow_home, monkeypatch) -> None:
    monkeypatch.setenv("DRT_CONFIG", str(EXAMPLE))
    bag = _bag()
    assert bag.import_errors == {}
    assert set(bag.dags) > MANUAL
    for dag_id, dag in bag.dags.items():
        assert dag.doc_md and len(dag.doc_md) > 40, f"{dag_id} has no docs for the UI"
        assert "dr-toolkit" in dag.tags, f"{dag_id} lacks the dr-toolkit tag"
    for dag_id in MANUAL:  # the per-kind DAGs are "run now" tools: Airflow schedules the policies' DAGs
        assert type(bag.dags[dag_id].timetable).__name__ == "NullTimetable", dag_id


def test_every_policy_schedule_is_its_dag_timetable(airflow_home, tmp_path: Path, monkeypatch) -> None:
    from airflow.sdk import Asset

    cfg = _topology(
        tmp_path,
        hdfs=[{"name": "wh", "source": "hdfs://prod/wh", "targets": ["hdfs://dr/wh"], "schedule": "@hourly"},
              {"name": "adhoc", "source": "hdfs://prod/x", "targets": ["hdfs://dr/x"], "schedule": None}],
        kafka=[{"name": "pay", "topics": ["payments"], "groups": ["g"], "schedule": "*/5 * * * *"}],
        hbase=[{"name": "hb", "peer_id": "1", "namespaces": ["shop"], "schedule": "0 3 * * *"}],
        verify=[{"name": "orders", "source": "hdfs://prod/wh/orders", "target": "hdfs://dr/wh/orders",
                 "key": ["id"], "schedule": "@daily"},
                {"name": "orders-after-copy", "source": "hdfs://prod/wh/orders", "target": "hdfs://dr/wh/orders",
                 "key": ["id"], "schedule": None},
                # same relative path, different tree: not what `wh` replicates
                {"name": "elsewhere", "source": "hdfs://prod/other/orders", "target": "hdfs://dr/wh/orders",
                 "key": ["id"], "schedule": "0 6 * * 1"}])
    monkeypatch.setenv("DRT_CONFIG", str(cfg))
    bag = _bag()
    assert bag.import_errors == {}
    dags = bag.dags

    def cron(dag_id: str) -> str:
        tt = dags[dag_id].timetable
        assert type(tt).__name__ == "CronTriggerTimetable", (dag_id, tt)
        return str(tt.expression)

    assert cron("dr_hdfs_replication__wh") == "0 * * * *"  # @hourly, as Airflow reads the preset
    assert type(dags["dr_hdfs_replication__adhoc"].timetable).__name__ == "NullTimetable"
    assert cron("dr_kafka_offsets__pay") == "*/5 * * * *"  # no longer the DAG's fixed 15 minutes
    assert cron("dr_hbase_replication__hb") == "0 3 * * *"
    assert cron("dr_verify__elsewhere") == "0 6 * * 1"

    wh = Asset("x-drt://hdfs/wh", group="dr-toolkit")
    linked = dags["dr_verify__orders"].timetable
    assert type(linked).__name__ == "AssetOrTimeSchedule"
    assert linked.timetable.expression in ("@daily", "0 0 * * *")
    assert [a.uri for a in linked.asset_condition.objects] == [wh.uri]
    only_asset = dags["dr_verify__orders-after-copy"].timetable
    assert type(only_asset).__name__ == "AssetTriggeredTimetable"
    assert [a.uri for a in only_asset.asset_condition.objects] == [wh.uri]

    outlets = {(d, t.task_id): [o.uri for o in t.outlets] for d, dag in dags.items() for t in dag.tasks if t.outlets}
    assert outlets == {("dr_hdfs_replication__wh", "replicate"): ["x-drt://hdfs/wh"],
                       ("dr_hdfs_replication__adhoc", "replicate"): ["x-drt://hdfs/adhoc"],
                       ("dr_kafka_offsets__pay", "checkpoint"): ["x-drt://kafka/pay"],
                       ("dr_hbase_replication__hb", "queue_status"): ["x-drt://hbase/hb"],
                       ("dr_verify__orders", "verify"): ["x-drt://verify/orders"],
                       ("dr_verify__orders-after-copy", "verify"): ["x-drt://verify/orders-after-copy"],
                       ("dr_verify__elsewhere", "verify"): ["x-drt://verify/elsewhere"]}
    # the policies' tasks are scoped to their policy
    assert dags["dr_kafka_offsets__pay"].get_task("checkpoint").groups == ["g"]
    assert dags["dr_hbase_replication__hb"].get_task("peers").policies == ["hb"]
    assert dags["dr_hdfs_replication__wh"].get_task("replicate").policy == "wh"


@pytest.mark.parametrize("case", ["missing", "bad_cron"])
def test_unreadable_topology_is_one_clear_import_error(case: str, airflow_home, tmp_path: Path,
                                                       monkeypatch) -> None:
    if case == "missing":
        monkeypatch.setenv("DRT_CONFIG", str(tmp_path / "nowhere.yaml"))
        expect = "topology file not found"
    else:
        monkeypatch.setenv("DRT_CONFIG", str(_topology(tmp_path, kafka=[
            {"name": "pay", "topics": ["p"], "groups": ["g"], "schedule": "every 5 minutes"}])))
        expect = "policies.kafka[pay].schedule 'every 5 minutes' is not a cron expression"
    bag = _bag()
    assert list(bag.import_errors) == [str(DAGS / "dr_policies.py")]
    last = bag.import_errors[str(DAGS / "dr_policies.py")].strip().splitlines()[-1]
    assert last.startswith("RuntimeError: dr-toolkit: no per-policy DAGs:") and expect in last
    assert set(bag.dags) >= MANUAL  # the manual DAGs still load
    assert not [d for d in bag.dags if "__" in d]


@pytest.mark.parametrize("path", sorted(p.name for p in DAGS.glob("*.py")) or ["(none)"])
def test_dag_file_imports_nothing_heavy(path: str, airflow_home, monkeypatch) -> None:
    if path == "(none)":
        pytest.skip("no DAG files yet")
    monkeypatch.setenv("DRT_CONFIG", str(EXAMPLE))
    code = ("import sys, runpy; runpy.run_path(sys.argv[1]); "
            f"heavy = [m for m in {HEAVY!r} if m in sys.modules]; print(','.join(heavy))")
    r = subprocess.run([sys.executable, "-c", code, str(DAGS / path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1:] in ([], [""]), f"{path} imports {r.stdout.strip()} at parse time"
