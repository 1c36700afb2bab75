"""One root error, a few subclasses, and the exit codes of docs/contracts.md.

Every error says what failed, where (file:line, path, host:port) and what to do next.
The CLI prints ``str(err)`` on one line and exits with ``err.exit_code``.
"""

from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_PROBLEM = 1  # the operation ran and found a problem (differences, NO_GO, failed files)
EXIT_USAGE = 2  # usage or configuration error
EXIT_UNREACHABLE = 3  # a dependency is unreachable
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C (SIGINT); 143 when stopped by SIGTERM (see signal_exit_code)


def signal_exit_code(signum: int) -> int:
    """The exit code of a run stopped by signal ``signum``, as a shell reports it: 128 + its
    number (:data:`EXIT_INTERRUPTED` for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


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
    #: every problem found (file, line, field, problem, hint) when there were several, e.g. an
    #: invalid topology; `drt config validate --json` prints them
    problems: list[dict[str, object]] | None = None


class UsageError(ConfigError):
    """The command line is wrong (a missing argument, options that do not go together)."""


class UnreachableError(DrtError):
    """A server (ZooKeeper, a broker, a namenode, the ledger database) did not answer in time."""

    exit_code = EXIT_UNREACHABLE


class LedgerUnreachable(UnreachableError):
    """The ledger database cannot be opened, read or written. Every reader of the ledger stops on
    it (a signal never turns it into a NO_GO: without the ledger there is no verdict to record)."""


class ProblemFound(DrtError):
    """The operation ran and found a problem: differences, a NO_GO, failed files."""

    exit_code = EXIT_PROBLEM


class LeaseHeld(DrtError):
    """Another run holds the lease of this policy; try again when it has finished."""

    exit_code = EXIT_PROBLEM


class FencedError(DrtError):
    """A writer holds a stale fencing epoch: the cluster it writes for is no longer active."""

    exit_code = EXIT_PROBLEM


# --- failures that are not DrtError, as the DrtError they mean ------------------------------
# The CLI (and any caller that reports to a person) turns these into one line and an exit
# code; an exception not recognised here is a bug. Matching is by class name and module, so
# this module never imports SQLAlchemy, pyspark, kazoo, boto3 or requests to recognise them.

_PATH_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EEXIST,
                          errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP})


def why(exc: BaseException) -> str:
    """What went wrong, in one line, for a reason shown to a person: a DrtError's message, else
    the exception's type and text."""
    return exc.message if isinstance(exc, DrtError) else f"{type(exc).__name__}: {exc}"


def first_line(text: str, limit: int = 400) -> str:
    """The first non-empty line of ``text`` (a Java stack trace, a driver's message), shortened."""
    for ln in text.splitlines():
        ln = ln.strip()
        if ln:
            return ln if len(ln) <= limit else ln[:limit - 1] + "…"
    return ""


def _mro(exc: BaseException) -> list[tuple[str, str]]:
    return [(c.__module__ or "", c.__name__) for c in type(exc).__mro__]


def _from(exc: BaseException, *packages: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for mod, _ in _mro(exc) for p in packages)


def _named(exc: BaseException, *names: str) -> bool:
    return any(name in names for _, name in _mro(exc))


