"""What Spark's Hadoop client needs to read the toolkit's URIs — computed, never guessed.

- ``hdfs://<cluster>/p`` with ``hdfs.rpc_addresses`` → ``hdfs://<nameservice>/p`` through the
  NameNodes' RPC ports with HA (``dfs.nameservices``, ``dfs.ha.namenodes.<ns>``,
  ``dfs.namenode.rpc-address.<ns>.<nn>``, ``ConfiguredFailoverProxyProvider``). This is
  the route for real clusters; a Kerberos cluster is listed in
  ``spark.kerberos.access.hadoopFileSystems`` so YARN/Kubernetes fetch its delegation tokens.
- ``hdfs://<cluster>/p`` without ``rpc_addresses``, and ``webhdfs://host:port/p`` →
  ``webhdfs://…`` through Hadoop's ``WebHdfsFileSystem``, HA through
  ``dfs.namenode.http-address.<ns>.<nn>``. pyspark's shaded Hadoop client has the JAX-RS
  API but no runtime and fails on every JSON answer; :func:`build_jaxrs_shim` compiles a
  one-class runtime (``dr_toolkit/spark/jaxrs/MediaTypeRuntimeDelegate.java``, found via
  ``META-INF/services``) against Spark's own jars, and the conf puts it on the driver's and
  executors' classpath. ``make setup`` builds it (``scripts/build-hadoop-jaxrs-shim.sh``); at
  run time it is built on first use when ``javac`` is there. Without it ``webhdfs`` is
  refused up front (ConfigError naming ``hdfs.rpc_addresses`` as the alternative).
- ``s3://b/k`` → ``s3a://b/k``: per-bucket endpoint / region / path-style settings. Spark
  needs ``hadoop-aws`` on its classpath (not bundled with pyspark). **Credentials never go
  into the Spark conf** (which the UI's Environment page and event logs show): when the
  bucket's ``conn_id`` names a connection, the bucket uses S3A's environment-variable
  credentials provider and :func:`spark_secret_env` gives the variables to put into the
  driver's and executors' environment; without a ``conn_id`` the default AWS chain applies
  (instance profile, web identity, ``~/.aws``).
- ``file:///p`` → itself (every executor must see the path).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from dr_toolkit.errors import EXIT_OK, EXIT_USAGE, ConfigError
from dr_toolkit.fs.uri import Location, parse_uri
from dr_toolkit.javac import build_jar, cache_dir

if TYPE_CHECKING:
    from dr_toolkit.access import Access
    from dr_toolkit.kerberos import KerberosConfig
    from dr_toolkit.topology import Topology

SHIM_CLASS = "org.drtoolkit.hadoop.MediaTypeRuntimeDelegate"
SHIM_SERVICE = "META-INF/services/org.apache.hadoop.shaded.javax.ws.rs.ext.RuntimeDelegate"
SHIM_SOURCE = Path(__file__).parent / "jaxrs" / "MediaTypeRuntimeDelegate.java"
FAILOVER_PROVIDER = "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"
S3A_ENV_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
#: conf keys whose values are lists: merged, never replaced (see merge_spark_conf)
LIST_KEYS = {"spark.jars": ",", "spark.driver.extraClassPath": os.pathsep,
             "spark.executor.extraClassPath": os.pathsep}
SPARK_SCHEMES = ("file", "hdfs", "webhdfs", "swebhdfs", "s3", "s3a")


# -- the JAX-RS shim ----------------------------------------------------------------------------
def spark_jars_dir() -> Path | None:
    """Spark's jars: ``$SPARK_HOME/jars``, else the installed pyspark's."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def _shim_name(jars: Path) -> str:
    runtime = sorted(p.name for p in jars.glob("hadoop-client-runtime-*.jar"))
    h = hashlib.sha256(SHIM_SOURCE.read_bytes() + "|".join(runtime).encode()).hexdigest()[:12]
    return f"drt-hadoop-jaxrs-shim-{h}.jar"


def jaxrs_shim_jar(*, build: bool = True) -> Path | None:
    """The shim jar for this Spark (``DRT_JAXRS_SHIM_JAR`` overrides), built when missing and
    ``build`` and a JDK are there; None when it cannot be had."""
    given = os.environ.get("DRT_JAXRS_SHIM_JAR")
    if given:
        if not Path(given).is_file():
            raise ConfigError(f"DRT_JAXRS_SHIM_JAR names a missing file: {given}",
                              hint="run `make setup` or unset DRT_JAXRS_SHIM_JAR")
        return Path(given)
    jars = spark_jars_dir()
    if jars is None:
        return None
    jar = cache_dir() / _shim_name(jars)
    if jar.is_file():
        return jar
    if not build:
        return None
    try:
        return build_jaxrs_shim(jar, jars)
    except ConfigError:
        return None


