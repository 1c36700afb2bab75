"""Metadata lint (CDAP): find hot-cluster-specific values in replicated metadata and config.

After failover the cold cluster starts from the replicated metadata; a namenode URI, a
ZooKeeper quorum, a Kafka bootstrap host or a bucket name of the hot cluster left in there
points the promoted cluster back at the dead one. This scans, before promotion:

- the files under each HDFS policy's cold targets (local ``local_root`` / ``file://``) whose
  names look like configuration or metadata (``*.xml``, ``*.properties``, ``*.json``,
  ``*.yaml``/``*.yml``, ``*.conf``, ``*.cfg``, ``*.ini``, ``*.sql``, ``*.hql``, ``*.ddl``,
  ``*metadata*``, ``*.meta``), and
- any extra paths given (files or directories),

for the hot cluster's namenode hosts, ZooKeeper hosts, Kafka bootstrap hosts, S3 bucket,
``hdfs://<hot-name>`` URIs, and its local root. Hosts shared by both clusters (everything on
127.0.0.1 in the embedded default) cannot tell the clusters apart and are not searched for
on their own; host:port pairs are.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from dr_toolkit.topology import Cluster, Topology

PATTERNS = ("*.xml", "*.properties", "*.json", "*.yaml", "*.yml", "*.conf", "*.cfg", "*.ini", "*.sql",
            "*.hql", "*.ddl", "*metadata*", "*.meta")
MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    kind: str
    value: str
    excerpt: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _hostports(cluster: Cluster) -> dict[str, set[str]]:
    """kind → values (host:port pairs and bare hosts) that identify ``cluster``."""
    out: dict[str, set[str]] = {"namenode": set(), "zookeeper": set(), "kafka": set(), "bucket": set()}
    if cluster.hdfs:
        for nn in cluster.hdfs.namenodes:
            p = urlparse(nn)
            if p.hostname:
                out["namenode"].add(p.hostname)
                if p.port:
                    out["namenode"].add(f"{p.hostname}:{p.port}")
    if cluster.zookeeper:
        for hp in cluster.zookeeper.quorum.split(","):
            hp = hp.strip()
            out["zookeeper"].add(hp)
            out["zookeeper"].add(hp.rpartition(":")[0])
    if cluster.kafka:
        for hp in cluster.kafka.bootstrap_servers.split(","):
            hp = hp.strip().split("://")[-1]
            out["kafka"].add(hp)
            out["kafka"].add(hp.rpartition(":")[0])
    if cluster.s3:
        out["bucket"].add(cluster.s3.bucket)
    return out


def needles(topology: Topology) -> list[tuple[str, re.Pattern[str], str]]:
    """(kind, compiled pattern, value) for every hot-cluster-specific value."""
    hot, cold = _hostports(topology.hot), _hostports(topology.cold)
    cold_all = set().union(*cold.values())
    out: list[tuple[str, re.Pattern[str], str]] = []
    name = topology.hot_name
    out.append(("hdfs-uri", re.compile(rf"\b(?:hdfs|webhdfs)://{re.escape(name)}(?=[/:\s\"'<,]|$)"),
                f"hdfs://{name}"))
    for kind, values in hot.items():
        for v in sorted(values):
            if not v or v in cold_all:
                continue  # shared with the cold cluster: not a hot-specific value
            if kind == "bucket":
                pat = re.compile(rf"(?:s3a?|s3n|gs)://{re.escape(v)}(?=[/\s\"'<,]|$)|\b{re.escape(v)}\b")
            else:
                pat = re.compile(rf"(?<![\w.\-]){re.escape(v)}(?![\w\-]|\.\w)" if ":" not in v
                                 else rf"(?<![\w.\-]){re.escape(v)}(?!\d)")
            out.append((kind, pat, v))
    if topology.hot.local_root and topology.hot.local_root != topology.cold.local_root:
        root = _local_root(topology, topology.hot)
        if root:
            out.append(("local-root", re.compile(re.escape(str(root))), str(root)))
    return out


def _local_root(topology: Topology, cluster: Cluster) -> Path | None:
    if not cluster.local_root:
        return None
    p = Path(cluster.local_root)
    if not p.is_absolute() and topology.source_file:
        p = Path(topology.source_file).resolve().parent / p
    return p.resolve()


def target_dirs(topology: Topology) -> list[Path]:
    """Local directories of the HDFS policies' cold targets (remote targets are skipped)."""
    out: list[Path] = []
    cold_root = _local_root(topology, topology.cold)
    for pol in topology.policies.hdfs:
        for t in pol.targets:
            u = urlparse(t)
            if u.scheme == "file":
                out.append(Path(u.path))
            elif u.scheme == "hdfs" and u.netloc == topology.cold_name and cold_root is not None:
                out.append(cold_root / u.path.lstrip("/"))
    return out


def _files(paths: Iterable[Path], explicit: set[Path]) -> Iterator[Path]:
    for p in paths:
        if p.is_file():
            yield p
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and not f.name.startswith((".", "_tmp")) and (
                        p in explicit or any(fnmatch.fnmatch(f.name.lower(), pat) for pat in PATTERNS)):
                    yield f


def lint(topology: Topology, extra_paths: Iterable[str | Path] = (), *, max_findings: int = 1000
         ) -> dict[str, Any]:
    """Scan; return ``{"clean", "files_scanned", "findings": [...], "needles": [...]}``."""
    ns = needles(topology)
    extra = [Path(p) for p in extra_paths]
    roots = target_dirs(topology) + extra
    findings: list[Finding] = []
    scanned = 0
    for f in _files(roots, set(extra)):
        try:
            if f.stat().st_size > MAX_FILE_BYTES:
                continue
            text = f.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        scanned += 1
        for lineno, line in enumerate(text.splitlines(), 1):
            for kind, pat, value in ns:
                if pat.search(line):
                    findings.append(Finding(str(f), lineno, kind, value, line.strip()[:200]))
                    break
            if len(findings) >= max_findings:
                break
    return {"clean": not findings, "files_scanned": scanned, "roots": [str(r) for r in roots],
            "needles": sorted({f"{k}:{v}" for k, _, v in ns}),
            "findings": [x.to_json() for x in findings]}
