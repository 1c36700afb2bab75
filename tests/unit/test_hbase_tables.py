"""Table scope sweep: the shell-output parsers on captured-format text, the script generator, and the
non-interactive runner against a small executable stand-in for `hbase` (no HBase can run here: the
stand-in only proves how the shell is invoked — `hbase shell -n FILE`, stdin closed — and answers in
the shell's output format)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dr_toolkit.errors import ConfigError, ProblemFound
from dr_toolkit.hbase.tables import (
    TableScope,
    enable_script,
    parse_describe,
    parse_list,
    run_shell,
    sweep,
)

LIST_2X = """\
TABLE
audit
shop:customers
shop:orders
3 row(s)
Took 0.0313 seconds
=> ["audit", "shop:customers", "shop:orders"]
"""

LIST_1X = """\
TABLE
shop:orders
1 row(s) in 0.0120 seconds

=> ["shop:orders"]
"""

DESCRIBE_2X = """\
Table shop:orders is ENABLED
shop:orders
COLUMN FAMILIES DESCRIPTION
{NAME => 'd', BLOOMFILTER => 'ROW', IN_MEMORY => 'false', VERSIONS => '1', KEEP_DELETED_CELLS => 'FALSE', \
DATA_BLOCK_ENCODING => 'NONE', COMPRESSION => 'NONE', TTL => 'FOREVER', MIN_VERSIONS => '0', BLOCKCACHE => 'true', \
BLOCKSIZE => '65536', REPLICATION_SCOPE => '0'}

{NAME => 'm', BLOOMFILTER => 'ROW', IN_MEMORY => 'false', VERSIONS => '1', KEEP_DELETED_CELLS => 'FALSE', \
DATA_BLOCK_ENCODING => 'NONE', COMPRESSION => 'NONE', TTL => 'FOREVER', MIN_VERSIONS => '0', BLOCKCACHE => 'true', \
BLOCKSIZE => '65536', REPLICATION_SCOPE => '1'}

2 row(s)
Quota is disabled
Took 0.0760 seconds
"""

DESCRIBE_1X = """\
Table audit is ENABLED
audit
COLUMN FAMILIES DESCRIPTION
{NAME => 'e', DATA_BLOCK_ENCODING => 'NONE', BLOOMFILTER => 'ROW', REPLICATION_SCOPE => '1', VERSIONS => '1', \
COMPRESSION => 'NONE', MIN_VERSIONS => '0', TTL => 'FOREVER', KEEP_DELETED_CELLS => 'FALSE', BLOCKSIZE => '65536', \
IN_MEMORY => 'false', BLOCKCACHE => 'true'}
1 row(s) in 0.0290 seconds
"""

DESCRIBE_094 = """\
DESCRIPTION                                                         ENABLED
 {NAME => 'orders', FAMILIES => [{NAME => 'd', DATA_BLOCK_ENCODING => 'NONE', BLOOMFILTER => 'NONE', REPLICATION_ true
 SCOPE => '0', VERSIONS => '3'}, {NAME => 'x', REPLICATION_SCOPE => '1', VERSIONS => '3'}]}
1 row(s) in 0.0400 seconds
"""


def test_parse_list_2x_and_1x() -> None:
    assert parse_list(LIST_2X) == ["audit", "shop:customers", "shop:orders"]
    assert parse_list(LIST_1X) == ["shop:orders"]


def test_parse_describe_2x_1x() -> None:
    s = parse_describe(DESCRIBE_2X)
    assert s == TableScope("shop:orders", {"d": 0, "m": 1}) and s.lacking == ["d"] and not s.ok
    s = parse_describe(DESCRIBE_1X)
    assert s == TableScope("audit", {"e": 1}) and s.ok


def test_parse_describe_094_wrapped_column() -> None:
    # 0.94 wraps the description in a fixed-width column: REPLICATION_ / SCOPE split across lines
    joined = DESCRIBE_094.replace("REPLICATION_ true\n SCOPE", "REPLICATION_SCOPE")
    s = parse_describe(joined)
    assert s == TableScope("orders", {"d": 0, "x": 1})


def test_enable_script_forms() -> None:
    s = [TableScope("shop:orders", {"d": 0, "m": 1, "z": 0})]
    assert "enable_table_replication 'shop:orders'" in enable_script(s)
    alter = enable_script(s, method="alter")
    assert "alter 'shop:orders', {NAME => 'd', REPLICATION_SCOPE => 1}, {NAME => 'z', REPLICATION_SCOPE => 1}" in alter
    assert "'m'" not in alter and alter.rstrip().endswith("exit")
    legacy = enable_script(s, method="alter", hbase_version="0.94").splitlines()
    assert legacy[1:4] == ["disable 'shop:orders'", legacy[2], "enable 'shop:orders'"]
    with pytest.raises(ConfigError, match="invalid table name"):
        enable_script(["x'; system('rm')"])


STANDIN = r'''#!PYTHON
"""Stand-in for `hbase`: answers `hbase shell -n FILE` in the shell's output format from a JSON state."""
import json, os, re, sys
state_path = os.environ["FAKE_HBASE_STATE"]
st = json.load(open(state_path))
st.setdefault("calls", []).append({"argv": sys.argv[1:], "stdin_is_tty": os.isatty(0)})
def save():
    json.dump(st, open(state_path, "w"))
if sys.argv[1:3] != ["shell", "-n"] or len(sys.argv) != 4:
    save(); print("usage: only non-interactive mode is accepted here", file=sys.stderr); sys.exit(64)
