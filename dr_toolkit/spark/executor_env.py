"""What the copy engine's executors need besides ``dr_toolkit`` itself, shipped with the job.

The library reaches executors as a zip (``spark.submit.pyFiles``), but the copy tasks also import
third-party packages — pydantic (with its compiled core), google-crc32c, and lazily requests/hdfs
(WebHDFS) and boto3 (S3) — and a worker's Python has none of them unless someone installed them
there. Compiled modules cannot be imported from a zip, so these packages travel as an archive
(``spark.archives``, unpacked by Spark into each executor's working directory as ``drtenv/``, put
on the Python workers' path with ``spark.executorEnv.PYTHONPATH``) — the packed-environment way of
PySpark's package-management guide, limited to what the tasks import.

The archive is made from the driver's own installed distributions (their RECORD files: nothing is
downloaded), once per set of versions, and cached beside the toolkit's other built files
(``$DRT_CACHE_DIR``, else ``$XDG_CACHE_HOME/dr-toolkit`` or ``~/.cache/dr-toolkit``).
It holds compiled code for the driver's Python and platform: workers must run the same Python
minor version on the same platform (Spark itself refuses a worker Python of another minor
version). A worker whose Python still cannot import them is reported in one line
(:func:`missing_module`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import sys
import tarfile
from pathlib import Path

from dr_toolkit.errors import ConfigError
from dr_toolkit.javac import cache_dir

# what the copy tasks import on an executor (see the module doc), with their requirements
EXECUTOR_REQUIREMENTS = ("pydantic", "google-crc32c", "requests", "hdfs", "boto3")
ARCHIVE_ALIAS = "drtenv"  # the directory the archive is unpacked to, in each executor's working directory


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions() -> list[tuple[str, str]]:
    """(name, version) of every distribution the executors need: EXECUTOR_REQUIREMENTS and
    everything they require (markers evaluated for this Python, no extras), sorted."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    seen: dict[str, md.Distribution] = {}
    todo = list(EXECUTOR_REQUIREMENTS)
    while todo:
        name = todo.pop()
        k = _key(name)
        if k in seen:
            continue
        try:
            d = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an optional requirement not installed on the driver either
        seen[k] = d
        for r in d.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return sorted((d.metadata["Name"], d.version) for d in seen.values())


def archive() -> str:
    """The path of the archive of :func:`distributions` (built once per versions, Python and
    platform; reused after)."""
    import importlib.metadata as md

    dists = distributions()
    tag = f"{sys.implementation.cache_tag}-{platform.machine()}-{sys.platform}"
    h = hashlib.sha256(repr((tag, dists)).encode()).hexdigest()[:16]
    out = cache_dir() / f"executor-env-{tag}-{h}.tar.gz"
    if out.exists():
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
        for name, _version in dists:
            d = md.distribution(name)
            for f in d.files or []:
                src = Path(str(d.locate_file(f)))
                rel = str(f)
                # files outside site-packages (scripts in bin/, data) are not imported by tasks
                if rel.startswith("..") or rel.endswith(".pyc") or "__pycache__" in rel or not src.is_file():
                    continue
                tar.add(src, arcname=rel, recursive=False)
    os.replace(tmp, out)
    return str(out)


VENV_PYTHON = f"./{ARCHIVE_ALIAS}/bin/python"  # spark.pyspark.python of a YARN job (the unpacked venv's)


