"""The streamed planner (copy/stream_plan.py) against the in-memory one as its oracle (issue 42).

Seeded random namespaces — creates, modifications (size, mtime, change token, open files),
deletes, renames (in a listing: a delete and a create), file↔directory type changes both ways,
names that sort between a path and the paths below it ("a", "a-b", "a.b", "a b" beside "a/x"),
include/exclude/exclude_regex filters, append_only, --delete, --update, --overwrite — planned by
plan.fast_forward / plan.reconcile and by the streams with a batch of a few entries (every input
spilled as many sorted runs, merged back): the decisions must be equal, entry by entry."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.copy import manifest as mf
from dr_toolkit.copy import stream_plan as sp
from dr_toolkit.copy.listing import Side, entries, list_tree, wanted_only
from dr_toolkit.copy.plan import Plan, chain_break, fast_forward, filters_of, reconcile
from dr_toolkit.fs.base import FileStatus
from dr_toolkit.fs.local import LocalFileSystem
from dr_toolkit.fs.uri import parse_uri
from dr_toolkit.topology import CopyOptions

NAMES = ["a", "b", "a-b", "a.b", "a b", "a0", "ab", "z", "a!"]
SEEDS = range(60)


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _conflicts(rel: str, files: dict[str, Any] | set[str]) -> bool:
    """Whether ``rel`` cannot join a real tree holding ``files`` (a file where a directory is, or the reverse)."""
    return rel in files or any(p in files for p in _parents(rel)) or any(f.startswith(rel + "/") for f in files)


def _path(rng: random.Random, depth: int = 3) -> str:
    return "/".join(rng.choice(NAMES) for _ in range(rng.randint(1, depth)))


def _tree(rng: random.Random, n: int, strict: bool) -> list[str]:
    out: set[str] = set()
    for _ in range(n * 20):
        if len(out) >= n:
            break
        rel = _path(rng)
        if strict and _conflicts(rel, out):
            continue
        out.add(rel)
    return sorted(out)


def _options(rng: random.Random, **kw: Any) -> CopyOptions:
    filt: dict[str, Any] = {}
    r = rng.random()
    if r < 0.15:
        filt["include"] = [rng.choice(["a*", "*b", "a/*", "z"])]
    elif r < 0.3:
        filt["exclude"] = [rng.choice(["a-b", "*.b", "b/*", "a0"])]
    elif r < 0.45:
        filt["exclude_regex"] = [rng.choice([r"/a", r".*/b", r"/z/.*", r".* b"])]
    if rng.random() < 0.4:
        filt["append_only"] = [rng.choice(["*", "a*", "z"])]
    delete = rng.random() < 0.5 and bool(kw.get("update") or kw.get("overwrite"))  # as DistCp requires
    return CopyOptions(delete=delete, **filt, **kw)


def _same_plans(a: Plan, b: Plan) -> None:
    """Equal decisions: every path's task, entry kept, deletion, blocker, proof basis, fallback, read."""
    ca, cb = {t.rel: t for t in a.copies}, {t.rel: t for t in b.copies}
    assert len(ca) == len(a.copies) and len(cb) == len(b.copies)
    assert ca == cb
    assert a.keep == b.keep
    assert sorted(a.deletes) == sorted(b.deletes) and len(set(b.deletes)) == len(b.deletes)
    assert a.blockers == b.blockers
    assert a.basis == b.basis
    assert sorted(map(str, a.fallbacks)) == sorted(map(str, b.fallbacks))
    assert sorted(a.files_read) == sorted(b.files_read)
    assert (a.files_total, a.bytes_total, a.mode, a.mode_reason) == (b.files_total, b.bytes_total, b.mode,
                                                                      b.mode_reason)
    assert a.moves == b.moves == []
    if sum(a.basis.values()) <= 50:
        assert sorted(map(str, a.basis_samples)) == sorted(map(str, b.basis_samples))


