"""Path-keyed maps that stay in memory while small and spill to disk past a batch.

A copy run's listings (path → :class:`~dr_toolkit.fs.base.FileStatus`), its base manifest and
the next one (path → :class:`~dr_toolkit.copy.manifest.Entry`) are looked up by path, updated,
popped and iterated by the planning, copy and commit stages. :class:`SpillMap` is those
operations over an ordinary ``dict`` up to :data:`BATCH` entries (a small run pays one method
call an operation) and, past it, over a private SQLite database in a temporary file (SQLite's
own: deleted when the map is closed or collected, and by the kernel when the process dies) with
a page cache of :data:`CACHE_KIB`: the map's memory is bounded whatever it holds.

It behaves as the ``dict`` it replaces, iteration order included (insertion order: an update
keeps a key's place, a key popped and set again goes last): every row has a rowid that only
grows, values are updated in place (an upsert), and the map is read back in rowid order. So a
manifest encoded from a spilled map has the bytes of the one encoded from a dict. Writes are
buffered (:data:`FLUSH` at a time, one ``executemany``); reads look at the buffer first. All
operations hold one lock: listings, proofs and checksum confirmations read maps from several
threads. Values are stored with a :class:`RowCodec` (``marshal`` of the value's fields)."""

from __future__ import annotations

import marshal
import threading
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, MutableMapping, ValuesView
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Generic, TypeVar, cast

from dr_toolkit.fs.base import FileStatus

BATCH = 500_000  # entries held in a dict before the map spills (stream_plan.BATCH: the same bound)
CACHE_KIB = 16 * 1024  # SQLite's page cache per spilled map
FLUSH = 4096  # writes buffered before one executemany
PAGE = 4096  # rows read at once while iterating

V = TypeVar("V")
_MISSING: Any = object()


@dataclass(frozen=True)
class RowCodec(Generic[V]):
    """A value to bytes and back (the same value: ``load(dump(v)) == v``)."""

    dump: Callable[[V], bytes]
    load: Callable[[bytes], V]


_status_fields = attrgetter("path", "size", "mtime", "is_dir", "permission", "version", "block_size")
_dumps, _loads = marshal.dumps, marshal.loads

#: a listing's values: :class:`~dr_toolkit.fs.base.FileStatus` by its seven fields
STATUS: RowCodec[FileStatus] = RowCodec(lambda s: _dumps(_status_fields(s)), lambda b: FileStatus(*_loads(b)))

def _key(k: str) -> bytes:
    """A path as its row's key: UTF-8 bytes (sqlite3 refuses a ``str`` with the surrogate escapes of a
    local name that is not UTF-8). ``surrogatepass`` encodes a surrogate as UTF-8 encodes every other
    code point, so the keys' byte order (SQLite's, for a BLOB) is the ``str`` order of the paths."""
    return k.encode("utf-8", "surrogatepass")


_UPSERT = "INSERT INTO m (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"


