"""The dr-toolkit Airflow plugin: a DR status view in the Airflow UI.

Airflow 3 plugins serve pages as FastAPI apps (``fastapi_apps``) and link them into the UI
(``external_views``). The view at ``/dr-toolkit/`` shows each caught-up signal, the
verdict and the recovery point (the gate, read live and recorded in the ledger's
``gate_checks``), the fencing state, the last runs of each dr-toolkit DAG, the last
verification reports, and **history charts** (inline SVG drawn here, no script, no CDN) of the
recovery point's age (RPO) and each component's lag over the last days (``?days=N``, default
7), downsampled by the ledger keeping each bucket's worst value. The RPO SLO
(``failover.rpo_slo_s``) is drawn as a pink line; a breach (the live check's RPO above the SLO,
or no recovery point) is a red banner, and breaching buckets are red points.
``/dr-toolkit/status.json`` serves the same data. Both need an authenticated Airflow user (the UI's session cookie or a bearer
token); a browser that opens a page without one (the link the demo prints, in a fresh browser) is
sent to Airflow's login with ``next`` = the page, and comes back to it after logging in; a script
still gets 401. Nothing secret is shown: signals, runs and reports hold no credentials.
"""

from __future__ import annotations

import html
import logging
import re
import threading
import time
from typing import Any
from urllib.parse import quote

from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)

DAG_IDS = ("dr_hdfs_replication", "dr_kafka_offsets", "dr_hbase_replication", "dr_verify", "dr_failover",
           "dr_reprotect", "dr_rpo_watch")
URL_PREFIX = "/dr-toolkit"
_CACHE: dict[str, Any] = {}
CACHE_S = 60.0  # the live gate talks to every component (seconds when one is down): its age is shown
HISTORY_DAYS = 7.0
HISTORY_BUCKETS = 288  # 35 min per point over 7 days

# Chakra UI's palette (Airflow 3's UI), so the view matches the frame around it.
BLUE, PINK, RED, GREEN, GRAY, TEXT = "#3182CE", "#D53F8C", "#E53E3E", "#38A169", "#E2E8F0", "#4A5568"
COMPONENT_COLOURS = {"hdfs": "#319795", "hbase": "#805AD5", "kafka": "#DD6B20", "verify": "#00A3C4"}


def _topology_path() -> str | None:
    from drt_airflow.hooks import topology_path

    return topology_path()


def _dag_ids(path: str | None) -> list[str]:
    """This deployment's DAGs: the per-policy ones come from the topology (see policy_dags)."""
    if path:
        try:
            from dr_toolkit.topology import load_topology
            from drt_airflow.policy_dags import dag_ids

            return list(dict.fromkeys([*dag_ids(load_topology(path)), *DAG_IDS]))
        except Exception:  # noqa: BLE001 - the topology error is shown by the gate below
            pass
    return list(DAG_IDS)


def _dag_runs(dag_ids: list[str], limit: int = 5) -> dict[str, list[dict[str, Any]]]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    out: dict[str, list[dict[str, Any]]] = {}
    with create_session() as session:
        for dag_id in dag_ids:
            rows = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)
                                   .order_by(DagRun.id.desc()).limit(limit)).all()
            out[dag_id] = [{"run_id": r.run_id, "state": str(r.state),
                            "start_date": r.start_date.isoformat(timespec="seconds") if r.start_date else None,
                            "end_date": r.end_date.isoformat(timespec="seconds") if r.end_date else None}
                           for r in rows]
    return out


_REFRESH_LOCK = threading.Lock()
_REFRESHING: dict[str, threading.Thread] = {}


def _key(days: float) -> tuple[str | None, float, str]:
    path = _topology_path()
    days = min(90.0, max(0.01, float(days)))
    return path, days, f"{path or ''}|{days:g}"


def _refresh(path: str | None, days: float, key: str, who: str | None) -> threading.Thread:
    """The live check of ``key`` in a background thread (one at a time per key): its document
    goes to the cache."""
    with _REFRESH_LOCK:
        running = _REFRESHING.get(key)
        if running is not None and running.is_alive():
            return running

        def work() -> None:
            try:
                _CACHE[key] = (time.monotonic(), _live(path, days, who))
            except Exception:  # _live reports its errors in the document: this one is a bug, logged
                log.exception("the DR page's live check failed")

        t = threading.Thread(target=work, name=f"drt-dr-page-{key}", daemon=True)
        _REFRESHING[key] = t
        t.start()
        return t