# --- fast-forward of a listing: synthetic namespaces -----------------------------------------------


def _entry(rng: random.Random, i: int) -> mf.Entry:
    return mf.Entry(rng.randint(0, 40), float(rng.randint(1, 5)), f"COMPOSITE-CRC32C:{i:x}" if rng.random() < 0.8
                    else None, 7.0, f"v{i}" if rng.random() < 0.9 else None, f"X:{i}", f"t{i}",
                    rng.random() < 0.1, None)


def _namespace(seed: int, n: int = 150, strict: bool = True
               ) -> tuple[dict[str, mf.Entry], dict[str, FileStatus], dict[str, FileStatus]]:
    """(base manifest, source listing, target listing) after a random change sequence."""
    rng = random.Random(seed)
    base = {rel: _entry(rng, i) for i, rel in enumerate(_tree(rng, n, strict))}
    src: dict[str, FileStatus] = {}

    def put(rel: str, s: FileStatus) -> None:
        if not strict or not _conflicts(rel, src):
            src[rel] = s

    def same(rel: str, e: mf.Entry) -> FileStatus:
        return FileStatus("/src/" + rel, e.size, e.mtime, permission="644", version=e.version, block_size=128)

    gone_dirs = {p for rel in base for p in _parents(rel) if rng.random() < 0.04}  # directory -> file
    for rel, e in base.items():
        if any(p in gone_dirs for p in _parents(rel)):
            continue
        r = rng.random()
        if r < 0.45:
            put(rel, same(rel, e))
        elif r < 0.62:  # modified: grown, shrunk, touched, rewritten in place, same with no token
            k = rng.randrange(5)
            s = same(rel, e)
            s = FileStatus(s.path, e.size + rng.choice([-1, 5]) if k == 0 else s.size,
                           e.mtime + (2.0 if k == 1 else 0.0004 if k == 2 else 0.0), permission="600",
                           version=("w" if k == 3 else None if k == 4 else e.version), block_size=64)
            put(rel, s)
        elif r < 0.72:
            continue  # deleted
        elif r < 0.82:
            put(_path(rng), same(rel, e))  # renamed (a listing sees a delete and a create)
        elif r < 0.9:
            put(rel + "/" + rng.choice(NAMES), same(rel, e))  # file -> directory
        else:
            put(rel, same(rel, e))
    for d in sorted(gone_dirs):
        put(d, FileStatus("/src/" + d, 3, 1.0, version="dir-now-file"))
    for i in range(n // 5):
        put(_path(rng), FileStatus("/src/new", rng.randint(0, 9), 9.0, version=f"n{i}"))
    tgt: dict[str, FileStatus] = {}
    for rel, e in base.items():  # the target: the base, drifted now and then
        r = rng.random()
        if r < 0.03:
            continue
        tgt[rel] = FileStatus("/tgt/" + rel, e.size + (1 if r < 0.05 else 0), (e.tmtime or 0) + (1 if r < 0.07 else 0),
                              version=e.tversion if r > 0.09 else "other")
    if rng.random() < 0.5:
        tgt[_path(rng)] = FileStatus("/tgt/x", 1, 1.0)
    if rng.random() < 0.5:
        tgt = {r: s for r, s in tgt.items() if r in base}
        tgt = {r: FileStatus(s.path, base[r].size, base[r].tmtime or 0, version=base[r].tversion)
               for r, s in tgt.items()}
    return base, src, tgt


def _shuffled(d: dict[str, Any], seed: int) -> list[tuple[str, Any]]:
    items = list(d.items())
    random.Random(seed).shuffle(items)
    return items


def _streams(work: str, seed: int, batch: int, *pairs: tuple[dict[str, Any], sp.Codec[Any]]
             ) -> list[sp.SortedStream[Any]]:
    return [sp.SortedStream(_shuffled(d, seed + i), codec, work, batch=batch, name=f"s{i}")
            for i, (d, codec) in enumerate(pairs)]


@pytest.mark.parametrize("seed", SEEDS)
def test_fast_forward_streamed_equals_in_memory(seed: int, tmp_path: Path) -> None:
    strict = seed % 4 != 3  # every fourth namespace is no real tree: a path and paths below it on one side
    base, src_all, tgt = _namespace(seed, strict=strict)
    rng = random.Random(seed * 7 + 1)
    options = _options(rng, update=True)
    src = wanted_only(src_all, filters_of(options))
    want = fast_forward(src, base, options, reason="r")
    batch = rng.choice([1, 2, 3, 7, 1000])
    with sp.Workdir(str(tmp_path)) as work:
        s_src, s_base, s_tgt = _streams(work, seed, batch, (src, sp.STATUS), (base, sp.ENTRY), (tgt, sp.STATUS))
        if batch < len(src):
            assert len(s_src.runs) > 1  # spilled: the merge of sorted runs is what is tested
        run = sp.stream_fast_forward(s_src, s_base, options, reason="r", batch=batch)
        got = sp.to_plan(run)
        _same_plans(want, got)
        if strict:  # a real tree: every decision comes out in tree order (none waits past the next path)
            keys = [sp.tree_key(d.rel) for d in run]
            assert keys == sorted(keys)
        # the proof that the target still holds the base: same answer (the base in tree order: the
        # in-memory check names the first break in its dictionary's order)
        ordered = dict(sorted(base.items(), key=lambda kv: sp.tree_key(kv[0])))
        f = filters_of(options)
        assert sp.stream_chain_break(s_base, s_tgt, f.wanted) == chain_break(ordered, tgt, f.wanted)
    assert os.listdir(tmp_path) == []  # the runs are removed


def test_the_namespaces_hold_what_the_oracle_must_attack(tmp_path: Path) -> None:
    """The generator makes every kind of decision across the seeds (a test that attacks nothing proves nothing)."""
    seen: dict[str, int] = {}
    for seed in SEEDS:
        base, src_all, _tgt = _namespace(seed, strict=seed % 4 != 3)
        options = _options(random.Random(seed * 7 + 1), update=True)
        plan = fast_forward(wanted_only(src_all, filters_of(options)), base, options, reason="r")
        for k, n in [("blockers", len(plan.blockers)), ("deletes", len(plan.deletes)),
                     ("appends", sum(t.action == "append" for t in plan.copies)),
                     ("copies", len(plan.copies)), ("kept", len(plan.keep))]:
            seen[k] = seen.get(k, 0) + n
        if any(r in plan.blockers and any(x.startswith(r + "-") or x.startswith(r + ".") for x in base)
               for r in plan.blockers):
            seen["blocker beside a name sorting between"] = seen.get("blocker beside a name sorting between", 0) + 1
    assert all(seen.get(k, 0) > 5 for k in ("blockers", "deletes", "appends", "copies", "kept",
                                            "blocker beside a name sorting between")), seen


# --- reconcile: real trees on disk, listed through the listing stage -----------------------------------


def _write(root: Path, rel: str, data: bytes, mtime: float | None = None) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    if mtime is not None:
        os.utime(p, (mtime, mtime))


def _trees(seed: int, root: Path) -> tuple[Path, Path]:
    rng = random.Random(seed)
    src, tgt = root / "src", root / "tgt"
    src.mkdir()
    tgt.mkdir()
    src_files: set[str] = set()

    def put(rel: str, data: bytes, mtime: float | None = None) -> None:
        if not _conflicts(rel, src_files):
            _write(src, rel, data, mtime)
            src_files.add(rel)

    have = _tree(rng, 40, strict=True)
    for rel in have:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 24)))
        _write(tgt, rel, data, 1000.0)
        r = rng.random()
        if r < 0.4:
            put(rel, data, 1000.0)  # equal
        elif r < 0.5:
            put(rel, bytes(b ^ 1 for b in data), 1000.0)  # same size, other bytes
        elif r < 0.6:
            put(rel, data + b"tail")  # grown (an append under append_only)
        elif r < 0.65:
            put(rel, data[:-1])
        elif r < 0.75:
            pass  # only on the target
        elif r < 0.85:
            put(rel + "/" + rng.choice(NAMES), data)  # a directory on the source
        else:
            put(_path(rng) + ".mv", data)  # renamed (on the source only, as a new name)
    for rel in sorted({p for r in have for p in _parents(r)}):
        if rng.random() < 0.08:
            put(rel, b"now a file")  # a directory of the target is a file on the source
    for _ in range(6):
        put(_path(rng), b"new")
    return src, tgt


