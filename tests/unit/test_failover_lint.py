"""Metadata lint: hot-cluster namenodes, hosts, buckets and hdfs://hot URIs in replicated config."""

from __future__ import annotations

import json
import subprocess
import sys

from dr_toolkit.failover.lint import lint
from dr_toolkit.topology import load_topology


def _topology(tmp_path):
    (tmp_path / "cold" / "warehouse" / "conf").mkdir(parents=True)
    path = tmp_path / "drt.yaml"
    path.write_text(f"""
version: 1
clusters:
  prod-east:
    role: hot
    hdfs: {{namenodes: ["http://nn1.east.example:9870", "http://nn2.east.example:9870"]}}
    s3: {{bucket: east-landing}}
    zookeeper: {{quorum: "zk1.east.example:2181,zk2.east.example:2181"}}
    kafka: {{bootstrap_servers: "kafka1.east.example:9092"}}
  prod-west:
    role: cold
    local_root: {tmp_path / 'cold'}
    zookeeper: {{quorum: "zk1.west.example:2181"}}
    kafka: {{bootstrap_servers: "kafka1.west.example:9092"}}
policies:
  hdfs:
    - {{name: wh, source: "hdfs://prod-east/warehouse", targets: ["hdfs://prod-west/warehouse"]}}
ledger: {{url: "sqlite:///{tmp_path / 'l.db'}"}}
""")
    return path


def test_finds_every_kind_of_hot_value_in_replicated_config_and_nothing_in_clean_files(tmp_path) -> None:
    path = _topology(tmp_path)
    conf = tmp_path / "cold" / "warehouse" / "conf"
    (conf / "hive-site.xml").write_text(
        "<configuration>\n<property><name>fs.defaultFS</name><value>hdfs://nn1.east.example:8020</value>"
        "</property>\n<property><name>x</name><value>hdfs://prod-east/warehouse/t</value></property>\n"
        "</configuration>\n")
    (conf / "app.properties").write_text("zk=zk2.east.example:2181\nbootstrap=kafka1.east.example:9092\n"
                                         "ok=zk1.west.example:2181\n")
    (conf / "table.json").write_text(json.dumps({"location": "s3a://east-landing/raw/t"}) + "\n")
    (conf / "clean.yaml").write_text("fs: hdfs://prod-west/warehouse\nhost: nn1.west.example\n"
                                     "note: nn1.east.example.org is another host\n")
    (conf / "data.parquet").write_text("hdfs://prod-east/ is in data, not metadata")  # not scanned
    res = lint(load_topology(path))
    found = {(f["path"].rsplit("/", 1)[1], f["line"], f["kind"]) for f in res["findings"]}
    assert found == {("hive-site.xml", 2, "namenode"), ("hive-site.xml", 3, "hdfs-uri"),
                     ("app.properties", 1, "zookeeper"), ("app.properties", 2, "kafka"),
                     ("table.json", 1, "bucket")}
    assert res["files_scanned"] == 4 and res["clean"] is False


def test_cli_lint_exits_1_with_findings_and_0_when_clean_and_scans_extra_paths(tmp_path) -> None:
    path = _topology(tmp_path)
    extra = tmp_path / "catalog-dump.txt"
    extra.write_text("LOCATION 'hdfs://prod-east/warehouse/orders'\n")
    cmd = [sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(path), "--json", "failover", "lint"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["clean"] is True
    r = subprocess.run([*cmd, "--path", str(extra)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert [(f["kind"], f["line"]) for f in doc["findings"]] == [("hdfs-uri", 1)]
