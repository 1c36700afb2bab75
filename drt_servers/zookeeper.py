"""ZooKeeper 3.8 standalone from Debian's `zookeeper` package (docs/contracts.md, the real servers)."""

from __future__ import annotations

import shutil
from pathlib import Path

from drt_servers.process import ManagedProcess, four_letter, free_port

ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar",
           "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar"]


def zookeeper(workdir: Path, port: int | None = None) -> ManagedProcess:
    """ZooKeeper standalone; ready when `srvr` says Mode: standalone."""
    missing = [j for j in ZK_JARS if not Path(j).exists()]
    if missing:
        raise RuntimeError(f"ZooKeeper jars missing ({missing}): run `make setup` (apt-get install zookeeper)")
    port = port or free_port()
    conf = workdir / "zk-conf"
    data = workdir / "zk-data"
    conf.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    (conf / "zoo.cfg").write_text(
        f"tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={data}\nclientPort={port}\n"
        "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=60000\n"
        "4lw.commands.whitelist=srvr,ruok,mntr\n")
    cp = ":".join([str(conf), *ZK_JARS])
    java = shutil.which("java") or "java"
    proc = ManagedProcess(
        "zookeeper", [java, "-Xmx256m", "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain",
                      str(conf / "zoo.cfg")],
        port=port, log_dir=workdir, start_timeout=60,
        ready=lambda: "Mode: standalone" in four_letter(port, "srvr"))
    return proc
