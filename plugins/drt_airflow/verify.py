"""Airflow side of capability 1.4: run a topology's verify policy (verifyrep on Spark).

The verification runs in the task's process: it needs a Spark session there (local mode by
default, or the master/conf of the hot cluster's ``spark`` section in the topology). A
deployment that must not run Spark on Airflow workers submits the same job with
``spark-submit dr_toolkit/cli/spark_submit.py verify-policy NAME`` instead (see
:mod:`dr_toolkit.cli.spark_submit`). Reports are written to the policy's ``report_dir`` (or
``failover.reports_dir``) with a timestamped name and kept; the ledger records each run.
XCom carries counters and the report path only — no row values, no credentials.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseOperator

from drt_airflow.links import VerifyReportLink

log = logging.getLogger(__name__)
SUMMARY_FIELDS = ("GOODROWS", "BADROWS", "ONLY_IN_SOURCE_TABLE_ROWS", "ONLY_IN_PEER_TABLE_ROWS",
                  "CONTENT_DIFFERENT_ROWS", "source_rows", "peer_rows", "duration_s", "report_path", "report_id",
                  "buckets_compared", "buckets_differing", "name")


def policy_names(only: list[str] | None = None) -> list[str]:
    """The verify policies of the topology (all, or those of ``only`` that exist)."""
    from drt_airflow.hooks import DrtHook

    names = [p.name for p in DrtHook().configured_topology().policies.verify]
    if only:
        missing = sorted(set(only) - set(names))
        if missing:
            raise ValueError(f"no verify policy named {', '.join(missing)}; known: {', '.join(names) or 'none'}")
        names = [n for n in names if n in only]
    return names


def run_policy(name: str) -> dict[str, Any]:
    """Run the verify policy ``name``; return a summary fit for XCom."""
    from dr_toolkit.verify.api import verify_policy
    from drt_airflow.hooks import DrtHook

    topo, access, ledger = DrtHook().get_conn()
    result = verify_policy(topo, name, ledger, access=access)
    out = {k: v for k, v in result.to_json().items() if k in SUMMARY_FIELDS}
    log.info("verify %s: GOODROWS=%d BADROWS=%d (only in source %d, only in peer %d, content %d); report %s",
             name, out["GOODROWS"], out["BADROWS"], out["ONLY_IN_SOURCE_TABLE_ROWS"],
             out["ONLY_IN_PEER_TABLE_ROWS"], out["CONTENT_DIFFERENT_ROWS"], out["report_path"])
    return out


class VerifyOperator(BaseOperator):
    """Verify one dataset of the topology's ``policies.verify`` against its replica.

    Fails (after writing the report and the ledger row) when BADROWS > 0, unless
    ``fail_on_differences=False``.
    """

    template_fields = ("policy",)
    ui_color = "#d8f3dc"
    operator_extra_links = (VerifyReportLink(),)

    def __init__(self, *, policy: str, fail_on_differences: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.fail_on_differences = fail_on_differences

    def execute(self, context: Any) -> dict[str, Any]:
        out = run_policy(self.policy)
        if out["BADROWS"] and self.fail_on_differences:
            from airflow.sdk.exceptions import AirflowException

            raise AirflowException(f"verify {self.policy}: {out['BADROWS']} bad rows "
                                   f"(report {out['report_path']})")
        return out


def latest_reports(names: list[str]) -> dict[str, Any]:
    """The newest ledger report per policy: what the run produced, for the summary task."""
    from drt_airflow.hooks import DrtHook

    _topo, _access, ledger = DrtHook().get_conn()
    out: dict[str, Any] = {}
    for n in names:
        rows = ledger.verify_reports(name=n, limit=1)
        out[n] = ({"goodrows": rows[0]["goodrows"], "badrows": rows[0]["badrows"],
                   "report_path": rows[0]["report_path"], "finished_at": rows[0]["finished_at"]}
                  if rows else None)
    return {"policies": out, "all_good": all(v is not None and v["badrows"] == 0 for v in out.values())}
