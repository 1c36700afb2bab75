"""The failover report: one JSON document and one self-contained HTML page per failover run, in
``failover.reports_dir`` (``<run_id>.json``, ``<run_id>.html``), styled like the verification report
(:mod:`dr_toolkit.htmlkit`).

It is built from the ledger alone (the run's audit events), so a run whose steps ran in different
processes (the Airflow DAG: one task per step) reports the same as one CLI run. It states:

- the outcome (promoted, dry run, failed at a step, rejected), who, why;
- the recovery point, its age (RPO) and the signal that limits it; each signal's safe time and
  basis (planned: the gate; unplanned: the data-loss window per component, what cold holds);
- the Kafka remap: per group and partition, the committed offset on hot before the remap, the
  offset on cold after it, the method and how many records a consumer may read again;
- the approval (who, when, what was acknowledged), every step's last answer, and the audit trail
  — every event of the run, the report step's own included. A report written before its own
  event was recorded says which event it ends at (``audit_through``).

Every string is redacted before it is written (no secret reaches a report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit import htmlkit as H
from dr_toolkit.secrets import redact
from dr_toolkit.signal import iso

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

MAX_REMAP_ROWS = 2000


def reports_dir(topology: Topology) -> Path:
    return topology.reports_dir()


def scrub(value: Any) -> Any:
    """Round-trip through JSON with every string redacted (no secret reaches the ledger or a report)."""
    return json.loads(redact(json.dumps(value, default=str)))


def _last(events: list[dict[str, Any]], action: str, statuses: tuple[str, ...] = ("done",)) -> dict[str, Any]:
    """The after-state of the newest event of ``action`` with one of ``statuses`` ({} when none)."""
    for e in reversed(events):
        if e["action"] == action and e["status"] in statuses and isinstance(e.get("after_state"), dict):
            return dict(e["after_state"])
    return {}


def _steps(events: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Each step's last answer in the audit trail (``pending`` when it never ran)."""
    last: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.get("component") == "failover" and e["action"] in order:
            last[e["action"]] = e
    out = []
    for name in order:
        ev = last.get(name)
        if ev is None:
            out.append({"name": name, "status": "pending", "message": None, "at": None})
            continue
        status = str(ev["status"])
        if status == "done" and ev.get("dry_run"):
            status = "planned"
        out.append({"name": name, "status": status, "message": ev.get("message"), "at": ev.get("at")})
    return out


def _outcome(steps: list[dict[str, Any]], execute: bool) -> str:
    st = {s["name"]: s["status"] for s in steps}
    if st.get("approval") == "rejected":
        return "rejected"
    failed = next((s["name"] for s in steps if s["status"] == "failed"), None)
    if failed:
        return f"failed at {failed}"
    if not execute:
        return "dry run"
    if st.get("promote_cold") == "done":
        return "promoted"
    waiting = next((s["name"] for s in steps if s["status"] in ("started", "waiting")), None)
    return f"waiting at {waiting}" if waiting else "not finished"


def _recovery(events: list[dict[str, Any]], unplanned: bool) -> dict[str, Any]:
    """The recovery point the run promoted at (else the one it would), its RPO and limiting signal."""
    promoted = _last(events, "promote_cold").get("recovery") or {}
    if unplanned:
        window = _last(events, "recovery_point")
        comps = window.get("components") or []
        known = [c for c in comps if c.get("safe_time") is not None]
        limiting = min(known, key=lambda c: c["safe_time"]) if known else None
        rp = window.get("recovery_point_epoch")
        at = window.get("computed_at")
        base = {"recovery_point": window.get("recovery_point"), "recovery_point_epoch": rp,
                "limited_by": f"{limiting['component']} {limiting['name']}" if limiting else None,
                "as_of": at, "source": "the data-loss window (what cold holds)",
                "unbounded": window.get("unbounded") or []}
        computed = _epoch(at)
        base["rpo_s"] = None if rp is None or computed is None else round(max(0.0, computed - rp), 3)
    else:
        gate = _last(events, "final_gate")
        base = {"recovery_point": gate.get("recovery_point"), "recovery_point_epoch": gate.get("recovery_point_epoch"),
                "rpo_s": gate.get("rpo_s"), "limited_by": gate.get("recovery_point_from"),
                "as_of": gate.get("checked_at"), "source": "the final gate", "verdict": gate.get("verdict")}
    if promoted.get("recovery_point"):
        base.update({k: v for k, v in promoted.items() if v is not None})
        base["source"] = "the check at promotion"
    return base


