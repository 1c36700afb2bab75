"""A PostgreSQL 15 cluster on 127.0.0.1 from the distribution's server binaries (Debian's
``postgresql-15``, installed by `make setup`) — the metadata database of `drt demo --ui`'s Airflow
(its LocalExecutor refuses SQLite) and the suite's ledger and Airflow tests.

``initdb`` (trust authentication, UTF-8) into ``<workdir>/pgdata`` on the first start, then
``postgres`` listening on 127.0.0.1 only (its Unix socket in the data directory). PostgreSQL
refuses to run as root: started by root, both run as the ``postgres`` user (``runuser``), and the
directory must be one that user can reach — :func:`reachable_by_postgres` says whether it is.
``DRT_PG_BIN`` names another directory of the server binaries (default
``/usr/lib/postgresql/15/bin``); :func:`missing` says, in one line, what is not installed.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from drt_servers.process import ManagedProcess, free_port

PG_VERSION = "15"
PG_BIN = Path(os.environ.get("DRT_PG_BIN") or f"/usr/lib/postgresql/{PG_VERSION}/bin")
INSTALL_HINT = (f"install PostgreSQL {PG_VERSION}'s server binaries (`make setup`, or "
                f"`apt-get install postgresql-{PG_VERSION}`), or set DRT_PG_BIN to the directory holding "
                "initdb and postgres")


def missing() -> str | None:
    """None when the server binaries are installed; else one line naming what is missing."""
    absent = [str(PG_BIN / exe) for exe in ("initdb", "postgres") if not (PG_BIN / exe).is_file()]
    if absent:
        return f"PostgreSQL's server binaries are not installed ({', '.join(absent)} not found)"
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "PostgreSQL refuses to run as root and there is no `postgres` user to run it as"
    return None


def runs_as() -> str | None:
    """The user PostgreSQL runs as: ``postgres`` when started by root (it refuses root), else None
    (the current user)."""
    return "postgres" if os.geteuid() == 0 else None


def reachable_by_postgres(path: Path) -> bool:
    """Whether the server (as :func:`runs_as`) can reach ``path``: every existing ancestor
    searchable by others (the ``postgres`` user owns none of them). Always true when not root."""
    if runs_as() is None:
        return True
    for p in [path, *path.parents]:
        if not p.exists():
            continue
        try:
            mode = p.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return True


class Postgres(ManagedProcess):
    """A PostgreSQL 15 cluster in ``workdir`` (see the module doc); its log ``postgres.log`` in
    ``log_dir`` (default ``workdir``)."""

    def __init__(self, workdir: Path, port: int | None = None, *, max_connections: int = 200,
                 log_dir: Path | None = None) -> None:
        why = missing()
        if why:
            raise RuntimeError(f"{why}: {INSTALL_HINT}")
        port = port or free_port()
        self.datadir = workdir / "pgdata"
        user = runs_as()
        if not self.datadir.exists():
            self.datadir.mkdir(parents=True)
            if user:
                shutil.chown(workdir, user)
                shutil.chown(self.datadir, user)
            cmd = [str(PG_BIN / "initdb"), "-D", str(self.datadir), "-U", "postgres", "--auth=trust",
                   "-E", "UTF8", "--no-sync"]
            if user:
                cmd = ["runuser", "-u", user, "--", *cmd]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(f"initdb failed: {r.stderr[-2000:]}")
        super().__init__(
            "postgres", [str(PG_BIN / "postgres"), "-D", str(self.datadir), "-p", str(port), "-h", "127.0.0.1",
                         "-k", str(self.datadir), "-c", "fsync=off", "-c", f"max_connections={max_connections}"],
            port=port, log_dir=log_dir or workdir, user=user, ready=self._ready, start_timeout=60)

    def _ready(self) -> bool:
        import psycopg2

        psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                         connect_timeout=1).close()
        return True

    def create_database(self, name: str) -> str:
        """Create database ``name`` (if absent); returns its SQLAlchemy URL (psycopg2)."""
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if not cur.fetchone():
                cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{name}"
