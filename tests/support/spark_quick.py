"""A ``SPARK_CONF_DIR`` for tests whose Spark data are a few rows to a few thousand: its
``spark-defaults.conf`` starts the driver's and the executors' JVMs with the copy engine's
quick-start options (:data:`dr_toolkit.spark.session.QUICK_START_JVM`: C1 only, serial GC). Their
time is the JVMs' start-up and warm-up, and what they check (counts, exit codes, output, refusals)
does not depend on the JIT (docs/testing.md, "Keeping it fast without weakening it")."""

from __future__ import annotations

from pathlib import Path


def quick_jvms(where: Path, *, executors: bool = True) -> str:
    """Write ``where/spark-defaults.conf`` (the driver's options, and the executors' unless
    ``executors`` is false) and return ``where``."""
    from dr_toolkit.spark.session import QUICK_START_JVM

    where.mkdir(parents=True, exist_ok=True)
    jvms = ("driver", "executor") if executors else ("driver",)
    (where / "spark-defaults.conf").write_text("".join(f"spark.{j}.extraJavaOptions {QUICK_START_JVM}\n"
                                                       for j in jvms))
    return str(where)
