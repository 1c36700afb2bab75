"""`drt`: the dr-toolkit command line (docs/contracts.md).

Global options (``--json``, ``--config/-c PATH``, ``-v``) are accepted before or after the
subcommand, on every command. Exit codes: 0 ok; 1 the operation ran and found a problem;
2 usage or configuration error; 3 a dependency is unreachable. Every error is one line on
stderr (``drt: error: …``); an unexpected exception is one line naming it as a bug (exit 1),
with its traceback under ``-vv``.

Start-up is kept small: this module imports the standard library and the small modules beneath it
only (the global options' table :mod:`dr_toolkit.cli.options`, the errors, the redaction of
secrets, the fork guard); `drt` and `drt --help` are answered from the table below, and a command
imports typer and its own module only (see :mod:`dr_toolkit.cli.app`), inside :func:`_run`.
"""

from __future__ import annotations

import os
import sys

from dr_toolkit.cli import guard
from dr_toolkit.cli.options import GLOBAL_FLAGS, GLOBAL_OPTIONS, GLOBAL_VALUED, HELP_FLAGS
from dr_toolkit.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    DrtError,
    as_drt_error,
)
from dr_toolkit.secrets import redact

# Top-level command -> (module in dr_toolkit.cli, one-line help). Order = order in `drt --help`.
# tests/unit/test_cli.py checks this table against the commands the modules really register.
COMMANDS: dict[str, tuple[str, str]] = {
    "config": ("config_cmd", "Check and show the topology file."),
    "status": ("status", "Show what the ledger knows: the last failover check (verdict, recovery point, RPO), "
                         "copies, checkpoints, verifications, failover runs."),
    "distcp": ("distcp", "Copy a directory tree like Hadoop DistCp: incremental, atomic, checksummed."),
    "replicate": ("distcp", "Run one HDFS policy of the topology: every target, under the policy's lease."),
    "kafka": ("kafka", "Kafka consumer offsets: checkpoint on hot, mirror lag, remap onto cold."),
    "hbase": ("hbase", "HBase replication: peers, table scopes, queue status."),
    "verify": ("verify", "Compare a dataset with its replica by key (HBase VerifyReplication's counters)."),
    "failover": ("failover", "Fail over, re-protect the other way, switch back: gate, runbooks, lint."),
    "ledger": ("ledger", "The ledger's upkeep: prune rows past their retention."),
    "demo": ("demo", "Run the whole cycle on this machine: seed, replicate, checkpoint, verify, NO_GO, "
                     "drain, GO, fail over, re-protect, switch back."),
}



def hoist_globals(argv: list[str]) -> list[str]:
    """Move the global options (``--json``, ``-v``, ``--config PATH``) in front of the
    subcommand, so they are accepted before or after it on every command (docs/contracts.md).
    Everything after ``--`` is left alone."""
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


def _split(args: list[str]) -> tuple[list[str], str | None, list[str]]:
    """Hoisted ``args`` -> (global options, command name or None, the command's arguments)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in GLOBAL_VALUED:
            i += 2
        elif a in GLOBAL_FLAGS or a.startswith("--config="):
            i += 1
        else:
            break
    front, rest = args[:i], args[i:]
    if rest and not rest[0].startswith("-"):
        return front, rest[0], rest[1:]
    return front, None, rest


def verbosity(args: list[str]) -> int:
    n = 0
    for a in args:
        if a == "--":
            break
        if a == "--verbose":
            n += 1
        elif a.startswith("-v") and set(a[1:]) == {"v"}:
            n += len(a) - 1
    return n


def top_help() -> str:
    width = max(len(k) for k, _ in GLOBAL_OPTIONS) + 2
    cw = max(len(k) for k in COMMANDS) + 2
    lines = ["Usage: drt [OPTIONS] COMMAND [ARGS]...", "",
             "  dr-toolkit: keep a cold cluster in step with a hot one, and fail over with evidence.", "",
             "Options (accepted before or after the command):"]
    lines += [f"  {k:<{width}}{v}" for k, v in GLOBAL_OPTIONS if not k.startswith("-h")]
    lines += [f"  {'--version':<{width}}Show the version of dr-toolkit and exit."]
    lines += [f"  {k:<{width}}{v}" for k, v in GLOBAL_OPTIONS if k.startswith("-h")]
    lines += ["", "Commands:"]
    lines += [f"  {name:<{cw}}{summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", "Run `drt COMMAND --help` for a command's options.",
              "Exit codes: 0 ok; 1 a problem was found (differences, NO_GO, failed files); "
              "2 usage or configuration error; 3 a dependency is unreachable."]
    return "\n".join(lines) + "\n"


def version() -> str:
    """The installed distribution's version (`drt --version`), from its metadata."""
    from importlib import metadata

    try:
        return metadata.version("dr-toolkit")
    except metadata.PackageNotFoundError:
        return "(not installed: dr-toolkit is run from its source tree)"


