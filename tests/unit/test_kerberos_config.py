"""Where a principal's ticket comes from: a connection (login / extra) or the environment — never
the topology — and the one-line errors that need no KDC (a keytab that is not there, nothing
configured)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dr_toolkit.errors import EXIT_UNREACHABLE
from dr_toolkit.kerberos import Kerberos, KerberosConfig, KerberosError
from dr_toolkit.secrets import Credentials, lookup

ENV = {"DRT_KERBEROS_PRINCIPAL": "env@R", "DRT_KERBEROS_KEYTAB": "/k/env.keytab", "KRB5CCNAME": "FILE:/c",
       "KRB5_CONFIG": "/etc/krb5.conf"}


def test_a_connection_with_a_keytab_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_HDFS_KRB", '{"conn_type": "webhdfs", "login": "svc@R", '
                                                '"extra": {"keytab": "/k/svc.keytab", "krb5_conf": "/r/krb5.conf"}}')
    cfg = KerberosConfig.from_credentials(lookup("hdfs_krb"), ENV)
    assert (cfg.principal, cfg.keytab, cfg.ccache, cfg.krb5_conf, cfg.source) == \
        ("svc@R", "/k/svc.keytab", None, "/r/krb5.conf", "connection")
    # extra.principal wins over login (a login may be a plain user name for something else)
    cfg = KerberosConfig.from_credentials(Credentials(login="u", extra={"principal": "p@R", "keytab": "/k"}), ENV)
    assert cfg.principal == "p@R"


def test_without_kerberos_in_the_connection_the_environment_answers() -> None:
    assert KerberosConfig.from_credentials(None, ENV) == KerberosConfig("env@R", "/k/env.keytab", "FILE:/c",
                                                                        "/etc/krb5.conf")
    # a connection with only a login names the principal; the keytab comes from the environment
    cfg = KerberosConfig.from_credentials(Credentials(login="svc@R"), {"DRT_KERBEROS_KEYTAB": "/k/x"})
    assert (cfg.principal, cfg.keytab) == ("svc@R", "/k/x")


def test_a_missing_keytab_is_exit_3_naming_the_principal(tmp_path: Path) -> None:
    k = Kerberos(KerberosConfig("svc@R", str(tmp_path / "gone.keytab")))
    with pytest.raises(KerberosError) as exc:
        k.credentials()
    assert exc.value.exit_code == EXIT_UNREACHABLE
    msg = exc.value.message
    assert "svc@R" in msg and str(tmp_path / "gone.keytab") in msg and "does not exist" in msg and "—" in msg


def test_nothing_configured_says_what_to_set() -> None:
    with pytest.raises(KerberosError) as exc:
        Kerberos(KerberosConfig())
    assert "DRT_KERBEROS_PRINCIPAL" in exc.value.message and "kinit" in exc.value.message
