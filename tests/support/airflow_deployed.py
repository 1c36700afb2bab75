"""Airflow as deployed, for tests: its own metadata database on the suite's PostgreSQL, `airflow db
migrate`, then the api-server, scheduler, dag-processor and triggerer as child processes with the
LocalExecutor — the project's DAG bundles, one JWT secret and API secret key shared by all, every
process on 127.0.0.1. No ``dag.test()``: the scheduler runs the DAGs, LocalExecutor workers run
their tasks through the Execution API, the triggerer runs the deferred sensors.

``deployed_env(home, sql_alchemy_conn, port)`` is the environment every process gets: the demo's
``--ui`` one (``drt_demo.demo.deployed_env``; docker-compose.yml uses the same settings) with the
tests' DAG bundle and no login. A process that cannot start raises
``RuntimeError`` naming it (with its log): the test fails, it is never skipped.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drt_demo.demo import COMPONENTS, DEPLOYED_SETTINGS, FAST_SETTINGS
from drt_demo.demo import deployed_env as demo_deployed_env
from tests.support.airflow import DAG_FOLDERS
from tests.support.procs import ManagedProcess, free_port, port_open

__all__ = ["COMPONENTS", "DEPLOYED_SETTINGS", "FAST_SETTINGS", "TEST_AUTH", "AirflowDeployment", "deployed_env",
           "stray_processes"]

# tests only: no login (every caller is an admin named "Anonymous"); docker-compose.yml has users
TEST_AUTH = {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}


def deployed_env(home: Path, sql_alchemy_conn: str, api_port: int, *, jwt_secret: str, secret_key: str
                 ) -> dict[str, str]:
    """The environment shared by every Airflow process of one test deployment: the demo's
    (drt_demo.demo.deployed_env, with the tests' own DAG bundle) and no login."""
    return {**demo_deployed_env(home, sql_alchemy_conn, api_port, jwt_secret=jwt_secret, secret_key=secret_key,
                                extra_dag_folders=(DAG_FOLDERS[1],), log_level="INFO"), **TEST_AUTH}


class AirflowDeployment:
    """One Airflow deployment (see the module doc). ``start()`` returns when the api-server answers
    and the scheduler, dag-processor and triggerer each report healthy through it."""

    def __init__(self, postgres: Any, *, extra_env: dict[str, str] | None = None) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="drt-airflow-deployed-"))
        self.home.chmod(0o755)
        self.db = f"airflow_{uuid.uuid4().hex[:8]}"
        self.conn = postgres.create_database(self.db)
        self.port = free_port()
        self.env = {**os.environ, **deployed_env(self.home, self.conn, self.port, jwt_secret=secrets.token_hex(32),
                                                 secret_key=secrets.token_hex(16)), **(extra_env or {})}
        self.procs: list[ManagedProcess] = []
        self._token: tuple[str, float] | None = None
        self.timings: dict[str, float] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _proc(self, name: str, argv: list[str], port: int, ready: Callable[[], bool], timeout: float
              ) -> ManagedProcess:
        p = ManagedProcess(f"airflow-{name}", [sys.executable, "-m", "airflow", *argv], port=port, log_dir=self.home,
                           ready=ready, env=self.env, start_timeout=timeout)
        p.env = self.env  # exactly the deployment's environment (not the test process's airflow settings)
        self.procs.append(p)
        return p

    def start(self, timeout: float = 240) -> AirflowDeployment:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                           env=self.env, timeout=600)
        if r.returncode:
            raise RuntimeError(f"airflow db migrate on PostgreSQL failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        api = self._proc("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(self.port), "--workers",
                                        "1"], self.port, self._api_ready, timeout)
        api.start()
        self.timings["db migrate + api-server"] = time.monotonic() - t0
        for name in COMPONENTS:
            self._proc(name, [name], 0, lambda: True, timeout).start()
        deadline = time.monotonic() + timeout
        while True:
            health = self.health()
            bad = [c for c in ("scheduler", "dag_processor", "triggerer")
                   if (health.get(c) or {}).get("status") != "healthy"]
            for p in self.procs:
                if p.proc is not None and p.proc.poll() is not None:
                    raise RuntimeError(f"{p.name} exited with {p.proc.returncode}:\n{p.log_tail(80)}")
            if not bad:
                self.timings["all healthy"] = time.monotonic() - t0
                return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"Airflow's {', '.join(bad)} not healthy after {timeout:g}s: {health}\n"
                                   + "\n".join(f"--- {p.name}\n{p.log_tail(40)}" for p in self.procs))
            time.sleep(1)

    def _api_ready(self) -> bool:
        if not port_open(self.port):
            return False
        with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as r:
            return bool(r.status == 200)

    def health(self) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=10) as r:
                return dict(json.loads(r.read()))
        except OSError:
            return {}

    def token(self) -> str:
        if self._token and self._token[1] > time.monotonic():
            return self._token[0]
        with urllib.request.urlopen(urllib.request.Request(f"{self.url}/auth/token", method="GET"), timeout=10) as r:
            tok = str(json.loads(r.read())["access_token"])
        self._token = (tok, time.monotonic() + 600)
        return tok

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One call of Airflow's REST API (``/api/v2`` + ``path``) as the (all-admins) user."""
        req = urllib.request.Request(f"{self.url}/api/v2{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {self.token()}",
                                              "Content-Type": "application/json"})
        last: OSError | None = None
        for _attempt in range(3 if method != "POST" else 1):  # an api-server slow on busy cores: asked again
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return json.loads(r.read() or b"null")
            except urllib.error.HTTPError as exc:
                raise RuntimeError(f"{method} {path}: HTTP {exc.code} {exc.read()[:500]!r}") from None
            except OSError as exc:  # a timeout, a refused connection
                last = exc
        raise RuntimeError(f"{method} {path}: {type(last).__name__}: {last}")

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """One try's task log as the UI shows it (through the REST API), as text."""
        from urllib.parse import quote

        req = urllib.request.Request(
            f"{self.url}/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/logs/"
            f"{try_number}?full_content=true", headers={"Authorization": f"Bearer {self.token()}",
                                                        "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.dumps(json.loads(r.read()))

    def wait_for(self, what: str, fn: Callable[[], Any], timeout: float = 180, every: float = 1.0) -> Any:
        """Poll ``fn`` until it returns something truthy (returned); a bound, not a timing assert:
        past it the test fails naming ``what`` with the processes' logs."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.proc is not None and p.proc.poll() is not None:
                    raise AssertionError(f"{p.name} died while waiting for {what}:\n{p.log_tail(80)}")
            try:
                last = fn()
            except RuntimeError as exc:  # an API call refused (the DAG not parsed yet, …): shown if it lasts
                last = exc
            else:
                if last:
                    return last
            time.sleep(every)
        raise AssertionError(f"not seen within {timeout:g}s: {what} (last: {last!r})\n{self.logs(40)}")

    def logs(self, lines: int = 60) -> str:
        return "\n".join(f"----- {p.name}\n{p.log_tail(lines)}" for p in self.procs)

    def pids(self) -> list[int]:
        return [p.proc.pid for p in self.procs if p.proc is not None]

    def stop(self) -> None:
        """Stop every process (whole process groups: LocalExecutor workers and task runners too)."""
        import signal

        from tests.support.procs import ALL_SERVERS

        for p in self.procs:  # all at once: each shuts down in parallel (then SIGKILL after 10 s)
            if p.proc is not None and p.proc.poll() is None:
                try:
                    os.killpg(p.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for p in self.procs:
            if p.proc is not None:
                try:
                    p.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        for p in reversed(self.procs):
            p.kill()  # what is left of each process group (LocalExecutor workers, task runners)
            if p in ALL_SERVERS:
                ALL_SERVERS.remove(p)
        shutil.rmtree(self.home, ignore_errors=True)


def stray_processes(marker: str) -> list[str]:
    """Command lines of live processes holding ``marker`` (the deployment's home) — none after stop."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in env or marker in cmd:
            out.append(f"{d.name}: {cmd[:200]}")
    return out