def build_jaxrs_shim(dest: Path | None = None, jars: Path | None = None) -> Path:
    """Compile the shim against Spark's Hadoop jars and package it (atomically) at ``dest``."""
    jars = jars or spark_jars_dir()
    if jars is None:
        raise ConfigError("cannot find Spark's jars to build the WebHDFS JAX-RS shim against",
                          hint="install pyspark or set SPARK_HOME")
    runtime = sorted(jars.glob("hadoop-client-runtime-*.jar"))
    if not runtime:
        raise ConfigError(f"no hadoop-client-runtime jar in {jars}", hint="this Spark has no Hadoop client")
    dest = dest or cache_dir() / _shim_name(jars)
    return build_jar(dest, SHIM_SOURCE, str(runtime[-1]), what="the WebHDFS JAX-RS shim",
                     hint=f"compile {SHIM_SOURCE} against {runtime[-1].name} by hand, or read hdfs:// through "
                          "hdfs.rpc_addresses", entries={SHIM_SERVICE: SHIM_CLASS + "\n"})


# -- URIs ---------------------------------------------------------------------------------------
def _ns(loc: Location) -> str:
    cfg = loc.cluster_config
    if cfg is not None and cfg.hdfs is not None and cfg.hdfs.nameservice:
        return cfg.hdfs.nameservice
    return re.sub(r"[^A-Za-z0-9_\-]", "-", loc.cluster or "ns")


def _rpc(loc: Location) -> list[str]:
    cfg = loc.cluster_config
    return list(cfg.hdfs.rpc_addresses) if cfg is not None and cfg.hdfs is not None else []


def _webhdfs_refused(uri: str, why: str) -> ConfigError:
    return ConfigError(f"Spark cannot read {uri} through WebHDFS: {why}",
                       hint="read hdfs://<cluster>/path through the NameNodes' RPC ports instead: set "
                            "clusters.<name>.hdfs.rpc_addresses (host:8020, one per namenode) in the topology")


def check_spark_uri(uri: str, topology: Topology | None = None) -> Location:
    """Resolve ``uri`` and check Spark can read it here; ConfigError (exit 2) otherwise."""
    scheme = urlparse(uri).scheme.lower()
    if scheme and scheme not in SPARK_SCHEMES:
        raise ConfigError(f"Spark cannot read {scheme}:// URIs: {uri}",
                          hint="use hdfs://<cluster>/path, webhdfs://host:port/path, s3://bucket/prefix or "
                               "file:///abs/path")
    loc = parse_uri(uri if scheme else "file://" + os.path.abspath(uri), topology)
    spark_path(loc)  # raises when the route is unavailable
    return loc


def spark_path(loc: Location) -> str:
    """The Hadoop URI Spark reads for ``loc`` (use instead of ``Location.spark_path()``)."""
    if loc.kind == "local":
        return "file://" + loc.path
    if loc.kind == "s3":
        _check_s3a(loc.uri, loc.cluster_config.spark.conf if loc.cluster_config is not None else None)
        return f"s3a://{loc.bucket}/{loc.path}"
    if loc.cluster is not None and _rpc(loc):
        return f"hdfs://{_ns(loc)}{loc.path}"
    if jaxrs_shim_jar() is None:
        raise _webhdfs_refused(loc.uri, "Hadoop's WebHDFS client in pyspark lacks a JAX-RS runtime and the "
                                        "dr-toolkit shim could not be built (no JDK/javac, or no Spark jars)")
    nn = urlparse(loc.namenodes[0])
    scheme = "swebhdfs" if nn.scheme == "https" else "webhdfs"
    if loc.cluster is not None:
        return f"{scheme}://{_ns(loc)}{loc.path}"
    return f"{scheme}://{nn.netloc}{loc.path}"


def _has_hadoop_aws(conf: Mapping[str, str] | None = None) -> bool:
    jars = spark_jars_dir()
    if jars is not None and any(jars.glob("hadoop-aws-*.jar")):
        return True
    conf = conf or {}
    return any("hadoop-aws" in conf.get(k, "") for k in ("spark.jars", "spark.jars.packages"))


