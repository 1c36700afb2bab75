"""Real Apache Kafka 4.x: single-node KRaft brokers (combined broker + controller) and
MirrorMaker 2 in dedicated mode (docs/contracts.md, the real servers).

* :class:`KafkaBroker` — one broker on two free 127.0.0.1 ports (client + controller), its
  storage under a given directory, formatted with ``kafka.tools.StorageTool`` before the first
  start; ``stop`` / ``kill`` / ``restart`` keep the data and the ports.
* :func:`kafka_pair` — the hot and the cold broker (two independent clusters).
* :class:`MirrorMaker2` — ``org.apache.kafka.connect.mirror.MirrorMaker`` replicating hot → cold
  for a topics regex, with the Default (``hot.<topic>``) or Identity replication policy, offset
  syncs for every record and checkpoints / group-offset syncs every second; ``wait_mirrored``
  waits until cold holds every record hot has.

The jars come from ``drt_servers/maven/kafka`` and ``drt_servers/maven/mm2`` (one classpath per
JVM); logging is log4j2 at WARN into each process's log file.

**Kerberos** is opt-in (``kdc=`` a :class:`drt_servers.kdc.Kdc`), as for HDFS and ZooKeeper: the
broker's client listener is ``SASL_PLAINTEXT`` with the GSSAPI mechanism only, the broker logging
in as ``kafka/localhost`` from the KDC's ``kafka.keytab`` (a listener-scoped JAAS config); clients
name it ``localhost:<port>`` (:attr:`KafkaBroker.bootstrap`) so their service ticket is for
``kafka/localhost``. The controller listener and an inter-broker listener (``INTERNAL``, on its own
port, :attr:`KafkaBroker.probe_address`) stay PLAINTEXT on 127.0.0.1: the harness's own readiness
and "mirrored yet?" probes use it, never the toolkit. MirrorMaker 2 (``kdc=``) connects to both
clusters with GSSAPI as ``kafka/localhost``. Without ``kdc`` every argv and config is as before.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drt_servers import maven
from drt_servers.process import ManagedProcess, free_port

if TYPE_CHECKING:
    from drt_servers.kdc import Kdc

JVM_OPTS = ["-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xss512k"]
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{HH:mm:ss,SSS}] %p %c{1}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = warn
logger.ak.name = org.apache.kafka
logger.ak.level = warn
logger.wst.name = org.apache.kafka.connect.runtime.WorkerSourceTask
logger.wst.level = error
"""


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (as ``random-uuid``),
    never starting with ``-`` (StorageTool's argument parser would take it for an option: Kafka's
    own ``Uuid.randomUuid`` redraws those too)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _write_log_config(directory: Path) -> Path:
    path = directory / "log4j2.properties"
    path.write_text(LOG4J2)
    return path


