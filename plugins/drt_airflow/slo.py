"""The RPO SLO inside Airflow: one check any DAG can run, a metric, and a task that fails on breach.

:func:`check_rpo` runs the caught-up gate with the topology's credentials (``DrtHook``) — its HDFS
part the quick check (``hdfs="quick"``: from the last recorded full proof, never a listing) —, records
the check in the ledger (``gate_checks``: the DR view's history), and emits through Airflow's
metrics (StatsD / OpenTelemetry, as configured in ``[metrics]``):

- ``dr_toolkit.rpo_seconds`` (gauge): the recovery point's age; not sent when none can be stated;
- ``dr_toolkit.rpo_slo_seconds`` (gauge): ``failover.rpo_slo_s``, when set;
- ``dr_toolkit.rpo_slo_breach`` (counter): +1 per check that finds the SLO breached.

:func:`enforce_rpo_slo` does the same and raises :class:`AirflowFailException` (no retry) with
the reason in one line when the SLO is breached, so the task fails and Airflow's own alerting
(``on_failure_callback``, email, notifiers) fires. The rule itself is the library's
(:func:`dr_toolkit.failover.gate.slo_breach`): no recovery point is a breach; no SLO never is.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

METRIC_RPO = "dr_toolkit.rpo_seconds"
METRIC_SLO = "dr_toolkit.rpo_slo_seconds"
METRIC_BREACH = "dr_toolkit.rpo_slo_breach"


def emit_metrics(rpo_s: float | None, slo_s: float | None, breached: bool) -> None:
    """Send the RPO metrics through Airflow's Stats (a no-op when metrics are off)."""
    from airflow.sdk.observability.stats import Stats

    if rpo_s is not None:
        Stats.gauge(METRIC_RPO, rpo_s)
    if slo_s is not None:
        Stats.gauge(METRIC_SLO, slo_s)
    if breached:
        Stats.incr(METRIC_BREACH)


def check_rpo(source: str, *, hook: Any = None, timeout_s: float | None = None) -> dict[str, Any]:
    """Run the gate (recorded as ``source``), emit the metrics; the outcome as a JSON-able dict
    (what goes to XCom: verdict, recovery point, RPO, SLO, breach reason, recorded row id)."""
    from dr_toolkit.failover.gate import check, slo_breach
    from drt_airflow.hooks import DrtHook

    topo, access, ledger = (hook or DrtHook()).get_conn()
    res = check(topo, ledger, access=access, record=source, timeout_s=timeout_s, hdfs="quick")  # no full listing
    slo = topo.failover.rpo_slo_s
    reason = slo_breach(res.rpo_s, slo, res.limiting)
    emit_metrics(res.rpo_s, slo, reason is not None)
    out = {"verdict": res.verdict, "recovery_point": res.to_json()["recovery_point"],
           "rpo_s": None if res.rpo_s is None else round(res.rpo_s, 3), "rpo_slo_s": slo,
           "breached": reason is not None, "reason": reason, "recorded": res.recorded}
    if res.record_error:
        out["record_error"] = res.record_error
        log.warning("%s", res.record_error)
    if slo is None:
        log.warning("no RPO SLO set (failover.rpo_slo_s): the check is recorded, nothing can breach")
    return out


def enforce_rpo_slo(source: str, *, hook: Any = None, timeout_s: float | None = None) -> dict[str, Any]:
    """:func:`check_rpo`, then fail the task (no retry) when the SLO is breached."""
    from airflow.sdk.exceptions import AirflowFailException

    out = check_rpo(source, hook=hook, timeout_s=timeout_s)
    if out["breached"]:
        raise AirflowFailException(out["reason"])
    log.info("RPO %s within SLO %s (verdict %s)", "-" if out["rpo_s"] is None else f"{out['rpo_s']:.0f}s",
             "-" if out["rpo_slo_s"] is None else f"{out['rpo_slo_s']:g}s", out["verdict"])
    return out
