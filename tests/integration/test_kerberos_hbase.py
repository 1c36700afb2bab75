"""The toolkit's HBase paths on a secure HBase pair (issue 41) on a real KDC: Kerberos RPC, SASL
ZooKeeper whose HBase znodes carry SASL ACLs, SPNEGO info servers and SPNEGO WebHDFS
(tests/support/fixtures_kerberos_hbase.py). `drt hbase status`, `drt hbase peers list` and the
gate's HBase signal run as ``drt@DRT.TEST`` (named in ``hbase.superuser``, so the replication
znodes' ACL grants it) from the environment's keytab and a connection's ``sasl`` GSSAPI: GO once
HBase's own replication shipped, NO_GO while it is held. A principal the ACL does not name, or no
principal at all, cannot read ``<parent>/replication``: exit 3, one line naming who and the znode —
never "drained"."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from drt_servers.kdc import Kdc
from tests.support import fixtures_kerberos_hbase as _fixtures
from tests.support.fixtures_kerberos import without_kerberos_env
from tests.support.fixtures_kerberos_hbase import secure_env, secure_topology

pytestmark = pytest.mark.integration
_ROW = [70_000_000]


def _put(hot: Any, n: int) -> None:
    hot.put(_ROW[0], n)
    _ROW[0] += n


def run(cfg: Path, kdc: Kdc, *args: str, user: str | None = "drt", sasl: bool = True) -> Any:
    """`drt` in a subprocess with only this test's Kerberos settings (never the user's own)."""
    env = {k: v for k, v in without_kerberos_env().items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    env.update(secure_env(kdc, user, sasl=sasl))
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(cfg), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def gate(cfg: Path, kdc: Kdc, user: str | None = "drt", *, sasl: bool = True, want: str | None = None,
         timeout: float = 90) -> tuple[Any, dict[str, Any]]:
    """`drt --json failover check`; with ``want``, again until that verdict (or the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        r = run(cfg, kdc, "--json", "failover", "check", user=user, sasl=sasl)
        out = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        if want is None or out.get("verdict") == want or time.monotonic() > deadline:
            return r, out
        time.sleep(1.0)


def hbase_signal(out: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in out["signals"] if s["component"] == "hbase")


def test_status_peers_and_gate_as_the_superuser_go_after_shipping_no_go_while_held(
        hbase_secure_pair: tuple[Any, Any], secure_hbase_hot: Any, hbase_kdc: Kdc, tmp_path: Path) -> None:
    hot, cold = hbase_secure_pair
    kdc = hbase_kdc
    cfg = secure_topology(tmp_path, (hot, cold))
    # the servers really are secure: an unauthenticated /jmx is refused (SPNEGO), and so is a read
    # of the replication queues by an unauthenticated ZooKeeper session (SASL ACL)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://localhost:{hot.region_servers[0].info_port}/jmx", timeout=10)
    assert refused.value.code == 401 and "negotiate" in refused.value.headers.get("WWW-Authenticate", "").lower()

    _put(hot, 40)
    cold.wait_rows(hot.count(), timeout=120)  # HBase's own replication shipped between the secure clusters

    r = run(cfg, kdc, "--json", "hbase", "status", "--peer", "1")
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr)
    st = json.loads(r.stdout)
    live = st["live"]
    rs = [s.server_name for s in hot.region_servers]
    # every live reading came over SPNEGO: the master's peers, each region server's sources and counters
    assert st["caught_up"] and st["peers"] == {"1": "ENABLED"}, st["reasons"]
    assert live["peers"] == ["1"] and live["sources"] == {rs[0]: ["1"]}, live
    assert live["mutations_without_wal"] == {rs[0]: 0} and not live["counter_errors"] and not live["source_errors"]

    r = run(cfg, kdc, "--json", "hbase", "peers", "list")
    assert r.returncode == 0, r.stderr
    peers = {p["peer_id"]: p for p in json.loads(r.stdout)}
    assert peers["1"]["cluster_key"] == cold.cluster_key and peers["1"]["state"] == "ENABLED", peers

    r, out = gate(cfg, kdc, want="GO")
    assert out.get("verdict") == "GO" and r.returncode == 0, (r.returncode, out.get("reasons"), r.stderr)
    assert hbase_signal(out)["caught_up"], hbase_signal(out)

    # held: the peer disabled (HBase's Admin API) and rows written on hot — the gate says NO_GO at once;
    # `drt hbase status` (queue sizes: it reads no WAL lengths) once a rolled WAL waits in the queue
    hot.disable_peer("1")
    _put(hot, 20)
    hot.roll_wal()
    deadline = time.monotonic() + 60
    while True:
        r = run(cfg, kdc, "--json", "hbase", "status", "--peer", "1")
        if r.returncode != 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 1, (r.returncode, r.stderr)
    st = json.loads(r.stdout)
    assert not st["caught_up"] and any("peer 1 is DISABLED" in x for x in st["reasons"]), st["reasons"]
    r, out = gate(cfg, kdc)
    assert r.returncode == 1 and out["verdict"] == "NO_GO", (r.returncode, out.get("reasons"), r.stderr)
    assert not hbase_signal(out)["caught_up"], hbase_signal(out)
    hot.enable_peer("1")
    cold.wait_rows(hot.count(), timeout=120)


