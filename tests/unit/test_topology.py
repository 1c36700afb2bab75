"""The topology file: the examples validate; mistakes name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import load_topology, parse_topology, validate_cluster_key

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["embedded.yaml", "production.yaml"])
def test_examples_validate(name: str) -> None:
    topo = load_topology(EXAMPLES / name)
    assert topo.hot.role == "hot" and topo.cold.role == "cold"
    assert topo.policies.hdfs


def test_broken_example_names_file_line_field() -> None:
    with pytest.raises(ConfigError) as ei:
        load_topology(EXAMPLES / "broken.yaml")
    assert ei.value.exit_code == 2
    assert "broken.yaml:9" in str(ei.value)
    assert "clusters.hot.kafka.bootstrap_server" in str(ei.value)


BASE = """\
version: 1
clusters:
  a: {role: hot, local_root: /tmp/a}
  b: {role: cold, local_root: /tmp/b}
"""


def test_two_hot_clusters_refused() -> None:
    with pytest.raises(ConfigError, match="exactly one hot and one cold"):
        parse_topology(BASE.replace("role: cold", "role: hot"), "t.yaml")


def test_secret_in_file_refused_with_line() -> None:
    text = BASE + "ledger:\n  url: sqlite:///x.db\n  password: hunter2\n"
    with pytest.raises(ConfigError) as ei:
        parse_topology(text, "t.yaml")
    assert "t.yaml:7" in str(ei.value) and "hunter2" not in str(ei.value)


def test_ledger_url_with_password_refused() -> None:
    with pytest.raises(ConfigError, match="password"):
        parse_topology(BASE + "ledger: {url: 'postgresql://u:pw@h/db'}\n", "t.yaml")


def test_delete_needs_update_or_overwrite() -> None:
    text = BASE + ("policies:\n  hdfs:\n    - name: p\n      source: hdfs://a/x\n      targets: [hdfs://b/x]\n"
                   "      options: {update: false, delete: true}\n")
    with pytest.raises(ConfigError, match="delete needs update or overwrite") as ei:
        parse_topology(text, "t.yaml")
    assert "t.yaml:" in str(ei.value)


def test_yaml_syntax_error_has_line() -> None:
    with pytest.raises(ConfigError, match=r"t.yaml:3"):
        parse_topology("version: 1\nclusters:\n\ta: 1\n", "t.yaml")


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_topology("/nonexistent/drt.yaml")


def test_cluster_key() -> None:
    assert validate_cluster_key("zk1,zk2:2181:/hbase") == (["zk1", "zk2"], 2181, "/hbase")
    for bad in ("zk1:2181", "zk1:abc:/hbase", "zk1:2181:hbase", ""):
        with pytest.raises(ConfigError, match="cluster key"):
            validate_cluster_key(bad)


def test_unreadable_files_are_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_topology(tmp_path / "bin.yaml")
    with pytest.raises(ConfigError, match="cannot read the topology file"):
        load_topology(tmp_path)
    for text in ("", "- a\n- b\n", "just a string\n"):
        with pytest.raises(ConfigError, match="must be a mapping"):
            parse_topology(text, "t.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_topology("a: 1\n---\nb: 2\n", "t.yaml")  # two documents
    monkeypatch.setenv("DRT_CONFIG", str(EXAMPLES / "production.yaml"))
    assert load_topology().hot_name == "prod"  # $DRT_CONFIG when no path is given


def test_models_are_built_on_first_use_only() -> None:
    """Importing the topology builds no validator (start-up); the first parse builds them all."""
    import subprocess
    import sys

    code = ("import dr_toolkit.topology as t, sys\n"
            "print(t.Topology.__pydantic_complete__, 'yaml' in sys.modules)\n"
            f"t.load_topology({str(EXAMPLES / 'embedded.yaml')!r})\n"
            "print(t.Topology.__pydantic_complete__, 'yaml' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True", "True"]
