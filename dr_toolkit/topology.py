"""The topology file: the two clusters, what to protect, and where state lives.

A YAML file (``drt.yaml`` by default) is parsed into a validated pydantic model. Errors
name the file, the line and the field, and say what was expected (exit 2). Secrets never
live here: each endpoint names the Airflow connection id (or environment variable) that
holds its credentials, see :mod:`dr_toolkit.secrets`.

Example: ``examples/embedded.yaml`` (everything on this machine) and
``examples/production.yaml`` (two real clusters).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dr_toolkit.errors import ConfigError

if TYPE_CHECKING:
    import yaml

DEFAULT_CONFIG = "drt.yaml"
_SECRET_KEYS = re.compile(r"(password|passwd|secret|token|access_key|private_key)", re.IGNORECASE)
_CLUSTER_KEY = re.compile(r"^[A-Za-z0-9_.\-]+(,[A-Za-z0-9_.\-]+)*:\d+:/[^\s]*$")


class _Model(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import, so a command
    # that never reads a topology (`drt --help`, a bare `drt distcp`) does not pay for all of them.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class HdfsEndpoint(_Model):
    """WebHDFS access to one cluster's namenodes (several for HA: they fail over by themselves)."""

    namenodes: list[str] = Field(min_length=1, description="WebHDFS base URLs, e.g. http://nn1:9870")
    user: str | None = None
    kerberos: bool = Field(default=False, description=(
        "WebHDFS and /jmx with SPNEGO; the ticket from the endpoint's connection or DRT_KERBEROS_PRINCIPAL/"
        "DRT_KERBEROS_KEYTAB (or KRB5CCNAME) — never in this file"))
    conn_id: str | None = Field(default=None, description="Airflow connection (type webhdfs) with credentials")
    timeout_s: float = Field(default=30.0, gt=0, description="seconds every WebHDFS request may take")
    nameservice: str | None = Field(default=None, description="HDFS nameservice id Spark's Hadoop client uses "
                                                              "(hdfs://<nameservice>/...); default: the cluster name")
    rpc_addresses: list[str] = Field(default_factory=list, description="NameNode RPC host:port (8020), one per "
                                                                       "namenode: Spark reads hdfs:// through them")

    @field_validator("namenodes")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for url in v:
            p = urlparse(url)
            if p.scheme not in ("http", "https") or not p.hostname:
                raise ValueError(f"namenode {url!r} must be an http(s)://host:port WebHDFS URL")
        return v

    @field_validator("rpc_addresses")
    @classmethod
    def _rpc(cls, v: list[str]) -> list[str]:
        for addr in v:
            host, _, port = addr.rpartition(":")
            if not host or "/" in addr or not port.isdigit():
                raise ValueError(f"rpc address {addr!r} must be host:port (e.g. nn1.example.com:8020)")
        return v

    @field_validator("nameservice")
    @classmethod
    def _ns(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_\-]*", v):
            raise ValueError(f"nameservice {v!r} must be letters, digits, '_' and '-'")
        return v


class S3Endpoint(_Model):
    bucket: str
    endpoint_url: str | None = None
    region: str | None = None
    conn_id: str | None = Field(default=None, description="Airflow connection (type aws) with the keys")
    sse: Literal["AES256", "aws:kms"] | None = None


class ZooKeeperEndpoint(_Model):
    quorum: str = Field(description="host1:2181,host2:2181")
    hbase_znode_parent: str = "/hbase"
    dr_root: str = Field(default="/dr-toolkit", description="znode under which fencing state lives")
    connect_timeout_s: float = 10.0
    call_timeout_s: float = 10.0
    conn_id: str | None = Field(default=None, description="digest credentials, e.g. in AIRFLOW_CONN_<ID>")
    hbase_version: str = "2.5"

    @field_validator("quorum")
    @classmethod
    def _quorum(cls, v: str) -> str:
        for hp in v.split(","):
            host, _, port = hp.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"quorum member {hp!r} must be host:port")
        return v

    @field_validator("hbase_znode_parent", "dr_root")
    @classmethod
    def _abs(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"znode path {v!r} must start with /")
        return v

    @property
    def cluster_key(self) -> str:
        """HBase's cluster key for this ensemble: ``zk1,zk2:2181:/hbase``."""
        hosts = [hp.strip().rpartition(":") for hp in self.quorum.split(",")]
        port = hosts[0][2]
        return f"{','.join(h for h, _, _ in hosts)}:{port}:{self.hbase_znode_parent}"


