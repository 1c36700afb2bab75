"""Failover test support: topologies on the test servers' ports, and an Airflow api-server.

``write_topology(tmp_path, ...)`` writes a topology whose ZooKeeper znodes (HBase parent,
``dr_root``) are unique to the test, so tests share one ZooKeeper without seeing each other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr_toolkit.access import Access
from dr_toolkit.ledger import VerifyReportRow
from tests.support.procs import free_port, port_open


def write_topology(tmp_path: Path, *, zk: str | None, kafka_hot: str | None = None, kafka_cold: str | None = None,
                   hdfs: list[dict[str, Any]] | None = None, hbase: list[dict[str, Any]] | None = None,
                   kafka: list[dict[str, Any]] | None = None, verify: list[dict[str, Any]] | None = None,
                   failover: dict[str, Any] | None = None, hot_extra: dict[str, Any] | None = None,
                   cold_extra: dict[str, Any] | None = None, zk_conn_id: str | None = None,
                   hbase_clusters: tuple[Any, Any] | None = None) -> Path:
    """``hbase_clusters`` (the real hot and cold HBase): the clusters' ZooKeeper sections are theirs
    (the hot one also keeps ``dr_root``), and each HBase policy reads WALs and table descriptors at
    the hot cluster's reported hbase.rootdir over WebHDFS."""
    tag = uuid.uuid4().hex[:8]
    (tmp_path / "hot").mkdir(exist_ok=True)
    (tmp_path / "cold").mkdir(exist_ok=True)

    def cluster(role: str, kafka_addr: str | None, extra: dict[str, Any] | None) -> dict[str, Any]:
        c: dict[str, Any] = {"role": role, "local_root": str(tmp_path / role)}
        if zk:
            c["zookeeper"] = {"quorum": zk, "hbase_znode_parent": f"/hbase-{role}-{tag}",
                              "dr_root": f"/drt-{tag}", "connect_timeout_s": 3, "call_timeout_s": 3}
        if kafka_addr:
            c["kafka"] = {"bootstrap_servers": kafka_addr, "timeout_s": 5}
        if hbase_clusters is not None:
            real = hbase_clusters[0 if role == "hot" else 1]
            c["zookeeper"] = {"quorum": real.zk_quorum, "hbase_znode_parent": real.znode_parent,
                              "dr_root": f"/drt-{tag}", "connect_timeout_s": 3, "call_timeout_s": 3}
        if zk_conn_id and "zookeeper" in c:
            c["zookeeper"]["conn_id"] = zk_conn_id
        c.update(extra or {})
        return c

    if hbase_clusters is not None:
        hot_hb = hbase_clusters[0]
        hbase = [{"hbase_rootdir": f"{hot_hb.webhdfs_url}{hot_hb.rootdir}", **p} for p in hbase or []]

    doc = {
        "version": 1,
        "clusters": {"hot": cluster("hot", kafka_hot, hot_extra), "cold": cluster("cold", kafka_cold, cold_extra)},
        "policies": {"hdfs": hdfs or [], "hbase": hbase or [], "kafka": kafka or [], "verify": verify or []},
        "ledger": {"url": f"sqlite:///{tmp_path / 'ledger.db'}"},
        "failover": {"max_lag_s": 300, "drain_timeout_s": 20, "reports_dir": str(tmp_path / "reports"),
                     **(failover or {})},
    }
    path = tmp_path / "drt.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def add_verify_report(ledger: Any, name: str, *, bad: int = 0, age_s: float = 0.0, source: str = "hdfs://hot/o",
                      target: str = "hdfs://cold/o", key: tuple[str, ...] = ("id",), start_time: float | None = None
                      ) -> str:
    """A verification report as the verify capability writes it (counters, times, and what was asked:
    by default what a policy ``{source: hdfs://hot/o, target: hdfs://cold/o, key: [id]}`` asks)."""
    from dr_toolkit.verify.request import VerifyRequest

    now = time.time() - age_s
    rid = f"verify-{uuid.uuid4().hex[:8]}"
    counters = {"GOODROWS": 10 - min(bad, 10), "BADROWS": bad, "ONLY_IN_SOURCE_TABLE_ROWS": bad,
                "ONLY_IN_PEER_TABLE_ROWS": 0, "CONTENT_DIFFERENT_ROWS": 0}
    request = {**VerifyRequest(source=source, target=target, key=list(key)).fingerprint(),
               "full_range": start_time is None}  # a run with a start time asks for part of the data
    ledger.add_verify_report(VerifyReportRow(report_id=rid, source=source, target=target, counters=counters,
                                             source_rows=10, peer_rows=10 - bad, started_at=now, finished_at=now,
                                             name=name, detail={"key": list(key), "request": request}))
    return rid


