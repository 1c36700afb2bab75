"""URIs the toolkit accepts, resolved through the topology — one place for every capability.

- ``file:///abs/path``                 a local path
- ``webhdfs://host:port/path``         WebHDFS at that namenode (``swebhdfs://`` for https)
- ``hdfs://<cluster>/path``            a cluster of the topology: its WebHDFS ``namenodes``,
                                       or its ``local_root`` directory (embedded default)
- ``s3://bucket/prefix``               S3 (the endpoint and credentials of the topology cluster
                                       whose ``s3.bucket`` matches, else the default AWS chain)
- a plain path (``/data``, ``./data``)   the same as ``file://`` with the absolute path

Paths are normalised; a ``..`` segment is refused rather than resolved, so no URI can
escape the root it names.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from dr_toolkit.errors import ConfigError
from dr_toolkit.paths import real_path
from dr_toolkit.topology import Cluster, Topology

SCHEMES = ("file", "webhdfs", "swebhdfs", "hdfs", "s3", "s3a")


@dataclass(frozen=True)
class Location:
    """A resolved URI: which filesystem (``kind``) and the absolute path within it."""

    kind: str  # "local" | "webhdfs" | "s3"
    path: str  # absolute, '/'-separated; for s3 the key prefix without a leading '/'
    uri: str  # the URI as the user wrote it (normalised)
    cluster: str | None = None
    namenodes: tuple[str, ...] = ()
    bucket: str | None = None
    cluster_config: Cluster | None = field(default=None, compare=False, repr=False)

    def child(self, rel: str) -> Location:
        rel = rel.strip("/")
        if not rel:
            return self
        _check_segments(rel, self.uri)
        sep = "" if self.path.endswith("/") or not self.path else "/"
        new_uri = self.uri.rstrip("/") + "/" + rel
        return Location(self.kind, self.path + sep + rel, new_uri, self.cluster, self.namenodes, self.bucket,
                        self.cluster_config)

    def spark_path(self) -> str:
        """The same place as a Hadoop-filesystem URI Spark can read."""
        if self.kind == "local":
            return "file://" + self.path
        if self.kind == "s3":
            return f"s3a://{self.bucket}/{self.path}"
        nn = urlparse(self.namenodes[0])
        scheme = "swebhdfs" if nn.scheme == "https" else "webhdfs"
        return f"{scheme}://{nn.netloc}{self.path}"

    def contains(self, other: Location) -> bool:
        """True when ``other`` is this location or lies inside it: the same filesystem (local
        paths compared as resolved real paths, so symlinks and ``hdfs://<local_root>`` aliases
        are seen through; WebHDFS by any shared namenode)."""
        if self.kind != other.kind:
            return False
        if self.kind == "local":
            a, b = real_path(self.path), real_path(other.path)
        else:
            if self.kind == "s3" and self.bucket != other.bucket:
                return False
            if self.kind == "webhdfs" and not set(map(_nn, self.namenodes)) & set(map(_nn, other.namenodes)):
                return False
            a, b = self.path.rstrip("/"), other.path.rstrip("/")
        return b == a or b.startswith(a + "/") or a in ("", "/")


def _nn(url: str) -> str:
    p = urlparse(url)
    return f"{(p.hostname or '').lower()}:{p.port}"


def _check_segments(path: str, uri: str) -> None:
    if any(seg == ".." for seg in path.split("/")):
        raise ConfigError(f"path escapes its root with '..': {uri}", hint="use a path without '..' segments")


def parse_uri(uri: str, topology: Topology | None = None) -> Location:
    """Resolve ``uri``; raise ConfigError (exit 2) naming the URI and what to write instead."""
    if "://" not in uri and uri and not uri.startswith(("hdfs:", "s3:", "webhdfs:", "file:")):
        _check_segments(uri, uri)  # a plain local path
        uri = "file://" + str(Path(uri).expanduser().absolute())
    p = urlparse(uri)
    scheme = p.scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown URI scheme {p.scheme or '(none)'!r} in {uri!r}",
                          hint="use file:///abs/path, hdfs://<cluster>/path, webhdfs://host:port/path "
                               "or s3://bucket/prefix")
    _check_segments(p.path, uri)
    if scheme == "file":
        if p.netloc not in ("", "localhost"):
            raise ConfigError(f"file URI with a host: {uri!r}", hint="write file:///abs/path (three slashes)")
        path = posixpath.normpath(p.path) if p.path else "/"
        return Location("local", path, "file://" + path)
    if scheme in ("webhdfs", "swebhdfs"):
        if not p.hostname or not p.port:
            raise ConfigError(f"WebHDFS URI needs host:port: {uri!r}", hint="e.g. webhdfs://nn1:9870/data")
        http = "https" if scheme == "swebhdfs" else "http"
        path = posixpath.normpath(p.path or "/")
        return Location("webhdfs", path, f"{scheme}://{p.netloc}{path}", namenodes=(f"{http}://{p.netloc}",))
    if scheme in ("s3", "s3a"):
        if not p.netloc:
            raise ConfigError(f"S3 URI needs a bucket: {uri!r}", hint="e.g. s3://bucket/prefix")
        key = posixpath.normpath(p.path).lstrip("/") if p.path not in ("", "/") else ""
        cluster_name = None
        cfg = None
        if topology is not None:
            for name, c in topology.clusters.items():
                if c.s3 is not None and c.s3.bucket == p.netloc:
                    cluster_name, cfg = name, c
                    break
        return Location("s3", key, f"s3://{p.netloc}/{key}".rstrip("/"), cluster_name, bucket=p.netloc,
                        cluster_config=cfg)
    # hdfs://<cluster>/path
    name = p.netloc
    if topology is None:
        raise ConfigError(f"{uri!r} names cluster {name!r} but no topology file was loaded",
                          hint="pass --config, or use webhdfs://host:port/path")
    if name not in topology.clusters:
        raise ConfigError(f"{uri!r} names unknown cluster {name!r}", where=topology.source_file,
                          hint=f"clusters in the topology: {', '.join(topology.clusters)}")
    c = topology.clusters[name]
    path = posixpath.normpath(p.path or "/")
    if c.hdfs is not None:
        return Location("webhdfs", path, f"hdfs://{name}{path}", name, tuple(c.hdfs.namenodes),
                        cluster_config=c)
    if c.local_root is not None:
        root = Path(c.local_root)
        if not root.is_absolute() and topology.source_file:
            root = Path(topology.source_file).resolve().parent / root
        local = posixpath.normpath(str(root.resolve()) + path)
        return Location("local", local, f"hdfs://{name}{path}", name, cluster_config=c)
    raise ConfigError(f"cluster {name!r} has neither hdfs namenodes nor local_root", where=topology.source_file,
                      hint=f"add clusters.{name}.hdfs.namenodes")
