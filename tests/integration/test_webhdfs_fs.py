"""WebHdfsFileSystem against a real HDFS (hadoop-client-minicluster: an HA pair of NameNodes,
the standby listed first, and a DataNode): honest checksums, open files, layout-preserving
create, atomic replace, snapshot diffs as HDFS reports them, timeouts and failover. Every test
works in its own directory ``hot_dir`` on the session's cluster."""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.base import UnderConstruction
from dr_toolkit.fs.hdfs_checksum import EMPTY, Md5Md5Crc32c, md5md5crc32c
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
from dr_toolkit.secrets import Credentials
from dr_toolkit.topology import load_topology
from tests.support.fixtures_hdfs import HdfsDir

pytestmark = pytest.mark.integration


@pytest.fixture
def fs(hot_dir: HdfsDir) -> Iterator[WebHdfsFileSystem]:
    f = WebHdfsFileSystem(hot_dir.urls, timeout_s=20)
    yield f
    f.close()


def test_streaming_md5md5crc_matches_any_chunking() -> None:
    rnd = random.Random(7)
    for size in (0, 1, 511, 512, 513, 4096, 4097, 20_000):
        data = rnd.randbytes(size)
        whole = md5md5crc32c(data, 2048, 512)
        h = Md5Md5Crc32c(2048, 512)
        pos = 0
        while pos < size:
            n = rnd.randint(1, 700)
            h.update(data[pos:pos + n])
            pos += n
        assert h.checksum() == whole
    assert md5md5crc32c(b"", 1024) == EMPTY
    with pytest.raises(ValueError):
        Md5Md5Crc32c(1000, 512)


def test_checksum_is_the_md5md5crc_the_cluster_answers(fs: WebHdfsFileSystem, hot_dir: HdfsDir) -> None:
    p = hot_dir.p
    data = os.urandom(10_000)
    fs.write(p("/c/one"), [data])
    c = fs.checksum(p("/c/one"))
    assert c is not None and c.algorithm == "MD5-of-0MD5-of-512CRC32C" and not c.layout_independent
    assert c.bytes_per_checksum == 512
    assert c == md5md5crc32c(data, 134217728, 512)
    # a file created with the source's block size gets a comparable (equal) value; another layout does not
    fs.write(p("/c/b4k"), [data], block_size=4096)
    fs.write(p("/c/b4k-copy"), [data], block_size=4096)
    fs.write(p("/c/b8k"), [data], block_size=8192)
    a, b, other = fs.checksum(p("/c/b4k")), fs.checksum(p("/c/b4k-copy")), fs.checksum(p("/c/b8k"))
    assert a is not None and b is not None and other is not None
    assert a.algorithm == "MD5-of-8MD5-of-512CRC32C" and a.comparable(b) and a == b
    assert not a.comparable(other) and other.algorithm == "MD5-of-16MD5-of-512CRC32C"
    st = fs.stat(p("/c/b4k"))
    assert st is not None and st.block_size == 4096
    # what the copy layer computes while streaming equals what the server says
    h = Md5Md5Crc32c(st.block_size or 0, a.bytes_per_checksum or 0)
    for chunk in fs.read(p("/c/b4k"), chunk_size=1000):
        h.update(chunk)
    assert h.checksum() == a


@pytest.mark.parametrize("blocks", [1, 2, 3, 5, 9])
def test_streamed_md5md5crc_equals_the_datanode_for_any_block_count(fs: WebHdfsFileSystem, hot_dir: HdfsDir,
                                                                   blocks: int) -> None:
    """HDFS digests its block-MD5 buffer zero-padded to the buffer's capacity (32·2^k bytes): a
    plain MD5 of the block MD5s matches the DataNode only for 2, 4, 8... blocks."""
    data = os.urandom(1024 * (blocks - 1) + 700)
    fs.write(hot_dir.p("/n"), [data], block_size=1024)
    c = fs.checksum(hot_dir.p("/n"))
    assert c is not None and c == md5md5crc32c(data, 1024, 512)
    assert c.algorithm == f"MD5-of-{2 if blocks > 1 else 0}MD5-of-512CRC32C"


def test_open_file_raises_under_construction_with_visible_length(fs: WebHdfsFileSystem,
                                                                hot_dir: HdfsDir) -> None:
    log = hot_dir.p("/logs/app.log")
    hot_dir.open_for_write("/logs/app.log", b"a" * 100)
    hot_dir.hflush("/logs/app.log", b"b" * 23)
    with pytest.raises(UnderConstruction) as info:
        fs.checksum(log)
    assert info.value.visible_length == 123 and info.value.path == log
    assert isinstance(info.value, OSError) and "under construction" in str(info.value)
    assert fs.read_all(log) == b"a" * 100 + b"b" * 23
    hot_dir.close_file("/logs/app.log")
    assert fs.checksum(log) is not None


