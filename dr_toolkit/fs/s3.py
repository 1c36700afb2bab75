"""S3 (boto3): paginated listing, ranged reads, multipart upload, optional server-side
encryption. S3 has no rename (copy + delete) and no append.

ETags are not content checksums across copies (a multipart ETag differs from a plain MD5,
and a server-side copy changes one into the other); an ETag is the object's change token
(``FileStatus.version``). The content CRC32C of every object this toolkit writes is computed
while streaming and stored in the object tag ``drt-crc32c``; objects written by others have
no checksum of ours and are compared by content.

Writes go straight to the final key (:meth:`S3FileSystem.write_verified`): a multipart upload
becomes visible only when it is completed, which happens after the caller verified the bytes —
no temporary object, nothing half-visible, nothing left in a versioned bucket. Parts are sized
to the object (at most 10,000 parts, 8 MiB minimum) and uploaded in parallel; uploads left by a
killed run are aborted by the next run (:meth:`abort_stale_uploads`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.base import CHUNK, TMP_PREFIX, Checksum, ContentHash, FileStatus, FileSystem, Skipped

if TYPE_CHECKING:
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import S3Endpoint

PART_SIZE = 8 << 20  # the smallest part used
MAX_PARTS = 10_000
PART_WORKERS = 4
CRC_TAG = "drt-crc32c"  # value: COMPOSITE-CRC32C of the content, 8 hex digits


def part_size(size_hint: int | None) -> int:
    """The part size for an object of ``size_hint`` bytes: 8 MiB, doubled until it fits 10,000 parts."""
    ps = PART_SIZE
    while size_hint and size_hint > ps * MAX_PARTS:
        ps *= 2
    return ps


class S3FileSystem(FileSystem):
    kind = "s3"
    cheap_checksum = True
    supports_atomic_replace = True  # a PUT/complete replaces the object in one step
    writes_in_place = True

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
            token = credentials.extra.get("aws_session_token") or credentials.extra.get("session_token")
            if token:  # temporary credentials (an assumed role): as the Spark path passes them
                kw["aws_session_token"] = str(token)
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

    def _walk(self, root: str, want_tmp: bool, skipped: Skipped | None = None) -> Iterator[dict[str, Any]]:
        root = root.strip("/")
        for o in self._objects(root):
            key = o["Key"]
            if key.endswith("/"):
                continue
            if posixpath.basename(key).startswith(TMP_PREFIX) == want_tmp:
                yield o
            elif skipped and not want_tmp:
                skipped(key, "named like a temporary file (.drt-tmp.*)")

    @staticmethod
    def _st(key: str, size: Any, mtime: Any, etag: Any) -> FileStatus:
        return FileStatus(key, int(size), mtime.timestamp(), version=str(etag).strip('"') if etag else None)

    def list_files(self, root: str, skipped: Skipped | None = None, dirs: dict[str, Any] | None = None,
                   recursive: bool = True) -> Iterator[FileStatus]:
        # no directories: ``dirs`` stays empty (a listing is one scan of immutable objects in key
        # order; nothing is renamed in place), so a one-level listing is never asked for
        if not recursive:
            raise NotImplementedError("S3 has no directories to list one level of")
        single = self.stat(root) if root.strip("/") else None
        if single is not None and not single.is_dir:
            yield single
            return
        for o in self._walk(root, want_tmp=False, skipped=skipped):
            yield self._st(o["Key"], o["Size"], o["LastModified"], o.get("ETag"))

    def list_tmp(self, root: str) -> Iterator[str]:
        return (o["Key"] for o in self._walk(root, want_tmp=True))

    def stat(self, path: str) -> FileStatus | None:
        key = path.strip("/")
        if key:
            try:
                with self._errors(key):
                    h = self.client.head_object(Bucket=self.bucket, Key=key)
                return self._st(key, h["ContentLength"], h["LastModified"], h.get("ETag"))
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

    def write(self, path: str, chunks: Iterable[bytes], *, append: bool = False, block_size: int | None = None,
              bytes_per_checksum: int | None = None, size_hint: int | None = None) -> int:
        if append:
            raise NotImplementedError("S3 objects cannot be appended to")
        return self.write_verified(path, chunks, lambda _n: None, size_hint=size_hint)

    def write_verified(self, path: str, chunks: Iterable[bytes], before_commit: Callable[[int], None], *,
                       size_hint: int | None = None) -> int:
        from concurrent.futures import Future, ThreadPoolExecutor

        key = path.strip("/")
        ps = part_size(size_hint)
        crc = ContentHash()
        buf = bytearray()
        total = 0
        upload_id: str | None = None
        futures: list[Future[dict[str, Any]]] = []
        pool: ThreadPoolExecutor | None = None

        def put_part(n: int, body: bytes) -> dict[str, Any]:
            r = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=body)
            return {"PartNumber": n, "ETag": r["ETag"]}

        def submit(body: bytes) -> None:
            assert pool is not None
            while sum(not f.done() for f in futures) >= PART_WORKERS:  # bounded memory: parts in flight
                next(f for f in futures if not f.done()).result()
            futures.append(pool.submit(put_part, len(futures) + 1, body))

        with self._errors(key):
            try:
                for c in chunks:
                    crc.update(c)
                    buf += c
                    total += len(c)
                    while len(buf) >= ps:
                        if upload_id is None:
                            upload_id = self.client.create_multipart_upload(
                                Bucket=self.bucket, Key=key, **self._extra())["UploadId"]
                            pool = ThreadPoolExecutor(PART_WORKERS)
                        submit(bytes(buf[:ps]))
                        del buf[:ps]
                if upload_id is None:
                    before_commit(total)  # raises: nothing was written
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=bytes(buf),
                                           Tagging=f"{CRC_TAG}={crc.hexdigest()}", **self._extra())
                    return total
                if buf:
                    submit(bytes(buf))
                parts = [f.result() for f in futures]
                before_commit(total)  # raises: the upload is aborted below, nothing becomes visible
                self.client.complete_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                                      MultipartUpload={"Parts": parts})
                upload_id = None
                self.client.put_object_tagging(Bucket=self.bucket, Key=key,
                                               Tagging={"TagSet": [{"Key": CRC_TAG, "Value": crc.hexdigest()}]})
            finally:
                if pool is not None:
                    pool.shutdown(wait=True, cancel_futures=True)
                if upload_id is not None:
                    try:
                        self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
                    except Exception:  # noqa: BLE001 - the next run aborts stale uploads
                        pass
        return total

    def abort_stale_uploads(self, root: str, older_than_s: float = 0.0) -> int:
        """Abort the multipart uploads under ``root`` (left by killed runs); returns how many."""
        import datetime

        prefix = root.strip("/")
        prefix = prefix + "/" if prefix else ""
        cutoff = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=older_than_s)
        n = 0
        with self._errors(prefix):
            pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=prefix)
            for page in pages:
                for u in page.get("Uploads", []) or []:
                    if u["Initiated"] <= cutoff:
                        self.client.abort_multipart_upload(Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"])
                        n += 1
        return n

    def rename(self, src: str, dst: str) -> None:
        """Copy then delete (S3 has no rename); the copy replaces ``dst`` in one step."""
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
