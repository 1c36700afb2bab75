"""A real KDC (docs/contracts.md, the real servers): Hadoop's MiniKdc (Apache Kerby's KDC, the one Hadoop's own
secure-cluster tests start) from ``drt_servers/maven/kdc/pom.xml``, launched by our own main
``drt_servers/java/kdc/DrtMiniKdc.java`` in its own JVM on a free 127.0.0.1 TCP port.

``Kdc`` writes a ``krb5.conf`` for every client and server that talks to it (MIT's format, which
Java reads too: TCP only, no DNS lookups or reverse-DNS canonicalisation, and a default credential
cache inside the KDC's directory so nothing here ever touches a user's own ``/tmp/krb5cc_<uid>``),
and creates the principals with their keytabs (random keys) when it starts:

- ``service.keytab``: ``hdfs/localhost`` and ``HTTP/localhost`` (NameNode, DataNode, SPNEGO);
- ``zookeeper.keytab``: ``zookeeper/localhost``;
- ``kafka.keytab``: ``kafka/localhost`` (the brokers and MirrorMaker 2 of ``KafkaBroker(kdc=…)``);
  ``hbase.keytab``: ``hbase/localhost`` (the secure HBase of ``HBaseCluster(kdc=…)``: NameNode, DataNode,
  master and region server in one JVM log in as it);
- ``<user>.keytab`` for each toolkit user principal (``drt`` and ``other`` by default).

The KDC's database lives in memory: a restart makes new keys (and new keytabs). ``max_life_s``
caps every ticket's lifetime (tests of ticket renewal use a short one).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from drt_servers import maven
from drt_servers.process import ManagedProcess, free_port

MAIN = "DrtMiniKdc"
REALM = "DRT.TEST"
HOST = "localhost"  # the instance of the service principals: servers and clients name hosts so
SERVICES = ("hdfs", "HTTP")

LOG4J = """\
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=%d{HH:mm:ss,SSS} %p %c{1}: %m%n
"""

KRB5_CONF = """\
[libdefaults]
  default_realm = {realm}
  dns_lookup_kdc = false
  dns_lookup_realm = false
  rdns = false
  dns_canonicalize_hostname = false
  udp_preference_limit = 1
  forwardable = true
  default_ccache_name = FILE:{ccache}
  kdc_timeout = 5s
  max_retries = 1

[realms]
  {realm} = {{
    kdc = 127.0.0.1:{port}
  }}

[domain_realm]
  localhost = {realm}
  .localhost = {realm}
"""


class Kdc(ManagedProcess):
    """One real KDC (realm ``DRT.TEST``) in its own JVM. ``start()`` waits until the principals
    and keytabs exist."""

    def __init__(self, workdir: Path, *, users: Sequence[str] = ("drt", "other"), max_life_s: int | None = None,
                 name: str = "kdc", heap: str = "128m", start_timeout: float = 90.0) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.realm = REALM
        self.kdc_port = free_port()
        self.ports_file = self.workdir / "kdc.json"
        self.krb5_conf = self.workdir / "krb5.conf"
        self.service_keytab = self.workdir / "service.keytab"
        self.zookeeper_keytab = self.workdir / "zookeeper.keytab"
        self.kafka_keytab = self.workdir / "kafka.keytab"
        self.hbase_keytab = self.workdir / "hbase.keytab"
        self.users = list(users)
        self.krb5_conf.write_text(KRB5_CONF.format(realm=self.realm, port=self.kdc_port,
                                                   ccache=self.workdir / "krb5cc_default"))
        (self.workdir / "log4j.properties").write_text(LOG4J)
        cp = f"{maven.java_classes('kdc')}:{maven.classpath('kdc')}"
        argv = [maven.java(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.net.preferIPv4Stack=true", f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
                "-cp", cp, MAIN, "--dir", str(self.workdir / "kdc"), "--ports-file", str(self.ports_file),
                "--port", str(self.kdc_port), "--org", "DRT", "--domain", "TEST",
                "--keytab", f"{self.service_keytab}={','.join(f'{s}/{HOST}' for s in SERVICES)}",
                "--keytab", f"{self.zookeeper_keytab}=zookeeper/{HOST}",
                "--keytab", f"{self.kafka_keytab}=kafka/{HOST}", "--keytab", f"{self.hbase_keytab}=hbase/{HOST}"]
        for u in self.users:
            argv += ["--keytab", f"{self.keytab(u)}={u}"]
        if max_life_s:
            argv += ["--max-life", str(int(max_life_s))]
        super().__init__(name, argv, port=self.kdc_port, log_dir=self.workdir, ready=self._ready,
                         cwd=self.workdir, start_timeout=start_timeout)

    def start(self) -> Kdc:
        self.ports_file.unlink(missing_ok=True)
        super().start()
        return self

    def _ready(self) -> bool:
        return self.ports_file.exists()

    def principal(self, name: str) -> str:
        """``name`` qualified with the realm (``hdfs/localhost`` -> ``hdfs/localhost@DRT.TEST``)."""
        return name if "@" in name else f"{name}@{self.realm}"

    def keytab(self, user: str) -> Path:
        """The keytab of toolkit user ``user`` (created when the KDC starts)."""
        return self.workdir / f"{user}.keytab"

    def client_env(self) -> dict[str, str]:
        """The environment a client process needs to find this KDC (``KRB5_CONFIG``)."""
        return {"KRB5_CONFIG": str(self.krb5_conf)}

    def keytab_login(self, keytab: Path | str, principal: str) -> str:
        """A JAAS login-module entry logging in as ``principal`` from ``keytab`` (a ``sasl.jaas.config``
        value as it is; the body of a section of a JAAS file)."""
        return (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
                f'useTicketCache=false keyTab="{keytab}" principal="{self.principal(principal)}";')

    def jaas_file(self, path: Path, section: str, keytab: Path | str, principal: str) -> Path:
        """Write a JAAS file with one ``section`` (``Server``: ZooKeeper's server, ``Client``: a ZooKeeper
        client in a server JVM) logging in from ``keytab``; returns ``path``."""
        path.write_text(f"{section} {{\n  {self.keytab_login(keytab, principal)}\n}};\n")
        return path

    def jvm_options(self) -> list[str]:
        """System properties for a JVM server or client of this realm."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}", "-Dsun.security.krb5.disableReferrals=true"]

    @property
    def info(self) -> dict[str, object]:
        return dict(json.loads(self.ports_file.read_text())) if self.ports_file.exists() else {}


def start_for_cli(workdir: Path) -> list[ManagedProcess]:
    """``python -m drt_servers start kdc --dir D``: the KDC, its krb5.conf and keytabs printed."""
    kdc = Kdc(workdir).start()
    print(f"kdc: realm {kdc.realm}, 127.0.0.1:{kdc.kdc_port}, KRB5_CONFIG={kdc.krb5_conf}, "
          f"keytabs in {kdc.workdir}")
    return [kdc]
