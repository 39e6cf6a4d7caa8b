"""Single-run readout: pure read-off rules on hand-built records, and equality with real runs on the
embedded GGUF (paper App. B: the readout at h must be what a real run with threshold h produces)."""

import math

import pytest

from soma_local.errors import DataError
from soma_local.engine.monitors import resolve_monitors
from soma_local.calibration.readout import ReadoutRun
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.engine.trace import Branch, MonitorScan, RunEnd, RunStart, Scan, Timings, TokenCounts, TraceWriter, read_trace

from conftest import ScriptedS1

QUESTION = "List the first twenty prime numbers and explain for each why it is prime."
FMT = ThinkingFormat("prompted", close="</think>")


def _config(**kw):
    base = dict(pause=PauseRule(48, 16), max_tokens=450, sampling=SamplingParams(0.8, 0.95, 0, 0.0, 21), thinking=FMT)
    base.update(kw)
    return RunConfig.of_mode(base.pop("mode", "soma"), **base)


# ---- pure read-off over hand-built records ---------------------------------------------------------

def _scan(i, tokens, score, action="none", p=0.7):
    return Scan(index=i, thinking_tokens=tokens, position=tokens + 50, at_line_break=True, s1_seconds=0.0,
                monitors={"m": MonitorScan(p=p, evidence=0.0, score=score, action=action, in_episode=True)})


def _records(mode="readout"):
    start = RunStart(question="q", s2_model="s2", s1="s1", monitors=[{"name": "m"}], thresholds={"m": math.inf},
                     settings={"mode": mode}, started_at="now")
    scans = [_scan(0, 100, 1.2, "remind"), _scan(1, 200, 0.8), _scan(2, 300, 2.5), _scan(3, 400, 1.0, p=None)]
    branches = [Branch(monitor="m", scan_index=i, thinking_tokens=t, text=f"B{i}", inserted_tokens=5,
                       generated_tokens=10 + i) for i, t in ((1, 200), (2, 300))]
    end = RunEnd(stop="answer", thinking="t", answer="full answer", output="o", takeover=None, scans=4,
                 failed_scans=1, reminders=1, tokens=TokenCounts(thinking=450, answer=30, probe=21, inserted=40),
                 timings=Timings())
    return [start, *scans, *branches, end]


def test_read_off_takes_the_first_pause_at_or_above_h_and_counts_the_papers_tokens():
    run = ReadoutRun(_records())
    low, mid, high = run.grid("m", [0.5, 2.0, 3.0])
    assert (low.scan_index, low.answer, low.tokens) == (1, "B1", 200 + 11)
    assert (mid.scan_index, mid.answer, mid.tokens) == (2, "B2", 300 + 12)
    # Never reached: the full run, without the readout's own probe tokens.
    assert (high.takeover, high.answer, high.tokens, high.stop) == (None, "full answer", 480, "answer")


def test_a_reminder_scan_never_takes_over_even_above_h():
    """Scan 0 reports S=1.2 before the reminder resets it: h=1.0 first takes over at scan 2."""
    (out,) = ReadoutRun(_records()).grid("m", [1.0])
    assert out.scan_index == 2


def test_read_off_rejects_non_readout_traces_and_missing_branches():
    with pytest.raises(DataError, match="not a readout run"):
        ReadoutRun(_records(mode="soma"))
    records = [r for r in _records() if not (isinstance(r, Branch) and r.scan_index == 1)]
    with pytest.raises(DataError, match="no branch"):
        ReadoutRun(records, source="x.jsonl").grid("m", [0.5])


# ---- the readout equals real runs, token for token, on the embedded GGUF ---------------------------

# remind at 0; S 0.85 at 1, 2.23 at 2. With seed 21 this run thinks for three pauses, then ends.
PROBS = [0.8, 0.7, 0.8]
EXPECTED_SCAN = {0.5: 1, 2.0: 2, 100.0: None}


def test_readout_over_a_grid_equals_real_runs_on_a_real_gguf(s2, tmp_path):
    (m,) = resolve_monitors(["overthinking"])
    path = tmp_path / "readout.jsonl"
    with TraceWriter(path) as trace:
        supervise(QUESTION, s2, ScriptedS1(PROBS), [m], _config(mode="readout"), trace)
    run = ReadoutRun(read_trace(path), source=str(path))  # through the JSONL file, inf included
    assert run.end.scans >= 3, "the run must reach the pauses the thresholds need"
    for h, out in zip(EXPECTED_SCAN, run.grid(m.name, list(EXPECTED_SCAN))):
        real = supervise(QUESTION, s2, ScriptedS1(PROBS), [m], _config(thresholds={m.name: h})).end
        assert out.scan_index == EXPECTED_SCAN[h]
        assert out.stop == real.stop
        assert out.answer == real.answer
        assert out.thinking_tokens == real.tokens.thinking
        assert out.tokens == real.tokens.thinking + real.tokens.answer
        assert real.tokens.probe == 0


def test_no_reminder_readout_equals_a_real_no_reminder_run(s2):
    (m,) = resolve_monitors(["overthinking"])
    probs = [0.6, 0.6, 0.6, 0.6]  # S 0.41, 0.81, 1.22: h=1.0 takes over at scan 2 with no reminder
    readout = supervise(QUESTION, s2, ScriptedS1(probs), [m], _config(mode="readout_no_reminder", max_tokens=250))
    (out,) = ReadoutRun(readout.records).grid(m.name, [1.0])
    real = supervise(QUESTION, s2, ScriptedS1(probs), [m], _config(mode="no_reminder", thresholds={m.name: 1.0},
                                                                   max_tokens=250)).end
    assert readout.end.reminders == 0 and out.scan_index == 2
    assert (out.answer, out.tokens) == (real.answer, real.tokens.thinking + real.tokens.answer)
