"""Credentials for an endpoint, looked up by connection id — never read from the topology file.

Outside Airflow, a connection is read from the environment the way Airflow itself reads
it: ``AIRFLOW_CONN_<CONN_ID>`` holding a URI (``kafka://user:pass@host:9092?sasl=...``) or
a JSON object. Inside Airflow, the plugins' hooks resolve the connection and pass the
values in, so this module never imports Airflow. Values returned here must never be logged:
use :func:`redact` on anything that may hold one.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlparse


@dataclass(frozen=True)
class Credentials:
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    host: str | None = None
    port: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


def env_name(conn_id: str) -> str:
    """The variable a shell can set for ``conn_id``: ``AIRFLOW_CONN_`` + the id upper-cased, with
    characters other than letters, digits and ``_`` as ``_`` (``webhdfs-dr`` -> ``AIRFLOW_CONN_WEBHDFS_DR``)."""
    return "AIRFLOW_CONN_" + re.sub(r"[^A-Za-z0-9]", "_", conn_id).upper()


def lookup(conn_id: str | None) -> Credentials | None:
    """Return the credentials of ``conn_id`` from the environment, or None when not set.

    Airflow's own name (``AIRFLOW_CONN_`` + ``conn_id.upper()``, as its environment backend
    reads it) wins; the shell-safe :func:`env_name` is the fall-back for ids with ``-`` or ``.``."""
    if not conn_id:
        return None
    raw = os.environ.get("AIRFLOW_CONN_" + conn_id.upper()) or os.environ.get(env_name(conn_id))
    if not raw:
        return None
    if raw.lstrip().startswith("{"):
        d = json.loads(raw)
        extra = d.get("extra") or {}
        if isinstance(extra, str):
            extra = json.loads(extra)
        return Credentials(d.get("login"), d.get("password"), d.get("host"), d.get("port"), extra)
    p = urlparse(raw)
    extra = dict(parse_qsl(p.query))
    if "__extra__" in extra:
        extra = json.loads(extra["__extra__"])
    return Credentials(unquote(p.username) if p.username else None,
                       unquote(p.password) if p.password else None, p.hostname, p.port, extra)


_URL_PASSWORD = re.compile(r"(?P<pre>[a-z][a-z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@", re.IGNORECASE)
_KV_SECRET = re.compile(
    r"(?P<key>[\"']?(?:password|passwd|secret|token|delegation|aws_secret_access_key|sasl\.password)"
    r"[\"']?\s*[=:]\s*[\"']?)"
    r"[^\s\"',}]+", re.IGNORECASE)


def redact(text: str) -> str:
    """Hide passwords in URLs and ``key=value`` / ``"key": value`` pairs."""
    text = _URL_PASSWORD.sub(r"\g<pre>***@", text)
    return _KV_SECRET.sub(r"\g<key>***", text)
