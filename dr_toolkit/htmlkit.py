"""The one small HTML toolkit of dr-toolkit's pages: the verification report, the failover report
and the DR status page in the Airflow plugin all use it, so they look alike and escape alike.

Pages are self-contained (inline CSS; no script, font or image fetched). Cells and bodies passed
to :func:`table`, :func:`tr` and :func:`page` are HTML: every value that comes from data goes
through :func:`esc` first (the helpers that take plain values — :func:`facts`, the titles —
escape themselves)."""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping, Sequence

OK, BAD, WARN, INFO, NEUTRAL = "#1a7f37", "#cf222e", "#9a6700", "#0550ae", "#57606a"
"""Banner colours: succeeded, failed, waiting/behind, a dry run, nothing to judge."""

STYLE = """
  :root { --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --ink: #1f2328; --muted: #656d76;
          --line: #d0d7de; --bg: #f6f8fa; }
  * { box-sizing: border-box; }
  body { font: 15px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--ink);
         margin: 0; background: #fff; }
  header { padding: 22px 32px; color: #fff; }
  header h1 { margin: 0 0 4px; font-size: 26px; }
  header .sub { opacity: .9; font-size: 14px; word-break: break-all; }
  main { padding: 20px 32px 40px; max-width: 1200px; }
  main > h1 { font-size: 26px; margin: 0 0 10px; }
  .cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(240px, 1fr)); gap: 14px; margin: 8px 0 22px; }
  .card { border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; background: #fff; min-width: 0; }
  .card .n { font-size: 34px; font-weight: 700; line-height: 1.1; font-variant-numeric: tabular-nums; }
  .card .n.t { font-size: 18px; overflow-wrap: anywhere; }
  .card .l { color: var(--muted); font-size: 12px; letter-spacing: .04em; text-transform: uppercase; }
  .card.good .n { color: var(--ok); } .card.bad .n { color: var(--bad); } .card.zero .n { color: var(--muted); }
  .card.warn .n { color: var(--warn); }
  .card.good { border-top: 4px solid var(--ok); } .card.bad { border-top: 4px solid var(--bad); }
  .card.zero { border-top: 4px solid var(--line); } .card.warn { border-top: 4px solid var(--warn); }
  h2 { font-size: 18px; margin: 28px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 6px; }
  table { border-collapse: collapse; width: 100%; font-size: 13px; margin-bottom: 8px; }
  th, td { border: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
  th { background: var(--bg); }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  tr.ok td, td.ok, td.done, td.success { background: #dafbe1; }
  tr.bad td, td.bad, td.failed, td.rejected { background: #ffebe9; }
  td.planned, td.waiting, td.running, td.queued { background: #ddf4ff; }
  tr.limiting td { font-weight: 600; }
  .src { color: #0550ae; } .peer { color: #8250df; }
  .facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; font-size: 14px; }
  .facts dt { color: var(--muted); } .facts dd { margin: 0; word-break: break-all; }
  .note, .muted { color: var(--muted); font-size: 13px; }
  .pill { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; background: var(--bg);
          border: 1px solid var(--line); }
  svg text { font: 11px sans-serif; fill: var(--muted); }
"""


def esc(v: object) -> str:
    """``v`` as escaped HTML text; None is the empty string."""
    return "" if v is None else html.escape(v if isinstance(v, str) else str(v))


def ts(t: float | None, empty: str = "-") -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS UTC`` (``empty`` for none)."""
    return empty if t is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(t)))


def dur(v: float | None, empty: str = "-") -> str:
    """Seconds as a short duration: 45s, 1.5m, 2h, 1.2d."""
    if v is None:
        return empty
    v = float(v)
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if v >= size:
            return f"{v / size:.1f}".rstrip("0").rstrip(".") + unit
    return f"{v:.0f}s"


def _attr(name: str, v: object) -> str:
    return "" if v is None else f' {name}="{esc(v)}"'


def tr(cells: Iterable[str], *, cls: str | None = None, attrs: Mapping[str, str] | None = None) -> str:
    """One table row of HTML cells (``cls``: the row's class; ``attrs``: more attributes, escaped)."""
    a = _attr("class", cls or None) + "".join(_attr(k, v) for k, v in (attrs or {}).items())
    return f"<tr{a}>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>"


def table(head: Sequence[str], rows: Iterable[str | Sequence[str]], *, id: str | None = None,
          empty: str | None = None) -> str:
    """A table: ``head`` plain labels (escaped), ``rows`` each a :func:`tr` string or a list of HTML
    cells (a cell starting with ``<td`` is taken as is, to give it a class); ``empty``: the one row
    shown when there are none."""
    body = "".join(r if isinstance(r, str) else tr(r) for r in rows)
    if not body and empty is not None:
        body = f'<tr><td colspan="{len(head)}" class="note">{esc(empty)}</td></tr>'
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f"<table{_attr('id', id)}><tr>{th}</tr>{body}</table>"


def facts(items: Mapping[str, object], *, id: str | None = None) -> str:
    """A definition list of label → value (both escaped)."""
    body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items.items())
    return f'<dl class="facts"{_attr("id", id)}>{body}</dl>'


def card(value: str, label: str, *, cls: str = "zero", small: bool = False, id: str | None = None,
         title: str | None = None) -> str:
    """A big-number card (``value`` and ``label`` plain text; ``cls`` good/bad/warn/zero)."""
    n = "n t" if small else "n"
    return (f'<div class="card {esc(cls)}"{_attr("title", title)}><div class="{n}"{_attr("id", id)}>{esc(value)}'
            f'</div><div class="l">{esc(label)}</div></div>')


def page(title: str, body: str, *, headline: str | None = None, sub: Sequence[str] = (), banner: str = NEUTRAL,
         css: str = "", script: str = "") -> str:
    """A whole page: ``title`` (plain), ``body`` (HTML) inside ``<main>``; with ``headline`` (plain) a
    coloured header (``banner``) above it with the ``sub`` lines (HTML); ``css`` added to the shared
    style; ``script`` (HTML, a ``<script>`` element) at the end of the body."""
    header = ""
    if headline is not None:
        subs = "".join(f'<div class="sub">{s}</div>' for s in sub)
        header = f'<header style="background:{esc(banner)}"><h1>{esc(headline)}</h1>{subs}</header>'
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{STYLE}{css}</style></head>\n<body>{header}<main>{body}</main>"
            f"{script}</body></html>\n")
