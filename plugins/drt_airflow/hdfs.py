"""Airflow side of capability 1.1 (file replication): the operator that runs one HDFS
policy of the topology, and the helpers the ``dr_hdfs_replication`` DAG maps over.

Credentials: each cluster's ``hdfs.conn_id`` / ``s3.conn_id`` is resolved through Airflow's
connections and passed to the library as a value; nothing secret reaches XCom or the logs.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from dr_toolkit.errors import ProblemFound

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)
_PRESETS = {"@hourly": 3600, "@daily": 86400, "@weekly": 7 * 86400, "@monthly": 28 * 86400, "@yearly": 365 * 86400}
SUMMARY = ("target", "mode", "mode_reason", "files_total", "files_copied", "bytes_copied", "files_skipped",
           "files_deleted", "files_failed", "manifest_id", "duration_s", "fallback_count")


def _due(schedule: str | None, last_finished: float | None, now: float) -> bool:
    """Whether a policy with this schedule is due, given when its last successful run ended."""
    if schedule is None:
        return False
    if last_finished is None:
        return True
    if schedule in _PRESETS:
        return now - last_finished >= _PRESETS[schedule] * 0.95
    from croniter import croniter

    nxt = croniter(schedule, last_finished).get_next(float)
    return bool(now >= nxt)


def policy_names(only: str | None = None, all_policies: bool = False) -> list[str]:
    """HDFS policies to run now: ``only`` when given, else every policy whose schedule is due."""
    from drt_airflow.hooks import DrtHook

    hook = DrtHook()
    topo = hook.topology()
    names = [p.name for p in topo.policies.hdfs]
    if only:
        if only not in names:
            raise ProblemFound(f"no HDFS policy named {only!r}", where=topo.source_file,
                               hint=f"HDFS policies: {', '.join(names) or 'none'}")
        return [only]
    if all_policies:
        return names
    ledger = hook.ledger(topo)
    now = time.time()
    due = []
    for p in topo.policies.hdfs:
        ok = [r for r in ledger.runs(policy=p.name, limit=50) if r["status"] == "succeeded"]
        if _due(p.schedule, ok[0]["finished_at"] if ok else None, now):
            due.append(p.name)
    log.info("HDFS policies due: %s (of %s)", due, names)
    return due


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
    out = {"policy": policy, "dry_run": dry_run, "targets": rows,
           "files_failed": sum(int(x["files_failed"] or 0) for x in rows)}
    if out["files_failed"]:
        raise ProblemFound(f"policy {policy}: {out['files_failed']} file(s) failed to copy",
                           hint="see the task log; the next run retries them")
    return out


class HdfsReplicationOperator(BaseOperator):
    """Replicate one HDFS policy of the topology to each of its targets (``drt replicate``)."""

    template_fields = ("policy", "engine", "dry_run")

    def __init__(self, *, policy: str, engine: str | None = None, dry_run: bool | str = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.engine = engine
        self.dry_run = dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        dry = self.dry_run if isinstance(self.dry_run, bool) else str(self.dry_run).lower() in ("true", "1")
        return run_policy(self.policy, dry_run=dry, engine=self.engine or None)
