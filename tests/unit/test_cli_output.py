"""Results piped into another program are not wrapped at 80 columns (issue 43 #7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _drt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "DRT_CONFIG")}
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.usefixtures("copy_state_dir")  # runs a copy
def test_a_piped_result_line_is_one_line_however_long(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_text("1")
    dst = tmp_path / ("a-target-whose-name-alone-is-longer-than-eighty-columns-" * 2)
    out = _drt("distcp", str(src), str(dst), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(str(dst) in ln and str(src) in ln for ln in lines), out.stdout
    assert any("files_total=1" in ln and "files_failed=0" in ln and "manifest=" in ln for ln in lines), out.stdout


def test_config_validate_summary_is_one_line(tmp_path: Path) -> None:
    out = _drt("--config", str(REPO / "examples" / "production.yaml"), "config", "validate", cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 1, out.stdout
