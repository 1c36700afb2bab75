"""The drain proof's WAL length on a filesystem, with WAL files shaped as real HBase 2.6 writes them
(``PWAL`` + a varint-delimited ``WALHeader``; the open WAL; a rolled WAL the queue lists late)."""

from __future__ import annotations

from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.hbase.status import fs_wal_length, wal_header_end

SERVER = "localhost,16020,1795497721578"
W1 = "localhost%2C16020%2C1795497721578.1795497727242"
W2 = "localhost%2C16020%2C1795497721578.1795497792987"
HEADER = b"PWAL" + bytes([81]) + b"\x0a" * 81  # 4 + 1 + 81 = 86 bytes


def _wal(root, name: str, edits: bytes = b"") -> None:
    d = root / "WALs" / SERVER
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(HEADER + edits)


def test_header_end() -> None:
    assert wal_header_end(HEADER + b"edits") == 86
    assert wal_header_end(b"PWAL\x96\x01") == 4 + 2 + 150  # a two-byte varint
    assert wal_header_end(b"not a wal") == 0 and wal_header_end(b"PWAL") == 0


def test_a_header_only_wal_has_nothing_to_ship_and_its_edits_count(tmp_path) -> None:
    length = fs_wal_length(LocalFileSystem(), str(tmp_path))
    _wal(tmp_path, W1)
    assert length(SERVER, W1, 0) == 0  # HBase records position 0 for it: drained
    _wal(tmp_path, W1, b"x" * 100)
    assert length(SERVER, W1, 0) == 186  # edits past the header: not drained at position 0
    assert length(SERVER, W1, 186) == 186


def test_bytes_past_the_position_count_even_where_the_reported_length_is_short(tmp_path) -> None:
    length = fs_wal_length(LocalFileSystem(), str(tmp_path))
    _wal(tmp_path, W1, b"x" * 500)
    assert length(SERVER, W1, 300) == 586  # readable to the end


def test_a_newer_wal_not_yet_in_the_queue_counts(tmp_path) -> None:
    length = fs_wal_length(LocalFileSystem(), str(tmp_path))
    _wal(tmp_path, W1, b"x" * 100)
    _wal(tmp_path, W2)
    assert length(SERVER, W1, 186) == 186  # the new WAL holds only its header
    _wal(tmp_path, W2, b"y" * 40)
    assert length(SERVER, W1, 186) == 226  # its 40 bytes of edits are not shipped
    (tmp_path / "WALs" / SERVER / "localhost%2C16020%2C1795497721578.meta.1795497799999.meta").write_bytes(b"m" * 9)
    assert length(SERVER, W1, 186) == 226  # meta WALs are not replicated


def test_archived_and_missing_wals(tmp_path) -> None:
    length = fs_wal_length(LocalFileSystem(), str(tmp_path))
    (tmp_path / "oldWALs").mkdir()
    (tmp_path / "oldWALs" / W1).write_bytes(HEADER + b"z" * 10)
    assert length(SERVER, W1, 0) == 96 and length(SERVER, W2, 0) is None
