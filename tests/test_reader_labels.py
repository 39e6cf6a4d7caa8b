"""The reader-labelled S1 data: gold-shaped states, a fixed half split, and no reserved question anywhere."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from training.labels.readers import StateLabel, agreement, merge, read_labels
from training.paths import READER_LABELS as LABELS, READER_STATES as REFS
from soma_local.calibration.recorded import load_all, reserved_questions
from training.states.reader_set import StateRef, limit_h, read_refs, render_state, trace_key, training_half


@pytest.fixture(scope="module")
def traces(data_dir):
    return load_all(data_dir)


def test_states_are_rebuilt_exactly_as_gold_formats_them(data_dir, traces):
    by_key = {trace_key(t.dataset, t.model, t.question_id): t for t in traces}
    gold = [json.loads(line) for line in (data_dir / "s1_labels" / "gold_dev.jsonl").open(encoding="utf-8")]
    for row in gold:
        trace = by_key[trace_key(row["dataset"], row["model"], row["question_id"])]
        assert render_state(trace, row["cut_char"]) == row["state"], row["sid"]


def test_limit_h_cuts_at_a_line_break():
    h = "a" * 10 + "\n" + "b" * 20
    assert limit_h(h, 25) == "b" * 20
    assert limit_h(h, 100) == h


def test_training_half_is_at_most_half_of_each_group_and_stable(traces):
    triples = [(t.dataset, t.answerable, t.question_id) for t in traces]
    half = training_half(triples)
    groups = Counter((d, a) for d, a, _ in set(triples))
    in_half = Counter((d, a) for d, a, q in set(triples) if q in half)
    for group, n in groups.items():
        assert in_half[group] == n // 2
    assert training_half(reversed(triples)) == half


def test_no_reserved_question_reaches_the_reader_set_or_training(data_dir, traces):
    reserved = reserved_questions(data_dir)
    half = training_half((t.dataset, t.answerable, t.question_id) for t in traces)
    refs = read_refs(REFS)
    assert refs, "the reader state set is empty"
    for ref in refs:
        assert ref.question_id not in reserved, ref.sid
        assert ref.question_id in half, ref.sid
    if LABELS.is_file():
        for row in read_labels(StateLabel, LABELS):
            assert row.question_id not in reserved and row.question_id in half, row.sid


def _ref(sid: str, monitor: str = "overthinking") -> StateRef:
    return StateRef(sid=sid, dataset="umwp", model="m", question_id=f"q-{sid}", answerable=True, cut_char=10, monitor=monitor)


def test_merge_marks_second_readers_and_agreement_counts_them(tmp_path):
    refs = [_ref("r1"), _ref("r2"), _ref("r3", "unanswerable")]
    (tmp_path / "B001.L1.jsonl").write_text("\n".join(json.dumps({"sid": s, "p": p, "why": "x"})
                                                        for s, p in [("r1", 0.8), ("r2", 0.2), ("r3", 0.65)]))
    (tmp_path / "D001.L3.jsonl").write_text("\n".join(json.dumps({"sid": s, "p": p, "why": "y"})
                                                        for s, p in [("r1", 0.95), ("r2", 0.35)]))
    rows = merge([tmp_path], [], StateLabel, StateLabel.judged_fields(refs))
    assert [(r.sid, r.reader, r.pass_) for r in rows] == [("r1", "L1", 1), ("r2", "L1", 1), ("r3", "L1", 1),
                                                          ("r1", "L3", 2), ("r2", "L3", 2)]
    assert merge([tmp_path], rows, StateLabel, StateLabel.judged_fields(refs)) == rows  # merging again adds nothing
    stats = agreement(rows)["all"]
    assert stats["n"] == 2 and stats["binary_agreement"] == 1.0 and stats["auroc_second_vs_first"] == 1.0


def test_replay_ceiling_labels_are_of_questions_the_s1_never_trained_on(traces):
    """``benchmarks/data/replay_reader_labels.jsonl`` measures a reader standing in for S1 on replay's half:
    none of its questions may be in the training half, and every reference must still point at a pause
    inside its trace's thinking."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "replay_reader_labels.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    half = training_half((t.dataset, t.answerable, t.question_id) for t in traces)
    by_key = {trace_key(t.dataset, t.model, t.question_id): t for t in traces}
    assert rows
    for row in rows:
        assert row["question_id"] not in half, row
        render_state(by_key[trace_key(row["dataset"], row["model"], row["question_id"])], row["cut_char"])
