"""`drt verify` keeps Spark's own output off the terminal (issue 43 #3): a successful verify
prints its result and nothing on stderr (it printed 8 lines of JVM start-up, log4j and pandas
warnings); a file that is not Parquet is the one-line error alone, saying what Spark found (it
came after ~100 lines, 78 of them a Java stack trace). Real pyspark in local mode, `drt` run as
a process with stderr a pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.spark_quick import quick_jvms

pytestmark = pytest.mark.integration


def drt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL", "COLUMNS")}
    env["TMPDIR"] = str(cwd / "tmp")  # the scratch log of Spark's output: removed at the end
    (cwd / "tmp").mkdir(exist_ok=True)
    env["SPARK_CONF_DIR"] = quick_jvms(cwd / "conf")  # three rows: the JVM with the quick-start options
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def test_verify_prints_no_jvm_output_and_a_bad_file_is_one_line(tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame({"id": [1, 2, 3], "v": ["x", "y", "z"]})
    for side in ("hot", "cold"):
        (tmp_path / side).mkdir()
        frame.to_parquet(tmp_path / side / "part-0.parquet")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "part-0.parquet").write_text("id,v\n1,x\n")  # a CSV named .parquet

    r = drt("--json", "verify", "hot", "cold", "--key", "id", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["GOODROWS"] == 3
    assert r.stderr == "", r.stderr

    r = drt("verify", "text", "cold", "--key", "id", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("drt: error: text: source cannot be read as parquet: "), \
        r.stderr
    assert "Could not read footer" in r.stderr and "-v shows Spark's own output" in r.stderr, r.stderr
    assert list((tmp_path / "tmp").iterdir()) == []  # no scratch log left behind
