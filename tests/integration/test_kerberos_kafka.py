"""Kafka with Kerberos (SASL/GSSAPI) on a real KDC: kerberized hot and cold brokers and MirrorMaker 2
speaking GSSAPI to both (tests/support/fixtures_kerberos_kafka.py). ``drt kafka checkpoint`` and
``drt kafka remap --apply`` run as the environment's principal (its keytab; the connection only says
SASL_PLAINTEXT + GSSAPI, the topology nothing), the gate's Kafka signal is GO when MirrorMaker 2 has
mirrored and NO_GO while it is paused; the toolkit's own wire client (batched OffsetFetch and the
incremental proof's evidence) authenticates too; a missing keytab, a principal the KDC does not
know, or a ticket the broker refuses is one line naming the principal, exit 3.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.secrets import Credentials
from drt_servers.kdc import Kdc
from tests.support.fixtures_kafka import Rec, commit_after_consuming, committed, create_topic, produce, unique
from tests.support.fixtures_kerberos import MAX_LIFE_S, kerberos_env, without_kerberos_env
from tests.support.fixtures_kerberos_kafka import CONN_ID, GSSAPI_EXTRA, SecureKafka, connection

pytestmark = [pytest.mark.integration]
T0 = 1_700_000_000_000
ENV_CONN = "AIRFLOW_CONN_" + CONN_ID.upper()


def drt(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in without_kerberos_env().items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=full, timeout=180)


def recs(prefix: str, n: int, start: int = 0) -> list[Rec]:
    return [Rec(f"{prefix}-{i}".encode(), T0 + 1000 * i, f"k{i}".encode()) for i in range(start, start + n)]


def kafka_signal(doc: dict[str, Any], topic: str) -> dict[str, Any]:
    found = [s for s in doc["signals"] if s.get("name") == topic]
    assert len(found) == 1, doc["signals"]
    return dict(found[0])


def test_checkpoint_remap_and_the_gate_run_against_kerberized_brokers(kafka_secure: SecureKafka, kdc: Kdc,
                                                                       tmp_path: Path) -> None:
    k = kafka_secure
    topic, group = unique("krb-orders"), unique("krb-billing")
    create_topic(k.hot.probe_address, topic, 2)
    for p in range(2):
        produce(k.hot.probe_address, topic, p, recs(f"p{p}", 6))
    commit_after_consuming(k.hot.probe_address, group, topic, {0: 4, 1: 2})
    k.mm2.wait_mirrored([topic])
    cfg = k.topology(tmp_path / "drt.yaml", topics=[topic], groups=[group],
                     ledger_url=f"sqlite:///{tmp_path}/ledger.db")
    env = {**kerberos_env(kdc), ENV_CONN: connection()}

    r = drt("--json", "--config", str(cfg), "kafka", "checkpoint", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    ck = json.loads(r.stdout)
    assert {(p["topic"], p["partition_id"]): p["committed_offset"] for p in ck["partitions"]
            if p["group_id"] == group} == {(topic, 0): 4, (topic, 1): 2}, ck
    r = drt("--json", "--config", str(cfg), "kafka", "remap", "--group", group, "--apply", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["applied"] is True and {p["partition"]: p["target_offset"] for p in out["partitions"]} == {0: 4, 1: 2}
    assert committed(k.cold.probe_address, group, k.mm2.remote_topic(topic), 2) == {0: 4, 1: 2}

    # the gate's Kafka signal: GO when mirrored, NO_GO while MirrorMaker 2 is paused
    r = drt("--json", "--config", str(cfg), "failover", "check", "--timeout", "20", cwd=tmp_path, env=env)
    assert r.returncode in (0, 1), r.stderr
    sig = kafka_signal(json.loads(r.stdout), topic)
    assert sig["caught_up"] is True, sig
    assert k.mm2.proc is not None
    os.kill(k.mm2.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(0.5)
        produce(k.hot.probe_address, topic, 0, recs("p0", 3, 6))
        r = drt("--json", "--config", str(cfg), "failover", "check", "--timeout", "20", cwd=tmp_path, env=env)
        assert r.returncode in (0, 1), r.stderr
        doc = json.loads(r.stdout)
        sig = kafka_signal(doc, topic)
        assert sig["caught_up"] is False and doc["verdict"] == "NO_GO", (sig, doc["verdict"])
    finally:
        os.kill(k.mm2.proc.pid, signal.SIGCONT)


def test_the_wire_client_authenticates_with_the_toolkits_ticket(kafka_secure: SecureKafka, kdc: Kdc,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched OffsetFetch and the incremental proof's evidence (dr_toolkit/kafka/wire.py) speak
    SASL GSSAPI themselves — not the librdkafka fallback."""
    from dr_toolkit.kafka import wire
    from dr_toolkit.kafka.client import KafkaCluster

    k = kafka_secure
    topic, group = unique("krb-wire"), unique("krb-wire-g")
    create_topic(k.hot.probe_address, topic, 2)
    produce(k.hot.probe_address, topic, 1, recs("w", 5))
    commit_after_consuming(k.hot.probe_address, group, topic, {0: 0, 1: 3})
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    monkeypatch.setenv("KRB5CCNAME", "FILE:/nonexistent/restored-after-the-test")
    creds = Credentials(extra={**GSSAPI_EXTRA, "principal": kdc.principal("drt"), "keytab": str(kdc.keytab("drt"))})
    with KafkaCluster(k.hot.bootstrap, credentials=creds, role="hot") as c:
        assert c.committed_many([group], {topic: 2}) == {group: {(topic, 0): 0, (topic, 1): 3}}
        assert c.batched is True, c.batched_refused
        assert c.topics()[topic] == 2  # the partitions' leaders, for the batched ListOffsets
        assert c.watermarks_many([(topic, 0), (topic, 1)]) == {(topic, 0): (0, 0), (topic, 1): (0, 5)}
        assert c.list_offsets_requests > 0
        ev, n = wire.log_evidence(c.bootstrap, c._conf, c.timeout_s, [(topic, 0), (topic, 1)])
        assert {tp: e[1:3] for tp, e in ev.items()} == {(topic, 0): (0, 0), (topic, 1): (0, 5)} and n >= 2
        # past the ticket's life (the KDC caps it at MAX_LIFE_S): new librdkafka clients (one consumer
        # per group) and new wire connections still authenticate — the toolkit renewed the ticket
        time.sleep(MAX_LIFE_S + 1)
        c.force_per_group = True
        assert c.committed_many([group], {topic: 2}) == {group: {(topic, 0): 0, (topic, 1): 3}}
        assert c.batched is False
        assert wire.log_evidence(c.bootstrap, c._conf, c.timeout_s, [(topic, 1)])[0][(topic, 1)][1:3] == (0, 5)


