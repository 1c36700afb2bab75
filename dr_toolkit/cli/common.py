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
    from dr_toolkit.access import Access

    return Access.from_env()


@dataclass
class State:
    config: str | None = None
    json: bool = False
    verbose: int = 0
    _topology: Topology | None = field(default=None, repr=False)
    _ledger: Ledger | None = field(default=None, repr=False)
    _access: Access = field(default_factory=_env_access, repr=False)

    def access(self) -> Access:
        """Credentials for every endpoint: ``AIRFLOW_CONN_<CONN_ID>`` from the environment — the CLI
        is one edge where the access value is built, once per command."""
        return self._access

    def topology(self) -> Topology:
        if self._topology is None:
            from dr_toolkit.topology import load_topology

            self._topology = load_topology(self.config)
        return self._topology

    def ledger(self, *, read_only: bool = False) -> Ledger:
        """The topology's ledger. A read command (``read_only``) never creates one: a SQLite
        ledger that does not exist yet is answered by an empty one (``Ledger.missing`` names it)."""
        if self._ledger is None:
            from dr_toolkit.ledger import open_ledger  # SQLAlchemy: only for commands that use the ledger

            self._ledger = open_ledger(self.topology(), self.access(), create=not read_only)
        return self._ledger


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