def _side(path: Path) -> Side:
    return Side(parse_uri(str(path)), LocalFileSystem(), str(path))


@pytest.mark.parametrize("seed", range(30))
def test_reconcile_streamed_equals_in_memory(seed: int, tmp_path: Path) -> None:
    src_dir, tgt_dir = _trees(seed, tmp_path)
    rng = random.Random(seed * 13 + 5)
    options = _options(rng, update=rng.random() < 0.8, overwrite=rng.random() < 0.1, workers=3,
                       proof=rng.choice(["checksum", "content"]))
    f = filters_of(options)
    src, tgt = _side(src_dir), _side(tgt_dir)
    src_files = wanted_only(list_tree(src), f)
    tgt_files = wanted_only(list_tree(tgt), f)
    recorded = {r: mf.Entry(t.size, 1.0, "SHA-256:00", t.mtime, "v") for r, t in tgt_files.items() if rng.random() < 0.5}
    want = reconcile(src.fs, src.root, src_files, tgt.fs, tgt.root, tgt_files, options, mode="reconcile",
                     reason="r", recorded=recorded)
    batch = rng.choice([1, 2, 5, 1000])
    with sp.Workdir(str(tmp_path)) as work:
        s_src = sp.SortedStream(((r, s) for r, s in entries(src) if f.wanted(r)), sp.STATUS, work, batch=batch,
                                name="src")
        s_tgt = sp.SortedStream(((r, s) for r, s in entries(tgt) if f.wanted(r)), sp.STATUS, work, batch=batch,
                                name="tgt")
        s_rec = sp.SortedStream(_shuffled(recorded, seed), sp.ENTRY, work, batch=batch, name="rec")
        run = sp.stream_reconcile(src.fs, src.root, s_src, tgt.fs, tgt.root, s_tgt, options, mode="reconcile",
                                  reason="r", recorded=s_rec, batch=batch)
        got = sp.to_plan(run)
        keys = [sp.tree_key(d.rel) for d in run]
    _same_plans(want, got)
    assert keys == sorted(keys)  # in tree order: nothing waits past the next path


