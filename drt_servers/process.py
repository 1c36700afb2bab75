"""One server process on free 127.0.0.1 ports: start (with a ready-check), stop, kill, restart,
its log kept for failure reports, its start-up time and resident memory measured."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ALL_SERVERS: list[ManagedProcess] = []


_HANDED_OUT: set[int] = set()
_LOWEST = 10000


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on, for a server about to start.

    Chosen at random *below* the kernel's ephemeral range: a port the kernel hands out for
    ``bind(0)`` is one it also hands to outgoing connections, so between this check and the
    server's own bind an HTTP client elsewhere on the machine could take it ("Address already in
    use"). Never the same port twice in one process (two servers started together, e.g. an HA
    pair, cannot be given one port before either binds)."""
    lo, _ = _ephemeral_range()
    if lo - _LOWEST >= 1000:
        rng = random.SystemRandom()
        for _ in range(500):
            port = rng.randrange(_LOWEST, lo)
            if port in _HANDED_OUT:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    while True:  # no room below the ephemeral range: the kernel's choice
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


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
        self.started_in_s: float | None = None
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
        t0 = time.monotonic()
        deadline = t0 + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if self.ready():
                    self.started_in_s = time.monotonic() - t0
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

    def rss_bytes(self) -> int:
        """Resident memory of the process group (the server and any child it started), from /proc."""
        if not self.running or not self.proc:
            return 0
        total = 0
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                if os.getpgid(int(d.name)) != self.proc.pid:
                    continue
                for line in (d / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except (OSError, ProcessLookupError, ValueError):
                continue
        return total

    def describe(self) -> str:
        """One line: name, address, start-up time, memory."""
        took = f"{self.started_in_s:.1f} s" if self.started_in_s is not None else "?"
        return f"{self.name} on {self.address}: started in {took}, RSS {self.rss_bytes() / 2**20:.0f} MiB"


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
