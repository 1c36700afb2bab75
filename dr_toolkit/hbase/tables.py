"""Per-table replication scope through the ``hbase shell``: check, generate the fix, run it.

Every column family of every protected table must have ``REPLICATION_SCOPE => 1`` — set up
*before* data is written (CDAP's DDL hook), so a scheduled sweep finds tables that lack it.
There is no HBase API reachable from Python without extra services, so the toolkit talks to
the ``hbase shell`` in non-interactive mode (``hbase shell -n FILE``: exits non-zero on the
first error, never waits for input) and parses its ``list`` / ``describe`` output.

* :func:`parse_list`, :func:`parse_describe` read the shell's text (HBase 0.94 one-line
  ``describe``, and 1.x/2.x ``COLUMN FAMILIES DESCRIPTION``).
* :func:`enable_script` generates ``enable_table_replication 'ns:t'`` (HBase ≥ 1.0; also
  creates/compares the table on the peers) or, with ``method="alter"``,
  ``alter 'ns:t', {NAME => 'cf', REPLICATION_SCOPE => 1}`` for the families that lack it
  (wrapped in ``disable``/``enable`` for HBase < 0.96, which cannot alter online).
* :func:`run_shell` runs a script; :func:`check_tables` and :func:`sweep` combine them.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

from dr_toolkit.errors import ConfigError, ProblemFound, UnreachableError

_MARK = "DRT-SECTION"
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+(:[A-Za-z0-9_.\-]+)?$")


@dataclass
class TableScope:
    table: str
    families: dict[str, int] = field(default_factory=dict)  # family -> REPLICATION_SCOPE

    @property
    def lacking(self) -> list[str]:
        return sorted(f for f, s in self.families.items() if s != 1)

    @property
    def ok(self) -> bool:
        return bool(self.families) and not self.lacking


@dataclass
class ShellResult:
    returncode: int
    stdout: str
    stderr: str
    command: list[str]


# --- parsing --------------------------------------------------------------------------------------


def parse_list(text: str) -> list[str]:
    """Table names from ``list`` / ``list 'ns:.*'`` / ``list_namespace_tables`` output."""
    out: list[str] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line == "TABLE":
            inside = True
            continue
        if not inside:
            continue
        if re.match(r"^\d+ row\(s\)", line) or line.startswith(("Took ", "=>")) or not line:
            inside = False if line and not line.startswith("=>") else inside
            continue
        if _TABLE_NAME.match(line):
            out.append(line)
    return out


def _quoted(s: str) -> str | None:
    m = re.match(r"\s*'([^']*)'", s) or re.match(r'\s*"([^"]*)"', s)
    return m.group(1) if m else None


def parse_describe(text: str, table: str | None = None) -> TableScope | None:
    """Column families and their scopes from ``describe 'table'`` output; None if none found."""
    m = re.search(r"^\s*Table (\S+) is (?:ENABLED|DISABLED)", text, re.MULTILINE)
    name = table or (m.group(1) if m else None)
    families: dict[str, int] = {}
    chunks = re.split(r"\bNAME\s*=>", text)[1:]
    for chunk in chunks:
        n = _quoted(chunk)
        if n is None:
            continue
        if re.search(r"\bFAMILIES\s*=>", chunk):
            name = table or n  # HBase 0.94: {NAME => 'table', FAMILIES => [{NAME => 'cf', ...}]}
            continue
        s = re.search(r"REPLICATION_SCOPE\s*=>\s*'?(\d+)'?", chunk)
        families[n] = int(s.group(1)) if s else 0  # absent = HBase's default scope 0
    if not families or name is None:
        return None
    return TableScope(name, families)


def parse_sections(text: str) -> dict[str, str]:
    """Split output of a script made by :func:`describe_script` into ``{table: describe text}``."""
    out: dict[str, str] = {}
    cur: str | None = None
    for line in text.splitlines():
        if line.startswith(_MARK + " "):
            cur = line[len(_MARK) + 1:].strip()
            out[cur] = ""
        elif cur is not None:
            out[cur] += line + "\n"
    return out


# --- generating ----------------------------------------------------------------------------------


def _q(table: str) -> str:
    if not _TABLE_NAME.match(table):
        raise ConfigError(f"invalid table name {table!r}", hint="expected namespace:table or table")
    return f"'{table}'"


def list_script(namespaces: list[str]) -> str:
    lines = [f"list '{ns}:.*'" if ns != "default" else "list" for ns in namespaces] or ["list"]
    return "\n".join(lines) + "\nexit\n"


def describe_script(tables: list[str]) -> str:
    lines = []
    for t in tables:
        lines.append(f'puts "{_MARK} {t}"')
        lines.append(f"describe {_q(t)}")
    return "\n".join(lines) + "\nexit\n"


def enable_script(scopes: list[TableScope] | list[str], *, method: str = "enable_table_replication",
                  hbase_version: str = "2.5") -> str:
    """The shell script that gives every listed table ``REPLICATION_SCOPE => 1`` on every family."""
    lines = ["# generated by dr-toolkit: set REPLICATION_SCOPE => 1 (run with: hbase shell -n FILE)"]
    legacy = tuple(int(x) for x in re.findall(r"\d+", hbase_version)[:2]) < (0, 96)
    for s in scopes:
        table = s if isinstance(s, str) else s.table
        if method == "enable_table_replication":
            lines.append(f"enable_table_replication {_q(table)}")
            continue
        if method != "alter":
            raise ConfigError(f"unknown method {method!r}", hint="use enable_table_replication or alter")
        if isinstance(s, str):
            raise ConfigError(f"table {table}: the alter method needs the column families (describe the table first)")
        fams = s.lacking
        if not fams:
            continue
        specs = ", ".join(f"{{NAME => '{f}', REPLICATION_SCOPE => 1}}" for f in fams)
        if legacy:
            lines.append(f"disable {_q(table)}")
        lines.append(f"alter {_q(table)}, {specs}")
        if legacy:
            lines.append(f"enable {_q(table)}")
    return "\n".join(lines) + "\nexit\n"


# --- running -------------------------------------------------------------------------------------


def shell_env(kerberos: Any = None) -> dict[str, str]:
    """The environment of an ``hbase`` command: on a kerberized cluster (``kerberos``, a
    :class:`dr_toolkit.kerberos.Kerberos` holder — else the environment's ``DRT_KERBEROS_PRINCIPAL``)
    a valid ticket is obtained first (a missing keytab or unknown principal: KerberosError, exit 3)
    and ``KRB5CCNAME`` names the toolkit's private ticket cache, which ``hbase shell`` (Hadoop's
    UserGroupInformation) logs in from. A ticket someone obtained with ``kinit`` is passed as it is."""
    if kerberos is None:
        from dr_toolkit.kerberos import kerberos_wanted

        kerberos = kerberos_wanted(False)
    if kerberos is None:
        return {}
    kerberos.credentials()
    if not kerberos.cfg.keytab:
        return {}
    return {"KRB5CCNAME": kerberos.ccache}


def run_shell(hbase_shell: str, script: str, *, timeout_s: float = 600.0, env: dict[str, str] | None = None,
              check: bool = True, kerberos: Any = None) -> ShellResult:
    """Run ``hbase shell -n FILE`` (non-interactive: stops at the first error, stdin closed); with
    Kerberos, on the toolkit's ticket (:func:`shell_env`)."""
    child = {**os.environ, **shell_env(kerberos), **(env or {})}
    with tempfile.NamedTemporaryFile("w", suffix=".rb", prefix="drt-hbase-", delete=False) as f:
        f.write(script)
        path = f.name
    cmd = [hbase_shell, "shell", "-n", path]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                           env=child)
    except FileNotFoundError:
        raise ConfigError(f"hbase command not found: {hbase_shell}",
                          hint="set clusters.<name>.hbase_shell in the topology to the `hbase` executable") from None
    except subprocess.TimeoutExpired:
        raise UnreachableError(f"hbase shell did not finish within {timeout_s:g}s", where=" ".join(cmd),
                               hint="check that HBase (master, ZooKeeper) is up") from None
    finally:
        os.unlink(path)
    res = ShellResult(p.returncode, p.stdout, p.stderr, cmd)
    if check and p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise ProblemFound(f"hbase shell failed with exit {p.returncode}: {' | '.join(tail)}", where=" ".join(cmd))
    return res


