"""Session-scoped fixtures for the real servers (docs/contracts.md, the real servers). Loaded by tests/conftest.py.

Every server runs on a free 127.0.0.1 port; its log is printed when a test fails
(tests/conftest.py); each fixture value has stop/kill/restart helpers for fault tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import servers
from tests.support.procs import ManagedProcess


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedProcess]:
    """A real ZooKeeper 3.8 (Debian's jars). ``zk_server.address`` is host:port."""
    proc = servers.zookeeper(tmp_path_factory.mktemp("zk")).start()
    yield proc
    proc.kill()


@pytest.fixture
def zk(zk_server: ManagedProcess) -> Iterator[Any]:
    """A started kazoo client on the test ZooKeeper; restarts the server if a test stopped it."""
    from kazoo.client import KazooClient

    if not zk_server.running:
        zk_server.start()
    client = KazooClient(hosts=zk_server.address, timeout=5)
    client.start(timeout=15)
    yield client
    try:
        client.stop()
        client.close()
    except Exception:  # noqa: BLE001 - the server may have been killed by the test
        pass


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.Postgres]:
    """A temporary PostgreSQL 15 cluster (initdb/pg_ctl as the postgres user)."""
    # Not under pytest's tmp dir: that is private to root, and PostgreSQL runs as `postgres`.
    base = Path(tempfile.mkdtemp(prefix="drt-pg-"))
    base.chmod(0o755)
    proc = servers.Postgres(base).start()
    yield proc  # type: ignore[misc]
    proc.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[servers.S3Server]:
    """moto's S3 protocol server — the suite's one S3 stand-in (no real S3 runs here)."""
    srv = servers.S3Server().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole test session (start ≈ 6 s). Its JVM starts with the
    copy engine's quick-start options (QUICK_START_JVM: C1 only, serial GC): the tests' frames are a
    few rows to 100,000, a verification of two rows is 33 small Spark jobs (70 stages), and with the
    JVM defaults each took 12-30 s on the loaded 2-core machine, ~7 s with these; what the tests
    check does not depend on the JIT."""
    for k, v in servers.spark_env().items():
        os.environ.setdefault(k, v)
    from dr_toolkit.spark.session import QUICK_START_JVM, get_session

    session = get_session("local[2]", app_name="drt-tests", conf={"spark.driver.extraJavaOptions": QUICK_START_JVM})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def airflow_home() -> Path:
    """The temporary AIRFLOW_HOME set up by conftest, with its metadata DB migrated."""
    home = Path(os.environ["AIRFLOW_HOME"])
    marker = home / ".migrated"
    if not marker.exists():
        r = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                           env=os.environ.copy(), timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        marker.write_text("ok")
    return home