def _props(values: dict[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


SERVICE = "kafka"  # the brokers' Kerberos service name: their principal is kafka/localhost


def _krb5_jaas(kdc: Kdc) -> str:
    """A ``sasl.jaas.config`` value logging in as ``kafka/localhost`` from the KDC's keytab."""
    return kdc.keytab_login(kdc.kafka_keytab, f"{SERVICE}/localhost")


def secure_listeners(port: int, internal_port: int, controller_port: int, kdc: Kdc) -> dict[str, object]:
    """The listener overrides of a kerberized broker (see the module doc)."""
    return {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal_port},"
                     f"CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://localhost:{port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": SERVICE,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "GSSAPI",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": _krb5_jaas(kdc),
    }


def broker_config(data: Path, port: int, controller_port: int) -> dict[str, object]:
    """The broker's ``server.properties``: small, quick, compaction on with short intervals."""
    return {
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": data / "logs",
        "metadata.log.dir": data / "metadata",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 2,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 2,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "num.network.threads": 2,
        "num.io.threads": 2,
        "background.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "num.replica.fetchers": 1,
        # Compaction testable in seconds: a topic created with segment.ms small and
        # min.cleanable.dirty.ratio small is cleaned shortly after its segment rolls.
        "log.cleaner.enable": "true",
        "log.cleaner.threads": 1,
        "log.cleaner.backoff.ms": 200,
        "log.cleaner.dedupe.buffer.size": 4 * 2**20,
        "log.cleaner.io.buffer.size": 256 * 1024,
        # Tests write records with CreateTimes years old: time-based retention (7 days by default)
        # would delete them within a check interval. Retention is per topic where a test wants it.
        "log.retention.ms": -1,
        "log.retention.bytes": -1,
        "log.retention.check.interval.ms": 1000,
        "log.segment.delete.delay.ms": 1000,
        "log.initial.task.delay.ms": 1000,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
        "auto.create.topics.enable": "false",
        # After a kill the old incarnation's registration blocks the new one until its session
        # times out (DUPLICATE_BROKER_REGISTRATION): keep that wait short.
        "broker.session.timeout.ms": 4000,
        "broker.heartbeat.interval.ms": 500,
    }


class KafkaBroker(ManagedProcess):
    """One single-node KRaft Kafka cluster. ``address`` is ``127.0.0.1:<port>``; the data
    (``<dir>/data``) and the ports survive ``stop``/``kill``/``restart``."""

    def __init__(self, workdir: Path, name: str, *, heap: str = "384m",
                 overrides: dict[str, object] | None = None, start_timeout: float = 120.0,
                 kdc: Kdc | None = None) -> None:
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.data = workdir / "data"
        self.kdc = kdc
        self.controller_port = free_port()
        port = free_port()
        while port == self.controller_port:
            port = free_port()
        self.internal_port: int | None = None
        secure: dict[str, object] = {}
        if kdc is not None:
            self.internal_port = free_port()
            while self.internal_port in (port, self.controller_port):
                self.internal_port = free_port()
            secure = secure_listeners(port, self.internal_port, self.controller_port, kdc)
        cfg = {**broker_config(self.data, port, self.controller_port), **secure, **(overrides or {})}
        self.config_path = workdir / "server.properties"
        self.config_path.write_text(_props(cfg))
        log_cfg = _write_log_config(workdir)
        self.classpath = maven.classpath("kafka")
        self.cluster_id = _cluster_id()
        krb = kdc.jvm_options() if kdc is not None else []
        argv = [maven.java(), f"-Xmx{heap}", "-Xms64m", *JVM_OPTS, *krb, f"-Dlog4j2.configurationFile={log_cfg}",
                "kafka.Kafka", str(self.config_path)]
        # The classpath goes in CLASSPATH (not -cp) so the log's start line stays readable.
        super().__init__(f"kafka-{name}" if kdc is None else f"kafka-{name}-secure", argv, port=port,
                         log_dir=workdir, ready=self._ready, env={"CLASSPATH": self.classpath},
                         start_timeout=start_timeout)

    @property
    def bootstrap(self) -> str:
        """What clients connect to: ``localhost:<port>`` when kerberized (the host names the
        service principal ``kafka/localhost``), else ``127.0.0.1:<port>``."""
        return self.address if self.kdc is None else f"localhost:{self.port}"

    @property
    def probe_address(self) -> str:
        """A PLAINTEXT address of this broker for the harness's own probes (the inter-broker
        listener when kerberized; the client listener otherwise)."""
        return self.address if self.internal_port is None else f"127.0.0.1:{self.internal_port}"

    def _ready(self) -> bool:
        return metadata_brokers(self.probe_address) > 0

    def format(self) -> None:
        """Format the storage once (``kafka.tools.StorageTool format``); a no-op when formatted."""
        if (self.data / "metadata" / "meta.properties").exists():
            return
        r = subprocess.run([maven.java(), "-Xmx128m", *JVM_OPTS, f"-Dlog4j2.configurationFile={self.workdir}/log4j2.properties",
                            "-cp", self.classpath, "kafka.tools.StorageTool", "format", "--ignore-formatted",
                            "-t", self.cluster_id, "-c", str(self.config_path)],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise maven.ServerSetupError(f"{self.name}: kafka.tools.StorageTool format failed: "
                                         f"{(r.stdout + r.stderr).strip()[-2000:]}")

    def start(self) -> KafkaBroker:
        self.format()
        super().start()
        return self


def metadata_brokers(address: str, timeout_s: float = 2.0) -> int:
    """How many brokers a Metadata request (v0, no topics) to ``address`` names: > 0 once the
    broker serves clients. Spoken over a plain socket, not through librdkafka: a librdkafka handle
    made while a test kills and restarts the broker can abort the whole test process (seen:
    "Fatal Python error: Aborted" in ``AdminClient.list_topics`` during a restart)."""
    import socket
    import struct

    host, port = address.rsplit(":", 1)
    client = b"drt-servers"
    body = struct.pack(">hhih", 3, 0, 1, len(client)) + client + struct.pack(">i", 0)  # Metadata v0, [] topics
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 12:  # size, correlation id, number of brokers
                chunk = s.recv(12 - len(head))
                if not chunk:
                    return 0
                head += chunk
    except OSError:
        return 0
    _size, corr, brokers = struct.unpack(">iii", head)
    return brokers if corr == 1 else 0


def kafka_broker(workdir: Path, name: str, **kw: object) -> KafkaBroker:
    """An unstarted broker (call ``.start()``) in ``workdir/kafka-<name>`` (several brokers may
    share ``workdir``)."""
    return KafkaBroker(Path(workdir) / f"kafka-{name}", name, **kw)  # type: ignore[arg-type]


def kafka_pair(root: Path, *, kdc: Kdc | None = None) -> tuple[KafkaBroker, KafkaBroker]:
    """The started hot and cold brokers under ``root/hot`` and ``root/cold`` (kerberized with ``kdc``)."""
    hot = KafkaBroker(Path(root) / "hot", "hot", kdc=kdc)
    cold = KafkaBroker(Path(root) / "cold", "cold", kdc=kdc)
    hot.start()
    cold.start()
    return hot, cold


class MirrorMaker2(ManagedProcess):
    """MirrorMaker 2, dedicated mode, hot → cold only. ``policy`` is ``"default"`` (cold topics
    named ``hot.<topic>``) or ``"identity"`` (same names). Offset syncs for every record
    (``offset.lag.max=0``), checkpoints and group-offset syncs every second, topics and groups
    refreshed every second. Ready when its connectors have created their internal topics."""

    def __init__(self, workdir: Path, hot: str, cold: str, *, topics: str = ".*", groups: str = ".*",
                 policy: str = "default", heap: str = "384m", extra: dict[str, object] | None = None,
                 aliases: tuple[str, str] = ("hot", "cold"), start_timeout: float = 180.0,
                 kdc: Kdc | None = None, probe: tuple[str, str] | None = None) -> None:
        """``hot``/``cold`` are the bootstraps MM2 uses; with ``kdc`` it speaks SASL/GSSAPI to both as
        ``kafka/localhost`` and ``probe`` (the brokers' :attr:`KafkaBroker.probe_address`) is where
        the harness checks readiness and mirroring (PLAINTEXT)."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.hot, self.cold = hot, cold
        if kdc is not None and probe is None:
            raise ValueError("a kerberized MirrorMaker 2 needs the brokers' PLAINTEXT probe addresses")
        self.probe_hot, self.probe_cold = probe or (hot, cold)
        self.policy = policy
        # MM2 names its internal topics (and Default-policy remote topics) by the cluster
        # aliases: a second MirrorMaker 2 between the same clusters needs other aliases.
        self.source_alias, self.target_alias = src, dst = aliases
        cls = {"default": DEFAULT_POLICY, "identity": IDENTITY_POLICY}.get(policy, policy)
        cfg: dict[str, object] = {
            "clusters": f"{src}, {dst}",
            f"{src}.bootstrap.servers": hot,
            f"{dst}.bootstrap.servers": cold,
            f"{src}->{dst}.enabled": "true",
            f"{src}->{dst}.topics": topics,
            f"{src}->{dst}.groups": groups,
            f"{dst}->{src}.enabled": "false",
            f"{dst}->{src}.emit.heartbeats.enabled": "false",
            "replication.policy.class": cls,
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": 1,
            "emit.checkpoints.enabled": "true",
            "emit.checkpoints.interval.seconds": 1,
            "emit.heartbeats.interval.seconds": 1,
            "refresh.topics.interval.seconds": 1,
            "refresh.groups.interval.seconds": 1,
            "offset.lag.max": 0,
            "offset-syncs.topic.location": "source",
            "sync.topic.acls.enabled": "false",
            "sync.topic.configs.enabled": "true",
            "replication.factor": 1,
            "checkpoints.topic.replication.factor": 1,
            "heartbeats.topic.replication.factor": 1,
            "offset-syncs.topic.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "config.storage.replication.factor": 1,
            "tasks.max": 1,
            # Records as they were: no batching delay, and read only committed transactions.
            f"{src}.consumer.isolation.level": "read_committed",
            f"{src}.consumer.fetch.max.wait.ms": 50,
            f"{dst}.producer.linger.ms": 0,
            # the Connect worker's commit (MirrorSourceTask.commit() sends the offset syncs held back
            # past MM2's 10 in flight): a worker setting, taken from the target cluster's prefix in
            # dedicated mode — unprefixed it was ignored, and a burst's last offset sync reached the
            # checkpoint task only after the default 60 s
            f"{dst}.offset.flush.interval.ms": 1000,
        }
        if kdc is not None:
            for alias in (src, dst):
                cfg.update({f"{alias}.security.protocol": "SASL_PLAINTEXT", f"{alias}.sasl.mechanism": "GSSAPI",
                            f"{alias}.sasl.kerberos.service.name": SERVICE,
                            f"{alias}.sasl.jaas.config": _krb5_jaas(kdc)})
        cfg.update(extra or {})
        self.config_path = workdir / "mm2.properties"
        self.config_path.write_text(_props(cfg))
        log_cfg = _write_log_config(workdir)
        krb = kdc.jvm_options() if kdc is not None else []
        argv = [maven.java(), f"-Xmx{heap}", "-Xms64m", *JVM_OPTS, *krb, f"-Dlog4j2.configurationFile={log_cfg}",
                "org.apache.kafka.connect.mirror.MirrorMaker", str(self.config_path), "--clusters", dst]
        name = "mirrormaker2" if aliases == ("hot", "cold") else f"mirrormaker2-{src}-{dst}"
        super().__init__(name, argv, port=int(cold.rsplit(":", 1)[1]), log_dir=workdir,
                         ready=self._ready, env={"CLASSPATH": maven.classpath("mm2")}, start_timeout=start_timeout)

    @property
    def checkpoints_topic(self) -> str:
        return f"{self.source_alias}.checkpoints.internal"

    @property
    def offset_syncs_topic(self) -> str:
        return f"mm2-offset-syncs.{self.target_alias}.internal"

    def remote_topic(self, topic: str) -> str:
        """The cold name of hot ``topic`` under this MM2's replication policy."""
        return topic if self.policy == "identity" else f"{self.source_alias}.{topic}"

    def _ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        cold = AdminClient({"bootstrap.servers": self.probe_cold, "log_level": 0}).list_topics(timeout=2).topics
        hot = AdminClient({"bootstrap.servers": self.probe_hot, "log_level": 0}).list_topics(timeout=2).topics
        return self.checkpoints_topic in cold and self.offset_syncs_topic in hot

    def wait_mirrored(self, topics: Iterable[str], timeout: float = 90.0) -> None:
        """Wait until, for every partition of each hot topic, cold's copy holds every record hot
        holds (cold end offset − log start ≥ hot's count of data records, read_committed)."""
        topics = list(topics)
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            behind = mirror_behind(self.probe_hot, self.probe_cold, {t: self.remote_topic(t) for t in topics})
            if not behind:
                return
            last = "; ".join(f"{t}[{p}]: hot {h}, cold {c}" for (t, p), (h, c) in sorted(behind.items()))
            time.sleep(0.3)
        raise TimeoutError(f"MirrorMaker 2 has not mirrored {topics} after {timeout:.0f}s ({last}):\n{self.log_tail()}")


def _data_records(address: str, topic: str) -> dict[int, int]:
    """Per partition, how many data records a read_committed consumer reads from the log start."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": address, "log_level": 0}).list_topics(topic, timeout=5)
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None:
        return {}
    c = Consumer({"bootstrap.servers": address, "group.id": "drt-servers-count", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True, "fetch.wait.max.ms": 10,
                  "log_level": 0})
    out: dict[int, int] = {}
    try:
        for p in tmd.partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)
            if hi <= lo:
                out[p] = 0
                continue
            c.assign([TopicPartition(topic, p, lo)])
            n, eof = 0, False
            t_end = time.monotonic() + 10
            while not eof and time.monotonic() < t_end:
                # consume() waits its whole timeout unless 500 messages come: a short one, so a
                # partition of 60 records is read in ~0.1 s, not 1 s (the EOF event ends the loop)
                for m in c.consume(500, timeout=0.1):
                    err = m.error()
                    if err is None:
                        n += 1
                    elif err.code() == err._PARTITION_EOF:
                        eof = True
            out[p] = n
    finally:
        c.close()
    return out


# What a broker answers for a partition MirrorMaker 2 has just created, before its leader is known
# everywhere: "not yet", never an error (seen in CI: NOT_LEADER_FOR_PARTITION right after MM2 started).
_NOT_YET = {"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION",
            "_UNKNOWN_TOPIC", "_TIMED_OUT", "_LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS"}


def _ends(consumer: Any, tp: Any) -> tuple[int, int] | None:
    """A partition's (low, high) watermarks, or None while its leader is not known yet."""
    from confluent_kafka import KafkaException

    try:
        lo, hi = consumer.get_watermark_offsets(tp, timeout=5, cached=False)
    except KafkaException as exc:
        if exc.args and getattr(exc.args[0], "name", lambda: "")() in _NOT_YET:
            return None
        raise
    return int(lo), int(hi)


def mirror_behind(hot: str, cold: str, topics: dict[str, str]) -> dict[tuple[str, int], tuple[int, int]]:
    """``{hot topic: cold topic}`` → the partitions where cold holds fewer data records than
    hot: ``{(topic, partition): (hot count, cold count)}``. Counts end offsets when neither
    log has a transaction marker or a trimmed head (the common, cheap case)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    out: dict[tuple[str, int], tuple[int, int]] = {}
    hot_md = AdminClient({"bootstrap.servers": hot, "log_level": 0}).list_topics(timeout=5).topics
    cold_md = AdminClient({"bootstrap.servers": cold, "log_level": 0}).list_topics(timeout=5).topics
    ch = Consumer({"bootstrap.servers": hot, "group.id": "drt-servers-wm", "log_level": 0})
    cc = Consumer({"bootstrap.servers": cold, "group.id": "drt-servers-wm", "log_level": 0})
    try:
        for t, ct in topics.items():
            if t not in hot_md:
                continue
            parts = sorted(hot_md[t].partitions)
            if ct not in cold_md:
                for p in parts:
                    out[(t, p)] = (-1, -1)
                continue
            for p in parts:
                hot_ends = _ends(ch, TopicPartition(t, p))
                cold_ends = _ends(cc, TopicPartition(ct, p))
                if hot_ends is None or cold_ends is None:  # a partition whose leader is still being elected
                    out[(t, p)] = (-1, -1)
                    continue
                (hlo, hhi), (clo, chi) = hot_ends, cold_ends
                if chi - clo < hhi - hlo:
                    out[(t, p)] = (hhi - hlo, chi - clo)
    finally:
        ch.close()
        cc.close()
    # Transaction markers and aborted records count in hot's offsets but are not mirrored:
    # where the offsets say "behind", count the data records before reporting it.
    # Each topic is counted once per side (a count reads all its partitions), not once per partition behind.
    counted: dict[tuple[str, str], dict[int, int]] = {}

    def count(address: str, topic: str) -> dict[int, int]:
        if (address, topic) not in counted:
            counted[(address, topic)] = _data_records(address, topic)
        return counted[(address, topic)]

    for (t, p), _ in list(out.items()):
        if out[(t, p)] == (-1, -1):  # no cold topic yet, or a leader not known yet: behind
            continue
        h = count(hot, t).get(p, 0)
        c = count(cold, topics[t]).get(p, -1)
        if c >= h:
            del out[(t, p)]
        else:
            out[(t, p)] = (h, c)
    return out


def start_for_cli(directory: Path) -> list[ManagedProcess]:
    """``python -m drt_servers start kafka``: hot + cold brokers and MirrorMaker 2 (all topics,
    DefaultReplicationPolicy)."""
    hot, cold = kafka_pair(directory)
    mm2 = MirrorMaker2(Path(directory) / "mm2", hot.address, cold.address,
                       topics=os.environ.get("DRT_MM2_TOPICS", ".*")).start()
    return [hot, cold, mm2]
