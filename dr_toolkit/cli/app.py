"""The typer application behind `drt`: the global options and the command modules.

:func:`dr_toolkit.cli.main.main` builds it with only the module of the command being run, so
start-up pays for one command's imports, not all of them; :func:`build_app` without
arguments gives the whole tree (tests walk it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Annotated

import typer

from dr_toolkit.cli.common import State, setup_logging

HELP = "dr-toolkit: keep a cold cluster in step with a hot one, and fail over with evidence."

# One module per capability; each defines register(app). Order = order in `drt --help`.
MODULES = ("config_cmd", "status", "distcp", "kafka", "hbase", "verify", "failover", "demo")


def _global(
    ctx: typer.Context,
    config: Annotated[str | None, typer.Option(
        "--config", "-c", envvar="DRT_CONFIG", help="Topology file \\[default: ./drt.yaml].")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Machine output (JSON) on stdout; logs go to stderr.")] = False,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True,
                                         help="More logging (-vv: debug, and the traceback of an internal "
                                              "error).")] = 0,
) -> None:
    setup_logging(verbose)
    ctx.obj = State(config=config, json=json_out, verbose=verbose)


def build_app(modules: Iterable[str] = MODULES) -> typer.Typer:
    """A `drt` application with the commands of ``modules`` (default: all of them)."""
    app = typer.Typer(
        name="drt",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_global)
    for name in dict.fromkeys(modules):
        importlib.import_module(f"dr_toolkit.cli.{name}").register(app)
    return app