def say_error(message: str) -> None:
    """One line on stderr: ``drt: error: <message>`` (secrets redacted, newlines folded)."""
    one = " ".join(redact(message).split())
    try:
        sys.stderr.write(f"drt: error: {one}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: nothing left to tell
        pass


def report(exc: BaseException, verbose: int = 0) -> int:
    """Turn an exception that left a command into one line on stderr and its exit code."""
    err: DrtError | None = as_drt_error(exc)
    if err is not None:
        if verbose >= 2 and err is not exc:
            _traceback(exc)
        say_error(err.message)
        return err.exit_code
    if verbose >= 2:
        _traceback(exc)
    detail = " ".join(str(exc).split())
    say_error(f"internal error (a bug in drt): {type(exc).__module__}.{type(exc).__name__}"
              + (f": {detail[:300]}" if detail else "")
              + (" — please report it with this command" if verbose >= 2 else
                 " — run again with -vv for the traceback and report it"))
    return EXIT_PROBLEM


def _traceback(exc: BaseException) -> None:
    import traceback

    sys.stderr.write(redact("".join(traceback.format_exception(exc))))


def _click_error(exc: BaseException) -> int | None:
    """A usage error from the option parser (typer's click) as one line, or None if ``exc`` is not one."""
    import typer
    from typer._click import exceptions as ce  # typer's own click: usage errors live only here

    if isinstance(exc, ce.NoArgsIsHelpError):  # `drt kafka`: show what it offers (as --help does)
        text = exc.format_message()  # empty when typer's rich help already printed it
        if text:
            sys.stdout.write(text + "\n")
        return EXIT_OK
    if isinstance(exc, ce.UsageError):
        path = exc.ctx.command_path if exc.ctx is not None else "drt"
        say_error(f"{usage_wording(exc.format_message())} — see `{path} --help`")
        return EXIT_USAGE
    if isinstance(exc, ce.ClickException):
        say_error(exc.format_message())
        return exc.exit_code if exc.exit_code in (EXIT_PROBLEM, EXIT_USAGE, EXIT_UNREACHABLE) else EXIT_USAGE
    if isinstance(exc, typer.Abort):
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):  # Ctrl-C inside a command
            say_error("interrupted")
            return EXIT_INTERRUPTED
        say_error("aborted: nothing more was done")
        return EXIT_PROBLEM
    return None


def usage_wording(message: str) -> str:
    """Click's usage messages in drt's one wording: lower case, no final full stop, the
    suggestion in parentheses — ``No such command 'chek'. Did you mean 'check'?`` becomes
    ``no such command 'chek' (did you mean 'check'?)``, as the top level says it."""
    import re

    text = " ".join(message.split())
    m = re.match(r"(.*?)\.? (Did you mean .*\?)$", text)
    if m:
        text = f"{m.group(1)} ({m.group(2)[0].lower()}{m.group(2)[1:]})"
    text = text.rstrip(".").replace("(Possible options:", "(did you mean one of:")
    return text[:1].lower() + text[1:]