class KafkaEndpoint(_Model):
    bootstrap_servers: str
    conn_id: str | None = Field(default=None, description="Airflow connection (type kafka) with SASL/TLS settings")
    timeout_s: float = 10.0
    max_clock_skew_s: float = Field(default=120.0, ge=0, description=(
        "hot cluster: the most a record's CreateTime may differ from the time the broker appended it "
        "(producer clock skew plus send delay); the never-skip fallbacks and the lag's safe time rely on it"))
    replication_policy: Literal["identity", "default"] = Field(default="identity", description=(
        "cold cluster: how the mirror names topics — identity (same name, MM2 IdentityReplicationPolicy) "
        "or default (MM2 DefaultReplicationPolicy: '<source_alias>.<topic>')"))
    source_alias: str = Field(default="hot", description="cold cluster: MM2's alias of the hot cluster")
    mm2_offset_syncs_topic: str | None = Field(default=None, description=(
        "hot cluster: MirrorMaker 2's offset-syncs topic (mm2-offset-syncs.<cold alias>.internal), read at "
        "remap time as a second, re-read-only translation"))
    mm2_checkpoints_topic: str | None = Field(default=None, description=(
        "cold cluster: MirrorMaker 2's checkpoints topic (<source alias>.checkpoints.internal), read at remap "
        "time: MM2's own translation of each group's committed offsets, used (re-read only) and cross-checked"))


class SparkEndpoint(_Model):
    master: str = Field(default="local[2]", description=(
        "local[N], spark://host:7077 (standalone), yarn, k8s://https://api:6443; used only when no "
        "session exists yet (under spark-submit the submitter's master wins)"))
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark conf (user keys win over ours)")
    conn_id: str | None = Field(default=None, description=(
        "a Spark connection (Airflow's spark type): host = the master (yarn), extra hadoop_conf_dir, queue, conf"))
    hadoop_conf_dir: str | None = Field(default=None, description=(
        "master yarn: the cluster's Hadoop client configuration (yarn-site.xml …), exported as HADOOP_CONF_DIR; "
        "default $HADOOP_CONF_DIR / $YARN_CONF_DIR"))
    ship_library: bool = Field(default=True, description=(
        "on a non-local master, ship dr_toolkit to the executors as a zip (spark.submit.pyFiles) and the "
        "packages its tasks import as an archive (spark.archives)"))


class Cluster(_Model):
    role: Literal["hot", "cold"]
    hdfs: HdfsEndpoint | None = None
    s3: S3Endpoint | None = None
    local_root: str | None = Field(default=None, description="a local directory standing in for HDFS")
    zookeeper: ZooKeeperEndpoint | None = None
    kafka: KafkaEndpoint | None = None
    spark: SparkEndpoint = Field(default_factory=SparkEndpoint)
    hbase_shell: str | None = Field(default=None, description="path of the `hbase` command, where installed")


