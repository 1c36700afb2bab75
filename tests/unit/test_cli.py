"""`drt` global behaviour: global options anywhere on every command (walking the whole command
tree), exit codes, JSON on stdout, one-line errors on stderr, and what start-up imports."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from dr_toolkit.cli import main as cli
from dr_toolkit.cli.app import MODULES, build_app
from dr_toolkit.errors import ConfigError, DrtError, UnreachableError, as_drt_error

REPO = Path(__file__).resolve().parents[2]
EMBEDDED = str(REPO / "examples" / "embedded.yaml")
PRODUCTION = str(REPO / "examples" / "production.yaml")
GLOBAL_NAMES = {"--json", "--config", "-c", "-v", "--verbose"}


def drt(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, env=env)


@pytest.fixture(autouse=True)
def _contained_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() sets PYDANTIC_DISABLE_PLUGINS for its process; keep it out of the other tests."""
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    monkeypatch.delenv("DRT_CONFIG", raising=False)
    monkeypatch.delenv("DRT_LEDGER_URL", raising=False)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = cli.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("drt: error: "), err
    return lines[0]


def tree() -> Any:
    return typer.main.get_command(build_app())


def leaves(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from leaves(sub, (*path, name))
    else:
        yield path, cmd


def every_command(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, cmd
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from every_command(sub, (*path, name))


LEAVES = [p for p, _ in leaves(tree())]


# --- global options anywhere ---------------------------------------------------------------------

def test_tree_is_whole() -> None:
    """Every capability's commands are there (no module is skipped as 'not built yet')."""
    tops = {p[0] for p in LEAVES}
    assert tops == set(cli.COMMANDS)
    assert {("kafka", "remap"), ("failover", "check"), ("hbase", "peers", "add"), ("config", "validate"),
            ("distcp",), ("verify",), ("status",)} <= set(LEAVES)


def test_no_command_declares_a_global_option() -> None:
    """The global options are hoisted in front of the command: a command that declared its own
    --json, --config/-c or -v would never see it."""
    for path, cmd in every_command(tree()):
        if not path:
            continue
        names = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        assert not names & GLOBAL_NAMES, (path, names & GLOBAL_NAMES)


@pytest.mark.parametrize("path", LEAVES, ids=[" ".join(p) for p in LEAVES])
def test_global_options_before_between_and_after(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
                                                 ) -> None:
    """`--json --config X -v` at every position of every command's path: the parser accepts
    them (an unknown option fails before --help is honoured)."""
    globals_ = ["--json", "--config", EMBEDDED, "-v"]
    for k in range(len(path) + 1):
        args = [*path[:k], *globals_, *path[k:], "--help"]
        rc, out, err = run(capsys, *args)
        assert rc == 0, (args, err)
        assert "Usage" in out, (args, out)
    rc, _, err = run(capsys, *path, "--config=" + EMBEDDED, "-vv", "--json", "--help")
    assert rc == 0, err


def test_globals_after_the_subcommand_take_effect(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "config", "validate", "--json", "-c", PRODUCTION)
    assert rc == 0, err
    assert json.loads(out)["hot"] == "prod"
    rc, out, err = run(capsys, "config", "--json", "validate", "--config", EMBEDDED)
    assert rc == 0, err
    assert json.loads(out)["file"] == EMBEDDED
    rc, out, err = run(capsys, "kafka", "remap", "--group", "g", "--json", "-c", "/nonexistent/drt.yaml")
    assert rc == 2
    assert "/nonexistent/drt.yaml: topology file not found" in one_line(err)


def test_double_dash_stops_hoisting() -> None:
    assert cli.hoist_globals(["distcp", "a", "--json", "b"]) == ["--json", "distcp", "a", "b"]
    assert cli.hoist_globals(["x", "--", "--json", "-c", "f"]) == ["x", "--", "--json", "-c", "f"]
    assert cli.hoist_globals(["x", "--config=f", "-vv"]) == ["--config=f", "-vv", "x"]
    assert cli.hoist_globals(["x", "-c"]) == ["x", "-c"]  # no value: left for the parser to refuse
    assert cli.verbosity(["-vv", "--verbose", "-v", "--", "-vvv"]) == 4


# --- help -------------------------------------------------------------------------------------------

def test_top_help_table_matches_the_registered_commands() -> None:
    root = tree()
    assert list(cli.COMMANDS) == [n for n in cli.COMMANDS if n in root.commands]
    for name, (module, summary) in cli.COMMANDS.items():
        assert module in MODULES
        cmd = root.commands[name]
        first = " ".join((cmd.help or "").strip().split("\n\n")[0].split())
        assert summary == first, name
        alone = typer.main.get_command(build_app([module]))
        assert name in alone.commands, (name, module)  # `drt NAME` loads only MODULE


def test_help_reads_well(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--help"], [], ["-h"], ["--json", "--help"]):
        rc, out, err = run(capsys, *args)
        assert rc == 0 and err == ""
        assert "--config" in out and "--json" in out and "status" in out and "Exit codes" in out


def test_a_bare_group_shows_its_commands(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "kafka")
    assert rc == 0 and "remap" in out
    rc, out, _ = run(capsys, "hbase", "peers")
    assert rc == 0 and "sync" in out


# --- errors -----------------------------------------------------------------------------------------

def test_broken_config_exit_2_one_line() -> None:
    r = drt("--config", "examples/broken.yaml", "config", "validate")
    assert r.returncode == 2
    line = one_line(r.stderr)
    assert "examples/broken.yaml:9" in line and "bootstrap_server" in line
    assert r.stdout == ""


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["no-such-command"], 2, "no such command 'no-such-command'"),
    (["statsu"], 2, "did you mean 'status'"),
    (["--bogus"], 2, "no such option: --bogus"),
    (["kafka", "remap", "--bogus"], 2, "no such option: --bogus"),
    (["kafka", "remap"], 2, "give --group G or --all"),
    (["kafka", "nope"], 2, "no such command 'nope'"),
    (["distcp", "only-one-arg"], 2, "missing argument 'SOURCE'"),  # SOURCE... TARGET: the one word is TARGET
    (["hbase", "peers", "add", "--json"], 2, "drt hbase peers add --help"),
    (["distcp", "--workers", "x", "a", "b"], 2, "'--workers'"),
    (["status", "-c"], 2, "option -c needs a value"),
    (["--config"], 2, "option --config needs a value"),
])
def test_usage_errors_are_one_line(args: list[str], code: int, needle: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, *args)
    assert rc == code
    assert needle in one_line(err)
    assert out == ""


