"""What an operator meets first in the Airflow UI (issue 43 #1, #2), on a real `airflow api-server`
started as the demo starts it (``drt_demo.demo.api_server_argv``) and real headless Chromium:

- no "Plugin 'dr_toolkit' already registered" import error, even run from a directory holding a
  ``dr_toolkit.egg-info`` (the checkout after `pip install -e .`: a second dr-toolkit
  distribution, whose ``airflow.plugins`` entry point Airflow read as well);
- the DR page link opened in a fresh browser leads through Airflow's login back to the DR page,
  instead of answering ``{"detail":"Not authenticated"}``; a script without a token still gets 401;
- (#5) with the servers down, the page answers at once with the last recorded verdict while the
  live check runs behind; status.json waits for it, and the page is then the live one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_failover import chromium_dump_dom, write_topology
from tests.support.procs import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=60) as r:
            return r.status, dict(r.headers), r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode(errors="replace")


def test_the_dr_page_link_in_a_fresh_browser_and_no_plugin_import_error(airflow_home, tmp_path) -> None:
    from drt_demo.demo import api_server_argv
    from drt_servers.process import ManagedProcess

    assert shutil.which("chromium"), "Debian chromium is not installed (the page is checked in a real browser)"
    # the directory the server runs from holds a dr_toolkit.egg-info, as the checkout does after
    # `pip install -e .` (made here by setuptools' egg_info, nothing written in the checkout)
    cwd = tmp_path / "checkout-like"
    cwd.mkdir()
    r = subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "egg_info",
                        "--egg-base", str(cwd)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and (cwd / "dr_toolkit.egg-info" / "entry_points.txt").is_file(), r.stderr

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "s3cret-demo"}))
    # as the demo's --ui: SimpleAuthManager with a user and its password (not all-admins)
    # a topology whose servers are all down, with one check recorded (GO, two minutes ago)
    topology = write_topology(tmp_path, zk=f"127.0.0.1:{free_port()}", verify=[
        {"name": "orders", "source": "hdfs://hot/o", "target": "hdfs://cold/o", "key": ["id"]}])
    now = time.time()
    Ledger.open(load_topology(topology).ledger.url).add_gate_check(
        checked_at=now - 120, verdict="GO", recovery_point=now - 180, reasons=[], source="dag:dr_rpo_watch",
        components={"verify orders": {"component": "verify", "name": "orders", "caught_up": True, "lag_s": 60.0,
                                      "safe_time": now - 180}})
    env = {"DRT_CONFIG": str(topology), "AIRFLOW__CORE__AUTH_MANAGER":
               "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords), "AIRFLOW__API__BASE_URL": url,
           "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__WORKERS": "1"}

    def healthy() -> bool:
        return _get(f"{url}/api/v2/monitor/health")[0] == 200

    api = ManagedProcess("airflow-api-server", api_server_argv(port), port=port, log_dir=tmp_path, env=env,
                         cwd=cwd, start_timeout=240, ready=healthy)
    api.start()
    try:
        req = urllib.request.Request(f"{url}/auth/token", method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"username": "admin", "password": "s3cret-demo"}).encode())
        with urllib.request.urlopen(req, timeout=60) as resp:
            code, body = resp.status, resp.read().decode()
        assert code in (200, 201), body[:500]
        auth = {"Authorization": f"Bearer {json.loads(body)['access_token']}"}

        # 1. the plugin is registered once: no import error, one dr_toolkit plugin
        code, _, body = _get(f"{url}/api/v2/plugins/importErrors", auth)
        assert code == 200 and json.loads(body)["total_entries"] == 0, body
        code, _, body = _get(f"{url}/api/v2/plugins", auth)
        assert [p["name"] for p in json.loads(body)["plugins"]].count("dr_toolkit") == 1, body

        # 2. a browser without a session is sent to the login, next = the page
        code, headers, body = _get(f"{url}/dr-toolkit/", {"Accept": "text/html,application/xhtml+xml"})
        assert code == 307, (code, body[:300])
        loc = urlparse(headers["location"])
        assert loc.path == "/api/v2/auth/login" and parse_qs(loc.query)["next"] == [f"{url}/dr-toolkit/"], loc
        # a script without a token: 401 as before
        code, _, body = _get(f"{url}/dr-toolkit/status.json")
        assert code == 401 and json.loads(body) == {"detail": "Not authenticated"}, body
        # a fresh Chromium (no cookie) opening the link lands on Airflow's login page
        dom = chromium_dump_dom(f"{url}/dr-toolkit/")
        (tmp_path / "dom.html").write_text(dom)
        assert "Not authenticated" not in dom and 'type="password"' in dom, dom[:3000]
        # with a session (the login's token) the same link is the DR page — at once, the last recorded
        # verdict (the live check waits on the components' timeouts: it runs behind)
        code, _, page = _get(f"{url}/dr-toolkit/", {**auth, "Accept": "text/html"})
        assert code == 200 and "<h1>DR status</h1>" in page
        assert 'id="verdict" class="GO">GO' in page and "the last recorded check" in page, page[-3000:]
        code, _, body = _get(f"{url}/dr-toolkit/status.json", auth)  # the page's script: waits for it
        assert code == 200 and json.loads(body)["gate"]["verdict"] == "NO_GO", body[:500]
        code, _, page = _get(f"{url}/dr-toolkit/", {**auth, "Accept": "text/html"})  # the reload
        assert 'id="verdict" class="NO_GO">NO_GO' in page and "live check of" in page, page[-3000:]
    finally:
        api.stop()
        if api.running:
            api.kill()
