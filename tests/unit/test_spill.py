"""copy/spill.py's SpillMap against a dict (the oracle): random change sequences over a map that
spills to its SQLite file past a batch of 4 entries, with a write buffer of 3 and pages of 2, give
the dict's answers and the dict's iteration order at every step; a manifest encoded from a
spilled map has the bytes of the one encoded from a dict, and decoding spills."""

from __future__ import annotations

import random
import threading

import pytest

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import spill
from dr_toolkit.copy.spill import STATUS, SpillMap, files_map
from dr_toolkit.fs.base import FileStatus


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
