"""A NameNode address answered by something that is not WebHDFS — a plain web server on the wrong
port — is reported as such, not as "source … does not exist" (issue 43 #4): the `hdfs` library takes
any non-2xx answer of GETFILESTATUS for a missing file (`status(strict=False)` returns None), so
WebHdfsFileSystem checks every failed answer for WebHDFS's RemoteException JSON.

The servers here are real HTTP servers (Python's http.server on a free 127.0.0.1 port) answering an
HTML error page, as a web server, a UI or a proxy on a wrongly written address does. A real NameNode's
own answers (a missing file: 404 with RemoteException FileNotFoundException) are the business of
tests/integration/test_webhdfs_fs.py and test_fs_conformance.py, which still pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


class _Page(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        status = self.server.status  # type: ignore[attr-defined]
        body = f"<html><body><h1>Error {status}</h1></body></html>".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(status: int) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    server.status = status  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def web_404() -> Iterator[str]:
    yield from _serve(404)


@pytest.fixture
def web_502() -> Iterator[str]:
    yield from _serve(502)


def drt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_the_filesystem_says_what_answered(web_404: str) -> None:
    fs = WebHdfsFileSystem([f"http://{web_404}"], timeout_s=10)
    with pytest.raises(ConfigError) as err:
        fs.stat("/data")
    text = str(err.value)
    assert f"webhdfs://{web_404} answered HTTP 404 (text/html), not a NameNode's WebHDFS (/webhdfs/v1)" in text
    assert "9870" in text


def test_a_proxy_error_page_is_unreachable_not_missing(web_502: str) -> None:
    fs = WebHdfsFileSystem([f"http://{web_502}"], timeout_s=10)
    with pytest.raises(UnreachableError, match="answered HTTP 502 \\(text/html\\)"):
        fs.stat("/data")


def test_distcp_from_a_web_server_is_one_line_exit_2(web_404: str, tmp_path: Path) -> None:
    r = drt("distcp", f"webhdfs://{web_404}/data", str(tmp_path / "target"), cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("drt: error: "), r.stderr
    assert f"webhdfs://{web_404} answered HTTP 404 (text/html), not a NameNode's WebHDFS" in lines[0]
    assert "does not exist" not in r.stderr
    assert not (tmp_path / "target").exists()


def test_the_gate_names_what_answered(web_404: str, tmp_path: Path) -> None:
    (tmp_path / "cold").mkdir()
    (tmp_path / "drt.yaml").write_text(f"""version: 1
clusters:
  hot:
    role: hot
    hdfs:
      namenodes: [http://{web_404}]
  cold:
    role: cold
    local_root: cold
ledger:
  url: sqlite:///ledger.db
policies:
  hdfs:
    - name: p
      source: hdfs://hot/data
      targets: [hdfs://cold/data]
""")
    r = drt("--json", "failover", "check", cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "NO_GO"
    reasons = " ".join(doc["reasons"])
    assert f"webhdfs://{web_404} answered HTTP 404 (text/html), not a NameNode's WebHDFS" in reasons, reasons
    assert "does not exist" not in reasons
