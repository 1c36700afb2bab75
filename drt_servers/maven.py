"""Maven artifacts for the JVM servers: one ``pom.xml`` per component, resolved once.

``classpath("hdfs")`` returns the runtime classpath of ``drt_servers/maven/hdfs/pom.xml``.
The first call runs ``mvn dependency:build-classpath`` (downloads into the local Maven
repository, ``~/.m2`` unless ``DRT_MAVEN_REPO`` says otherwise) and caches the result under
``.cache/servers/<component>/`` keyed by the pom's hash; later calls read the cache and need no
network. ``java_classes("hdfs")`` compiles our own small mains in ``drt_servers/java/<component>/``
against that classpath (once, cached the same way).

A failed resolution raises :class:`ServerSetupError` naming the pom's coordinates and the
command to re-run — a missing artifact is a failing test with that message, never a skip.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
POMS = HERE / "maven"
JAVA_SRC = HERE / "java"
CACHE = Path(os.environ.get("DRT_SERVERS_CACHE", HERE.parent / ".cache" / "servers"))
JDK17 = Path("/usr/lib/jvm/java-17-openjdk-amd64")


class ServerSetupError(RuntimeError):
    """A server's artifacts or runtime cannot be had; the message names what and how to fix it."""


def components() -> list[str]:
    return sorted(p.parent.name for p in POMS.glob("*/pom.xml"))


def java(tool: str = "java") -> str:
    """Java 17 (Hadoop 3.4 and HBase 2.x fail on Java 23+, Kafka 4 needs 17+)."""
    home = Path(os.environ.get("DRT_JAVA_HOME", JDK17))
    exe = home / "bin" / tool
    if exe.exists():
        return str(exe)
    found = shutil.which(tool)
    if not found:
        raise ServerSetupError(f"{tool} (Java 17) not found: run `make setup` (apt-get install openjdk-17-jdk-headless)")
    return found


def coordinates(component: str) -> list[str]:
    """groupId:artifactId:version of every dependency the component's pom declares."""
    text = (POMS / component / "pom.xml").read_text()
    props = dict(re.findall(r"<([\w.\-]+)>([^<>]+)</\1>", text.split("<properties>", 1)[1].split("</properties>")[0])) \
        if "<properties>" in text else {}
    out = []
    for dep in re.findall(r"<dependency>(.*?)</dependency>", text, re.S):
        g = re.search(r"<groupId>(.*?)</groupId>", dep)
        a = re.search(r"<artifactId>(.*?)</artifactId>", dep)
        v = re.search(r"<version>(.*?)</version>", dep)
        ver = v.group(1) if v else "?"
        ver = re.sub(r"\$\{([\w.\-]+)\}", lambda m: props.get(m.group(1), m.group(0)), ver)
        out.append(f"{g.group(1) if g else '?'}:{a.group(1) if a else '?'}:{ver}")
    return out


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _mvn(pom: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    mvn = shutil.which("mvn")
    if not mvn:
        raise ServerSetupError("mvn not found: run `make setup` (apt-get install maven)")
    cmd = [mvn, "-B", "-q", "-f", str(pom), *args]
    repo = os.environ.get("DRT_MAVEN_REPO")
    if repo:
        cmd.append(f"-Dmaven.repo.local={repo}")
    env = {**os.environ, "JAVA_HOME": str(Path(java()).resolve().parent.parent)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def classpath(component: str) -> str:
    """The runtime classpath of ``maven/<component>/pom.xml`` (resolved once, then cached)."""
    pom = POMS / component / "pom.xml"
    if not pom.exists():
        raise ServerSetupError(f"no pom for server component {component!r} ({pom})")
    out = CACHE / component / f"classpath-{_digest(pom)}.txt"
    if out.exists():
        cp = out.read_text().strip()
        if all(Path(j).exists() for j in cp.split(":") if j):
            return cp
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    r = _mvn(pom, "dependency:build-classpath", f"-Dmdep.outputFile={tmp}", "-Dmdep.includeScope=runtime")
    if r.returncode != 0 or not tmp.exists():
        tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-6:])
        raise ServerSetupError(
            f"cannot resolve the Maven artifacts of {component} ({', '.join(coordinates(component))}) "
            f"with `mvn -f {pom} dependency:build-classpath`: {tail}")
    tmp.replace(out)
    return out.read_text().strip()


def java_classes(component: str) -> str:
    """Compile ``java/<component>/*.java`` against the component's classpath; return the classes dir."""
    sources = sorted((JAVA_SRC / component).glob("*.java"))
    if not sources:
        raise ServerSetupError(f"no Java sources for {component} in {JAVA_SRC / component}")
    cp = classpath(component)
    classes = CACHE / component / f"classes-{_digest(*sources, POMS / component / 'pom.xml')}"
    if (classes / ".ok").exists():
        return str(classes)
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    r = subprocess.run([java("javac"), "-nowarn", "-d", str(classes), "-cp", cp, *map(str, sources)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise ServerSetupError(f"javac failed for {component}'s mains: {r.stderr.strip()[-2000:]}")
    (classes / ".ok").write_text("ok")
    return str(classes)


def resolve_all() -> dict[str, int]:
    """Resolve every component (``make setup``); returns jar counts per component."""
    counts = {}
    for c in components():
        counts[c] = len(classpath(c).split(":"))
        if (JAVA_SRC / c).is_dir():
            java_classes(c)
    return counts
