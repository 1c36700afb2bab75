"""ZooKeeper 3.8 standalone from Debian's `zookeeper` package (docs/contracts.md, the real servers).

Kerberos is opt-in (``kdc=`` a :class:`drt_servers.kdc.Kdc`): the server logs in as
``zookeeper/localhost`` from its keytab (a JAAS ``Server`` section) and runs ZooKeeper's SASL
authentication provider, so a client that authenticates with SASL GSSAPI is known as
``sasl:<principal>`` in ACLs. Unauthenticated clients may still connect (as with any ZooKeeper
whose ACLs, not ``enforce.auth``, protect the znodes). Clients name it ``localhost:<port>``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from drt_servers.process import ManagedProcess, four_letter, free_port

if TYPE_CHECKING:
    from drt_servers.kdc import Kdc

ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar",
           "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar"]


def zookeeper(workdir: Path, port: int | None = None, *, kdc: Kdc | None = None) -> ManagedProcess:
    """ZooKeeper standalone; ready when `srvr` says Mode: standalone."""
    missing = [j for j in ZK_JARS if not Path(j).exists()]
    if missing:
        raise RuntimeError(f"ZooKeeper jars missing ({missing}): run `make setup` (apt-get install zookeeper)")
    port = port or free_port()
    conf = workdir / "zk-conf"
    data = workdir / "zk-data"
    conf.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    cfg = (f"tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={data}\nclientPort={port}\n"
           "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=60000\n"
           "4lw.commands.whitelist=srvr,ruok,mntr\n")
    jvm: list[str] = []
    if kdc is not None:
        cfg += "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"
        kdc.jaas_file(conf / "jaas.conf", "Server", kdc.zookeeper_keytab, "zookeeper/localhost")
        jvm = [*kdc.jvm_options(), f"-Djava.security.auth.login.config={conf / 'jaas.conf'}"]
    (conf / "zoo.cfg").write_text(cfg)
    cp = ":".join([str(conf), *ZK_JARS])
    java = shutil.which("java") or "java"
    proc = ManagedProcess(
        "zookeeper-secure" if kdc is not None else "zookeeper",
        [java, "-Xmx256m", *jvm, "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", str(conf / "zoo.cfg")],
        port=port, log_dir=workdir, start_timeout=60,
        ready=lambda: "Mode: standalone" in four_letter(port, "srvr"))
    return proc
