"""Filesystems: local, WebHDFS, S3 behind one protocol (:class:`FileSystem`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr_toolkit.fs.base import Checksum, DiffEntry, FileStatus, FileSystem, is_internal, tmp_name
from dr_toolkit.fs.uri import Location, parse_uri

if TYPE_CHECKING:
    from dr_toolkit.secrets import Credentials

__all__ = ["Checksum", "DiffEntry", "FileStatus", "FileSystem", "Location", "is_internal", "open_fs",
           "parse_uri", "tmp_name"]


def open_fs(loc: Location, credentials: Credentials | None = None) -> FileSystem:
    """The filesystem ``loc`` lives on. Credentials: the value passed in (Airflow), else the
    topology endpoint's ``conn_id`` looked up in the environment, else the default chain."""
    from dr_toolkit.secrets import lookup

    cfg = loc.cluster_config
    if loc.kind == "local":
        from dr_toolkit.fs.local import LocalFileSystem

        return LocalFileSystem()
    if loc.kind == "webhdfs":
        from dr_toolkit.fs.webhdfs import WebHdfsFileSystem

        h = cfg.hdfs if cfg else None
        creds = credentials or (lookup(h.conn_id) if h else None)
        return WebHdfsFileSystem(loc.namenodes, user=h.user if h else None, kerberos=bool(h and h.kerberos),
                                 timeout_s=h.timeout_s if h else 30.0, credentials=creds)
    if loc.kind == "s3":
        from dr_toolkit.fs.s3 import S3FileSystem

        s = cfg.s3 if cfg else None
        creds = credentials or (lookup(s.conn_id) if s else None)
        assert loc.bucket is not None
        return S3FileSystem(loc.bucket, endpoint=s, credentials=creds)
    from dr_toolkit.errors import ConfigError

    raise ConfigError(f"no filesystem for location kind {loc.kind!r}", where=loc.uri)
