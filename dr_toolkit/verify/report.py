"""The HTML report of a verification: one self-contained file (inline CSS and SVG, no scripts,
nothing fetched), meant to be looked at — counters as big numbers, a chart of where the
differences are, and a sample table per counter. Every value is HTML-escaped; sources are
shown through ``redact`` (no passwords)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dr_toolkit import htmlkit as H
from dr_toolkit.secrets import redact
from dr_toolkit.verify import compare as C

if TYPE_CHECKING:
    from dr_toolkit.verify.result import VerifyResult

_LABELS = {
    C.GOOD: "good rows", C.BAD: "bad rows", C.ONLY_SOURCE: "only in source", C.ONLY_PEER: "only in peer",
    C.CONTENT: "content different",
}


def _e(v: Any) -> str:
    if v is None:
        return '<span class="note">null</span>'
    if not isinstance(v, str):
        v = json.dumps(v, default=str, ensure_ascii=False)
    return H.esc(v)


def _cards(r: VerifyResult) -> str:
    out = []
    for k in C.COUNTERS:
        n = r.counters[k]
        cls = "good" if k == C.GOOD and n else ("bad" if k != C.GOOD and n else "zero")
        out.append(f'<div class="card {cls}"><div class="n">{n:,}</div><div class="l">{_e(_LABELS[k])}</div>'
                   f'<div class="l" title="VerifyReplication counter">{k}</div></div>')
    for label, n in (("source rows", r.source_rows), ("peer rows", r.peer_rows)):
        out.append(f'<div class="card zero"><div class="n">{n:,}</div><div class="l">{label}</div></div>')
    return "".join(out)


def _chart(r: VerifyResult) -> str:
    groups = r.bucket_chart
    if not groups:
        return ""
    w, top, low, pad = 960, 150, 40, 36
    bw = (w - pad) / len(groups)
    max_bad = max((g["bad"] for g in groups), default=0)
    max_rows = max((g["rows"] for g in groups), default=0)
    parts = [f'<svg role="img" viewBox="0 0 {w} {top + low + 40}" width="100%" '
             'xmlns="http://www.w3.org/2000/svg">']
    parts.append(f'<text x="0" y="12">{max_bad:,}</text><text x="0" y="{top}">0</text>'
                 f'<text x="0" y="{top + 22}">rows</text>')
    parts.append(f'<line x1="{pad}" y1="{top}" x2="{w}" y2="{top}" stroke="#d0d7de"/>')
    for i, g in enumerate(groups):
        x = pad + i * bw
        label = f"buckets {g['first']}–{g['last']}: {g['rows']:,} source rows, {g['bad']:,} bad"
        if g["bad"]:
            h = max(2.0, (top - 16) * g["bad"] / max_bad)
            parts.append(f'<rect x="{x + 1:.1f}" y="{top - h:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" '
                         f'fill="#cf222e"><title>{_e(label)}</title></rect>')
        else:
            parts.append(f'<rect x="{x + 1:.1f}" y="{top - 3}" width="{max(bw - 2, 1):.1f}" height="3" '
                         f'fill="#1a7f37"><title>{_e(label)}</title></rect>')
        if max_rows:
            h = low * g["rows"] / max_rows
            parts.append(f'<rect x="{x + 1:.1f}" y="{top + 8 + low - h:.1f}" width="{max(bw - 2, 1):.1f}" '
                         f'height="{h:.1f}" fill="#afb8c1"><title>{_e(label)}</title></rect>')
    last = groups[-1]["last"]
    parts.append(f'<text x="{pad}" y="{top + low + 30}">bucket 0</text>'
                 f'<text x="{w - 80}" y="{top + low + 30}">bucket {last}</text></svg>')
    return "".join(parts)


def _table(head: list[str], rows: list[list[str]]) -> str:
    return H.table(head, rows)


def _kv(d: dict[str, Any] | None) -> str:
    if not d:
        return ""
    return "<br>".join(f"<b>{_e(k)}</b>: {_e(v)}" for k, v in d.items())


def _samples(r: VerifyResult) -> str:
    out = []
    for k in C.BAD_KINDS:
        rows = r.samples.get(k) or []
        n = r.counters[k]
        title = f'<h3>{_e(_LABELS[k])} <span class="pill">{k} = {n:,}</span></h3>'
        if not n:
            out.append(title + '<p class="note">none</p>')
            continue
        note = f'<p class="note">showing {len(rows)} of {n:,}, ordered by key</p>'
        if k == C.CONTENT:
            body = [[_kv(s["key"]), _e(", ".join(s.get("columns", []))),
                     f'<span class="src">{_kv(s.get("source"))}</span>',
                     f'<span class="peer">{_kv(s.get("peer"))}</span>'] for s in rows]
            out.append(title + note + _table(["key", "columns that differ", "source", "peer"], body))
        else:
            side = "source" if k == C.ONLY_SOURCE else "peer"
            body = [[_kv(s["key"]), _kv(s.get(side))] for s in rows]
            out.append(title + note + _table(["key", f"{side} row"], body))
    return "".join(out)


def _schema(r: VerifyResult) -> str:
    s = r.schema or {}
    rows = [[_e(c), "only in source", "NULL on the peer: a value there counts as different"]
            for c in s.get("only_in_source", [])]
    rows += [[_e(c), "only in peer", "NULL on the source: a value there counts as different"]
             for c in s.get("only_in_peer", [])]
    rows += [[_e(c), f"type {_e(t['source'])} → {_e(t['peer'])}", "compared as text"]
             for c, t in (s.get("type_changes") or {}).items()]
    if not rows:
        return ""
    return "<h2>Schema differences</h2>" + _table(["column", "difference", "how it is compared"], rows)


def _extras(r: VerifyResult) -> str:
    out = []
    d = r.duplicate_keys or {}
    if d.get("source") or d.get("peer"):
        body = [[_kv(s["key"]), str(s["source_rows"]), str(s["peer_rows"])]
                for s in d.get("samples", [])]
        out.append(f"<h2>Duplicate keys</h2><p>{d.get('source', 0):,} keys repeat in the source, "
                   f"{d.get('peer', 0):,} in the peer. Their rows are compared as a set, never joined row by "
                   "row.</p>" + _table(["key", "source rows", "peer rows"], body))
    nk = r.null_keys or {}
    if nk.get("source") or nk.get("peer"):
        out.append(f"<h2>Null keys</h2><p>{nk.get('source', 0):,} source rows and {nk.get('peer', 0):,} peer "
                   "rows have a NULL in a key column; NULL is matched as a key value.</p>")
    rc = r.recompare or {}
    if rc.get("keys_rechecked"):
        out.append(f"<h2>Re-compare</h2><p>{rc['keys_rechecked']:,} keys differed at the first compare; after "
                   f"{rc['sleep_s']:g} s, {rc['resolved']:,} no longer differed (counted good) and "
                   f"{rc.get('gone_from_both', 0):,} were gone from both sides (not counted).</p>")
    nts = (r.window or {}).get("null_ts") or {}
    if nts.get("source") or nts.get("peer"):
        out.append(f"<h2>NULL timestamps</h2><p>{nts.get('source', 0):,} source rows and {nts.get('peer', 0):,} "
                   "peer rows have a NULL timestamp: they are outside every window and were not compared.</p>")
    if r.column_mismatches:
        body = [[_e(c), f"{n:,}"] for c, n in r.column_mismatches.items()]
        out.append("<h2>Differences by column</h2><p class=\"note\">keys whose value differs in the column "
                   "(keys held by one row on each side)</p>" + _table(["column", "keys"], body))
    if r.trend:
        body = [[_e(t["report_id"]), _e(_ts(t["finished_at"])), f"{t['BADROWS']:,}", f"{t['GOODROWS']:,}",
                 f"{t['source_rows']:,}"] for t in r.trend]
        out.append("<h2>Earlier runs</h2>" + _table(["report", "finished", "bad rows", "good rows", "source rows"],
                                                      body))
    return "".join(out)


def _ts(t: float | None) -> str:
    return H.ts(t, "open")


def render_html(r: VerifyResult) -> str:
    bad = r.counters[C.BAD]
    headline = ("Replica matches" if not bad else f"{bad:,} bad rows") + (f" — {r.name}" if r.name else "")
    if r.buckets_differing:
        chart_note = (f"{r.buckets_differing:,} of {r.buckets_compared:,} non-empty buckets had different "
                      f"digests and were compared row by row; red bars: bad rows per group of buckets; "
                      f"grey: source rows.")
    else:
        chart_note = (f"All {r.buckets_compared:,} non-empty buckets have identical digests on both sides "
                      "(green); grey: source rows per group of buckets.")
    w = r.window or {}
    chunks = w.get("chunks")
    if chunks:  # HBase: buckets are key ranges in row-key order (see dr_toolkit/verify/hbase.py)
        chart_note += (" Buckets here are row-key ranges in key order: each chunk identical on both sides, and "
                       "each key range read row by row because its chunks differed.")
    facts = {
        "source": redact(r.source), "peer": redact(r.target), "key": ", ".join(r.key), "report id": r.report_id,
        "started": _ts(r.started_at), "duration": f"{r.duration_s:.1f} s",
        "window": (f"{w.get('ts_column')} in [{_ts(w.get('start'))}, {_ts(w.get('end'))})"
                   if w.get("ts_column") else "none (all rows)"),
        "buckets": f"{r.buckets:,} ({r.buckets_compared:,} non-empty, {r.buckets_differing:,} differing)",
        "data compared as of": _ts(r.data_time),
        **({"key-range chunks": (f"~{chunks.get('rows_per_chunk', 0):,} rows each; {chunks.get('identical', 0):,} "
                                 f"identical on both sides ({chunks.get('rows_identical', 0):,} rows, settled by "
                                 f"digest); {chunks.get('ranges_read', 0):,} key ranges read row by row")}
           if chunks else {}),
        **{k.replace("_", " "): str(v) for k, v in (r.provenance or {}).items()},
        **({"compare options": ", ".join(f"{k}={v}" for k, v in r.compare_options.items())}
           if r.compare_options else {}),
    }
    body = (f'<div class="cards">{_cards(r)}</div>'
            f'<h2>Where the differences are</h2><p class="note">{_e(chart_note)}</p>{_chart(r)}'
            f"{_schema(r)}{_extras(r)}<h2>Samples of differing keys</h2>{_samples(r)}"
            f"<h2>Details</h2>{H.facts(facts)}"
            '<p class="note">Generated by dr-toolkit <code>drt verify</code>. Counters follow HBase '
            "VerifyReplication: BADROWS = ONLY_IN_SOURCE_TABLE_ROWS + ONLY_IN_PEER_TABLE_ROWS + "
            "CONTENT_DIFFERENT_ROWS.</p>")
    return H.page(f"verify {r.name or r.source}: {'OK' if not bad else f'{bad} bad rows'}", body,
                  headline=headline, banner=H.OK if not bad else H.BAD,
                  sub=[f"{_e(redact(r.source))} &rarr; {_e(redact(r.target))}",
                       f"key {_e(', '.join(r.key))} &middot; {_e(_ts(r.finished_at))} &middot; "
                       f"{_e(f'{r.duration_s:.1f} s')}"])


def write_html(r: VerifyResult, path: str) -> None:
    """Write the report atomically (a temporary name, then rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(render_html(r), encoding="utf-8")
    tmp.replace(p)
