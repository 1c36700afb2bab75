"""The fence on a ZooKeeper with Kerberos (SASL GSSAPI) authentication, on a real KDC: armed and
read as the toolkit's principal (from a connection's ``sasl`` and the environment's keytab), its
znodes ``sasl:<principal>`` + world-read — an unauthenticated client, or another principal, can
read the fence but not change it; a missing keytab or unknown principal is one line naming it,
exit 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dr_toolkit.secrets import Credentials
from dr_toolkit.topology import ZooKeeperEndpoint
from dr_toolkit.zk.client import ZkNoAuth, zk_session
from dr_toolkit.zk.fencing import Fence
from drt_servers.kdc import Kdc
from drt_servers.process import ManagedProcess
from tests.support.fixtures_failover import write_topology
from tests.support.fixtures_kerberos import kerberos_env, without_kerberos_env

pytestmark = [pytest.mark.integration]
SASL_CONN = json.dumps({"conn_type": "zookeeper", "extra": {"sasl": {"mechanism": "GSSAPI"}}})


def drt(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in without_kerberos_env().items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=full, timeout=120)


def creds(k: Kdc, user: str) -> Credentials:
    return Credentials(extra={"sasl": {"mechanism": "GSSAPI"}, "principal": k.principal(user),
                              "keytab": str(k.keytab(user)), "krb5_conf": str(k.krb5_conf)})


def plain_client(port: int) -> Any:
    from kazoo.client import KazooClient

    c = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
    c.start(timeout=10)
    return c


def test_fence_is_armed_and_read_as_the_principal_and_no_one_else_changes_it(
        zk_secure: ManagedProcess, kdc: Kdc, tmp_path: Path) -> None:
    from kazoo.exceptions import NoAuthError
    from kazoo.security import ACL, Id, Permissions

    cfg = write_topology(tmp_path, zk=f"localhost:{zk_secure.port}", zk_conn_id="zk_krb")
    root = yaml.safe_load(cfg.read_text())["clusters"]["hot"]["zookeeper"]["dr_root"]
    ep = ZooKeeperEndpoint(quorum=f"localhost:{zk_secure.port}", dr_root=root)
    with zk_session(ep, credentials=creds(kdc, "drt")) as zk:
        fence = Fence(zk, root)
        st = fence.bump(fenced_cluster="hot", by="kerberos-test")
        fence.set_read_only("hot", True, epoch=st.epoch, by="kerberos-test")
    assert st.epoch == 1

    # read back through `drt`, as the principal of the environment and the connection's sasl
    env = {**kerberos_env(kdc), "AIRFLOW_CONN_ZK_KRB": SASL_CONN}
    r = drt("--json", "--config", str(cfg), "failover", "fence-status", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    assert snap["fencing"]["epoch"] == 1 and snap["read_only"] == ["hot"]

    # the znodes belong to the principal; the world may only read them
    c = plain_client(zk_secure.port)
    try:
        fencing = f"{root}/fencing"
        before, _ = c.get(fencing)
        acls, _ = c.get_acls(fencing)
        assert set(acls) == {ACL(Permissions.ALL, Id("sasl", "drt@DRT.TEST")),
                             ACL(Permissions.READ, Id("world", "anyone"))}
        for attempt in (lambda: c.set(fencing, b'{"epoch": 0}'), lambda: c.delete(f"{root}/read-only/hot"),
                        lambda: c.create(f"{root}/active-cluster", b'{"cluster": "hot"}')):
            with pytest.raises(NoAuthError):
                attempt()
        assert c.get(fencing)[0] == before and c.exists(f"{root}/active-cluster") is None
    finally:
        c.stop()
        c.close()

    # another principal of the realm authenticates, and is refused too
    with zk_session(ep, credentials=creds(kdc, "other")) as other:
        with pytest.raises(ZkNoAuth):
            other.set(f"{root}/fencing", b'{"epoch": 0}', -1)
        assert Fence(other, root).state().epoch == 1


@pytest.mark.parametrize("case", ["missing keytab", "unknown principal"])
def test_fence_credential_problems_are_one_line_exit_3(zk_secure: ManagedProcess, kdc: Kdc, tmp_path: Path,
                                                       case: str) -> None:
    cfg = write_topology(tmp_path, zk=f"localhost:{zk_secure.port}", zk_conn_id="zk_krb")
    if case == "missing keytab":
        env, named = kerberos_env(kdc, keytab=tmp_path / "gone.keytab"), "drt@DRT.TEST"
    else:
        env, named = kerberos_env(kdc, principal="nobody@DRT.TEST"), "nobody@DRT.TEST"
    r = drt("failover", "fence-status", "--config", str(cfg), cwd=tmp_path, env={**env, "AIRFLOW_CONN_ZK_KRB": SASL_CONN})
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("drt: error: ") and "Traceback" not in r.stderr, r.stderr
    assert named in lines[0] and "—" in lines[0], lines[0]