@pytest.mark.parametrize("who", ["other", "unauthenticated"])
def test_a_client_the_replication_acl_does_not_name_gets_exit_3_never_drained(
        hbase_secure_pair: tuple[Any, Any], hbase_kdc: Kdc, tmp_path: Path, who: str) -> None:
    """``other@DRT.TEST`` authenticates to ZooKeeper but the ACL of ``/hbase/replication`` names only
    ``drt@DRT.TEST`` and HBase's own principal; an unauthenticated session may read HBase's public
    znodes (master, rs) and nothing under replication. Both: one line, exit 3, naming who and the
    znode; the gate says NO_GO with the same reason."""
    hot, cold = hbase_secure_pair
    kdc = hbase_kdc
    cfg = secure_topology(tmp_path, (hot, cold))
    user, sasl, named = ("other", True, "other@DRT.TEST") if who == "other" else (None, False, "unauthenticated")
    r = run(cfg, kdc, "hbase", "status", user=user, sasl=sasl)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 3, (r.returncode, r.stdout[-1500:], r.stderr)
    assert len(lines) == 1 and lines[0].startswith("drt: error: ") and "Traceback" not in r.stderr, r.stderr
    assert named in lines[0] and f"{hot.znode_parent}/replication" in lines[0], lines[0]
    assert "caught up" not in r.stdout and "drained" not in r.stdout.lower(), r.stdout

    r, out = gate(cfg, kdc, user=user, sasl=sasl)
    assert r.returncode == 1 and out["verdict"] == "NO_GO", (r.returncode, r.stderr)
    sig = hbase_signal(out)
    assert not sig["caught_up"] and named in sig["reason"] and "/replication" in sig["reason"], sig


def test_peers_disable_and_enable_through_a_kerberized_hbase_client(
        hbase_secure_pair: tuple[Any, Any], secure_hbase_hot: Any, hbase_kdc: Kdc, tmp_path: Path) -> None:
    """`drt hbase peers disable|enable` on HBase 2.x run `hbase shell -n FILE`; on the secure cluster the
    `hbase` command is a real HBase client (drt_servers DrtAdminShell) that logs in from the ticket cache
    its environment names, as `hbase shell` does: the toolkit obtains the ticket from the keytab and
    hands its private cache over (KRB5CCNAME). The peer changes in the running HBase (Admin API)."""
    from tests.support.fixtures_failover import write_topology
    from tests.support.fixtures_hbase import hbase_command

    hot, cold = hbase_secure_pair
    kdc = hbase_kdc
    shell = hbase_command(hot, tmp_path / "bin" / "hbase")
    cfg = write_topology(tmp_path, zk=None, hbase=[{"name": "hb", "peer_id": "1", "tables": ["default:orders"]}],
                         hbase_clusters=(hot, cold), zk_conn_id=_fixtures.ZK_CONN_ID,
                         hot_extra={"hbase_shell": str(shell)})
    r = run(cfg, kdc, "--json", "hbase", "peers", "disable", "1")
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    assert not hot.list_peers()["1"]["enabled"]
    r = run(cfg, kdc, "--json", "hbase", "peers", "enable", "1")
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    assert hot.list_peers()["1"]["enabled"]


def test_verify_of_an_hbase_table_on_the_secure_pair(hbase_secure_pair: tuple[Any, Any], hbase_kdc: Kdc,
                                                     tmp_path: Path) -> None:
    """`drt verify hbase://… hbase://…` reads both secure clusters from Spark: the Spark JVM logs in
    from the environment's keytab (DRT_KERBEROS_*) and its HBase clients authenticate to servers named
    by DRT_HBASE_PRINCIPAL; every row HBase's replication shipped is identical."""
    from drt_servers.hbase import mapredcp

    hot, cold = hbase_secure_pair
    n = cold.wait_rows(hot.count(), timeout=120)
    env = {k: v for k, v in without_kerberos_env().items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    env.update(secure_env(hbase_kdc, "drt"))
    env.update({"DRT_HBASE_CLASSPATH": mapredcp(), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
                "DRT_HBASE_PRINCIPAL": hbase_kdc.principal("hbase/localhost")})
    uris = [f"hbase://{c.zk_quorum}{c.znode_parent}/default:orders" for c in (hot, cold)]
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "verify", *uris],
                       capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    out = json.loads(r.stdout)
    assert out["GOODROWS"] == n and n > 0, {k: out[k] for k in ("GOODROWS", "BADROWS")}
    assert out["BADROWS"] == out["ONLY_IN_SOURCE_TABLE_ROWS"] == out["ONLY_IN_PEER_TABLE_ROWS"] == 0

