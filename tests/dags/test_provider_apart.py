"""The wheel carries drt_demo and drt_servers because `drt demo` — a command of the one `drt` entry
point — needs both (docs/contracts.md, Layout). A provider install carries them as files only: what
Airflow loads from the distribution (the provider info and the DR plugin entry points, every operator,
sensor, hook and link module) imports neither, so they are never started, imported or configured there
(issue 43 #11)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.airflow]

PROBE = """
import importlib, sys
from dr_toolkit.airflow_provider import get_provider_info
info = get_provider_info()
for mod in ("drt_airflow.plugin", "drt_airflow.hooks", "drt_airflow.hdfs", "drt_airflow.kafka",
            "drt_airflow.hbase", "drt_airflow.verify", "drt_airflow.failover", "drt_airflow.links",
            "drt_airflow.slo", "drt_airflow.policy_dags"):
    importlib.import_module(mod)
for name in info.get("hook-class-names", []) + [c["hook-class-name"] for c in info.get("connection-types", [])]:
    importlib.import_module(name.rsplit(".", 1)[0])
print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] in ("drt_demo", "drt_servers")))
"""


def test_the_provider_loads_without_the_demo_and_the_server_launchers() -> None:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    loaded = [ln for ln in r.stdout.splitlines() if ln.startswith("LOADED ")]
    assert loaded == ["LOADED []"], loaded or r.stdout
