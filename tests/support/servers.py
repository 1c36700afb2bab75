"""Factories for the real servers the tests run — docs/contracts.md, the real servers.

ZooKeeper and the JVM servers come from :mod:`drt_servers` (the demo and the benchmarks
run the same ones); PostgreSQL from :mod:`tests.support.postgres`. moto's S3 protocol
server — the one emulator in the suite — is test-only and lives here.
"""

from __future__ import annotations

import sys
import time

from drt_servers.kafka import kafka_broker
from drt_servers.process import four_letter
from drt_servers.zookeeper import ZK_JARS, zookeeper
from tests.support.postgres import PG_BIN, Postgres
from tests.support.procs import free_port

__all__ = ["PG_BIN", "ZK_JARS", "Postgres", "S3Server", "four_letter", "kafka_broker", "spark_env", "zookeeper"]


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