def _package_files() -> list[tuple[Path, str]]:
    """(file, its path under site-packages) of the ``dr_toolkit`` package itself."""
    pkg = Path(__file__).resolve().parent.parent
    return [(p, str(Path("dr_toolkit") / p.relative_to(pkg))) for p in sorted(pkg.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")]


def venv_archive() -> str:
    """A packed slim virtual environment for YARN (``spark.archives …#drtenv`` with
    ``spark.pyspark.python=./drtenv/bin/python``), the layout ``venv-pack`` makes: ``pyvenv.cfg``,
    ``bin/python`` (a link to the driver's base interpreter, which nodes must have at the same
    path, as with venv-pack) and ``lib/pythonX.Y/site-packages`` holding ``dr_toolkit`` and the
    distributions of :func:`distributions` — nothing installed on the nodes, no pip there.

    Built once per content (the versions, Python and platform, and a hash of dr_toolkit's files)
    and cached beside :func:`archive`."""
    import importlib.metadata as md
    import io

    dists = distributions()
    own = _package_files()
    tag = f"{sys.implementation.cache_tag}-{platform.machine()}-{sys.platform}"
    h = hashlib.sha256(repr((tag, dists, sys._base_executable)).encode())  # type: ignore[attr-defined]
    for src, rel in own:
        h.update(rel.encode())
        h.update(hashlib.sha256(src.read_bytes()).digest())
    out = cache_dir() / f"executor-venv-{tag}-{h.hexdigest()[:16]}.tar.gz"
    if out.exists():
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    base = Path(sys._base_executable).resolve()  # type: ignore[attr-defined]
    cfg = (f"home = {base.parent}\ninclude-system-site-packages = false\n"
           f"version = {platform.python_version()}\n").encode()
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("pyvenv.cfg")
        info.size = len(cfg)
        tar.addfile(info, io.BytesIO(cfg))
        for name, target in (("bin/python", str(base)), ("bin/python3", "python")):
            link = tarfile.TarInfo(name)
            link.type = tarfile.SYMTYPE
            link.linkname = target
            link.mode = 0o777
            tar.addfile(link)
        for name, _version in dists:
            d = md.distribution(name)
            for f in d.files or []:
                src = Path(str(d.locate_file(f)))
                rel = str(f)
                if rel.startswith("..") or rel.endswith(".pyc") or "__pycache__" in rel or not src.is_file():
                    continue
                tar.add(src, arcname=f"{site}/{rel}", recursive=False)
        for src, rel in own:
            tar.add(src, arcname=f"{site}/{rel}", recursive=False)
    os.replace(tmp, out)
    # one archive per dr_toolkit content: keep the newest few, not one per edit for ever
    for old in sorted(out.parent.glob(f"executor-venv-{tag}-*.tar.gz"), key=lambda p: p.stat().st_mtime)[:-3]:
        old.unlink(missing_ok=True)
    return str(out)


_MISSING = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([^']+)'")
_VERSION = re.compile(r"Python in worker has different version[^\n]*")


def missing_module(text: str) -> str | None:
    """One line when a failed job's error says the executors' Python lacked a module or is
    another version than the driver's (else None)."""
    m = _MISSING.search(text)
    if m:
        return (f"the executors' Python cannot import {m.group(1)!r}: the copy engine ships its packages "
                f"(spark.archives, built for Python {platform.python_version()} on {platform.machine()}); the "
                "workers need that Python, or the packages installed (clusters.<name>.spark.ship_library: false)")
    m2 = _VERSION.search(text)
    if m2:
        return f"the executors' Python is another version than the driver's: {m2.group(0).strip()[:200]}"
    return None


# what a copy task imports on an executor, tried there before any file is copied
PROBE_MODULES = ("pydantic", "google_crc32c", "requests", "hdfs", "boto3", "dr_toolkit.copy.execute")
_checked: set[str] = set()


def check_executors(sc: object) -> None:
    """Run one tiny task per core and refuse, in one line (ConfigError, exit 2), when the
    executors' Python cannot import what the copy tasks need — before any file is touched. Once
    per application; local masters run the driver's own Python and are not checked. A task per
    core (``defaultParallelism``) also starts the executors' Python workers and their imports side
    by side, which the copy's tasks then reuse (``spark.python.worker.reuse``)."""
    master = str(getattr(sc, "master", ""))
    app = str(getattr(sc, "applicationId", ""))
    if master.startswith("local") or app in _checked:
        return
    wanted = list(PROBE_MODULES)

    def probe(_rows: object) -> list[dict[str, object]]:
        # nested: shipped by value, so it runs even where dr_toolkit itself cannot be imported
        import importlib
        import platform as pf

        missing = []
        for m in wanted:
            try:
                importlib.import_module(m)
            except Exception as exc:  # noqa: BLE001 - reported, by name, to the driver
                missing.append(f"{m} ({type(exc).__name__}: {exc})"[:200])
        return [{"python": pf.python_version(), "missing": missing}]

    try:
        n = max(1, int(getattr(sc, "defaultParallelism", 1)))
        got = sc.parallelize(range(n), n).mapPartitions(probe).collect()  # type: ignore[attr-defined]
    except Exception as exc:
        why = missing_module(str(exc))
        if why:
            raise ConfigError(why, where=master) from None
        raise
    bad = [g for g in got if g["missing"]]
    if bad:
        missing = list(dict.fromkeys(m for g in bad for m in g["missing"]))
        raise ConfigError(f"the executors' Python {bad[0]['python']} cannot import {', '.join(missing)}",
                          where=master, hint="run the workers on the driver's Python version (the packages are "
                          "shipped), or install them there and set clusters.<name>.spark.ship_library: false")
    _checked.add(app)
