"""Airflow side of capability 1.2: a checkpoint operator, a remap operator and a
"mirror caught up" sensor, over connections of the Kafka type.

An Airflow Kafka connection (``conn_type: kafka``, apache-airflow-providers-apache-kafka)
keeps the librdkafka client configuration in its extra (``bootstrap.servers``,
``security.protocol``, ``sasl.*``). It is passed to the library as a Credentials value and
mapped to the client config there; it is never logged or returned to XCom. Each cluster's
connection id comes from the operator's argument (standing in for the endpoint's, its
``bootstrap.servers`` for the endpoint's brokers) or the topology (``clusters.<c>.kafka.conn_id``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, BaseSensorOperator

from dr_toolkit.errors import UnreachableError

log = logging.getLogger(__name__)


def _cluster_args(hot_conn_id: str | None, cold_conn_id: str | None) -> tuple[Any, Any]:
    """The topology and the hook's one access value. An operator's connection stands in for its
    cluster's Kafka endpoint: the endpoint's ``conn_id`` becomes it, and its extra's
    ``bootstrap.servers`` (when set) the endpoint's brokers."""
    from dr_toolkit.topology import KafkaEndpoint
    from drt_airflow.hooks import DrtHook

    hook = DrtHook()
    topo, access = hook.topology(), hook.access()
    clusters = dict(topo.clusters)
    for name, conn_id in ((topo.hot_name, hot_conn_id), (topo.cold_name, cold_conn_id)):
        creds = access.get(conn_id) if conn_id else None
        if creds is None:
            continue
        boot = str(creds.extra.get("bootstrap.servers") or "")
        ep = clusters[name].kafka
        if ep is None and not boot:
            continue
        ep = (ep.model_copy(update={"conn_id": conn_id, **({"bootstrap_servers": boot} if boot else {})})
              if ep is not None else KafkaEndpoint(bootstrap_servers=boot, conn_id=conn_id))
        clusters[name] = clusters[name].model_copy(update={"kafka": ep})
    return topo.model_copy(update={"clusters": clusters}), access


def run_checkpoint(groups: Sequence[str] | None = None, hot_conn_id: str | None = None) -> dict[str, Any]:
    """Checkpoint the groups; returns a summary fit for XCom (no record data, no secrets)."""
    from dr_toolkit.kafka import api
    from dr_toolkit.ledger import open_ledger

    topo, access = _cluster_args(hot_conn_id, None)
    out = api.checkpoint(topo, open_ledger(topo, access), groups=list(groups) if groups else None, access=access)
    no_commit = sum(1 for r in out["partitions"] if r["committed_offset"] is None)
    log.info("checkpoint %s: %d group(s), %d partition(s), %d without a commit, %.2fs", out["checkpoint_id"],
             len(out["groups"]), len(out["partitions"]), no_commit, out["duration_s"])
    return {"checkpoint_id": out["checkpoint_id"], "groups": out["groups"], "partitions": len(out["partitions"]),
            "partitions_without_commit": no_commit, "duration_s": out["duration_s"]}


def run_lag(topics: Sequence[str] | None = None, hot_conn_id: str | None = None,
            cold_conn_id: str | None = None) -> dict[str, Any]:
    """Parity and mirror lag (the library's dict: topics, partitions, caught_up, max_seconds_behind)."""
    from dr_toolkit.kafka import api

    topo, access = _cluster_args(hot_conn_id, cold_conn_id)
    out = api.lag(topo, topics=list(topics) if topics else None, access=access)
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

        topo, access = _cluster_args(self.hot_conn_id, self.cold_conn_id)
        return api.remap(topo, open_ledger(topo, access), self.group, apply=self.apply, force=self.force,
                         run_id=self.run_id, access=access)


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