@pytest.mark.parametrize("case", ["missing keytab", "unknown principal", "ticket refused by the broker"])
def test_credential_problems_are_one_line_exit_3(kafka_secure: SecureKafka, kdc: Kdc, tmp_path: Path,
                                                 case: str) -> None:
    cfg = kafka_secure.topology(tmp_path / "drt.yaml", topics=["krb-none"], groups=["krb-none-g"],
                                ledger_url=f"sqlite:///{tmp_path}/ledger.db", timeout_s=4.0)
    conn = connection()
    if case == "missing keytab":
        env, named = kerberos_env(kdc, keytab=tmp_path / "gone.keytab"), "drt@DRT.TEST"
    elif case == "unknown principal":
        env, named = kerberos_env(kdc, principal="nobody@DRT.TEST"), "nobody@DRT.TEST"
    else:  # a ticket for HTTP/localhost (a principal of the realm): the broker, kafka/localhost, cannot read it
        env, named, conn = kerberos_env(kdc), "drt@DRT.TEST", connection(**{"sasl.kerberos.service.name": "HTTP"})
    r = drt("kafka", "checkpoint", "--config", str(cfg), cwd=tmp_path, env={**env, ENV_CONN: conn})
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("drt: error: ") and "Traceback" not in r.stderr, r.stderr
    assert named in lines[0] and "—" in lines[0], lines[0]
    if case == "ticket refused by the broker":
        assert "refused the Kerberos authentication" in lines[0], lines[0]
