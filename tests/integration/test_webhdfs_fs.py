"""WebHdfsFileSystem against the emulator: honest checksums, open files, layout-preserving
create, atomic replace, snapshot diffs as HDFS reports them, timeouts and failover."""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.fs.base import UnderConstruction
from dr_toolkit.fs.hdfs_checksum import EMPTY, Md5Md5Crc32c, md5md5crc32c
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
from dr_toolkit.secrets import Credentials
from dr_toolkit.topology import load_topology
from tests.support.webhdfs_emulator import WebHdfsEmulator

pytestmark = pytest.mark.integration


@pytest.fixture
def emu(tmp_path: Path) -> Iterator[WebHdfsEmulator]:
    e = WebHdfsEmulator(tmp_path / "hdfs").start(standby_first=True)
    yield e
    e.stop()


@pytest.fixture
def fs(emu: WebHdfsEmulator) -> Iterator[WebHdfsFileSystem]:
    f = WebHdfsFileSystem(emu.urls, timeout_s=20)
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


def test_checksum_is_the_md5md5crc_the_cluster_answers(fs: WebHdfsFileSystem, emu: WebHdfsEmulator) -> None:
    data = os.urandom(10_000)
    fs.write("/c/one", [data])
    c = fs.checksum("/c/one")
    assert c is not None and c.algorithm == "MD5-of-0MD5-of-512CRC32C" and not c.layout_independent
    assert c.bytes_per_checksum == 512
    assert c == md5md5crc32c(data, 134217728, 512)
    # a file created with the source's block size gets a comparable (equal) value; another layout does not
    fs.write("/c/b4k", [data], block_size=4096)
    fs.write("/c/b4k-copy", [data], block_size=4096)
    fs.write("/c/b8k", [data], block_size=8192)
    a, b, other = fs.checksum("/c/b4k"), fs.checksum("/c/b4k-copy"), fs.checksum("/c/b8k")
    assert a is not None and b is not None and other is not None
    assert a.algorithm == "MD5-of-8MD5-of-512CRC32C" and a.comparable(b) and a == b
    assert not a.comparable(other) and other.algorithm == "MD5-of-16MD5-of-512CRC32C"
    st = fs.stat("/c/b4k")
    assert st is not None and st.block_size == 4096
    # what the copy layer computes while streaming equals what the server says
    h = Md5Md5Crc32c(st.block_size or 0, a.bytes_per_checksum or 0)
    for chunk in fs.read("/c/b4k", chunk_size=1000):
        h.update(chunk)
    assert h.checksum() == a


def test_composite_only_when_the_server_says_so(tmp_path: Path) -> None:
    e = WebHdfsEmulator(tmp_path / "h", checksum_mode="composite").start()
    try:
        f = WebHdfsFileSystem(e.urls)
        f.write("/x", [b"hello"])
        c = f.checksum("/x")
        assert c is not None and c.algorithm == "COMPOSITE-CRC32C" and c.layout_independent
        assert c == f.content_checksum("/x")
    finally:
        e.stop()


def test_open_file_raises_under_construction_with_visible_length(fs: WebHdfsFileSystem,
                                                                emu: WebHdfsEmulator) -> None:
    emu.open_for_write("/logs/app.log", b"a" * 100)
    emu.hflush("/logs/app.log", b"b" * 23)
    with pytest.raises(UnderConstruction) as info:
        fs.checksum("/logs/app.log")
    assert info.value.visible_length == 123 and info.value.path == "/logs/app.log"
    assert isinstance(info.value, OSError) and "under construction" in str(info.value)
    assert fs.read_all("/logs/app.log") == b"a" * 100 + b"b" * 23
    emu.close_file("/logs/app.log")
    assert fs.checksum("/logs/app.log") is not None


def test_rename_replaces_atomically_in_one_call(fs: WebHdfsFileSystem, emu: WebHdfsEmulator) -> None:
    fs.write("/r/target", [b"old"])
    fs.write("/r/.drt-tmp.x", [b"new"])
    emu.store.ops.clear()
    fs.rename("/r/.drt-tmp.x", "/r/target")
    assert [op for op, _ in emu.store.ops] == ["RENAME"]  # no GETFILESTATUS, no DELETE: one step
    assert fs.read_all("/r/target") == b"new"
    # missing parents are created; a directory target is refused with IsADirectoryError
    fs.write("/r/t2", [b"2"])
    fs.rename("/r/t2", "/r/deep/er/t2")
    assert fs.read_all("/r/deep/er/t2") == b"2"
    fs.mkdirs("/r/dir/sub")
    fs.write("/r/t3", [b"3"])
    with pytest.raises(IsADirectoryError):
        fs.rename("/r/t3", "/r/dir")
    with pytest.raises(FileNotFoundError):
        fs.rename("/r/missing", "/r/x")


