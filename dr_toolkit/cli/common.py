"""What every `drt` command shares: the global options, topology and ledger access, output.

``--json`` puts machine output (one JSON document) on stdout and logs on stderr; without it
a readable table goes to stdout. Errors are raised as :class:`dr_toolkit.errors.DrtError`
and turned into one line on stderr and the exit code by :func:`dr_toolkit.cli.main.main`.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from dr_toolkit.access import Access
from dr_toolkit.failback.direction import directed
from dr_toolkit.ledger import open_ledger
from dr_toolkit.ledger.store import sqlite_file
from dr_toolkit.topology import load_topology

if TYPE_CHECKING:
    import typer
    from rich.console import Console

    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology


class _LazyConsole:
    """A rich Console made on first use: rich costs start-up time a command may never need
    (machine output, errors, a command that prints nothing)."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def _get(self) -> Console:
        if self._console is None:
            import os

            from rich.console import Console

            # piped or redirected (no terminal, no COLUMNS): rich would wrap every line at 80
            # columns; a result line is one line however long (its width is the content's)
            stream = sys.stderr if self._stderr else sys.stdout
            piped = not stream.isatty() and not os.environ.get("COLUMNS")
            self._console = Console(stderr=self._stderr, width=4096 if piped else None, soft_wrap=piped)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __enter__(self) -> Console:
        return self._get().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._get().__exit__(*exc)


err_console = cast("Console", _LazyConsole(stderr=True))
out_console = cast("Console", _LazyConsole(stderr=False))


def _env_access() -> Access:
    return Access.from_env()


@dataclass
class State:
    config: str | None = None
    json: bool = False
    verbose: int = 0
    _configured: Topology | None = field(default=None, repr=False)
    _topology: Topology | None = field(default=None, repr=False)
    _ledger: Ledger | None = field(default=None, repr=False)
    _access: Access = field(default_factory=_env_access, repr=False)

    def access(self) -> Access:
        """Credentials for every endpoint: ``AIRFLOW_CONN_<CONN_ID>`` from the environment — the CLI
        is one edge where the access value is built, once per command."""
        return self._access

    def configured_topology(self) -> Topology:
        """The topology file as written (the roles it configures)."""
        if self._configured is None:
            self._configured = load_topology(self.config)
        return self._configured

    def topology(self) -> Topology:
        """The topology of the direction the estate is protected in now: as configured, or the
        other way after a re-protect (:func:`dr_toolkit.failback.direction.directed`: the ledger's
        last direction event; a ledger not opened yet by this command is read without being created)."""
        if self._topology is None:
            conf = self.configured_topology()
            self._topology = directed(conf, self._ledger or open_ledger(conf, self.access(), create=False))
        return self._topology

    def ledger(self, *, read_only: bool = False) -> Ledger:
        """The topology's ledger. A read command (``read_only``) never creates one: a SQLite
        ledger that does not exist yet is answered by an empty one (``Ledger.missing`` names it)."""
        if self._ledger is None:
            topo = self.configured_topology()
            if not read_only:
                _note_new_ledger(topo)
            self._ledger = open_ledger(topo, self.access(), create=not read_only)
            if _NEW_LEDGER:
                _NEW_LEDGER[-1]["ledger"] = self._ledger
        return self._ledger


#: the SQLite ledger a write command is about to create (its file and the directories made for it);
#: see :func:`undo_new_ledger`
_NEW_LEDGER: list[dict[str, Any]] = []


def _note_new_ledger(topo: Topology) -> None:
    from pathlib import Path

    base = Path(topo.source_file).resolve().parent if topo.source_file else None
    path = sqlite_file(topo.ledger.url, base)
    if path is None or path.exists():
        return
    made = []
    d = path.parent
    while not d.exists():
        made.append(d)
        d = d.parent
    _NEW_LEDGER.append({"path": path, "dirs": made})


def undo_new_ledger() -> None:
    """A command that ended refused (exit 2, 3 …) leaves no ledger behind it had created itself:
    when the SQLite file did not exist before this command and it still holds no row (nothing was
    recorded: the refusal came before any run started), the file, its journal and the directories
    made for it are removed again (issue 43 #9). A ledger with any row is kept, and so is one another
    process has open (its WAL files remain once ours are closed: two commands started together on a
    first run)."""
    import contextlib
    import sqlite3

    while _NEW_LEDGER:
        new = _NEW_LEDGER.pop()
        path = new["path"]
        ledger = new.get("ledger")
        if ledger is not None:
            ledger.engine.dispose()
        if any(path.with_name(path.name + s).exists() for s in ("-wal", "-shm")):
            continue  # our connections are closed: another process has it open (WAL mode) — keep it
        if path.exists():
            try:
                with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                    if any(db.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()  # table names read from the file
                           for t in tables if t != "schema_version"):
                        continue
            except sqlite3.Error:
                continue
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    path.with_name(path.name + suffix).unlink()
        for d in new["dirs"]:  # innermost first; only while empty
            with contextlib.suppress(OSError):
                d.rmdir()


def state(ctx: typer.Context) -> State:
    obj = ctx.find_root().obj
    assert isinstance(obj, State)
    return obj


def emit(ctx: typer.Context, data: Any, render: Callable[[Any], None] | None = None) -> None:
    """Print ``data`` as JSON (``--json``) or through ``render`` (a readable view)."""
    if state(ctx).json or render is None:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    else:
        render(data)


def setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
