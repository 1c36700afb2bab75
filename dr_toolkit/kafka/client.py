"""Kafka clients for one cluster: configuration, timeouts, error translation, record reads.

confluent-kafka is imported inside functions (it is heavy). Every broker call takes a
timeout. A broker that does not answer becomes :class:`UnreachableError` (exit 3) naming the
bootstrap address. Client configuration may hold SASL passwords: it is never logged.

**Kerberos (SASL/GSSAPI)**: when the endpoint's connection asks for it (its extra, as an Airflow
Kafka connection keeps librdkafka settings: ``security.protocol`` SASL_PLAINTEXT or SASL_SSL and
``sasl.mechanisms`` GSSAPI), the principal and keytab come from that connection (``extra.principal``
/ ``extra.keytab``, librdkafka's ``sasl.kerberos.principal`` / ``sasl.kerberos.keytab``, or the
login) or the environment (``DRT_KERBEROS_PRINCIPAL`` + ``DRT_KERBEROS_KEYTAB``, or a ``kinit``
cache in ``KRB5CCNAME``) through :mod:`dr_toolkit.kerberos` — never the topology. The ticket is
obtained here, before any client opens (a missing keytab or a principal the KDC refuses is one
:class:`KerberosError`, exit 3), into the toolkit's private credential cache, and librdkafka reads
it from there: ``KRB5CCNAME`` points at that cache and librdkafka's own ``kinit`` is off
(``sasl.kerberos.min.time.before.relogin=0``, so no kinit binary is needed and the user's default
cache is never written). The ticket is renewed by the toolkit (each client handed out first makes
sure it has a third of its life left). One Kerberos principal per process for Kafka (librdkafka's
GSSAPI reads the process's ``KRB5CCNAME``): a second principal is refused with one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from dr_toolkit.errors import ConfigError, DrtError, UnreachableError

if TYPE_CHECKING:
    from dr_toolkit.kafka.wire import OffsetFetcher
    from dr_toolkit.secrets import Credentials


# Keys of an Airflow Kafka connection's extra that are not librdkafka settings.
_NOT_CLIENT_KEYS = {"bootstrap_servers", "group.id", "enable.auto.commit", "auto.offset.reset"}
TIMESTAMP_TYPES = {0: "none", 1: "create", 2: "log_append"}
T = TypeVar("T")


def gssapi_wanted(conf: Mapping[str, Any]) -> bool:
    """Does this librdkafka configuration ask for SASL GSSAPI (Kerberos)?"""
    proto = str(conf.get("security.protocol", "plaintext")).lower()
    mech = str(conf.get("sasl.mechanisms", conf.get("sasl.mechanism", "GSSAPI"))).upper()
    return proto.startswith("sasl_") and mech == "GSSAPI"


_KRB5CCNAME_OWNER: list[str] = []  # the principal whose private cache this process's KRB5CCNAME names


class _SaslRefusedFilter(logging.Filter):
    """librdkafka logs every refused SASL handshake at ERROR while it retries; the call's own error
    (a :class:`KerberosError` naming the principal) says it once. Shown with ``-v`` (INFO) and below."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SASL authentication error" not in record.getMessage() or logging.getLogger().level <= logging.INFO


def _kerberize(conf: dict[str, Any], credentials: Credentials | None) -> None:
    """librdkafka's GSSAPI settings on ``conf`` from the connection or the environment (see the
    module doc); the ticket obtained now."""
    import os

    from dr_toolkit.kafka import wire
    from dr_toolkit.kerberos import KerberosConfig, KerberosError, kerberos_for
    from dr_toolkit.secrets import Credentials as Creds

    extra = dict(credentials.extra or {}) if credentials is not None else {}
    # librdkafka's own names in a connection's extra count as the principal and keytab too
    for ours, theirs in (("principal", "sasl.kerberos.principal"), ("keytab", "sasl.kerberos.keytab")):
        if theirs in extra and ours not in extra:
            extra[ours] = extra[theirs]
    creds = Creds(login=credentials.login, extra=extra) if credentials is not None else None
    cfg = KerberosConfig.from_credentials(creds)
    holder = kerberos_for(cfg)
    holder.credentials()  # the ticket now: KerberosError (exit 3) naming the principal, before any client
    for k in ("sasl.username", "sasl.password", "sasl.kerberos.kinit.cmd"):
        conf.pop(k, None)
    conf["sasl.mechanisms"] = "GSSAPI"
    conf.pop("sasl.mechanism", None)
    conf.setdefault("sasl.kerberos.service.name", "kafka")
    conf["sasl.kerberos.min.time.before.relogin"] = 0  # no kinit by librdkafka: the toolkit keeps the ticket
    if cfg.keytab:
        conf["sasl.kerberos.keytab"] = cfg.keytab
    else:
        conf.pop("sasl.kerberos.keytab", None)
    cache = holder.ccache_in_use()  # the private cache, or the kinit'ed one read (followed when renewed)
    principal = holder.principal or "(from the ticket cache)"
    conf["sasl.kerberos.principal"] = principal
    if _KRB5CCNAME_OWNER and _KRB5CCNAME_OWNER[0] != principal:
        raise KerberosError(f"Kafka with a second Kerberos principal in one process (already "
                            f"{_KRB5CCNAME_OWNER[0]})", where=f"Kerberos principal {principal}",
                            hint="use one principal for both clusters' Kafka connections (librdkafka reads the "
                                 "process's ticket cache)")
    if cache:
        os.environ["KRB5CCNAME"] = cache
    if not _KRB5CCNAME_OWNER:
        _KRB5CCNAME_OWNER.append(principal)
    wire.register_kerberos(principal, holder)
    lib_log = logging.getLogger("dr_toolkit.kafka.librdkafka")
    if not any(isinstance(f, _SaslRefusedFilter) for f in lib_log.filters):
        lib_log.addFilter(_SaslRefusedFilter())


