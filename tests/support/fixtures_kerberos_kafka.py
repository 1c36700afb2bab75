"""Fixtures for Kafka with Kerberos: a kerberized hot and cold broker (SASL_PLAINTEXT with
GSSAPI, logging in as ``kafka/localhost``) and MirrorMaker 2 between them speaking GSSAPI to both,
on the shared ``kdc`` of :mod:`tests.support.fixtures_kerberos` (drt_servers/kafka.py's ``kdc=``).

The toolkit reaches the brokers at ``localhost:<port>`` over SASL only. The harness's own set-up
and "mirrored yet?" probes use each broker's PLAINTEXT inter-broker listener
(:attr:`KafkaBroker.probe_address`), never what a test checks.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from drt_servers.kafka import KafkaBroker, MirrorMaker2
from drt_servers.kdc import Kdc
from tests.support.fixtures_kafka import write_topology

KRB_TOPICS = "krb-.*"
CONN_ID = "kafka_krb"
#: the Airflow Kafka connection of both clusters: librdkafka settings in its extra, no principal
#: (that comes from the environment or is added by a test)
GSSAPI_EXTRA = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI"}


@dataclass
class SecureKafka:
    hot: KafkaBroker
    cold: KafkaBroker
    mm2: MirrorMaker2

    def topology(self, path: Path, *, topics: list[str], groups: list[str], ledger_url: str,
                 timeout_s: float = 10.0) -> Path:
        """A topology for the pair (MM2's default policy: cold topics ``hot.<topic>``), both
        clusters' Kafka naming the connection :data:`CONN_ID` — and no credential."""
        write_topology(path, hot=self.hot.bootstrap, cold=self.cold.bootstrap, topics=topics, groups=groups,
                       ledger_url=ledger_url, replication_policy="default", timeout_s=timeout_s)
        doc = yaml.safe_load(path.read_text())
        for side in ("hot", "cold"):
            doc["clusters"][side]["kafka"]["conn_id"] = CONN_ID
        path.write_text(yaml.safe_dump(doc))
        return path


def connection(**extra: str) -> str:
    """``AIRFLOW_CONN_KAFKA_KRB``'s value (JSON form)."""
    return json.dumps({"conn_type": "kafka", "extra": {**GSSAPI_EXTRA, **extra}})


@pytest.fixture(scope="module")
def kafka_secure(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """Kerberized hot + cold brokers (started side by side) and MirrorMaker 2 for ``krb-*``: one
    module's (three JVMs that the other Kerberos modules of the worker need not carry)."""
    root = tmp_path_factory.mktemp("kafka-secure")
    hot = KafkaBroker(root / "hot", "hot", kdc=kdc)
    cold = KafkaBroker(root / "cold", "cold", kdc=kdc)
    mm2: MirrorMaker2 | None = None
    try:
        with cf.ThreadPoolExecutor(2) as ex:
            for f in [ex.submit(hot.start), ex.submit(cold.start)]:
                f.result()
        started = MirrorMaker2(root / "mm2", hot.bootstrap, cold.bootstrap, topics=KRB_TOPICS, groups="none",
                               kdc=kdc, probe=(hot.probe_address, cold.probe_address))
        mm2 = started
        started.start()
        yield SecureKafka(hot, cold, started)
    finally:
        for p in (mm2, cold, hot):
            if p is not None:
                p.kill()
