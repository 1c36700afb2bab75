"""Every failure of a `drt` command is one line on stderr and a documented exit code — on real
files, a real PostgreSQL, a real (absent) Spark master and ZooKeeper port, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.procs import free_port

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = "version: 1\nclusters:\n  a: {role: hot, local_root: a}\n  b: {role: cold, local_root: b}\n"


def drt(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=full, timeout=timeout)


def one_line(r: subprocess.CompletedProcess[str], code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("drt: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def topology(path: Path, ledger_url: str, extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CLUSTERS + extra + f"ledger: {{url: {json.dumps(ledger_url)}}}\n")
    return path


# --- the SQLite ledger ---------------------------------------------------------------------------------

def test_garbage_ledger_is_exit_3_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "ledger.db").write_bytes(os.urandom(8192))
    cfg = topology(tmp_path / "drt.yaml", "sqlite:///ledger.db")
    for cmd in (["status"], ["failover", "check"], ["replicate", "nope"]):
        line = one_line(drt("--config", str(cfg), *cmd, cwd=tmp_path), 3)
        assert str(tmp_path / "ledger.db") in line and "not a database" in line


def distcp_files(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "f.txt").write_text("x")
    return (tmp_path / "src").as_uri(), (tmp_path / "dst").as_uri()


def test_missing_ledger_directory_is_created_by_a_write_command(tmp_path: Path) -> None:
    cfg = topology(tmp_path / "conf" / "drt.yaml", "sqlite:///state/deep/ledger.db")
    r = drt("--json", "distcp", *distcp_files(tmp_path), "--config", str(cfg), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "conf" / "state" / "deep" / "ledger.db").is_file()


def test_ledger_directory_that_cannot_be_made_is_exit_3(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where a directory should be")
    cfg = topology(tmp_path / "drt.yaml", "sqlite:///state/x/ledger.db")
    line = one_line(drt("distcp", *distcp_files(tmp_path), "-c", str(cfg), cwd=tmp_path), 3)
    assert "cannot create the ledger's directory" in line and str(tmp_path / "state") in line


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("command", [("status",), ("failover", "check", "--timeout", "2"),
                                     ("kafka", "remap", "--group", "billing")])
def test_read_commands_create_no_ledger_and_no_directory(tmp_path: Path, command: tuple[str, ...]) -> None:
    """The README's `drt --config examples/embedded.yaml status` (or the example copied to ./drt.yaml
    in another directory) writes nothing anywhere: a read command answers from an empty ledger."""
    examples = tmp_path / "checkout" / "examples"
    examples.mkdir(parents=True)
    text = (REPO / "examples" / "embedded.yaml").read_text()
    for port in ("19092", "19093"):  # the unreachable brokers answer for remap within 2 s, not the default 10 s
        text = text.replace(f"127.0.0.1:{port}\n", f"127.0.0.1:{port}\n      timeout_s: 2\n")
    for port in ("127.0.0.1:2181", "127.0.0.1:19092", "127.0.0.1:19093"):  # nothing listens: quick answers
        text = text.replace(port, f"127.0.0.1:{free_port()}")
    (examples / "embedded.yaml").write_text(text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "drt.yaml").write_text(text)
    before = tree(tmp_path)
    for cwd, cfg in ((elsewhere, ["--config", str(examples / "embedded.yaml")]), (elsewhere, []),
                     (tmp_path / "checkout", ["--config", "examples/embedded.yaml"])):
        r = drt("--json", *cfg, *command, cwd=cwd, timeout=180)
        assert r.returncode in (0, 1, 3), r.stderr  # a verdict, or the unreachable brokers: never created
        assert tree(tmp_path) == before, sorted(tree(tmp_path) - before)
    if command == ("status",):
        doc = json.loads(r.stdout)
        missing = (tmp_path / "checkout" / "embedded-data" / "ledger.db").resolve()
        assert doc["missing"] == str(missing) and doc["ledger"] == f"sqlite:///{missing}"
        assert doc["replication"] == [] and doc["last_check"] is None
    if command[0] == "failover":
        doc = json.loads(r.stdout)
        assert doc["ledger_missing"]
        # the fencing read is bounded by --timeout like the signals (its ZooKeeper connect alone
        # would take 10 s), and nothing still trying to connect holds the finished check open
        fence = [x for x in doc["reasons"] if x.startswith("fencing state unreadable: zookeeper 127.0.0.1:")]
        assert fence and "did not answer within 2s" in fence[0], doc["reasons"]


def test_relative_ledger_url_resolves_against_the_topology_file(tmp_path: Path) -> None:
    """`cd /tmp && drt --config /path/examples/embedded.yaml status`: the ledger is the one
    next to the topology (as local_root is), not one in the current directory."""
    examples = tmp_path / "checkout" / "examples"
    examples.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "embedded.yaml", examples / "embedded.yaml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    expected = (tmp_path / "checkout" / "embedded-data" / "ledger.db").resolve()
    r = drt("--config", str(examples / "embedded.yaml"), "distcp", *distcp_files(tmp_path), "--json", cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    r = drt("--config", str(examples / "embedded.yaml"), "status", "--json", cwd=elsewhere)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ledger"] == f"sqlite:///{expected}"
    assert expected.is_file() and list(elsewhere.iterdir()) == []
    # a relative --config path works the same way
    r = drt("--config", "../checkout/examples/embedded.yaml", "--json", "status", cwd=elsewhere)
    assert r.returncode == 0 and json.loads(r.stdout)["ledger"] == f"sqlite:///{expected}"
    assert len(json.loads(r.stdout)["replication"]) == 1


def test_ledger_url_from_the_environment_is_relative_to_the_current_directory(tmp_path: Path) -> None:
    cfg = topology(tmp_path / "conf" / "drt.yaml", "sqlite:///topo.db")
    work = tmp_path / "work"
    work.mkdir()
    env = {"DRT_LEDGER_URL": "sqlite:///env/ledger.db"}
    r = drt("--json", "-c", str(cfg), "distcp", *distcp_files(tmp_path), cwd=work, env=env)
    assert r.returncode == 0, r.stderr
    r = drt("--json", "-c", str(cfg), "status", cwd=work, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ledger"] == f"sqlite:///{(work / 'env' / 'ledger.db').resolve()}"
    assert (work / "env" / "ledger.db").is_file() and not (tmp_path / "conf" / "topo.db").exists()


def test_bad_ledger_url_is_exit_2(tmp_path: Path) -> None:
    cfg = topology(tmp_path / "drt.yaml", "nonsense://")
    line = one_line(drt("status", "-c", str(cfg), cwd=tmp_path), 2)
    assert "bad ledger URL" in line


# --- PostgreSQL ----------------------------------------------------------------------------------------

def test_unreachable_postgresql_is_exit_3_and_hides_the_password(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    cfg = topology(tmp_path / "drt.yaml", f"postgresql+psycopg2://drt@127.0.0.1:{port}/drt")
    line = one_line(drt("status", "-c", str(cfg), cwd=tmp_path), 3)
    assert f"127.0.0.1:{port}" in line and "unreachable" in line
    r = drt("status", "-c", str(cfg), cwd=tmp_path,
            env={"DRT_LEDGER_URL": f"postgresql+psycopg2://drt:hunter2@127.0.0.1:{port}/drt"})
    assert "hunter2" not in one_line(r, 3)


def test_postgresql_that_refuses_is_exit_3(tmp_path: Path, postgres) -> None:  # type: ignore[no-untyped-def]
    url = postgres.create_database("drt_cli_ok").rsplit("/", 1)[0] + "/no_such_database"
    cfg = topology(tmp_path / "drt.yaml", url)
    line = one_line(drt("status", "-c", str(cfg), cwd=tmp_path), 3)
    assert "no_such_database" in line


def test_postgresql_ledger_password_from_the_connection(tmp_path: Path, postgres) -> None:  # type: ignore[no-untyped-def]
    url = postgres.create_database("drt_cli_conn")
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(CLUSTERS + f"ledger: {{url: {json.dumps(url)}, conn_id: drt_ledger}}\n")
    r = drt("--json", "status", "-c", str(cfg), cwd=tmp_path)
    line = one_line(r, 2)  # named but undefined: a ConfigError naming it, never a silent fall-back
    assert "drt_ledger" in line and "AIRFLOW_CONN_DRT_LEDGER" in line
    r = drt("--json", "status", "-c", str(cfg), cwd=tmp_path,
            env={"AIRFLOW_CONN_DRT_LEDGER": "postgres://postgres:s3cret@127.0.0.1/ignored"})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["schema_version"] >= 1 and "s3cret" not in r.stdout + r.stderr


# --- Spark, ZooKeeper ---------------------------------------------------------------------------------

def test_spark_master_that_does_not_answer_is_exit_3(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "p.csv").write_text("id,v\n1,x\n")
    port = free_port()
    r = drt("verify", (tmp_path / "a").as_uri(), (tmp_path / "b").as_uri(), "--key", "id", "--format", "csv",
            cwd=tmp_path, env={"DRT_SPARK_MASTER": f"spark://127.0.0.1:{port}"})
    line = one_line(r, 3)
    assert f"spark://127.0.0.1:{port}" in line and "does not answer" in line


def test_spark_without_java_is_exit_2_before_the_launcher_speaks(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "p.csv").write_text("id,v\n1,x\n")
    r = drt("verify", (tmp_path / "a").as_uri(), (tmp_path / "b").as_uri(), "--key", "id", "--format", "csv",
            cwd=tmp_path, env={"JAVA_HOME": str(tmp_path / "no-java")})
    line = one_line(r, 2)
    assert "JAVA_HOME" in line and "no-java" in line


def test_zookeeper_that_does_not_answer_is_exit_3(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(CLUSTERS.replace("local_root: a}", f"local_root: a, zookeeper: {{quorum: '127.0.0.1:{port}', "
                                                      "connect_timeout_s: 1, call_timeout_s: 1}}")
                   + "ledger: {url: 'sqlite:///l.db'}\n")
    for cmd in (["failover", "fence-status"], ["hbase", "status", "--timeout", "1"]):
        line = one_line(drt("--config", str(cfg), *cmd, cwd=tmp_path), 3)
        assert f"127.0.0.1:{port}" in line


def test_failover_run_stops_at_the_first_unreachable_zookeeper(tmp_path: Path) -> None:
    """`drt failover run` with ZooKeeper down: one error line at the first step that needs it, exit 3
    (it went on to every later step, each waiting out the same timeout, and said exit 1)."""
    port = free_port()
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(CLUSTERS.replace("local_root: a}", f"local_root: a, zookeeper: {{quorum: '127.0.0.1:{port}', "
                                                      "connect_timeout_s: 1, call_timeout_s: 1}}")
                   + "ledger: {url: 'sqlite:///l.db'}\n")
    r = drt("--config", str(cfg), "failover", "run", "--reason", "drill", cwd=tmp_path)
    assert r.returncode == 3, (r.returncode, r.stderr, r.stdout)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("drt: error: ")]
    assert len(errors) == 1 and "stopped at fence_hot" in errors[0] and f"127.0.0.1:{port}" in errors[0], r.stderr
    assert (r.stdout + r.stderr).count(f"127.0.0.1:{port}") == 1 and "Traceback" not in r.stderr
    from dr_toolkit.ledger import Ledger

    runs = Ledger.open(f"sqlite:///{tmp_path / 'l.db'}").failover_runs(limit=5)
    assert [x["status"] for x in runs] == ["failed"]


# --- files ----------------------------------------------------------------------------------------------

def test_topology_not_found_and_bad_yaml_are_exit_2(tmp_path: Path) -> None:
    line = one_line(drt("status", cwd=tmp_path), 2)  # ./drt.yaml by default
    assert "drt.yaml: topology file not found" in line
    (tmp_path / "drt.yaml").write_text("version: 1\nclusters:\n  a: {role: hot\n")
    line = one_line(drt("status", cwd=tmp_path), 2)
    assert "drt.yaml:" in line and "not valid YAML" in line
    line = one_line(drt("status", cwd=tmp_path, env={"DRT_CONFIG": str(tmp_path / "other.yaml")}), 2)
    assert "other.yaml: topology file not found" in line


# --- the demo's work directory ----------------------------------------------------------------------------

def test_make_demo_after_the_readme_examples_and_its_own_directory(tmp_path: Path) -> None:
    """`make test` / the README's examples, then `make demo`: the demo's directory is its own. A
    new directory is created, one a previous demo made is cleared (one line says so), a foreign one
    is refused (exit 2) naming what to delete or pass, and nothing in it is touched."""
    from drt_demo.demo import prepare_workdir

    checkout = tmp_path / "checkout"
    (checkout / "examples").mkdir(parents=True)
    for name in ("embedded.yaml", "production.yaml"):
        shutil.copy(REPO / "examples" / name, checkout / "examples" / name)
    for cmd in (["--config", "examples/embedded.yaml", "status"],
                ["--config", "examples/embedded.yaml", "failover", "check", "--timeout", "1"],
                ["--config", "examples/production.yaml", "config", "validate"]):
        drt(*cmd, cwd=checkout, timeout=180)
    demo_data = checkout / "demo-data"
    assert not demo_data.exists()
    assert prepare_workdir(demo_data) == f"created {demo_data}"
    (demo_data / "ledger.db").write_text("a previous demo's ledger")
    said = prepare_workdir(demo_data)
    assert said.startswith(f"cleared the previous demo's directory {demo_data}") and "\n" not in said
    assert sorted(p.name for p in demo_data.iterdir()) == [".drt-demo"]

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    line = one_line(drt("demo", "--workdir", str(foreign), cwd=tmp_path), 2)
    assert "not made by `drt demo`" in line and f"rm -r {foreign}" in line and "--workdir DIR" in line
    assert "make demo DEMO_ARGS=" in line
    assert sorted(p.name for p in foreign.iterdir()) == ["keep.txt"]


def test_ctrl_c_is_exit_130_in_one_line(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) while a command waits on a server: exit 130 (not 1, "found a problem"),
    one line. The "server" is a real socket that accepts and never answers."""
    import signal
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(120)
    port = srv.getsockname()[1]
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(CLUSTERS.replace("local_root: a}", f"local_root: a, zookeeper: {{quorum: '127.0.0.1:{port}', "
                                                      "connect_timeout_s: 300, call_timeout_s: 300}}")
                   + "ledger: {url: 'sqlite:///l.db'}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    p = subprocess.Popen([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(cfg), "failover",
                          "fence-status"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        conn, _ = srv.accept()  # drt is inside the command, waiting on "ZooKeeper"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        conn.close()
    finally:
        if p.poll() is None:
            p.kill()
        srv.close()
    assert p.returncode == 130, (p.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == ["drt: error: interrupted"], err


# --- drt status: the last verdict and RPO, nothing cut at 80 columns --------------------------------------

def test_status_shows_the_last_verdict_and_rpo_and_cuts_nothing_at_80_columns(tmp_path: Path) -> None:
    import time

    from dr_toolkit.ledger import Ledger, VerifyReportRow

    cfg = topology(tmp_path / "drt.yaml", "sqlite:///ledger.db", extra="failover: {rpo_slo_s: 900}\n")
    lg = Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}")
    now = time.time()
    long_path = str(tmp_path / ("reports-" + "x" * 60) / "verify-orders-table-20261125T170432Z.html")
    lg.add_verify_report(VerifyReportRow(report_id="verify-1", source="hdfs://hot/warehouse/orders",
                                         target="hdfs://cold/warehouse/orders", name="orders-table",
                                         counters={"GOODROWS": 20000, "BADROWS": 0, "ONLY_IN_SOURCE_TABLE_ROWS": 0,
                                                   "ONLY_IN_PEER_TABLE_ROWS": 0, "CONTENT_DIFFERENT_ROWS": 0},
                                         source_rows=20000, peer_rows=20000, started_at=now - 60,
                                         finished_at=now - 50, report_path=long_path))
    lg.add_gate_check(checked_at=now - 30, verdict="NO_GO", recovery_point=now - 30 - 1200,
                      components={}, reasons=["kafka orders: 15 records not mirrored"], source="cli",
                      limiting="kafka orders")
    r = drt("status", "-c", str(cfg), cwd=tmp_path, env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert long_path in out  # whole, on one line
    assert "last failover check: NO_GO at " in out and "by cli" in out
    rp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 1230))
    assert f"recovery point {rp} (limited by kafka orders), RPO 20m — SLO 15m: BREACHED" in out, out
    assert "- kafka orders: 15 records not mirrored" in out
    assert "…" not in out and "┃" not in out
    doc = json.loads(drt("--json", "status", "-c", str(cfg), cwd=tmp_path).stdout)
    c = doc["last_check"]
    assert c["verdict"] == "NO_GO" and round(c["rpo_s"]) == 1200 and c["slo_breached"] is True
    assert c["recovery_point_iso"] == rp and doc["missing"] is None


