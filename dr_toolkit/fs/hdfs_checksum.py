"""HDFS's MD5MD5CRC file checksum, computed here from the bytes while they stream.

This is the value a real cluster answers to WebHDFS ``GETFILECHECKSUM``
(``MD5-of-<crcPerBlock>MD5-of-<bytesPerCRC>CRC32C``): per block of ``block_size`` bytes,
the MD5 of the big-endian CRC32C of every ``bytes_per_crc`` chunk (the last chunk of the
file may be short); then the MD5 of the concatenated block MD5s **padded with zero bytes to
the capacity of the buffer HDFS collects them in** (32 bytes, doubled as it fills: 32·2^k ≥
16 × blocks) — HDFS's client digests that buffer's whole backing array (``DataOutputBuffer.getData()``),
so a file of one block is the MD5 of its block MD5 followed by 16 zero bytes. (Checked against
a real DataNode: ``tests/integration/test_webhdfs_fs.py``.) ``crcPerBlock`` is
``block_size // bytes_per_crc`` when the file has more than one block, else 0. The value
serialises as ``int bytesPerCRC, long crcPerBlock, md5`` (28 bytes, hex), as HDFS's JSON
does. An empty file has HDFS's fixed value ``MD5-of-0MD5-of-0CRC32``.

With it the copy layer can compare an HDFS file's server-side checksum with bytes it read
or wrote elsewhere (local, S3) — when it knows the HDFS file's block size and
bytes-per-checksum (``FileStatus.block_size``; :attr:`Checksum.bytes_per_checksum`).
"""

from __future__ import annotations

import array
import hashlib
import struct
import sys

from dr_toolkit.fs.base import Checksum

EMPTY = Checksum("MD5-of-0MD5-of-0CRC32", (struct.pack(">iq", 0, 0) + hashlib.md5(bytes(32)).digest()).hex())


class Md5Md5Crc32c:
    """Running MD5MD5CRC32C (``update`` / ``checksum``), memory O(number of blocks × 16 B)."""

    def __init__(self, block_size: int, bytes_per_crc: int = 512) -> None:
        if bytes_per_crc <= 0 or block_size <= 0 or block_size % bytes_per_crc:
            raise ValueError(f"block size {block_size} must be a positive multiple of bytes-per-checksum "
                             f"{bytes_per_crc}")
        self.block_size = block_size
        self.bytes_per_crc = bytes_per_crc
        self.size = 0
        self._block_md5s = bytearray()
        self._crcs = bytearray()  # CRCs of the current block
        self._block_left = block_size
        self._partial = bytearray()  # bytes of the current (incomplete) chunk

    def update(self, data: bytes) -> None:
        import google_crc32c

        data = bytes(data)
        self.size += len(data)
        bpc = self.bytes_per_crc
        pos = 0
        if self._partial:
            take = min(bpc - len(self._partial), len(data))
            self._partial += data[:take]
            pos = take
            if len(self._partial) < bpc:
                return
            self._chunk(google_crc32c.value(bytes(self._partial)))
            self._partial.clear()
        end = pos + ((len(data) - pos) // bpc) * bpc
        if end > pos:
            value = google_crc32c.value
            crcs = array.array("I", [value(data[i:i + bpc]) for i in range(pos, end, bpc)])
            if sys.byteorder == "little":
                crcs.byteswap()  # HDFS stores each CRC big-endian
            self._add_crcs(crcs.tobytes())
        if end < len(data):
            self._partial += data[end:]

    def _chunk(self, crc: int) -> None:
        self._add_crcs(struct.pack(">I", crc))

    def _add_crcs(self, raw: bytes) -> None:
        """Append the big-endian CRCs of whole chunks, closing blocks as they fill."""
        bpc = self.bytes_per_crc
        while raw:
            room = (self._block_left // bpc) * 4
            take, raw = raw[:room], raw[room:]
            self._crcs += take
            self._block_left -= (len(take) // 4) * bpc
            if self._block_left == 0:
                self._block_md5s += hashlib.md5(self._crcs).digest()
                self._crcs.clear()
                self._block_left = self.block_size

    def checksum(self) -> Checksum:
        import google_crc32c

        if self.size == 0:
            return EMPTY
        crcs = bytearray(self._crcs)
        if self._partial:
            crcs += struct.pack(">I", google_crc32c.value(bytes(self._partial)))
        block_md5s = bytes(self._block_md5s) + (hashlib.md5(crcs).digest() if crcs else b"")
        capacity = 32
        while capacity < len(block_md5s):
            capacity *= 2
        block_md5s += bytes(capacity - len(block_md5s))  # HDFS digests its whole buffer
        crc_per_block = self.block_size // self.bytes_per_crc if self.size > self.block_size else 0
        value = struct.pack(">iq", self.bytes_per_crc, crc_per_block) + hashlib.md5(block_md5s).digest()
        return Checksum(f"MD5-of-{crc_per_block}MD5-of-{self.bytes_per_crc}CRC32C", value.hex())


def md5md5crc32c(data: bytes, block_size: int, bytes_per_crc: int = 512) -> Checksum:
    h = Md5Md5Crc32c(block_size, bytes_per_crc)
    h.update(data)
    return h.checksum()