def test_topology_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text("version: 1\nclusters: [a\n")
    (tmp_path / "bin.yaml").write_bytes(b"\xc0\xff\x00garbage")
    for args, needle in (
        (["-c", str(tmp_path / "missing.yaml"), "status"], "topology file not found"),
        (["-c", str(tmp_path / "bad.yaml"), "status"], "bad.yaml:3: not valid YAML"),
        (["-c", str(tmp_path / "bin.yaml"), "config", "show"], "not UTF-8 text"),
        (["-c", str(tmp_path), "config", "validate"], "cannot read the topology file"),
    ):
        rc, out, err = run(capsys, *args)
        assert rc == 2, err
        assert needle in one_line(err)


def test_a_bug_is_one_line_exit_1_with_the_traceback_only_under_vv(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from dr_toolkit.cli.common import State

    def broken(self: State) -> Any:
        raise KeyError("clusters")

    monkeypatch.setattr(State, "configured_topology", broken)
    rc, out, err = run(capsys, "config", "validate")
    assert rc == 1
    line = one_line(err)
    assert "internal error (a bug in drt): builtins.KeyError" in line and "-vv" in line
    assert "Traceback" not in err
    rc, out, err = run(capsys, "config", "validate", "-vv")
    assert rc == 1
    assert "Traceback (most recent call last)" in err and "in broken" in err
    assert err.strip().splitlines()[-1].startswith("drt: error: internal error")


def test_error_lines_hide_secrets(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from dr_toolkit.cli.common import State

    def leaky(self: State) -> Any:
        raise ConfigError("cannot log in to postgresql://drt:hunter2@db/drt", hint="password=hunter2")

    monkeypatch.setattr(State, "configured_topology", leaky)
    rc, _, err = run(capsys, "config", "validate")
    assert rc == 2 and "hunter2" not in err and "***" in one_line(err)


# --- failure classes that are not DrtError ------------------------------------------------------------

def _sqlalchemy_errors() -> list[tuple[BaseException, int]]:
    import sqlite3

    from sqlalchemy.exc import ArgumentError, DatabaseError, OperationalError

    return [(OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked")), 3),
            (DatabaseError("SELECT 1", {}, sqlite3.DatabaseError("file is not a database")), 3),
            (ArgumentError("Could not parse SQLAlchemy URL"), 2)]


def _spark_errors() -> list[tuple[BaseException, int]]:
    from py4j.protocol import Py4JNetworkError
    from pyspark.errors import AnalysisException, PySparkRuntimeError

    return [(PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={}), 3),
            (Py4JNetworkError("An error occurred while trying to connect to the Java server"), 3),
            (AnalysisException(message="[UNRESOLVED_COLUMN] id cannot be resolved"), 2)]


def _zk_errors() -> list[tuple[BaseException, int]]:
    from kazoo.exceptions import ConnectionLoss, NoAuthError, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError

    return [(KazooTimeoutError("Connection time-out"), 3), (ConnectionLoss(), 3), (SessionExpiredError(), 3),
            (NoAuthError(), 2)]


def _aws_http_errors() -> list[tuple[BaseException, int]]:
    import requests
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "PutObject")
    slow = ClientError({"Error": {"Code": "SlowDown", "Message": "Reduce your request rate"}}, "PutObject")
    return [(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), 3), (NoCredentialsError(), 2),
            (denied, 2), (slow, 3), (requests.ConnectionError("Max retries exceeded"), 3),
            (requests.exceptions.MissingSchema("Invalid URL 'nn1:9870'"), 2)]