class CopyOptions(_Model):
    update: bool = True
    overwrite: bool = False
    delete: bool = False
    include: list[str] = Field(default_factory=list, description="glob patterns relative to the source root")
    exclude: list[str] = Field(default_factory=list)
    exclude_regex: list[str] = Field(default_factory=list, description=(
        "DistCp -filters: a file whose relative path (\"/a/b.txt\") or one of whose parent directories "
        "matches one of these regexes whole is not copied"))
    append_only: list[str] = Field(default_factory=list, description="globs of files that only grow (logs)")
    preserve: list[Literal["permissions", "times", "owner", "group", "acl", "xattr"]] = Field(
        default_factory=list, description="DistCp -p: owner/group need the target's superuser (HDFS), acl and "
                                          "xattr an HDFS source and target")
    strategy: Literal["dynamic", "uniformsize"] = Field(default="dynamic", description=(
        "DistCp -strategy: dynamic = workers take the next chunk of files as they finish one; "
        "uniformsize = the files are split up front into one list of equal bytes per worker"))
    list_threads: int = Field(default=1, ge=1, le=128, description=(
        "DistCp -numListstatusThreads: the source root's subdirectories are listed on this many threads"))
    log_dir: str | None = Field(default=None, description="DistCp -log: a per-run JSON-lines log of every "
                                "file copied, skipped, deleted or failed is written in this directory (path or URI)")
    bandwidth_mb_s: float | None = None
    workers: int = Field(default=8, ge=1, le=512)
    engine: Literal["local", "spark"] = "local"
    snapshots: bool = Field(default=False, description="use HDFS snapshots of the source when it is snapshottable")
    proof: Literal["checksum", "content"] = Field(default="checksum", description=(
        "what proves a target file equal to its source: checksum = each filesystem's own (HDFS→HDFS: the "
        "DataNodes' MD5-of-MD5-of-CRC32C, a function of each 512-byte chunk's CRC32C, so a chunk "
        "rewritten with other bytes of the same CRC32C passes); content = every file kept is read on "
        "both sides and compared byte for byte (every run a full comparison) and every file copied is "
        "read back and its SHA-256 compared with the source bytes read"))
    state_dir: str | None = Field(default=None, description="where manifests and copy state live (a path or URI "
                                  "outside every source and target); default: drt-state/ beside the SQLite "
                                  "ledger or the topology file, or $DRT_STATE_DIR")
    keep_manifests: int = Field(default=10, ge=1, description="manifests kept per source/target pair")
    keep_manifests_days: float | None = Field(default=None, ge=0, description="older manifests beyond "
                                              "keep_manifests are kept until this age (days); unset: none")

    @model_validator(mode="after")
    def _distcp_rules(self) -> CopyOptions:
        if self.delete and not (self.update or self.overwrite):
            raise ValueError("delete needs update or overwrite (as DistCp requires)")
        for i, rx in enumerate(self.exclude_regex):
            try:
                re.compile(rx)
            except re.error as exc:
                raise ValueError(f"exclude_regex[{i}] {rx!r} is not a regular expression: {exc}") from None
        return self


class HdfsPolicy(_Model):
    name: str
    source: str
    targets: list[str] = Field(min_length=1)
    schedule: str | None = "@hourly"
    options: CopyOptions = Field(default_factory=CopyOptions)


class HBasePolicy(_Model):
    name: str
    peer_id: str
    namespaces: list[str] = Field(default_factory=list)
    tables: list[str] = Field(default_factory=list)
    table_cfs: dict[str, list[str]] = Field(default_factory=dict)
    schedule: str | None = "@daily"
    max_lag_s: float | None = Field(default=None, ge=0, description="largest lag of this peer still GO before "
                                    "fencing (default: failover.max_lag_s)")
    hbase_rootdir: str = Field(default="/hbase", description="hbase.rootdir on the hot cluster's filesystem "
                               "(or a webhdfs:// URI of it): "
                               "WAL lengths (WALs/, oldWALs/) and table descriptors (data/) are read there")
    hbase_rootdir_cold: str | None = Field(default=None, description="hbase.rootdir on the cold cluster's "
                                           "filesystem (or a webhdfs:// URI of it): read instead when the estate "
                                           "is protected the other way (after a re-protect); default: hbase_rootdir")


