"""The project built as a wheel and installed into a clean virtualenv, for tests of what a user
installs (the provider, the demo from an installed package)."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OWN = ("dr_toolkit", "__editable__.dr_toolkit", "__editable___dr_toolkit")


def installed_wheel(tmp_path: Path, *, sdist: bool = False) -> tuple[Path, str]:
    """Build the project's wheel from a copy of the checkout (building writes dr_toolkit.egg-info
    next to pyproject.toml), make a new virtualenv, install the wheel without dependencies, and
    let the venv see the test venv's packages through a directory of links to everything in its
    site-packages but the project's own editable install (its dist-info would be a second
    dr-toolkit distribution, its entry points registered twice). Returns (venv, its purelib)."""
    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to build and install the wheel (make setup installs it)"
    src = tmp_path / "src"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "demo-data", "embedded-data", "*.egg-info", "build", "__pycache__", ".spark-cluster"))
    subprocess.run([uv, "build", "-q", *([] if sdist else ["--wheel"]), "-o", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, timeout=300, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("dr_toolkit-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, capture_output=True, timeout=120)
    vpy = venv / "bin" / "python"
    vsite = subprocess.run([str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()] or [sysconfig.get_paths()["purelib"]]
    lines = []
    for i, d in enumerate(deps):
        farm = tmp_path / f"deps{i}"
        farm.mkdir()
        for entry in Path(d).iterdir():
            if not entry.name.lower().startswith(OWN):
                (farm / entry.name).symlink_to(entry)
        lines.append(str(farm))
    (Path(vsite) / "zz_project_deps.pth").write_text("\n".join(lines) + "\n")
    subprocess.run([uv, "pip", "install", "-q", "--no-deps", "--python", str(vpy), str(wheel)], check=True,
                   capture_output=True, timeout=300)
    return venv, vsite
