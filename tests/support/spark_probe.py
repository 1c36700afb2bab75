"""A driver for the cluster tests (run as its own process: one SparkContext per process).

``python -m tests.support.spark_probe MASTER`` starts a session through
:func:`dr_toolkit.spark.session.get_session` with two secrets for the executors, runs one
task per worker and prints JSON: where executors imported ``dr_toolkit`` from, whether they
received the secrets (as digests), the executor PIDs, and the application's environment as
the driver's REST API (``/api/v1/applications/<id>/environment``) shows it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import urllib.request

SECRETS = {"AWS_ACCESS_KEY_ID": "AKIAPROBEKEY0000XYZ", "AWS_SECRET_ACCESS_KEY": "probe-s3cr3t-value-42"}


def digest(v: str | None) -> str:
    return hashlib.sha256((v or "").encode()).hexdigest()


def _task(_: object) -> dict[str, object]:
    import os

    import dr_toolkit

    return {"file": dr_toolkit.__file__, "pid": os.getpid(),
            "secrets": {k: digest(os.environ.get(k)) for k in SECRETS}}


def main(master: str) -> int:
    from dr_toolkit.spark.session import get_session

    spark = get_session(master, app_name="drt-probe", secret_env=SECRETS,
                        conf={"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.executor.memory": "512m"})
    sc = spark.sparkContext
    rows = sc.parallelize(range(4), 4).map(_task).collect()
    with urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/environment",
                                timeout=10) as r:
        env = r.read().decode()
    print(json.dumps({"driver_pid": os.getpid(), "app_id": sc.applicationId, "master": sc.master, "ui": sc.uiWebUrl, "tasks": rows,
                      "environment": env, "expected": {k: digest(v) for k, v in SECRETS.items()}}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
