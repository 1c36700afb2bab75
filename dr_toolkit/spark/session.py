"""The SparkSession factory: one place that decides how the toolkit talks to Spark.

Local mode binds to 127.0.0.1 (``SPARK_LOCAL_IP``); on a cluster the same code runs under
``spark-submit`` (see :mod:`dr_toolkit.spark.submit`), where the session already exists and
is returned as it is. ANSI mode stays on: code that sums hashes uses ``bit_xor`` or a
modular sum, never a plain sum that overflows.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def get_session(master: str | None = None, app_name: str = "dr-toolkit",
                conf: dict[str, str] | None = None) -> SparkSession:
    """Return the active SparkSession, or build one for ``master`` (default ``local[2]``)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or os.environ.get("DRT_SPARK_MASTER") or "local[2]"
    check_java()
    check_master(master)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.bindAddress": "127.0.0.1" if master.startswith("local") else "",
        "spark.sql.session.timeZone": "UTC",
    }
    for k, v in {**defaults, **(conf or {})}.items():
        if v:
            builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def check_master(master: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when a standalone master (``spark://h1:p1,h2:p2``) answers on
    none of its addresses: Spark itself would retry for about a minute, logging Java stack
    traces, and then fail with "Cannot call methods on a stopped SparkContext"."""
    if not master.startswith("spark://"):
        return
    import socket

    from dr_toolkit.errors import ConfigError, UnreachableError

    last = "no address"
    for hp in master[len("spark://"):].split(","):
        host, _, port = hp.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"bad Spark master URL {master!r}", hint="use spark://host:port[,host2:port2]")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except OSError as exc:
            last = exc.strerror or type(exc).__name__
    raise UnreachableError(f"the Spark master does not answer ({last})", where=master,
                           hint="start the master or fix clusters.<name>.spark.master / $DRT_SPARK_MASTER")


def check_java() -> None:
    """Fail in one line when no Java can start the Spark gateway: the launcher script would
    print its own shell errors and pyspark raise JAVA_GATEWAY_EXITED."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit: the JVM is already running
        return
    import shutil

    from dr_toolkit.errors import ConfigError

    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise ConfigError("JAVA_HOME has no bin/java: Spark cannot start", where=f"JAVA_HOME={home}",
                              hint="point JAVA_HOME at a Java 17 or 21 installation, or unset it")
    elif shutil.which("java") is None:
        raise ConfigError("no `java` on PATH and JAVA_HOME is not set: Spark cannot start",
                          hint="install Java 17 or 21, or set JAVA_HOME")