class SpillMap(MutableMapping[str, V]):
    """A ``dict`` of path → value that moves to a temporary SQLite file past ``batch`` entries
    (module doc). ``items`` fills it as ``dict(items)`` would."""

    def __init__(self, codec: RowCodec[V], items: Iterable[tuple[str, V]] | Mapping[str, V] = (), *,
                 batch: int | None = None) -> None:
        self._codec = codec
        self._batch = BATCH if batch is None else batch
        self._mem: dict[str, V] | None = {}
        self._db: Any = None
        self._buf: dict[str, V] = {}
        self._count: int | None = None
        self._lock = threading.RLock()
        if items:
            self.update(items)

    @property
    def spilled(self) -> bool:
        return self._mem is None

    # --- spilling and the buffer --------------------------------------------------------------

    def _spill(self) -> None:
        import sqlite3

        db = sqlite3.connect("", check_same_thread=False, isolation_level=None)  # "": a private temporary file
        for pragma in ("journal_mode = OFF", "synchronous = OFF", f"cache_size = -{CACHE_KIB}", "temp_store = FILE"):
            db.execute(f"PRAGMA {pragma}")
        # k: the path's UTF-8 bytes (_key): its unique index serves lookups and the sorted reads
        db.execute("CREATE TABLE m (k BLOB NOT NULL UNIQUE, v BLOB NOT NULL)")
        self._db = db
        mem, self._mem = self._mem, None
        assert mem is not None
        self._buf = mem
        self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        dump = self._codec.dump
        db = self._db
        db.execute("BEGIN")
        db.executemany(_UPSERT, [(_key(k), dump(v)) for k, v in self._buf.items()])
        db.execute("COMMIT")
        self._buf = {}
        self._count = None

    def _row(self, key: str) -> bytes | None:
        got = self._db.execute("SELECT v FROM m WHERE k = ?", (_key(key),)).fetchone()
        return None if got is None else cast(bytes, got[0])

    # --- the Mapping ----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> V:
        mem = self._mem
        if mem is not None:
            return mem[key]
        with self._lock:
            v = self._buf.get(key, _MISSING)
            if v is not _MISSING:
                return cast(V, v)
            b = self._row(key)
        if b is None:
            raise KeyError(key)
        return self._codec.load(b)

    def get(self, key: str, default: Any = None) -> Any:
        mem = self._mem
        if mem is not None:
            return mem.get(key, default)
        with self._lock:
            v = self._buf.get(key, _MISSING)
            if v is not _MISSING:
                return v
            b = self._row(key)
        return default if b is None else self._codec.load(b)

    def __contains__(self, key: object) -> bool:
        mem = self._mem
        if mem is not None:
            return key in mem
        if not isinstance(key, str):
            return False
        with self._lock:
            return key in self._buf or self._row(key) is not None

    def __setitem__(self, key: str, value: V) -> None:
        with self._lock:
            mem = self._mem
            if mem is not None:
                mem[key] = value
                if len(mem) > self._batch:
                    self._spill()
                return
            self._buf[key] = value
            self._count = None
            if len(self._buf) >= FLUSH:
                self._flush()

    def update(self, other: Any = (), /, **kw: V) -> None:
        items = other.items() if isinstance(other, Mapping) else other
        with self._lock:
            for k, v in items:
                mem = self._mem
                if mem is not None:
                    mem[k] = v
                    if len(mem) > self._batch:
                        self._spill()
                else:
                    self._buf[k] = v
                    self._count = None
                    if len(self._buf) >= FLUSH:
                        self._flush()
            for k, v in kw.items():
                self[k] = v

    def __delitem__(self, key: str) -> None:
        if self.pop(key, _MISSING) is _MISSING:
            raise KeyError(key)

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        with self._lock:
            mem = self._mem
            if mem is not None:
                v = mem.pop(key, _MISSING)
            else:
                v = self._buf.pop(key, _MISSING)
                b = self._row(key)
                if b is not None:
                    self._db.execute("DELETE FROM m WHERE k = ?", (_key(key),))
                    if v is _MISSING:
                        v = self._codec.load(b)
                self._count = None
        if v is _MISSING:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return v

    def __len__(self) -> int:
        with self._lock:
            if self._mem is not None:
                return len(self._mem)
            self._flush()
            if self._count is None:
                self._count = int(self._db.execute("SELECT count(*) FROM m").fetchone()[0])
            return self._count

    def _rows(self) -> Iterator[tuple[str, bytes | V, bool]]:
        """(key, value bytes or the value buffered since, whether buffered) in insertion order."""
        with self._lock:
            self._flush()
        last = 0
        while True:
            with self._lock:
                rows = self._db.execute("SELECT rowid, k, v FROM m WHERE rowid > ? ORDER BY rowid LIMIT ?",
                                        (last, PAGE)).fetchall()
                buf = dict(self._buf) if self._buf else None  # values updated since: newer than the rows
            if not rows:
                return
            last = rows[-1][0]
            for _, kb, b in rows:
                k = kb.decode("utf-8", "surrogatepass")
                if buf is not None and k in buf:
                    yield k, buf[k], True
                else:
                    yield k, b, False

    def sorted_keys(self, under: str | None = None) -> Iterator[str]:
        """The keys in sorted (``str``) order; with ``under``, only those below the directory ``under``
        (starting with ``under + "/"``). A spilled map reads them from its index a page at a time
        (bounded memory); in memory they are sorted here (at most a batch of them)."""
        mem = self._mem
        if mem is not None:
            yield from sorted(mem if under is None else (k for k in mem if k.startswith(under + "/")))
            return
        last, hi = (b"", None) if under is None else (_key(under + "/"), _key(under + "0"))  # '0' follows '/'
        op = ">="
        while True:
            with self._lock:
                self._flush()
                if hi is None:
                    rows = self._db.execute(f"SELECT k FROM m WHERE k {op} ? ORDER BY k LIMIT ?",
                                            (last, PAGE)).fetchall()
                else:
                    rows = self._db.execute(f"SELECT k FROM m WHERE k {op} ? AND k < ? ORDER BY k LIMIT ?",
                                            (last, hi, PAGE)).fetchall()
            if not rows:
                return
            last, op = rows[-1][0], ">"
            for (kb,) in rows:
                yield kb.decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        mem = self._mem
        if mem is not None:
            return iter(mem)
        return (k for k, _, _ in self._rows())

    def _items(self) -> Iterator[tuple[str, V]]:
        mem = self._mem
        if mem is not None:
            yield from mem.items()
            return
        load = self._codec.load
        for k, v, buffered in self._rows():
            yield k, (cast(V, v) if buffered else load(cast(bytes, v)))

    def items(self) -> ItemsView[str, V]:
        return _Items(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def close(self) -> None:
        """The temporary file removed now (else when the map is collected)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
                self._mem, self._buf = {}, {}

    def __repr__(self) -> str:
        return f"SpillMap({len(self)} entries{', spilled' if self.spilled else ''})"


class _Items(ItemsView[str, V]):
    _mapping: SpillMap[V]

    def __iter__(self) -> Iterator[tuple[str, V]]:
        return self._mapping._items()


class _Values(ValuesView[V]):
    _mapping: SpillMap[V]

    def __iter__(self) -> Iterator[V]:
        return (v for _, v in self._mapping._items())


#: path -> status: a listing (a :class:`SpillMap`, or a dict where it stays small)
Files = MutableMapping[str, FileStatus]


def files_map(items: Iterable[tuple[str, FileStatus]] | Mapping[str, FileStatus] = ()) -> SpillMap[FileStatus]:
    """A listing's map (path -> status) that spills to disk past a batch."""
    return SpillMap(STATUS, items)
