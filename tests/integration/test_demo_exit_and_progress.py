"""What the operator sees while waiting (issue 43 #6): a demo that leaves its servers running
(`--ui`) ends without "ResourceWarning: subprocess … still running"; `drt demo --stop` says
which server it is stopping, and when it has; `drt failover check` shows a progress line on the
terminal while it asks the components. A real ZooKeeper (drt_servers) is the server left running;
the check runs on examples/embedded.yaml with nothing listening, its stderr a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.procs import free_port

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

REPO = Path(__file__).resolve().parents[2]

# A demo whose server is left running, as `drt demo --ui` ends: the demo's quiet stderr on (it
# turns ResourceWarning on), a real ZooKeeper among its servers, recorded in running.json as
# leave_ui_running records each, then Demo.close() with keep_running and the interpreter's exit.
LEFT_RUNNING = """
import json, sys
from pathlib import Path
from drt_demo.demo import Demo, MARKER
from drt_servers.zookeeper import zookeeper

work = Path(sys.argv[1])
demo = Demo(work, print)
work.mkdir()
(work / MARKER).write_text("made by drt demo\\n")
demo.logs.mkdir()
demo.quiet.start(demo.logs / "third-party.log")
zk = zookeeper(work / "servers").start()
demo.ctx.servers.append(zk)
demo.keep_running = True
cmd = Path(f"/proc/{zk.proc.pid}/cmdline").read_bytes().replace(b"\\0", b" ").decode().strip()
(work / "running.json").write_text(json.dumps([{"name": "zookeeper", "pid": zk.proc.pid, "cmdline": cmd}]))
demo.close()
print(zk.proc.pid)
"""


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL", "COLUMNS")}


def test_servers_left_running_end_quietly_and_stop_says_what_it_does(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-c", LEFT_RUNNING, str(work)], capture_output=True, text=True, env=env(),
                       cwd=REPO, timeout=300)
    pid = int(r.stdout.split()[-1])
    try:
        assert r.returncode == 0, r.stderr
        assert "ResourceWarning" not in r.stderr and "still running" not in r.stderr, r.stderr
        assert Path(f"/proc/{pid}").exists()  # left running, as --ui leaves it

        stop = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "demo", "--stop", "--workdir", str(work)],
                              capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=120)
        assert stop.returncode == 0, stop.stderr
        lines = stop.stderr.splitlines()
        assert lines[0] == f"stopping zookeeper (pid {pid}) …", stop.stderr
        assert lines[1].startswith("  zookeeper stopped in ") and len(lines) == 2, stop.stderr
        assert stop.stdout == f"stopped 1 process(es) left running in {work}\n"
        assert not (work / "running.json").exists()
    finally:
        if Path(f"/proc/{pid}").exists():
            os.killpg(pid, 9)


def test_failover_check_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    text = (REPO / "examples" / "embedded.yaml").read_text()
    for port in ("127.0.0.1:2181", "127.0.0.1:19092", "127.0.0.1:19093"):  # nothing listens there
        text = text.replace(port, f"127.0.0.1:{free_port()}")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "embedded.yaml").write_text(text)
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "--config", "examples/embedded.yaml",
                             "failover", "check", "--timeout", "3"], cwd=tmp_path, env={**env(), "TERM": "xterm"},
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's last writer is gone
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=180)
    reader.join(timeout=30)
    os.close(master)
    assert proc.returncode == 1, (out, seen.decode(errors="replace"))  # NO_GO: nothing answers
    assert "verdict NO_GO" in out
    assert "failover check: asking HDFS, HBase, Kafka and ZooKeeper" in seen.decode(errors="replace"), seen
    # --json with stderr piped: the document alone on stdout, nothing on stderr
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "--config", "examples/embedded.yaml",
                        "failover", "check", "--timeout", "3"], cwd=tmp_path, env=env(), capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 1 and json.loads(r.stdout)["verdict"] == "NO_GO" and r.stderr == "", r.stderr
