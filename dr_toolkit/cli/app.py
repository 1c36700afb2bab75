"""The typer application behind `drt`: the global options and the command modules.

:func:`dr_toolkit.cli.main.main` builds it with only the module of the command being run, so
start-up pays for one command's imports, not all of them; :func:`build_app` without
arguments gives the whole tree (tests walk it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Annotated, Any

import typer

from dr_toolkit.cli.common import State, setup_logging
from dr_toolkit.cli.options import GLOBAL_OPTIONS

HELP = "dr-toolkit: keep a cold cluster in step with a hot one, and fail over with evidence."

# One module per capability; each defines register(app). Order = order in `drt --help`.
MODULES = ("config_cmd", "status", "distcp", "kafka", "hbase", "verify", "failover", "ledger", "demo")


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


# the value's type -> the metavar shown in help (typer's own are `<float>`, `<list[str]>`, ...)
METAVARS = {"float": "NUMBER", "int": "INTEGER", "str": "TEXT", "Path": "PATH", "bool": "BOOLEAN"}


def _metavar(p: Any) -> str:
    desc = getattr(p, "type_descriptor", None)
    if desc is not None and desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
    bare = p.bare_type() if hasattr(p, "bare_type") else "str"
    if bare.startswith("list[") and bare.endswith("]"):
        bare = bare[5:-1]
    return METAVARS.get(bare, "VALUE")


def global_options_epilog() -> str:
    """The global options, as every command's help lists them (the same lines as `drt --help`)."""
    width = max(len(k) for k, _ in GLOBAL_OPTIONS) + 2
    return "\b\nGlobal options (before or after the command):\n" + "\n".join(
        f"  {k:<{width}}{v}" for k, v in GLOBAL_OPTIONS if not k.startswith("-h"))


def command_for(app: typer.Typer) -> Any:
    """The click command of ``app`` with one help style everywhere: plain text (no boxes), every
    default shown, metavars in capitals (``--timeout NUMBER``), and the global options listed at
    the end of every command's help."""
    import typer.main

    root = typer.main.get_command(app)
    epilog = global_options_epilog()

    def walk(cmd: Any, top: bool) -> None:
        if not top:
            cmd.epilog = epilog
        for p in cmd.params:
            if p.param_type_name == "argument":  # `SOURCE` (click's style), not typer's `{SOURCE}` / `<str>`
                p.metavar = p.metavar or (p.name or "ARG").upper()
                name = p.metavar + ("..." if p.nargs != 1 else "")
                usage = name if p.required else f"[{name}]"
                p._usage_display_name = lambda usage=usage: usage
                p.display_type_rich = lambda ctx: None
                continue
            if p.metavar is not None or getattr(p, "is_flag", False) or getattr(p, "count", False):
                continue
            p.metavar = _metavar(p)
        for sub in (getattr(cmd, "commands", None) or {}).values():
            walk(sub, False)

    walk(root, True)
    return root
