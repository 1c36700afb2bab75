"""The mirror: the hot and cold Kafka endpoints, how cold names hot's topics, the declared
clock-skew bound and which groups and topics the policies protect — built once per operation.

A :class:`Mirror` comes from the topology (:meth:`Mirror.of`), or from bootstrap addresses
alone (``--source-bootstrap/--target-bootstrap``: no policies, identity naming, the default
skew bound). Its clients get their credentials through the caller's :class:`Access`
(``Access.endpoint(topology, cluster, "kafka")``), never from anywhere else.

The partition-count check (CDAP requires equal counts on both sides) is written once, here:
:meth:`Mirror.check_counts`.
"""

from __future__ import annotations

import concurrent.futures as cf
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from dr_toolkit.errors import ConfigError, DrtError, UnreachableError
from dr_toolkit.kafka.client import KafkaCluster

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.secrets import Credentials
    from dr_toolkit.topology import KafkaPolicy, Topology

DEFAULT_SKEW_S = 120.0
WORKERS = 8
T = TypeVar("T")
K = TypeVar("K")


def skew_ms(topology: Topology) -> int:
    """The hot cluster's declared producer clock-skew bound, in ms."""
    ep = topology.hot.kafka
    return int(1000 * (ep.max_clock_skew_s if ep is not None else DEFAULT_SKEW_S))


def cold_prefix(topology: Topology) -> str:
    """What the mirror puts before hot's topic names on cold (MM2's replication policy)."""
    ep = topology.cold.kafka
    return f"{ep.source_alias}." if ep is not None and ep.replication_policy == "default" else ""


def cold_topic(topology: Topology, topic: str) -> str:
    """The mirror's name of hot ``topic`` (MM2 replication policy of the cold endpoint)."""
    return cold_prefix(topology) + topic


@dataclass(frozen=True)
class Side:
    """One end of the mirror: where its brokers are, or why none can be reached."""

    role: str  # "hot" | "cold"
    cluster: str | None  # the topology's name of the cluster (None: bootstrap given alone)
    bootstrap: str | None
    timeout_s: float = 10.0
    missing: str | None = None  # no kafka section for this cluster in the topology


