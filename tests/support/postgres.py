"""The PostgreSQL launcher the tests use: :mod:`drt_servers.postgres` (the demo's `--ui` runs the same)."""

from __future__ import annotations

from drt_servers.postgres import PG_BIN, Postgres

__all__ = ["PG_BIN", "Postgres"]