def test_visible_length_of_an_open_file_past_the_namenode_length(fs: WebHdfsFileSystem, hot_dir: HdfsDir) -> None:
    """The NameNode learns an open file's length only at an fsync: the first hflush after a new
    block is allocated (HDFS persists the block list then) or an hsync with UPDATE_LENGTH. Later
    plain hflushes inside that block are visible to readers, not to GETFILESTATUS."""
    w = hot_dir.p("/w/log")
    fs.write(w, [b""], block_size=1024)
    hot_dir.open_for_write("/w/log", b"x" * 1500, append=True)  # a new block, then its first hflush
    st = fs.stat(w)
    assert st is not None and st.size == 1500
    hot_dir.hflush("/w/log", b"y" * 10)  # same block: the NameNode is not told
    assert fs.stat(w).size == 1500  # type: ignore[union-attr]
    with pytest.raises(UnderConstruction) as info:
        fs.checksum(w)
    assert info.value.visible_length == 1510
    hot_dir.hflush("/w/log", b"z" * 10, sync="hsync")  # hsync(UPDATE_LENGTH)
    assert fs.stat(w).size == 1520  # type: ignore[union-attr]
    assert fs.visible_length(w) == 1520 and fs.visible_length(hot_dir.p("/w/none")) is None
    hot_dir.close_file("/w/log")


def test_rename_replaces_atomically_in_one_call(fs: WebHdfsFileSystem, hot_dir: HdfsDir) -> None:
    p = hot_dir.p
    fs.write(p("/r/target"), [b"old"])
    fs.write(p("/r/.drt-tmp.x"), [b"new"])
    ops: list[tuple[str, int]] = []
    fs.client._session.hooks["response"].append(
        lambda r, *a, **k: ops.append((parse_qs(urlparse(r.request.url).query).get("op", ["?"])[0], r.status_code)))
    fs.rename(p("/r/.drt-tmp.x"), p("/r/target"))
    # no GETFILESTATUS, no DELETE: one step (the standby listed first refuses it with 403 first)
    assert [op for op, code in ops if code == 200] == ["RENAME"] and {op for op, _ in ops} == {"RENAME"}
    fs.client._session.hooks["response"].clear()
    assert fs.read_all(p("/r/target")) == b"new"
    # missing parents are created; a directory target is refused with IsADirectoryError
    fs.write(p("/r/t2"), [b"2"])
    fs.rename(p("/r/t2"), p("/r/deep/er/t2"))
    assert fs.read_all(p("/r/deep/er/t2")) == b"2"
    fs.mkdirs(p("/r/dir/sub"))
    fs.write(p("/r/t3"), [b"3"])
    with pytest.raises(IsADirectoryError):
        fs.rename(p("/r/t3"), p("/r/dir"))
    with pytest.raises(FileNotFoundError):
        fs.rename(p("/r/missing"), p("/r/x"))


def test_replace_never_leaves_the_target_missing(fs: WebHdfsFileSystem, hot_dir: HdfsDir) -> None:
    """A reader polling the target during many replaces always finds a whole file."""
    f = hot_dir.p("/a/f")
    fs.write(f, [b"v0" * 1000])
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        r = WebHdfsFileSystem([hot_dir.active_url])
        while not stop.is_set():
            st = r.stat(f)
            seen.append("missing" if st is None else str(st.size))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 30):
            fs.write(hot_dir.p(f"/a/.drt-tmp.{i}"), [f"v{i % 10}".encode() * 1000])
            fs.rename(hot_dir.p(f"/a/.drt-tmp.{i}"), f)
    finally:
        stop.set()
        t.join()
    assert seen and "missing" not in seen and set(seen) == {"2000"}


def test_listing_reports_what_it_passes_over(fs: WebHdfsFileSystem, hot_dir: HdfsDir) -> None:
    p = hot_dir.p
    fs.write(p("/t/a"), [b"1"])
    fs.write(p("/t/.drt/data"), [b"2"])  # a source directory named .drt is data now
    fs.write(p("/t/sub/.drt-tmp.abc"), [b"3"])
    fs.mkdirs(p("/t/empty"))
    skipped: list[tuple[str, str]] = []
    files = {s.path: s for s in fs.list_files(p("/t"), lambda q, r: skipped.append((q, r)))}
    assert set(files) == {p("/t/a"), p("/t/.drt/data")}
    assert sorted(skipped) == [(p("/t/empty"), "empty directory"), (p("/t/sub/.drt-tmp.abc"), "named like a temporary file")]
    real = hot_dir.stat("/t/a")
    assert real is not None and files[p("/t/a")].version == str(real["fileId"])  # the inode id
    assert files[p("/t/a")].block_size == 134217728
    assert sorted(fs.list_tmp(p("/t"))) == [p("/t/sub/.drt-tmp.abc")]
    assert sorted(fs.list_dirs(p("/t"))) == [p("/t/.drt"), p("/t/empty"), p("/t/sub")]
    before = fs.stat(p("/t/a"))
    fs.write(p("/t/a"), [b"1"])  # rewritten with the same bytes: a new inode, a new version
    after = fs.stat(p("/t/a"))
    assert before is not None and after is not None and before.version != after.version