for line in open(sys.argv[3]):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    if line == "exit":
        break
    m = re.match(r"^list(?: '([^']*)')?$", line)
    if m:
        pat = re.compile((m.group(1) or ".*").replace(".*", ".*") + "$")
        names = [t for t in sorted(st["tables"]) if pat.match(t)]
        print("TABLE"); [print(n) for n in names]; print(f"{len(names)} row(s)"); print("Took 0.0100 seconds")
        continue
    m = re.match(r'^puts "(.*)"$', line)
    if m:
        print(m.group(1)); continue
    m = re.match(r"^describe '([^']+)'$", line)
    if m:
        t = m.group(1)
        if t not in st["tables"]:
            print(f"ERROR: Unknown table {t}!", file=sys.stderr); save(); sys.exit(1)
        print(f"Table {t} is ENABLED"); print(t); print("COLUMN FAMILIES DESCRIPTION")
        for cf, scope in sorted(st["tables"][t].items()):
            print("{NAME => '%s', BLOOMFILTER => 'ROW', VERSIONS => '1', REPLICATION_SCOPE => '%d'}" % (cf, scope))
            print()
        print(f"{len(st['tables'][t])} row(s)"); print("Took 0.0200 seconds")
        continue
    m = re.match(r"^enable_table_replication '([^']+)'$", line)
    if m:
        for cf in st["tables"][m.group(1)]:
            st["tables"][m.group(1)][cf] = 1
        print(f"The replication of table '{m.group(1)}' successfully enabled"); continue
    m = re.match(r"^alter '([^']+)', (.*)$", line)
    if m:
        for cf in re.findall(r"NAME => '([^']+)', REPLICATION_SCOPE => 1", m.group(2)):
            st["tables"][m.group(1)][cf] = 1
        print("Updating all regions with the new schema...\n1/1 regions updated.\nDone."); continue
    print(f"NameError: undefined local variable or method `{line.split()[0]}'", file=sys.stderr); save(); sys.exit(1)
save()
'''


@pytest.fixture
def fake_hbase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    exe = tmp_path / "hbase"
    exe.write_text(STANDIN.replace("PYTHON", sys.executable))
    exe.chmod(0o755)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"tables": {"shop:orders": {"d": 0, "m": 1}, "shop:customers": {"c": 1},
                                            "audit": {"e": 0}, "other:t": {"x": 0}}}))
    monkeypatch.setenv("FAKE_HBASE_STATE", str(state))
    return str(exe), state


def test_runner_is_non_interactive(fake_hbase) -> None:
    exe, state = fake_hbase
    res = run_shell(exe, "list\nexit\n", timeout_s=30)
    assert "shop:orders" in res.stdout and res.command[1:3] == ["shell", "-n"]
    calls = json.loads(state.read_text())["calls"]
    assert calls[-1]["argv"][:2] == ["shell", "-n"] and calls[-1]["stdin_is_tty"] is False
    with pytest.raises(ProblemFound, match="exit 1"):
        run_shell(exe, "describe 'nope:nope'\n", timeout_s=30)
    with pytest.raises(ConfigError, match="hbase command not found"):
        run_shell("/nonexistent/hbase", "list\n")


def test_sweep_check_then_fix(fake_hbase) -> None:
    exe, state = fake_hbase
    res = sweep(exe, namespaces=["shop"], tables=["default:audit"], dry_run=True)
    assert res.tables_checked == 3
    assert res.lacking == [{"table": "audit", "families": ["e"]}, {"table": "shop:orders", "families": ["d"]}]
    assert res.script and "enable_table_replication 'shop:orders'" in res.script and not res.fixed
    assert json.loads(state.read_text())["tables"]["shop:orders"]["d"] == 0  # check changes nothing
    res = sweep(exe, namespaces=["shop"], tables=["audit"], fix=True, dry_run=False, method="alter")
    assert res.fixed
    tables = json.loads(state.read_text())["tables"]
    assert tables["shop:orders"] == {"d": 1, "m": 1} and tables["audit"] == {"e": 1}
    assert tables["other:t"] == {"x": 0}  # not protected: untouched
    assert sweep(exe, namespaces=["shop"], tables=["audit"]).lacking == []


def test_cli_tables_check_and_enable(fake_hbase, tmp_path: Path, capsys) -> None:
    from dr_toolkit.cli.main import main
    from dr_toolkit.ledger import Ledger

    exe, state = fake_hbase
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(f"""\
version: 1
clusters:
  hot: {{role: hot, local_root: {tmp_path}/h, hbase_shell: {exe}}}
  cold: {{role: cold, local_root: {tmp_path}/c}}
policies:
  hbase:
    - {{name: shop, peer_id: "1", namespaces: [shop], tables: [audit]}}
ledger: {{url: "sqlite:///{tmp_path}/l.db"}}
""")
    assert main(["--json", "--config", str(cfg), "hbase", "tables", "check"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [x["table"] for x in doc["lacking"]] == ["audit", "shop:orders"]
    assert main(["--json", "--config", str(cfg), "hbase", "tables", "enable", "--dry-run"]) == 1
    assert json.loads(state.read_text())["tables"]["audit"] == {"e": 0}
    capsys.readouterr()
    assert main(["--json", "--config", str(cfg), "hbase", "tables", "enable"]) == 0
    assert json.loads(capsys.readouterr().out)["fixed"] is True
    assert main(["--config", str(cfg), "hbase", "tables", "check"]) == 0
    events = Ledger.open(f"sqlite:///{tmp_path}/l.db").audit_events(component="hbase")
    assert [(e["action"], e["status"]) for e in events] == [("tables.enable", "ok")]
