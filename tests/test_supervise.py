"""The supervise loop on a real small S2 with a scripted S1 (the loop's behaviour is under test)."""

import json

import pytest

from soma_local.engine.monitors import resolve_monitors
from soma_local.s2.base import SamplingParams
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.engine.trace import Branch, Reminder, Scan, Takeover, TraceWriter, read_trace

from conftest import CharTokenizer, ScriptedS1
from toy_runtime import ToyS2

QUESTION = "List the first twenty prime numbers and explain for each why it is prime."
# The embedded model rarely closes thinking; a stop text it never writes keeps it thinking.
from soma_local.s2.formats import ThinkingFormat

FMT = ThinkingFormat("prompted", close="</think>")


def config(**kw):
    base = dict(pause=PauseRule(64, 32), max_tokens=600, sampling=SamplingParams(0.8, 0.95, 0, 0.0, 21), thinking=FMT)
    base.update(kw)
    return RunConfig.of_mode(base.pop("mode", "soma"), **base)


def test_reminder_reaches_s2_but_not_the_next_s1_state(s2):
    (m,) = resolve_monitors(["overthinking"])
    s1 = ScriptedS1([0.9, 0.1, 0.1, 0.1])
    result = supervise(QUESTION, s2, s1, [m], config(mode="remind_only"))
    reminders = [r for r in result.records if isinstance(r, Reminder)]
    assert len(reminders) == 1 and result.end.scans >= 2
    assert m.reminder in result.end.output  # in S2's text...
    assert m.reminder in s2.decode(s2._ids)  # ...and its KV context
    later_states = [pairs[0][1] for pairs in s1.seen[1:]]
    assert later_states and all(m.reminder not in st for st in later_states)
    assert all(st.startswith(f"Task: {QUESTION}\n\nReasoning so far: ") for st in later_states)
    assert result.end.tokens.inserted == reminders[0].tokens


def test_takeover_closes_thinking_within_budget(s2, tmp_path):
    (m,) = resolve_monitors(["overthinking"])
    s1 = ScriptedS1([0.95])  # reminder at scan 1, S = 2.94 >= 1.5 at scan 2
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as trace:
        result = supervise(QUESTION, s2, s1, [m], config(thresholds={"overthinking": 1.5}), trace)
    assert result.stop == "takeover" and result.end.scans == 2
    assert result.end.tokens.answer <= m.takeover.max_tokens
    assert result.answer.startswith("**Final Answer**")
    assert "</think>\n\n**Final Answer**" in result.end.output
    kinds = [type(r).__name__ for r in read_trace(path)]
    assert kinds == ["RunStart", "Scan", "Reminder", "Scan", "Takeover", "RunEnd"]
    scans = [r for r in read_trace(path) if isinstance(r, Scan)]
    assert scans[1].monitors["overthinking"].action == "takeover"
    assert abs(scans[1].monitors["overthinking"].score - 2.944) < 0.01


def test_readout_branch_equals_a_real_run_token_for_token(s2, tmp_path):
    """Paper App. B: the readout at h must be what a real run with threshold h produces."""
    (m,) = resolve_monitors(["unanswerable"])
    probs = [0.8, 0.7, 0.7, 0.7, 0.7]  # remind at 1; S = 0.85, 1.69, 2.54, 3.39 after
    h = 2.0
    pause = PauseRule(16, 8)  # four scans within the first ~100 tokens, however soon S2 would stop thinking
    readout = supervise(QUESTION, s2, ScriptedS1(probs), [m], config(mode="readout", pause=pause))
    real = supervise(QUESTION, s2, ScriptedS1(probs), [m], config(thresholds={"unanswerable": h}, pause=pause))
    branches = [r for r in readout.records if isinstance(r, Branch)]
    scans = {r.index: r for r in readout.records if isinstance(r, Scan)}
    first = next(b for b in branches if scans[b.scan_index].monitors["unanswerable"].score >= h)
    (takeover,) = [r for r in real.records if isinstance(r, Takeover)]
    assert real.stop == "takeover"
    assert takeover.scan_index == first.scan_index and takeover.thinking_tokens == first.thinking_tokens
    assert real.answer == first.text
    assert real.end.tokens.answer == first.generated_tokens
    # The main line of the readout run is untouched by its branches: same thinking up to the takeover.
    assert readout.thinking.startswith(real.thinking)