def _os_errors() -> list[tuple[BaseException, int]]:
    import errno
    import socket

    return [(FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/report.html"), 2),
            (PermissionError(errno.EACCES, "Permission denied", "/root/x"), 2),
            (OSError(errno.ENOSPC, "No space left on device", "/data/f"), 3),
            (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), 3),
            (TimeoutError("timed out"), 3), (socket.gaierror(-2, "Name or service not known"), 3)]


@pytest.mark.parametrize("make", [_sqlalchemy_errors, _spark_errors, _zk_errors, _aws_http_errors, _os_errors])
def test_known_failure_classes_map_to_documented_codes(make: Any) -> None:
    for exc, code in make():
        err = as_drt_error(exc)
        assert isinstance(err, DrtError), exc
        assert err.exit_code == code, (exc, err.message)
        assert "\n" not in err.message and err.message


def test_a_java_stack_trace_becomes_its_exception_line() -> None:
    from py4j.protocol import Py4JError

    exc = Py4JError("An error occurred while calling o31.load.\n"
                    ": java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.\n"
                    "\tat org.apache.spark.SparkContext.assertNotStopped(SparkContext.scala:122)\n")
    err = as_drt_error(exc)
    assert isinstance(err, UnreachableError)
    assert "IllegalStateException: Cannot call methods on a stopped SparkContext" in err.message
    assert "\tat " not in err.message and "o31" not in err.message


def test_unknown_exceptions_are_bugs() -> None:
    assert as_drt_error(KeyError("x")) is None
    assert as_drt_error(ZeroDivisionError()) is None


# --- what start-up imports ---------------------------------------------------------------------------

PROBE = ("import json, sys\nfrom dr_toolkit.cli.main import main\nrc = main(sys.argv[2:])\n"
         "open(sys.argv[1], 'w').write(json.dumps({'rc': rc, 'modules': sorted(sys.modules)}))\n")
HEAVY = {"sqlalchemy", "pyspark", "py4j", "boto3", "botocore", "confluent_kafka", "kazoo", "hdfs", "requests",
         "airflow", "pandas"}