def status(days: float = HISTORY_DAYS, who: str | None = None) -> dict[str, Any]:
    """Everything the view shows, from a live check (cached for :data:`CACHE_S`: the gate talks to
    every component). An uncached call runs the gate once — or waits for the one already running —
    and records that check (source ``ui``, actor ``who``: the Airflow user who opened the page)."""
    path, days, key = _key(days)
    hit = _CACHE.get(key)
    if hit and time.monotonic() - hit[0] < CACHE_S:
        return dict(hit[1])
    _refresh(path, days, key, who).join()
    hit = _CACHE.get(key)
    return dict(hit[1]) if hit else _live(path, days, who)


def page_status(days: float = HISTORY_DAYS, who: str | None = None) -> dict[str, Any]:
    """What the page shows at once (issue 43 #5): the cached live check while fresh; else the last
    one (stale) or, on the first load, the ledger's last recorded verdict — with a live check
    started behind (the page reloads itself when ``status.json``, which waits for it, answers).
    With servers down a live check takes the components' timeouts; the page does not."""
    path, days, key = _key(days)
    hit = _CACHE.get(key)
    if hit and time.monotonic() - hit[0] < CACHE_S:
        return dict(hit[1])
    _refresh(path, days, key, who)
    if hit:
        return {**hit[1], "refreshing": True}
    return _recorded(path, days)


def _history(ledger: Any, days: float) -> dict[str, Any]:
    """The ledger's gate-check history over ``days``; when the checks recorded cover less than a
    quarter of that window (fresh data: a demo, a new deployment), the window shrinks to them so
    each chart shows their course (a 7-day chart of the last 20 minutes was one dot, its NO_GO
    episode invisible). ``window_days`` then says what was asked."""
    hist: dict[str, Any] = ledger.gate_check_history(days=days, buckets=HISTORY_BUCKETS)
    if not hist["buckets"]:
        return hist
    span = hist["until"] - hist["buckets"][0]["start"]  # the oldest check is in the first bucket
    if span >= (hist["until"] - hist["since"]) / 4:
        return hist
    for _ in range(2):  # each pass's finer buckets bound the oldest check closer
        hist = {**ledger.gate_check_history(days=max(span * 1.05, 300.0) / 86400, buckets=HISTORY_BUCKETS),
                "window_days": days}
        if not hist["buckets"]:
            break
        span = hist["until"] - hist["buckets"][0]["start"]
        if span >= 0.8 * (hist["until"] - hist["since"]):
            break
    return hist


def _add_dag_runs(doc: dict[str, Any], path: str | None) -> None:
    """The toolkit's DAG runs into the page's document; a failure is shown and the rest goes on."""
    try:
        doc["dag_runs"] = _dag_runs(_dag_ids(path))
    except Exception as exc:  # noqa: BLE001 - show the rest
        doc["dag_runs"] = {}
        doc["errors"].append(f"DAG runs: {type(exc).__name__}: {exc}")


