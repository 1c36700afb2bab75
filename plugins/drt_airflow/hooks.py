"""Hooks: Airflow Connections → the library's one access value.

``DrtHook`` is shaped like a provider's hook (``conn_name_attr``, ``default_conn_name``,
``conn_type``, ``get_conn()``). Its own connection (``drt_default``, optional) may carry the
topology path in its extra (``{"config": "/etc/drt/drt.yaml"}``); otherwise the Variable
``drt_config`` or ``$DRT_CONFIG`` names it. :meth:`DrtHook.access` builds
:class:`dr_toolkit.access.Access` whose resolver is Airflow's connection API — the metadata
DB, ``AIRFLOW_CONN_*`` and any secrets backend — so every endpoint's ``conn_id`` in the
topology resolves the same way in every DAG, the runbook and the DR page. A connection that
is not defined is one clear error naming it (never a fall-back to another credential chain);
a backend that fails is one clear error too. Built in ``execute``/``poke``, never in a
constructor.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from airflow.sdk import BaseHook

from dr_toolkit.secrets import Credentials


def in_task() -> bool:
    """In a task (or the DAG processor, the triggerer): the task SDK talks to the API server,
    which already asked every store. Only outside one (the DR page in the api-server, a script)
    is a "not found" asked again server-side — `airflow.models`' lookups are deprecated in a task."""
    return hasattr(sys.modules.get("airflow.sdk.execution_time.task_runner"), "SUPERVISOR_COMMS")


def connection_credentials(conn_id: str) -> Credentials | None:
    """One Airflow connection as library Credentials; None when it is not defined."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn: Any = BaseHook.get_connection(conn_id)  # in a task: through the task SDK's API
    except AirflowNotFoundException:
        if in_task():
            return None
        # Outside a task (the DR page in the api-server, a script): the server-side lookup over
        # the same configured stores — secrets backend, environment, metadata DB.
        from airflow.models.connection import Connection

        try:
            conn = Connection.get_connection_from_secrets(conn_id)
        except AirflowNotFoundException:
            return None
    if conn.conn_type == "aws":
        return aws_credentials(conn_id, conn)
    return Credentials(login=conn.login, password=conn.password, host=conn.host, port=conn.port,
                       extra=conn.extra_dejson or {})


def aws_credentials(conn_id: str, conn: Any) -> Credentials:
    """An ``aws`` connection resolved by the amazon provider's ``AwsBaseHook``, as ``S3Hook`` would:
    keys, role assumption (``role_arn`` in the extra, STS reached through ``service_config``),
    profiles, and the default chain when the connection holds no keys. The library receives the
    resulting keys (and session token) and builds its boto3 client from them — it cannot import
    the provider (it runs outside Airflow too). Temporary keys are as fresh as the task."""
    from airflow.providers.amazon.aws.hooks.base_aws import BaseSessionFactory
    from airflow.providers.amazon.aws.utils.connection_wrapper import AwsConnectionWrapper

    from dr_toolkit.errors import ConfigError

    # The connection already found (task SDK or server-side): AwsBaseHook(aws_conn_id=…) would
    # look it up again through the task SDK only and, outside a task, silently use boto3's chain.
    wrapper = AwsConnectionWrapper(conn=conn)
    found = BaseSessionFactory(conn=wrapper).create_session().get_credentials()
    if found is None:
        raise ConfigError(f"AWS connection {conn_id!r} yields no credentials",
                          hint="set the key id and secret (login/password), a role_arn or a profile on it")
    frozen = found.get_frozen_credentials()
    extra = dict(conn.extra_dejson or {})
    extra.pop("aws_session_token", None)
    if frozen.token:
        extra["aws_session_token"] = frozen.token
    if wrapper.region_name:
        extra.setdefault("region_name", wrapper.region_name)
    return Credentials(login=frozen.access_key, password=frozen.secret_key, host=conn.host, port=conn.port,
                       extra=extra)


def variable(key: str) -> str | None:
    """An Airflow Variable, or None when it is not set — the one Variable lookup of dr-toolkit.

    In a task (and the DAG processor) through the task SDK; outside one (the DR page in the
    api-server, a script) the SDK sees only ``AIRFLOW_VAR_*``, so a "not found" there is asked
    again server-side over the same stores (secrets backend, environment, metadata DB). A store
    that fails is an error, not "not set"."""
    from airflow.sdk import Variable
    from airflow.sdk.exceptions import AirflowRuntimeError

    try:
        return str(Variable.get(key))
    except AirflowRuntimeError as exc:
        if "NOT_FOUND" not in str(exc):
            raise
    if in_task():
        return None
    from airflow.models.variable import Variable as ServerVariable

    value = ServerVariable.get(key, default_var=None)
    return None if value is None else str(value)


def topology_path(drt_conn_id: str | None = "drt_default") -> str | None:
    """Where the topology is — decided here only: the ``drt_default`` connection's extra
    ``config``, else the Variable ``drt_config``, else ``$DRT_CONFIG`` (None: the library's
    default ``./drt.yaml``). Used by every DAG, the runbook's operators and the DR view."""
    own = connection_credentials(drt_conn_id) if drt_conn_id else None
    if own is not None and own.extra.get("config"):
        return str(own.extra["config"])
    return variable("drt_config") or os.environ.get("DRT_CONFIG")


class DrtHook(BaseHook):
    """The topology and the credentials of every endpoint it names, through Airflow."""

    conn_name_attr = "drt_conn_id"
    default_conn_name = "drt_default"
    conn_type = "drt"
    hook_name = "dr-toolkit"

    def __init__(self, drt_conn_id: str = default_conn_name, config: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drt_conn_id = drt_conn_id
        self._config = config
        self._access: Any = None

    def topology_path(self) -> str | None:
        return self._config or topology_path(self.drt_conn_id)

    def configured_topology(self) -> Any:
        """The topology file as written (DAG parsing: policy names only, no server asked)."""
        from dr_toolkit.topology import load_topology

        return load_topology(self.topology_path())

    def topology(self) -> Any:
        """The topology of the direction the estate is protected in now (as configured, or the
        other way after a re-protect: the ledger's last direction event)."""
        return self.get_conn()[0]

    def access(self) -> Any:
        """The one access value: every ``conn_id`` resolved through Airflow's connection API."""
        if self._access is None:
            from dr_toolkit.access import Access

            self._access = Access.from_resolver(connection_credentials, "Airflow connections")
        return self._access

    def ledger(self, topology: Any) -> Any:
        from dr_toolkit.ledger import open_ledger

        return open_ledger(topology, self.access())

    def get_conn(self) -> Any:
        """(topology, access, ledger): what every library entry point takes."""
        from dr_toolkit.failback.direction import directed
        from dr_toolkit.spark.session import with_spark_connections

        conf = self.configured_topology()
        ledger = self.ledger(conf)
        # a cluster's spark.conn_id (a Spark connection: host yarn, extra hadoop_conf_dir/queue/conf)
        return with_spark_connections(directed(conf, ledger), self.access()), self.access(), ledger