# MirrorMaker 2's defaults (DefaultTopicFilter / DefaultGroupFilter): internal, replica and
# double-underscore topics; console consumers, Connect workers and double-underscore groups.
MM2_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", r"__.*")
MM2_GROUPS_EXCLUDE = (r"console-consumer-.*", r"connect-.*", r"__.*")


@functools.lru_cache(maxsize=256)
def _alternation(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """The patterns joined as MM2 joins a list (``a|b``), matched whole; None for an empty list
    (matches nothing, as MM2's blank list)."""
    return re.compile("|".join(patterns)) if patterns else None


def _full(patterns: list[str], name: str) -> bool:
    rx = _alternation(tuple(patterns))
    return rx is not None and rx.fullmatch(name) is not None


class KafkaPolicy(_Model):
    """The topics and consumer groups one policy protects.

    Selection as MirrorMaker 2 selects (``topics``/``topics.exclude``/``groups``/
    ``groups.exclude``): a name is selected when it is listed literally in ``topics``/``groups``
    or fully matched by a pattern of ``topics_regex``/``groups_regex``, and not fully matched by
    a pattern of ``topics_exclude``/``groups_exclude`` (exclude wins). The patterns are resolved
    against the hot cluster's live topics and groups each time a checkpoint, remap or gate runs."""

    name: str
    topics: list[str] = Field(default_factory=list, description="topic names (literal)")
    groups: list[str] = Field(default_factory=list, description="consumer group ids (literal)")
    topics_regex: list[str] = Field(default_factory=list, description=(
        "MM2 `topics`: regular expressions, each matched against the whole name of every topic on the hot "
        "cluster"))
    topics_exclude: list[str] = Field(default_factory=lambda: list(MM2_TOPICS_EXCLUDE), description=(
        "MM2 `topics.exclude`: topics fully matched are not protected, whatever selected them, nor are a "
        "group's offsets on them carried over (default: MM2's)"))
    groups_regex: list[str] = Field(default_factory=list, description=(
        "MM2 `groups`: regular expressions, each matched against the whole id of every consumer group on the "
        "hot cluster"))
    groups_exclude: list[str] = Field(default_factory=lambda: list(MM2_GROUPS_EXCLUDE), description=(
        "MM2 `groups.exclude`: groups fully matched are not protected, whatever selected them (default: MM2's)"))
    schedule: str | None = "*/15 * * * *"
    exclude_topics: list[str] = Field(default_factory=list, description=(
        "topics (literal names) the groups commit on that are NOT carried over (every other committed topic "
        "is); topics_exclude is the pattern form"))
    max_checkpoint_age_s: float = Field(default=1800.0, gt=0, description=(
        "a group whose newest checkpoint is older than this is NO_GO at the gate (default 2x the 15-minute schedule)"))

    @model_validator(mode="after")
    def _selection(self) -> KafkaPolicy:
        for field in ("topics_regex", "topics_exclude", "groups_regex", "groups_exclude"):
            for pattern in getattr(self, field):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"policy {self.name!r}: {field} pattern {pattern!r} is not a valid regular "
                                     f"expression ({exc}); fix or remove it") from None
        if not self.topics and not self.topics_regex:
            raise ValueError(f"policy {self.name!r} protects no topic: list topics or topics_regex")
        for field, names, excl in (("topics", self.topics, "topics_exclude"),
                                   ("groups", self.groups, "groups_exclude")):
            for n in names:
                hit = next((x for x in getattr(self, excl) if _full([x], n)), None)
                if hit is not None:
                    raise ValueError(f"policy {self.name!r}: {field} lists {n!r}, which {excl} pattern {hit!r} "
                                     f"excludes (exclude wins); drop one or set {excl} without it")
        return self

    @functools.cached_property
    def _names(self) -> tuple[frozenset[str], frozenset[str]]:
        return frozenset(self.topics), frozenset(self.groups)

    def selects_topic(self, topic: str) -> bool:
        """Is ``topic`` protected by this policy (listed or matched, and not excluded)?"""
        return (topic in self._names[0] or _full(self.topics_regex, topic)) and not _full(self.topics_exclude, topic)

    def selects_group(self, group: str) -> bool:
        """Is ``group`` protected by this policy (listed or matched, and not excluded)?"""
        return (group in self._names[1] or _full(self.groups_regex, group)) and not _full(self.groups_exclude, group)

    def excludes_topic(self, topic: str) -> bool:
        """Are this policy's groups' offsets on ``topic`` left out (``exclude_topics``, ``topics_exclude``)?"""
        return topic in self.exclude_topics or _full(self.topics_exclude, topic)


