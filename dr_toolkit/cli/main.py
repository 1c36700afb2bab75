"""`drt`: the dr-toolkit command line (DESIGN §3).

Exit codes: 0 ok; 1 the operation ran and found a problem; 2 usage or configuration error;
3 a dependency is unreachable.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated

import typer

from dr_toolkit.cli.common import State, err_console, setup_logging
from dr_toolkit.errors import EXIT_USAGE, DrtError
from dr_toolkit.secrets import redact

app = typer.Typer(
    name="drt",
    help="dr-toolkit: keep a cold cluster in step with a hot one, and fail over with evidence.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

# One module per capability; each defines register(app). Order = order in `drt --help`.
COMMAND_MODULES = ("config_cmd", "status", "distcp", "kafka", "hbase", "verify", "failover", "demo")


@app.callback()
def _global(
    ctx: typer.Context,
    config: Annotated[str | None, typer.Option(
        "--config", "-c", envvar="DRT_CONFIG", help="Topology file \\[default: ./drt.yaml].")] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Machine output (JSON) on stdout; logs go to stderr.")] = False,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="More logging (-vv: debug).")] = 0,
) -> None:
    setup_logging(verbose)
    ctx.obj = State(config=config, json=json_out, verbose=verbose)


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"dr_toolkit.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"dr_toolkit.cli.{name}":
                continue  # capability not built yet
            raise
        mod.register(app)


_register()


GLOBAL_FLAGS = ("--json", "--verbose", "-v", "-vv", "-vvv")
GLOBAL_VALUED = ("--config", "-c")


def hoist_globals(argv: list[str]) -> list[str]:
    """Move the global options (``--json``, ``-v``, ``--config PATH``) in front of the
    subcommand, so they are accepted before or after it on every command (DESIGN §3)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest.extend(argv[i:])
            break
        if a in GLOBAL_FLAGS:
            front.append(a)
        elif a in GLOBAL_VALUED and i + 1 < len(argv):
            front.extend(argv[i:i + 2])
            i += 1
        elif a.startswith("--config="):
            front.append(a)
        else:
            rest.append(a)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> int:
    """Run `drt`; turn DrtError into one line on stderr and its exit code.

    Usage errors (unknown command, bad option) are reported by the CLI library with exit 2.
    """
    args = hoist_globals(list(sys.argv[1:] if argv is None else argv))
    try:
        app(args=args, standalone_mode=True, prog_name="drt")
    except DrtError as exc:
        err_console.print(f"drt: error: {redact(exc.message)}", markup=False, highlight=False, soft_wrap=True)
        return exc.exit_code
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