def _run(args: list[str]) -> int:
    if args and args[-1] in GLOBAL_VALUED and "--" not in args:  # hoist_globals leaves it last: no value
        say_error(f"option {args[-1]} needs a value: the topology file — see `drt --help`")
        return EXIT_USAGE
    front, command, rest = _split(args)
    if command is None and (not rest or any(a in HELP_FLAGS for a in rest) or any(a in HELP_FLAGS for a in front)):
        sys.stdout.write(top_help())
        return EXIT_OK
    if command is None and rest[0] == "--version":
        sys.stdout.write(f"drt {version()}\n")
        return EXIT_OK
    if command is None:
        say_error(f"no such option: {rest[0]} — see `drt --help`")
        return EXIT_USAGE
    from dr_toolkit.cli.app import build_app  # lazy: typer, only once a command is run (not for `drt --help`)

    if command in COMMANDS:
        app = build_app([COMMANDS[command][0]])
    else:  # not in the table: a command a module registers but the table does not list yet?
        import difflib

        import typer.main

        app = build_app()
        known = list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
        if command not in known:
            close = difflib.get_close_matches(command, known, n=1)
            say_error(f"no such command {command!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                      + " — see `drt --help`")
            return EXIT_USAGE
    if command in ("distcp", "replicate"):
        # lazy: typer and pydantic, which the distcp command imports anyway
        from dr_toolkit.cli.distcp import distcp_spelling

        wrong = distcp_spelling(rest, command)
        if wrong:
            say_error(wrong + f" — see `drt {command} --help`")
            return EXIT_USAGE
    from dr_toolkit.cli.app import command_for  # lazy: typer (as build_app above)

    try:
        rv = command_for(app).main(args=args, standalone_mode=False, prog_name="drt")
    except Exception as exc:  # a usage error becomes one line here; everything else in main()
        code = _click_error(exc)
        if code is not None:
            return code
        raise
    # Commands return None and end with typer.Exit(code); typer hands that code back here.
    if rv == EXIT_INTERRUPTED:  # typer turns Ctrl-C inside a command into a silent Exit(130)
        say_error("interrupted")
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Run `drt` and return its exit code; nothing but a one-line error reaches stderr on failure."""
    args = hoist_globals(list(sys.argv[1:] if argv is None else argv))
    verbose = verbosity(args)
    # pydantic scans every installed distribution's entry points for plugins on the first
    # model it builds (40-60 ms with Airflow installed); drt uses none. Setting the variable
    # to an empty value turns the scan back on.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    code = _main(args, verbose)
    if code != EXIT_OK and "dr_toolkit.cli.common" in sys.modules:  # a refused command leaves no new ledger
        # lazy: pydantic (through the topology); a command has imported it already
        from dr_toolkit.cli.common import undo_new_ledger

        undo_new_ledger()
    return code


def _main(args: list[str], verbose: int) -> int:
    try:
        return _run(args)
    except KeyboardInterrupt:
        say_error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `drt status | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PROBLEM
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        say_error(str(exc.code))
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - see report(): one line, the documented exit code
        return report(exc, verbose)


def entry() -> None:
    """The `drt` console script: :func:`main`, in a forked child for the commands whose native
    client may abort (one line and exit 3 instead of SIGABRT; see :mod:`dr_toolkit.cli.guard`)."""
    args = sys.argv[1:]
    code = guard.run_guarded(main, args) if guard.wanted(args) else main(args)
    leave(code)


def leave(code: int) -> None:
    """Exit with ``code``. A reader the command gave up on at its ``--timeout`` (a Kafka metadata
    request or a ZooKeeper connect to an address nobody answers, on a pool's thread) would hold the
    finished command open for its own timeout, since the interpreter joins a pool's threads at exit,
    daemon or not (``drt failover check --timeout 2`` took 11 s with the brokers down): when any
    thread is still alive, the output is flushed and the process ends without waiting for it. Everything
    the command writes (the ledger's rows, the report) is committed before it returns."""
    import atexit
    import threading

    if any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread()):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        # what the process registered to do at exit still runs (logging's flush, the removal of a
        # private ticket cache or a generated conf dir); only the joins of the threads are skipped
        atexit._run_exitfuncs()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