def test_snapshot_diff_keeps_hdfs_semantics(fs: WebHdfsFileSystem, hot_dir: HdfsDir) -> None:
    p = hot_dir.p
    for q in ("/s/d/f1", "/s/d/f2", "/s/x"):
        fs.write(p(q), [q.encode()])
    assert not fs.is_snapshottable(p("/s"))
    hot_dir.allow_snapshot("/s")
    assert fs.is_snapshottable(p("/s"))
    fs.create_snapshot(p("/s"), "s1")
    fs.client.rename(p("/s/d"), p("/s/e"))
    fs.write(p("/s/e/new"), [b"n"])
    fs.write(p("/s/e/f1"), [b"more"], append=True)
    fs.create_snapshot(p("/s"), "s2")
    got = [(d.type, d.path, d.target) for d in fs.snapshot_diff(p("/s"), "s1", "s2")]
    # the NameNode's order: depth first; changes under a renamed directory by its OLD path
    assert got == [("M", "", None), ("R", "d", "e"), ("M", "d", None), ("+", "d/new", None), ("M", "d/f1", None)]
    assert fs.snapshot_exists(p("/s"), "s1")
    fs.delete_snapshot(p("/s"), "s1")
    assert not fs.snapshot_exists(p("/s"), "s1")


def test_failover_and_unreachable_namenodes(hot_dir: HdfsDir) -> None:
    fs = WebHdfsFileSystem(hot_dir.urls, timeout_s=10)
    f = hot_dir.p("/f/a")
    fs.write(f, [b"x"])
    hot_dir.failover()  # the other namenode is active now
    assert fs.read_all(f) == b"x"
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there: connection refused
    fs2 = WebHdfsFileSystem([f"http://127.0.0.1:{port}", hot_dir.active_url], timeout_s=10)
    assert fs2.read_all(f) == b"x"  # the refused namenode is skipped
    with pytest.raises(UnreachableError) as info:
        WebHdfsFileSystem([f"http://127.0.0.1:{port}"], timeout_s=5).stat(f)
    assert info.value.exit_code == 3


def test_a_stalled_namenode_times_out(tmp_path: Path) -> None:
    """A namenode that accepts connections but never answers: the call ends after timeout_s."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    try:
        fs = WebHdfsFileSystem([f"http://127.0.0.1:{port}"], timeout_s=1)
        with pytest.raises(UnreachableError) as info:
            fs.stat("/x")
        assert "timeout 1 s" in str(info.value)
    finally:
        srv.close()
    with pytest.raises(ConfigError):
        WebHdfsFileSystem(["http://127.0.0.1:1"], timeout_s=0)


def test_from_location_takes_credentials_by_connection_id(hot_dir: HdfsDir, tmp_path: Path) -> None:
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(f"""
version: 1
clusters:
  hot:
    role: hot
    hdfs:
      namenodes: [{', '.join(hot_dir.urls)}]
      conn_id: hot_webhdfs
  cold:
    role: cold
    local_root: {tmp_path / 'cold'}
""")
    topo = load_topology(cfg)
    loc = parse_uri("hdfs://hot/data", topo)
    with pytest.raises(ConfigError, match="hot_webhdfs"):
        open_fs(loc, Access.none())
    fs = open_fs(loc, Access.from_mapping({"hot_webhdfs": Credentials(login="etl")}))
    assert fs.client._session.params["user.name"] == "etl"
    fs.write(hot_dir.p("/data/x"), [b"1"])
    assert fs.checksum(hot_dir.p("/data/x")) == md5md5crc32c(b"1", 134217728)
    assert hot_dir.stat("/data/x")["owner"] == "etl"  # type: ignore[index]



def test_a_refused_status_is_an_error_never_absent(tmp_path: Path) -> None:
    """GETFILESTATUS refused for anything but "no such file" — here an AccessControlException on a
    cluster with permissions on — raises: the hdfs library's ``status(strict=False)`` returns None
    for every refusal, so a tree we may not read listed as empty (with ``delete``, a copy would then
    empty its target) and a snapshottable root read as not snapshottable."""
    from drt_servers.hdfs import HdfsCluster

    c = HdfsCluster("perm", tmp_path / "perm", conf={"dfs.permissions.enabled": "true"}).start()
    try:
        admin, other = (WebHdfsFileSystem(c.namenodes, user=u, timeout_s=20) for u in ("hdfs", "other"))
        admin.client.makedirs("/priv/inner", permission="700")
        admin.client.set_permission("/priv", "700")
        admin.write_bytes("/priv/inner/f", b"x")
        for read in (lambda: other.stat("/priv/inner"), lambda: list(other.list_files("/priv")),
                     lambda: other.is_snapshottable("/priv/inner"), lambda: other.dir_token("/priv/inner")):
            with pytest.raises(OSError) as exc:
                read()
            assert not isinstance(exc.value, FileNotFoundError), exc.value
            assert "AccessControlException" in str(exc.value), exc.value
        assert other.stat("/missing") is None and list(other.list_files("/missing")) == []
        assert [s.path for s in admin.list_files("/priv")] == ["/priv/inner/f"]
        admin.close()
        other.close()
    finally:
        c.stop()