@dataclass(frozen=True)
class Mirror:
    """Hot → cold, as the topology (or the bootstrap addresses) describe it."""

    hot: Side
    cold: Side
    access: Access
    topology: Topology | None = None
    skew_ms: int = int(DEFAULT_SKEW_S * 1000)
    cold_prefix: str = ""
    offset_syncs_topic: str | None = None  # MM2's, on hot
    checkpoints_topic: str | None = None  # MM2's, on cold
    # How a client of one side is made (default: a KafkaCluster of its brokers). The one seam for
    # a simulated metadata/fetch layer (benchmarks/kafka_100k_bench.py); the library never sets it.
    clients: Callable[[Side, Credentials | None], KafkaCluster] | None = None

    @classmethod
    def of(cls, topology: Topology | None, access: Access, *, source_bootstrap: str | None = None,
           target_bootstrap: str | None = None) -> Mirror:
        """The mirror of ``topology`` (bootstrap overrides win), or of the two addresses alone."""
        if topology is None:
            return cls(Side("hot", None, source_bootstrap), Side("cold", None, target_bootstrap), access)
        sides = []
        for role, name, boot in (("hot", topology.hot_name, source_bootstrap),
                                 ("cold", topology.cold_name, target_bootstrap)):
            ep = topology.clusters[name].kafka
            sides.append(Side(role, name, boot or (ep.bootstrap_servers if ep else None),
                              ep.timeout_s if ep else 10.0, None if ep or boot else name))
        hot_ep, cold_ep = topology.hot.kafka, topology.cold.kafka
        return cls(sides[0], sides[1], access, topology, skew_ms(topology), cold_prefix(topology),
                   hot_ep.mm2_offset_syncs_topic if hot_ep else None,
                   cold_ep.mm2_checkpoints_topic if cold_ep else None)

    # -- clients -----------------------------------------------------------------------------------
    def client(self, role: str) -> KafkaCluster:
        """A new client of the ``hot`` or ``cold`` brokers (credentials: the endpoint's ``conn_id``)."""
        side = self.hot if role == "hot" else self.cold
        if side.missing is not None:
            raise ConfigError(f"cluster {side.missing!r} ({role}) has no kafka section", where=self.source_file,
                              hint=f"add clusters.{side.missing}.kafka.bootstrap_servers")
        if not side.bootstrap:
            raise ConfigError(f"no bootstrap servers for the {role} Kafka cluster",
                              hint="give a topology (--config) or --source-bootstrap/--target-bootstrap")
        creds = (self.access.endpoint(self.topology, side.cluster, "kafka")
                 if self.topology is not None and side.cluster is not None else None)
        if self.clients is not None:
            return self.clients(side, creds)
        return KafkaCluster(side.bootstrap, credentials=creds, timeout_s=side.timeout_s, role=role)

    def cold_topic(self, topic: str) -> str:
        return self.cold_prefix + topic

    @property
    def source_file(self) -> str | None:
        return self.topology.source_file if self.topology is not None else None

    # -- selection (MirrorMaker 2's: literal names, regexes, exclusions) ----------------------------
    @property
    def policies(self) -> list[KafkaPolicy]:
        return list(self.topology.policies.kafka) if self.topology is not None else []

    def uses_patterns(self, kind: str) -> bool:
        return any(getattr(p, f"{kind}_regex") for p in self.policies)

    def policy_topics(self, group: str | None = None, *, available: Iterable[str] | None = None) -> list[str]:
        """Topics of the kafka policies (those protecting ``group`` when given): the literal names,
        then the names of ``available`` (the hot cluster's topics) their ``topics_regex`` match,
        minus what their ``topics_exclude`` match."""
        names = list(available or [])
        out: dict[str, None] = {}
        for p in self.policies:
            if group is None or p.selects_group(group):
                out.update((t, None) for t in [*p.topics, *(n for n in names if p.topics_regex)] if p.selects_topic(t))
        return list(out)

    def topic_excluded(self, group: str, topic: str) -> bool:
        """Are ``group``'s offsets on ``topic`` left out of the checkpoint (a policy protecting the
        group names it in ``exclude_topics`` or matches it by ``topics_exclude``)?"""
        return any(p.excludes_topic(topic) for p in self.policies if p.selects_group(group))

    def policy_groups(self, available: Iterable[str] | None = None) -> list[str]:
        """Groups of the kafka policies: the literal ids, then the ids of ``available`` (the hot
        cluster's groups) their ``groups_regex`` match, minus what ``groups_exclude`` match."""
        out: dict[str, None] = {}
        names = sorted(available or [])
        for p in self.policies:
            out.update((g, None) for g in [*p.groups, *(n for n in names if p.groups_regex)] if p.selects_group(g))
        return list(out)

    def unmatched_patterns(self, *, groups: Iterable[str] | None = None, topics: Iterable[str] | None = None,
                           where: str = "the hot cluster") -> list[str]:
        """One line per ``groups_regex`` / ``topics_regex`` pattern that selects nothing among
        ``groups`` / ``topics`` (those given): a pattern protecting nothing is said, not silent."""
        out: list[str] = []
        for p in self.policies:
            for kind, names in (("groups", groups), ("topics", topics)):
                if names is None:
                    continue
                names = list(names)
                for pattern in getattr(p, f"{kind}_regex"):
                    rx = re.compile(pattern)
                    matched = [n for n in names if rx.fullmatch(n)]
                    if not matched:
                        out.append(f"policy {p.name!r}: {kind}_regex {pattern!r} matches no "
                                   f"{'consumer group' if kind == 'groups' else 'topic'} on {where}")
                    elif not any(p.selects_group(n) if kind == "groups" else p.selects_topic(n) for n in matched):
                        out.append(f"policy {p.name!r}: every {kind[:-1]} {kind}_regex {pattern!r} matches on "
                                   f"{where} is excluded by {kind}_exclude")
        return out

    def protected_groups(self, hot: KafkaCluster | None = None, *, ledger: Ledger | None = None,
                         ) -> tuple[list[str], list[str]]:
        """The groups the policies protect now, and notes: with ``groups_regex``, resolved against
        the hot cluster's live groups (``hot``, or a client opened here); when hot cannot be asked
        (an unplanned failover), against the groups the ledger holds checkpoints of, said in a
        note. Raises nothing for an unreachable hot cluster when ``ledger`` is given."""
        if not self.uses_patterns("groups"):
            return self.policy_groups(), []
        try:
            if hot is not None:
                live = hot.group_ids()
            else:
                with self.client("hot") as c:
                    live = c.group_ids()
        except UnreachableError as exc:
            if ledger is None:
                raise
            known = ledger.checkpointed_groups()
            return self.policy_groups(known), [
                f"hot cluster unreachable ({exc.what}): groups_regex resolved against the {len(known)} group(s) "
                "checkpointed in the ledger", *self.unmatched_patterns(groups=known, where="the ledger")]
        return self.policy_groups(live), self.unmatched_patterns(groups=live)

    # -- parity ------------------------------------------------------------------------------------
    def check_counts(self, hot_counts: Mapping[str, int], cold: KafkaCluster, cold_have: Mapping[str, int],
                     *, basis: str = "") -> None:
        """Every topic of ``hot_counts`` exists on cold (under the mirror's name) with the same
        partition count; ``basis`` says where hot's count comes from (a checkpoint)."""
        partition_counts(cold, [self.cold_topic(t) for t in hot_counts], cold_have)
        for t, n in hot_counts.items():
            ct = self.cold_topic(t)
            if n != cold_have[ct]:
                raise ConfigError(f"partition count mismatch for topic {t!r}: hot has {n}{basis}, "
                                  f"cold has {cold_have[ct]} ({ct})",
                                  where=" / ".join(b for b in (self.hot.bootstrap, cold.bootstrap) if b),
                                  hint="offsets can only be carried over between equal partition counts: "
                                       "make the cold topic match the hot one and re-mirror it")


