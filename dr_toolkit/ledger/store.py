"""The SQL ledger: every copy, manifest, checkpoint, verification, audit event and lease.

``sql/schema.sql`` is the source of truth; :meth:`Ledger.migrate` applies it idempotently on
SQLite or PostgreSQL. Every write is a short transaction; JSON columns are text.

SQLAlchemy is imported when a ledger is opened, not when this module is: the helpers here
(:func:`new_id`, :func:`actor`) are used by code paths that never touch the ledger, and a
command that does not open it (`drt --help`, a bare `drt distcp`) must not pay for it.
"""

from __future__ import annotations

import copy
import getpass
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, LedgerUnreachable, UnreachableError
from dr_toolkit.ledger import retention
from dr_toolkit.ledger.lease import LeaseHolder
from dr_toolkit.ledger.rows import ManifestRow, VerifyReportRow
from dr_toolkit.secrets import redact

SCHEMA_VERSION = 2
Row = dict[str, Any]
CHECKPOINT_COLUMNS = ("checkpoint_id", "group_id", "topic", "partition_id", "committed_offset", "record_timestamp",
                      "timestamp_type", "fingerprint", "log_start_offset", "high_watermark", "taken_at")

if TYPE_CHECKING:
    from sqlalchemy import Engine, TextClause

    from dr_toolkit.access import Access
    from dr_toolkit.topology import Ledger as LedgerSettings
    from dr_toolkit.topology import Topology


def text(sql: str) -> TextClause:
    """``sqlalchemy.text``, imported on first use (a Ledger exists only once SQLAlchemy is loaded)."""
    from sqlalchemy import text as sa_text

    return sa_text(sql)


def new_id(prefix: str) -> str:
    """A sortable id: ``<prefix>-<UTC yyyymmddThhmmss>-<8 hex>``."""
    return f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def actor() -> str:
    """Who is acting: ``$DRT_ACTOR``, else user@host."""
    env = os.environ.get("DRT_ACTOR")
    if env:
        return env
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def open_ledger(topology: Topology, access: Access, *, migrate: bool = True,
                create: bool = True) -> Ledger:
    """The one way to open a topology's ledger: ``ledger.url`` (relative SQLite paths against the
    topology file's folder), the password from ``ledger.conn_id`` through ``access``.

    ``create=False`` is for read commands (`drt status`, `drt failover check`, ...): a SQLite
    ledger whose file does not exist is neither created nor is its directory; an empty ledger in
    a temporary directory (removed at exit) answers instead, and :attr:`Ledger.missing` names
    the file that does not exist."""
    base = Path(topology.source_file).resolve().parent if topology.source_file else None
    if not create:
        path = sqlite_file(topology.ledger.url, base)
        if path is not None and not path.exists():
            empty = Ledger.open(f"sqlite:///{_scratch_dir() / 'empty-ledger.db'}", from_env=False)
            empty.missing = str(path)
            return empty
    conn_id = topology.ledger.conn_id
    password = access.ledger_password(conn_id) if conn_id else None
    return Ledger.open(topology.ledger.url, migrate=migrate, password=password, base_dir=base)


def sqlite_file(url: str, base_dir: str | os.PathLike[str] | None) -> Path | None:
    """The file of a SQLite ledger URL (``$DRT_LEDGER_URL`` wins, relative to the current
    directory; a relative ``url`` is relative to ``base_dir``), or None for another database."""
    env_url = os.environ.get("DRT_LEDGER_URL")
    raw = env_url or url
    if env_url:
        base_dir = None
    if not raw.startswith("sqlite:"):
        return None
    database = raw.split("///", 1)[1].split("?", 1)[0] if "///" in raw else ""
    if database in ("", ":memory:"):
        return None
    path = Path(database)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    return path.resolve()


def _scratch_dir() -> Path:
    import atexit
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="drt-empty-ledger-"))
    atexit.register(shutil.rmtree, d, True)
    return d


def schema_sql() -> str:
    return resources.files("dr_toolkit.ledger").joinpath("schema.sql").read_text()