def _select(all_tables: list[str], namespaces: list[str], tables: list[str]) -> list[str]:
    def ns_of(t: str) -> str:
        return t.split(":", 1)[0] if ":" in t else "default"

    def norm(t: str) -> str:
        return t[len("default:"):] if t.startswith("default:") else t

    wanted = {norm(t) for t in tables}
    out = [t for t in all_tables if ns_of(t) in namespaces or norm(t) in wanted
           or any(fnmatch.fnmatchcase(t, norm(w)) for w in wanted if any(ch in w for ch in "*?["))]
    return sorted(set(out))


def check_tables(hbase_shell: str, *, namespaces: list[str], tables: list[str], timeout_s: float = 600.0
                 ) -> list[TableScope]:
    """Describe every table of ``namespaces`` plus ``tables``; return their families' scopes."""
    listed = parse_list(run_shell(hbase_shell, list_script(sorted(set(namespaces)) + (["default"] if tables else [])),
                                  timeout_s=timeout_s).stdout)
    selected = _select(listed, namespaces, tables)
    if not selected:
        return []
    sections = parse_sections(run_shell(hbase_shell, describe_script(selected), timeout_s=timeout_s).stdout)
    out = []
    for t in selected:
        sc = parse_describe(sections.get(t, ""), t)
        out.append(sc or TableScope(t, {}))
    return out


@dataclass
class SweepResult:
    tables_checked: int
    lacking: list[dict[str, Any]]
    script: str | None
    fixed: bool
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def sweep(hbase_shell: str, *, namespaces: list[str], tables: list[str], fix: bool = False, dry_run: bool = True,
          method: str = "enable_table_replication", hbase_version: str = "2.5", timeout_s: float = 600.0
          ) -> SweepResult:
    """Find tables lacking scope; with ``fix`` and not ``dry_run``, run the generated script and re-check."""
    scopes = check_tables(hbase_shell, namespaces=namespaces, tables=tables, timeout_s=timeout_s)
    bad = [s for s in scopes if not s.ok]
    script = enable_script(bad, method=method, hbase_version=hbase_version) if bad else None
    fixed = False
    if bad and fix and not dry_run and script:
        run_shell(hbase_shell, script, timeout_s=timeout_s)
        again = {s.table: s for s in check_tables(hbase_shell, namespaces=namespaces, tables=tables,
                                                  timeout_s=timeout_s)}
        fixed = all(again.get(s.table) is not None and again[s.table].ok for s in bad)
    return SweepResult(len(scopes), [{"table": s.table, "families": s.lacking} for s in bad], script, fixed, dry_run)