def _recorded(path: str | None, days: float) -> dict[str, Any]:
    """The page's document from the ledger alone: the last recorded gate check as the verdict,
    the history, reports and runs (no component is asked)."""
    doc: dict[str, Any] = {"generated_at": None, "recorded": True, "errors": [], "history": None, "slo": None,
                           "gate": None, "verify_reports": [], "failover_runs": []}
    _add_dag_runs(doc, path)
    if not path:
        doc["errors"].append("no topology: set the Airflow Variable drt_config or DRT_CONFIG")
        return doc
    try:
        from dr_toolkit.failover.gate import slo_breach
        from drt_airflow.hooks import DrtHook

        topo, _access, ledger = DrtHook(config=path).get_conn()
        doc["clusters"] = {"hot": topo.hot_name, "cold": topo.cold_name}
        rows = ledger.gate_checks(limit=1)
        if rows:
            r = rows[0]
            doc["generated_at"] = r["checked_at"]
            doc["recorded_by"] = r.get("source")
            doc["gate"] = {"verdict": r["verdict"], "recovery_point": _iso(r.get("recovery_point")),
                           "reasons": r.get("reasons") or [], "fence": {},
                           "signals": [{"component": c.get("component"), "name": c.get("name"),
                                        "caught_up": bool(c.get("caught_up")), "lag_s": c.get("lag_s"),
                                        "safe_time": _iso(c.get("safe_time")), "basis": "", "reason": ""}
                                       for c in (r.get("components") or {}).values()]}
            slo = topo.failover.rpo_slo_s
            rpo = r.get("rpo_s")
            doc["slo"] = {"rpo_slo_s": slo, "rpo_s": rpo, "breach": slo_breach(rpo, slo, r.get("limiting")),
                          "max_lag_s": topo.failover.max_lag_s}
        doc["history"] = _history(ledger, days)
        doc.update(_ledger_lists(ledger))
    except Exception as exc:  # noqa: BLE001 - an error is shown, never hidden
        from dr_toolkit.secrets import redact

        doc["errors"].append(redact(f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"))
    return doc


def _ledger_lists(ledger: Any) -> dict[str, Any]:
    """The page's newest verification reports and failover runs, from the ledger."""
    return {"verify_reports": [{k: r.get(k) for k in ("report_id", "name", "source", "target", "goodrows",
                                                      "badrows", "finished_at", "report_path")}
                               for r in ledger.verify_reports(limit=10)],
            "failover_runs": [{k: r.get(k) for k in ("run_id", "status", "execute", "actor", "reason",
                                                     "started_at")} for r in ledger.failover_runs(limit=5)]}


def _iso(t: float | None) -> str | None:
    from dr_toolkit.signal import iso

    return None if t is None else iso(float(t))


_EPOCH = re.compile(r"(?<![\w.:-])1[5-9]\d{8}(?:\.\d+)?(?![\w.:-])")


def iso_epochs(text: str) -> str:
    """Every epoch-seconds value in a basis or reason (``read at 1795921594.364``) as ISO 8601 UTC:
    the page shows times, never epoch seconds (issue 43 #5)."""
    return _EPOCH.sub(lambda m: _iso(float(m.group(0))) or m.group(0), text)


def _live(path: str | None, days: float, who: str | None) -> dict[str, Any]:
    """The page's document from a live gate check (recorded, source ``ui``)."""
    doc: dict[str, Any] = {"generated_at": time.time(), "errors": [], "history": None, "slo": None}
    _add_dag_runs(doc, path)
    if not path:
        doc["errors"].append("no topology: set the Airflow Variable drt_config or DRT_CONFIG")
        doc["gate"], doc["verify_reports"], doc["failover_runs"] = None, [], []
    else:
        try:
            from dr_toolkit.failover.gate import check, slo_breach
            from drt_airflow.hooks import DrtHook

            topo, access, ledger = DrtHook(config=path).get_conn()
            doc["clusters"] = {"hot": topo.hot_name, "cold": topo.cold_name}
            res = check(topo, ledger, access=access, record="ui", who=who, hdfs="quick")  # never a full listing
            doc["gate"] = res.to_json()
            slo = topo.failover.rpo_slo_s
            doc["slo"] = {"rpo_slo_s": slo, "rpo_s": res.rpo_s, "breach": slo_breach(res.rpo_s, slo, res.limiting),
                          "max_lag_s": topo.failover.max_lag_s}
            doc["history"] = _history(ledger, days)
            doc.update(_ledger_lists(ledger))
        except Exception as exc:  # noqa: BLE001 - an error is shown, never hidden
            from dr_toolkit.secrets import redact

            doc["gate"], doc["verify_reports"], doc["failover_runs"] = None, [], []
            doc["errors"].append(redact(f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"))
    return doc


def _t(v: float | None) -> str:
    from dr_toolkit.htmlkit import ts

    return "-" if not v else ts(v)


def _lag(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}s"


def _dur(v: float) -> str:
    """Seconds as a short duration: 45s, 1.5m, 2h, 1.2d."""
    from dr_toolkit.htmlkit import dur

    return dur(v)


_NICE = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0,
         21600.0, 43200.0, 86400.0)


def svg_chart(chart_id: str, title: str, since: float, until: float, points: list[tuple[float, float | None]],
              *, colour: str, slo: float | None = None, unknown: tuple[float, ...] | list[float] = (),
              width: int = 900, height: int = 220) -> str:
    """A time-series chart as inline SVG: ``points`` (t, value or None for a gap) as a line,
    ``slo`` a horizontal pink line with the values above it as red points, ``unknown`` (times
    with no value at all, e.g. no recovery point) as red marks on the top edge."""
    e = html.escape
    left, right, top, bottom = 56, 16, 24, 28
    pw, ph = width - left - right, height - top - bottom
    vals = [v for _, v in points if v is not None]
    raw = max([*vals, slo or 0.0, 1.0]) * 1.1 / 4
    step = next((n for n in _NICE if n >= raw), 86400.0 * (int(raw // 86400) + 1))
    vmax = step * 4
    span = max(until - since, 1e-9)

    def x(t: float) -> int:
        return left + round((t - since) / span * pw)

    def y(v: float) -> int:
        return top + ph - round(v / vmax * ph)

    parts = [f'<svg id="{e(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{e(title)}">',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#FFFFFF"/>',
             f'<text x="{left}" y="15" font-size="13" fill="{TEXT}" font-weight="600">{e(title)}</text>']
    for i in range(5):  # horizontal grid and y labels
        g = vmax * i / 4
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(g)}" y2="{y(g)}" stroke="{GRAY}" '
                     f'shape-rendering="crispEdges"/>'
                     f'<text x="{left - 6}" y="{y(g) + 4}" font-size="11" fill="{TEXT}" '
                     f'text-anchor="end">{_dur(g)}</text>')
    for i in range(5):  # time labels
        t = since + span * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(f'<text x="{x(t)}" y="{height - 8}" font-size="11" fill="{TEXT}" text-anchor="{anchor}">'
                     f'{time.strftime("%m-%d %H:%M", time.gmtime(t))}</text>')
    run: list[str] = []
    runs: list[list[str]] = [run]
    for t, v in points:
        if v is None:
            run = []
            runs.append(run)
        else:
            run.append(f"{x(t)},{y(v)}")
    for r in runs:
        if len(r) > 1:
            parts.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2" '
                         f'points="{" ".join(r)}"/>')
        elif r:
            cx, cy = r[0].split(",")
            parts.append(f'<circle class="series" cx="{cx}" cy="{cy}" r="3" fill="{colour}"/>')
    if slo is not None:
        parts.append(f'<line id="{e(chart_id)}-slo" class="slo" x1="{left}" x2="{left + pw}" y1="{y(slo)}" '
                     f'y2="{y(slo)}" stroke="{PINK}" stroke-width="3" shape-rendering="crispEdges"/>'
                     f'<text x="{left + pw - 4}" y="{y(slo) - 6}" font-size="11" fill="{PINK}" '
                     f'text-anchor="end">SLO {_dur(slo)}</text>')
        for t, v in points:
            if v is not None and v > slo:
                parts.append(f'<circle class="breach" cx="{x(t)}" cy="{y(v)}" r="4" fill="{RED}"/>')
    for t in unknown:
        parts.append(f'<rect class="unknown" x="{x(t) - 2}" y="{top}" width="4" height="10" fill="{RED}"/>')
    if not points and not unknown:
        parts.append(f'<text x="{left + pw // 2}" y="{top + ph // 2}" font-size="13" fill="{TEXT}" '
                     f'text-anchor="middle">no gate checks recorded in this window</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_history(doc: dict[str, Any]) -> str:
    """The SLO banner and the RPO and per-component lag charts (empty when there is no history)."""
    e = html.escape
    hist = doc.get("history")
    slo_doc = doc.get("slo") or {}
    slo = slo_doc.get("rpo_slo_s")
    if slo_doc.get("breach"):
        banner = f'<div id="slo-banner" class="banner breach">{e(slo_doc["breach"])}</div>'
    elif slo is None:
        banner = ('<div id="slo-banner" class="banner none">No RPO SLO set: add <code>failover.rpo_slo_s</code> '
                  'to the topology to be alerted when the recovery point ages.</div>')
    elif doc.get("gate"):
        rpo = slo_doc.get("rpo_s")
        banner = (f'<div id="slo-banner" class="banner ok">RPO {_dur(rpo or 0)} within the SLO of '
                  f'{_dur(slo)}</div>')
    else:
        banner = ""
    if not hist:
        return banner
    buckets = hist["buckets"]
    mid = [(b["start"] + b["end"]) / 2 for b in buckets]
    rpo_pts = [(t, b["rpo_s"]) for t, b in zip(mid, buckets, strict=True)]
    unknown = [t for t, b in zip(mid, buckets, strict=True) if b["no_recovery_point"]]
    breaches = sum(1 for _, v in rpo_pts if slo is not None and v is not None and v > slo) + \
        (len(unknown) if slo is not None else 0)
    days = (hist["until"] - hist["since"]) / 86400
    span = (f"since the first recorded check ({_dur(hist['until'] - hist['since'])}; none in the last "
            f"{hist['window_days']:g} days before it)" if hist.get("window_days") else f"last {days:g} days")
    out = [banner, f'<h2 id="history-span">Recovery point age (RPO), {span}</h2>',
           f'<p class="muted">{hist["checks"]} recorded gate checks, one point per {_dur(hist["bucket_s"])} '
           f'(the worst check of each); red marks on top: no recovery point could be stated'
           + (f'; <span id="breach-count">{breaches}</span> breaching point(s)' if slo is not None else '')
           + '</p>',
           svg_chart("rpo-chart", "recovery point age" + (f" (SLO {_dur(slo)})" if slo else ""),
                     hist["since"], hist["until"], rpo_pts, colour=BLUE, slo=slo, unknown=unknown)]
    comps = sorted({c for b in buckets for c in b["lag"]})
    if comps:
        out.append("<h2>Lag per component</h2>")
    for c in comps:
        pts = [(t, b["lag"].get(c)) for t, b in zip(mid, buckets, strict=True)]
        out.append(svg_chart(f"lag-chart-{c}", f"{c} lag (largest over its signals)", hist["since"], hist["until"],
                             pts, colour=COMPONENT_COLOURS.get(c, BLUE), height=150))
    return "".join(out)


def cluster_state(doc: dict[str, Any]) -> str:
    """Which cluster is active, as HTML: after a failover "failed over: cold is active since T, by X";
    "unknown" with the reason when the fencing state (ZooKeeper) cannot be read."""
    e = html.escape
    gate = doc.get("gate") or {}
    if doc.get("recorded"):
        return "Active cluster <b id='active-cluster'>being checked</b>"
    if not gate:
        return "Active cluster <b id='active-cluster'>unknown</b> — the gate did not run (see the errors below)"
    unread = next((r for r in gate.get("reasons", []) if r.startswith("fencing state unreadable")), None)
    if unread:
        return f"Active cluster <b id='active-cluster'>unknown</b> — {e(unread)}"
    active = (gate.get("fence") or {}).get("active") or {}
    names = doc.get("clusters") or {}
    if not active.get("cluster"):
        hot = names.get("hot")
        return ("Active cluster <b id='active-cluster'>" + e(str(hot or "not recorded")) + "</b>"
                + (" (no failover recorded: the hot cluster)" if hot else " (no failover recorded)"))
    who = active.get("by") or "unknown"
    since = _t(active.get("at"))
    rp = (f", at recovery point <b id='promoted-at'>{e(str(active['recovery_point']))}</b>"
          if active.get("recovery_point") else "")
    if names.get("cold") and active["cluster"] == names["cold"]:
        return (f"<b id='failed-over'>Failed over</b>: active cluster <b id='active-cluster'>{e(active['cluster'])}</b> "
                f"since {e(since)}, by {e(str(who))}{rp} — the verdict below is about replicating "
                f"{e(str(names.get('hot')))} → {e(str(names.get('cold')))}, which is no longer the direction of "
                "service; nothing protects it until a re-protect (DAG <code>dr_reprotect</code>, "
                "<code>drt failover reprotect</code>)")
    out = f"Active cluster <b id='active-cluster'>{e(active['cluster'])}</b> since {e(since)}, by {e(str(who))}"
    direction = (gate.get("fence") or {}).get("direction") or {}
    if direction.get("hot") == active["cluster"] and direction.get("cold") == names.get("cold"):
        out += (f"; protected onto <b id='protected-onto'>{e(str(direction['cold']))}</b> since "
                f"{e(_t(direction.get('at')))} (re-protect run {e(str(direction.get('run_id')))})")
    return out


_CSS = """
  .banner { padding: 10px 14px; border-radius: 6px; margin: .8em 0; font-weight: 600; }
  .banner.breach { background: #E53E3E; color: #FFFFFF; } .banner.ok { background: #C6F6D5; color: #22543D; }
  .banner.none { background: #EDF2F7; color: #4A5568; font-weight: 400; }
  #verdict.GO { color: #1a7f37; } #verdict.NO_GO { color: #cf222e; }
  svg.chart { display: block; border: 1px solid #E2E8F0; border-radius: 6px; margin-bottom: .8em; }
"""


def render(doc: dict[str, Any]) -> str:
    """The DR page (the shared page shell, style and tables of :mod:`dr_toolkit.htmlkit`)."""
    from dr_toolkit import htmlkit as H

    e = H.esc
    gate = doc.get("gate") or {}
    verdict = gate.get("verdict", "UNKNOWN")
    sig_rows = [H.tr([e(s["component"]), e(s["name"]), "yes" if s["caught_up"] else "no", _lag(s["lag_s"]),
                      e(s.get("safe_time") or "none"), e(iso_epochs(s.get("basis") or "")),
                      e(iso_epochs(s.get("reason") or ""))],
                     cls="ok" if s["caught_up"] else "bad", attrs={"data-component": s["component"]})
                for s in gate.get("signals", [])]
    reasons = "".join(f"<li>{e(iso_epochs(r))}</li>" for r in gate.get("reasons", []))
    runs = [[f"<a href='/dags/{quote(dag_id)}'>{e(dag_id)}</a>",
             f"<a href='/dags/{quote(dag_id)}/runs/{quote(r['run_id'], safe='')}'>{e(r['run_id'])}</a>",
             f"<td class='{e(r['state'])}'>{e(r['state'])}</td>", e(r["start_date"] or "-"), e(r["end_date"] or "-")]
            for dag_id, rs in doc.get("dag_runs", {}).items() for r in (rs or [])]
    empty = [d for d, rs in doc.get("dag_runs", {}).items() if not rs]
    reports = [[e(str(r["name"] or r["source"])), str(r["goodrows"]),
                f"<td class='{'bad' if r['badrows'] else 'ok'}'>{r['badrows']}</td>", _t(r["finished_at"]),
                f"<a href='{URL_PREFIX}/reports/{e(str(r['report_id']))}'>{e(str(r['report_path']))}</a>"
                if r.get("report_path") and r.get("report_id") else "-"]
               for r in doc.get("verify_reports", [])]
    fo = [[f"<a href='{URL_PREFIX}/reports/{e(r['run_id'])}'>{e(r['run_id'])}</a>",
           f"<td class='{e(str(r['status']))}'>{e(str(r['status']))}</td>",
           "execute" if r["execute"] else "dry run", e(str(r["actor"])), e(str(r["reason"] or ""))]
          for r in doc.get("failover_runs", [])]
    state_line = cluster_state(doc)
    fence = gate.get("fence") or {}
    epoch = (fence.get("fencing") or {}).get("epoch", "-")
    age = max(0.0, time.time() - float(doc.get("generated_at") or time.time()))
    errors = "".join(f"<li>{e(x)}</li>" for x in doc.get("errors", []))
    if doc.get("recorded"):
        checked = ((f"(the last recorded check, of {_t(doc.get('generated_at'))}, {age:.0f}s ago, by "
                    f"{e(str(doc.get('recorded_by') or '-'))}" if doc.get("generated_at") else "(no check recorded yet")
                   + "; a live check is running: this page reloads when it is done)")
    elif doc.get("refreshing"):
        checked = (f"(live check of {_t(doc.get('generated_at'))}, {age:.0f}s ago; a new one is running: this page "
                   "reloads when it is done)")
    else:
        checked = f"(live check of {_t(doc.get('generated_at'))}, {age:.0f}s ago; re-run at most\nevery {CACHE_S:.0f}s)"
    reload = "true" if doc.get("recorded") or doc.get("refreshing") else "false"
    body = f"""<h1>DR status</h1>
<p id="state">{state_line} (fencing epoch {e(str(epoch))})</p>
<p>Verdict <b id="verdict" class="{e(verdict)}">{e(verdict)}</b> &middot; recovery point
<b id="recovery-point">{e(str(gate.get('recovery_point') or 'unknown'))}</b>
<span class="muted" id="checked">{checked}</span></p>
<ul id="reasons">{reasons}</ul>
{render_history(doc)}
<h2>Signals</h2>{H.table(["component", "name", "caught up", "lag", "safe time", "basis", "why"], sig_rows,
                         id="signals")}
<h2>Last DAG runs</h2>{H.table(["DAG", "run", "state", "started", "ended"], runs, id="dag-runs",
                               empty="no runs yet")}<p class="muted">no runs yet: {e(', '.join(empty)) or '-'}</p>
<h2>Last verification reports</h2>{H.table(["dataset", "GOODROWS", "BADROWS", "finished", "report"], reports,
                                           id="verify-reports", empty="no verification reports yet")}
<h2>Failover runs</h2>{H.table(["run (its report)", "status", "mode", "who", "reason"], fo, id="failover-runs",
                               empty="no failover runs yet")}
<ul id="errors">{errors}</ul>
<p>Generated {_t(doc.get('generated_at'))} &middot; <span id="live">static</span></p>"""
    script = f"""<script>
fetch("{URL_PREFIX}/status.json" + location.search, {{credentials: "same-origin"}}).then(r => r.json()).then(d => {{
  if ({reload}) {{ location.reload(); return; }}
  const v = d.gate ? d.gate.verdict : "UNKNOWN";
  document.getElementById("live").textContent = "live: " + v + " (" + (d.gate ? d.gate.signals.length : 0)
    + " signals)";
}}).catch(e => {{ document.getElementById("live").textContent = "live update failed: " + e; }});
</script>"""
    return H.page("DR status — dr-toolkit", body, css=_CSS, script=script)


def report_html(report_id: str) -> str | None:
    """The HTML of the verification report or failover run ``report_id`` as the ledger records it
    (only files the ledger names: a verification report's path, a failover run's report in
    ``failover.reports_dir``), or None."""
    from drt_airflow.hooks import DrtHook

    path = _topology_path()
    if not path:
        return None
    topo, _access, ledger = DrtHook(config=path).get_conn()
    if ledger.failover_run(report_id) is not None:
        try:
            text: str = (topo.reports_dir() / f"{report_id}.html").read_text(encoding="utf-8")
            return text
        except OSError:
            return None
    for r in ledger.verify_reports(limit=1000):
        if r.get("report_id") == report_id and r.get("report_path"):
            try:
                with open(r["report_path"], encoding="utf-8") as f:
                    return f.read()
            except OSError:
                return None
    return None


def login_url(root_path: str, next_url: str) -> str:
    """Airflow's login entry (``/api/v2/auth/login?next=…``) seen from this app, mounted at
    :data:`URL_PREFIX` under ``root_path`` (Airflow behind a path prefix keeps it)."""
    from urllib.parse import urlencode

    outer = root_path[:-len(URL_PREFIX)] if root_path.endswith(URL_PREFIX) else root_path
    return f"{outer.rstrip('/')}/api/v2/auth/login?{urlencode({'next': next_url})}"


def _app() -> Any:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends, FastAPI, Request, Response
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.responses import HTMLResponse, RedirectResponse
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException as StarletteHTTPException

    app = FastAPI(title="dr-toolkit DR status", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(StarletteHTTPException)
    async def login_first(request: Request, exc: StarletteHTTPException) -> Response:
        """A browser opening a page without a session (401, Accept: text/html) is redirected to
        Airflow's login (``/api/v2/auth/login``: whichever auth manager is configured) with
        ``next`` = this page; anything else (status.json, a script) gets the error as it was."""
        if exc.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(login_url(request.scope.get("root_path", ""), str(request.url)), status_code=307)
        return await http_exception_handler(request, exc)

    def who(user: Any) -> str:
        try:
            return f"airflow:{user.get_name()}"
        except Exception:  # noqa: BLE001 - the check is still recorded, under the server's actor
            return "airflow:unknown"

    @app.get("/", response_class=HTMLResponse)
    async def view(days: float = HISTORY_DAYS, user: Any = Depends(get_user)) -> HTMLResponse:
        return HTMLResponse(render(await run_in_threadpool(page_status, days, who(user))))

    @app.get("/reports/{report_id}", response_class=HTMLResponse)
    async def report(report_id: str, user: Any = Depends(get_user)) -> HTMLResponse:
        """A verification report's or a failover run's HTML, by its ledger id (only files the ledger names)."""
        text = await run_in_threadpool(report_html, report_id)
        if text is None:
            return HTMLResponse(f"<p>no report {html.escape(report_id)} in the ledger</p>", status_code=404)
        return HTMLResponse(text)

    @app.get("/status.json")
    async def status_json(days: float = HISTORY_DAYS, user: Any = Depends(get_user)) -> dict[str, Any]:
        return await run_in_threadpool(status, days, who(user))

    return app


class DrToolkitPlugin(AirflowPlugin):
    name = "dr_toolkit"
    fastapi_apps = [{"app": _app(), "url_prefix": URL_PREFIX, "name": "dr-toolkit DR status"}]
    external_views = [{"name": "DR status", "href": f"{URL_PREFIX}/", "destination": "nav",
                       "url_route": "dr-status", "category": "browse"}]