def _check_s3a(uri: str, conf: Mapping[str, str] | None = None) -> None:
    if os.environ.get("DRT_SPARK_S3A") == "1" or _has_hadoop_aws(conf):
        return
    raise ConfigError(f"Spark cannot read {uri}: hadoop-aws (S3A) is not on Spark's classpath",
                      hint="add spark.jars.packages=org.apache.hadoop:hadoop-aws:<Spark's Hadoop version> to "
                           "clusters.<name>.spark.conf (or run on a cluster whose Spark has it and set "
                           "DRT_SPARK_S3A=1)")


def _locations(topology: Topology | None, uris: Sequence[str | Location]) -> list[Location]:
    return [u if isinstance(u, Location) else check_spark_uri(u, topology) for u in uris]


# -- conf ---------------------------------------------------------------------------------------
def spark_hadoop_conf(topology: Topology | None, uris: Sequence[str | Location]) -> dict[str, str]:
    """Spark conf keys needed to read ``uris``; never a secret (safe for the UI and logs).

    Merge it under the user's conf with :func:`merge_spark_conf` (user keys win, list keys
    such as ``spark.jars`` are joined)."""
    conf: dict[str, str] = {}
    nameservices: list[str] = []
    kerberized: list[str] = []
    shim = False
    for loc in _locations(topology, uris):
        if loc.kind == "s3":
            _s3a_conf(loc, conf)
            continue
        if loc.kind != "webhdfs":
            continue
        path = spark_path(loc)
        if loc.cluster is None:
            shim = True
            continue
        ns = _ns(loc)
        if ns in nameservices:
            continue
        nameservices.append(ns)
        rpc = _rpc(loc)
        urls = list(loc.namenodes)
        ids = [f"nn{i + 1}" for i in range(max(len(rpc), len(urls)))]
        conf[f"spark.hadoop.dfs.ha.namenodes.{ns}"] = ",".join(ids)
        conf[f"spark.hadoop.dfs.client.failover.proxy.provider.{ns}"] = FAILOVER_PROVIDER
        for i, nn in enumerate(ids):
            if i < len(rpc):
                conf[f"spark.hadoop.dfs.namenode.rpc-address.{ns}.{nn}"] = rpc[i]
            if i < len(urls):
                u = urlparse(urls[i])
                key = "https-address" if u.scheme == "https" else "http-address"
                conf[f"spark.hadoop.dfs.namenode.{key}.{ns}.{nn}"] = u.netloc
        if path.startswith(("webhdfs:", "swebhdfs:")):
            shim = True
        h = loc.cluster_config.hdfs if loc.cluster_config is not None else None
        if h is not None and h.kerberos:  # YARN/Kubernetes fetch delegation tokens for these up front
            kerberized.append(f"{path.split('://')[0]}://{ns}")
    if nameservices:
        conf["spark.hadoop.dfs.nameservices"] = ",".join(nameservices)
    if kerberized:
        conf["spark.kerberos.access.hadoopFileSystems"] = ",".join(kerberized)
    if shim:
        jar = jaxrs_shim_jar()
        if jar is None:  # spark_path already refused; kept for type narrowing
            raise _webhdfs_refused("webhdfs", "the JAX-RS shim is missing")
        conf["spark.jars"] = str(jar)
        conf["spark.driver.extraClassPath"] = str(jar)
        conf["spark.executor.extraClassPath"] = str(jar)
    return conf


def spark_kerberos(topology: Topology | None, uris: Sequence[str | Location], access: Access | None
                   ) -> KerberosConfig | None:
    """Whom Spark's own Hadoop client must log in as to read ``uris``: the principal and keytab (or
    ticket cache) of their kerberized HDFS sides — a topology cluster with ``hdfs.kerberos: true``
    (its endpoint connection, else the environment), a bare ``webhdfs://`` URI when
    ``DRT_KERBEROS_PRINCIPAL`` is set (as :func:`dr_toolkit.kerberos.kerberos_wanted`) — never the
    topology. None when no side is kerberized. One JVM logs in as one principal: two sides naming
    different ones are a ConfigError (exit 2)."""
    from dr_toolkit.kerberos import ENV_PRINCIPAL, KerberosConfig

    found: dict[tuple[str | None, ...], tuple[KerberosConfig, str]] = {}
    for loc in _locations(topology, uris):
        if loc.kind != "webhdfs":
            continue
        cfg = loc.cluster_config
        if loc.cluster is None or cfg is None:
            if not os.environ.get(ENV_PRINCIPAL):
                continue
            kc, where = KerberosConfig.from_env(), loc.uri
        else:
            if cfg.hdfs is None or not cfg.hdfs.kerberos:
                continue
            creds = access.cluster_endpoint(loc.cluster, cfg, "hdfs") if access is not None else None
            kc, where = KerberosConfig.from_credentials(creds), f"clusters.{loc.cluster}.hdfs"
        found.setdefault((kc.principal, kc.keytab, kc.ccache), (kc, where))
    if len(found) > 1:
        (a, wa), (b, wb) = list(found.values())[:2]
        raise ConfigError(f"one Spark job logs in as one Kerberos principal: {wa} is read as {a.principal}, "
                          f"{wb} as {b.principal}",
                          hint="give both sides' connections (or the environment) the same principal and keytab")
    return next(iter(found.values()))[0] if found else None


