"""A native client that aborts ends a `drt` command with one line and exit 3, never SIGABRT.

The Kafka client (librdkafka, under confluent_kafka) is C: when a broker dies under it, an
assertion in it can abort the whole interpreter — no Python handler runs, no one-line error, the
documented exit codes are lost. For the commands that use it (`drt kafka …`, `drt failover …`)
the console script forks first: the child runs the command exactly as before (same terminal, same
stdin for the typed confirmations, same process group, so Ctrl-C reaches it directly), the parent
only waits. A child that exits is passed through unchanged; a child killed by SIGABRT (or another
crash signal) becomes `drt: error: …` and exit 3 (a dependency went away under a native client).
Every step of the runbook is resumable and each write is atomic, so the command can be run again.

Signals sent to the parent by another process (``kill PID``, a supervisor's SIGTERM) are passed
to the child; those the terminal sends to the whole process group reach the child already and are
not passed twice (told apart by ``si_code``). The child dies with the parent (PR_SET_PDEATHSIG).
``DRT_NATIVE_GUARD=0`` turns the fork off.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from dr_toolkit.errors import EXIT_INTERRUPTED, EXIT_UNREACHABLE, signal_exit_code

#: commands whose work goes through a native client library that may abort
GUARDED_COMMANDS = frozenset({"kafka", "failover"})
_CRASHES = {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_SI_KERNEL = 0x80  # si_code of a signal the kernel (the terminal driver) sent


def command_of(args: list[str]) -> str | None:
    """The subcommand's name: the first argument that is not a global option (or its value)."""
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-c", "--config"):
            skip = True
            continue
        if not a.startswith("-"):
            return a
    return None


def wanted(args: list[str]) -> bool:
    return (os.environ.get("DRT_NATIVE_GUARD", "1") != "0" and hasattr(os, "fork")
            and sys.platform.startswith("linux") and command_of(args) in GUARDED_COMMANDS)


def _die_with_parent(parent: int) -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(EXIT_UNREACHABLE)


def crash_line(sig: int) -> str:
    name = signal.Signals(sig).name
    return (f"drt: error: the command's native client library crashed ({name}) — a broker, ZooKeeper or NameNode "
            "probably went away in the middle of a call; check that it answers and run the command again "
            "(each step is atomic or resumable)")


def run_guarded(run: Callable[[list[str]], int], args: list[str]) -> int:
    """``run(args)`` in a forked child; its exit code, or exit 3 with one line if it crashed."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    waited = {signal.SIGCHLD, *_PASSED_ON}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)  # before the fork: no signal is lost
    try:
        pid = os.fork()
    except OSError:  # no process to spare (a process limit): run unguarded rather than not at all
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return run(args)
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        _die_with_parent(parent)
        return run(args)
    try:
        while True:
            info = signal.sigwaitinfo(waited)
            if info.si_signo != signal.SIGCHLD:
                if info.si_code != _SI_KERNEL:  # sent to us alone by a process: pass it on
                    try:
                        os.kill(pid, info.si_signo)
                    except ProcessLookupError:
                        pass
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                break
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
    if sig in _CRASHES:
        sys.stderr.write(crash_line(sig) + "\n")
        sys.stderr.flush()
        return EXIT_UNREACHABLE
    if sig == signal.SIGINT:
        return EXIT_INTERRUPTED
    return signal_exit_code(sig)
