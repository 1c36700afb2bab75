"""The SparkSession factory: one place that decides how the toolkit talks to Spark.

Rules (issue 15):

- **The submitter's settings win.** Under ``spark-submit`` (the driver JVM exists before
  Python runs) the session is built from the configuration spark-submit set — master, app
  name, shuffle partitions, UI — and the library only fills in keys that are unset. Outside
  spark-submit the master is, in order: the ``master`` argument (``--spark-master``), the
  topology's ``spark.master`` (passed by the caller), ``$DRT_SPARK_MASTER``, ``local[2]``.
  Conf given by the caller / the topology's ``spark.conf`` wins over the library's defaults.
- **The library reaches the executors.** On a non-local master, ``dr_toolkit`` is zipped
  once (:func:`library_zip`) and shipped with ``spark.submit.pyFiles``, and the third-party
  packages its tasks import (pydantic, google-crc32c, requests, hdfs, boto3 and what they need)
  as an archive with ``spark.archives`` (:mod:`dr_toolkit.spark.executor_env`): a worker's Python
  needs none of the project's packages. ``ship_library: false`` ships neither.
- **YARN** (``yarn``): the client configuration comes from ``HADOOP_CONF_DIR``/``YARN_CONF_DIR``
  (as for spark-submit; ``clusters.<name>.spark.hadoop_conf_dir`` or a Spark connection's extra
  set it); the library and its packages travel as one packed slim virtual environment
  (:func:`~dr_toolkit.spark.executor_env.venv_archive`, ``spark.archives …#drtenv``) whose Python
  runs the executors' tasks (``spark.pyspark.python=./drtenv/bin/python``): nothing is installed
  on the nodes. A missing configuration is a ConfigError (exit 2), a ResourceManager that does not
  answer an UnreachableError (exit 3), each one line, before Spark starts (Spark itself would
  retry the ResourceManager for 15 minutes).
- **Credentials never go into the Spark conf.** Credentials the copy engine needs travel
  inside the pickled task (never shown in the UI). S3A keys for Spark's own Hadoop client
  (``spark_secret_env`` of :mod:`dr_toolkit.spark.hadoop`) go into the driver's environment
  and ``spark.executorEnv.*``, and ``spark.redaction.regex`` is widened so the UI's
  environment page and the event log show them redacted.
- **Kerberos** (issue 41): when the session reads a kerberized HDFS (a cluster with
  ``hdfs.kerberos: true``, or a bare ``webhdfs://`` URI with ``DRT_KERBEROS_PRINCIPAL`` set) and this
  process starts the driver JVM, Spark's own Hadoop client logs in as the principal of that side's
  connection or of the environment (:func:`dr_toolkit.spark.hadoop.spark_kerberos`; never the
  topology): ``spark.kerberos.principal``/``keytab``, a Hadoop configuration directory saying
  ``hadoop.security.authentication=kerberos`` and the realm's krb5.conf for the JVM
  (:func:`kerberos_launch`), each only where the caller's conf, spark-defaults.conf and the
  environment say nothing. A ticket is obtained first (a bad keytab is one KerberosError, exit 3);
  with only a kinit'ed cache the JVM reads that cache (it cannot renew it: the run must end first).
- **Start-up failures are one error**: :class:`UnreachableError` (exit 3) naming the master
  and Spark's first line, never a JVM trace; a master URL Spark cannot parse is a
  ConfigError (exit 2).
- **The copy engine starts no SQL session**: :func:`get_context` gives it a bare SparkContext
  (Spark SQL's catalog and function registry cost seconds of driver CPU it never uses), its
  JVMs with the client JIT and the serial collector unless the cluster's conf says otherwise;
  :func:`release_context` stops it, and the JVM it launched, after the copy.
- Local mode and a standalone master on 127.0.0.1 bind the driver (and its UI) to
  127.0.0.1. ANSI mode stays on: code that sums hashes uses ``bit_xor`` or a modular sum.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from dr_toolkit.errors import ConfigError, UnreachableError
from dr_toolkit.secrets import redact
from dr_toolkit.spark.executor_env import ARCHIVE_ALIAS, VENV_PYTHON, archive, venv_archive
from dr_toolkit.spark.hadoop import merge_spark_conf, spark_hadoop_conf, spark_kerberos, spark_secret_env

_T = TypeVar("_T")

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from dr_toolkit.access import Access
    from dr_toolkit.kerberos import KerberosConfig
    from dr_toolkit.topology import SparkEndpoint, Topology

MASTER_PREFIXES = ("local", "spark://", "yarn", "k8s://", "mesos://")
REDACTION_REGEX = r"(?i)secret|password|token|access[._]?key|credential|session[._]?key"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_master(master: str) -> str:
    """``master`` if Spark can parse it, else ConfigError (exit 2)."""
    m = master.strip()
    local_ok = m == "local" or (m.startswith(("local[", "local-cluster[")) and m.endswith("]"))
    if (m.startswith("local") and not local_ok) or not m.startswith(MASTER_PREFIXES) or m in ("spark://", "k8s://"):
        raise ConfigError(f"{m!r} is not a Spark master URL",
                          hint="use local[N], spark://host:7077, yarn or k8s://https://host:port")
    return m


def _is_yarn(master: str) -> bool:
    return master.strip() == "yarn" or master.strip().startswith("yarn-")


def _is_loopback(master: str) -> bool:
    if master.startswith("local"):
        return True
    hosts = [urlparse("x://" + h).hostname for h in master.split("://", 1)[-1].split(",")]
    return bool(hosts) and all(h in _LOOPBACK for h in hosts)


def library_zip() -> str:
    """A zip of the ``dr_toolkit`` package (built once per content, cached in the temp dir):
    what ``spark.submit.pyFiles`` ships to executors."""
    pkg = Path(__file__).resolve().parent.parent
    files = sorted(p for p in pkg.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix not in (".pyc", ".pyo"))
    h = hashlib.sha256()
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(pkg)}:{st.st_size}:{st.st_mtime_ns}".encode())
    out = Path(tempfile.gettempdir()) / f"dr_toolkit-{h.hexdigest()[:16]}.zip"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, str(Path("dr_toolkit") / p.relative_to(pkg)))
        os.replace(tmp, out)
    return str(out)


def _submitted_conf() -> dict[str, str]:
    """The configuration of a driver JVM spark-submit started (empty when Python came first)."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's gateway
    return dict(SparkConf(loadDefaults=True).getAll())