# --- the pieces -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("compress", "chunk", "fanin"), [(False, 2048, 4), (True, 2048, 4), (False, 3, 4), (True, 4, 4),
                                                     (True, 3, 64), (False, 2, 300)])
def test_external_sort_merges_runs_in_tree_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 compress: bool, chunk: int, fanin: int) -> None:
    """FANIN 4: runs merged 4 at a time; 64 and 300: more than TOP_UP_RUNS runs merged at once, each
    of many chunks (merge_blocks tops every run up before a round)."""
    monkeypatch.setattr(sp, "FANIN", fanin)  # runs merged into longer runs on the way
    monkeypatch.setattr(sp, "COMPRESS", compress)
    monkeypatch.setattr(sp, "CHUNK", chunk)  # 3, 4: many chunks a run (merge_blocks reads the next ones)
    rng = random.Random(5)
    rels = list({_path(rng, 5) for _ in range(3000)})
    rng.shuffle(rels)
    d = {r: mf.Entry(i, 1.0) for i, r in enumerate(rels)}
    with sp.Workdir(str(tmp_path)) as work:
        s = sp.SortedStream(d.items(), sp.ENTRY, work, batch=10)
        assert 1 < len(s.runs) < fanin + 1 and s.count == len(d)
        got = [(sp.key_rel(k), e) for k, e in s]
        assert got == sorted(d.items(), key=lambda kv: kv[0].split("/"))
        assert got == list((sp.key_rel(k), e) for k, e in s)  # read twice: the same
    small = sp.SortedStream([("b", mf.Entry(1, 1.0)), ("a-b", mf.Entry(2, 1.0)), ("a/x", mf.Entry(3, 1.0))],
                            sp.ENTRY, str(tmp_path))
    assert [sp.key_rel(k) for k, _ in small] == ["a/x", "a-b", "b"] and small.runs == []


