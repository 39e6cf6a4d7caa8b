"""The statement-reading S1's training data and figures, without training: rewordings keep the label's
meaning, held-out families never reach a training or T set, a step's states carry every statement
labelled on them, and the figures count what they say."""

from __future__ import annotations

import random
from argparse import Namespace

import numpy as np
import pytest

from soma_local.s1.classifier import SharedStateEncoder
from soma_local.s1.model_folders import resolve_backbone
from training.bank import evaluate as bank_eval
from training.bank.statement_bank import form_of, load_bank
from training.labels.pairs import Pair, reworded, trainable
from training.s1.statement_reader import StateTokens, plan_epochs


@pytest.fixture(scope="module")
def bank():
    return load_bank()


def _pair(bank, key: str, p: float, sid: str = "s1", split: str = "train") -> Pair:
    return Pair(sid, "q1", split, "trace", key.split(".")[0], key, bank.statement(key),
                "Tom buys 7 pens at $2 each. How much?", "7 * 2 = 14. Let me check: 14. Yes.", p)


def test_a_reworded_pair_keeps_its_meaning(bank):
    pair = _pair(bank, "looping.0", 0.8)
    rng = random.Random(0)
    for _ in range(200):
        shown = reworded(pair, bank, rng, share=1.0, negation_share=0.5)
        assert shown.family == "looping"
        assert shown.p == pytest.approx(0.2 if shown.negated else 0.8)
        assert shown.statement == bank.statement(shown.key)
    negated = _pair(bank, "looping.1.not", 0.05)
    assert {round(reworded(negated, bank, rng, 1.0, 0.5).p, 2) for _ in range(100)} == {0.05, 0.95}
    assert reworded(pair, bank, rng, share=0.0, negation_share=1.0) == pair
    forms = [reworded(pair, bank, rng, 1.0, 0.0, form_share=1.0) for _ in range(30)]
    assert {q.key.split(".")[1] for q in forms} == {"question", "instruction", "label"}
    assert all(q.p == 0.8 and q.statement == bank.statement(q.key) for q in forms)  # a form holds when its wording does
    contrast = next(f for f in bank.trained if f.contrast is not None)
    kept = _pair(bank, f"{contrast.id}.contrast", 0.9)
    assert reworded(kept, bank, rng, 1.0, 0.5, form_share=1.0) == kept  # a contrast means more than its wording


def test_held_out_families_never_train_or_fit_t(bank):
    held = bank.held_out[0].id
    pairs = [_pair(bank, f"{held}.0", 0.9, "a", "train"), _pair(bank, "looping.0", 0.9, "b", "dev"),
             _pair(bank, f"{held}.0", 0.9, "c", "dev")]
    assert trainable(pairs, bank, "train") == []
    assert [p.sid for p in trainable(pairs, bank, "dev")] == ["b"]


def test_a_step_packs_each_state_with_all_its_statements(bank):
    encoder = SharedStateEncoder(resolve_backbone("all-minilm-l6-v2"), 128, "cpu", precision="float32")
    pairs = [_pair(bank, f"{f}.0", 0.8, sid) for sid in ("s1", "s2", "s3") for f in ("looping", "rechecking", "doubt")]
    args = Namespace(epochs=2, seed=0, short_length=96, short_epochs=1, max_length=128, paper_per_epoch=0,
                     reword_share=0.5, negation_share=0.3, batch_size=4)
    tokens = StateTokens(encoder, [p.statement for p in pairs])
    length_of = lambda pair, n: len(tokens.state(pair, n))  # noqa: E731
    plan = plan_epochs(pairs, bank, length_of, args)
    assert [length for length, _ in plan] == [96, 96, 128, 128]  # the short epoch first
    for epoch in (plan[:2], plan[2:]):  # a step closes once it holds 4 pairs: 2 states, then the last one
        assert sorted(len(step) for _, step in epoch) == [1, 2]
    assert all(len(statements) == 3 for _, step in plan for _, statements in step)
    assert plan == plan_epochs(pairs, bank, length_of, args)  # the seed fixes the plan, so a resumed run goes on
    two = next(step for _, step in plan[2:] if len(step) == 2)
    inputs = tokens.batch(two, 128)
    assert len(inputs.segments) == 6 and inputs.inputs["input_ids"].shape[0] == 2


def test_figures_count_families_and_where_p_sits(bank):
    held = bank.held_out[0].id
    pairs = ([_pair(bank, "looping.0", p, f"t{i}") for i, p in enumerate([0.95, 0.8, 0.05, 0.2])]
             + [_pair(bank, f"{held}.0", p, f"h{i}") for i, p in enumerate([0.95, 0.05])])
    probs = np.array([0.9, 0.6, 0.1, 0.7, 0.8, 0.3])
    out = bank_eval.figures(pairs, probs, bank)
    assert out["trained"]["n"] == 4 and out["held_out"]["n"] == 2
    assert out["families"]["looping"]["auroc"] == pytest.approx(0.75)
    assert out["families"][held]["auroc"] == 1.0 and out["families"][held]["held_out"]
    assert out["middle"]["median_p_reader_ge_0.8"] == pytest.approx(0.8)
    assert out["middle"]["median_p_reader_le_0.2"] == pytest.approx(0.3)


def test_forms_and_minimal_pairs_are_reported_apart(bank):
    pair = bank.minimal_pair[0]
    pairs = [_pair(bank, pair.a, 0.9, "s"), _pair(bank, pair.b, 0.1, "s"), _pair(bank, pair.a, 0.1, "t"),
             _pair(bank, pair.b, 0.9, "t"), _pair(bank, "looping.question", 0.9, "s"), _pair(bank, "looping.2.not", 0.1, "t")]
    out = bank_eval.figures(pairs, np.array([0.8, 0.3, 0.6, 0.4, 0.7, 0.2]), bank)
    assert out["minimal_pairs"] == {"n": 2, "ordered": 0.5}  # state s ordered as the readers did, state t not
    assert {"question", "negation"} <= set(out["forms"])
    assert [form_of(k) for k in ("looping.0", "looping.0.not", "looping.label", "overthinking")] == \
        ["wording", "negation", "label", "paper"]