def test_failing_s1_never_stops_s2(s2):
    (m,) = resolve_monitors(["overthinking"])
    s1 = ScriptedS1([RuntimeError("S1 down")])
    result = supervise(QUESTION, s2, s1, [m], config(max_tokens=300, thresholds={m.name: m.default_threshold}))
    assert result.end.scans >= 2 and result.end.failed_scans == result.end.scans
    scans = [r for r in result.records if isinstance(r, Scan)]
    assert all(s.error and s.monitors["overthinking"].p is None for s in scans)
    assert result.end.reminders == 0 and result.stop in ("limit", "answer", "eos_in_thinking")


def test_vanilla_run_has_no_scans_and_respects_the_limit(s2):
    result = supervise(QUESTION, s2, None, resolve_monitors(["overthinking"]), config(max_tokens=200))
    assert result.end.scans == 0
    assert result.end.tokens.thinking + result.end.tokens.answer <= 200
    json.loads(result.end.model_dump_json())


def test_full_context_ends_the_run_as_a_limit(smollm_path):
    from soma_local.s2.llama_cpp import LlamaCppS2

    (m,) = resolve_monitors(["overthinking"])
    small = LlamaCppS2(smollm_path, n_ctx=256, n_threads=2)
    try:
        result = supervise(QUESTION, small, ScriptedS1([0.1]), [m],
                           config(max_tokens=10_000, thresholds={m.name: m.default_threshold}))
    finally:
        small.close()
    assert result.stop == "limit"
    assert result.end.tokens.prompt + result.end.tokens.thinking <= 256


def test_a_long_task_is_cut_for_s1_and_the_run_says_so(s2):
    """Issue 12, item 7: a task that fills S1's input no longer leaves S1 blind to the reasoning."""
    (m,) = resolve_monitors(["overthinking"])
    s1 = ScriptedS1([0.1], input_limit=2000)
    s1._tok = CharTokenizer()
    task = "Background. " * 500 + QUESTION  # ~6k characters against a 2k-character S1 input
    events = []
    run_config = config(max_tokens=80, pause=PauseRule(32, 8), thresholds={m.name: m.default_threshold})
    result = supervise(task, s2, s1, [m], run_config, on_event=events.append)
    cut = result.records[0].settings["s1_task_cut"]
    assert cut["task_tokens"] == len(task) and cut["kept_tokens"] < cut["budget"] < 2000
    assert events[0] is result.records[0], "the live view hears of the cut before S2 starts"
    assert s1.seen, "S1 scanned"
    state = s1.seen[0][0][1]
    shown_task, reasoning = state.split("\n\nReasoning so far: ", 1)
    assert "tokens of the task left out" in shown_task and shown_task.endswith(QUESTION), "its end is kept"
    assert len(state) <= 2000 and len(reasoning) >= 20 and reasoning in result.end.thinking, "S1 reads reasoning"


def test_a_run_that_takes_over_at_h_needs_an_h_for_each_monitor_and_picks_none_itself():
    """h is picked once, above the engine (calibration.thresholds.resolve_thresholds): a monitor left without one
    is refused before S2 runs instead of taking its file's default behind the caller's back."""
    monitors = resolve_monitors(["overthinking", "unanswerable"])
    s2 = ToyS2([b"Some thought.", b"\n"] * 50)
    with pytest.raises(ValueError, match="no h for monitor 'unanswerable' in mode no_reminder"):
        supervise(QUESTION, s2, ScriptedS1([0.1]), monitors, config(mode="no_reminder", thresholds={"overthinking": 2.0}))
    assert s2._next == 0, "S2 never ran"
    # A mode that never takes over at h needs none.
    result = supervise(QUESTION, s2, ScriptedS1([0.1]), monitors, config(mode="remind_only", max_tokens=40))
    assert result.records[0].thresholds == {"overthinking": float("inf"), "unanswerable": float("inf")}
