"""`drt verify` of a dataset on one kerberized HDFS against its replica on another (issue 41): Spark's
own Hadoop client (WebHdfsFileSystem in the driver JVM, SPNEGO) reads both sides as the principal,
configured the way Spark users configure Kerberos — ``spark.kerberos.principal``/``keytab`` (spark-submit
logs in from the keytab), a Hadoop configuration directory saying ``hadoop.security.authentication:
kerberos`` (``HADOOP_CONF_DIR``, as on an edge node) and the realm's krb5.conf for the JVM. The library
sets none of it itself yet. Without those settings Spark's reads are refused ("Authentication
required", exit 2)."""

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
    env = {k: v for k, v in without_kerberos_env().items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    env.update({**kerberos_env(kdc), **spark_env()})
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.kerberos.principal {kdc.principal('drt')}\n"
        f"spark.kerberos.keytab {kdc.keytab('drt')}\n"
        f"spark.driver.extraJavaOptions -Djava.security.krb5.conf={kdc.krb5_conf}\n")
    hconf = tmp_path / "hadoop-conf"
    hconf.mkdir()
    (hconf / "core-site.xml").write_text(
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value></property>"
        # the test KDC's tickets last 12 s: the JVM may log in again after 1 s (60 s by default)
        "<property><name>hadoop.kerberos.min.seconds.before.relogin</name><value>1</value></property>"
        "</configuration>\n")
    env["SPARK_CONF_DIR"] = str(conf)
    env["HADOOP_CONF_DIR"] = str(hconf)
    env["SPARK_SUBMIT_OPTS"] = f"-Djava.security.krb5.conf={kdc.krb5_conf}"
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--json", "-v", "verify",
                        hdfs_secure.uri("/kv/src"), hdfs_secure_cold.uri("/kv/dst"), "--key", "id", "--buckets", "4",
                        "--spark-master", "local[2]"], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=500)
    assert r.returncode == 1, r.stderr[-3000:]  # a difference found: exit 1
    out = json.loads(r.stdout)
    assert (out["GOODROWS"], out["BADROWS"], out["CONTENT_DIFFERENT_ROWS"]) == (19, 1, 1), out
    assert out["source_rows"] == out["peer_rows"] == 20 and out["column_mismatches"] == {"v": 1}, out
