"""The session factory's conf rules, without starting Spark: what spark-submit set is never
overridden, the caller's conf wins over the library's defaults, the library is shipped on
non-local masters, secrets for executors are redacted, and bad master URLs are exit 2."""

from __future__ import annotations

import zipfile

import pytest

from dr_toolkit.errors import ConfigError
from dr_toolkit.spark.session import (
    CONTEXT_DEFAULTS,
    QUICK_START_JVM,
    REDACTION_REGEX,
    check_master,
    library_zip,
    session_conf,
)


def test_spark_submit_keys_are_never_overridden() -> None:
    submitted = {"spark.master": "yarn", "spark.app.name": "user-app", "spark.sql.shuffle.partitions": "64",
                 "spark.ui.enabled": "true"}
    keys = session_conf("yarn", "drt-verify", {"spark.ui.enabled": "false"}, submitted, ship_library=False)
    assert not set(keys) & set(submitted)
    assert keys["spark.sql.session.timeZone"] == "UTC"  # unset there: filled in


def test_caller_conf_wins_over_defaults_and_local_binds_loopback() -> None:
    keys = session_conf("local[2]", "drt", {"spark.sql.shuffle.partitions": "3"}, {})
    assert keys["spark.sql.shuffle.partitions"] == "3"
    assert keys["spark.ui.enabled"] == "false"
    assert keys["spark.driver.bindAddress"] == "127.0.0.1"
    assert "spark.submit.pyFiles" not in keys


def test_non_local_master_ships_the_library() -> None:
    keys = session_conf("spark://10.0.0.5:7077", "drt", {}, {})
    assert "spark.driver.bindAddress" not in keys and "spark.ui.enabled" not in keys
    z = keys["spark.submit.pyFiles"]
    with zipfile.ZipFile(z) as f:
        names = f.namelist()
    assert "dr_toolkit/__init__.py" in names and "dr_toolkit/verify/canon.py" in names
    assert not any("__pycache__" in n for n in names)
    assert library_zip() == z  # cached by content
    merged = session_conf("yarn", "drt", {}, {"spark.submit.pyFiles": "hdfs:///deps.zip"})
    assert merged["spark.submit.pyFiles"].split(",") == ["hdfs:///deps.zip", z]


def test_executor_secrets_are_covered_by_the_redaction_regex() -> None:
    import re

    keys = session_conf("spark://127.0.0.1:7077", "drt", {}, {}, ship_library=False,
                        secret_env={"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t"})
    assert keys["spark.executorEnv.AWS_ACCESS_KEY_ID"] == "AKIA1"
    rx = re.compile(keys["spark.redaction.regex"])
    assert all(rx.search(k) for k in keys if k.startswith("spark.executorEnv."))
    user = session_conf("yarn", "drt", {"spark.redaction.regex": "(?i)mine"}, {}, ship_library=False,
                        secret_env={"AWS_SECRET_ACCESS_KEY": "s"})
    assert user["spark.redaction.regex"] == f"(?i)mine|{REDACTION_REGEX}"


@pytest.mark.parametrize("bad", ["bogus://x", "", "spark://", "localhost:7077"])
def test_bad_master_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="not a Spark master URL"):
        check_master(bad)


@pytest.mark.parametrize("good", ["local", "local[*]", "local[2]", "spark://a:7077,b:7077", "yarn",
                                  "k8s://https://api:6443"])
def test_good_masters(good: str) -> None:
    assert check_master(good) == good


def test_the_copy_engines_quick_start_jvm_options_sit_under_the_callers_conf() -> None:
    keys = session_conf("spark://10.0.0.5:7077", "drt-distcp", {}, {}, ship_library=False, defaults=CONTEXT_DEFAULTS)
    assert keys["spark.driver.extraJavaOptions"] == keys["spark.executor.extraJavaOptions"] == QUICK_START_JVM
    mine = session_conf("spark://10.0.0.5:7077", "drt-distcp", {"spark.executor.extraJavaOptions": "-Xss4m"}, {},
                        ship_library=False, defaults=CONTEXT_DEFAULTS)
    assert mine["spark.executor.extraJavaOptions"] == "-Xss4m"  # the cluster's conf replaces ours
    assert mine["spark.driver.extraJavaOptions"] == QUICK_START_JVM
    submitted = session_conf("yarn", "drt-distcp", {}, {"spark.driver.extraJavaOptions": "-Dfrom=submit"},
                             ship_library=False, defaults=CONTEXT_DEFAULTS)
    assert "spark.driver.extraJavaOptions" not in submitted  # spark-submit's stays
    assert "spark.driver.extraJavaOptions" not in session_conf("yarn", "drt-verify", {}, {}, ship_library=False)
