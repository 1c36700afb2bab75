"""Copies on Spark executors between two kerberized HDFS clusters (issue 41): the driver holds the
ticket, the executors none — they get a delegation token per side, fetched by the driver and
shipped inside the pickled job, and cancelled when the job ends. The NameNodes' audit logs prove
who did what (``auth:TOKEN`` for the executors' creates and reads), the result equals the local
engine's, and no token shows in the run's output, its DEBUG log or Spark's event log (what the UI
shows: its environment and job properties)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from drt_servers.hdfs import HdfsCluster
from drt_servers.kdc import Kdc
from tests.support.fixtures_kerberos import COOKIE_S, TOKEN_RENEW_S, kerberos_env, without_kerberos_env
from tests.support.servers import spark_env

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]

TOKEN_SHOWN = re.compile(r"(?:delegation|token)=(?!\*\*\*)[A-Za-z0-9_-]{20,}|\"urlString\"")


def drt(*args: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in without_kerberos_env().items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=full, timeout=timeout)


def spark_conf_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A SPARK_CONF_DIR whose executors have no way to a ticket of their own (a keytab that does not
    exist, an empty credential cache) and whose event log records what the UI would show."""
    conf, events = tmp_path / "spark-conf", tmp_path / "spark-events"
    conf.mkdir()
    events.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.executorEnv.DRT_KERBEROS_KEYTAB {tmp_path / 'no-such.keytab'}\n"
        f"spark.executorEnv.KRB5CCNAME FILE:{tmp_path / 'empty-ccache'}\n"
        "spark.eventLog.enabled true\nspark.eventLog.compress false\n"
        f"spark.eventLog.dir file://{events}\n")
    return conf, events


def seed(h: HdfsCluster, root: str) -> dict[str, bytes]:
    files = {f"{root}/f{i}.bin": bytes([65 + i]) * (500 + 3000 * i) for i in range(6)}
    files[f"{root}/d/empty"] = b""
    for p, data in files.items():
        h.write(p, data)
    return files


def token_ops(h: HdfsCluster) -> list[tuple[str, str]]:
    """(cmd, the token's description) of every delegation-token operation of ``drt`` so far."""
    return [(rec["cmd"], rec["src"]) for rec in h.audit(under="") if "Delegation" in rec.get("cmd", "")
            and " for drt " in rec.get("src", "")]


def cancelled_in(ops: list[tuple[str, str]]) -> list[str]:
    """The tokens the run cancelled, each one it had fetched (the NameNode's own redirect tokens for a
    DataNode are fetched too, and expire by themselves)."""
    got = {t for c, t in ops if c == "getDelegationToken"}
    out = [t for c, t in ops if c == "cancelDelegationToken"]
    assert set(out) <= got, ops
    return out


def test_spark_executors_copy_with_delegation_tokens_only(hdfs_secure: HdfsCluster, hdfs_secure_cold: HdfsCluster,
                                                          kdc: Kdc, tmp_path: Path) -> None:
    hot, cold = hdfs_secure, hdfs_secure_cold
    files = seed(hot, "/ks/src")
    cold.client().makedirs("/ks", permission="777")  # cold has permissions on: its root is the superuser's
    conf, events = spark_conf_dir(tmp_path)
    env = {**kerberos_env(kdc), **spark_env(), "SPARK_CONF_DIR": str(conf)}
    before = (token_ops(hot), token_ops(cold))
    r = drt("-vv", "--json", "distcp", "--engine", "spark", "--spark-master", "local[2]", "-m", "2",
            hot.uri("/ks/src"), cold.uri("/ks/dst"), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    spark_out = json.loads(r.stdout)
    assert spark_out["engine"] == "spark" and spark_out["files_failed"] == 0, spark_out
    for p, data in files.items():
        assert cold.read(p.replace("/ks/src", "/ks/dst")) == data
    # the executors wrote and read with the tokens alone (their environment names no usable keytab)
    assert {rec["ugi"] for rec in cold.audit("create", under="/ks/dst")} == {"drt (auth:TOKEN)"}
    assert {rec["ugi"] for rec in hot.audit("open", under="/ks/src")} == {"drt (auth:TOKEN)"}
    # one token per side, fetched by the driver and cancelled at the end
    for h, seen in zip((hot, cold), before, strict=True):
        assert len(cancelled_in(token_ops(h)[len(seen):])) == 1, token_ops(h)[len(seen):]
    # never a token in what the run printed (urllib3 logs every URL at -vv) or in Spark's event log
    shown = [f"{name}: {m.group(0)[:30]}" for name, text in
             [("stdout", r.stdout), ("stderr", r.stderr)] + [(p.name, p.read_text(errors="replace"))
                                                             for p in events.rglob("*") if p.is_file()]
             for m in TOKEN_SHOWN.finditer(text)]
    assert not shown, shown
    logged = "".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert "SparkListenerEnvironmentUpdate" in logged and "no-such.keytab" in logged, "no Spark event log"

    # the local engine's result over the same clusters is the same
    r = drt("--json", "distcp", hot.uri("/ks/src"), cold.uri("/ks/dst-local"), cwd=tmp_path, env=kerberos_env(kdc))
    assert r.returncode == 0, r.stderr[-4000:]
    local_out = json.loads(r.stdout)
    keys = ("files_total", "files_copied", "bytes_copied", "files_skipped", "files_failed")
    assert {k: spark_out[k] for k in keys} == {k: local_out[k] for k in keys}, (spark_out, local_out)
    for p, data in files.items():
        assert cold.read(p.replace("/ks/src", "/ks/dst-local")) == data


def test_the_driver_renews_the_executors_tokens_while_the_job_runs(hdfs_secure_cold: HdfsCluster, kdc: Kdc,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """hdfs_secure_cold's tokens expire 15 s after their last renewal: an executor's token keeps
    working for 1.3 renew intervals because the driver renews it; once the job is over it is
    cancelled and refused (a KerberosError, never an empty listing)."""
    from dr_toolkit.copy.copying import executor_tokens
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
    from dr_toolkit.kerberos import KerberosError

    cold = hdfs_secure_cold
    cold.client().makedirs("/ks-renew", permission="777")
    for k, v in kerberos_env(kdc).items():
        monkeypatch.setenv(k, v)
    driver = WebHdfsFileSystem(cold.namenodes, kerberos=True)
    job: Any = SimpleNamespace(src_credentials=None, tgt_credentials=None)
    with executor_tokens(job, driver, driver):
        for k in ("DRT_KERBEROS_PRINCIPAL", "DRT_KERBEROS_KEYTAB"):
            monkeypatch.delenv(k)
        executor = WebHdfsFileSystem(cold.namenodes, kerberos=True, credentials=job.tgt_credentials)
        assert executor.kerberos is None  # the token alone
        deadline, i = time.monotonic() + TOKEN_RENEW_S * 1.3, 0
        while time.monotonic() < deadline:
            executor.write(f"/ks-renew/f{i}", [b"x"])
            i += 1
            time.sleep(2)
        assert sorted(s.path for s in executor.list_files("/ks-renew")) == sorted(f"/ks-renew/f{n}" for n in range(i))
        for k, v in kerberos_env(kdc).items():
            monkeypatch.setenv(k, v)
    time.sleep(COOKIE_S + 0.5)
    with pytest.raises(KerberosError, match="SecurityException"):
        list(executor.list_files("/ks-renew"))
    assert {rec["ugi"] for rec in cold.audit("create", under="/ks-renew")} == {"drt (auth:TOKEN)"}