def test_streamed_manifest_is_the_manifest_format() -> None:
    entries_ = {f"p/{i}": mf.Entry(i, i / 3, f"MD5:{i:032x}", i / 7, f"v{i}", "X:1" if i % 2 else None,
                                   "t" if i % 3 else None, i % 5 == 0, None) for i in range(10_000)}
    buf = io.BytesIO()
    assert sp.write_manifest(buf, {"manifest_id": "m"}, entries_.items()) == len(entries_)
    header, back = mf.decode(buf.getvalue())
    assert header == {"manifest_id": "m"} and back == entries_
    assert dict(sp.read_manifest(io.BytesIO(mf.encode(entries_, {"manifest_id": "m"})))) == entries_


def test_the_trees_hold_what_the_reconcile_oracle_must_attack(tmp_path: Path) -> None:
    seen: dict[str, int] = {}
    for seed in range(30):
        (tmp_path / str(seed)).mkdir()
        src_dir, tgt_dir = _trees(seed, tmp_path / str(seed))
        rng = random.Random(seed * 13 + 5)
        options = _options(rng, update=rng.random() < 0.8, overwrite=rng.random() < 0.1, workers=3,
                           proof=rng.choice(["checksum", "content"]))
        f = filters_of(options)
        src, tgt = _side(src_dir), _side(tgt_dir)
        p = reconcile(src.fs, src.root, wanted_only(list_tree(src), f), tgt.fs, tgt.root,
                      wanted_only(list_tree(tgt), f), options, mode="reconcile", reason="r")
        for k, n in [("blockers", len(p.blockers)), ("deletes", len(p.deletes)),
                     ("appends", sum(t.action == "append" for t in p.copies)),
                     ("differs", sum(t.reason.startswith("differs") for t in p.copies)),
                     ("proven", sum(p.basis.values())), ("fallbacks", len(p.fallbacks)), ("read", len(p.files_read))]:
            seen[k] = seen.get(k, 0) + n
    assert all(n > 10 for n in seen.values()) and len(seen) == 7, seen


def test_a_listing_spilled_comes_back_field_for_field(tmp_path: Path) -> None:
    """A FileStatus through a run (columns, marshalled) comes back as a Listed tuple with the same
    fields by name; a stream sorted in a forked process reads back the same as one sorted here."""
    rng = random.Random(7)
    rels = sorted({_path(rng, 4) for _ in range(500)})
    d = {r: FileStatus(f"/root/{r}", i, i / 7, False, rng.choice([None, "644"]), rng.choice([None, f"v{i}"]),
                       rng.choice([None, 134217728])) for i, r in enumerate(rels)}
    with sp.Workdir(str(tmp_path)) as work:
        here = sp.SortedStream(d.items(), sp.STATUS, work, batch=7, name="here")
        there = sp.sorted_in_process(lambda: iter(d.items()), sp.STATUS, work, batch=7, name="there")()
        assert here.runs and there.runs and here.count == there.count == len(d)
        a, b = list(here), list(there)
        assert a == b and len(a) == len(d)
        for k, s in a:
            want = d[sp.key_rel(k)]
            assert isinstance(s, sp.Listed) and s._asdict() == {f: getattr(want, f) for f in sp.Listed._fields}


