"""A self-contained HTML trace viewer for one question of a result file, or for one recorded run.

It shows the reasoning as S2 saw it, with reminders and the takeover marked, the answer, and (for
SOMA runs) p and S per scan plotted against thinking tokens as inline SVG. Where the scans carry the
length of the thinking they read, a user can mark each scan "holds" or "does not hold" for a monitor
and export those hand labels as the JSONL file ``soma tune`` reads. One file, no external resources,
so it opens anywhere, offline.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

from soma_local.bench.results import ResultLine, read_results
from soma_local.errors import DataError
from soma_local.calibration.readout import ReadoutRun
from soma_local.engine.supervise import is_readout
from soma_local.engine.trace import first_record, parse_record, read_trace

_REMINDER = re.compile(r"<reminder>(.*?)</reminder>", re.S)

_CSS = """
body{font:14px/1.5 system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
pre.reasoning{white-space:pre-wrap;background:#f7f7f7;padding:1em;border-radius:6px}
mark.reminder{background:#ffe08a;display:inline-block;padding:0 .3em;border-left:3px solid #d29b00}
mark.takeover{background:#ffc9c9;display:inline-block;padding:0 .3em;border-left:3px solid #c92a2a}
table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #ddd;text-align:left}
.legend span{margin-right:1.5em;white-space:nowrap;display:inline-block}
#labels td{vertical-align:top}#labels pre{white-space:pre-wrap;margin:0;font-size:12px;max-width:560px}
#labels tr.holds{background:#e6fcf5}#labels tr.not{background:#fff0f6}
"""

# The hand-labelling panel: the run's text and scans as JSON, and the script that turns clicks into the
# label file ``soma tune`` reads (``calibration.labels``: statement, task, reasoning, p).
_LABEL_SCRIPT = """
const data = JSON.parse(document.getElementById('trace-data').textContent);
const marks = {};
const pick = document.getElementById('label-monitor');
function key(m, i) { return m + '/' + i; }
function paint() {
  const m = pick.value;
  document.querySelectorAll('#labels tbody tr').forEach(tr => {
    const i = +tr.dataset.scan, v = marks[key(m, i)];
    tr.className = v === 1 ? 'holds' : v === 0 ? 'not' : '';
    tr.querySelector('.scan-p').textContent = (data.scans[i].p[m] ?? NaN).toFixed(3);
    tr.querySelector('.mark').textContent = v === 1 ? 'holds' : v === 0 ? 'does not hold' : '';
  });
  const n = Object.keys(marks).filter(k => k.startsWith(m + '/')).length;
  document.getElementById('label-count').textContent = n + ' scan(s) labelled for ' + m;
}
document.querySelectorAll('#labels button.label').forEach(b => b.addEventListener('click', () => {
  marks[key(pick.value, +b.closest('tr').dataset.scan)] = +b.dataset.p;
  paint();
}));
pick.addEventListener('change', paint);
document.getElementById('export-labels').addEventListener('click', () => {
  const m = pick.value, lines = [];
  data.scans.forEach((s, i) => {
    const v = marks[key(m, i)];
    if (v === undefined) return;
    lines.push(JSON.stringify({statement: data.monitors[m], monitor: m, task: data.task,
      reasoning: data.thinking.slice(0, s.chars), p: v, source: 'hand', trace: data.name, scan: s.index + 1}));
  });
  const blob = new Blob([lines.join('\\n') + '\\n'], {type: 'application/jsonl'});
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = data.name.replace(/[^A-Za-z0-9_.-]/g, '_') + '.' + m + '.labels.jsonl';
  document.body.appendChild(a); a.click(); a.remove();
});
paint();
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


def _output_html(output: str, takeover: dict | None) -> str:
    """S2's text as it saw it: reminders marked, and the takeover text where there was one."""
    marked = _marked(output)
    if takeover is None:
        return marked
    text = html.escape(takeover["text"])
    return marked.replace(text, f'<mark class="takeover" title="takeover">{text}</mark>', 1)


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
    thinking_html = _output_html(output, takeover)
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
    parts += [_labelling(records, f"{line.method}-{line.id}"), "</body></html>"]
    return "\n".join(parts)


def _labelling(records: list[dict], name: str) -> str:
    """The hand-labelling panel: each scan's newest reasoning, "holds" / "does not hold" per monitor, and an
    export of the marks as a ``soma tune`` label file. Empty for a run whose scans do not say how much
    thinking they read (recorded before ``thinking_chars``) or that never ended."""
    start = next((r for r in records if r["type"] == "run_start"), None)
    end = next((r for r in records if r["type"] == "run_end"), None)
    scans = [r for r in records if r["type"] == "scan"]
    if start is None or end is None or not scans or any(s.get("thinking_chars") is None for s in scans):
        return ""
    monitors = {m["name"]: m["statement"] for m in start["monitors"]}
    data = {"name": name, "task": start["question"], "thinking": end["thinking"], "monitors": monitors,
            "scans": [{"index": s["index"], "chars": s["thinking_chars"],
                       "p": {k: v["p"] for k, v in s["monitors"].items()}} for s in scans]}
    options = "".join(f'<option value="{html.escape(m)}">{html.escape(m)}</option>' for m in monitors)
    rows = []
    for i, scan in enumerate(scans):
        chars = scan["thinking_chars"]
        tail = end["thinking"][max(0, chars - 600) : chars]
        rows.append(
            f'<tr data-scan="{i}"><td>{scan["index"] + 1}</td><td>{scan["thinking_tokens"]}</td><td class="scan-p"></td>'
            f"<td><pre>{'…' if chars > 600 else ''}{html.escape(tail)}</pre></td>"
            '<td><button class="label" data-p="1">holds</button> <button class="label" data-p="0">does not hold'
            '</button></td><td class="mark"></td></tr>')
    payload = json.dumps(data).replace("</", "<\\/")  # no "</script>" inside the script element
    return "\n".join([
        "<h2>Label scans</h2>",
        "<p>Does the monitor's statement hold at each scan? Mark the scans you are sure of, then export: the file "
        "is what <code>soma tune MONITOR --labels FILE</code> reads.</p>",
        f'<p>monitor <select id="label-monitor">{options}</select> <span id="label-count"></span> '
        '<button id="export-labels">export labels (.jsonl)</button></p>',
        '<table id="labels"><thead><tr><th>scan</th><th>tokens</th><th>p</th><th>newest reasoning</th><th></th>'
        f'<th>label</th></tr></thead><tbody>{"".join(rows)}</tbody></table>',
        f'<script type="application/json" id="trace-data">{payload}</script>',
        f"<script>{_LABEL_SCRIPT}</script>",
    ])


def render_trace(records: list[dict], name: str) -> str:
    """One recorded run (``soma run --trace``): p and S per monitor, the text as S2 saw it, and labelling."""
    start = next((r for r in records if r["type"] == "run_start"), None)
    end = next((r for r in records if r["type"] == "run_end"), None)
    if start is None:
        raise DataError(f"{name}: no run_start record: not a run trace")
    scans = [r for r in records if r["type"] == "scan"]
    takeover = next((r for r in records if r["type"] == "takeover"), None)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(name)} <small>(S2 {html.escape(start['s2_model'])}, S1 {html.escape(start['s1'])})</small></h1>",
        f"<table><tr><th>stop</th><td>{html.escape(end['stop'] if end else 'no run_end: the run was killed')}</td></tr></table>",
        f"<h2>Question</h2><pre class='reasoning'>{html.escape(start['question'])}</pre>",
    ]
    for m in start["monitors"]:
        h = start["thresholds"].get(m["name"])
        at = takeover["thinking_tokens"] if takeover and takeover["monitor"] == m["name"] else None
        parts += [f"<h2>Scans ({html.escape(m['name'])})</h2>",
                  _plot(scans, m["name"], float(h) if h is not None else None, at)]
    if end is not None:
        parts.append("<h2>Reasoning and answer as S2 saw them</h2><pre class='reasoning' id='reasoning'>"
                     f"{_output_html(end['output'], takeover)}</pre>")
    parts += [_labelling(records, name), "</body></html>"]
    return "\n".join(parts)


def write_viewer(results: Path, question_id: str | None = None, out: Path | None = None, h: float | None = None) -> Path:
    """The viewer of one question of a result file, or of a recorded run (``question_id`` not needed)."""
    if (first_record(results) or {}).get("type") == "run_start":
        records = [r.model_dump(mode="json") for r in read_trace(results)]
        out = out or results.with_suffix(".html")
        out.write_text(render_trace(records, results.stem), encoding="utf-8")
        return out
    if question_id is None:
        raise DataError(f"{results}: a result file holds many questions: name one (soma bench view FILE ID)")
    line = next((r for r in read_results(results) if r.id == question_id), None)
    if line is None:
        raise DataError(f"{results}: no result line for question '{question_id}'")
    out = out or results.with_name(f"{results.stem}.{re.sub(r'[^A-Za-z0-9_.-]', '_', question_id)}.html")
    out.write_text(render(line, h), encoding="utf-8")
    return out
