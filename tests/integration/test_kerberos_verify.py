"""`drt verify` of a dataset on one kerberized HDFS against its replica on another (issue 41): Spark's
own Hadoop client (WebHdfsFileSystem in the driver JVM, SPNEGO) reads both sides as the principal the
environment names (``DRT_KERBEROS_PRINCIPAL``/``DRT_KERBEROS_KEYTAB``, krb5.conf from ``KRB5_CONFIG``) —
nothing of Spark's Kerberos settings is set here: the session builder derives them
(``spark.kerberos.principal``/``keytab``, a Hadoop configuration directory saying
``hadoop.security.authentication: kerberos``, ``-Djava.security.krb5.conf`` for the driver JVM;
:func:`dr_toolkit.spark.session.kerberos_launch`). Without them Spark's reads are refused
("Authentication required", exit 2)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from drt_servers.hdfs import HdfsCluster
from drt_servers.kdc import Kdc
from tests.support.fixtures_kerberos import kerberos_env, without_kerberos_env
from tests.support.servers import spark_env

pytestmark = [pytest.mark.integration]


def _parquet(h: HdfsCluster, path: str, rows: list[dict[str, object]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    h.write(f"{path}/part-0.parquet", buf.getvalue())


def test_verify_compares_datasets_on_kerberized_hdfs(hdfs_secure: HdfsCluster, hdfs_secure_cold: HdfsCluster, kdc: Kdc,
                                                      tmp_path: Path) -> None:
    rows = [{"id": i, "v": f"x{i}"} for i in range(20)]
    _parquet(hdfs_secure, "/kv/src", rows)
    hdfs_secure_cold.client().makedirs("/kv", permission="777")
    _parquet(hdfs_secure_cold, "/kv/dst", [*rows[:-1], {"id": 19, "v": "changed"}])
    env = {k: v for k, v in without_kerberos_env().items()
           if k not in ("DRT_CONFIG", "DRT_LEDGER_URL", "HADOOP_CONF_DIR", "SPARK_CONF_DIR", "SPARK_SUBMIT_OPTS")}
    env.update({**kerberos_env(kdc), **spark_env()})  # DRT_KERBEROS_PRINCIPAL/KEYTAB, KRB5_CONFIG
    # The test KDC's tickets last 12 s: the JVM may log in again after 1 s (Hadoop's default is 60 s).
    # A Hadoop setting, not Kerberos's: the library keeps it and adds hadoop.security.authentication.
    hconf = tmp_path / "hadoop-conf"
    hconf.mkdir()
    (hconf / "core-site.xml").write_text(
        "<configuration><property><name>hadoop.kerberos.min.seconds.before.relogin</name><value>1</value>"
        "</property></configuration>\n")
    env["HADOOP_CONF_DIR"] = str(hconf)
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "-v", "verify",
                        hdfs_secure.uri("/kv/src"), hdfs_secure_cold.uri("/kv/dst"), "--key", "id", "--buckets", "4",
                        "--spark-master", "local[2]"], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=500)
    (tmp_path / "drt-stderr.txt").write_text(r.stderr)  # kept in the test's directory for a look after a failure
    assert r.returncode == 1, r.stderr[-3000:]  # a difference found: exit 1
    out = json.loads(r.stdout)
    assert (out["GOODROWS"], out["BADROWS"], out["CONTENT_DIFFERENT_ROWS"]) == (19, 1, 1), out
    assert out["source_rows"] == out["peer_rows"] == 20 and out["column_mismatches"] == {"v": 1}, out
    assert str(kdc.keytab("drt")) not in r.stderr + r.stdout  # the keytab's path is not logged
