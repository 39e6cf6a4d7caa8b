"""Training data without models: the scan-schedule cutter, the rule labels, the leakage-safe split."""

import json

import pytest

from soma_local.errors import DataError
from soma_local.engine.pauses import pause_cuts
from soma_local.s2.model_files import GgufVocab
from training.labels.examples import Example, gold_question_ids, read_labelled, split_by_question
from soma_local.calibration.recorded import RecordedTrace, load_trace_files
from training.labels.rules import final_answer, final_boxed, overthinking_label, unanswerable_label, HIGH, LEAN, LOW, UNSURE
from training.states.cuts import scan_cuts


def test_training_cuts_states_where_the_engine_pauses(data_dir, smollm_path):
    """Training's cutter is the engine's schedule in character offsets: the same cuts as replay's."""
    vocab = GgufVocab.from_path(smollm_path)
    (trace, *_) = load_trace_files([data_dir / "traces" / "umwp_Qwen3-8B_answerable.jsonl"])
    text = trace.thinking
    _, cuts = pause_cuts(text, vocab.pieces(text))
    assert len(cuts) == 2 and scan_cuts(text, vocab) == [len(c) for c in cuts]


def test_final_boxed_matches_braces():
    assert final_boxed(r"so \boxed{1} then \boxed{\frac{1}{2}} done") == r"\frac{1}{2}"
    assert final_boxed("no box") is None


def test_overthinking_rule_follows_the_answer():
    assert overthinking_label("Let me add 3 and 4.", "7") == LOW
    assert overthinking_label("3 + 4 = 7.", "7") == UNSURE
    assert overthinking_label("3 + 4 = 7. So the answer is 7.", "7") == LEAN
    assert overthinking_label("3 + 4 = 7. So the answer is 7. Wait, let me double-check.", "7") == HIGH
    # 17 and 7.5 are not 7
    assert overthinking_label("17 and 7.5 and 27", "7") == LOW


def test_unanswerable_rule_needs_a_doubt_first():
    assert unanswerable_label("Let me assume x = 3 and compute.") == LOW
    assert unanswerable_label("The problem doesn't specify the price.") == LEAN
    assert unanswerable_label("The problem doesn't specify the price. Maybe they meant $5, so") == HIGH


def test_split_by_question_keeps_each_question_on_one_side():
    examples = [Example(f"k{i}", f"q{i % 10}", "m", "t", "r", 0.5) for i in range(100)]
    train, held = split_by_question(examples, 0.3, seed=0)
    assert {e.question_id for e in train}.isdisjoint({e.question_id for e in held})
    assert len({e.question_id for e in held}) == 3 and len(train) + len(held) == 100


def test_labelled_file_round_trip_and_errors(tmp_path):
    good = tmp_path / "labels.jsonl"
    good.write_text(json.dumps({"question_id": "q1", "monitor": "overthinking", "p": 0.8,
                                "state": "Task: Add 2 and 2.\n\nReasoning so far: 2 + 2 = 4.\nSo 4."}) + "\n")
    (example,) = read_labelled(good)
    assert (example.task, example.reasoning, example.label) == ("Add 2 and 2.", "2 + 2 = 4.\nSo 4.", 0.8)
    assert gold_question_ids(tmp_path) == {"q1"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question_id": "q1", "monitor": "m", "p": 0.8, "state": "no task here"}) + "\n")
    with pytest.raises(DataError, match="bad.jsonl:1: field 'state'"):
        read_labelled(bad)


def test_shared_traces_load_with_question_and_thinking(data_dir):
    traces = load_trace_files([data_dir / "traces" / "umwp_Qwen3-8B_answerable.jsonl"])
    assert len(traces) == 300
    first = traces[0]
    assert "Let's think step by step" not in first.question and first.question
    assert "<think>" not in first.thinking and "</think>" not in first.thinking
    assert final_answer(first)


def test_thinking_is_kept_verbatim_and_a_closed_run_has_an_answer():
    """One trace model for replay and training: the thinking as recorded (its leading newline too, as
    replay's cuts and the committed state references measure it), an answer only after ``</think>``."""
    closed = RecordedTrace(dataset="d", model="m", question_id="q", answerable=True, prompt="p",
                           output="<think>\nabc</think>ans")
    assert (closed.thinking, closed.answer, closed.closed) == ("\nabc", "ans", True)
    cut = closed.model_copy(update={"output": "<think>\nabc"})
    assert (cut.thinking, cut.answer, cut.closed) == ("\nabc", None, False)
