"""``same_bytes``: two byte streams, chunked differently, compared byte for byte."""

from __future__ import annotations

import hashlib
import random

import pytest

from dr_toolkit.fs.base import same_bytes


def _chunks(data: bytes, rnd: random.Random, most: int) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        k = rnd.randint(0, most)  # empty chunks too: a reader may yield them
        out.append(data[i:i + k])
        i += k
    return out


@pytest.mark.parametrize("seed", range(20))
def test_equal_only_when_the_bytes_are_equal_whatever_the_chunking(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(500):
        a = bytes(rnd.randrange(3) for _ in range(rnd.randint(0, 24)))
        b = bytearray(a)
        m = rnd.random()
        if m < 0.3 and b:
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
        elif m < 0.4:
            b.append(rnd.randrange(3))
        elif m < 0.5 and b:
            b.pop()
        most = rnd.choice([1, 4, 7, 32])  # 32: whole-stream chunks, compared in one piece
        eq, digest = same_bytes(_chunks(a, rnd, most), _chunks(bytes(b), rnd, rnd.choice([1, 4, 7, 32])))
        assert eq == (a == bytes(b)), (a, bytes(b))
        assert digest == (hashlib.sha256(a).hexdigest() if eq else None)


def test_equal_length_chunks_differing_in_the_last_byte() -> None:
    a = [b"x" * 4096, b"y" * 4096]
    assert same_bytes(a, [b"x" * 4096, b"y" * 4095 + b"z"]) == (False, None)
    assert same_bytes(a, list(a))[0]
