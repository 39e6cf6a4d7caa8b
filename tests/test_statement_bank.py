"""The statement bank and its labels: what the statement-reading S1 trains and is measured on. Held-out
families stay out of training, no reserved question is anywhere, every label points at a real state."""

from __future__ import annotations

import pytest

from soma_local.calibration.recorded import load_all, reserved_questions
from soma_local.engine.monitors import resolve_monitors
from training.bank.statement_bank import bank_split, family_of, load_bank
from training.labels.readers import SCALE, BankLabel, read_labels
from training.states.bank_batches import Texts, read_states
from training.states.reader_set import training_half


@pytest.fixture(scope="module")
def bank():
    return load_bank()


def test_the_bank_has_many_families_each_with_wordings_and_negations(bank):
    assert len(bank.family) >= 40 and len(bank.held_out) >= 5
    assert sum(len(f.wordings) for f in bank.family) >= 40
    for f in bank.family:
        assert len(f.wordings) >= 2 and len(f.negations) == len(f.wordings)
        assert len(set(f.wordings + f.negations)) == 2 * len(f.wordings), f.id


def test_bank_states_never_come_from_a_reserved_question_and_only_eval_ones_from_replay_s_half(data_dir):
    traces = load_all(data_dir)
    half = training_half((t.dataset, t.answerable, t.question_id) for t in traces)
    reserved = reserved_questions(data_dir)
    states = read_states()
    assert len(states) >= 1500
    for s in states:
        assert s.question_id not in reserved, s.sid
        if s.split == "eval":  # measuring only: the other half, which no S1 trains on
            assert s.question_id not in half, s.sid
        else:
            assert s.question_id in half and s.split == bank_split(s.question_id), s.sid


def test_held_out_families_are_labelled_on_test_and_eval_states_only(bank):
    held = {f.id for f in bank.held_out}
    states = {s.sid: s for s in read_states()}
    labels = read_labels(BankLabel)
    assert len({(r.sid, r.key) for r in labels}) >= 10_000
    for r in labels:
        assert r.p in SCALE
        assert r.key in states[r.sid].statements.values(), (r.sid, r.key)
        if family_of(r.key) in held:
            assert states[r.sid].split in ("test", "eval"), (r.sid, r.key)


def test_every_state_is_rebuilt_from_the_data_directory(data_dir):
    texts = Texts(data_dir)
    for s in read_states()[::50]:
        state = texts.state(s)
        assert state.startswith("Task: ") and "\n\nReasoning so far: " in state


def test_shipped_monitors_speak_the_bank_s_words(bank):
    """looping and off_task use trained statements; guessing's family was held out, so it is read zero-shot."""
    wordings = {w: f for f in bank.family for w in f.wordings}
    looping, off_task, guessing = resolve_monitors(["looping", "off_task", "guessing"])
    assert not wordings[looping.statement].held_out and not wordings[off_task.statement].held_out
    assert wordings[guessing.statement].held_out