class VerifyPolicy(_Model):
    """A dataset verified against its replica on a schedule. What one run asks is built from it by
    the verify capability (``dr_toolkit.verify.request.policy_request``)."""

    name: str
    source: str
    target: str
    key: list[str] = Field(min_length=1)
    format: str = "parquet"
    ts_column: str | None = None
    recompare_sleep_s: float = 0.0
    schedule: str | None = "@daily"
    report_dir: str | None = None
    ignore_columns: list[str] = Field(default_factory=list)
    abs_tol: float = Field(default=0.0, ge=0, description="float/double columns: |a-b| <= abs_tol + rel_tol*|b|")
    rel_tol: float = Field(default=0.0, ge=0)
    ignore_spaces: bool = False
    ignore_case: bool = False


class Policies(_Model):
    hdfs: list[HdfsPolicy] = Field(default_factory=list)
    hbase: list[HBasePolicy] = Field(default_factory=list)
    kafka: list[KafkaPolicy] = Field(default_factory=list)
    verify: list[VerifyPolicy] = Field(default_factory=list)
    retry_delay_s: float = Field(default=60.0, ge=0, description="how long a per-policy DAG's failed task "
                                 "waits before its one retry (Airflow's retry_delay)")


class Ledger(_Model):
    class Retention(_Model):
        """How long `drt ledger prune` (:meth:`dr_toolkit.ledger.Ledger.prune`) keeps each kind of
        row, in days (None: for ever). Whatever the settings, it never deletes: the failover runs
        and the audit of decisions (every audit row of a failover run — its approval or rejection
        among them — and of components failover, direction, reprotect, switchover); per copy pair
        (policy, source, target) its newest run, its latest completed run and every run after it,
        and the manifests those runs name; the newest manifest of each source/target (the next
        run's base); a run still running and its base manifest; the newest checkpoints of each
        group; the newest verification reports of each dataset; the newest gate check; the
        watermarks and leases (one row per name)."""

        runs_days: float | None = Field(default=90.0, gt=0, description="copy runs (replication_runs) and "
                                        "their manifests rows, by start / creation time")
        checkpoints_days: float | None = Field(default=14.0, gt=0, description="Kafka checkpoints, by the time "
                                               "taken, beyond the newest checkpoints_keep_last of each group")
        checkpoints_keep_last: int = Field(default=10, ge=1, description="the newest checkpoints of each group "
                                           "kept at any age (the gate, remap and failover read the newest)")
        verify_days: float | None = Field(default=365.0, gt=0, description="verification reports, by finish "
                                          "time, beyond the newest verify_keep_last of each dataset")
        verify_keep_last: int = Field(default=50, ge=1, description="the newest reports of each dataset (verify "
                                      "policy name, or source when unnamed) kept at any age; the verify gate "
                                      "reads the newest 50 of its name")
        gate_checks_days: float | None = Field(default=90.0, gt=0, description="gate checks (the DR page's RPO "
                                               "history); the newest is always kept")
        audit_days: float | None = Field(default=365.0, gt=0, description="audit rows that are not a decision's "
                                         "(Kafka, HBase, ... outside a failover run); a decision's are kept for ever")
        batch: int = Field(default=5000, ge=1, description="rows deleted per transaction (short locks on a "
                           "large ledger)")

    url: str = "sqlite:///drt-ledger.db"
    conn_id: str | None = Field(default=None, description="connection holding the password, if any")
    retention: Ledger.Retention = Field(default_factory=lambda: Ledger.Retention(),
                                        description="how long `drt ledger prune` keeps rows (defaults stated)")

    @field_validator("url")
    @classmethod
    def _no_password(cls, v: str) -> str:
        p = urlparse(v)
        if p.password:
            raise ValueError("the ledger URL holds a password: put it in an Airflow connection or DRT_LEDGER_URL")
        return v