def _s3a_conf(loc: Location, conf: dict[str, str]) -> None:
    s3 = loc.cluster_config.s3 if loc.cluster_config is not None else None
    prefix = f"spark.hadoop.fs.s3a.bucket.{loc.bucket}."
    conf.setdefault("spark.hadoop.fs.s3a.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")
    if s3 is None:
        return
    if s3.endpoint_url:
        u = urlparse(s3.endpoint_url)
        conf[prefix + "endpoint"] = s3.endpoint_url
        conf[prefix + "path.style.access"] = "true"
        conf[prefix + "connection.ssl.enabled"] = "true" if u.scheme == "https" else "false"
    if s3.region:
        conf[prefix + "endpoint.region"] = s3.region
    if s3.sse:
        conf[prefix + "encryption.algorithm"] = "SSE-KMS" if s3.sse == "aws:kms" else "SSE-S3"
    if s3.conn_id:
        conf[prefix + "aws.credentials.provider"] = S3A_ENV_PROVIDER


def spark_secret_env(topology: Topology | None, uris: Sequence[str | Location], access: Access) -> dict[str, str]:
    """Environment variables with the S3 credentials of ``uris`` (for S3A's env provider).

    Put them into the driver's environment before its JVM starts and into the executors'
    environment; never into Spark conf. Empty when nothing needs credentials. One job can
    carry one AWS credential set: buckets with different connections are a ConfigError."""
    env: dict[str, str] = {}
    chosen: str | None = None
    for loc in _locations(topology, uris):
        cfg = loc.cluster_config if loc.kind == "s3" and loc.cluster is not None else None
        s3 = cfg.s3 if cfg is not None else None
        if cfg is None or loc.cluster is None or s3 is None or not s3.conn_id:
            continue
        if chosen is not None and chosen != s3.conn_id:
            raise ConfigError(f"one Spark job cannot read S3 with two connections ({chosen!r}, {s3.conn_id!r})",
                              hint="verify one side at a time, or give both buckets the same connection or "
                                   "an instance profile")
        chosen = s3.conn_id
        creds = access.cluster_endpoint(loc.cluster, cfg, "s3")
        if creds is None:
            continue
        if not creds.login or not creds.password:
            raise ConfigError(f"connection {s3.conn_id!r} has no access key id / secret key",
                              hint="set login (key id) and password (secret key) on the connection")
        env["AWS_ACCESS_KEY_ID"] = creds.login
        env["AWS_SECRET_ACCESS_KEY"] = creds.password
        token = creds.extra.get("aws_session_token") or creds.extra.get("session_token")
        if token:
            env["AWS_SESSION_TOKEN"] = str(token)
        if s3.region:
            env["AWS_REGION"] = s3.region
    return env


def merge_spark_conf(user: Mapping[str, str], ours: Mapping[str, str]) -> dict[str, str]:
    """``ours`` under ``user``: the user's keys win, list keys (jars, class paths) are joined."""
    out = dict(ours)
    for k, v in user.items():
        sep = LIST_KEYS.get(k)
        if sep and k in out and v:
            parts = [p for p in v.split(sep) if p]
            out[k] = sep.join(parts + [p for p in out[k].split(sep) if p and p not in parts])
        else:
            out[k] = v
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dr_toolkit.spark.hadoop build-shim``: build the shim (``make setup``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["build-shim"]:
        print("usage: python -m dr_toolkit.spark.hadoop build-shim", file=sys.stderr)
        return EXIT_USAGE
    try:
        jars = spark_jars_dir()
        if jars is None:
            raise ConfigError("cannot find Spark's jars", hint="install pyspark or set SPARK_HOME")
        dest = cache_dir() / _shim_name(jars)
        jar = dest if dest.is_file() else build_jaxrs_shim(dest, jars)
    except ConfigError as exc:
        print(f"WebHDFS JAX-RS shim not built: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"WebHDFS JAX-RS shim: {jar}")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
