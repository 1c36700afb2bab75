"""The chunk fast path of the HBase verification (:func:`dr_toolkit.verify.hbase.compare_chunks`):
attacked with random tables, random changes and each side cut into regions at its own random
keys — the records fed to it are folded here the way ``HBaseCells.chunks`` folds a region's rows
(one record per run between boundary keys, a region's first run flagged when it starts
mid-chunk, digest sums as signed 64-bit longs). The invariant: a row is settled GOOD only if both
sides hold it with the same content, and every other row of either side lies in a range that is
read and compared row by row."""

from __future__ import annotations

import bisect
import hashlib
import random

import pytest

from dr_toolkit.verify.hbase import compare_chunks


def signed(x: int) -> int:
    return x - 2**64 if x >= 2**63 else x


def boundary(key: bytes, every: int) -> bool:
    return int.from_bytes(hashlib.sha1(key).digest()[:4], "big") % every == 0


def records(table: dict[bytes, bytes], cuts: list[bytes], every: int) -> list[tuple[bytes, bool, int, int, int]]:
    """What the reader emits for ``table`` split into regions at ``cuts``."""
    keys = sorted(table)
    regions: list[list[bytes]] = [[] for _ in range(len(cuts) + 1)]
    for k in keys:
        regions[bisect.bisect_right(cuts, k)].append(k)
    out = []
    for rows in regions:
        cur: list = []
        for k in rows:
            if not cur or boundary(k, every):
                if cur:
                    out.append(tuple(cur))
                cur = [k, boundary(k, every), 0, 0, 0]
            d = hashlib.md5(k + b"\0" + table[k]).digest()
            cur[2] += 1
            cur[3] = signed((cur[3] + int.from_bytes(d[:8], "big")) % 2**64)
            cur[4] = signed((cur[4] + int.from_bytes(d[8:], "big")) % 2**64)
        if cur:
            out.append(tuple(cur))
    random.shuffle(out)  # Spark returns the partitions in no promised order
    return out


def in_ranges(key: bytes, ranges: list[tuple[bytes, bytes]]) -> bool:
    return any(a <= key and (not b or key < b) for a, b in ranges)


def check(src: dict[bytes, bytes], peer: dict[bytes, bytes], every: int, rng: random.Random) -> None:
    keys = sorted(set(src) | set(peer))
    cuts_s = sorted(rng.sample(keys, min(len(keys), rng.randint(0, 5))))
    cuts_p = sorted(rng.sample(keys, min(len(keys), rng.randint(0, 5))))
    identical, differing = compare_chunks(records(src, cuts_s, every), records(peer, cuts_p, every))
    # the differing ranges: sorted, disjoint
    for (a, b), (c, _) in zip(differing, differing[1:], strict=False):
        assert b and a < b <= c, differing
    starts = sorted(a for a, _ in identical)
    settled = 0
    for k in keys:
        if in_ranges(k, differing):
            continue
        # not re-read: it must be in an identical chunk, and the same on both sides
        assert src.get(k) is not None and src.get(k) == peer.get(k), (k, src.get(k), peer.get(k))
        assert starts and starts[0] <= k
        settled += 1
    assert settled == sum(n for _, n in identical)


def table(n: int, rng: random.Random) -> dict[bytes, bytes]:
    return {f"row-{i:06d}".encode(): str(rng.randint(0, 3)).encode() for i in rng.sample(range(10 * n), n)}


@pytest.mark.parametrize("seed", range(300))
def test_only_rows_identical_on_both_sides_are_settled_without_a_row_read(seed: int) -> None:
    rng = random.Random(seed)
    src = table(rng.randint(0, 400), rng)
    peer = dict(src)
    keys = sorted(src)
    for _ in range(rng.randint(0, 8)):
        what = rng.choice(["delete", "change", "add", "add-first", "add-last"])
        if what == "delete" and peer:
            del peer[rng.choice(sorted(peer))]
        elif what == "change" and peer:
            k = rng.choice(sorted(peer))
            peer[k] = peer[k] + b"!"
        elif what == "add":
            peer[f"row-{rng.randint(0, 4000):06d}x".encode()] = b"1"
        elif what == "add-first":
            peer[b"a"] = b"1"  # before every source row
        elif what == "add-last" or not keys:
            peer[b"z"] = b"1"
    if rng.random() < 0.2:
        src, peer = peer, src
    check(src, peer, rng.choice([1, 2, 4, 16, 1000]), rng)


def test_identical_tables_cut_differently_are_settled_whole() -> None:
    rng = random.Random(7)
    src = table(500, rng)
    identical, differing = compare_chunks(records(src, sorted(rng.sample(sorted(src), 3)), 8),
                                          records(src, sorted(rng.sample(sorted(src), 4)), 8))
    assert differing == [] and sum(n for _, n in identical) == 500


def test_a_missing_boundary_row_reads_both_chunks_it_joined() -> None:
    src = {f"k{i:03d}".encode(): b"v" for i in range(200)}
    bounds = [k for k in sorted(src) if boundary(k, 8)]
    gone = bounds[len(bounds) // 2]
    peer = {k: v for k, v in src.items() if k != gone}
    identical, differing = compare_chunks(records(src, [], 8), records(peer, [], 8))
    i = bounds.index(gone)
    assert differing == [(bounds[i - 1], bounds[i + 1])]
    assert sum(n for _, n in identical) + sum(1 for k in src if bounds[i - 1] <= k < bounds[i + 1]) == 200


def test_empty_sides() -> None:
    assert compare_chunks([], []) == ([], [])
    _, differing = compare_chunks(records({b"a": b"1", b"b": b"2"}, [], 4), [])
    assert differing == [(b"", b"")]
