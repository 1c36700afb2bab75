"""Airflow side of capability 1.2: a checkpoint operator, a remap operator and a
"mirror caught up" sensor, over connections of the Kafka type.

An Airflow Kafka connection (``conn_type: kafka``, apache-airflow-providers-apache-kafka)
keeps the librdkafka client configuration in its extra (``bootstrap.servers``,
``security.protocol``, ``sasl.*``). It is passed to the library as a Credentials value and
mapped to the client config there; it is never logged or returned to XCom. Each cluster's
connection id comes from the operator's argument or the topology (``clusters.<c>.kafka.conn_id``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, BaseSensorOperator

from dr_toolkit.errors import UnreachableError

log = logging.getLogger(__name__)


def _cluster_args(hot_conn_id: str | None, cold_conn_id: str | None) -> dict[str, Any]:
    """Credentials (per role) and bootstrap overrides from the Kafka connections."""
    from drt_airflow.hooks import DrtHook, connection_credentials

    hook = DrtHook()
    topo = hook.topology()
    creds: dict[str, Any] = {}
    boots: dict[str, str | None] = {"hot": None, "cold": None}
    for role, conn_id in (("hot", hot_conn_id), ("cold", cold_conn_id)):
        endpoint = (topo.hot if role == "hot" else topo.cold).kafka
        cid = conn_id or (endpoint.conn_id if endpoint else None)
        c = hook.access().get(cid) if cid else None
        creds[role] = c
        if c is not None and c.extra.get("bootstrap.servers"):
            boots[role] = str(c.extra["bootstrap.servers"])
    from dr_toolkit.access import Access

    # The library looks credentials up by the topology endpoints' conn_id: an operator's
    # override connection stands in for its endpoint's.
    override = {}
    for role in ("hot", "cold"):
        endpoint = (topo.hot if role == "hot" else topo.cold).kafka
        if endpoint is not None and endpoint.conn_id and creds[role] is not None:
            override[endpoint.conn_id] = creds[role]
    access = Access.from_resolver(lambda cid: override.get(cid) or connection_credentials(cid), "Airflow connections")
    return {"topology": topo, "access": access, "source_bootstrap": boots["hot"],
            "target_bootstrap": boots["cold"]}


def run_checkpoint(groups: Sequence[str] | None = None, hot_conn_id: str | None = None) -> dict[str, Any]:
    """Checkpoint the groups; returns a summary fit for XCom (no record data, no secrets)."""
    from dr_toolkit.kafka import api
    from dr_toolkit.ledger import open_ledger

    a = _cluster_args(hot_conn_id, None)
    ledger = open_ledger(a["topology"], a["access"])
    out = api.checkpoint(a["topology"], ledger, groups=list(groups) if groups else None,
                         access=a["access"], source_bootstrap=a["source_bootstrap"])
    no_commit = sum(1 for r in out["partitions"] if r["committed_offset"] is None)
    log.info("checkpoint %s: %d group(s), %d partition(s), %d without a commit, %.2fs", out["checkpoint_id"],
             len(out["groups"]), len(out["partitions"]), no_commit, out["duration_s"])
    return {"checkpoint_id": out["checkpoint_id"], "groups": out["groups"], "partitions": len(out["partitions"]),
            "partitions_without_commit": no_commit, "duration_s": out["duration_s"]}


def run_lag(topics: Sequence[str] | None = None, hot_conn_id: str | None = None,
            cold_conn_id: str | None = None) -> dict[str, Any]:
    """Parity and mirror lag (the library's dict: topics, partitions, caught_up, max_seconds_behind)."""
    from dr_toolkit.kafka import api

    a = _cluster_args(hot_conn_id, cold_conn_id)
    out = api.lag(a["topology"], topics=list(topics) if topics else None, access=a["access"],
                  source_bootstrap=a["source_bootstrap"], target_bootstrap=a["target_bootstrap"])
    log.info("mirror lag: caught_up=%s max_seconds_behind=%.1f over %d partition(s)", out["caught_up"],
             out["max_seconds_behind"], len(out["partitions"]))
    return out


class KafkaCheckpointOperator(BaseOperator):
    """Checkpoint consumer groups on the hot cluster into the ledger."""

    template_fields = ("groups",)

    def __init__(self, *, groups: Sequence[str] | None = None, hot_conn_id: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.groups = list(groups) if groups else None
        self.hot_conn_id = hot_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        return run_checkpoint(self.groups, self.hot_conn_id)


class KafkaLagOperator(BaseOperator):
    """Report topic parity and the cold mirror's lag (a summary fit for XCom; fails only when a
    broker cannot be reached)."""

    template_fields = ("topics",)

    def __init__(self, *, topics: Sequence[str] | None = None, hot_conn_id: str | None = None,
                 cold_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.topics = list(topics) if topics else None
        self.hot_conn_id, self.cold_conn_id = hot_conn_id, cold_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        return lag_summary(run_lag(self.topics, self.hot_conn_id, self.cold_conn_id))


def lag_summary(out: dict[str, Any]) -> dict[str, Any]:
    """The XCom-sized part of :func:`run_lag`'s result (no record data)."""
    return {"caught_up": out["caught_up"], "max_seconds_behind": out["max_seconds_behind"],
            "partitions": [{k: p[k] for k in ("topic", "partition", "records_behind", "seconds_behind")}
                           for p in out["partitions"]]}


class KafkaRemapOperator(BaseOperator):
    """Remap a group onto the cold cluster; writes only with ``apply=True`` (dry run otherwise)."""

    template_fields = ("group", "run_id")

    def __init__(self, *, group: str, apply: bool = False, force: bool = False, run_id: str | None = None,
                 hot_conn_id: str | None = None, cold_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group, self.apply, self.force, self.run_id = group, apply, force, run_id
        self.hot_conn_id, self.cold_conn_id = hot_conn_id, cold_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        from dr_toolkit.kafka import api
        from dr_toolkit.ledger import open_ledger

        a = _cluster_args(self.hot_conn_id, self.cold_conn_id)
        return api.remap(a["topology"], open_ledger(a["topology"], a["access"]), self.group, apply=self.apply,
                         force=self.force, target_bootstrap=a["target_bootstrap"], run_id=self.run_id,
                         access=a["access"])


class KafkaMirrorCaughtUpSensor(BaseSensorOperator):
    """Waits until the cold mirror holds every hot record (or lags at most ``max_seconds_behind``).
    An unreachable broker is "not yet", never "caught up"."""

    template_fields = ("topics",)

    def __init__(self, *, topics: Sequence[str] | None = None, max_seconds_behind: float = 0.0,
                 hot_conn_id: str | None = None, cold_conn_id: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("mode", "reschedule")  # a long wait frees its worker slot between pokes
        super().__init__(**kwargs)
        self.topics = list(topics) if topics else None
        self.max_seconds_behind = max_seconds_behind
        self.hot_conn_id, self.cold_conn_id = hot_conn_id, cold_conn_id

    def poke(self, context: Any) -> bool:
        try:
            out = run_lag(self.topics, self.hot_conn_id, self.cold_conn_id)
        except UnreachableError as exc:
            log.warning("mirror lag unknown: %s", exc.message)
            return False
        if self.max_seconds_behind <= 0:
            return bool(out["caught_up"])
        return bool(out["max_seconds_behind"] <= self.max_seconds_behind)