# --- the merge split by key range (one worker a range: its stacks start empty) -------------------------


def _split(streams: list[sp.SortedStream[Any]], parts: int, plan: Any) -> tuple[sp.Streamed, int]:
    """Each range of :func:`sp.split_ranges` planned alone by ``plan(*parts of the streams)``, joined."""
    ranges = sp.split_ranges(streams, parts)
    assert ranges[0][0] is None and ranges[-1][1] is None
    assert all(a[1] == b[0] and a[1] is not None and sp.top_cut(a[1]) == a[1] for a, b in zip(ranges, ranges[1:], strict=False))
    return sp.joined([plan(*(s.part(lo, hi) for s in streams)) for lo, hi in ranges]), len(ranges)


@pytest.mark.parametrize("seed", range(40))
def test_fast_forward_split_by_top_level_names_equals_in_memory(seed: int, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Random namespaces (renames, type changes both ways, names sorting between a path and the
    paths below it, filters) planned range by range: every range starts mid-run (chunks of 3), a
    cut falls between top-level names such as "a", "a b", "a-b", "a.b", "a0"; the joined decisions
    must equal the oracle's. Every fifth namespace lies under one top-level directory: one range."""
    monkeypatch.setattr(sp, "CHUNK", 3)
    strict = seed % 4 != 3
    base, src_all, tgt = _namespace(seed, strict=strict)
    one_top = seed % 5 == 4
    if one_top:
        base, src_all, tgt = ({"top/" + r: v for r, v in d.items()} for d in (base, src_all, tgt))  # type: ignore[assignment]
    rng = random.Random(seed * 7 + 1)
    options = _options(rng, update=True)
    src = wanted_only(src_all, filters_of(options))
    want = fast_forward(src, base, options, reason="r")
    batch = rng.choice([2, 5, 11, 1000])
    parts = rng.choice([2, 3, 5])
    with sp.Workdir(str(tmp_path)) as work:
        s_src, s_base = _streams(work, seed, batch, (src, sp.STATUS), (base, sp.ENTRY))
        run, n = _split([s_src, s_base], parts,
                        lambda a, b: sp.stream_fast_forward(a, b, options, reason="r", batch=batch))
        _same_plans(want, sp.to_plan(run))
        if one_top:
            assert n == 1  # no cut below the top: the range is planned whole
        elif len({r.split("/")[0] for r in (*src, *base)}) >= parts:
            assert n > 1  # the split is what is tested


@pytest.mark.parametrize("seed", range(12))
def test_reconcile_split_by_top_level_names_equals_in_memory(seed: int, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sp, "CHUNK", 2)
    src_dir, tgt_dir = _trees(seed, tmp_path)
    rng = random.Random(seed * 13 + 5)
    options = _options(rng, update=rng.random() < 0.8, overwrite=rng.random() < 0.1, workers=3,
                       proof=rng.choice(["checksum", "content"]))
    f = filters_of(options)
    src, tgt = _side(src_dir), _side(tgt_dir)
    src_files = wanted_only(list_tree(src), f)
    tgt_files = wanted_only(list_tree(tgt), f)
    recorded = {r: mf.Entry(t.size, 1.0, "SHA-256:00", t.mtime, "v") for r, t in tgt_files.items() if rng.random() < 0.5}
    want = reconcile(src.fs, src.root, src_files, tgt.fs, tgt.root, tgt_files, options, mode="reconcile",
                     reason="r", recorded=recorded)
    batch = rng.choice([1, 3, 1000])
    with sp.Workdir(str(tmp_path)) as work:
        inputs: list[tuple[dict[str, Any], sp.Codec[Any]]] = [(src_files, sp.STATUS), (tgt_files, sp.STATUS),
                                                              (recorded, sp.ENTRY)]
        streams = [sp.SortedStream(_shuffled(d, seed + i), codec, work, batch=batch, name=f"s{i}")
                   for i, (d, codec) in enumerate(inputs)]
        run, n = _split(streams, 3, lambda a, b, c: sp.stream_reconcile(
            src.fs, src.root, a, tgt.fs, tgt.root, b, options, mode="reconcile", reason="r", recorded=c, batch=batch))
        _same_plans(want, sp.to_plan(run))
        assert n > 1


def test_a_part_reads_exactly_its_keys_from_every_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges cut at every top-level name, and at names that are no entry's: each part holds
    exactly the keys of its range, in order, whatever chunk a bound falls in (chunks of 3)."""
    monkeypatch.setattr(sp, "CHUNK", 3)
    rng = random.Random(11)
    rels = list({_path(rng, 4) for _ in range(800)})
    d = {r: mf.Entry(i, 1.0) for i, r in enumerate(rels)}
    keys = sorted(sp.tree_key(r) for r in rels)
    cuts = sorted({sp.top_cut(k) for k in keys} | {"a\x01", "a", "0", "zz", "a b!"})
    with sp.Workdir(str(tmp_path)) as work:
        for batch in (7, 5000):  # spilled runs, and one batch in memory
            s = sp.SortedStream(_shuffled(d, 3), sp.ENTRY, work, batch=batch)
            assert bool(s.runs) == (batch == 7)
            for lo, hi in [(None, None), *zip([None, *cuts], [*cuts, None], strict=True)]:
                got = [k for k, _ in s.part(lo, hi)]
                assert got == [k for k in keys if (lo is None or k >= lo) and (hi is None or k < hi)], (lo, hi)
            ranges = sp.split_ranges([s], 4)
            assert len(ranges) == 4
            assert [k for lo, hi in ranges for k, _ in s.part(lo, hi)] == keys


def test_split_ranges_of_one_top_level_directory_is_one_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranges are cut at top-level names only (sampled by the runs' chunk index: chunks of 1
    here, every key a sample): under one top-level directory, one range — the split degrades to one
    worker, never a cut inside a subtree."""
    monkeypatch.setattr(sp, "CHUNK", 1)
    with sp.Workdir(str(tmp_path)) as work:
        s = sp.SortedStream(((f"top/d{i}/f", mf.Entry(i, 1.0)) for i in range(50)), sp.ENTRY, work, batch=4)
        assert sp.split_ranges([s], 2) == [(None, None)]
        s2 = sp.SortedStream(((f"d{i % 4}/f{i}", mf.Entry(i, 1.0)) for i in range(50)), sp.ENTRY, work, batch=4)
        assert sp.split_ranges([s2], 8) == [(None, "d1"), ("d1", "d2"), ("d2", "d3"), ("d3", None)]


def test_a_manifest_written_in_parts_is_one_manifest(tmp_path: Path) -> None:
    """Parts of a split merge (the first with the header, then gzip members without one, some empty)
    concatenated read back as the manifest."""
    entries_ = {f"p/{i:05d}": mf.Entry(i, i / 3, f"MD5:{i:032x}") for i in range(5000)}
    items = sorted(entries_.items())
    buf = io.BytesIO()
    sp.write_manifest(buf, {"manifest_id": "m"}, items[:1234])
    sp.write_manifest(buf, None, [])
    sp.write_manifest(buf, None, items[1234:])
    header, back = mf.decode(buf.getvalue())
    assert header == {"manifest_id": "m"} and back == entries_
    assert list(sp.read_manifest(io.BytesIO(buf.getvalue()))) == items


def test_parts_run_in_forked_processes(tmp_path: Path) -> None:
    assert sp.in_processes(lambda i: (i, os.getpid()), 3)[0] == (0, os.getpid())
    got = sp.in_processes(lambda i: (i, os.getpid()), 3)
    assert [i for i, _ in got] == [0, 1, 2] and len({p for _, p in got}) == 3
    with pytest.raises(OSError, match="part 1"):
        sp.in_processes(lambda i: 1 // (i - 1), 2)
