"""Trace replay's pure parts: the no-reminder controller and the outcome rules, on hand-built traces
(no model)."""

import math

from soma_local.calibration.metrics import ItemResult
from soma_local.calibration.recorded import RecordedTrace
from soma_local.calibration.replay import (
    ScannedTrace,
    calibration_ids,
    replay_item,
    sample_traces,
    takeover_pause,
)
from soma_local.s1.base import S1Query
from soma_local.s1.cache import CachedS1, ScoreCache
from soma_local.calibration.scoring import after_thinking


def test_no_reminder_controller_takes_over_from_the_first_pause():
    probs = [0.6, None, 0.6, 0.6, 0.9]  # S 0.41, (failed), 0.81, 1.22, 3.41
    assert takeover_pause(probs, 1.0) == 3
    assert takeover_pause(probs, 3.0) == 4
    assert takeover_pause(probs, 5.0) is None
    assert takeover_pause(probs, math.inf) is None


def _scanned(answerable=True, gold="12", stated=("10", "12", None)):
    vanilla = ItemResult(id="q", answerable=answerable, abstained=False, correct=answerable, tokens=900)
    return ScannedTrace(id="q", dataset="d", model="org/M", answerable=answerable, gold=gold,
                        pause_tokens=[100, 200, 300], stated=list(stated), probs=[0.9, 0.1, 0.99], vanilla=vanilla)


def test_outcomes_abstain_or_take_the_last_stated_answer():
    t = _scanned()  # S = 2.20 at pause 0, 0 at 1, 4.60 at 2
    early = replay_item(t, 2.0, abstaining_takeover=False)
    assert (early.correct, early.tokens, early.takeover) == (False, 100, True)  # "10" was stated, gold 12
    late = replay_item(t, 4.0, abstaining_takeover=False, takeover_answer_tokens=64)
    assert (late.correct, late.abstained, late.tokens) == (False, False, 364)  # nothing stated at pause 2
    refuse = replay_item(_scanned(answerable=False, gold=None), 2.0, abstaining_takeover=True)
    assert (refuse.abstained, refuse.correct, refuse.tokens) == (True, False, 100)
    assert replay_item(t, 10.0, abstaining_takeover=True) == t.vanilla


def test_recorded_trace_question_and_thinking():
    t = RecordedTrace(dataset="umwp", model="Qwen/Qwen3-8B", question_id="umwp-1", answerable=True,
                      prompt=" How many? Let's think step by step and output the final answer within \\boxed{}. Please",
                      output="<think>\nstep</think>\n\\boxed{3}", ground_truth="3")
    assert (t.question, t.thinking, t.gold) == ("How many?", "\nstep", "3")
    assert t.model_copy(update={"ground_truth": [14.0]}).gold == "14"
    assert t.model_copy(update={"ground_truth": 2.5}).gold == "2.5"
    assert t.model_copy(update={"answerable": False}).gold is None


def test_score_cache_survives_a_reload_and_is_keyed_by_s1(tmp_path):
    q = S1Query("statement", "task", "reasoning")
    ScoreCache(tmp_path, "readout:a.gguf").put(q, 0.25)
    assert ScoreCache(tmp_path, "readout:a.gguf").get(q) == 0.25
    assert ScoreCache(tmp_path, "readout:b.gguf").get(q) is None
    assert ScoreCache(tmp_path, "readout:a.gguf").get(S1Query("statement", "task", "other")) is None


def test_sampling_is_seeded_and_keeps_file_order():
    items = list(range(50))
    a, b = sample_traces(items, 5, seed=1), sample_traces(items, 5, seed=1)
    assert a == b == sorted(a) and len(a) == 5 and sample_traces(items, None, 1) == items


def test_calibration_share_is_a_stable_per_question_draw():
    ids = [f"q{i}" for i in range(400)]
    half = calibration_ids(ids, 0.5, seed=0)
    assert 160 < len(half) < 240 and half == calibration_ids(reversed(ids), 0.5, seed=0)
    assert calibration_ids(ids[:100], 0.5, seed=0) == {q for q in half if q in ids[:100]}  # subset-stable
    assert calibration_ids(ids, 0.5, seed=1) != half and calibration_ids(ids, 0.0, seed=0) == set()
    reserved = frozenset(sorted(half)[:10])
    assert calibration_ids(ids, 0.5, seed=0, reserved=reserved) == half - reserved  # gold never calibrates h


def test_an_engine_trace_becomes_a_recorded_trace_joined_to_its_question():
    from soma_local.calibration.runs import Question
    from soma_local.calibration.recorded import from_engine_trace
    from soma_local.engine.trace import RunEnd, RunStart, Timings, TokenCounts

    start = RunStart(question="How many? ", s2_model="m.gguf", s1="none", monitors=[], thresholds={},
                     settings={"mode": "soma"}, started_at="now")
    end = RunEnd(stop="answer", thinking="I count 3.\n", answer="\\boxed{3}", output="", takeover=None, scans=0,
                 failed_scans=0, reminders=0, tokens=TokenCounts(), timings=Timings())
    q = Question(id="q1", question="How many?", answer="3", source="umwp_standard")
    t = from_engine_trace([start, end], {"How many?": q}, "run.jsonl")
    assert (t.thinking, t.gold, t.model, t.dataset) == ("I count 3.\n", "3", "m.gguf", "umwp_standard")
    assert after_thinking(t.output) == "\\boxed{3}"
    cut = from_engine_trace([start, end.model_copy(update={"stop": "limit"})], {"How many?": q}, "run.jsonl")
    assert after_thinking(cut.output) is None


def test_cached_s1_asks_the_wrapped_s1_only_for_new_states(tmp_path):
    from conftest import ScriptedS1

    inner = ScriptedS1([0.7, 0.2])
    s1 = CachedS1(inner, ScoreCache(tmp_path, inner.name))
    a, b = S1Query("s", "task", "one"), S1Query("s", "task", "two")
    assert s1.score([a]) == [0.7]
    assert s1.score([a, b]) == [0.7, 0.2]  # only b reached the wrapped S1
    assert [len(batch) for batch in inner.seen] == [1, 1]
    assert CachedS1(ScriptedS1([0.9]), ScoreCache(tmp_path, inner.name)).score([b]) == [0.2]  # from disk


def test_the_unanswerable_monitor_prompts_as_the_shared_traces_were(data_dir):
    """One prompt suffix: every shared trace's prompt is its question plus the unanswerable monitor's
    prompt_suffix (Liu et al.'s prompt), which begins with the instruction the trace parser cuts at."""
    from soma_local.calibration.recorded import BASE_INSTRUCTION, load_all
    from soma_local.engine.monitors import resolve_monitors

    (monitor,) = resolve_monitors(["unanswerable"])
    assert monitor.prompt_suffix.startswith(BASE_INSTRUCTION)
    for t in load_all(data_dir):
        assert t.prompt.endswith(monitor.prompt_suffix) and t.prompt.removesuffix(monitor.prompt_suffix).strip() == t.question
