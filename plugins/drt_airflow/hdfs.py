"""Airflow side of capability 1.1 (file replication): the operator that runs one HDFS
policy of the topology (the ``dr_hdfs_replication__<policy>`` DAGs of
:mod:`drt_airflow.policy_dags`), and the helpers the manual ``dr_hdfs_replication`` DAG maps over.

Credentials: each cluster's ``hdfs.conn_id`` / ``s3.conn_id`` is resolved through Airflow's
connections and passed to the library as a value; nothing secret reaches XCom or the logs.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseOperator

from dr_toolkit.errors import ProblemFound

log = logging.getLogger(__name__)
SUMMARY = ("target", "mode", "mode_reason", "files_total", "files_copied", "bytes_copied", "files_skipped",
           "files_deleted", "files_failed", "manifest_id", "duration_s", "fallback_count")


def policy_names(only: str | None = None) -> list[str]:
    """HDFS policies to run now: ``only`` when given, else every policy. (When each policy is
    due is Airflow's decision: see :mod:`drt_airflow.policy_dags`.)"""
    from drt_airflow.hooks import DrtHook

    topo = DrtHook().configured_topology()
    names = [p.name for p in topo.policies.hdfs]
    if only:
        if only not in names:
            raise ProblemFound(f"no HDFS policy named {only!r}", where=topo.source_file,
                               hint=f"HDFS policies: {', '.join(names) or 'none'}")
        return [only]
    return names


def summarize(results: Any) -> dict[str, Any]:
    """One report over the summaries of :func:`run_policy` (one dict or a list of them)."""
    rows = [results] if isinstance(results, dict) else list(results)
    return {"policies": [r["policy"] for r in rows],
            "files_copied": sum(t["files_copied"] or 0 for r in rows for t in r["targets"]),
            "bytes_copied": sum(t["bytes_copied"] or 0 for r in rows for t in r["targets"]),
            "files_failed": sum(r["files_failed"] for r in rows)}


def run_policy(policy: str, *, dry_run: bool = False, engine: str | None = None) -> dict[str, Any]:
    """Run one policy (all its targets); a summary fit for XCom. Raises when files failed."""
    from dr_toolkit.copy.api import replicate_policy
    from drt_airflow.hooks import DrtHook

    topo, access, ledger = DrtHook().get_conn()
    results = replicate_policy(topo, policy, ledger, dry_run=dry_run, engine=engine, access=access)
    rows = []
    for r in results:
        d = r.to_json()
        rows.append({k: d.get(k) for k in SUMMARY})
        log.info("%s → %s: %s (%s); copied %d files / %d bytes, deleted %d, failed %d", r.source, r.target,
                 r.mode, r.mode_reason, r.files_copied, r.bytes_copied, r.files_deleted, r.files_failed)
        for f in r.failures[:20]:
            log.error("failed: %s: %s", f["path"], f["error"])
    out: dict[str, Any] = {"policy": policy, "dry_run": dry_run, "targets": rows,
           "files_failed": sum(int(x["files_failed"] or 0) for x in rows)}
    if out["files_failed"]:
        raise ProblemFound(f"policy {policy}: {out['files_failed']} file(s) failed to copy",
                           hint="see the task log; the next run retries them")
    changing = [r.target for r in results if not r.listing_proven]
    if changing:
        raise ProblemFound(f"policy {policy}: the source kept changing while it was listed (targets "
                           f"{', '.join(changing)}): deletions deferred, no safe time from this run",
                           hint="the next run lists again; set snapshots: true for an atomic listing")
    if not dry_run:
        # the full check of the new run, recorded as the proof the gate's quick path (the DR page,
        # dr_rpo_watch) rests on; a check that states no safe time records nothing (said in the log)
        from dr_toolkit.copy.signals import prove_policy

        for sig in prove_policy(topo, policy, ledger, access):
            p = sig.detail.get("proof") or {}
            log.info("%s: gate proof %s", sig.name, "recorded" if p.get("recorded")
                     else f"not recorded ({p.get('why') or sig.reason})")
            out.setdefault("proofs", {})[sig.name] = bool(p.get("recorded"))
    return out


class HdfsReplicationOperator(BaseOperator):
    """Replicate one HDFS policy of the topology to each of its targets (``drt replicate``)."""

    # ``plan_only``, not ``dry_run``: that name is BaseOperator.dry_run(), which an attribute would shadow
    template_fields = ("policy", "engine", "plan_only")

    def __init__(self, *, policy: str, engine: str | None = None, dry_run: bool | str = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.engine = engine
        self.plan_only = dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        dry = self.plan_only if isinstance(self.plan_only, bool) else str(self.plan_only).lower() in ("true", "1")
        return run_policy(self.policy, dry_run=dry, engine=self.engine or None)