def test_demo_stop_stops_only_what_it_left_running(tmp_path: Path) -> None:
    """`drt demo --stop` (and the next `drt demo`, clearing its directory) stops the processes a
    `drt demo --ui` recorded in running.json — each only while it still runs the recorded command."""
    from drt_demo.demo import MARKER, prepare_workdir

    def started(argv: list[str]) -> subprocess.Popen[bytes]:
        """A process whose /proc cmdline is already ``argv`` (after fork, before exec, it is ours)."""
        p = subprocess.Popen(argv, start_new_session=True)
        while Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")[:len(argv)] != [a.encode() for a in argv]:
            time.sleep(0.01)
        return p

    work = tmp_path / "demo"
    work.mkdir()
    (work / MARKER).write_text("made by drt demo\n")
    left = started(["sleep", "600"])
    other = started(["sleep", "601"])
    try:
        (work / "running.json").write_text(json.dumps([
            {"name": "kafka-hot", "pid": left.pid, "cmdline": "sleep 600"},
            {"name": "reused-pid", "pid": other.pid, "cmdline": "java -jar something-else"}]))
        r = drt("demo", "--stop", "--workdir", str(work), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert f"stopped 1 process(es) left running in {work}" in r.stdout
        assert left.wait(timeout=60) is not None and other.poll() is None
        assert not (work / "running.json").exists()
        # the next demo clears the directory after stopping what is recorded there
        again = started(["sleep", "602"])
        (work / "running.json").write_text(json.dumps([{"name": "ui", "pid": again.pid, "cmdline": "sleep 602"}]))
        said = prepare_workdir(work)
        assert "stopped the 1 server(s) it left running" in said and again.wait(timeout=60) is not None
    finally:
        for p in (left, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_failover_check_is_stacked_and_cuts_nothing_at_80_columns(tmp_path: Path) -> None:
    text = (REPO / "examples" / "embedded.yaml").read_text()
    for port in ("127.0.0.1:2181", "127.0.0.1:19092", "127.0.0.1:19093"):
        text = text.replace(port, f"127.0.0.1:{free_port()}")
    (tmp_path / "drt.yaml").write_text(text)
    r = drt("failover", "check", "--timeout", "2", cwd=tmp_path, env={"COLUMNS": "80"}, timeout=180)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("verdict NO_GO  recovery point unknown (from ")
    assert "kafka group:billing: NOT caught up, lag -" in lines
    assert "    why: no verification report in the ledger" in lines
    fence = [ln for ln in lines if ln.startswith("- fencing state unreadable: zookeeper 127.0.0.1:")]
    assert fence and fence[0].endswith("— check that the quorum is up and reachable, or raise --timeout")
    assert not any(ch in r.stdout for ch in "…┃│"), r.stdout
    assert lines[-1].startswith(f"note: no ledger yet at {tmp_path.parent / 'embedded-data' / 'ledger.db'}")
