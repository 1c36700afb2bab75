"""The dr-toolkit Airflow plugin: a DR status view in the Airflow UI.

Airflow 3 plugins serve pages as FastAPI apps (``fastapi_apps``) and link them into the UI
(``external_views``). The view at ``/dr-toolkit/`` shows each caught-up signal, the
verdict and the recovery point (the gate, read live), the fencing state, the last runs of
each dr-toolkit DAG and the last verification reports. ``/dr-toolkit/status.json`` serves
the same data. Both need an authenticated Airflow user (the UI's session cookie or a bearer
token). Nothing secret is shown: signals, runs and reports hold no credentials.
"""

from __future__ import annotations

import html
import logging
import os
import time
from typing import Any

from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)

DAG_IDS = ("dr_hdfs_replication", "dr_kafka_offsets", "dr_hbase_replication", "dr_verify", "dr_failover")
URL_PREFIX = "/dr-toolkit"
_CACHE: dict[str, Any] = {}
CACHE_S = 10.0


def _topology_path() -> str | None:
    try:
        from airflow.models.variable import Variable

        v = Variable.get("drt_config", default_var=None)
        if v:
            return str(v)
    except Exception:  # noqa: BLE001 - the Variable is optional
        pass
    return os.environ.get("DRT_CONFIG")


def _dag_runs(limit: int = 5) -> dict[str, list[dict[str, Any]]]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    out: dict[str, list[dict[str, Any]]] = {}
    with create_session() as session:
        for dag_id in DAG_IDS:
            rows = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)
                                   .order_by(DagRun.id.desc()).limit(limit)).all()
            out[dag_id] = [{"run_id": r.run_id, "state": str(r.state),
                            "start_date": r.start_date.isoformat(timespec="seconds") if r.start_date else None,
                            "end_date": r.end_date.isoformat(timespec="seconds") if r.end_date else None}
                           for r in rows]
    return out


def status() -> dict[str, Any]:
    """Everything the view shows (cached for a few seconds: the gate talks to every component)."""
    path = _topology_path()
    hit = _CACHE.get(path or "")
    if hit and time.monotonic() - hit[0] < CACHE_S:
        return dict(hit[1])
    doc: dict[str, Any] = {"generated_at": time.time(), "errors": []}
    try:
        doc["dag_runs"] = _dag_runs()
    except Exception as exc:  # noqa: BLE001 - show the rest
        doc["dag_runs"] = {}
        doc["errors"].append(f"DAG runs: {type(exc).__name__}: {exc}")
    if not path:
        doc["errors"].append("no topology: set the Airflow Variable drt_config or DRT_CONFIG")
        doc["gate"], doc["verify_reports"], doc["failover_runs"] = None, [], []
    else:
        try:
            from dr_toolkit.failover.gate import check
            from drt_airflow.hooks import DrtHook

            topo, access, ledger = DrtHook(config=path).get_conn()
            doc["gate"] = check(topo, ledger, access=access).to_json()
            doc["verify_reports"] = [{k: r.get(k) for k in ("report_id", "name", "source", "target", "goodrows",
                                                            "badrows", "finished_at", "report_path")}
                                     for r in ledger.verify_reports(limit=10)]
            doc["failover_runs"] = [{k: r.get(k) for k in ("run_id", "status", "execute", "actor", "reason",
                                                           "started_at")} for r in ledger.failover_runs(limit=5)]
        except Exception as exc:  # noqa: BLE001 - an error is shown, never hidden
            from dr_toolkit.secrets import redact

            doc["gate"], doc["verify_reports"], doc["failover_runs"] = None, [], []
            doc["errors"].append(redact(f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"))
    _CACHE[path or ""] = (time.monotonic(), doc)
    return doc


def _t(v: float | None) -> str:
    return "-" if not v else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(v))


def _lag(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}s"


def render(doc: dict[str, Any]) -> str:
    e = html.escape
    gate = doc.get("gate") or {}
    verdict = gate.get("verdict", "UNKNOWN")
    sig_rows = "".join(
        f"<tr class='{'ok' if s['caught_up'] else 'bad'}' data-component='{e(s['component'])}'>"
        f"<td>{e(s['component'])}</td><td>{e(s['name'])}</td><td>{'yes' if s['caught_up'] else 'no'}</td>"
        f"<td>{_lag(s['lag_s'])}</td><td>{e(s.get('reason') or '')}</td></tr>"
        for s in gate.get("signals", []))
    reasons = "".join(f"<li>{e(r)}</li>" for r in gate.get("reasons", []))
    runs = "".join(
        f"<tr><td>{e(dag_id)}</td><td>{e(r['run_id'])}</td><td class='{e(r['state'])}'>{e(r['state'])}</td>"
        f"<td>{e(r['start_date'] or '-')}</td><td>{e(r['end_date'] or '-')}</td></tr>"
        for dag_id, rs in doc.get("dag_runs", {}).items() for r in (rs or [])) or \
        "<tr><td colspan='5'>no runs yet</td></tr>"
    empty = [d for d, rs in doc.get("dag_runs", {}).items() if not rs]
    reports = "".join(
        f"<tr><td>{e(str(r['name'] or r['source']))}</td><td>{r['goodrows']}</td>"
        f"<td class='{'bad' if r['badrows'] else 'ok'}'>{r['badrows']}</td><td>{_t(r['finished_at'])}</td>"
        f"<td>{e(str(r['report_path'] or '-'))}</td></tr>" for r in doc.get("verify_reports", [])) or \
        "<tr><td colspan='5'>no verification reports yet</td></tr>"
    fo = "".join(f"<tr><td>{e(r['run_id'])}</td><td>{e(str(r['status']))}</td>"
                 f"<td>{'execute' if r['execute'] else 'dry run'}</td><td>{e(str(r['actor']))}</td>"
                 f"<td>{e(str(r['reason'] or ''))}</td></tr>" for r in doc.get("failover_runs", []))
    fence = gate.get("fence") or {}
    active = (fence.get("active") or {}).get("cluster", "not set")
    epoch = (fence.get("fencing") or {}).get("epoch", "-")
    errors = "".join(f"<li>{e(x)}</li>" for x in doc.get("errors", []))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>DR status — dr-toolkit</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5em}}table{{border-collapse:collapse;margin-bottom:1em}}
