"""The small Java classes the toolkit ships as source (the WebHDFS JAX-RS shim, the HBase reader,
the HBase cell tool): compiled once with the JDK's ``javac`` against the jars they use, packaged into
a jar in the cache directory (atomically: a temporary name, then a rename), reused while the source
and the jars are the same (the caller names the jar by their digest)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from dr_toolkit.errors import ConfigError


def cache_dir() -> Path:
    """``$DRT_CACHE_DIR``, else ``$XDG_CACHE_HOME/dr-toolkit`` (``~/.cache/dr-toolkit``)."""
    if os.environ.get("DRT_CACHE_DIR"):
        return Path(os.environ["DRT_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dr-toolkit"


def build_jar(dest: Path, source: Path, classpath: str, *, what: str, hint: str, release: str | None = None,
              entries: dict[str, str] | None = None) -> Path:
    """Compile ``source`` against ``classpath`` and package its classes (and the text ``entries``,
    e.g. a service file) at ``dest``. ConfigError naming ``what`` when there is no JDK or javac fails
    (its first error line; ``hint`` says what to do)."""
    javac = shutil.which("javac") or (str(Path(os.environ["JAVA_HOME"]) / "bin" / "javac")
                                      if os.environ.get("JAVA_HOME") else None)
    if not javac or not Path(javac).exists():
        raise ConfigError(f"javac not found: {what} cannot be built", hint="install a JDK (make setup does)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="drt-javac-") as tmp:
        out = Path(tmp) / "classes"
        out.mkdir()
        argv = [javac, "-nowarn", *(["--release", release] if release else []), "-d", str(out), "-cp", classpath,
                str(source)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        if r.returncode != 0:
            lines = (r.stderr or r.stdout).strip().splitlines()
            first = next((ln for ln in lines if "error" in ln), lines[0] if lines else str(r.returncode))
            raise ConfigError(f"javac failed to build {what}: {first}", hint=hint)
        part = Path(tmp) / "out.jar"
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: dr-toolkit\n")
            for name, text in (entries or {}).items():
                z.writestr(name, text)
            for f in sorted(out.rglob("*.class")):
                z.write(f, str(f.relative_to(out)))
        tmp_dest = dest.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(part, tmp_dest)
        os.replace(tmp_dest, dest)
    return dest
