"""Test-wide set-up: a temporary AIRFLOW_HOME (set before anything imports airflow), the
real-server fixtures from tests/support, and server logs printed when a test fails."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

from tests.support.airflow import env as airflow_env

REPO = Path(__file__).resolve().parents[1]

_airflow_home = Path(tempfile.mkdtemp(prefix="drt-airflow-"))
os.environ.update(airflow_env(_airflow_home))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
# pytest has closed its streams ("--- Logging error ---"): keep it to warnings.
logging.getLogger("py4j").setLevel(logging.WARNING)

# Shared fixtures, plus one fixture module per capability (each owned by that capability).
_FIXTURE_MODULES = ["fixtures", "fixtures_hdfs", "fixtures_copy", "fixtures_kafka", "fixtures_hbase", "fixtures_verify",
                    "fixtures_failover"]
pytest_plugins = [f"tests.support.{m}" for m in _FIXTURE_MODULES]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A test marked `child_process` runs in a child pytest process (tests/support/child.py): a
    native client aborting there fails that test, not the whole run."""
    from tests.support import child

    if item.get_closest_marker("child_process") is None or child.in_child():
        return None
    child.run_item(item)
    # What pytest's own protocol does after an item: tear down the fixtures the next item does not
    # share (a module fixture of the item's module when it was the module's last), or the next item
    # finds them still set up ("previous item was not torn down properly").
    item.session._setupstate.teardown_exact(nextitem)
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when in ("setup", "call"):
        from tests.support.procs import ALL_SERVERS

        for srv in ALL_SERVERS:
            report.sections.append((f"server log: {srv.name}", srv.log_tail(60)))