class Failover(_Model):
    max_lag_s: float = Field(default=300.0, ge=0, description="largest lag still GO before fencing")
    max_verify_age_s: float = 86400.0
    drain_timeout_s: float = 600.0
    reports_dir: str = "reports"
    approvers: list[str] = Field(default_factory=list, description="who may approve or reject a promotion: "
                                 "airflow:<user> (the Airflow user answering the approval), os:<user> (the login "
                                 "user running `drt failover run`), or a plain name matching either; $DRT_ACTOR "
                                 "is never an identity. Empty: anyone who can run the runbook")
    clock_skew_s: float = Field(default=0.0, ge=0, description="bound on the clock skew between the hosts "
                                "running drt (the fencing host vs the checking host); 0 when one host runs both")
    rpo_slo_s: float | None = Field(default=None, gt=0, description="recovery point objective: the largest "
                                    "age (seconds) of the recovery point the DR view and the scheduled DAGs accept "
                                    "before they report a breach; None: no SLO")


class Topology(_Model):
    version: Literal[1] = 1
    clusters: dict[str, Cluster]
    policies: Policies = Field(default_factory=Policies)
    ledger: Ledger = Field(default_factory=Ledger)
    failover: Failover = Field(default_factory=Failover)
    source_file: str | None = Field(default=None, exclude=True)
    #: the cluster whose ZooKeeper holds the fencing state: the configured cold one, in either
    #: direction (set by :meth:`reversed`; None: this topology's cold cluster)
    fence_cluster: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _one_hot_one_cold(self) -> Topology:
        roles = sorted(c.role for c in self.clusters.values())
        if roles != ["cold", "hot"]:
            raise ValueError(f"clusters must be exactly one hot and one cold, found roles {roles}")
        names: set[str] = set()
        for group in (self.policies.hdfs, self.policies.hbase, self.policies.kafka, self.policies.verify):
            for p in group:
                if p.name in names:
                    raise ValueError(f"policy name {p.name!r} is used twice")
                names.add(p.name)
        return self

    @property
    def hot_name(self) -> str:
        return next(n for n, c in self.clusters.items() if c.role == "hot")

    @property
    def cold_name(self) -> str:
        return next(n for n, c in self.clusters.items() if c.role == "cold")

    @property
    def hot(self) -> Cluster:
        return self.clusters[self.hot_name]

    @property
    def cold(self) -> Cluster:
        return self.clusters[self.cold_name]

    @property
    def is_reversed(self) -> bool:
        """True for the topology of the re-protected direction (:meth:`reversed`)."""
        return self.fence_cluster is not None and self.fence_cluster != self.cold_name

    def reversed(self) -> Topology:
        """The same estate protected the other way (re-protect, issue 40): the roles swap — the
        active cluster (this topology's cold) becomes hot, the old hot cold — and so does every
        policy: an HDFS policy's source becomes its target on this cold cluster, its targets that
        source (then its other targets, an archive, as they were); a verify policy's source and
        target swap; Kafka and HBase policies name topics, groups and tables that are the same on
        both sides. The Kafka mirror's naming (``replication_policy``) moves to the new cold
        endpoint with ``source_alias`` = the new hot cluster's name unless the old hot endpoint
        sets its own. The fencing state stays where it was (``fence_cluster``). ``reversed()`` of
        the result is this topology again. A policy with no target on this cold cluster cannot be
        reversed: ConfigError naming it."""
        hot, cold = self.hot_name, self.cold_name
        data = self.model_dump()
        data["clusters"][hot]["role"] = "cold"
        data["clusters"][cold]["role"] = "hot"
        back, fwd = self.clusters[hot].kafka, self.clusters[cold].kafka
        if back is not None and fwd is not None:
            # the old hot endpoint's cold-role fields describe the mirror the other way; unset, the
            # mirror keeps the forward naming and the new hot cluster's name as its alias
            hk = data["clusters"][hot]["kafka"]
            if "replication_policy" not in back.model_fields_set:
                hk["replication_policy"] = fwd.replication_policy
            if "source_alias" not in back.model_fields_set:
                hk["source_alias"] = cold
        for pol in data["policies"]["hdfs"]:
            on_cold = [t for t in pol["targets"] if _uri_cluster(t) == cold]
            if not on_cold:
                raise ConfigError(f"policy {pol['name']!r} has no target on the cold cluster {cold!r}: it cannot "
                                  "be protected the other way", where=self.source_file,
                                  hint=f"add a target hdfs://{cold}/... to it, or move it to its own topology")
            rest = [t for t in pol["targets"] if t != on_cold[0] and _uri_cluster(t) != hot]
            pol["source"], pol["targets"] = on_cold[0], [pol["source"], *rest]
        for pol in data["policies"]["verify"]:
            pol["source"], pol["target"] = pol["target"], pol["source"]
        for pol in data["policies"]["hbase"]:  # each cluster's own rootdir is read on it
            if pol.get("hbase_rootdir_cold"):
                pol["hbase_rootdir"], pol["hbase_rootdir_cold"] = pol["hbase_rootdir_cold"], pol["hbase_rootdir"]
        return Topology.model_validate(data).model_copy(
            update={"source_file": self.source_file, "fence_cluster": self.fence_cluster or cold})

    def resolve(self, path: str) -> Path:
        """A path from the topology: relative ones are relative to the topology file (as
        ``local_root`` and SQLite ledger paths are), not to the current directory."""
        p = Path(path)
        if not p.is_absolute() and self.source_file:
            p = Path(self.source_file).resolve().parent / p
        return p

    def reports_dir(self, override: str | None = None) -> Path:
        """Where failover and verification reports go: ``override`` (a policy's ``report_dir``)
        or ``failover.reports_dir``, resolved against the topology file."""
        return self.resolve(override or self.failover.reports_dir)

    def policy(self, name: str) -> HdfsPolicy | HBasePolicy | KafkaPolicy | VerifyPolicy:
        for group in (self.policies.hdfs, self.policies.hbase, self.policies.kafka, self.policies.verify):
            for p in group:
                if p.name == name:
                    return p
        known = [p.name for g in (self.policies.hdfs, self.policies.hbase, self.policies.kafka,
                                  self.policies.verify) for p in g]
        raise ConfigError(f"no policy named {name!r}", where=self.source_file,
                          hint=f"known policies: {', '.join(known) or 'none'}")