def _hadoop_conf(topology: Topology | None, uris: Sequence[str], access: Access | None
                 ) -> tuple[dict[str, str], dict[str, str]]:
    """Spark conf for the Hadoop client (HDFS HA, S3A, webhdfs) and the secret environment."""
    if not uris:
        return {}, {}
    if access is None:  # a programming error: the caller reads endpoints without the credentials value
        raise TypeError("get_session(uris=...) needs access= (the credentials of the uris' endpoints)")
    return dict(spark_hadoop_conf(topology, list(uris))), dict(spark_secret_env(topology, list(uris), access))


def _merge(user: Mapping[str, str], ours: Mapping[str, str]) -> dict[str, str]:
    return dict(merge_spark_conf(user, ours))


def session_conf(master: str, app_name: str, conf: Mapping[str, str] | None, submitted: Mapping[str, str], *,
                 hadoop: Mapping[str, str] | None = None, secret_env: Mapping[str, str] | None = None,
                 ship_library: bool = True, defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """The keys to set on the builder: ours (and the caller's ``defaults``) under the caller's
    conf, and nothing spark-submit set."""
    local = master.startswith("local")
    loopback = _is_loopback(master)
    ours: dict[str, str] = {
        "spark.app.name": app_name,
        "spark.sql.shuffle.partitions": "8" if local else "64",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.redaction.regex": REDACTION_REGEX,
        **(defaults or {}),
    }
    if local:
        ours["spark.ui.enabled"] = "false"
    if loopback:
        ours.update({"spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"})
    if _is_yarn(master) and ship_library:
        # one packed virtual environment: dr_toolkit, its packages and the Python that runs them
        # (the zip as on other masters too: spark-submit's own pyFiles and ours are merged below)
        ours["spark.submit.pyFiles"] = library_zip()
        ours["spark.archives"] = f"{venv_archive()}#{ARCHIVE_ALIAS}"
        ours["spark.pyspark.python"] = VENV_PYTHON
    elif not local and ship_library:
        ours["spark.submit.pyFiles"] = library_zip()
        # the packages the tasks import, unpacked beside each executor (see executor_env)
        ours["spark.archives"] = f"{archive()}#{ARCHIVE_ALIAS}"
        ours["spark.executorEnv.PYTHONPATH"] = ARCHIVE_ALIAS
    if loopback and not local:
        ours["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON") or sys.executable
    merged = _merge(dict(conf or {}), {**ours, **(hadoop or {})})
    for key, sep in (("spark.archives", ","), ("spark.executorEnv.PYTHONPATH", ":")):
        if key in ours and (conf or {}).get(key) and conf[key] != ours[key]:  # type: ignore[index]
            merged[key] = f"{conf[key]}{sep}{ours[key]}"  # type: ignore[index]  # the caller's and ours
    for k, v in (secret_env or {}).items():
        merged[f"spark.executorEnv.{k}"] = v  # redacted in the UI by spark.redaction.regex
    if "spark.redaction.regex" in merged and merged["spark.redaction.regex"] != REDACTION_REGEX and secret_env:
        merged["spark.redaction.regex"] = f"{merged['spark.redaction.regex']}|{REDACTION_REGEX}"
    if "spark.submit.pyFiles" in submitted and "spark.submit.pyFiles" in merged:
        merged["spark.submit.pyFiles"] = ",".join(
            dict.fromkeys([*submitted["spark.submit.pyFiles"].split(","), *merged["spark.submit.pyFiles"].split(",")]))
        return {k: v for k, v in merged.items() if k not in submitted or k == "spark.submit.pyFiles"}
    return {k: v for k, v in merged.items() if k not in submitted}


def get_session(master: str | None = None, app_name: str = "dr-toolkit",
                conf: Mapping[str, str] | None = None, *, topology: Topology | None = None,
                uris: Sequence[str] = (), access: Access | None = None, ship_library: bool | None = None,
                endpoint: SparkEndpoint | None = None, secret_env: Mapping[str, str] | None = None
                ) -> SparkSession:
    """Return the active SparkSession, or build one (see the module doc for who wins).

    ``endpoint`` is the cluster's ``spark`` section when there is no topology (the copy
    engine passes its source cluster's); ``secret_env`` adds environment variables executors
    need (shown redacted in the UI), on top of the Hadoop client's."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    chosen, keys, submitted, env = _prepare(master, app_name, conf, topology=topology, uris=uris, access=access,
                                            ship_library=ship_library, endpoint=endpoint, secret_env=secret_env)
    builder: Any = SparkSession.builder
    if "spark.master" not in submitted:
        builder = builder.master(chosen)
    for k, v in keys.items():
        builder = builder.config(k, v)
    session = _started(chosen, builder.getOrCreate, python=keys.get("spark.pyspark.python"), env=env)
    session.sparkContext.setLogLevel("WARN")
    out: SparkSession = session
    return out


# The copy engine's JVMs only schedule tasks and pass file lists and results: the client JIT
# and the serial collector start them seconds sooner on small machines (a 2-core, 2-worker
# standalone cluster: ~23 s to the first task with the JVM defaults, ~15 s with these —
# `git show c7ce6e0:benchmarks/README.md`, "Spark copy engine start-up"). clusters.<name>.spark.conf
# replaces them, key by key.
QUICK_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
CONTEXT_DEFAULTS = {"spark.driver.extraJavaOptions": QUICK_START_JVM,
                    "spark.executor.extraJavaOptions": QUICK_START_JVM}


def _started(master: str, start: Callable[[], _T], *, python: str | None = None,
             env: Mapping[str, str] | None = None) -> _T:
    """``start()`` (a session's or a context's getOrCreate); any failure is one line naming the
    master (UnreachableError, exit 3). On YARN ``python`` (the packed environment's interpreter) is
    what the executors run: pyspark takes it from ``$PYSPARK_PYTHON`` when the context starts, so it
    is set for that moment only (a local session started later in this process keeps its own).
    ``env`` (the driver JVM's Kerberos login: :func:`kerberos_launch`) is set for that moment too."""
    swap = dict(env or {}) if not os.environ.get("PYSPARK_GATEWAY_PORT") else {}
    if _is_yarn(master) and python is not None and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        swap["PYSPARK_PYTHON"] = str(python)
    before = {k: os.environ.get(k) for k in swap}
    os.environ.update(swap)
    try:
        return start()
    except Exception as exc:  # noqa: BLE001 - Py4JJavaError, PySparkRuntimeError (no Java), …
        raise UnreachableError(f"Spark did not start on master {redact(master)}: {_first(exc)}",
                               hint="check that the master is running and reachable, and JAVA_HOME") from None
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def get_context(master: str | None = None, app_name: str = "dr-toolkit", *,
                endpoint: SparkEndpoint | None = None) -> SparkContext:
    """The active SparkContext (a running session's, spark-submit's), or a new one without a
    SQL session: what the copy engine needs, started without Spark SQL's catalog and function
    registry (seconds of driver CPU) and with :data:`CONTEXT_DEFAULTS` under the caller's conf.
    Master, conf, library shipping and errors as :func:`get_session`."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active.sparkContext
    running = SparkContext._active_spark_context
    if running is not None:
        return running
    chosen, keys, submitted, env = _prepare(master, app_name, None, endpoint=endpoint, defaults=CONTEXT_DEFAULTS)
    spark_conf = SparkConf()
    if "spark.master" not in submitted:
        spark_conf.setMaster(chosen)
    spark_conf.setAll(list(keys.items()))
    sc = _started(chosen, lambda: SparkContext.getOrCreate(spark_conf), python=keys.get("spark.pyspark.python"),
                  env=env)
    sc.setLogLevel("WARN")
    return sc


def release_context(sc: SparkContext, *, jvm: bool) -> None:
    """Stop a context :func:`get_context` started and, with ``jvm``, the driver JVM this process
    launched for it: the quick-start options are that JVM's for its life (and the conf it was
    launched with stays in its system properties), so a session started later in the same
    process (the runbook's final verify after its final copy) gets a JVM of its own."""
    from pyspark import SparkContext

    sc.stop()
    gateway = SparkContext._gateway
    if not jvm or gateway is None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return  # not ours (spark-submit's, or one that existed before the copy)
    with SparkContext._lock:
        SparkContext._gateway = None
        SparkContext._jvm = None
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - already gone
        pass
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        import subprocess

        try:
            proc.stdin.close()  # the gateway JVM exits when its stdin closes
            proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()


def _prepare(master: str | None, app_name: str, conf: Mapping[str, str] | None, *,
             topology: Topology | None = None, uris: Sequence[str] = (), access: Access | None = None,
             ship_library: bool | None = None, endpoint: SparkEndpoint | None = None,
             secret_env: Mapping[str, str] | None = None, defaults: Mapping[str, str] | None = None
             ) -> tuple[str, dict[str, str], dict[str, str], dict[str, str]]:
    """The master, the keys to set, spark-submit's conf and the environment to start the driver JVM
    with (its Kerberos login, see :func:`kerberos_launch`); checks Java and the master and sets the
    driver's environment (loopback binding, Python, secrets) before the JVM starts."""
    try:
        submitted = _submitted_conf()
    except Exception as exc:  # noqa: BLE001 - the gateway spark-submit started is gone
        raise UnreachableError(f"cannot reach the Spark driver that spark-submit started: {_first(exc)}") from None
    cluster = topology.hot.spark if topology is not None else endpoint
    if cluster is not None and cluster.conn_id and access is not None:
        cluster = spark_from_connection(cluster, access, f"clusters.{topology.hot_name if topology else '?'}.spark.conn_id")
    chosen = check_master(submitted.get("spark.master") or master or os.environ.get("DRT_SPARK_MASTER")
                          or (cluster.master if cluster else None) or "local[2]")
    user_conf = {**(cluster.conf if cluster else {}), **(conf or {})}
    hadoop, hadoop_env = _hadoop_conf(topology, uris, access)
    secret_env = {**hadoop_env, **(secret_env or {})}
    ship = ship_library if ship_library is not None else (cluster.ship_library if cluster else True)
    keys = session_conf(chosen, app_name, user_conf, submitted, hadoop=hadoop, secret_env=secret_env,
                        ship_library=ship, defaults=defaults)
    if "spark.master" not in submitted:
        keys = _under_defaults_file(keys, user_conf)
    if "spark.master" not in submitted:
        check_java()
        check_master_reachable(chosen)
        if _is_yarn(chosen):
            check_yarn(keys, getattr(cluster, "hadoop_conf_dir", None))
    launch_env: dict[str, str] = {}
    kc = spark_kerberos(topology, uris, access) if uris and "spark.master" not in submitted else None
    if kc is not None:
        given = {**spark_defaults_file(), **user_conf, **keys}
        kconf, launch_env = kerberos_launch(kc, given, os.environ)
        keys.update(kconf)
        if not any(given.get(k) for k in SPARK_KERBEROS_KEYS):
            from dr_toolkit.kerberos import kerberos_for

            holder = kerberos_for(kc)  # a keytab or cache that cannot give a ticket: one line, exit 3
            cache = holder.ccache_in_use()
            if not kc.keytab:  # a kinit'ed cache: the JVM logs in from it (Spark cannot renew it)
                launch_env["KRB5CCNAME"] = cache.removeprefix("FILE:")
    if _is_loopback(chosen):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if chosen.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    for k, v in secret_env.items():
        os.environ[k] = v  # the driver JVM's Hadoop client (and local-mode executors) read them here
    return chosen, keys, submitted, launch_env


#: Spark's own Kerberos settings: when the caller (conf, topology, spark-defaults.conf) sets any, the
#: library sets none of its principal/keytab
SPARK_KERBEROS_KEYS = ("spark.kerberos.principal", "spark.kerberos.keytab", "spark.yarn.principal",
                       "spark.yarn.keytab")
KRB5_JVM_PROPERTY = "java.security.krb5.conf"


def kerberos_launch(cfg: KerberosConfig, given: Mapping[str, str], env: Mapping[str, str]
                    ) -> tuple[dict[str, str], dict[str, str]]:
    """The Spark conf and the driver JVM's environment that make Spark's own Hadoop client (the
    JVM this process starts) log in as ``cfg``'s principal, each filled in only where ``given``
    (the caller's conf, spark-defaults.conf) and ``env`` do not already say it:

    - ``spark.kerberos.principal``/``keytab`` from ``cfg`` (a keytab only: spark-submit logs in from
      it with ``UserGroupInformation.loginUserFromKeytab`` before the driver starts). The keytab's
      path shows in the UI's environment page (a path, not a secret; the file is never read here);
    - ``HADOOP_CONF_DIR``: a generated directory whose ``core-site.xml`` says
      ``hadoop.security.authentication=kerberos`` (the caller's directory's files linked, its
      core-site.xml's properties kept) — spark-submit's login reads Hadoop's static configuration
      from the classpath, never ``spark.hadoop.*``, so without it the keytab is silently ignored;
    - ``SPARK_SUBMIT_OPTS`` + ``-Djava.security.krb5.conf=`` the realm's krb5.conf
      (``extra.krb5_conf``/``KRB5_CONFIG``; Java reads no ``KRB5_CONFIG``)."""
    conf: dict[str, str] = {}
    out: dict[str, str] = {}
    if cfg.keytab and cfg.principal and not any(given.get(k) for k in SPARK_KERBEROS_KEYS):
        conf["spark.kerberos.principal"] = cfg.principal
        conf["spark.kerberos.keytab"] = str(Path(cfg.keytab).resolve())
    conf_dir = kerberos_conf_dir(env.get("HADOOP_CONF_DIR") or None)
    if conf_dir is not None:
        out["HADOOP_CONF_DIR"] = conf_dir
    krb5 = cfg.krb5_conf or env.get("KRB5_CONFIG")
    opts = env.get("SPARK_SUBMIT_OPTS", "")
    if krb5 and KRB5_JVM_PROPERTY not in opts + given.get("spark.driver.extraJavaOptions", ""):
        out["SPARK_SUBMIT_OPTS"] = f"{opts} -D{KRB5_JVM_PROPERTY}={Path(krb5).resolve()}".strip()
    return conf, out


def kerberos_conf_dir(existing: str | None) -> str | None:
    """None when ``existing`` (``$HADOOP_CONF_DIR``) already says Kerberos, else a private directory
    (removed at exit) with ``existing``'s files linked and a core-site.xml of its properties plus
    ``hadoop.security.authentication=kerberos``."""
    import atexit
    import shutil
    from xml.sax.saxutils import escape

    props = _site_props(Path(existing) / "core-site.xml") if existing else {}
    if props.get("hadoop.security.authentication", "").strip().lower() == "kerberos":
        return None
    out = Path(tempfile.mkdtemp(prefix="drt-hadoop-conf-"))
    atexit.register(shutil.rmtree, out, True)
    if existing and Path(existing).is_dir():
        for f in Path(existing).iterdir():
            if f.name != "core-site.xml":
                (out / f.name).symlink_to(f.resolve())
    props["hadoop.security.authentication"] = "kerberos"
    body = "".join(f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in props.items())
    (out / "core-site.xml").write_text(f"<?xml version=\"1.0\"?>\n<configuration>\n{body}</configuration>\n")
    return str(out)


def spark_defaults_file() -> dict[str, str]:
    """The submitter's ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``):
    what spark-submit, and so the JVM pyspark launches, loads first."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None)
    path = Path(conf_dir, "spark-defaults.conf") if conf_dir else None
    if path is None or not path.is_file():
        return {}
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.replace("=", " ", 1).partition(" ") if "=" in line.split()[0] else line.partition(" ")
            out[k.strip()] = v.strip()
    return out


def _under_defaults_file(keys: Mapping[str, str], user_conf: Mapping[str, str]) -> dict[str, str]:
    """The submitter's spark-defaults.conf wins over the library's defaults (not over the caller's
    conf); the lists the library adds to (archives, pyFiles) keep both."""
    file_conf = spark_defaults_file()
    out = {}
    for k, v in keys.items():
        if k not in file_conf or k in user_conf:
            out[k] = v
        elif k in ("spark.archives", "spark.submit.pyFiles") and file_conf[k] != v:
            out[k] = f"{file_conf[k]},{v}"
    return out


def _first(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return redact(lines[0] if lines else type(exc).__name__)[:300]


def check_master_reachable(master: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when a standalone master (``spark://h1:p1,h2:p2``) answers on
    none of its addresses: Spark itself would retry for about a minute, logging Java stack
    traces, and then fail with "Cannot call methods on a stopped SparkContext"."""
    if not master.startswith("spark://"):
        return
    import socket

    last = "no address"
    for hp in master[len("spark://"):].split(","):
        host, _, port = hp.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"bad Spark master URL {master!r}", hint="use spark://host:port[,host2:port2]")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except OSError as exc:
            last = exc.strerror or type(exc).__name__
    raise UnreachableError(f"the Spark master does not answer ({last})", where=master,
                           hint="start the master or fix clusters.<name>.spark.master / $DRT_SPARK_MASTER")


def check_java() -> None:
    """Fail in one line when no Java can start the Spark gateway: the launcher script would
    print its own shell errors and pyspark raise JAVA_GATEWAY_EXITED."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit: the JVM is already running
        return
    import shutil

    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise ConfigError("JAVA_HOME has no bin/java: Spark cannot start", where=f"JAVA_HOME={home}",
                              hint="point JAVA_HOME at a Java 17 or 21 installation, or unset it")
    elif shutil.which("java") is None:
        raise ConfigError("no `java` on PATH and JAVA_HOME is not set: Spark cannot start",
                          hint="install Java 17 or 21, or set JAVA_HOME")


def _site_props(path: Path) -> dict[str, str]:
    """name → value of a Hadoop ``*-site.xml`` (empty when absent)."""
    import xml.etree.ElementTree as ET

    if not path.is_file():
        return {}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ConfigError(f"cannot parse {path}: {exc}", where=str(path)) from None
    out = {}
    for prop in root.iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name and value is not None:
            out[name.strip()] = value.strip()
    return out


def resourcemanagers(props: Mapping[str, str]) -> list[str]:
    """``host:port`` of every ResourceManager a YARN client configuration names (HA: each rm-id's)."""
    def one(suffix: str) -> str:
        addr = props.get(f"yarn.resourcemanager.address{suffix}")
        if addr:
            return addr
        return f"{props.get(f'yarn.resourcemanager.hostname{suffix}', '0.0.0.0')}:8032"

    if props.get("yarn.resourcemanager.ha.enabled", "false").lower() == "true":
        ids = [i.strip() for i in props.get("yarn.resourcemanager.ha.rm-ids", "").split(",") if i.strip()]
        if ids:
            return [one(f".{i}") for i in ids]
    return [one("")]


def check_yarn(keys: Mapping[str, str], conf_dir: str | None = None, timeout_s: float = 5.0) -> None:
    """Before Spark starts on ``yarn``: the client configuration is there (``conf_dir`` — the
    topology's or connection's ``hadoop_conf_dir``, exported here as ``HADOOP_CONF_DIR`` — else
    ``$HADOOP_CONF_DIR``/``$YARN_CONF_DIR``: ConfigError, exit 2) and one of its ResourceManagers
    answers (UnreachableError, exit 3): Spark would retry for 15 minutes, logging Java traces."""
    import socket

    if conf_dir:
        if not Path(conf_dir, "yarn-site.xml").is_file():
            raise ConfigError(f"no yarn-site.xml in the Hadoop client configuration {conf_dir}",
                              where="spark.hadoop_conf_dir", hint="point it at the cluster's client "
                              "configuration (core-site.xml, hdfs-site.xml, yarn-site.xml)")
        os.environ["HADOOP_CONF_DIR"] = conf_dir
        os.environ.setdefault("YARN_CONF_DIR", conf_dir)
    dirs = [d for d in (os.environ.get("HADOOP_CONF_DIR"), os.environ.get("YARN_CONF_DIR")) if d]
    if not dirs:
        raise ConfigError("Spark on YARN needs the cluster's client configuration: HADOOP_CONF_DIR "
                          "(or YARN_CONF_DIR) is not set", where="master yarn",
                          hint="export HADOOP_CONF_DIR=/etc/hadoop/conf (the cluster's client configuration)")
    props: dict[str, str] = {}
    for d in reversed(dirs):
        props.update(_site_props(Path(d) / "yarn-site.xml"))
    props.update({k[len("spark.hadoop."):]: v for k, v in keys.items() if k.startswith("spark.hadoop.yarn.")})
    rms = resourcemanagers(props)
    last = "no address"
    for hp in rms:
        host, _, port = hp.rpartition(":")
        if not port.isdigit():
            raise ConfigError(f"bad ResourceManager address {hp!r}", where=f"{dirs[0]}/yarn-site.xml")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except OSError as exc:
            last = exc.strerror or type(exc).__name__
    raise UnreachableError(f"the YARN ResourceManager does not answer ({last})", where=",".join(rms),
                           hint=f"start YARN or fix yarn.resourcemanager.address in {dirs[0]}/yarn-site.xml")


def spark_from_connection(endpoint: SparkEndpoint, access: Access, what: str) -> SparkEndpoint:
    """``endpoint`` with what its ``conn_id`` names (an Airflow connection of type ``spark``, as
    the Apache Spark provider's ``spark_default``; or ``AIRFLOW_CONN_<ID>`` for the CLI): the
    connection's host is the master (``yarn``; ``spark://host`` with its port), its extra's
    ``hadoop_conf_dir`` the cluster's client configuration (HADOOP_CONF_DIR), ``queue`` the YARN
    queue (``spark.yarn.queue``), ``deploy-mode`` must be ``client`` (the driver is the task's
    process), and ``conf`` more Spark conf, under the topology's own ``spark.conf``."""
    creds = access.get(endpoint.conn_id, what=what)
    if creds is None:
        return endpoint
    extra = dict(creds.extra or {})
    master = (creds.host or "").strip() or endpoint.master
    if master.startswith("spark://") and creds.port and master.count(":") == 1:
        master = f"{master}:{creds.port}"
    mode = str(extra.get("deploy-mode") or extra.get("deploy_mode") or "client")
    if mode != "client":
        raise ConfigError(f"connection {endpoint.conn_id!r}: deploy-mode {mode!r} is not supported (the driver is "
                          "the task's own process)", where=what, hint='set "deploy-mode": "client" in its extra')
    conf = extra.get("conf") or {}
    if not isinstance(conf, dict):
        raise ConfigError(f"connection {endpoint.conn_id!r}: extra.conf must be an object of Spark keys", where=what)
    ours = {str(k): str(v) for k, v in conf.items()}
    if extra.get("queue"):
        ours["spark.yarn.queue"] = str(extra["queue"])
    update: dict[str, Any] = {"master": check_master(master), "conf": {**ours, **endpoint.conf}}
    if extra.get("hadoop_conf_dir"):
        update["hadoop_conf_dir"] = str(extra["hadoop_conf_dir"])
    out: SparkEndpoint = endpoint.model_copy(update=update)
    return out


def with_spark_connections(topology: Topology, access: Access) -> Topology:
    """``topology`` with every cluster's ``spark`` section completed from its ``conn_id``
    (:func:`spark_from_connection`): what the DAGs' tasks run with (the copy engine reads the
    source cluster's section, verify the hot cluster's)."""
    if not any(c.spark.conn_id for c in topology.clusters.values()):
        return topology
    clusters = {}
    for name, c in topology.clusters.items():
        if c.spark.conn_id:
            c = c.model_copy(update={"spark": spark_from_connection(c.spark, access, f"clusters.{name}.spark.conn_id")})
        clusters[name] = c
    out: Topology = topology.model_copy(update={"clusters": clusters})
    return out
