"""One root error, a few subclasses, and the exit codes of DESIGN §3.

Every error says what failed, where (file:line, path, host:port) and what to do next.
The CLI prints ``str(err)`` on one line and exits with ``err.exit_code``.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_PROBLEM = 1  # the operation ran and found a problem (differences, NO_GO, failed files)
EXIT_USAGE = 2  # usage or configuration error
EXIT_UNREACHABLE = 3  # a dependency is unreachable


class DrtError(Exception):
    """Root of every error dr-toolkit raises on purpose."""

    exit_code = EXIT_PROBLEM

    def __init__(self, what: str, *, where: str | None = None, hint: str | None = None) -> None:
        self.what = what
        self.where = where
        self.hint = hint
        super().__init__(self.message)

    @property
    def message(self) -> str:
        parts = [f"{self.where}: {self.what}" if self.where else self.what]
        if self.hint:
            parts.append(self.hint)
        return " — ".join(parts)


class ConfigError(DrtError):
    """The topology file, a URI or an option is wrong. Nothing was changed."""

    exit_code = EXIT_USAGE


class UsageError(ConfigError):
    """The command line is wrong (a missing argument, options that do not go together)."""


class UnreachableError(DrtError):
    """A server (ZooKeeper, a broker, a namenode, the ledger database) did not answer in time."""

    exit_code = EXIT_UNREACHABLE


class ProblemFound(DrtError):
    """The operation ran and found a problem: differences, a NO_GO, failed files."""

    exit_code = EXIT_PROBLEM


class LeaseHeld(DrtError):
    """Another run holds the lease of this policy; try again when it has finished."""

    exit_code = EXIT_PROBLEM


class FencedError(DrtError):
    """A writer holds a stale fencing epoch: the cluster it writes for is no longer active."""

    exit_code = EXIT_PROBLEM