def partition_counts(c: KafkaCluster, topics: list[str], have: Mapping[str, int]) -> dict[str, int]:
    """The partition counts of ``topics`` among ``have`` (``c``'s topics); a ConfigError naming
    the ones missing."""
    missing = [t for t in topics if t not in have]
    if missing:
        raise ConfigError(f"topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing on the "
                          f"{c.role} Kafka cluster", where=c.bootstrap,
                          hint=("create it with the hot cluster's partition count and start mirroring it"
                                if c.role == "cold" else "check the topology's kafka policies"))
    return {t: have[t] for t in topics}


# -- many at once ----------------------------------------------------------------------------------

class ClientPool:
    """One probing client per worker thread for one side of the mirror, all closed together."""

    def __init__(self, make: Callable[[], KafkaCluster]) -> None:
        self._make = make
        self._local = threading.local()
        self._all: list[KafkaCluster] = []
        self._lock = threading.Lock()

    def get(self) -> KafkaCluster:
        c: KafkaCluster | None = getattr(self._local, "c", None)
        if c is None:
            c = self._make()
            self._local.c = c
            with self._lock:
                self._all.append(c)
        return c

    def stats(self) -> tuple[int, int]:
        with self._lock:
            return sum(c.fetches for c in self._all), sum(c.records_read for c in self._all)

    def close(self) -> None:
        with self._lock:
            for c in self._all:
                c.close()
            self._all.clear()


def run_all(fn: Callable[[K], T], keys: Iterable[K], workers: int) -> dict[K, T]:
    """``fn`` over every key on ``workers`` threads; the first error is raised."""
    keys = list(dict.fromkeys(keys))
    if len(keys) <= 1 or workers <= 1:
        return {k: fn(k) for k in keys}
    with cf.ThreadPoolExecutor(max_workers=min(workers, len(keys)), thread_name_prefix="drt-kafka") as ex:
        futs = {k: ex.submit(fn, k) for k in keys}
        return {k: f.result() for k, f in futs.items()}


def marks_of(c: KafkaCluster, pool: ClientPool, parts: list[tuple[str, int]], workers: int,
             ) -> dict[tuple[str, int], tuple[int, int]]:
    """Every partition's (start, end): batched, and one at a time for any the batch refused."""
    try:
        many = c.watermarks_many(parts)
    except DrtError:
        many = {}
    marks = {tp: m for tp, m in many.items() if isinstance(m, tuple)}
    rest = [tp for tp in parts if tp not in marks]
    marks.update(run_all(lambda tp: pool.get().watermarks(*tp), rest, workers))
    return marks
