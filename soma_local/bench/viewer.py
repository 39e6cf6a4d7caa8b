"""A self-contained HTML trace viewer for one question of one result file.

It shows the reasoning as S2 saw it, with reminders and the takeover marked, the answer, and (for
SOMA runs) p and S per scan plotted against thinking tokens as inline SVG. No scripts and no external
files, so it opens anywhere, offline.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

from soma_local.bench.results import ResultLine, read_results
from soma_local.errors import DataError
from soma_local.readout import ReadoutRun
from soma_local.supervise import READOUT_MODES
from soma_local.trace import parse_record

_REMINDER = re.compile(r"<reminder>(.*?)</reminder>", re.S)

_CSS = """
body{font:14px/1.5 system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
pre.reasoning{white-space:pre-wrap;background:#f7f7f7;padding:1em;border-radius:6px}
mark.reminder{background:#ffe08a;display:inline-block;padding:0 .3em;border-left:3px solid #d29b00}
mark.takeover{background:#ffc9c9;display:inline-block;padding:0 .3em;border-left:3px solid #c92a2a}
table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
.legend span{margin-right:1.5em}
"""


def _marked(text: str) -> str:
    """Escape the reasoning and wrap each reminder in a highlighted ``mark``."""
    out, last = [], 0
    for m in _REMINDER.finditer(text):
        out.append(html.escape(text[last : m.start()]))
        out.append(f'<mark class="reminder" title="reminder">&lt;reminder&gt;{html.escape(m.group(1))}&lt;/reminder&gt;</mark>')
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def _plot(scans: list[dict], monitor: str, h: float | None, width: int = 900, height: int = 260) -> str:
    """p (0..1, left axis) and S (right axis) per scan, reminders and the takeover as vertical lines."""
    pts = [(s["thinking_tokens"], s["monitors"][monitor]) for s in scans if monitor in s["monitors"]]
    if not pts:
        return "<p>No scans.</p>"
    pad, w, hgt = 40, width - 80, height - 60
    xmax = max(t for t, _ in pts) or 1
    smax = max([m["score"] for _, m in pts] + [h if h and math.isfinite(h) else 0, 1.0])
    x = lambda t: pad + w * t / xmax
    yp = lambda p: 20 + hgt * (1 - p)
    ys = lambda s: 20 + hgt * (1 - s / smax)
    p_line = " ".join(f"{x(t):.1f},{yp(m['p']):.1f}" for t, m in pts if m["p"] is not None)
    s_line = " ".join(f"{x(t):.1f},{ys(m['score']):.1f}" for t, m in pts)
    marks = []
    for t, m in pts:
        if m["action"] in ("remind", "takeover"):
            color = "#d29b00" if m["action"] == "remind" else "#c92a2a"
            marks.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="20" y2="{20 + hgt}" stroke="{color}" stroke-dasharray="4 3"/>')
    if h is not None and math.isfinite(h):
        marks.append(f'<line x1="{pad}" x2="{pad + w}" y1="{ys(h):.1f}" y2="{ys(h):.1f}" stroke="#888" stroke-dasharray="2 2"/>'
                     f'<text x="{pad + w + 4}" y="{ys(h) + 4:.1f}" font-size="10">h={h:g}</text>')
    dots = "".join(f'<circle class="p" cx="{x(t):.1f}" cy="{yp(m["p"]):.1f}" r="3" fill="#1c7ed6"/>' for t, m in pts if m["p"] is not None)
    dots += "".join(f'<circle class="S" cx="{x(t):.1f}" cy="{ys(m["score"]):.1f}" r="3" fill="#2b8a3e"/>' for t, m in pts)
    return (
        f'<svg id="scan-plot" width="{width}" height="{height}" role="img" aria-label="p and S per scan">'
        f'<rect x="{pad}" y="20" width="{w}" height="{hgt}" fill="none" stroke="#ccc"/>'
        f'<polyline points="{p_line}" fill="none" stroke="#1c7ed6"/>'
        f'<polyline points="{s_line}" fill="none" stroke="#2b8a3e"/>{"".join(marks)}{dots}'
        f'<text x="{pad}" y="14" font-size="11">p (0-1, blue) and S (0-{smax:.2f}, green) per scan</text>'
        f'<text x="{pad + w / 2:.0f}" y="{height - 8}" font-size="11">thinking tokens (max {xmax})</text></svg>'
        '<p class="legend"><span style="color:#1c7ed6">&#9679; p</span><span style="color:#2b8a3e">&#9679; S</span>'
        '<span style="color:#d29b00">- - reminder</span><span style="color:#c92a2a">- - takeover</span></p>'
    )


def render(line: ResultLine, h: float | None = None) -> str:
    o = line.outcome
    records = o.records
    scans = [r for r in records if r["type"] == "scan"]
    monitor = o.extras.get("monitor")
    output = o.extras.get("output") or f"{o.thinking}</think>{o.answer}"
    takeover = next((r for r in records if r["type"] == "takeover"), None)
    start = next((r for r in records if r["type"] == "run_start"), None)
    if h is None and start and monitor and start["thresholds"].get(monitor) is not None:
        h = float(start["thresholds"][monitor])  # JSON writes h = inf as "Infinity"
    read = None
    readout = start is not None and start["settings"].get("mode") in READOUT_MODES
    if readout and monitor and h is not None and math.isfinite(h):
        read = ReadoutRun((parse_record(r) for r in records), f"{line.method}/{line.id}").read_off({monitor: h})
        read = read if read.takeover else None
    thinking_html = _marked(output)
    if takeover is not None:
        text = html.escape(takeover["text"])
        thinking_html = thinking_html.replace(text, f'<mark class="takeover" title="takeover">{text}</mark>', 1)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(line.id)} · {html.escape(line.method)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(line.id)} <small>({html.escape(line.benchmark)}, {html.escape(line.method)}, {html.escape(line.model)})</small></h1>",
        "<table>",
        f"<tr><th>gold</th><td>{html.escape(str(line.gold))} ({'answerable' if line.answerable else 'unanswerable'})</td></tr>",
        f"<tr><th>stop</th><td>{html.escape(o.stop)}</td></tr>",
        "<tr><th>tokens</th><td>" + ", ".join(f"{k} {v}" for k, v in o.tokens.model_dump().items()) + "</td></tr>",
        "</table>",
        f"<h2>Prompt</h2><pre class='reasoning'>{html.escape(line.prompt)}</pre>",
    ]
    if scans:
        parts += [f"<h2>Scans ({html.escape(monitor or '')})</h2>", _plot(scans, monitor, h)]
    parts += [f"<h2>Reasoning and answer as S2 saw them</h2><pre class='reasoning' id='reasoning'>{thinking_html}</pre>"]
    if read is not None:
        parts += [
            f"<h2>Takeover at h={h:g} (read off at scan {read.scan_index + 1}, {read.thinking_tokens} thinking tokens)</h2>",
            f"<pre class='reasoning'><mark class='takeover'>{html.escape(read.answer)}</mark></pre>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_viewer(results: Path, question_id: str, out: Path | None = None, h: float | None = None) -> Path:
    line = next((r for r in read_results(results) if r.id == question_id), None)
    if line is None:
        raise DataError(f"{results}: no result line for question '{question_id}'")
    out = out or results.with_name(f"{results.stem}.{re.sub(r'[^A-Za-z0-9_.-]', '_', question_id)}.html")
    out.write_text(render(line, h), encoding="utf-8")
    return out