def _java_message(exc: BaseException) -> str:
    """The Java exception line of a Py4JJavaError (``java.net.ConnectException: …``), else the first line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in lines:
        body = ln.lstrip(": ")
        if (not body.startswith("at ") and ("Exception" in body or "Error" in body) and ":" in body
                and "An error occurred while calling" not in body):
            return first_line(body)
    return first_line(lines[0] if lines else type(exc).__name__)


def as_drt_error(exc: BaseException) -> DrtError | None:
    """``exc`` as the DrtError it means — a known failure class of a dependency (the ledger's
    SQLAlchemy, Spark's JVM gateway, ZooKeeper, Kafka, S3, HTTP, a file) — or None for a bug."""
    if isinstance(exc, DrtError):
        return exc
    kind = type(exc).__name__
    if _from(exc, "sqlalchemy"):
        orig = getattr(exc, "orig", None)
        msg = first_line(str(orig if orig is not None else exc)) or kind
        if _named(exc, "ArgumentError", "NoSuchModuleError"):
            return ConfigError(f"bad ledger URL: {msg}", hint="check ledger.url or $DRT_LEDGER_URL")
        return LedgerUnreachable(f"the ledger failed: {kind}: {msg}",
                                 hint="check that the ledger database is up and readable (ledger.url)")
    if _from(exc, "pyspark", "py4j"):
        if _named(exc, "AnalysisException", "PySparkValueError", "PySparkTypeError", "IllegalArgumentException",
                  "ParseException"):
            return ConfigError(f"Spark refused the job: {first_line(str(exc)) or kind}",
                               hint="check the paths, --format and key columns")
        return UnreachableError(f"Spark could not start or answer: {kind}: {_java_message(exc)}",
                                hint="check the Spark master URL (clusters.<name>.spark.master or "
                                     "$DRT_SPARK_MASTER), that the master is up, and JAVA_HOME")
    if _from(exc, "kazoo"):
        if _named(exc, "NoAuthError", "AuthFailedError"):
            return ConfigError(f"ZooKeeper refused the credentials: {kind}",
                               hint="check the zookeeper conn_id's login and password")
        return UnreachableError(f"ZooKeeper did not answer in time: {kind}",
                                hint="check clusters.<name>.zookeeper.quorum and that ZooKeeper is up")
    if _from(exc, "confluent_kafka"):
        return UnreachableError(f"Kafka failed: {first_line(str(exc)) or kind}",
                                hint="check bootstrap_servers, the brokers and the kafka conn_id")
    if _from(exc, "botocore", "boto3"):
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", "")) if hasattr(exc, "response") else ""
        if _named(exc, "NoCredentialsError", "PartialCredentialsError", "NoRegionError") or code in (
                "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket", "AllAccessDisabled"):
            return ConfigError(f"S3 refused the request: {first_line(str(exc)) or kind}",
                               hint="check the bucket, the s3 conn_id's keys and the endpoint")
        return UnreachableError(f"S3 did not answer: {first_line(str(exc)) or kind}",
                                hint="check the endpoint URL and the network")
    if _from(exc, "requests", "urllib3"):
        if _named(exc, "ConnectionError", "Timeout", "NewConnectionError", "MaxRetryError", "ProtocolError"):
            return UnreachableError(f"HTTP endpoint unreachable: {first_line(str(exc)) or kind}",
                                    hint="check the URL (namenodes, endpoint_url) and that the server is up")
        return ConfigError(f"bad HTTP request: {first_line(str(exc)) or kind}", hint="check the URL")
    if _from(exc, "hdfs"):
        return UnreachableError(f"WebHDFS failed: {first_line(str(exc)) or kind}",
                                hint="check clusters.<name>.hdfs.namenodes and the cluster's health")
    if isinstance(exc, (ConnectionError, TimeoutError)) or _named(exc, "gaierror", "herror"):
        return UnreachableError(f"unreachable: {kind}: {first_line(str(exc)) or kind}",
                                hint="check the host and port, and that the server is up")
    if isinstance(exc, OSError):
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None) or None
        what = exc.strerror or first_line(str(exc)) or kind
        if exc.errno in _PATH_ERRNOS:
            return ConfigError(what, where=where, hint="check the path and its permissions")
        return UnreachableError(what, where=where, hint="check the disk or device (space, I/O errors)")
    return None


class Interrupted(DrtError):
    """The run was stopped by Ctrl-C (exit 130) or SIGTERM (exit 143) — not "a problem found"."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, what: str, *, signum: int = 2, where: str | None = None, hint: str | None = None) -> None:
        super().__init__(what, where=where, hint=hint)
        self.exit_code = signal_exit_code(signum)