def imported(tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "modules.json"
    r = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    d = json.loads(out.read_text())
    assert d["rc"] == 0, r.stderr
    return {m.split(".")[0] for m in d["modules"]}


def test_help_imports_nothing_heavy(tmp_path: Path) -> None:
    mods = imported(tmp_path, "--help")
    assert not mods & (HEAVY | {"typer", "rich", "pydantic", "yaml"}), mods & (HEAVY | {"typer", "rich"})


@pytest.mark.usefixtures("copy_state_dir")  # runs a copy
def test_distcp_and_config_validate_import_only_what_they_use(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    mods = imported(tmp_path, "--json", "distcp", src.as_uri(), (tmp_path / "dst").as_uri())
    assert not mods & (HEAVY | {"yaml"}), mods & (HEAVY | {"yaml"})
    assert not imported(tmp_path, "distcp", "--help") & HEAVY
    mods = imported(tmp_path, "--json", "--config", EMBEDDED, "config", "validate")
    assert not mods & HEAVY, mods & HEAVY
    (tmp_path / "t.yaml").write_text("version: 1\nclusters:\n  a: {role: hot, local_root: a}\n"
                                     "  b: {role: cold, local_root: b}\nledger: {url: 'sqlite:///l.db'}\n")
    mods = imported(tmp_path, "--json", "--config", str(tmp_path / "t.yaml"), "status")
    assert "sqlalchemy" in mods and not mods & {"pyspark", "boto3", "kazoo"}


# --- subprocess end to end ------------------------------------------------------------------------------

def test_validate_json() -> None:
    r = drt("--json", "--config", "examples/production.yaml", "config", "validate")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["valid"] is True and out["hot"] == "prod" and out["policies"]["hdfs"] == 2


def test_config_show_fills_defaults_as_json() -> None:
    r = drt("config", "show", "--config", "examples/embedded.yaml")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ledger"]["url"].startswith("sqlite:///") and out["failover"]["max_lag_s"] == 300
    assert "source_file" not in out


def test_status_json_on_fresh_ledger(tmp_path: Path) -> None:
    cfg = tmp_path / "drt.yaml"
    cfg.write_text("version: 1\nclusters:\n  a: {role: hot, local_root: /tmp/a}\n  b: {role: cold, local_root: /tmp/b}\n"
                   f"ledger: {{url: 'sqlite:///{tmp_path}/l.db'}}\n")
    r = drt("status", "--json", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["schema_version"] >= 1 and out["replication"] == []


def test_unknown_command_is_usage_error() -> None:
    r = drt("no-such-command")
    assert r.returncode == 2
    one_line(r.stderr)


# --- what users meet first (issue 24, item 5) ---------------------------------------------------------------

def test_unknown_commands_have_one_wording_at_every_level(capsys: pytest.CaptureFixture[str]) -> None:
    for args, path in ((["statsu"], "drt"), (["failover", "chek"], "drt failover"),
                       (["hbase", "peers", "lsit"], "drt hbase peers")):
        rc, _, err = run(capsys, *args)
        line = one_line(err)
        assert rc == 2
        typo = args[-1]
        assert line.startswith(f"drt: error: no such command '{typo}' (did you mean '"), line
        assert line.endswith(f"'?) — see `{path} --help`"), line


def test_every_help_is_plain_shows_defaults_and_lists_the_global_options(capsys: pytest.CaptureFixture[str]
                                                                         ) -> None:
    seen = 0
    for path, _cmd in leaves(tree()):
        rc, out, err = run(capsys, *path, "--help")
        assert rc == 0 and err == "", (path, err)
        assert "Global options (before or after the command):" in out, path
        for opt in ("-c, --config PATH", "--json", "-v, --verbose"):
            assert opt in out, (path, opt)
        for bad in ("╭", "│", "<bool>", "<float>", "<str>", "<int", "<list["):
            assert bad not in out, (path, bad, out)
        assert "{" not in out.splitlines()[0], out  # the usage line: SOURCE, not {SOURCE}
        seen += 1
    assert seen > 20
    rc, out, _ = run(capsys, "hbase", "peers", "add", "--help")
    assert "[default: hot]" in out and "[default: 2.5]" in out  # not read as markup
    rc, out, _ = run(capsys, "distcp", "--help")
    assert "Usage: drt distcp [OPTIONS] SOURCE... TARGET" in out and "[default: 8; 1<=x<=512]" in out
    rc, out, _ = run(capsys, "kafka", "--help")  # a group too
    assert "Global options" in out


def test_help_fits_80_columns(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "COLUMNS": "80"}
    for args in (["failover", "check", "--help"], ["distcp", "--help"], ["status", "--help"]):
        r = drt(*args, env=env)
        assert r.returncode == 0
        assert max(len(ln) for ln in r.stdout.splitlines()) <= 90, r.stdout  # the global lines: ~88


@pytest.mark.parametrize(("word", "says"), [("-async", "no equivalent: drt distcp runs in the foreground"),
                                            ("-atomic", "does not swap the whole tree in at once"),
                                            ("-xtrack", "no equivalent"),
                                            ("-updateRoot", "no equivalent"),
                                            ("-tmp", "no equivalent")])
def test_distcp_single_dash_spellings_are_answered(word: str, says: str, capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    for cmd in (["distcp", word, "file:///a", "file:///b"], ["distcp", "file:///a", "file:///b", word]):
        rc, out, err = run(capsys, *cmd)
        line = one_line(err)
        assert rc == 2 and out == ""
        assert line.startswith(f"drt: error: DistCp's {word} ") and says in line, line
        assert line.endswith("— see `drt distcp --help`")
    rc, _, err = run(capsys, "distcp", "file:///a", "file:///b", "--", "-update")  # after --: untouched
    assert "DistCp's" not in err


def test_distcp_options_of_distcp_are_options_here(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "distcp", "--help")
    assert rc == 0
    for opt in ("-filters, --filters FILE", "-i, --ignore-failures", "-log, --log DIR", "-m, --workers",
                "-strategy, --strategy", "-p [ugpaxtb]", "-numListstatusThreads, --list-threads", "-diff, --diff S1 S2", "-rdiff, --rdiff S2 S1",
                "perm,times,owner,group,acl,xattr"):
        assert opt in out, opt


@pytest.mark.parametrize(("args", "needle"), [
    (["-pr"], "-pr: r (replication) is not preserved here"),
    (["-pe"], "-pe: e (erasure coding policy) is not preserved here"),
    (["-pugz"], "-pugz: unknown letter 'z'"),
    (["--preserve", "perm,bogus"], "unknown --preserve value 'bogus'"),
    (["-strategy", "fast"], "unknown -strategy 'fast'"),
    (["-m", "0"], "'--workers' / '-m'"),
    (["-numListstatusThreads", "0"], "'--list-threads' / '-numListstatusThreads'"),
    (["-filters", "/no/such/filters"], "-filters /no/such/filters: cannot read it"),
    (["-diff", "s1", "s2"], "-diff needs --update"),
    (["--update", "-rdiff", "s2", "s1", "-diff", "s1", "s2"], "-diff and -rdiff do not go together"),
])
def test_distcp_bad_option_values_are_one_line_and_exit_2(args: list[str], needle: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "distcp", *args, "file:///nonexistent-a", "file:///nonexistent-b")
    assert rc == 2 and out == "" and needle in one_line(err)


def test_distcp_parses_distcp_spellings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dr_toolkit.cli.distcp import preserve_list, read_filters

    assert preserve_list(None, "ugpaxtb") == ["owner", "group", "permissions", "acl", "xattr", "times"]
    assert preserve_list("perm,times", None) == ["permissions", "times"]
    assert preserve_list("owner", None) == ["owner"]
    assert preserve_list(None, "a") == ["acl", "permissions"]  # -pa implies -pp, as in DistCp
    f = tmp_path / "filters"
    f.write_text(".*\\.tmp\n\n/staging\n")
    assert read_filters(str(f)) == [".*\\.tmp", "/staging"]
    # a bare -p takes no value: the next word stays the source (not its letters)
    rc, out, err = run(capsys, "distcp", "-p", "file:///nonexistent-a", "file:///nonexistent-b")
    assert rc == 2 and "the source file:///nonexistent-a does not exist" in one_line(err)
    # several sources: colliding names refused before anything is looked at on disk
    rc, out, err = run(capsys, "distcp", "file:///x/logs", "file:///y/logs", str(tmp_path / "dst"))
    assert rc == 2 and "would both be copied to" in one_line(err) and not (tmp_path / "dst").exists()
    rc, out, err = run(capsys, "distcp", "--update", "-diff", "s1", "s2", "file:///a", "file:///b", "file:///c")
    assert rc == 2 and "-diff takes one source" in one_line(err)


def test_every_config_problem_is_listed_and_in_json() -> None:
    r = drt("--config", "examples/broken.yaml", "config", "validate")
    line = r.stderr.strip()
    assert r.returncode == 2 and len(line.splitlines()) == 1
    assert "unknown field clusters.hot.kafka.bootstrap_server" in line
    assert "2 problems; also: line 8: missing field clusters.hot.kafka.bootstrap_servers" in line
    assert "more problem" not in line
    r = drt("--json", "--config", "examples/broken.yaml", "config", "validate")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    doc = json.loads(r.stdout)
    assert doc["valid"] is False
    assert [(p["line"], p["field"]) for p in doc["problems"]] == [
        (9, "clusters.hot.kafka.bootstrap_server"), (8, "clusters.hot.kafka.bootstrap_servers")]


def test_distcp_takes_spark_master_like_verify(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "distcp", "--help")
    assert rc == 0 and "--spark-master TEXT" in out
    rc, _, err = run(capsys, "distcp", "file:///a", "file:///b", "--spark-master", "local[2]")
    assert rc == 2 and "--spark-master needs --engine spark" in one_line(err)
    rc, _, err = run(capsys, "distcp", "file:///a", "file:///b", "--engine", "spark", "--spark-master", "bogus://x")
    assert rc == 2 and "'bogus://x' is not a Spark master URL" in one_line(err)
