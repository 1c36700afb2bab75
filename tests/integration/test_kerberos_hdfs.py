"""Kerberos end to end on a real KDC (Hadoop's MiniKdc) and a kerberized HDFS (SPNEGO on WebHDFS):
`drt distcp` copies and verifies as a principal from the environment; a missing keytab, a
principal the KDC does not know, an expired ticket cache or no credentials at all are one line
naming the principal, exit 3, nothing written; an unauthenticated request is refused (the
security is real); a run outlives its tickets (the KDC caps them at 12 s) and keeps going."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from dr_toolkit.kerberos import KerberosError
from drt_servers.hdfs import HdfsCluster
from drt_servers.kdc import Kdc
from tests.support.fixtures_kerberos import COOKIE_S, MAX_LIFE_S, kerberos_env, without_kerberos_env

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def drt(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in without_kerberos_env().items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=full, timeout=180)


def one_line(r: subprocess.CompletedProcess[str], code: int) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("drt: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def seed(h: HdfsCluster, root: str, n: int = 3) -> dict[str, bytes]:
    files = {f"{root}/d/f{i}.bin": bytes([i]) * (1000 + 4096 * i) for i in range(n)}
    for p, data in files.items():
        h.write(p, data)
    return files


def test_unauthenticated_requests_are_refused(hdfs_secure: HdfsCluster) -> None:
    base = f"{hdfs_secure.webhdfs_url}/webhdfs/v1"
    r = requests.get(f"{base}/?op=LISTSTATUS", timeout=60)
    assert r.status_code == 401 and r.headers.get("WWW-Authenticate") == "Negotiate"
    # the simple (pseudo) scheme an insecure cluster takes is refused too: nothing is made
    r = requests.put(f"{base}/kerberos-intruder?op=MKDIRS&user.name=hdfs", timeout=60)
    assert r.status_code == 401
    assert hdfs_secure.stat("/kerberos-intruder") is None


def test_distcp_copies_and_verifies_as_the_principal(hdfs_secure: HdfsCluster, kdc: Kdc, tmp_path: Path) -> None:
    files = seed(hdfs_secure, "/kc/src")
    r = drt("--json", "distcp", hdfs_secure.uri("/kc/src"), hdfs_secure.uri("/kc/dst"), cwd=tmp_path,
            env=kerberos_env(kdc))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["files_copied"] == len(files) and out["files_failed"] == 0
    for p, data in files.items():
        assert hdfs_secure.read(p.replace("/kc/src", "/kc/dst")) == data
    # the NameNode saw the toolkit's own principal write them (its delegation token at the DataNode)
    ugis = {rec["ugi"].split()[0] for rec in hdfs_secure.audit("create", under="/kc/dst")}
    assert ugis == {"drt"}
    # a second run finds them equal (the checksums compared over the secure cluster): nothing copied
    r = drt("--json", "distcp", "--update", hdfs_secure.uri("/kc/src"), hdfs_secure.uri("/kc/dst"), cwd=tmp_path,
            env=kerberos_env(kdc))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["files_copied"] == 0


@pytest.mark.parametrize("case", ["missing keytab", "unknown principal", "no credentials"])
def test_credential_problems_are_one_line_exit_3(hdfs_secure: HdfsCluster, kdc: Kdc, tmp_path: Path,
                                                case: str) -> None:
    seed(hdfs_secure, "/kc/err", n=1)
    dst = f"/kc/err-{case.replace(' ', '-')}"
    if case == "missing keytab":
        env, named = kerberos_env(kdc, keytab=tmp_path / "gone.keytab"), "drt@DRT.TEST"
    elif case == "unknown principal":
        env, named = kerberos_env(kdc, principal="nobody@DRT.TEST"), "nobody@DRT.TEST"
    else:
        env, named = kdc.client_env(), "DRT_KERBEROS_PRINCIPAL"
    line = one_line(drt("distcp", hdfs_secure.uri("/kc/err"), hdfs_secure.uri(dst), cwd=tmp_path, env=env), 3)
    assert named in line, line
    assert "—" in line  # and what to do
    assert hdfs_secure.stat(dst) is None  # nothing changed


def kinit(kdc: Kdc, ccache: Path, life_s: int | None = None) -> float:
    """``kinit -kt`` as a user would (into ``ccache``); returns the ticket's end time."""
    import krb5

    ctx = krb5.init_context()
    princ = krb5.parse_name_flags(ctx, kdc.principal("drt").encode())
    opt = krb5.get_init_creds_opt_alloc(ctx)
    if life_s:
        krb5.get_init_creds_opt_set_tkt_life(opt, life_s)
    creds = krb5.get_init_creds_keytab(ctx, princ, opt, keytab=krb5.kt_resolve(ctx, f"FILE:{kdc.keytab('drt')}".encode()))
    cc = krb5.cc_resolve(ctx, f"FILE:{ccache}".encode())
    krb5.cc_initialize(ctx, cc, princ)
    krb5.cc_store_cred(ctx, cc, creds)
    return float(creds.times.endtime)