def drt(*args: str, config: Path, env: dict[str, str] | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    """Run the real `drt` command line in a subprocess."""
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


class ApiServer:
    """`airflow api-server` on 127.0.0.1 only (never `airflow standalone`), SimpleAuthManager, all admins."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkdtemp(prefix="drt-api-")) / "api-server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {**os.environ,
                "AIRFLOW__CORE__AUTH_MANAGER":
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__API__BASE_URL": self.url,
                "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__WORKERS": "1"}

    def start(self, timeout: float = 120) -> ApiServer:
        out = self.log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "1"], stdout=out, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
        deadline = time.monotonic() + timeout
        import urllib.request

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"api-server exited:\n{self.log.read_text()[-3000:]}")
            if port_open(self.port):
                try:
                    with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
            time.sleep(0.5)
        raise RuntimeError(f"api-server not ready in {timeout}s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            import signal

            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def token(self) -> str:
        import json
        import urllib.request

        req = urllib.request.Request(f"{self.url}/auth/token", method="GET")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return str(json.loads(r.read())["access_token"])
        except OSError:
            req = urllib.request.Request(f"{self.url}/auth/token", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                return str(json.loads(r.read())["access_token"])


@pytest.fixture(scope="session")
def api_server(airflow_home: Path) -> Iterator[ApiServer]:
    srv = ApiServer(airflow_home).start()
    yield srv
    srv.stop()


def chromium_dump_dom(url: str, *, timeout: float = 90, budget_ms: int = 15000) -> str:
    """Load ``url`` in real headless Chromium and return the DOM after scripts ran."""
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="drt-chromium-")
    try:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                            "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                            f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                           capture_output=True, text=True, timeout=timeout)
        return r.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def chromium_screenshot(url: str, out: Path, *, size: str = "1000,1100", budget_ms: int = 15000) -> Path:
    """Load ``url`` in real headless Chromium (after its scripts and redirects) and save a PNG."""
    exe = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="drt-chromium-")
    try:
        subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
                        f"--user-data-dir={profile}", f"--window-size={size}",
                        f"--virtual-time-budget={budget_ms}", f"--screenshot={out}", url],
                       capture_output=True, text=True, timeout=90)
        return out
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def assert_failover_report_in_chromium(html_path: Path, out_dir: Path, *, banner: tuple[int, int, int],
                                       remap_rows: int) -> str:
    """The failover report as real Chromium renders it: styled (the shared style's coloured header
    banner fills the top of the screenshot) and holding the Kafka remap table with ``remap_rows``
    rows. Returns the DOM."""
    from tests.support.png import decode

    assert shutil.which("chromium"), "Debian chromium is not installed (the report is checked in a real browser)"
    dom = chromium_dump_dom(html_path.as_uri())
    assert '<table id="kafka-remap">' in dom, dom[:3000]
    table = dom.split('<table id="kafka-remap">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr") == 1 + remap_rows, table
    img = decode(chromium_screenshot(html_path.as_uri(), out_dir / "failover-report.png"))
    rows = img.rows_with(banner, 900)  # the header banner spans the page (an unstyled page is white)
    assert rows and min(rows) == 0 and len(rows) >= 60, (len(rows), out_dir / "failover-report.png")
    heads = img.rows_with((0xF6, 0xF8, 0xFA), 300)  # the shared style's table heads (#f6f8fa)
    assert heads and min(heads) > max(rows), out_dir / "failover-report.png"
    return dom


class RealHBaseWorld:
    """The real hot and cold HBase (session pair, peer ``1``, table ``default:orders``) under a topology
    written with ``write_topology(..., hbase_clusters=(hot, cold))``. Lag is real: the peer is
    disabled through HBase's Admin API and rows are put on hot; draining enables it and waits until
    cold has every row and the toolkit proves drain."""

    _row = [9_000_000]

    def __init__(self, topo: Any, hot: Any, cold: Any, *, lagging: bool = False) -> None:
        self.topo, self.hot, self.cold = topo, hot, cold
        self.parent = hot.znode_parent
        self.drain()
        if lagging:
            self.lag()

    def put(self, n: int) -> None:
        self.hot.put(self._row[0], n)
        self._row[0] += n

    def lag(self, rows: int = 10) -> None:
        """Rows written on hot and not shipped (peer disabled): the open WAL's edits past the position."""
        self.hot.disable_peer("1")
        self.put(rows)

    def lag_whole_wal(self) -> None:
        """Rows not shipped in a WAL that was rolled: a whole WAL waits in the queue."""
        self.lag()
        self.hot.roll_wal()

    def drain(self, timeout: float = 120) -> None:
        from dr_toolkit.hbase.signals import hot_fs
        from dr_toolkit.hbase.status import fs_wal_length, replication_status

        if not self.hot.list_peers()["1"]["enabled"]:
            self.hot.enable_peer("1")
        self.cold.wait_rows(self.hot.count(), timeout=timeout)

        fs, root = hot_fs(self.topo, Access.from_env(), self.topo.policies.hbase[0].hbase_rootdir)
        deadline = time.monotonic() + timeout
        with self.zk() as zk:
            while not replication_status(zk, self.parent, wal_length=fs_wal_length(fs, root)).proven:
                assert time.monotonic() < deadline, "hot HBase never proven drained"
                time.sleep(0.3)

    def zk(self) -> Any:
        from dr_toolkit.zk.client import connect

        return connect(self.topo.hot.zookeeper, credentials=None)

    def close(self) -> None:
        from tests.support.fixtures_hbase import restore_hbase

        restore_hbase(self.hot, self.cold)


@pytest.fixture
def hbase_worlds(hbase_clusters: tuple[Any, Any]) -> Iterator[Any]:
    """``hbase_worlds(topo, lagging=...)`` makes a :class:`RealHBaseWorld` on the session's real HBase
    pair (``hbase_worlds.clusters``: pass it to ``write_topology(..., hbase_clusters=)``); after the
    test every world is closed (peers restored through HBase's Admin API)."""
    made: list[RealHBaseWorld] = []

    def make(topo: Any, **kw: Any) -> RealHBaseWorld:
        w = RealHBaseWorld(topo, *hbase_clusters, **kw)
        made.append(w)
        return w

    make.clusters = hbase_clusters  # type: ignore[attr-defined]
    yield make
    for w in made:
        w.close()


def znode_tree(zk: Any, root: str) -> dict[str, bytes]:
    """Every znode under ``root`` with its data, read directly through a kazoo client ({} when
    ``root`` does not exist)."""
    out: dict[str, bytes] = {}
    todo = [root]
    while todo:
        path = todo.pop()
        if zk.exists(path) is None:
            continue
        out[path] = zk.get(path)[0]
        todo += [f"{path}/{c}" for c in zk.get_children(path)]
    return out
