"""S3 (boto3): paginated listing, ranged reads, multipart upload, optional server-side
encryption. S3 has no rename (copy + delete) and no append.

ETags are not content checksums across copies (a multipart ETag differs from a plain MD5,
and a server-side copy changes one into the other). The content CRC32C of every object this
toolkit writes is computed while streaming and stored in the object tag ``drt-crc32c``;
objects written by others have no checksum and are compared by size and time.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.base import CHUNK, INTERNAL_DIR, TMP_PREFIX, Checksum, ContentHash, FileStatus, FileSystem

if TYPE_CHECKING:
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import S3Endpoint

PART_SIZE = 8 << 20
CRC_TAG = "drt-crc32c"  # value: COMPOSITE-CRC32C of the content, 8 hex digits


class S3FileSystem(FileSystem):
    kind = "s3"
    cheap_checksum = True

    def __init__(self, bucket: str, *, endpoint: S3Endpoint | None = None,
                 credentials: Credentials | None = None, timeout_s: float = 30.0) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.sse = endpoint.sse if endpoint else None
        kw: dict[str, Any] = {}
        if endpoint and endpoint.endpoint_url:
            kw["endpoint_url"] = endpoint.endpoint_url
        if endpoint and endpoint.region:
            kw["region_name"] = endpoint.region
        if credentials and credentials.login:
            kw["aws_access_key_id"] = credentials.login
            kw["aws_secret_access_key"] = credentials.password
        cfg = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 4, "mode": "standard"},
                     max_pool_connections=64)
        self.client = boto3.session.Session().client("s3", config=cfg, **kw)
        self.where = f"s3://{bucket} ({kw.get('endpoint_url', 'AWS')})"

    @contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        from botocore.exceptions import ClientError, ConnectionError, EndpointConnectionError

        try:
            yield
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(f"s3://{self.bucket}/{key}") from None
            if code == "NoSuchBucket":
                raise ConfigError(f"bucket {self.bucket!r} does not exist", where=self.where,
                                  hint="create it or fix the bucket name") from None
            raise OSError(f"S3 {code} on s3://{self.bucket}/{key}: {exc}") from None
        except (EndpointConnectionError, ConnectionError) as exc:
            raise UnreachableError(f"S3 unreachable ({type(exc).__name__})", where=self.where,
                                   hint="check the endpoint URL and the network") from None

    def join(self, base: str, rel: str) -> str:
        rel = rel.strip("/")
        base = base.strip("/")
        return f"{base}/{rel}" if base and rel else (base or rel)

    def _objects(self, root: str) -> Iterator[dict[str, Any]]:
        root = root.strip("/")
        prefix = root + "/" if root else ""
        with self._errors(root):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                yield from page.get("Contents", [])

    def _walk(self, root: str, want_tmp: bool) -> Iterator[dict[str, Any]]:
        root = root.strip("/")
        for o in self._objects(root):
            key = o["Key"]
            if key.endswith("/"):
                continue
            rel = self.relative(root, key)
            if rel.split("/", 1)[0] == INTERNAL_DIR:
                continue
            if posixpath.basename(key).startswith(TMP_PREFIX) == want_tmp:
                yield o

    def list_files(self, root: str) -> Iterator[FileStatus]:
        single = self.stat(root) if root.strip("/") else None
        if single is not None and not single.is_dir:
            yield single
            return
        for o in self._walk(root, want_tmp=False):
            yield FileStatus(o["Key"], int(o["Size"]), o["LastModified"].timestamp())

    def list_tmp(self, root: str) -> Iterator[str]:
        return (o["Key"] for o in self._walk(root, want_tmp=True))

    def stat(self, path: str) -> FileStatus | None:
        key = path.strip("/")
        if key:
            try:
                with self._errors(key):
                    h = self.client.head_object(Bucket=self.bucket, Key=key)
                return FileStatus(key, int(h["ContentLength"]), h["LastModified"].timestamp())
            except FileNotFoundError:
                pass
        with self._errors(key):
            r = self.client.list_objects_v2(Bucket=self.bucket, Prefix=key + "/" if key else "", MaxKeys=1)
        return FileStatus(key, 0, 0.0, True) if r.get("KeyCount", 0) else None

    def checksum(self, path: str) -> Checksum | None:
        key = path.strip("/")
        with self._errors(key):
            tags = self.client.get_object_tagging(Bucket=self.bucket, Key=key).get("TagSet", [])
        for t in tags:
            if t["Key"] == CRC_TAG:
                return Checksum("COMPOSITE-CRC32C", t["Value"])
        return None

    def read(self, path: str, offset: int = 0, length: int | None = None, chunk_size: int = CHUNK
             ) -> Iterator[bytes]:
        key = path.strip("/")
        if length == 0:
            return
        kw: dict[str, Any] = {}
        if offset or length is not None:
            end = "" if length is None else str(offset + length - 1)
            kw["Range"] = f"bytes={offset}-{end}"
        with self._errors(key):
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=key, **kw)["Body"]
            except Exception as exc:  # an empty object with a Range answers 416
                if "InvalidRange" in str(exc):
                    return
                raise
            try:
                yield from body.iter_chunks(chunk_size)
            finally:
                body.close()

    def _extra(self) -> dict[str, Any]:
        return {"ServerSideEncryption": self.sse} if self.sse else {}

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False) -> int:
        if append:
            raise NotImplementedError("S3 objects cannot be appended to")
        key = path.strip("/")
        crc = ContentHash()
        buf = bytearray()
        total = 0
        upload_id: str | None = None
        parts: list[dict[str, Any]] = []
        with self._errors(key):
            try:
                for c in chunks:
                    crc.update(c)
                    buf += c
                    total += len(c)
                    while len(buf) >= PART_SIZE:
                        if upload_id is None:
                            upload_id = self.client.create_multipart_upload(
                                Bucket=self.bucket, Key=key, **self._extra())["UploadId"]
                        n = len(parts) + 1
                        r = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                    PartNumber=n, Body=bytes(buf[:PART_SIZE]))
                        parts.append({"PartNumber": n, "ETag": r["ETag"]})
                        del buf[:PART_SIZE]
                tag = f"{CRC_TAG}={crc.hexdigest()}"
                if upload_id is None:
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=bytes(buf), Tagging=tag,
                                           **self._extra())
                    return total
                if buf or not parts:
                    n = len(parts) + 1
                    r = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=n,
                                                Body=bytes(buf))
                    parts.append({"PartNumber": n, "ETag": r["ETag"]})
                self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                      MultipartUpload={"Parts": parts})
                upload_id = None
                self.client.put_object_tagging(Bucket=self.bucket, Key=key,
                                               Tagging={"TagSet": [{"Key": CRC_TAG, "Value": crc.hexdigest()}]})
            finally:
                if upload_id is not None:
                    self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        return total

    def rename(self, src: str, dst: str) -> None:
        s, d = src.strip("/"), dst.strip("/")
        with self._errors(s):
            tags = self.client.get_object_tagging(Bucket=self.bucket, Key=s).get("TagSet", [])
            self.client.copy({"Bucket": self.bucket, "Key": s}, self.bucket, d, ExtraArgs=self._extra() or None)
            if tags:
                self.client.put_object_tagging(Bucket=self.bucket, Key=d, Tagging={"TagSet": tags})
            self.client.delete_object(Bucket=self.bucket, Key=s)

    def delete(self, path: str, recursive: bool = False) -> bool:
        key = path.strip("/")
        with self._errors(key):
            if recursive:
                keys = [o["Key"] for o in self._objects(key)]
                for i in range(0, len(keys), 1000):
                    self.client.delete_objects(Bucket=self.bucket, Delete={
                        "Objects": [{"Key": k} for k in keys[i:i + 1000]], "Quiet": True})
                if keys:
                    return True
            existed = self.stat(key) is not None
            self.client.delete_object(Bucket=self.bucket, Key=key)
            return existed

    def mkdirs(self, path: str) -> None:
        """S3 has no directories: nothing to do."""