def client_config(bootstrap: str, credentials: Credentials | None = None) -> dict[str, Any]:
    """librdkafka settings for ``bootstrap``: the connection's extra (an Airflow Kafka
    connection keeps the client config there), plus login/password as SASL credentials —
    or, for SASL GSSAPI, the Kerberos principal and its ticket (see the module doc)."""
    conf: dict[str, Any] = {}
    if credentials is not None:
        for k, v in (credentials.extra or {}).items():
            if isinstance(k, str) and "." in k and k not in _NOT_CLIENT_KEYS:
                conf[k] = v
        if gssapi_wanted(conf):
            _kerberize(conf, credentials)
        elif credentials.login and "sasl.username" not in conf:
            conf["sasl.username"] = credentials.login
        if credentials.password and "sasl.password" not in conf and not gssapi_wanted(conf):
            conf["sasl.password"] = credentials.password
    conf["bootstrap.servers"] = bootstrap or conf.get("bootstrap.servers", "")
    if not conf["bootstrap.servers"]:
        raise ConfigError("no Kafka bootstrap servers given",
                          hint="set clusters.<name>.kafka.bootstrap_servers or pass --source/--target-bootstrap")
    conf["logger"] = logging.getLogger("dr_toolkit.kafka.librdkafka")
    return conf


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    timestamp_type: str
    fingerprint: str


def fingerprint(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]] | None) -> str:
    """A stable hash of a record's key, value and headers (length-prefixed, so no two
    different records frame to the same bytes). Timestamps and offsets are not part of it."""
    h = hashlib.sha256()

    def part(b: bytes | None) -> None:
        if b is None:
            h.update(b"\xff\xff\xff\xff")
        else:
            h.update(len(b).to_bytes(4, "big"))
            h.update(b)

    part(key)
    part(value)
    for name, hv in headers or []:
        part(name.encode())
        part(hv)
    return h.hexdigest()[:32]


def _to_record(msg: Any) -> Record:
    ts_type, ts = msg.timestamp()
    return Record(int(msg.offset()), int(ts), TIMESTAMP_TYPES.get(int(ts_type), "none"),
                  fingerprint(msg.key(), msg.value(), msg.headers()))


