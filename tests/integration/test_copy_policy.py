"""`drt replicate POLICY` and the API the failover gate reads: one run per target under the
policy's lease, runs, manifests and watermarks in the ledger, and `pending` without copying."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dr_toolkit.access import Access
from dr_toolkit.cli.main import main
from dr_toolkit.copy.api import pending, replicate_policy
from dr_toolkit.errors import LeaseHeld
from dr_toolkit.fs import open_fs
from dr_toolkit.ledger import Ledger
from dr_toolkit.topology import load_topology
from tests.support.fixtures_copy import sample_tree, tree_digest, write_copy_topology

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


@pytest.fixture
def policy_env(tmp_path: Path, webhdfs: Any, s3_bucket: str, s3_server: Any) -> dict[str, Any]:
    fs = open_fs(webhdfs.location("/data"), Access.from_env())
    files = sample_tree(10)
    for rel, data in files.items():
        fs.write_bytes(webhdfs.p(f"/data/{rel}"), data)
    cfg = write_copy_topology(tmp_path / "drt.yaml", namenodes=webhdfs.urls, cold_root=tmp_path / "cold",
                              source=webhdfs.p("/data"),
                              ledger_url=f"sqlite:///{tmp_path}/ledger.db", s3=(s3_server.endpoint_url, s3_bucket),
                              targets=["hdfs://cold/data", f"s3://{s3_bucket}/data"])
    topo = load_topology(cfg)
    return {"cfg": cfg, "topo": topo, "ledger": Ledger.open(topo.ledger.url), "fs": fs, "files": files,
            "bucket": s3_bucket, "cold": tmp_path / "cold", "hdfs": webhdfs}


def test_replicate_policy_records_runs_manifests_and_watermarks(policy_env: dict[str, Any]) -> None:
    topo, ledger = policy_env["topo"], policy_env["ledger"]
    before = pending(topo, "warehouse", ledger, Access.from_env())
    assert [p["files_pending"] for p in before] == [10, 10]
    assert all(p["watermark"] is None and p["last_run_status"] is None for p in before)

    results = replicate_policy(topo, "warehouse", ledger, access=Access.from_env())
    assert [r.mode for r in results] == ["bootstrap", "bootstrap"]
    assert all(r.files_copied == 10 and r.ok for r in results)
    assert tree_digest(policy_env["cold"] / "data") == {k: __import__("hashlib").md5(v).hexdigest()
                                                        for k, v in policy_env["files"].items()}
    runs = ledger.runs(policy="warehouse")
    assert {r["status"] for r in runs} == {"succeeded"} and len(runs) == 2
    for r in results:
        m = ledger.manifest(r.manifest_id)
        assert m is not None and m["entries"] == 10 and m["location"].endswith(f"{r.manifest_id}.jsonl.gz")
    # manifests live in the state location, never under the replica
    assert not (policy_env["cold"] / "data/.drt").exists()
    loc = Path(results[0].state_location.removeprefix("file://"))
    assert list(loc.rglob(f"{results[0].manifest_id}.jsonl.gz"))
    marks = {w["name"]: w for w in ledger.watermarks("hdfs")}
    assert set(marks) == {"warehouse:hdfs://cold/data", f"warehouse:s3://{policy_env['bucket']}/data"}
    assert all(w["watermark"] == r.watermark for w, r in zip(marks.values(), results, strict=False))

    policy_env["fs"].write_bytes(policy_env["hdfs"].p("/data/late.bin"), b"late")
    after = pending(topo, "warehouse", ledger, Access.from_env())
    assert [(p["files_pending"], p["bytes_pending"], p["last_run_status"]) for p in after] == [
        (1, 4, "succeeded"), (1, 4, "succeeded")]
    again = replicate_policy(topo, "warehouse", ledger, access=Access.from_env())
    assert [(r.mode, r.files_copied) for r in again] == [("fast-forward", 1), ("fast-forward", 1)]
    assert all(r.base_manifest_id == b.manifest_id for r, b in zip(again, results, strict=True))


def test_policy_lease_refuses_a_second_concurrent_run(policy_env: dict[str, Any]) -> None:
    topo, ledger = policy_env["topo"], policy_env["ledger"]
    with ledger.lease("policy:warehouse"), pytest.raises(LeaseHeld):
        replicate_policy(topo, "warehouse", ledger, access=Access.from_env())
    assert ledger.runs(policy="warehouse") == []


def test_drt_replicate_cli_json(policy_env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(policy_env["cfg"]), "replicate", "warehouse", "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["policy"] == "warehouse" and dry["files_copied"] == 20 and dry["files_total"] == 20
    assert not (policy_env["cold"] / "data").exists()
    assert main(["--config", str(policy_env["cfg"]), "replicate", "warehouse", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for k in ("files_total", "files_copied", "bytes_copied", "files_skipped", "files_deleted", "files_failed",
              "mode", "manifest_id", "duration_s", "policy"):
        assert k in out
    assert out["files_copied"] == 20 and out["mode"] == "bootstrap" and len(out["manifest_id"]) == 2
    assert main(["--config", str(policy_env["cfg"]), "replicate", "nope"]) == 2
