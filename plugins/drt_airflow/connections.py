"""Connections and the topology, the Airflow way.

- The topology file path comes from the Airflow Variable ``drt_config`` or ``$DRT_CONFIG``.
- A ``conn_id`` named in the topology is resolved with Airflow's connection machinery
  (metadata DB, secrets backend, or ``AIRFLOW_CONN_*``) into
  :class:`dr_toolkit.secrets.Credentials`, which the library takes as a value. Passwords
  never go to XCom, logs or reports.
"""

from __future__ import annotations

import os

from dr_toolkit.secrets import Credentials
from dr_toolkit.topology import Topology, load_topology


def topology_path() -> str | None:
    from airflow.sdk import Variable

    try:
        return str(Variable.get("drt_config"))
    except Exception:  # noqa: BLE001 - the Variable is optional
        return os.environ.get("DRT_CONFIG")


def topology() -> Topology:
    return load_topology(topology_path())


def credentials(conn_id: str | None) -> Credentials | None:
    """Resolve ``conn_id`` through Airflow (None when not given or not defined)."""
    if not conn_id:
        return None
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:  # noqa: BLE001 - an undefined connection means "no credentials"
        return None
    return Credentials(login=conn.login, password=conn.password, host=conn.host, port=conn.port,
                       extra=conn.extra_dejson or {})
