"""Filesystems: local, WebHDFS, S3 behind one protocol (:class:`FileSystem`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr_toolkit.errors import ConfigError
from dr_toolkit.fs.base import Checksum, DiffEntry, FileStatus, FileSystem, is_internal, tmp_name
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.fs.s3 import S3FileSystem
from dr_toolkit.fs.uri import Location, parse_uri
from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.secrets import Credentials

__all__ = ["Checksum", "DiffEntry", "FileStatus", "FileSystem", "Location", "is_internal", "credentials_for", "open_fs", "open_fs_credentials",
           "parse_uri", "tmp_name"]


def credentials_for(loc: Location, access: Access) -> Credentials | None:
    """The credentials of ``loc``'s topology endpoint (its cluster's ``hdfs``/``s3`` ``conn_id``) from
    ``access``; ``None`` for a location outside the topology, a local one, or an endpoint without one."""
    cfg = loc.cluster_config
    if cfg is None or loc.cluster is None:
        return None
    if loc.kind == "webhdfs":
        return access.cluster_endpoint(loc.cluster, cfg, "hdfs")
    if loc.kind == "s3":
        return access.cluster_endpoint(loc.cluster, cfg, "s3")
    return None


def open_fs(loc: Location, access: Access) -> FileSystem:
    """The filesystem ``loc`` lives on, with the credentials of its topology endpoint's
    ``conn_id`` from ``access``. An endpoint without a ``conn_id`` gets none (S3: the default
    AWS chain)."""
    return open_fs_credentials(loc, credentials_for(loc, access))


def open_fs_credentials(loc: Location, creds: Credentials | None) -> FileSystem:
    """:func:`open_fs` with credentials already resolved (Spark executors get them pickled): the
    one place each filesystem client is built."""
    cfg = loc.cluster_config
    if loc.kind == "local":
        return LocalFileSystem()
    if loc.kind == "webhdfs":
        h = cfg.hdfs if cfg else None
        return WebHdfsFileSystem(loc.namenodes, user=h.user if h else None, kerberos=bool(h and h.kerberos),
                                 timeout_s=h.timeout_s if h else 30.0, credentials=creds)
    if loc.kind == "s3":
        s = cfg.s3 if cfg else None
        assert loc.bucket is not None
        return S3FileSystem(loc.bucket, endpoint=s, credentials=creds)
    raise ConfigError(f"no filesystem for location kind {loc.kind!r}", where=loc.uri)
