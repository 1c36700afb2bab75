"""A temporary PostgreSQL 15 cluster for the ledger and Airflow tests (test support only)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from drt_servers.process import ManagedProcess, free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


class Postgres(ManagedProcess):
    """A temporary PostgreSQL 15 cluster run as the `postgres` user (it refuses root)."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        if not (PG_BIN / "initdb").exists():
            raise RuntimeError(f"{PG_BIN}/initdb missing: run `make setup` (apt-get install postgresql)")
        port = port or free_port()
        self.datadir = workdir / "pgdata"
        as_postgres = os.geteuid() == 0
        if not self.datadir.exists():
            self.datadir.mkdir(parents=True)
            if as_postgres:
                shutil.chown(workdir, "postgres")
                shutil.chown(self.datadir, "postgres")
            cmd = [str(PG_BIN / "initdb"), "-D", str(self.datadir), "-U", "postgres", "--auth=trust",
                   "-E", "UTF8", "--no-sync"]
            if as_postgres:
                cmd = ["runuser", "-u", "postgres", "--", *cmd]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(f"initdb failed: {r.stderr[-2000:]}")
        super().__init__(
            "postgres", [str(PG_BIN / "postgres"), "-D", str(self.datadir), "-p", str(port), "-h", "127.0.0.1",
                         "-k", str(self.datadir), "-c", "fsync=off", "-c", "max_connections=200"],
            port=port, log_dir=workdir, user="postgres" if as_postgres else None, ready=self._ready,
            start_timeout=60)

    def _ready(self) -> bool:
        import psycopg2

        psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                         connect_timeout=1).close()
        return True

    def create_database(self, name: str) -> str:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if not cur.fetchone():
                cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{name}"
