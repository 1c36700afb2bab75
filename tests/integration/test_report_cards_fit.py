"""The failover report's summary cards hold their values at 1400 px (issue 43 #5): the recovery
point (an ISO time with milliseconds and offset, one word) and "limited by" were drawn past their
card's edge. Real headless Chromium renders the report of ``dr_toolkit.failover.report.render_html``
(the shared style of ``dr_toolkit.htmlkit``) and measures each card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


def chromium_dom(url: str, width: int) -> str:
    """``url`` in real headless Chromium with a window ``width`` px wide: the DOM after its scripts."""
    import subprocess
    import tempfile

    profile = tempfile.mkdtemp(prefix="drt-chromium-")
    try:
        r = subprocess.run([shutil.which("chromium") or "/usr/bin/chromium", "--headless", "--no-sandbox",
                            "--disable-gpu", "--no-first-run", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                            "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={profile}",
                            f"--window-size={width},900", "--virtual-time-budget=5000", "--dump-dom", url],
                           capture_output=True, text=True, timeout=120)
        return r.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)

pytestmark = [pytest.mark.integration]

MEASURE = """<script>
window.addEventListener("load", () => {
  const out = [...document.querySelectorAll(".card")].map(c => {
    const box = c.getBoundingClientRect();
    const n = c.querySelector(".n");
    return {text: n.textContent, card_right: box.right, value_right: n.getBoundingClientRect().left + n.scrollWidth,
            overflow: n.scrollWidth > n.clientWidth};
  });
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def test_failover_report_cards_hold_their_values_at_1400_px(tmp_path: Path) -> None:
    from dr_toolkit.failover.report import render_html
    from dr_toolkit.signal import iso

    assert shutil.which("chromium"), "Debian chromium is not installed (the report is checked in a real browser)"
    rp = 1795921594.364
    doc = {"run": {"run_id": "failover-20261129T030634-42186fc1", "actor": "alice@ops", "reason": "drill",
                   "execute": True, "status": "succeeded", "started_at": rp + 60},
           "hot": "hot", "cold": "cold", "unplanned": False, "outcome": "promoted", "steps": [],
           "recovery": {"recovery_point": iso(rp), "recovery_point_epoch": rp, "rpo_s": 61.2,
                        "limited_by": "kafka orders-stream:payments-eu-west-1", "as_of": iso(rp + 61.2),
                        "source": "the check at promotion", "verdict": "GO"},
           "gate": {"verdict": "GO", "signals": [], "checked_at": iso(rp + 61.2)}, "loss_window": None,
           "decision": None, "kafka_remap": [], "audit": [], "audit_through": None}
    html = render_html(doc).replace("</body>", MEASURE + "</body>")
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    dom = chromium_dom(page.as_uri(), 1400)
    measured = json.loads(dom.split('<pre id="measured">', 1)[1].split("</pre>", 1)[0])
    texts = [m["text"] for m in measured]
    assert texts[0] == iso(rp) and texts[2] == "kafka orders-stream:payments-eu-west-1", texts
    for m in measured:
        assert not m["overflow"] and m["value_right"] <= m["card_right"], measured
