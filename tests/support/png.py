"""A tiny PNG decoder (8-bit RGB/RGBA, non-interlaced: what Chromium's screenshots are), so tests
can check a screenshot's pixels without Pillow."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


class Image:
    def __init__(self, width: int, height: int, channels: int, rows: list[bytes]) -> None:
        self.width, self.height, self.channels, self.rows = width, height, channels, rows

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        i = x * self.channels
        r = self.rows[y]
        return r[i], r[i + 1], r[i + 2]

    def row_count(self, y: int, rgb: tuple[int, int, int], tol: int = 0) -> int:
        """How many pixels of row ``y`` have the colour ``rgb`` (each channel within ``tol``)."""
        row, n = self.rows[y], self.channels
        if tol:
            return sum(1 for i in range(0, len(row), n) if all(abs(row[i + c] - rgb[c]) <= tol for c in range(3)))
        if n == 3:
            return sum(1 for i in range(0, len(row), 3) if row[i:i + 3] == bytes(rgb))
        want = bytes(rgb)
        return sum(1 for i in range(0, len(row), 4) if row[i:i + 3] == want)

    def rows_with(self, rgb: tuple[int, int, int], min_run: int, tol: int = 0) -> list[int]:
        """The rows holding at least ``min_run`` pixels of ``rgb`` (a horizontal line, a banner);
        ``tol``: per-channel tolerance, for anti-aliased strokes."""
        return [y for y in range(self.height) if self.row_count(y, rgb, tol) >= min_run]


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def decode(path: str | Path) -> Image:
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        cur = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(channels, stride):
                cur[i] = (cur[i] + cur[i - channels]) & 0xFF
        elif f == 2:
            for i in range(stride):
                cur[i] = (cur[i] + prev[i]) & 0xFF
        elif f == 3:
            for i in range(stride):
                left = cur[i - channels] if i >= channels else 0
                cur[i] = (cur[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                left = cur[i - channels] if i >= channels else 0
                ul = prev[i - channels] if i >= channels else 0
                cur[i] = (cur[i] + _paeth(left, prev[i], ul)) & 0xFF
        rows.append(bytes(cur))
        prev = cur
    return Image(width, height, channels, rows)