class KafkaCluster:
    """Admin and probing-consumer access to one cluster, with one timeout for every call."""

    def __init__(self, bootstrap: str, *, credentials: Credentials | None = None, timeout_s: float = 10.0,
                 role: str = "kafka") -> None:
        self.bootstrap = bootstrap
        self.role = role
        self.timeout_s = timeout_s
        self._conf = client_config(bootstrap, credentials)
        self._auth_refused: str | None = None  # librdkafka's last SASL failure (Kerberos: named in errors)
        self._watch_auth()
        self._admin: Any = None
        self._consumer: Any = None
        self._uncommitted: Any = None
        self._configs: dict[str, dict[str, str] | None] = {}
        self.fetches = 0  # positioned reads sent (probes)
        self.records_read = 0
        self.offset_fetch_requests = 0  # OffsetFetch/FindCoordinator requests (committed_many)
        self.batched: bool | None = None  # did committed_many take the batched path
        self.batched_refused: str | None = None
        self.force_per_group = False  # the librdkafka paths only (tests' oracle): committed_many, ListOffsets
        self._leaders: dict[tuple[str, int], tuple[str, int]] = {}  # partition → its leader (topics())
        self.list_offsets_requests = 0  # batched ListOffsets requests sent (wire.OffsetLister)

    def with_conf(self, other: KafkaCluster) -> KafkaCluster:
        """Use ``other``'s client configuration (credentials included) for this client."""
        self._conf = dict(other._conf)
        self._watch_auth()
        return self

    # -- errors ---------------------------------------------------------------------------------
    def _watch_auth(self) -> None:
        """Under Kerberos, librdkafka's authentication failures are kept (it retries them quietly: a
        call then times out) so the error says the ticket was refused, naming the principal."""
        if gssapi_wanted(self._conf):
            self._conf["error_cb"] = self._on_error

    def _on_error(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        if err.code() == KafkaError._AUTHENTICATION:
            self._auth_refused = err.str()

    def unreachable(self, what: str) -> UnreachableError:
        if self._admin is not None and gssapi_wanted(self._conf):
            with contextlib.suppress(Exception):
                self._admin.poll(0)  # serves librdkafka's error callbacks (an authentication refused)
        if self._auth_refused is not None:
            from dr_toolkit.kerberos import KerberosError

            return KerberosError(f"the {self.role} Kafka cluster refused the Kerberos authentication ({what}): "
                                 f"{self._auth_refused}", where=f"Kerberos principal "
                                                            f"{self._conf.get('sasl.kerberos.principal')}",
                                 hint=f"check the principal and that the brokers' is "
                                      f"{self._conf.get('sasl.kerberos.service.name', 'kafka')}/<broker host>")
        return UnreachableError(f"{self.role} Kafka cluster did not answer ({what}) within {self.timeout_s:g}s",
                                where=self.bootstrap, hint="check that the brokers run and the address is right")

    def _wrap(self, exc: BaseException, what: str) -> DrtError:
        from confluent_kafka import KafkaError, KafkaException

        from dr_toolkit.kerberos import KerberosError

        if isinstance(exc, KerberosError):  # no ticket, or a broker refused it: exit 3 naming the principal
            return exc
        if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
            err = exc.args[0]
            if err.code() == KafkaError._AUTHENTICATION and gssapi_wanted(self._conf):
                return KerberosError(f"the {self.role} Kafka cluster refused the Kerberos authentication ({what}): "
                                     f"{err.str()}", where=f"Kerberos principal {self._conf.get('sasl.kerberos.principal')}",
                                     hint=f"check the principal and that the brokers' is "
                                          f"{self._conf.get('sasl.kerberos.service.name', 'kafka')}/<broker host>")
            # No answer, so the outcome is unknown (a request in flight when the broker went away
            # ends with _DESTROY/_DESTROY_BROKER): the caller retries or reads back.
            if err.code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                              KafkaError._DESTROY, KafkaError._DESTROY_BROKER, KafkaError._FAIL,
                              KafkaError._RESOLVE, KafkaError._TIMED_OUT_QUEUE,
                              KafkaError.REQUEST_TIMED_OUT, KafkaError._WAIT_COORD,
                              KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR):
                return self.unreachable(what)
            return DrtError(f"{self.role} Kafka cluster refused {what}: {err.str()}", where=self.bootstrap)
        if isinstance(exc, TimeoutError | RuntimeError):
            return self.unreachable(what)
        return DrtError(f"{self.role} Kafka call {what} failed: {exc}", where=self.bootstrap)

    # -- clients --------------------------------------------------------------------------------
    def _fresh_ticket(self) -> None:
        """Under Kerberos, the ticket librdkafka reads has a third of its life left (renewed into
        the private cache otherwise) — before every client handed out."""
        if gssapi_wanted(self._conf):
            from dr_toolkit.kafka import wire

            holder = wire.kerberos_of(self._conf)
            holder.credentials()
            cache = holder.ccache_in_use()
            if cache and [holder.principal or "(from the ticket cache)"] == _KRB5CCNAME_OWNER:
                import os

                os.environ["KRB5CCNAME"] = cache  # where librdkafka's next handshake reads the ticket

    @property
    def admin(self) -> Any:
        self._fresh_ticket()
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient({**self._conf, "socket.timeout.ms": int(self.timeout_s * 1000)})
        return self._admin

    @property
    def consumer(self) -> Any:
        """A probing consumer: its own throw-away group id, never commits, short fetch waits."""
        self._fresh_ticket()
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer({
                **self._conf, "group.id": f"drt-probe-{uuid.uuid4().hex[:12]}", "enable.auto.commit": False,
                "enable.auto.offset.store": False, "auto.offset.reset": "earliest", "enable.partition.eof": True,
                "fetch.wait.max.ms": 1, "fetch.min.bytes": 1, "isolation.level": "read_committed",
                "max.partition.fetch.bytes": 65536, "fetch.max.bytes": 1048576,
                "socket.timeout.ms": int(self.timeout_s * 1000)})
        return self._consumer

    @property
    def uncommitted_consumer(self) -> Any:
        """A probing consumer that reads ``read_uncommitted``: records of open transactions and
        the records after them (only to date what read_committed cannot see yet)."""
        self._fresh_ticket()
        if self._uncommitted is None:
            from confluent_kafka import Consumer

            self._uncommitted = Consumer({
                **self._conf, "group.id": f"drt-probe-{uuid.uuid4().hex[:12]}", "enable.auto.commit": False,
                "enable.auto.offset.store": False, "auto.offset.reset": "earliest", "enable.partition.eof": True,
                "fetch.wait.max.ms": 1, "fetch.min.bytes": 1, "isolation.level": "read_uncommitted",
                "max.partition.fetch.bytes": 65536, "socket.timeout.ms": int(self.timeout_s * 1000)})
        return self._uncommitted

    def close(self) -> None:
        if self._uncommitted is not None:
            try:
                self._uncommitted.close()
            except Exception:  # noqa: BLE001 - closing a probe consumer of a dead broker
                pass
            self._uncommitted = None
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # noqa: BLE001 - closing a probe consumer of a dead broker
                pass
            self._consumer = None
        self._admin = None

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata -------------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """Topic name → partition count (internal topics left out). Keeps each partition's leader
        (host, port) for the batched ListOffsets of :meth:`watermarks_many` / :meth:`stable_ends`."""
        try:
            md = self.admin.list_topics(timeout=self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._wrap(exc, "metadata") from None
        brokers = {b.id: (b.host, int(b.port)) for b in md.brokers.values()}
        self._leaders = {(name, p.id): brokers[p.leader] for name, t in md.topics.items() if t.error is None
                         for p in t.partitions.values() if p.leader in brokers and p.error is None}
        return {name: len(t.partitions) for name, t in md.topics.items()
                if not name.startswith("__") and t.error is None}

    def _listed(self, tps: list[tuple[str, int]], ts: int, isolation: int = 0) -> dict[tuple[str, int], int]:
        """The batched ListOffsets answer (:class:`dr_toolkit.kafka.wire.OffsetLister`) for the
        partitions it could answer; empty when it cannot be used (not PLAINTEXT, no metadata yet)."""
        from dr_toolkit.kafka.wire import OffsetLister, WireUnsupported

        if not self._leaders or self.force_per_group:
            return {}
        try:
            lister = OffsetLister(self._conf, self.timeout_s)
        except WireUnsupported:
            return {}
        try:
            return lister.offsets(self._leaders, tps, ts, isolation)
        finally:
            self.list_offsets_requests += lister.requests

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, end offset) of one partition."""
        from confluent_kafka import TopicPartition

        try:
            lo, hi = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=self.timeout_s,
                                                         cached=False)
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._wrap(exc, f"watermarks of {topic}[{partition}]") from None
        return int(lo), int(hi)

    def watermarks_many(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int] | str]:
        """(log start offset, end offset) of many partitions in two ListOffsets requests per broker
        (earliest, latest), like :meth:`watermarks` for each; a partition the broker refused maps to
        its error text. Raises (translated) when the cluster does not answer."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        if not tps:
            return {}
        out: dict[tuple[str, int], Any] = {}
        lo = self._listed(tps, -2)
        hi = self._listed([tp for tp in tps if tp in lo], -1) if lo else {}
        out.update({tp: (lo[tp], hi[tp]) for tp in tps if tp in lo and tp in hi})
        rest = [tp for tp in tps if tp not in out]
        specs = (OffsetSpec.earliest(), OffsetSpec.latest())  # type: ignore[no-untyped-call]
        for i, spec in enumerate(specs):
            if not rest:
                break
            req = {TopicPartition(t, p): spec for t, p in rest}
            try:
                futs = self.admin.list_offsets(req, request_timeout=self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - translated
                raise self._wrap(exc, f"offsets of {len(rest)} partition(s)") from None
            for tp, fut in futs.items():
                key = (tp.topic, tp.partition)
                if isinstance(out.get(key), str):
                    continue
                try:
                    off = int(fut.result(timeout=self.timeout_s + 1).offset)
                except Exception as exc:  # noqa: BLE001 - per partition: reported, or raised when all fail
                    err = self._wrap(exc, f"offsets of {tp.topic}[{tp.partition}]")
                    if isinstance(err, UnreachableError):
                        raise err from None
                    out[key] = err.message
                    continue
                out[key] = (off, off) if i == 0 else (out[key][0], off)
        return out

    def topic_config(self, topic: str) -> dict[str, str] | None:
        """The topic's effective configuration as the broker states it (describe_configs: the
        topic's own values and the broker defaults it inherits), asked once per client; None when
        the broker does not answer it."""
        if topic in self._configs:
            return self._configs[topic]
        from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

        res = ConfigResource(ResourceType.TOPIC, topic)
        try:
            entries = self.admin.describe_configs([res], request_timeout=self.timeout_s)[res].result(
                timeout=self.timeout_s + 1)
            answer: dict[str, str] | None = {k: str(e.value or "") for k, e in entries.items()}
        except Exception:  # noqa: BLE001 - unknown: each caller assumes the worst
            answer = None
        self._configs[topic] = answer
        return answer

    def topic_configs_many(self, topics: list[str]) -> None:
        """Ask the broker for the configuration of every topic of ``topics`` not asked yet in ONE
        DescribeConfigs request (then :meth:`topic_config` answers from it); a topic the broker
        does not answer is left to :meth:`topic_config` (asked again alone)."""
        from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

        res = [ConfigResource(ResourceType.TOPIC, t) for t in dict.fromkeys(topics) if t not in self._configs]
        if not res:
            return
        try:
            futs = self.admin.describe_configs(res, request_timeout=self.timeout_s)
        except Exception:  # noqa: BLE001 - asked one by one later
            return
        for r, fut in futs.items():
            try:
                entries = fut.result(timeout=self.timeout_s + 1)
            except Exception:  # noqa: BLE001 - asked alone later
                continue
            self._configs[r.name] = {k: str(e.value or "") for k, e in entries.items()}

    def seeded(self, other: KafkaCluster) -> KafkaCluster:
        """This client, answering :meth:`topic_config` from what ``other`` was told already."""
        self._configs.update(other._configs)
        self._leaders = other._leaders
        return self

    def compacted(self, topic: str) -> bool:
        """Is ``topic`` compacted (``cleanup.policy`` includes compact)? Asked once per client;
        True when the broker does not say (the safe assumption for the searches)."""
        conf = self.topic_config(topic)
        return True if conf is None else "compact" in conf.get("cleanup.policy", "")

    def log_append_time(self, topic: str) -> bool:
        """Does the broker stamp ``topic``'s records with its own append time
        (``message.timestamp.type=LogAppendTime``, the topic's or the broker's default)? Then a
        record's timestamp there is that broker's clock, never its producer's: a mirror's copy
        does not carry the source's timestamp. True when the broker does not say (the safe
        assumption: timestamps there prove nothing)."""
        conf = self.topic_config(topic)
        return True if conf is None else conf.get("message.timestamp.type", "CreateTime") == "LogAppendTime"

    def stable_ends(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The last stable offset (LSO) of each partition: read_committed readers (the mirror,
        this toolkit) see nothing at or after it while a transaction there is open — not even
        non-transactional records acknowledged after the transaction began. Equal to the end
        offset when no transaction is open. Partitions the broker refused are left out."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        if not tps:
            return {}
        out: dict[tuple[str, int], int] = self._listed(tps, -1, isolation=1)  # read_committed: the LSO
        tps = [tp for tp in tps if tp not in out]
        if not tps:
            return out
        req = {TopicPartition(t, p): OffsetSpec.latest() for t, p in tps}  # type: ignore[no-untyped-call]
        try:
            futs = self.admin.list_offsets(req, isolation_level=IsolationLevel.READ_COMMITTED,
                                           request_timeout=self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - translated
            raise self._wrap(exc, f"stable offsets of {len(tps)} partition(s)") from None
        for tp, fut in futs.items():
            try:
                out[(tp.topic, tp.partition)] = int(fut.result(timeout=self.timeout_s + 1).offset)
            except Exception as exc:  # noqa: BLE001 - per partition: left out, raised when unreachable
                err = self._wrap(exc, f"stable offset of {tp.topic}[{tp.partition}]")
                if isinstance(err, UnreachableError):
                    raise err from None
        return out

    def offset_for_time(self, topic: str, partition: int, ts_ms: int) -> int | None:
        """The broker's timestamp-index answer (a hint only: some brokers answer it wrongly)."""
        from confluent_kafka import TopicPartition

        try:
            out = self.consumer.offsets_for_times([TopicPartition(topic, partition, ts_ms)], timeout=self.timeout_s)
        except Exception:  # noqa: BLE001 - a hint; the caller checks it by fetching anyway
            return None
        if not out or out[0].error is not None or out[0].offset < 0:
            return None
        return int(out[0].offset)

    # -- reads ----------------------------------------------------------------------------------
    def read(self, topic: str, partition: int, start: int, end: int, *, max_records: int | None = None,
             batch: int = 500, committed: bool = True) -> Iterator[Record]:
        """Records from offset ``start`` (or the next one that exists) up to ``end`` (exclusive).
        Counts one probe per positioned read; a sequential read in batches counts one per batch.
        Never asks for more records than exist before ``end`` (a consumer waits for the rest)."""
        yield from self._fetch(topic, partition, start, end, _to_record, max_records=max_records, batch=batch,
                               first=min(batch, 16), committed=committed,
                               silent=f"fetch of {topic}[{partition}] at offset {start}")

    def _poll(self, c: Any, n: int) -> list[Any]:
        """Up to ``n`` messages, returned as soon as ``n`` arrived or the partition's end (EOF)
        was reached — ``consume(n, timeout)`` alone waits the whole timeout when fewer than ``n``
        records are left before the end offset (offsets taken by transaction markers, aborted
        or compacted records hold no record); empty only when nothing came within the timeout."""
        from confluent_kafka import KafkaError

        got: list[Any] = []
        deadline = time.monotonic() + self.timeout_s
        while len(got) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msgs = c.consume(num_messages=n - len(got), timeout=min(left, 0.05 if got else 0.2))
            got.extend(msgs)
            if any(m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF for m in msgs):
                break
            if msgs and any(m.error() is not None for m in msgs):
                break
        return got

    def _fetch(self, topic: str, partition: int, start: int, end: int, item: Callable[[Any], T], *,
               max_records: int | None, batch: int, first: int, committed: bool, silent: str) -> Iterator[T]:
        """The one fetch loop of a partition: ``item`` of each message (data record) from offset
        ``start`` up to ``end`` (exclusive), at most ``max_records``; the consumer assigned at ``start`` and unassigned
        at the end (no background fetching between probes). Each poll counts one fetch and asks for
        ``first`` messages, then four times more up to ``batch`` (``consume(n)`` waits until n records
        arrived: a scan usually stops early). Stops at the partition's end (EOF); nothing within the
        timeout is :meth:`unreachable` (``silent`` says what was fetched); any other error is raised
        translated."""
        from confluent_kafka import KafkaError, TopicPartition

        if start >= end:
            return
        c = self.consumer if committed else self.uncommitted_consumer
        c.assign([TopicPartition(topic, partition, start)])
        try:
            seen = 0
            want = end - start if max_records is None else min(max_records, end - start)
            step = first
            while seen < want:
                self.fetches += 1
                msgs = self._poll(c, max(1, min(step, want - seen)))
                step = min(batch, step * 4)
                if not msgs:
                    raise self.unreachable(silent)
                for msg in msgs:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return
                        raise self._wrap(_kafka_exception(err), f"fetch of {topic}[{partition}]")
                    if msg.offset() >= end:
                        return
                    seen += 1
                    self.records_read += 1
                    yield item(msg)
                    if seen >= want:
                        return
        finally:
            try:
                c.unassign()  # stop background fetching between probes
            except Exception:  # noqa: BLE001 - a dead broker: the next call reports it
                pass

    def read_many(self, ranges: list[tuple[str, int, int, int]]) -> dict[tuple[str, int], list[Record]]:
        """The records of many ``(topic, partition, start, end)`` ranges, read together by one
        consumer (fetches shared by all partitions of a broker). A partition is in the answer
        only when its range was read to the end (a record at ``end − 1`` or later, or the log's
        end); the others are left out for the caller to read one at a time. Never raises for a
        partition; raises (translated) when the cluster does not answer at all."""
        from confluent_kafka import KafkaError, TopicPartition

        todo = {(t, p): (s, e) for t, p, s, e in ranges if s < e}
        if not todo:
            return {}
        got: dict[tuple[str, int], list[Record]] = {k: [] for k in todo}
        nxt = {k: s for k, (s, _) in todo.items()}
        done: set[tuple[str, int]] = set()
        failed: set[tuple[str, int]] = set()
        c = self.consumer
        c.assign([TopicPartition(t, p, s) for (t, p), (s, _) in todo.items()])
        deadline = time.monotonic() + self.timeout_s
        try:
            while len(done) + len(failed) < len(todo):
                left = deadline - time.monotonic()
                if left <= 0:
                    if not done and not any(got.values()):
                        raise self.unreachable(f"fetch of {len(todo)} partition(s)")
                    break
                want = sum(todo[k][1] - nxt[k] for k in todo if k not in done and k not in failed)
                self.fetches += 1
                try:
                    msgs = c.consume(num_messages=max(1, min(1000, want)), timeout=min(left, 0.2))
                except Exception as exc:  # noqa: BLE001 - translated
                    raise self._wrap(exc, f"fetch of {len(todo)} partition(s)") from None
                finished = []
                for msg in msgs:
                    key = (msg.topic(), msg.partition())
                    if key not in todo or key in done or key in failed:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done.add(key)
                        else:
                            failed.add(key)
                        finished.append(key)
                        continue
                    off = int(msg.offset())
                    end = todo[key][1]
                    if off < end:
                        got[key].append(_to_record(msg))
                        self.records_read += 1
                        nxt[key] = off + 1
                    if off >= end - 1:
                        done.add(key)
                        finished.append(key)
                if finished:  # stop fetching what is complete
                    try:
                        c.pause([TopicPartition(t, p) for t, p in finished])
                    except Exception:  # noqa: BLE001 - best effort: extra records are ignored
                        pass
        finally:
            try:
                c.resume([TopicPartition(t, p) for t, p in todo])  # no pause outlives this read
                c.unassign()
            except Exception:  # noqa: BLE001 - a dead broker: the next call reports it
                pass
        return {k: got[k] for k in done}

    def read_raw(self, topic: str, partition: int, start: int, end: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """(key, value) of the records in [start, end) — for small internal topics (MM2's)."""
        yield from self._fetch(topic, partition, start, end, lambda msg: (msg.key(), msg.value()), max_records=None,
                               batch=500, first=500, committed=True, silent=f"fetch of {topic}[{partition}]")

    def record_at(self, topic: str, partition: int, offset: int, end: int, *, committed: bool = True
                  ) -> Record | None:
        """The record at ``offset`` or, when that one is gone (compaction, markers), the next one
        before ``end``; None when there is none. ``end`` must not pass the last stable offset
        when ``committed`` (a read_committed fetch there waits for the transaction to end)."""
        return next(iter(self.read(topic, partition, offset, end, max_records=1, committed=committed)), None)

    # -- consumer groups ------------------------------------------------------------------------
    def _admin_call(self, what: str, submit: Callable[[Any], Any], key: str) -> Any:
        """Run one admin request (``submit(admin)`` returns futures by ``key``) with the timeout.
        A group coordinator that is not ready (loading its partition of ``__consumer_offsets``
        after a start, or moving) refused the request whole: it is sent again until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return submit(self.admin)[key].result(timeout=self.timeout_s + 1)
            except Exception as exc:  # noqa: BLE001 - translated
                if _coordinator_busy_exc(exc) and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise self._wrap(exc, what) from None

    def committed(self, group: str, partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], int]:
        """The group's committed offsets; partitions without a commit are left out. ``None``: every
        partition of every topic the cluster lists (internal ones left out).

        Read by a consumer of the group that never joins it (no subscription, never commits), not
        by the admin client's ListConsumerGroupOffsets: librdkafka (2.16, still so in its main
        branch) dereferences the consumer-group handle an admin client does not have when an
        OffsetFetch answer asks for a new coordinator (NOT_COORDINATOR, a coordinator still
        loading after a start) — a segmentation fault of the whole process (librdkafka issue
        #5040), met by this suite against a freshly started broker. A consumer has that handle."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        if partitions is None:
            partitions = [(t, p) for t, n in sorted(self.topics().items()) for p in range(n)]
        if not partitions:
            return {}
        what = f"committed offsets of group {group!r}"
        # read_uncommitted: offsets a transaction has not committed yet are not waited for (the
        # last committed ones are read, as the admin request without require_stable did)
        self._fresh_ticket()
        c = Consumer({**self._conf, "group.id": group, "enable.auto.commit": False, "enable.auto.offset.store": False,
                      "isolation.level": "read_uncommitted", "socket.timeout.ms": int(self.timeout_s * 1000)})
        try:
            deadline = time.monotonic() + self.timeout_s
            while True:
                try:
                    res = c.committed([TopicPartition(t, p) for t, p in partitions], timeout=self.timeout_s)
                except KafkaException as exc:
                    if _coordinator_busy_exc(exc) and time.monotonic() < deadline:
                        time.sleep(0.2)
                        continue
                    raise self._wrap(exc, what) from None
                errors = [tp for tp in res if tp.error is not None]
                if not errors:
                    break
                # A partition error is never "no commit": a coordinator still loading (a fresh or
                # restarted broker answers NOT_COORDINATOR / LOAD_IN_PROGRESS) is asked again.
                if not all(_coordinator_busy(tp.error) for tp in errors) or time.monotonic() > deadline:
                    first = errors[0]
                    raise self._wrap(_kafka_exception(first.error), f"{what} ({first.topic}[{first.partition}])")
                time.sleep(0.2)
        finally:
            with contextlib.suppress(Exception):  # closing a consumer that never joined: nothing to leave
                c.close()
        return {(tp.topic, tp.partition): int(tp.offset) for tp in res if tp.offset >= 0}

    def committed_many(self, groups: list[str],
                       have: Mapping[str, int] | Callable[[], Mapping[str, int]] | None = None, *, workers: int = 8
                       ) -> dict[str, dict[tuple[str, int], int]]:
        """Every group's committed offsets, as :meth:`committed` with ``partitions=None`` gives for
        each: only partitions of the topics ``have`` lists (hot's metadata, read once by the
        caller; read here when None; a callable: the caller's metadata being read beside the
        batched fetch, taken when the fetch has answered), offsets without a commit left out.

        Batched (:mod:`dr_toolkit.kafka.wire`: one FindCoordinator, then OffsetFetch v8 with up to
        500 groups per request, each answering only the group's committed partitions) when the
        client speaks PLAINTEXT or SASL GSSAPI and the broker answers it; otherwise one consumer per group
        asking for every listed partition (:meth:`committed`), ``workers`` at a time —
        ``batched`` then says False. Every group is in the answer, or the call raises."""
        from dr_toolkit.kafka.wire import WireUnsupported

        groups = list(dict.fromkeys(groups))
        if not groups:
            return {}
        if have is None:
            have = self.topics()
        if not self.force_per_group:
            try:
                fetcher = self.offset_fetcher()
                try:
                    got = fetcher.committed(groups)
                finally:
                    self.offset_fetch_requests += fetcher.requests
                self.batched = True
                known = have() if callable(have) else have  # a metadata read beside the fetch: taken here
                return {g: {tp: o for tp, o in got[g].items() if tp[1] < known.get(tp[0], 0)} for g in groups}
            except WireUnsupported as exc:
                self.batched_refused = exc.message
        self.batched = False
        known = have() if callable(have) else have
        parts = [(t, p) for t, n in sorted(known.items()) for p in range(n)]
        import concurrent.futures as cf

        with cf.ThreadPoolExecutor(max_workers=max(1, min(workers, len(groups))),
                                   thread_name_prefix="drt-committed") as ex:
            futs = {g: ex.submit(self.committed, g, parts) for g in groups}
            out = {g: f.result() for g, f in futs.items()}
        self.offset_fetch_requests += len(groups)
        return out

    def offset_fetcher(self) -> OffsetFetcher:
        """The batched OffsetFetch client of this cluster (raises WireUnsupported when it cannot be used)."""
        from dr_toolkit.kafka.wire import OffsetFetcher

        return OffsetFetcher(self.bootstrap, self._conf, self.timeout_s, self.role)

    def group_ids(self) -> list[str]:
        """Every consumer group id the cluster knows (ListGroups on every broker)."""
        try:
            res = self.admin.list_consumer_groups(request_timeout=self.timeout_s).result(timeout=self.timeout_s + 5)
        except Exception as exc:  # noqa: BLE001 - classified by _wrap (unreachable / refused)
            raise self._wrap(exc, "list consumer groups") from None
        if res.errors:  # a broker that did not answer: the list is incomplete (empty when none did)
            err = res.errors[0]
            raise self._wrap(err if isinstance(err, BaseException) else _kafka_exception(err),
                             "list consumer groups") from None
        return sorted(g.group_id for g in res.valid)

    def group_state(self, group: str) -> tuple[str, int]:
        """(state name, number of members) of ``group``."""
        d = self._admin_call(f"describe group {group!r}", lambda a: a.describe_consumer_groups(
            [group], request_timeout=self.timeout_s), group)
        state = getattr(d.state, "name", str(d.state)).upper()
        return state, len(d.members or [])

    def commit(self, group: str, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], str | None]:
        """Commit all ``offsets`` of ``group`` in ONE OffsetCommit request; per-partition errors."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        deadline = time.monotonic() + self.timeout_s
        while True:
            res = self._admin_call(f"commit offsets of group {group!r}", lambda a: a.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, tps)], request_timeout=self.timeout_s), group)
            errors = [tp.error for tp in res.topic_partitions if tp.error is not None]
            # The whole request was turned away by a coordinator not ready yet (a fresh broker
            # creates __consumer_offsets on first use; a restarted one loads it): nothing was
            # written, so the same single request is sent again.
            if not errors or len(errors) < len(res.topic_partitions) or not all(map(_coordinator_busy, errors)) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return {(tp.topic, tp.partition): (tp.error.str() if tp.error is not None else None)
                for tp in res.topic_partitions}


def _coordinator_busy(err: Any) -> bool:
    """The group coordinator cannot answer yet (moving, loading, or its topic being created)."""
    from confluent_kafka import KafkaError

    return err.code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                          KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._WAIT_COORD)


def _coordinator_busy_exc(exc: BaseException) -> bool:
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        return _coordinator_busy(err) or any(
            s in err.str() for s in ("Coordinator load in progress", "Not coordinator", "Coordinator not available"))
    return False


def _kafka_exception(err: Any) -> BaseException:
    from confluent_kafka import KafkaException

    return KafkaException(err)
