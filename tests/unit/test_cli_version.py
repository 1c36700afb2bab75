"""`drt --version` prints the installed distribution's version (issue 43 #11)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata


def drt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          timeout=60)


def test_drt_version_prints_the_distributions_version() -> None:
    r = drt("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"drt {metadata.version('dr-toolkit')}\n", "")


def test_drt_version_is_in_the_top_help_and_only_there() -> None:
    assert "--version" in drt("--help").stdout
    r = drt("status", "--version")  # a command's option it is not: one line, exit 2
    assert r.returncode == 2 and r.stderr.startswith("drt: error: ") and len(r.stderr.splitlines()) == 1
    assert "--version" not in drt("status", "--help").stdout