def _epoch(t: str | None) -> float | None:
    if not t:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(t).timestamp()
    except ValueError:
        return None


def _remap(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Kafka remap table: the kafka_offsets plan, with whether kafka_apply wrote each group."""
    plan = _last(events, "kafka_offsets")
    applied = {str(g.get("group")): g for g in (_last(events, "kafka_apply").get("groups") or [])
               if isinstance(g, dict)}
    rows = []
    for g in plan.get("groups") or []:
        a = applied.get(str(g.get("group")))
        state = ("applied" if a.get("applied") else f"not applied: {a.get('reason') or 'unknown'}") if a else \
            "not applied yet"
        for p in g.get("partitions") or []:
            rows.append({"group": g.get("group"), "topic": p.get("topic"), "cold_topic": p.get("cold_topic"),
                         "partition": p.get("partition"), "before": p.get("source_offset"),
                         "after": p.get("target_offset"), "method": p.get("method"),
                         "may_reread": p.get("may_reread"), "applied": state})
    for g in plan.get("not_checkpointed") or []:
        rows.append({"group": g, "topic": None, "cold_topic": None, "partition": None, "before": None, "after": None,
                     "method": "never checkpointed", "may_reread": None, "applied": "not carried over"})
    return rows[:MAX_REMAP_ROWS]


def build(topology: Topology, ledger: Ledger, run_id: str, steps: list[str]) -> dict[str, Any]:
    """The report document of ``run_id`` from the ledger (``steps``: the run's step names, in order)."""
    events = ledger.audit_events(run_id=run_id, limit=1_000_000)
    run = ledger.failover_run(run_id) or {}
    started = next((e for e in events if e["action"] == "run" and e["status"] == "started"), None)
    unplanned = bool(((started or {}).get("after_state") or {}).get("unplanned"))
    execute = bool(run.get("execute"))
    step_rows = _steps(events, steps)
    gate = _last(events, "final_gate") or None
    window = _last(events, "recovery_point") or None
    decision = _last(events, "approval", ("done", "rejected")) or None
    audit = [{k: e.get(k) for k in ("at", "actor", "component", "action", "status", "dry_run", "message",
                                    "before_state", "after_state")} for e in events]
    last = audit[-1] if audit else None
    doc: dict[str, Any] = scrub({
        "run": {k: run.get(k) for k in ("run_id", "actor", "reason", "execute", "status", "started_at")},
        "hot": topology.hot_name, "cold": topology.cold_name, "unplanned": unplanned,
        "outcome": _outcome(step_rows, execute), "steps": step_rows,
        "recovery": _recovery(events, unplanned), "gate": gate, "loss_window": window, "decision": decision,
        "kafka_remap": _remap(events), "audit": audit,
        "audit_through": None if last is None else {"at": iso(last["at"]), "action": last["action"],
                                                      "status": last["status"], "events": len(audit)},
    })
    return doc


def write(topology: Topology, ledger: Ledger, run_id: str, steps: list[str]) -> dict[str, str]:
    """Write ``<reports_dir>/<run_id>.json`` and ``.html`` (atomically) and return their paths."""
    doc = build(topology, ledger, run_id, steps)
    out = reports_dir(topology)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / f"{run_id}.json", "html": out / f"{run_id}.html"}
    for kind, text in (("json", json.dumps(doc, indent=2, sort_keys=True, default=str)), ("html", render_html(doc))):
        tmp = paths[kind].with_name(f".{paths[kind].name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(paths[kind])
    return {k: str(v) for k, v in paths.items()}


# --- HTML -----------------------------------------------------------------------------------------

_e = H.esc


def _status_cell(status: str) -> str:
    return f'<td class="{_e(status)}">{_e(status)}</td>'


def _signals(doc: dict[str, Any]) -> str:
    rec = doc["recovery"]
    limiting = rec.get("limited_by")
    if doc["unplanned"]:
        comps = (doc.get("loss_window") or {}).get("components") or []
        rows = [H.tr([_e(c.get("component")), _e(c.get("name")), _e(c.get("safe_time_iso") or "none"),
                      _e(c.get("basis")), _e(c.get("window")), _e(c.get("known_missing") or "-"),
                      _e(c.get("unknowable")),
                      "limits the recovery point" if f"{c.get('component')} {c.get('name')}" == limiting else ""],
                     cls="limiting" if f"{c.get('component')} {c.get('name')}" == limiting else
                     ("bad" if c.get("safe_time") is None else None))
                for c in comps]
        return ("<h2>Data-loss window (unplanned): safe time per component</h2>"
                '<p class="note">Promoting cold loses, per component, what hot accepted after its safe time '
                "(read from what cold holds and the ledger only).</p>"
                + H.table(["component", "name", "safe time", "basis", "window lost", "known missing", "unknowable",
                           ""], rows, id="signals", empty="no component to judge"))
    sigs = (doc.get("gate") or {}).get("signals") or []
    rows = [H.tr([_e(s.get("component")), _e(s.get("name")), "yes" if s.get("caught_up") else "no",
                  _e(H.dur(s.get("lag_s"))), _e(s.get("safe_time") or "none"), _e(s.get("basis")),
                  _e(s.get("reason") or ""),
                  "limits the recovery point" if f"{s.get('component')} {s.get('name')}" == limiting else ""],
                 cls="limiting" if f"{s.get('component')} {s.get('name')}" == limiting else
                 ("ok" if s.get("caught_up") else "bad")) for s in sigs]
    checked = (doc.get("gate") or {}).get("checked_at")
    return (f'<h2>Safe time per signal</h2><p class="note">as read by the final gate at {_e(checked or "-")}</p>'
            + H.table(["component", "name", "caught up", "lag", "safe time", "basis", "why", ""], rows,
                      id="signals", empty="the final gate did not run"))


def _remap_html(doc: dict[str, Any]) -> str:
    rows = doc.get("kafka_remap") or []
    body = [H.tr([_e(r["group"]), _e(r["topic"] if r["topic"] == r["cold_topic"] or not r["topic"]
                                     else f"{r['topic']} → {r['cold_topic']}"),
                  f'<td class="num">{_e(r["partition"])}</td>', f'<td class="num">{_e(r["before"])}</td>',
                  f'<td class="num">{_e(r["after"])}</td>', _e(r["method"]),
                  f'<td class="num">{_e(r["may_reread"])}</td>', _e(r["applied"])],
                 cls="ok" if r["applied"] == "applied" else ("bad" if r["applied"].startswith("not applied:")
                                                             or r["method"] == "never checkpointed" else None))
            for r in rows]
    return ("<h2>Kafka offsets remap</h2>"
            '<p class="note">Per consumer group and partition: the offset the group had committed on hot (before '
            "the remap), the offset it gets on cold (after), how it was found, and how many records a consumer "
            "may read again there (0: exact).</p>"
            + H.table(["group", "topic (hot → cold)", "partition", "offset before (hot)", "offset after (cold)",
                       "method", "may re-read", "applied"], body, id="kafka-remap",
                      empty="no Kafka consumer groups to carry over"))


def _cards(doc: dict[str, Any]) -> str:
    rec = doc["recovery"]
    rp = rec.get("recovery_point")
    rpo = rec.get("rpo_s")
    out = [H.card(rp or "none", "recovery point", cls="good" if rp else "bad", small=True, id="recovery-point"),
           H.card(H.dur(rpo, "unknown"), "RPO (recovery point age)", cls="zero" if rpo is not None else "bad",
                  id="rpo"),
           H.card(rec.get("limited_by") or "-", "limited by", cls="zero", small=True, id="limited-by")]
    if doc["unplanned"]:
        unb = rec.get("unbounded") or []
        out.append(H.card(f"{len(unb)} unbounded" if unb else "bounded", "loss window",
                          cls="bad" if unb else "warn", small=True, id="loss-window"))
    else:
        verdict = rec.get("verdict") or (doc.get("gate") or {}).get("verdict") or "not evaluated"
        out.append(H.card(verdict, "gate verdict", cls="good" if verdict == "GO" else "bad", small=True,
                          id="verdict"))
    n = len(doc.get("kafka_remap") or [])
    out.append(H.card(str(n), "Kafka partitions remapped", cls="zero"))
    return '<div class="cards">' + "".join(out) + "</div>"


def render_html(doc: dict[str, Any]) -> str:
    run = doc.get("run") or {}
    outcome = doc["outcome"]
    execute = bool(run.get("execute"))
    banner = (H.OK if outcome == "promoted" else H.INFO if outcome == "dry run" else
              H.WARN if outcome.startswith(("waiting", "not finished")) else H.BAD)
    kind = "Unplanned failover" if doc["unplanned"] else "Failover"
    headline = f"{kind} {doc['hot']} → {doc['cold']}: {outcome}"
    rec = doc["recovery"]
    facts = {"run": run.get("run_id"), "mode": "EXECUTE" if execute else "DRY RUN", "reason": run.get("reason"),
             "started by": run.get("actor"), "started": H.ts(run.get("started_at")),
             "recovery point": rec.get("recovery_point") or "none",
             "RPO": H.dur(rec.get("rpo_s"), "unknown"), "limited by": rec.get("limited_by") or "-",
             "recovery point from": f"{rec.get('source')} at {rec.get('as_of') or '-'}"}
    dec = doc.get("decision")
    approval = (H.facts({"decision": "approved" if dec.get("approved") else "rejected", "by": dec.get("by"),
                         "at": H.ts(dec.get("at")), "comment": dec.get("comment") or "-",
                         "acknowledged lint findings": ", ".join(dec.get("acknowledged") or []) or "none",
                         "recovery point approved": dec.get("recovery_point") or "-",
                         **({"data-loss window accepted": "yes" if dec.get("accept_loss") else "no"}
                            if doc["unplanned"] else {})}, id="decision")
                if dec else '<p class="note" id="decision">no decision recorded</p>')
    steps = [H.tr([_e(s["name"]), _status_cell(s["status"]), _e(H.ts(s.get("at"))), _e(s.get("message") or "")])
             for s in doc["steps"]]
    audit = [H.tr([_e(iso(e["at"])), _e(e.get("actor")), _e(e.get("component")), _e(e.get("action")),
                   _status_cell(str(e.get("status"))), _e(e.get("message") or "")]) for e in doc["audit"]]
    through = doc.get("audit_through") or {}
    through_line = (f'<p class="note" id="audit-through">{through.get("events")} events, the last: '
                    f'{_e(through.get("action"))} {_e(through.get("status"))} at {_e(through.get("at"))}'
                    f'{" (the report itself)" if through.get("action") == "report" else ""}</p>')
    body = (_cards(doc) + "<h2>Run</h2>" + H.facts(facts, id="facts") + _signals(doc) + _remap_html(doc)
            + "<h2>Approval</h2>" + approval
            + "<h2>Steps</h2>" + H.table(["step", "status", "at", "message"], steps, id="steps")
            + "<h2>Audit trail</h2>" + through_line
            + H.table(["at", "who", "component", "action", "status", "message"], audit, id="audit")
            + '<p class="note">Generated by dr-toolkit <code>drt failover run</code>. Times are UTC; a safe time '
              "is the moment up to which cold provably holds everything hot took.</p>")
    return H.page(f"failover {run.get('run_id')}: {outcome}", body, headline=headline, banner=banner,
                  sub=[f"run <code>{_e(run.get('run_id'))}</code> &middot; {'EXECUTE' if execute else 'DRY RUN'}"
                       f" &middot; reason: {_e(run.get('reason'))} &middot; by {_e(run.get('actor'))}"])
