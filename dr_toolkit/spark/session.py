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
