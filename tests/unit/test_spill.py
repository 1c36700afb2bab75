"""copy/spill.py's SpillMap against a dict (the oracle): random change sequences over a map that
spills to its SQLite file past a batch of 4 entries, with a write buffer of 3 and pages of 2, give
the dict's answers and the dict's iteration order at every step; a manifest encoded from a
spilled map has the bytes of the one encoded from a dict, and decoding spills."""

from __future__ import annotations

import random
import threading
import tracemalloc
from typing import Any

import pytest

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import plan, spill
from dr_toolkit.copy.spill import STATUS, SpillMap, files_map
from dr_toolkit.fs.base import DiffEntry, FileStatus


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "BATCH", 4)
    monkeypatch.setattr(spill, "FLUSH", 3)
    monkeypatch.setattr(spill, "PAGE", 2)


def _entry(rng: random.Random) -> mf.Entry:
    return mf.Entry(rng.randrange(10**6), rng.random() * 1e9, rng.choice([None, "COMPOSITE-CRC32C:0a0b"]),
                    rng.choice([None, 1.5]), rng.choice([None, "v1", "v2"]), None, rng.choice([None, "t"]),
                    rng.random() < 0.2, None)


def _check(m: SpillMap[mf.Entry], d: dict[str, mf.Entry], keys: list[str]) -> None:
    assert len(m) == len(d)
    assert list(m) == list(d)
    assert list(m.items()) == list(d.items())
    assert list(m.values()) == list(d.values())
    for k in keys:
        assert (k in m) == (k in d)
        assert m.get(k) == d.get(k)


@pytest.mark.usefixtures("tiny")
@pytest.mark.parametrize("seed", range(12))
def test_random_changes_give_the_dicts_answers_and_order(seed: int) -> None:
    rng = random.Random(seed)
    keys = [f"d{rng.randrange(4)}/f{i}" for i in range(40)]
    d: dict[str, mf.Entry] = {}
    m = mf.entries_map()
    for step in range(250):
        op = rng.random()
        k = rng.choice(keys)
        if op < 0.45:
            v = _entry(rng)
            d[k] = v
            m[k] = v
        elif op < 0.6:
            assert m.pop(k, None) == d.pop(k, None)
        elif op < 0.65:
            if k in d:
                del d[k]
                del m[k]
            else:
                with pytest.raises(KeyError):
                    del m[k]
        elif op < 0.75:
            batch = [(rng.choice(keys), _entry(rng)) for _ in range(rng.randrange(6))]
            d.update(batch)
            m.update(batch)
        elif op < 0.85 and d:  # values updated while iterating (a dict allows it)
            for key in m:
                if rng.random() < 0.3:
                    v = _entry(rng)
                    d[key] = v
                    m[key] = v
        else:
            if k in d:
                assert m[k] == d[k]
            else:
                with pytest.raises(KeyError):
                    m[k]
        if step % 10 == 0 or step == 249:
            _check(m, d, keys)
    assert m.spilled or len(d) <= 4
    assert m == d


@pytest.mark.usefixtures("tiny")
def test_listings_spill_and_read_back_the_same_statuses_from_threads() -> None:
    items = [(f"a/{i}", FileStatus(f"/r/a/{i}", i, i + 0.25, permission="644", version=f"v{i}", block_size=None))
             for i in range(50)]
    m = files_map(iter(items))
    assert m.spilled and list(m.items()) == items
    seen: list[bool] = []

    def read() -> None:
        seen.append(all(m[k] == v and k in m for k, v in items))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [True] * 4
    m.close()
    assert len(m) == 0 and SpillMap(STATUS, {}).spilled is False


@pytest.mark.usefixtures("tiny")
def test_a_manifest_encoded_from_a_spilled_map_has_the_dicts_bytes() -> None:
    rng = random.Random(7)
    d = {f"p/{rng.randrange(10**6)}": _entry(rng) for _ in range(9000)}  # more than one 4096-row line
    m = mf.entries_map(d)
    assert m.spilled
    data = mf.encode(d, {"manifest_id": "x"})
    assert mf.encode(m, {"manifest_id": "x"}) == data
    header, back = mf.decode(data)
    assert header == {"manifest_id": "x"} and isinstance(back, SpillMap) and back.spilled
    assert list(back.items()) == list(d.items())


@pytest.mark.usefixtures("tiny")
def test_names_that_are_not_utf8_spill_too() -> None:
    # a local listing carries a name that is not UTF-8 as surrogate escapes (os.fsdecode): sqlite3 refuses such a
    # str, so a spilled map keys its rows by the name's bytes
    names = ["a", "caf\udce9", "d/\udcff\udcfe", "é", "z"]
    d = {n: FileStatus(n, i, float(i)) for i, n in enumerate(names)}
    m = files_map(d)
    assert m.spilled
    _check(m, d, [*names, "absent", "caf\udce8"])
    assert m.pop("caf\udce9") == d.pop("caf\udce9")
    _check(m, d, names)