def _statements(sql: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    for line in sql.splitlines():
        if line.strip() == ";":
            stmt = "\n".join(cur).strip()
            if stmt and not all(ln.strip().startswith("--") or not ln.strip() for ln in cur):
                out.append(stmt)
            cur = []
        else:
            cur.append(line)
    return out


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def _load(value: str | None) -> Any:
    return None if value is None else json.loads(value)


class Ledger:
    """Access to the ledger database. Create with :meth:`open` (which also migrates)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # set by open_ledger(create=False): the SQLite file that does not exist (this one is empty)
        self.missing: str | None = None
        # set by dry_run(): every transaction is rolled back at its end, the journal's excepted
        self.drops_writes = False

    def dry_run(self) -> Ledger:
        """This ledger as a dry run writes to it: the same database, reads as usual, and every
        transaction rolled back at its end except the journal's (the audit log and the failover
        run's record: :meth:`audit`, :meth:`start_failover_run`, :meth:`set_failover_status`).
        Decided in :meth:`_tx`, so a write method added later is dropped without being listed."""
        view = copy.copy(self)
        view.drops_writes = True
        return view

    # -- connection ------------------------------------------------------------------------
    @classmethod
    def open(cls, url: str, *, migrate: bool = True, password: str | None = None,
             base_dir: str | os.PathLike[str] | None = None, from_env: bool = True) -> Ledger:
        """Open (and migrate) the ledger at ``url``; ``$DRT_LEDGER_URL`` wins over ``url``.

        A relative SQLite path resolves against ``base_dir`` (the topology file's folder; the
        current directory for ``$DRT_LEDGER_URL``) and its directory is created. Any failure to open or read it is one error: a bad URL is a
        ConfigError (exit 2), a database that cannot be opened or read an UnreachableError (exit 3).
        """
        from sqlalchemy import create_engine, event, make_url
        from sqlalchemy.exc import ArgumentError, SQLAlchemyError

        env_url = os.environ.get("DRT_LEDGER_URL") if from_env else None
        raw = env_url or url
        if env_url:
            base_dir = None  # a path given in the environment is relative to the current directory
        try:
            parsed = make_url(raw)
        except (ArgumentError, ValueError):
            raise ConfigError("bad ledger URL", where=redact(raw),
                              hint="use sqlite:///path.db or postgresql+psycopg2://user@host:port/db") from None
        if password:
            parsed = parsed.set(password=password)
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            path = Path(parsed.database)
            if not path.is_absolute() and base_dir is not None:
                path = Path(base_dir) / path
            path = path.resolve()
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerUnreachable(f"cannot create the ledger's directory: {exc.strerror}",
                                        where=str(path.parent), hint="fix ledger.url or the permissions") from None
            parsed = parsed.set(database=str(path))
        shown = parsed.render_as_string(hide_password=True)
        try:
            if parsed.get_backend_name() == "sqlite":
                engine = create_engine(parsed, connect_args={"timeout": 30})

                @event.listens_for(engine, "connect")
                def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
                    cur = dbapi_conn.cursor()
                    cur.execute("PRAGMA journal_mode=WAL")
                    cur.execute("PRAGMA busy_timeout=30000")
                    cur.close()
            else:
                engine = create_engine(parsed, pool_pre_ping=True, connect_args={"connect_timeout": 10})
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise ConfigError(f"bad ledger URL: {type(exc).__name__}", where=shown,
                              hint="use sqlite:///path.db or postgresql+psycopg2://user@host:port/db") from None
        ledger = cls(engine)
        try:
            if migrate:
                ledger.migrate()
            else:
                ledger.schema_version()
        except UnreachableError:
            raise
        except SQLAlchemyError as exc:
            msg = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            raise LedgerUnreachable(f"the ledger cannot be opened or read: {redact(msg)}", where=shown,
                                    hint="check ledger.url (a SQLite file that is not a database, a server "
                                         "that refuses the login) or restore the ledger") from None
        return ledger

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @contextmanager
    def _tx(self, *, journal: bool = False) -> Iterator[Any]:
        """One transaction (rolled back at its end in a :meth:`dry_run` view unless ``journal``).
        A database that cannot be reached, read or written (server down, a
        file that is not a database, a locked or full disk) is one UnreachableError (exit 3);
        integrity errors (the lease race) and programming errors pass through unchanged."""
        from sqlalchemy.exc import DatabaseError, IntegrityError, ProgrammingError

        try:
            with self.engine.begin() as conn:
                yield conn
                if self.drops_writes and not journal:
                    conn.rollback()
        except DatabaseError as exc:
            if isinstance(exc, (IntegrityError, ProgrammingError)):
                raise
            msg = (str(exc.orig) if exc.orig is not None else str(exc)).strip()
            first = redact(msg.splitlines()[0] if msg else type(exc).__name__)
            if "could not connect" in msg or "Connection refused" in msg or "timeout expired" in msg:
                raise LedgerUnreachable(f"ledger database unreachable: {first}",
                                        where=self.url, hint="start the database or fix ledger.url") from None
            raise LedgerUnreachable(f"the ledger cannot be read or written: {first}", where=self.url,
                                    hint="check the database (disk, permissions, a file that is not a "
                                         "database) or restore the ledger") from None

    def migrate(self) -> int:
        """Apply sql/schema.sql (idempotent); return the schema version now recorded."""
        with self._tx() as conn:
            for stmt in _statements(schema_sql()):
                conn.execute(text(stmt))
            conn.execute(text("UPDATE schema_version SET applied_at = :t WHERE version = :v AND applied_at = 0"),
                         {"t": time.time(), "v": SCHEMA_VERSION})
        return self.schema_version()

    def schema_version(self) -> int:
        with self._tx() as conn:
            v = conn.execute(text("SELECT MAX(version) FROM schema_version")).scalar()
        return int(v or 0)

    def _insert(self, table: str, row: Mapping[str, Any], *, journal: bool = False) -> None:
        cols = ", ".join(row)
        params = ", ".join(f":{c}" for c in row)
        with self._tx(journal=journal) as conn:
            conn.execute(text(f"INSERT INTO {table} ({cols}) VALUES ({params})"), dict(row))

    def _query(self, sql: str, **params: Any) -> list[Row]:
        with self._tx() as conn:
            result = conn.execute(text(sql), params)
            keys = tuple(result.keys())
            # every row at once, zipped with the column names (Row._mapping and a fetch per row are
            # slower: the gate reads 100,000-row results at scale)
            return [dict(zip(keys, r, strict=True)) for r in result.fetchall()]

    # -- replication runs and manifests --------------------------------------------------------
    def start_run(self, *, source: str, target: str, policy: str | None = None,
                  base_manifest_id: str | None = None, run_id: str | None = None) -> str:
        run_id = run_id or new_id("copy")
        self._insert("replication_runs", {
            "run_id": run_id, "policy": policy, "source": source, "target": target, "status": "running",
            "base_manifest_id": base_manifest_id, "started_at": time.time()})
        return run_id

    def finish_run(self, run_id: str, *, status: str, mode: str | None = None, mode_reason: str | None = None,
                   manifest_id: str | None = None, base_manifest_id: str | None = None,
                   stats: Mapping[str, int] | None = None, detail: Any = None) -> None:
        stats = dict(stats or {})
        allowed = ("files_total", "files_copied", "bytes_copied", "files_skipped", "files_deleted", "files_failed")
        sets = {k: int(stats.get(k, 0)) for k in allowed}
        with self._tx() as conn:
            conn.execute(text(
                "UPDATE replication_runs SET status=:status, mode=:mode, mode_reason=:mode_reason, "
                "manifest_id=:manifest_id, base_manifest_id=COALESCE(:base, base_manifest_id), "
                "finished_at=:t, detail=:detail, " + ", ".join(f"{k}=:{k}" for k in allowed) +
                " WHERE run_id=:run_id"),
                {"status": status, "mode": mode, "mode_reason": mode_reason, "manifest_id": manifest_id,
                 "base": base_manifest_id, "t": time.time(), "detail": _dump(detail), "run_id": run_id, **sets})

    def runs(self, *, policy: str | None = None, limit: int = 20) -> list[Row]:
        where = "WHERE policy = :policy" if policy else ""
        rows = self._query(f"SELECT * FROM replication_runs {where} ORDER BY started_at DESC LIMIT {int(limit)}",
                           policy=policy)
        for r in rows:
            r["detail"] = _load(r["detail"])
        return rows

    def add_manifest(self, row: ManifestRow) -> None:
        self._insert("manifests", {
            "manifest_id": row.manifest_id, "policy": row.policy, "source": row.source, "target": row.target,
            "location": row.location, "base_manifest_id": row.base_manifest_id,
            "source_snapshot": row.source_snapshot, "entries": row.entries, "total_bytes": row.total_bytes,
            "content_digest": row.content_digest, "source_time": row.source_time, "created_at": time.time()})

    def manifest(self, manifest_id: str) -> Row | None:
        rows = self._query("SELECT * FROM manifests WHERE manifest_id = :m", m=manifest_id)
        return rows[0] if rows else None

    def last_manifest(self, *, source: str, target: str) -> Row | None:
        """The newest manifest applied from ``source`` to ``target`` (the next run's base)."""
        rows = self._query("SELECT * FROM manifests WHERE source = :s AND target = :t "
                           "ORDER BY created_at DESC LIMIT 1", s=source, t=target)
        return rows[0] if rows else None

    # -- watermarks ----------------------------------------------------------------------------
    def set_watermark(self, component: str, name: str, watermark: float, detail: Any = None) -> None:
        now = time.time()
        with self._tx() as conn:
            updated = conn.execute(text(
                "UPDATE watermarks SET watermark=:w, detail=:d, updated_at=:t WHERE component=:c AND name=:n"),
                {"w": watermark, "d": _dump(detail), "t": now, "c": component, "n": name}).rowcount
            if not updated:
                conn.execute(text("INSERT INTO watermarks (component, name, watermark, detail, updated_at) "
                                  "VALUES (:c, :n, :w, :d, :t)"),
                             {"w": watermark, "d": _dump(detail), "t": now, "c": component, "n": name})

    def set_watermarks(self, component: str, items: Iterable[tuple[str, float, Any]]) -> None:
        """:meth:`set_watermark` of many names of ``component`` (``(name, watermark, detail)``) in
        one transaction and one batched statement (an upsert: ``INSERT … ON CONFLICT DO UPDATE``,
        SQLite ≥ 3.24 and PostgreSQL ≥ 9.5), reading nothing back: the gate writes only the proofs
        that changed (at scale a few thousand of 100,000 partitions), never the whole component."""
        now = time.time()
        rows = [{"w": w, "d": _dump(d), "t": now, "c": component, "n": n}
                for n, (w, d) in {n: (w, d) for n, w, d in items}.items()]
        if not rows:
            return
        with self._tx() as conn:
            conn.execute(text("INSERT INTO watermarks (component, name, watermark, detail, updated_at) "
                              "VALUES (:c, :n, :w, :d, :t) ON CONFLICT (component, name) DO UPDATE SET "
                              "watermark = excluded.watermark, detail = excluded.detail, "
                              "updated_at = excluded.updated_at"), rows)

    def watermarks_named(self, component: str, names: Iterable[str], *, chunk: int = 500) -> list[Row]:
        """The watermarks of ``component`` with these names (one query per ``chunk`` names; names
        without a row left out): the gate reads back only the rows it may change."""
        wanted = list(dict.fromkeys(names))
        out: list[Row] = []
        for i in range(0, len(wanted), chunk):
            part = {f"n{j}": n for j, n in enumerate(wanted[i:i + chunk])}
            out += self._query(f"SELECT * FROM watermarks WHERE component = :c AND name IN "
                               f"({', '.join(':' + k for k in part)})", c=component, **part)
        for r in out:
            r["detail"] = _load(r["detail"])
        return out

    def watermarks(self, component: str | None = None) -> list[Row]:
        where = "WHERE component = :c" if component else ""
        rows = self._query(f"SELECT * FROM watermarks {where} ORDER BY component, name", c=component)
        for r in rows:
            r["detail"] = _load(r["detail"])
        return rows

    # -- kafka checkpoints ---------------------------------------------------------------------
    def add_checkpoint(self, checkpoint_id: str, rows: list[Mapping[str, Any]]) -> None:
        """Store one checkpoint: one row per (group, topic, partition), all in one transaction."""
        now = time.time()
        cols = ("group_id", "topic", "partition_id", "committed_offset", "record_timestamp", "timestamp_type",
                "fingerprint", "log_start_offset", "high_watermark")
        if not rows:
            return
        with self._tx() as conn:  # one executemany: 400,000 rows (40,000 groups x 10) one insert each took 233 s
            conn.execute(text(
                "INSERT INTO kafka_checkpoints (checkpoint_id, taken_at, " + ", ".join(cols) + ") VALUES "
                "(:checkpoint_id, :taken_at, " + ", ".join(f":{c}" for c in cols) + ")"),
                [{"checkpoint_id": checkpoint_id, "taken_at": r.get("taken_at", now), **{c: r.get(c) for c in cols}}
                 for r in rows])

    def latest_checkpoint(self, group_id: str) -> list[Row]:
        """The partitions of the newest checkpoint of ``group_id`` (empty when there is none)."""
        rows = self._query("SELECT checkpoint_id FROM kafka_checkpoints WHERE group_id = :g "
                           "ORDER BY taken_at DESC, checkpoint_id DESC LIMIT 1", g=group_id)
        if not rows:
            return []
        return self._query("SELECT * FROM kafka_checkpoints WHERE checkpoint_id = :c AND group_id = :g "
                           "ORDER BY topic, partition_id", c=rows[0]["checkpoint_id"], g=group_id)

    def checkpointed_groups(self) -> list[str]:
        """Every group id the ledger holds a checkpoint of."""
        return [str(r["group_id"]) for r in self._query(
            "SELECT DISTINCT group_id FROM kafka_checkpoints ORDER BY group_id")]

    def latest_checkpoints(self, group_ids: Iterable[str], *, chunk: int = 500,
                           columns: Iterable[str] | None = None) -> dict[str, list[Row]]:
        """:meth:`latest_checkpoint` of many groups in one query per ``chunk`` groups (a group
        without a checkpoint maps to an empty list). Each group's newest checkpoint id is found by
        one descent of the index ``kafka_checkpoints_newest`` (group_id, taken_at, checkpoint_id),
        then its rows by the primary key: the cost grows with the newest checkpoints' rows, not with
        the history the retention keeps (14 days of 5-minute checkpoints by default). ``columns``:
        only these (``group_id`` always; the gate's group signals read 5 of 11 columns)."""
        groups = list(dict.fromkeys(group_ids))
        out: dict[str, list[Row]] = {g: [] for g in groups}
        if columns is None:
            select = "k.*"
        else:
            wanted = list(dict.fromkeys(["group_id", *columns]))
            bad = [c for c in wanted if c not in CHECKPOINT_COLUMNS]
            if bad:
                raise ValueError(f"not a kafka_checkpoints column: {bad}")
            select = ", ".join(f"k.{c}" for c in wanted)
        for i in range(0, len(groups), chunk):
            part = groups[i:i + chunk]
            names = {f"g{j}": g for j, g in enumerate(part)}
            values = ", ".join(f"(:{n})" for n in names)
            rows = self._query(
                f"SELECT {select} FROM (SELECT v.column1 AS group_id, (SELECT c.checkpoint_id FROM kafka_checkpoints c"
                "  WHERE c.group_id = v.column1 ORDER BY c.taken_at DESC, c.checkpoint_id DESC LIMIT 1) AS newest"
                f" FROM (VALUES {values}) AS v) AS n"
                " JOIN kafka_checkpoints k ON k.checkpoint_id = n.newest AND k.group_id = n.group_id"
                " ORDER BY k.group_id, k.topic, k.partition_id", **names)
            for r in rows:
                out[str(r["group_id"])].append(r)
        return out

    # -- verification --------------------------------------------------------------------------
    def add_verify_report(self, row: VerifyReportRow) -> None:
        counters = row.counters
        self._insert("verify_reports", {
            "report_id": row.report_id, "name": row.name, "source": row.source, "target": row.target,
            "goodrows": counters["GOODROWS"], "badrows": counters["BADROWS"],
            "only_in_source_table_rows": counters["ONLY_IN_SOURCE_TABLE_ROWS"],
            "only_in_peer_table_rows": counters["ONLY_IN_PEER_TABLE_ROWS"],
            "content_different_rows": counters["CONTENT_DIFFERENT_ROWS"],
            "source_rows": row.source_rows, "peer_rows": row.peer_rows, "started_at": row.started_at,
            "finished_at": row.finished_at, "report_path": row.report_path, "detail": _dump(row.detail)})

    def verify_reports(self, *, name: str | None = None, limit: int = 20) -> list[Row]:
        where = "WHERE name = :name" if name else ""
        rows = self._query(f"SELECT * FROM verify_reports {where} ORDER BY finished_at DESC LIMIT {int(limit)}",
                           name=name)
        for r in rows:
            r["detail"] = _load(r["detail"])
        return rows

    # -- failover runs and audit -----------------------------------------------------------------
    def start_failover_run(self, *, reason: str, execute: bool, run_id: str | None = None,
                           who: str | None = None) -> str:
        run_id = run_id or new_id("failover")
        self._insert("failover_runs", {"run_id": run_id, "actor": who or actor(), "reason": reason,
                                       "execute": int(execute), "status": "running", "started_at": time.time()},
                     journal=True)
        return run_id

    def set_failover_status(self, run_id: str, status: str, detail: Any = None) -> None:
        finished = time.time() if status in ("succeeded", "failed", "aborted") else None
        with self._tx(journal=True) as conn:
            conn.execute(text("UPDATE failover_runs SET status=:s, finished_at=:f, detail=COALESCE(:d, detail) "
                              "WHERE run_id=:r"), {"s": status, "f": finished, "d": _dump(detail), "r": run_id})

    def failover_run(self, run_id: str) -> Row | None:
        rows = self._query("SELECT * FROM failover_runs WHERE run_id = :r", r=run_id)
        if not rows:
            return None
        rows[0]["detail"] = _load(rows[0]["detail"])
        return rows[0]

    def failover_runs(self, limit: int = 20) -> list[Row]:
        return self._query(f"SELECT * FROM failover_runs ORDER BY started_at DESC LIMIT {int(limit)}")

    def audit(self, *, component: str, action: str, dry_run: bool, status: str, target: str | None = None,
              run_id: str | None = None, before: Any = None, after: Any = None, message: str | None = None,
              who: str | None = None) -> str:
        """Record one audit event (who, what, when, before/after). Values must hold no secrets."""
        event_id = new_id("evt")
        self._insert("audit_events", {
            "event_id": event_id, "run_id": run_id, "component": component, "action": action,
            "target": target, "actor": who or actor(), "dry_run": int(dry_run), "status": status,
            "before_state": _dump(before), "after_state": _dump(after),
            "message": redact(message) if message else None, "at": time.time()}, journal=True)
        return event_id

    def audit_events(self, *, run_id: str | None = None, component: str | None = None,
                     limit: int = 1000) -> list[Row]:
        clauses, params = [], {}
        if run_id:
            clauses.append("run_id = :r")
            params["r"] = run_id
        if component:
            clauses.append("component = :c")
            params["c"] = component
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._query(f"SELECT * FROM audit_events {where} ORDER BY at, event_id LIMIT {int(limit)}",
                           **params)
        for r in rows:
            r["before_state"] = _load(r["before_state"])
            r["after_state"] = _load(r["after_state"])
        return rows

    # -- gate checks (RPO history) ---------------------------------------------------------------
    def add_gate_check(self, *, checked_at: float, verdict: str, recovery_point: float | None,
                       components: Mapping[str, Any], reasons: list[str], source: str,
                       limiting: str | None = None, who: str | None = None) -> str:
        """Record one gate check. ``rpo_s`` (the recovery point's age) is derived here:
        ``checked_at - recovery_point``, NULL when no recovery point could be stated."""
        check_id = new_id("gate")
        rpo = None if recovery_point is None else max(0.0, checked_at - recovery_point)
        self._insert("gate_checks", {
            "check_id": check_id, "checked_at": checked_at, "verdict": verdict,
            "recovery_point": recovery_point, "rpo_s": rpo, "limiting": limiting,
            "components": _dump(dict(components)), "reasons": _dump([redact(r) for r in reasons]),
            "source": source, "actor": who or actor()})
        return check_id

    def gate_checks(self, *, since: float | None = None, until: float | None = None,
                    limit: int = 100) -> list[Row]:
        """The newest gate checks (newest first) in ``[since, until]``."""
        rows = self._query("SELECT * FROM gate_checks WHERE checked_at >= :s AND checked_at <= :u "
                           f"ORDER BY checked_at DESC, check_id DESC LIMIT {int(limit)}",
                           s=-1.0 if since is None else since, u=1e18 if until is None else until)
        for r in rows:
            r["components"] = _load(r["components"]) or {}
            r["reasons"] = _load(r["reasons"]) or []
        return rows

    def gate_check_history(self, *, days: float = 7.0, buckets: int = 288,
                           now: float | None = None) -> dict[str, Any]:
        """The gate checks of the last ``days``, downsampled into at most ``buckets`` equal time
        buckets (oldest first, empty buckets left out) so a chart stays small over any window.

        Each bucket keeps the **worst** of its checks, so downsampling never hides a breach:
        ``rpo_s`` is the largest recovery-point age, ``no_recovery_point`` counts checks that
        could state none (an unbounded RPO), ``no_go`` counts NO_GO verdicts, and ``lag`` holds
        each component's largest lag (seconds) over its signals. ``last`` is the newest check.
        """
        now = time.time() if now is None else now
        buckets = max(1, int(buckets))
        since = now - days * 86400.0
        width = (now - since) / buckets
        rows = self._query("SELECT checked_at, verdict, rpo_s, components FROM gate_checks "
                           "WHERE checked_at >= :s AND checked_at <= :u ORDER BY checked_at",
                           s=since, u=now)
        out: dict[int, dict[str, Any]] = {}
        for r in rows:
            i = min(buckets - 1, int((float(r["checked_at"]) - since) // width))
            b = out.setdefault(i, {"start": since + i * width, "end": since + (i + 1) * width, "checks": 0,
                                   "rpo_s": None, "no_recovery_point": 0, "no_go": 0, "lag": {}})
            b["checks"] += 1
            if r["verdict"] != "GO":
                b["no_go"] += 1
            if r["rpo_s"] is None:
                b["no_recovery_point"] += 1
            elif b["rpo_s"] is None or float(r["rpo_s"]) > b["rpo_s"]:
                b["rpo_s"] = float(r["rpo_s"])
            for sig in (_load(r["components"]) or {}).values():
                lag = sig.get("lag_s")
                comp = str(sig.get("component") or "?")
                if lag is not None and float(lag) > b["lag"].get(comp, -1.0):
                    b["lag"][comp] = float(lag)
        last = self.gate_checks(limit=1, until=now)
        return {"since": since, "until": now, "bucket_s": width, "checks": len(rows),
                "buckets": [out[i] for i in sorted(out)], "last": last[0] if last else None}

    # -- leases ----------------------------------------------------------------------------------
    def try_acquire_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take the lease ``name`` for ``holder`` unless another holder has an unexpired one."""
        from sqlalchemy.exc import IntegrityError

        now = time.time()
        params = {"n": name, "h": holder, "a": now, "e": now + ttl_s}
        try:
            with self._tx() as conn:
                conn.execute(text("INSERT INTO leases (name, holder, acquired_at, expires_at) "
                                  "VALUES (:n, :h, :a, :e)"), params)
            return True
        except IntegrityError:
            pass
        with self._tx() as conn:
            n = conn.execute(text("UPDATE leases SET holder=:h, acquired_at=:a, expires_at=:e "
                                  "WHERE name=:n AND (expires_at < :a OR holder = :h)"), params).rowcount
        return bool(n)

    def release_lease(self, name: str, holder: str) -> None:
        with self._tx() as conn:
            conn.execute(text("DELETE FROM leases WHERE name=:n AND holder=:h"), {"n": name, "h": holder})

    def lease_holder(self, name: str) -> Row | None:
        rows = self._query("SELECT * FROM leases WHERE name = :n AND expires_at >= :t", n=name, t=time.time())
        return rows[0] if rows else None

    @contextmanager
    def lease(self, name: str, *, ttl_s: float = 120.0, holder: str | None = None) -> Iterator[str]:
        """Hold the lease ``name`` for the duration of the block, renewing it in the background
        (:class:`~dr_toolkit.ledger.lease.LeaseHolder`, every ``ttl_s``/3, whatever happened: callers
        that must stop once it lapsed hold a LeaseHolder themselves, as the copy does).

        Raises :class:`LeaseHeld` at once when another live run holds it; a holder that died
        loses it after ``ttl_s``.
        """
        lease = LeaseHolder(self, name, holder or f"{actor()}:{os.getpid()}:{uuid.uuid4().hex[:6]}", ttl_s)
        with lease.held(stop_when_lapsed=False):
            yield lease.holder

    # -- retention -------------------------------------------------------------------------------
    def prune(self, settings: LedgerSettings.Retention | None = None, *, now: float | None = None,
              dry_run: bool = False, batch: int | None = None) -> dict[str, int]:
        """Delete the rows past their retention (``settings``: the topology's ``ledger.retention``,
        its defaults when None) as of ``now``; the rows deleted per table (a ``dry_run`` counts them
        and deletes none). At most ``batch`` rows (default ``settings.batch``) per transaction.
        What is never deleted — the audit of decisions, what the gate, the next copy and `drt
        status` read — is listed in :mod:`dr_toolkit.ledger.retention`."""
        if settings is None:
            from dr_toolkit.topology import Ledger as LedgerSettings  # pydantic: only when pruning

            settings = LedgerSettings.Retention()
        return retention.prune(self._tx, settings, now=time.time() if now is None else now,
                               dry_run=dry_run or self.drops_writes, batch=batch)

    def table_rows(self) -> dict[str, int]:
        """Rows per table :meth:`prune` reports on."""
        with self._tx() as conn:
            return {t: int(conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar() or 0)
                    for t in retention.TABLES}

    # -- summary ---------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """What the ledger knows, for `drt status`."""
        last_runs = self._query(
            "SELECT r.* FROM replication_runs r JOIN (SELECT COALESCE(policy, source) AS k, target, "
            "MAX(started_at) AS m FROM replication_runs GROUP BY COALESCE(policy, source), target) x "
            "ON COALESCE(r.policy, r.source) = x.k AND r.target = x.target AND r.started_at = x.m "
            "ORDER BY r.started_at DESC")
        checkpoints = self._query(
            "SELECT group_id, MAX(taken_at) AS taken_at, COUNT(DISTINCT checkpoint_id) AS checkpoints "
            "FROM kafka_checkpoints GROUP BY group_id ORDER BY group_id")
        verifies = self._query(
            "SELECT v.report_id, v.name, v.source, v.target, v.goodrows, v.badrows, v.finished_at, v.report_path "
            "FROM verify_reports v JOIN (SELECT COALESCE(name, source) AS k, MAX(finished_at) AS m "
            "FROM verify_reports GROUP BY COALESCE(name, source)) x "
            "ON COALESCE(v.name, v.source) = x.k AND v.finished_at = x.m ORDER BY v.finished_at DESC")
        return {
            "ledger": self.url,
            "schema_version": self.schema_version(),
            "replication": [{k: r[k] for k in ("policy", "source", "target", "status", "mode", "manifest_id",
                                                "files_copied", "bytes_copied", "files_failed", "started_at",
                                                "finished_at")} for r in last_runs],
            "kafka_checkpoints": checkpoints,
            "verification": verifies,
            "watermarks": self.watermarks(),
            "failover_runs": self.failover_runs(limit=5),
        }