def test_expired_ticket_cache_is_one_line_exit_3(hdfs_secure: HdfsCluster, kdc: Kdc, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A ticket someone got with kinit (KRB5CCNAME, no keytab): used while it lasts; once it has run
    out, one line naming the principal and saying to kinit again."""
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
    from dr_toolkit.kerberos import KerberosConfig

    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    seed(hdfs_secure, "/kc/cc", n=1)
    # in this process (no interpreter start-up between kinit and use: the KDC caps tickets at 12 s)
    kinit(kdc, tmp_path / "cc-fresh")
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'cc-fresh'}")
    fs = WebHdfsFileSystem(hdfs_secure.namenodes, kerberos=True)
    assert fs.kerberos is not None and fs.kerberos.cfg == KerberosConfig.from_env()
    assert [st.path for st in fs.list_files("/kc/cc")] == ["/kc/cc/d/f0.bin"]
    assert fs.kerberos.ccache_in_use() == f"FILE:{tmp_path / 'cc-fresh'}"  # what a JVM or librdkafka is given
    ends = kinit(kdc, tmp_path / "cc-short", life_s=2)  # the KDC grants what is asked, down to 1 s
    time.sleep(max(0.0, ends - time.time() + 1))
    env = {**kdc.client_env(), "KRB5CCNAME": f"FILE:{tmp_path / 'cc-short'}", "DRT_KERBEROS_PRINCIPAL": "drt@DRT.TEST"}
    line = one_line(drt("distcp", hdfs_secure.uri("/kc/cc"), hdfs_secure.uri("/kc/cc-dst2"), cwd=tmp_path,
                        env=env), 3)
    assert "drt@DRT.TEST" in line and "expired" in line and "kinit" in line, line
    assert hdfs_secure.stat("/kc/cc-dst2") is None


def test_a_run_outlives_its_tickets(hdfs_secure: HdfsCluster, kdc: Kdc, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tickets last 12 s (the KDC's cap) and Hadoop's cookie 1 s: a run of 1.6 ticket lifetimes keeps
    presenting valid tickets because the library obtains new ones from the keytab."""
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem
    from dr_toolkit.kerberos import KerberosConfig, kerberos_for

    for k, v in kerberos_env(kdc).items():
        monkeypatch.setenv(k, v)
    fs = WebHdfsFileSystem(hdfs_secure.namenodes, kerberos=True)
    assert fs.kerberos is not None
    holder = kerberos_for(KerberosConfig.from_env())
    assert holder is fs.kerberos
    ends: set[float] = set()
    deadline = time.monotonic() + MAX_LIFE_S * 1.6
    i = 0
    while time.monotonic() < deadline:
        fs.write(f"/kc/long/f{i}", [b"x" * 100])
        assert fs.stat(f"/kc/long/f{i}") is not None
        ends.add(holder._ends)
        i += 1
        time.sleep(1.5)
    assert len(ends) >= 2, ends  # the first ticket ran out mid-run: a new one was obtained before it did
    assert holder.ccache_in_use() == holder.ccache  # the private cache, with the newest ticket
    fs.close()



def test_the_gate_reads_hdfs_on_the_kerberized_cluster(hdfs_secure: HdfsCluster, kdc: Kdc, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's HDFS signal (the ledger's last run against a listing of both sides) with the
    topology saying ``kerberos: true`` and the principal and keytab from the endpoint's Airflow
    connection (``AIRFLOW_CONN_<ID>``, nothing in the environment's DRT_KERBEROS_*): NO_GO while a
    file is pending, GO after `replicate`."""
    from dr_toolkit.access import Access
    from dr_toolkit.copy.api import replicate_policy
    from dr_toolkit.failover.gate import check
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import load_topology
    from tests.support.fixtures_failover import write_topology

    for k in ("DRT_KERBEROS_PRINCIPAL", "DRT_KERBEROS_KEYTAB", "KRB5CCNAME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_HDFS_KRB", json.dumps({
        "conn_type": "webhdfs", "login": kdc.principal("drt"),
        "extra": {"keytab": str(kdc.keytab("drt")), "krb5_conf": str(kdc.krb5_conf)}}))
    hdfs = {"hdfs": {"namenodes": hdfs_secure.namenodes, "kerberos": True, "conn_id": "hdfs_krb"}}
    path = write_topology(tmp_path, zk=None, hot_extra=hdfs, cold_extra=hdfs,
                          hdfs=[{"name": "kg", "source": "hdfs://hot/kg/src", "targets": ["hdfs://cold/kg/dst"]}])
    seed(hdfs_secure, "/kg/src", n=2)
    topo = load_topology(path)
    ledger = Ledger.open(topo.ledger.url)
    access = Access.from_env()
    replicate_policy(topo, "kg", ledger, access=access)
    res = check(topo, ledger, access=access)
    assert res.verdict == "GO", res.reasons
    hdfs_secure.write("/kg/src/d/late.bin", b"late" * 10)
    res = check(topo, ledger, access=access)
    assert res.verdict == "NO_GO" and "1 files (40 bytes) pending" in " | ".join(res.reasons), res.reasons
    replicate_policy(topo, "kg", ledger, access=access)
    assert check(topo, ledger, access=access).verdict == "GO"
    assert hdfs_secure.read("/kg/dst/d/late.bin") == b"late" * 10


def test_a_delegation_token_stands_in_for_the_ticket(hdfs_secure: HdfsCluster, kdc: Kdc,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """What executors get: a token the driver fetched with its ticket — they list, write and read
    with it alone (no keytab, no ticket cache), and it never shows in a log (urllib3 logs every URL
    at DEBUG); once the driver cancels it, it is refused."""
    import logging

    caplog.set_level(logging.DEBUG, logger="urllib3")
    from dr_toolkit.fs.webhdfs import WebHdfsFileSystem, credentials_for_executors
    from dr_toolkit.secrets import Credentials

    for k, v in kerberos_env(kdc).items():
        monkeypatch.setenv(k, v)
    driver = WebHdfsFileSystem(hdfs_secure.namenodes, kerberos=True)
    shipped, token = credentials_for_executors(driver, Credentials(login="x", extra={"k": "v"}))
    assert token and shipped is not None and shipped.extra == {"k": "v", "delegation": token}
    for k in ("DRT_KERBEROS_PRINCIPAL", "DRT_KERBEROS_KEYTAB"):
        monkeypatch.delenv(k)
    assert credentials_for_executors(WebHdfsFileSystem(hdfs_secure.namenodes), None) == (None, None)  # no Kerberos
    executor = WebHdfsFileSystem(hdfs_secure.namenodes, kerberos=True, credentials=shipped)
    executor.write("/kc/token/f", [b"from an executor"])
    assert b"".join(executor.read("/kc/token/f")) == b"from an executor"
    assert [s.path for s in executor.list_files("/kc/token")] == ["/kc/token/f"]
    assert {rec["ugi"] for rec in hdfs_secure.audit("create", under="/kc/token")} == {"drt (auth:TOKEN)"}
    assert "delegation=***" in caplog.text and token not in caplog.text
    # the driver cancels it when the job is done: from then on it opens nothing
    for k, v in kerberos_env(kdc).items():
        monkeypatch.setenv(k, v)
    driver.cancel_delegation_token(token)
    time.sleep(COOKIE_S + 0.5)  # the session cookie the token earned runs out as well
    with pytest.raises(KerberosError, match="SecurityException.*[Tt]oken"):  # never an empty listing
        list(executor.list_files("/kc/token"))


def test_jmx_over_spnego(hdfs_secure: HdfsCluster, kdc: Kdc, monkeypatch: pytest.MonkeyPatch) -> None:
    """The NameNode's /jmx (what the gate's quick HDFS check and the fence's identity read) behind
    SPNEGO: :func:`http_get` with the principal's ticket reads it; without Kerberos it is one clear
    error, not an HTML 401 page parsed as JSON."""
    from dr_toolkit.fs.webhdfs import http_get, kerberos_wanted

    url = f"{hdfs_secure.webhdfs_url}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo"
    assert requests.get(url, timeout=60).status_code == 401
    for k, v in kerberos_env(kdc).items():
        monkeypatch.setenv(k, v)
    r = http_get(url, kerberos=kerberos_wanted(True), timeout_s=60)
    assert r.status_code == 200 and r.json()["beans"][0]["BlockPoolId"].startswith("BP-")
    with pytest.raises(KerberosError, match="asks for Kerberos"):
        http_get(url, timeout_s=60)