#: names whose UTF-8 bytes sort as the str does only with surrogatepass: a surrogate escape (U+DCxx) sorts
#: after U+D7FF and before U+E000 as a str
_ODD = ["caf\udce9", "\ue000x", "é", "\U0001f600", "a b", "\udcff"]


def _names(rng: random.Random, n: int) -> list[str]:
    dirs = ["a", "a/b", "c", *_ODD, f"{_ODD[0]}/{_ODD[1]}"]
    return list(dict.fromkeys(f"{rng.choice(dirs)}/{rng.choice(_ODD)}{i}" for i in range(n)))


@pytest.mark.usefixtures("tiny")
@pytest.mark.parametrize("seed", range(4))
def test_sorted_keys_are_the_strs_order_whole_and_under_a_directory(seed: int) -> None:
    rng = random.Random(seed)
    d = {n: FileStatus(n, i, 0.0) for i, n in enumerate(_names(rng, 60))}
    m = files_map(d)
    assert m.spilled
    for k in rng.sample(sorted(d), 5):
        m.pop(k)
        d.pop(k)
    m["a/new"] = d["a/new"] = FileStatus("a/new", 1, 0.0)  # buffered, not flushed yet
    assert list(m.sorted_keys()) == sorted(d)
    for under in ["a", "a/b", "c", *_ODD, "absent", f"{_ODD[0]}/{_ODD[1]}"]:
        assert list(m.sorted_keys(under)) == sorted(k for k in d if k.startswith(under + "/")), under
        assert list(mf.entries_map().sorted_keys(under)) == []


def _diff_case(rng: random.Random) -> tuple[dict[str, mf.Entry], list[Any], Any]:
    names = _names(rng, 40)
    base = {n: mf.Entry(i, float(i), None, None, f"v{i}") for i, n in enumerate(names)}
    dirs = sorted({n.rsplit("/", 1)[0] for n in names} | {""})
    diff: list[Any] = []
    for _ in range(rng.randrange(1, 8)):
        kind = rng.choice("R-+M")
        p = rng.choice(dirs + names)
        if kind == "R":
            diff.append(DiffEntry("R", p, f"moved{rng.randrange(3)}/{p.rsplit('/', 1)[-1]}"))
        else:
            diff.append(DiffEntry(kind, p))
    final = {n: FileStatus(n, 7, 9.0) for n in rng.sample(names, 10)}

    def stat_tree(rel: str, recursive: bool) -> dict[str, FileStatus] | None:
        if rel in final:
            return {rel: final[rel]}
        under = {r: s for r, s in final.items() if not rel or r.startswith(rel + "/")}
        if under or rel == "":
            return under if recursive else None
        return {}

    return base, diff, stat_tree


@pytest.mark.parametrize("seed", range(16))
def test_snapshot_diffs_over_a_spilled_base_decide_as_over_a_dict(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # plan._Sorted asks a spilled base through its index (SpillMap.sorted_keys) instead of sorting its keys:
    # the same states, in the same order, the same moves and the same files touched
    base, diff, stat_tree = _diff_case(random.Random(seed))
    want = plan.apply_diff(base, diff, stat_tree)
    want_relist = plan.relist_diff(base, diff, stat_tree)
    monkeypatch.setattr(spill, "BATCH", 4)
    monkeypatch.setattr(spill, "PAGE", 3)
    spilled = mf.entries_map(base)
    assert spilled.spilled
    got = plan.apply_diff(spilled, diff, stat_tree)
    assert list(got[0].items()) == list(want[0].items())
    assert list(got[1].items()) == list(want[1].items()) and got[2] == want[2]
    got_relist = plan.relist_diff(spilled, diff, stat_tree)
    assert list(got_relist[0].items()) == list(want_relist[0].items()) and got_relist[1] == want_relist[1]


def test_a_snapshot_diff_over_a_spilled_base_never_sorts_its_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "BATCH", 256)
    monkeypatch.setattr(spill, "FLUSH", 256)
    monkeypatch.setattr(spill, "PAGE", 256)
    base = mf.entries_map((f"d{i % 50}/part-{i:08d}.parquet", mf.Entry(i, 1.0)) for i in range(12_000))
    diff = [DiffEntry("R", f"d{i}", f"e{i}") for i in range(3)] + [DiffEntry("-", "d7/part-00000007.parquet")]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        state, moves, _ = plan.apply_diff(base, diff, lambda rel, rec: None)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert len(state) == 12_000 - 1 and len(moves) == 3 * 240 and state.spilled  # type: ignore[attr-defined]
    # the base's 12,000 paths sorted (a list and a set of them, as before) took 1.8 MB; now 0.4 MB
    assert peak < 1_000_000, peak