td,th{{border:1px solid #ccc;padding:3px 8px}}.ok{{background:#e6f7e6}}.bad,.failed{{background:#fde2e2}}
#verdict.GO{{color:#080}}#verdict.NO_GO{{color:#b00}}</style></head><body>
<h1>DR status</h1>
<p>Verdict <b id="verdict" class="{e(verdict)}">{e(verdict)}</b> &middot; recovery point
<b id="recovery-point">{e(str(gate.get('recovery_point') or 'unknown'))}</b> &middot; active cluster
<b id="active-cluster">{e(str(active))}</b> (fencing epoch {e(str(epoch))})</p>
<ul id="reasons">{reasons}</ul>
<h2>Signals</h2><table id="signals"><tr><th>component</th><th>name</th><th>caught up</th><th>lag</th>
<th>why</th></tr>{sig_rows}</table>
<h2>Last DAG runs</h2><table id="dag-runs"><tr><th>DAG</th><th>run</th><th>state</th><th>started</th>
<th>ended</th></tr>{runs}</table><p class="muted">no runs yet: {e(', '.join(empty)) or '-'}</p>
<h2>Last verification reports</h2><table id="verify-reports"><tr><th>dataset</th><th>GOODROWS</th>
<th>BADROWS</th><th>finished</th><th>report</th></tr>{reports}</table>
<h2>Failover runs</h2><table id="failover-runs"><tr><th>run</th><th>status</th><th>mode</th><th>who</th>
<th>reason</th></tr>{fo}</table>
<ul id="errors">{errors}</ul>
<p>Generated {_t(doc.get('generated_at'))} &middot; <span id="live">static</span></p>
<script>
fetch("{URL_PREFIX}/status.json", {{credentials: "same-origin"}}).then(r => r.json()).then(d => {{
  const v = d.gate ? d.gate.verdict : "UNKNOWN";
  document.getElementById("live").textContent = "live: " + v + " (" + (d.gate ? d.gate.signals.length : 0)
    + " signals)";
}}).catch(e => {{ document.getElementById("live").textContent = "live update failed: " + e; }});
</script></body></html>"""


def _app() -> Any:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends, FastAPI
    from fastapi.responses import HTMLResponse
    from starlette.concurrency import run_in_threadpool

    app = FastAPI(title="dr-toolkit DR status", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse, dependencies=[Depends(get_user)])
    async def view() -> HTMLResponse:
        return HTMLResponse(render(await run_in_threadpool(status)))

    @app.get("/status.json", dependencies=[Depends(get_user)])
    async def status_json() -> dict[str, Any]:
        return await run_in_threadpool(status)

    return app


class DrToolkitPlugin(AirflowPlugin):
    name = "dr_toolkit"
    fastapi_apps = [{"app": _app(), "url_prefix": URL_PREFIX, "name": "dr-toolkit DR status"}]
    external_views = [{"name": "DR status", "href": f"{URL_PREFIX}/", "destination": "nav",
                       "url_route": "dr-status", "category": "browse"}]