def test_replace_never_leaves_the_target_missing(fs: WebHdfsFileSystem, emu: WebHdfsEmulator) -> None:
    """A reader polling the target during many replaces always finds a whole file."""
    fs.write("/a/f", [b"v0" * 1000])
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        r = WebHdfsFileSystem([emu.active_url])
        while not stop.is_set():
            st = r.stat("/a/f")
            seen.append("missing" if st is None else str(st.size))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 30):
            fs.write(f"/a/.drt-tmp.{i}", [f"v{i % 10}".encode() * 1000])
            fs.rename(f"/a/.drt-tmp.{i}", "/a/f")
    finally:
        stop.set()
        t.join()
    assert seen and "missing" not in seen and set(seen) == {"2000"}


def test_listing_reports_what_it_passes_over(fs: WebHdfsFileSystem, emu: WebHdfsEmulator) -> None:
    fs.write("/t/a", [b"1"])
    fs.write("/t/.drt/data", [b"2"])  # a source directory named .drt is data now
    fs.write("/t/sub/.drt-tmp.abc", [b"3"])
    fs.mkdirs("/t/empty")
    skipped: list[tuple[str, str]] = []
    files = {s.path: s for s in fs.list_files("/t", lambda p, r: skipped.append((p, r)))}
    assert set(files) == {"/t/a", "/t/.drt/data"}
    assert sorted(skipped) == [("/t/empty", "empty directory"), ("/t/sub/.drt-tmp.abc", "named like a temporary file")]
    assert files["/t/a"].version == str(emu.store.ino("/t/a")) and files["/t/a"].block_size == 134217728
    assert sorted(fs.list_tmp("/t")) == ["/t/sub/.drt-tmp.abc"]
    assert sorted(fs.list_dirs("/t")) == ["/t/.drt", "/t/empty", "/t/sub"]
    before = fs.stat("/t/a")
    fs.write("/t/a", [b"1"])  # rewritten with the same bytes: a new inode, a new version
    after = fs.stat("/t/a")
    assert before is not None and after is not None and before.version != after.version


def test_snapshot_diff_keeps_hdfs_semantics(fs: WebHdfsFileSystem, emu: WebHdfsEmulator) -> None:
    for p in ("/s/d/f1", "/s/d/f2", "/s/x"):
        fs.write(p, [p.encode()])
    emu.allow_snapshot("/s")
    assert fs.is_snapshottable("/s")
    fs.create_snapshot("/s", "s1")
    fs.client.rename("/s/d", "/s/e")
    fs.write("/s/e/new", [b"n"])
    fs.write("/s/e/f1", [b"more"], append=True)
    fs.create_snapshot("/s", "s2")
    got = [(d.type, d.path, d.target) for d in fs.snapshot_diff("/s", "s1", "s2")]
    assert got == [("M", "", None), ("R", "d", "e"), ("M", "d", None), ("+", "d/new", None), ("M", "d/f1", None)]
    assert fs.snapshot_exists("/s", "s1")
    fs.delete_snapshot("/s", "s1")
    assert not fs.snapshot_exists("/s", "s1")


def test_failover_and_unreachable_namenodes(emu: WebHdfsEmulator, tmp_path: Path) -> None:
    fs = WebHdfsFileSystem(emu.urls, timeout_s=10)
    fs.write("/f/a", [b"x"])
    emu.failover()  # the other namenode is active now
    assert fs.read_all("/f/a") == b"x"
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there: connection refused
    fs2 = WebHdfsFileSystem([f"http://127.0.0.1:{port}", emu.active_url], timeout_s=10)
    assert fs2.read_all("/f/a") == b"x"  # the refused namenode is skipped
    with pytest.raises(UnreachableError) as info:
        WebHdfsFileSystem([f"http://127.0.0.1:{port}"], timeout_s=5).stat("/f/a")
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


def test_from_location_takes_credentials_by_connection_id(emu: WebHdfsEmulator, tmp_path: Path) -> None:
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(f"""
version: 1
clusters:
  hot:
    role: hot
    hdfs:
      namenodes: [{', '.join(emu.urls)}]
      conn_id: hot_webhdfs
  cold:
    role: cold
    local_root: {tmp_path / 'cold'}
""")
    topo = load_topology(cfg)
    loc = parse_uri("hdfs://hot/data", topo)
    with pytest.raises(ConfigError, match="hot_webhdfs"):
        WebHdfsFileSystem.from_location(loc, Access.none())
    fs = WebHdfsFileSystem.from_location(loc, Access.from_mapping({"hot_webhdfs": Credentials(login="etl")}))
    assert fs.client._session.params["user.name"] == "etl"
    fs.write("/data/x", [b"1"])
    assert fs.checksum("/data/x") == md5md5crc32c(b"1", 134217728)
