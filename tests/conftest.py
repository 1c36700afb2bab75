"""Test-wide set-up: a temporary AIRFLOW_HOME (set before anything imports airflow), the
real-server fixtures from tests/support, and server logs printed when a test fails."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.airflow import env as airflow_env

REPO = Path(__file__).resolve().parents[1]
SLOWEST_FILES = 25  # the per-file summary at the end of every run

_airflow_home = Path(tempfile.mkdtemp(prefix="drt-airflow-"))
os.environ.update(airflow_env(_airflow_home))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
# pytest has closed its streams ("--- Logging error ---"): keep it to warnings.
logging.getLogger("py4j").setLevel(logging.WARNING)

# Shared fixtures, plus one fixture module per capability (each owned by that capability).
_FIXTURE_MODULES = ["fixtures", "fixtures_hdfs", "fixtures_copy", "fixtures_kafka", "fixtures_hbase", "fixtures_verify",
                    "fixtures_failover", "fixtures_kerberos", "fixtures_kerberos_kafka",
                    "fixtures_kerberos_hbase"]
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


@pytest.fixture(autouse=True)
def _root_logger_as_it_was() -> Iterator[None]:
    """The root logger's level and handlers as before the test: a test that turns on DEBUG
    (test_failover_secrets) or runs Airflow's `dag.test()` (whose logging configuration adds
    handlers on streams the test's capture closes) must not leave them to the tests after it —
    under xdist's order a later `drt` run in the same worker printed "--- Logging error ---" (I/O
    on a closed file) on its stderr (test_distcp_options, 2026-11-29)."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    from _pytest.logging import LogCaptureHandler  # pytest's own, one per phase: pytest removes them

    for h in [h for h in root.handlers if h not in handlers and not isinstance(h, LogCaptureHandler)]:
        root.removeHandler(h)
    root.setLevel(level)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when in ("setup", "call"):
        from tests.support.procs import ALL_SERVERS

        for srv in ALL_SERVERS:
            report.sections.append((f"server log: {srv.name}", srv.log_tail(60)))


# ---- side by side (pytest-xdist, `-n 2 --dist loadgroup`: docs/testing.md) -------------------------
# Each test module goes to one xdist group by the heaviest session server it uses, so one worker
# runs that group's modules and only that worker starts those servers (session fixtures are per
# worker). Modules that need none of them are not grouped: their tests spread over the workers.
_SERVER_GROUPS = [  # (a fixture the module's tests use, its group), the first match wins
    ("hbase_clusters", "hbase"), ("spark_cluster", "spark-cluster"),
    ("mm2_session", "kafka"), ("kafka_hot", "kafka"), ("kafka_cold", "kafka"),
    ("hdfs_hot", "hdfs"), ("hdfs_cold", "hdfs"),
    ("hdfs_secure", "kerberos"), ("hdfs_secure_cold", "kerberos"), ("zk_secure", "kerberos"),
    ("kafka_secure", "kerberos"), ("kdc", "kerberos"), ("hbase_secure_pair", "kerberos-hbase"),
    ("spark", "spark"), ("api_server", "airflow"), ("airflow_home", "airflow"),
]
# "kerberos-hbase": the secure HBase pair on a KDC of its own (same realm name, same service principals),
# kept apart from the shared KDC's modules and after them on a worker that has both
_GROUP_ORDER = ["hbase", "hdfs", "kafka", "spark", "spark-cluster", "kerberos", "airflow", "kerberos-hbase"]


_DYNAMIC = re.compile(r"""getfixturevalue\(["'](\w+)["']\)""")


def _fixtures_used(items: list[pytest.Item]) -> set[str]:
    """The fixtures the module's tests name, with those its code asks for by name
    (``request.getfixturevalue("hot_dir")``) and what those depend on."""
    used = set().union(*(it.fixturenames for it in items))
    path = getattr(items[0], "path", None)
    todo = set(_DYNAMIC.findall(path.read_text(encoding="utf-8"))) if path else set()
    while todo:
        name = todo.pop()
        used.add(name)
        for d in items[0].session._fixturemanager.getfixturedefs(name, items[0]) or ():
            todo |= set(d.argnames) - used
    return used


def _module_group(items: list[pytest.Item]) -> str | None:
    used = _fixtures_used(items)
    for fixture, group in _SERVER_GROUPS:
        if fixture in used:
            return group
    for it in items:  # a module-scoped fixture of the module's own (a server of its own): keep it whole
        info = getattr(it, "_fixtureinfo", None)
        for defs in info.name2fixturedefs.values() if info else ():
            if any(d.scope in ("module", "class", "package") and d.baseid.startswith(it.nodeid.split("::")[0])
                   for d in defs):
                return "module-" + Path(it.nodeid.split("::")[0]).stem
    return None


_TERMINAL_ENV = ("COLUMNS", "LINES")


def pytest_configure(config: pytest.Config) -> None:
    """An xdist worker starts with COLUMNS=80 and LINES=24 in its environment, which the run's own
    process has not: `drt` run by a test would wrap its messages at 80 columns as on a terminal.
    The worker takes the run's values (none, usually) from the controller (below)."""
    given = getattr(config, "workerinput", {}).get("drt_terminal_env")
    for k, v in (given or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if config.pluginmanager.hasplugin("xdist"):  # its hooks are known only when it is loaded
        config.pluginmanager.register(_TerminalEnvToWorkers(), "drt-terminal-env")


class _TerminalEnvToWorkers:
    @staticmethod
    def pytest_configure_node(node: Any) -> None:
        node.workerinput["drt_terminal_env"] = {k: os.environ.get(k) for k in _TERMINAL_ENV}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which appends "@<group>" to the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    by_module: dict[str, list[pytest.Item]] = {}
    for it in items:
        by_module.setdefault(it.nodeid.split("::")[0], []).append(it)
    rank: dict[str, int] = {}
    for path, module_items in by_module.items():
        group = _module_group(module_items)
        if group is None:
            continue
        for it in module_items:
            it.add_marker(pytest.mark.xdist_group(group))
            if getattr(config.option, "loadgroup", False) and hasattr(it, "_id"):
                # pytest >= 9 keeps a node's id in `_id`: pytest-xdist 3.8 still appends "@<group>" to
                # `_nodeid`, which pytest 9 no longer reads, and the groups would be ignored
                from _pytest.nodeid import NodeId

                it._id = NodeId.parse(f"{it.nodeid}@{group}")
        rank[path] = _GROUP_ORDER.index(group) if group in _GROUP_ORDER else len(_GROUP_ORDER)
    if hasattr(config, "workerinput"):  # an xdist worker: hand out the long groups first, unit tests last
        ungrouped = len(_GROUP_ORDER) + 1
        items.sort(key=lambda it: (rank.get(it.nodeid.split("::")[0],
                                            ungrouped + it.nodeid.startswith("tests/unit/"))))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The slowest test files (setup + call + teardown of their tests, summed), beside --durations."""
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if getattr(r, "when", None) in ("setup", "call", "teardown") and hasattr(r, "duration"):
                path = r.nodeid.split("::")[0]
                totals[path] = totals.get(path, 0.0) + r.duration
                counts[path] = counts.get(path, 0) + (r.when == "call")
    if not totals:
        return
    terminalreporter.write_sep("=", f"slowest {min(SLOWEST_FILES, len(totals))} test files (setup+call+teardown)")
    for path, total in sorted(totals.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"{total:8.1f}s {counts[path]:4d} tests  {path}")
    terminalreporter.write_line(f"{sum(totals.values()):8.1f}s in all ({len(totals)} files)")