def _uri_cluster(uri: str) -> str | None:
    """The cluster an ``hdfs://<cluster>/…`` URI names (None for any other scheme)."""
    u = urlparse(uri)
    return u.netloc or None if u.scheme == "hdfs" else None


# --- loading with line numbers -------------------------------------------------------------


def _line_index(node: yaml.Node, path: tuple[Any, ...] = (), out: dict[tuple[Any, ...], int] | None = None
                ) -> dict[tuple[Any, ...], int]:
    """Map every key path of a composed YAML document to its 1-based line."""
    import yaml

    out = {} if out is None else out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[(*path, key)] = k.start_mark.line + 1
            _line_index(v, (*path, key), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[(*path, i)] = v.start_mark.line + 1
            _line_index(v, (*path, i), out)
    return out


def _find_secrets(data: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(k, str) and _SECRET_KEYS.search(k) and v not in (None, ""):
                return (*path, k)
            hit = _find_secrets(v, (*path, k))
            if hit:
                return hit
    elif isinstance(data, list):
        for i, v in enumerate(data):
            hit = _find_secrets(v, (*path, i))
            if hit:
                return hit
    return None


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def parse_topology(text: str, source: str = "<string>") -> Topology:
    """Parse and validate topology text; raise ConfigError naming file, line and field."""
    import yaml  # only when a topology is read: keeps `drt --help` and a bare `drt distcp` fast

    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", where=f"{source}{line}",
                          hint="fix the syntax and run `drt config validate`") from None
    if not isinstance(data, dict) or node is None:
        raise ConfigError("the topology must be a mapping with a `clusters` section", where=f"{source}:1")
    lines = _line_index(node)
    secret = _find_secrets(data)
    if secret:
        raise ConfigError(f"field {_dotted(secret)} holds a secret value",
                          where=f"{source}:{lines.get(secret, 1)}",
                          hint="secrets belong in an Airflow connection or the environment; name it with conn_id")
    try:
        topo = Topology.model_validate({**data, "source_file": source})
    except ValidationError as exc:
        # A mistyped field shows up as "unknown field" plus "missing field": name the typo first.
        # Every problem is listed (one line: the first with its hint, then "also: ..."), and kept
        # on the error (`problems`) for `drt config validate --json`.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        problems: list[dict[str, Any]] = []
        hint: str | None = None
        for i, err in enumerate(errors):
            loc = tuple(err["loc"])
            # pydantic appends the model name for unions; keep the longest prefix we know a line for.
            known = loc
            while known and known not in lines:
                known = known[:-1]
            line_no = lines.get(known, 1)
            if err["type"] == "extra_forbidden":
                what = f"unknown field {_dotted(loc)}"
                h: str | None = "check the spelling; see examples/embedded.yaml for every field"
            elif err["type"] == "missing":
                what = f"missing field {_dotted(loc)}"
                h = "add it; see examples/embedded.yaml"
            else:
                what = f"field {_dotted(loc) if loc else '(top level)'}: {err['msg']}"
                h = None
            if i == 0:
                hint = h
            problems.append({"file": source, "line": line_no, "field": _dotted(loc) if loc else None,
                             "problem": what, "hint": h})
        first = problems[0]
        what = first["problem"]
        if len(problems) > 1:
            what += f" ({len(problems)} problems; also: " + "; ".join(
                f"line {p['line']}: {p['problem']}" for p in problems[1:]) + ")"
        error = ConfigError(what, where=f"{source}:{first['line']}", hint=hint)
        error.problems = problems
        raise error from None
    return topo


def load_topology(path: str | os.PathLike[str] | None = None) -> Topology:
    """Load the topology from ``path``, ``$DRT_CONFIG`` or ``./drt.yaml``."""
    p = Path(path or os.environ.get("DRT_CONFIG") or DEFAULT_CONFIG)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError("topology file not found", where=str(p),
                          hint="pass --config PATH, set DRT_CONFIG, or copy examples/embedded.yaml to drt.yaml"
                          ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the topology file is not UTF-8 text (byte {exc.start})", where=str(p),
                          hint="pass the YAML topology file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the topology file: {exc.strerror or exc}", where=str(p)) from None
    return parse_topology(text, str(p))


def validate_cluster_key(key: str) -> tuple[list[str], int, str]:
    """Split an HBase cluster key ``zk1,zk2:2181:/hbase`` into hosts, port and znode parent."""
    if not _CLUSTER_KEY.match(key):
        raise ConfigError(f"malformed cluster key {key!r}",
                          hint="expected host1,host2:2181:/hbase (quorum hosts, client port, znode parent)")
    host_list, port, parent = key.split(":", 2)
    return host_list.split(","), int(port), parent
