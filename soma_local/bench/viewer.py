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
from soma_local.calibration.readout import ReadoutRun
from soma_local.engine.supervise import is_readout
from soma_local.engine.trace import parse_record

_REMINDER = re.compile(r"<reminder>(.*?)</reminder>", re.S)

_CSS = """
body{font:14px/1.5 system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
pre.reasoning{white-space:pre-wrap;background:#f7f7f7;padding:1em;border-radius:6px}
mark.reminder{background:#ffe08a;display:inline-block;padding:0 .3em;border-left:3px solid #d29b00}
mark.takeover{background:#ffc9c9;display:inline-block;padding:0 .3em;border-left:3px solid #c92a2a}
table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
.legend span{margin-right:1.5em;white-space:nowrap;display:inline-block}
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


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top``: steps of 1, 2, 2.5 or 5 times a power of ten."""
    raw = top / count if top > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def _tick(v: float) -> str:
    return f"{v:g}"


def _plot(scans: list[dict], monitor: str, h: float | None, takeover_at: int | None, takeover_label: str = "takeover",
          width: int = 900, height: int = 300) -> str:
    """p (0..1, left axis) and S (right axis) per scan against thinking tokens, with tick values on
    every axis; reminders, the takeover and the threshold h drawn as lines, each named in the legend
    only when it is drawn."""
    pts = [(s["thinking_tokens"], s["monitors"][monitor]) for s in scans if monitor in s["monitors"]]
    if not pts:
        return "<p>No scans.</p>"
    left, right, top, bottom = 52, 62, 28, 48
    w, hgt = width - left - right, height - top - bottom
    finite_h = h if h is not None and math.isfinite(h) else None
    xticks = _ticks(max([t for t, _ in pts] + [takeover_at or 0]) or 1)
    sticks = _ticks(max([m["score"] for _, m in pts] + [finite_h or 0, 1.0]), 4)
    xmax, smax = xticks[-1], sticks[-1]
    x = lambda t: left + w * t / xmax
    yp = lambda p: top + hgt * (1 - p)
    ys = lambda v: top + hgt * (1 - v / smax)
    bottom_y = top + hgt
    out = [f'<svg id="scan-plot" width="{width}" height="{height}" role="img" aria-label="p and S per scan" '
           'font-family="system-ui,sans-serif" font-size="11">',
           f'<rect x="{left}" y="{top}" width="{w}" height="{hgt}" fill="none" stroke="#bbb"/>']
    for v in xticks:  # x: thinking tokens, with a light grid
        out.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top}" y2="{bottom_y}" stroke="#eee"/>'
                   f'<text x="{x(v):.1f}" y="{bottom_y + 15}" text-anchor="middle">{_tick(v)}</text>')
    for v in (0, 0.25, 0.5, 0.75, 1.0):  # left: p
        out.append(f'<line x1="{left - 4}" x2="{left}" y1="{yp(v):.1f}" y2="{yp(v):.1f}" stroke="#1c7ed6"/>'
                   f'<text x="{left - 7}" y="{yp(v) + 4:.1f}" text-anchor="end" fill="#1c7ed6">{_tick(v)}</text>')
    for v in sticks:  # right: S
        out.append(f'<line x1="{left + w}" x2="{left + w + 4}" y1="{ys(v):.1f}" y2="{ys(v):.1f}" stroke="#2b8a3e"/>'
                   f'<text x="{left + w + 7}" y="{ys(v) + 4:.1f}" fill="#2b8a3e">{_tick(v)}</text>')
    out += [
        f'<text x="{left + w / 2:.0f}" y="{height - 8}" text-anchor="middle">thinking tokens</text>',
        f'<text x="14" y="{top + hgt / 2:.0f}" text-anchor="middle" fill="#1c7ed6" '
        f'transform="rotate(-90 14 {top + hgt / 2:.0f})">p (S1 probability)</text>',
        f'<text x="{width - 12}" y="{top + hgt / 2:.0f}" text-anchor="middle" fill="#2b8a3e" '
        f'transform="rotate(90 {width - 12} {top + hgt / 2:.0f})">S (evidence)</text>',
    ]
    legend = ['<span style="color:#1c7ed6">&#9679; p, S1\'s probability (left axis)</span>',
              '<span style="color:#2b8a3e">&#9679; S, accumulated evidence (right axis)</span>']
    reminders = [t for t, m in pts if m["action"] == "remind"]
    for t in reminders:
        out.append(f'<line class="reminder" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{bottom_y}" '
                   'stroke="#d29b00" stroke-width="1.5" stroke-dasharray="5 3"/>')
    if reminders:
        legend.append('<span style="color:#d29b00">- - reminder</span>')
    if takeover_at is not None:
        out.append(f'<line class="takeover" x1="{x(takeover_at):.1f}" x2="{x(takeover_at):.1f}" y1="{top}" '
                   f'y2="{bottom_y}" stroke="#c92a2a" stroke-width="2"/>')
        legend.append(f'<span style="color:#c92a2a">&#9474; {html.escape(takeover_label)}</span>')
    if finite_h is not None:
        out.append(f'<line class="threshold" x1="{left}" x2="{left + w}" y1="{ys(finite_h):.1f}" y2="{ys(finite_h):.1f}" '
                   f'stroke="#2b8a3e" stroke-dasharray="2 3"/>')
        legend.append(f'<span style="color:#2b8a3e">&middot;&middot;&middot; h = {finite_h:g} (S at or above it: '
                      'take over)</span>')
    p_pts = [(t, m) for t, m in pts if m["p"] is not None]
    p_line = " ".join(f"{x(t):.1f},{yp(m['p']):.1f}" for t, m in p_pts)
    s_line = " ".join(f"{x(t):.1f},{ys(m['score']):.1f}" for t, m in pts)
    out.append(f'<polyline points="{p_line}" fill="none" stroke="#1c7ed6"/>')
    out.append(f'<polyline points="{s_line}" fill="none" stroke="#2b8a3e"/>')
    out += [f'<circle class="p" cx="{x(t):.1f}" cy="{yp(m["p"]):.1f}" r="3" fill="#1c7ed6"/>' for t, m in p_pts]
    out += [f'<circle class="S" cx="{x(t):.1f}" cy="{ys(m["score"]):.1f}" r="3" fill="#2b8a3e"/>' for t, m in pts]
    out.append("</svg>")
    return "".join(out) + '<p class="legend">' + "".join(legend) + "</p>"


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
    readout = start is not None and is_readout(start["settings"].get("mode"))
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
        if takeover is not None:
            at, label = takeover["thinking_tokens"], f"takeover ({takeover['monitor']})"
        elif read is not None:
            at, label = read.thinking_tokens, f"takeover read off at h = {h:g} (on a branch; this run went on)"
        else:
            at, label = None, ""
        parts += [f"<h2>Scans ({html.escape(monitor or '')})</h2>", _plot(scans, monitor, h, at, label)]
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
