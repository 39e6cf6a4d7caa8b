"""Tables from result lines, and the HTML viewer rendered in a real headless browser."""

import shutil
import subprocess

import pytest

from soma_local.bench.methods.base import Harness
from soma_local.bench.methods.soma import SomaReadout
from soma_local.bench.report import write_reports
from soma_local.bench.results import ResultFile, ResultLine
from soma_local.bench.viewer import write_viewer
from soma_local.engine.monitors import resolve_monitors
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat
from soma_local.engine.pauses import PauseRule
from soma_local.engine.trace import TokenCounts
from soma_local.bench.methods.base import Outcome

from conftest import ScriptedS1
from waiting import DEADLINE

# A close tag the model never writes keeps it thinking, so there are scans to plot.
NEVER_CLOSES = ThinkingFormat("prompted", close="</never-closes>")
QUESTION = "List the first twenty prime numbers and explain for each why it is prime."


def _line(method, id, answer, thinking_tokens, benchmark="gsm8k", records=(), extras=None):
    return ResultLine(
        id=id, benchmark=benchmark, scenario="overthinking", method=method, model="tiny", prompt="p", gold="18",
        answerable=True, settings={}, seconds=0.0,
        outcome=Outcome(stop="answer", thinking="t", answer=answer, tokens=TokenCounts(thinking=thinking_tokens),
                        records=list(records), extras=extras or {}),
    )


def test_table2_layout_weights_and_token_change(tmp_path):
    rows = {
        "vanilla": [("q1", "\\boxed{18}", 100), ("q2", "\\boxed{3}", 300)],
        "deer": [("q1", "\\boxed{18}", 50), ("q2", "\\boxed{18}", 150)],
    }
    for method, items in rows.items():
        f = ResultFile(tmp_path / "tiny" / "gsm8k" / f"{method}.jsonl", {})
        for id, answer, tok in items:
            f.append(_line(method, id, answer, tok))
        f.close()
    md, csv_path, png = write_reports(tmp_path, tmp_path / "out")
    text = md.read_text()
    assert "Table 2 (overthinking)" in text
    assert "| Vanilla | 50.0 | 200 |" in text and "| DEER | 100.0 | -50% |" in text
    assert "tiny,overthinking,DEER,avg_questions,accuracy,1.0,2" in csv_path.read_text()
    assert png.read_bytes()[:4] == b"\x89PNG"
    for column in ("**Acc**", "**Abs**", "**FA**", "**Tok**"):  # the tables say what their columns mean
        assert column in text


def test_question_weighted_averages_weight_each_rate_by_its_own_questions(tmp_path):
    """Accuracy averages over answerable questions, abstention over unanswerable ones."""
    import csv

    items = {"sum": [("s1", True, "\\boxed{18}"), ("s2", True, "\\boxed{3}")],
             "umwp": [("u1", True, "\\boxed{18}"), ("u2", False, "\\boxed{I don't know.}"),
                      ("u3", False, "\\boxed{I don't know.}")]}
    for bench, rows in items.items():
        f = ResultFile(tmp_path / "tiny" / bench / "vanilla.jsonl", {})
        for id, answerable, answer in rows:
            f.append(_line("vanilla", id, answer, 10, benchmark=bench).model_copy(
                update={"scenario": "unanswerable", "answerable": answerable, "gold": "18" if answerable else None}))
        f.close()
    _, csv_path, _ = write_reports(tmp_path, tmp_path / "out")
    avg = {r["metric"]: float(r["value"]) for r in csv.DictReader(csv_path.open()) if r["benchmark"] == "avg_questions"}
    assert avg["accuracy"] == pytest.approx(2 / 3)  # 2 of 3 answerable questions (not 0.8 by benchmark size)
    assert avg["abstention"] == 1.0 and avg["false_abstention"] == 0.0


def test_viewer_renders_reminders_and_scan_plot_in_headless_chromium(s2, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no headless browser installed (apt-get install -y chromium)")
    (monitor,) = resolve_monitors(["overthinking"])
    harness = Harness(s2=s2, sampling=SamplingParams(0.8, 0.95, 0, 0.0, 21), s1=ScriptedS1([0.9, 0.8, 0.8]),
                    pause=PauseRule(48, 16), max_tokens=200, thinking=NEVER_CLOSES)
    outcome = SomaReadout().run(QUESTION, monitor, harness)
    assert sum(r["type"] == "scan" for r in outcome.records) >= 2
    path = tmp_path / "soma.jsonl"
    f = ResultFile(path, {})
    f.append(_line("soma", "q1", outcome.answer, 0).model_copy(update={"outcome": outcome}))
    f.close()
    html = write_viewer(path, "q1", tmp_path / "v.html", h=1.0)
    run = lambda *a: subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", *a, html.as_uri()],
                                    capture_output=True, timeout=DEADLINE)  # a loaded machine starts a browser slowly
    dom = run("--dump-dom").stdout.decode()
    assert '<mark class="reminder"' in dom and monitor.reminder in dom
    assert dom.count('class="p"') == dom.count('class="S"') >= 2  # p and S for every scan
    assert '<mark class="takeover"' in dom  # the read-off takeover at h=1
    assert dom.count('class="takeover"') == 2 and "takeover read off at h = 1" in dom  # a line the legend names
    assert 'class="threshold"' in dom and ">0.25</text>" in dom and ">0.75</text>" in dom  # h line, p tick values
    shot = tmp_path / "shot.png"
    run(f"--screenshot={shot}", "--window-size=1000,1400")
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
