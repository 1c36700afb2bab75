"""The access value: credentials for every endpoint the library reaches, in one place.

Every library entry point that talks to a server (copy, replicate, Kafka, HBase, verify, the
gate, the runbook, the ledger) takes ``access: Access``. The library never looks a credential
up by itself: the caller builds the value once —

- inside Airflow, the hooks in ``plugins/drt_airflow/hooks.py`` build it with Airflow's
  connection API (metadata DB, environment, secrets backend): :meth:`Access.from_resolver`;
- outside Airflow (the ``drt`` CLI, the demo, tests), :meth:`Access.from_env` reads
  ``AIRFLOW_CONN_<CONN_ID>`` the way Airflow does.

Credentials are keyed by **connection id**, i.e. per endpoint (a cluster's WebHDFS, S3,
ZooKeeper and Kafka each name their own ``conn_id``), never per cluster: an S3 target is
never handed a WebHDFS connection. An endpoint without a ``conn_id`` gets ``None`` (no
credentials). An endpoint whose ``conn_id`` cannot be resolved is a :class:`ConfigError`
naming the connection — never a silent fall-back to another credential chain.

Values returned here must never be logged: use :func:`dr_toolkit.secrets.redact`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from dr_toolkit.errors import ConfigError
from dr_toolkit.secrets import Credentials, env_name, lookup

if TYPE_CHECKING:
    from dr_toolkit.topology import Cluster, Topology

Resolver = Callable[[str], Credentials | None]


class HasConnId(Protocol):
    @property
    def conn_id(self) -> str | None: ...


@dataclass
class Access:
    """Credentials by connection id, resolved on first use and cached.

    ``resolve(conn_id)`` returns the connection's credentials, or ``None`` when it is not
    defined (which :meth:`get` turns into a ConfigError), or raises for a backend error
    (which :meth:`get` turns into a ConfigError too, naming the connection).
    """

    resolve: Resolver
    source: str = "environment"  # where connections come from, for error messages
    _cache: dict[str, Credentials] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_env(cls) -> Access:
        """Connections from ``AIRFLOW_CONN_<CONN_ID>`` (a URI or JSON, as Airflow reads them)."""
        return cls(lookup, source="environment")

    @classmethod
    def from_resolver(cls, resolve: Resolver, source: str) -> Access:
        """Connections from any resolver (Airflow's connection API in the plugins)."""
        return cls(resolve, source=source)

    @classmethod
    def from_mapping(cls, conns: Mapping[str, Credentials], source: str = "given connections") -> Access:
        """Fixed credentials by connection id (tests, scripts)."""
        fixed = dict(conns)
        return cls(fixed.get, source=source)

    @classmethod
    def none(cls) -> Access:
        """No connections at all: any endpoint that names a ``conn_id`` is an error."""
        return cls(lambda _cid: None, source="no connections")

    # -- lookup ------------------------------------------------------------------------------------
    def get(self, conn_id: str | None, *, what: str | None = None) -> Credentials | None:
        """Credentials of ``conn_id`` (``None`` when ``conn_id`` is ``None``).

        ``what`` names the endpoint for the error (``"clusters.hot.s3.conn_id"``)."""
        if not conn_id:
            return None
        with self._lock:
            hit = self._cache.get(conn_id)
        if hit is not None:
            return hit
        where = f"{what} = {conn_id!r}" if what else None
        try:
            creds = self.resolve(conn_id)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - a backend outage is one clear error, no fallback
            raise ConfigError(f"connection {conn_id!r} cannot be resolved from {self.source}: "
                              f"{type(exc).__name__}", where=what,
                              hint="check the connection id and the secrets backend") from None
        if creds is None:
            raise ConfigError(f"connection {conn_id!r} is not defined in {self.source}", where=where,
                              hint=f"define it as an Airflow connection or set {env_name(conn_id)}")
        with self._lock:
            self._cache[conn_id] = creds
        return creds

    def for_endpoint(self, endpoint: HasConnId | None, what: str | None = None) -> Credentials | None:
        """Credentials of one topology endpoint (``cluster.s3``, ``cluster.kafka``, …)."""
        if endpoint is None:
            return None
        return self.get(endpoint.conn_id, what=what)

    def endpoint(self, topology: Topology, cluster: str,
                 kind: Literal["hdfs", "s3", "zookeeper", "kafka"]) -> Credentials | None:
        """Credentials of cluster ``cluster``'s ``kind`` endpoint: the one place that names it.

        ``None`` when the cluster has no such endpoint or the endpoint names no ``conn_id``; a
        ConfigError naming ``clusters.<cluster>.<kind>.conn_id`` when the connection is not
        defined. An unknown cluster is the topology's own ConfigError."""
        if cluster not in topology.clusters:
            raise ConfigError(f"cluster {cluster!r} is not in the topology", where="clusters",
                              hint=f"name one of {', '.join(sorted(topology.clusters))}")
        return self.cluster_endpoint(cluster, topology.clusters[cluster], kind)

    def cluster_endpoint(self, name: str, cluster: Cluster,
                         kind: Literal["hdfs", "s3", "zookeeper", "kafka"]) -> Credentials | None:
        """:meth:`endpoint` for a cluster already looked up (a resolved location's ``cluster_config``)."""
        return self.for_endpoint(getattr(cluster, kind), f"clusters.{name}.{kind}.conn_id")

    def ledger_password(self, conn_id: str | None) -> str | None:
        creds = self.get(conn_id, what="ledger.conn_id")
        return creds.password if creds else None

    def summary(self) -> dict[str, Any]:
        """What was resolved (ids only, never values): for logs and the audit trail."""
        with self._lock:
            return {"source": self.source, "connections": sorted(self._cache)}
