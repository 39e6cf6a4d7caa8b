"""The shared-state reading of a classifier S1, with the real MiniLM backbone: a state is encoded once
and each statement attends to it, so a statement's probability must not depend on which other
statements were asked of the same state, nor on their order."""

import torch

from soma_local.s1.classifier import SharedStateEncoder
from soma_local.s1.model_folders import resolve_backbone

STATE = ("Task: Tom buys 7 pens at $2 each. How much does he pay?\n\nReasoning so far: 7 * 2 = 14, so he pays $14. "
         "Let me check again: 2 + 2 + 2 + 2 + 2 + 2 + 2 = 14. Yes.")
OTHER = "Task: A train goes 60 km in 1 hour. How far in 3 hours?\n\nReasoning so far: Hmm, what is asked?"
STATEMENTS = ["The reasoning has already confirmed its answer.", "The reasoning is stuck in a loop.",
              "The reasoning switches to another language, which it never does in any of the examples given here."]


def _encoder(cls):
    return cls(resolve_backbone("all-minilm-l6-v2"), 512, "cpu", precision="float32")


def test_a_statement_reads_the_same_alone_or_beside_others_in_any_order():
    enc = _encoder(SharedStateEncoder)
    alone = [enc.features([(s, STATE)]) for s in STATEMENTS]
    together = enc.features([(s, STATE) for s in STATEMENTS] + [(STATEMENTS[0], OTHER)])
    reverse = enc.features([(s, STATE) for s in reversed(STATEMENTS)])
    for i, a in enumerate(alone):
        assert torch.allclose(a[0], together[i], atol=1e-5)
        assert torch.allclose(a[0], reverse[len(STATEMENTS) - 1 - i], atol=1e-5)
    # ...and it does read the state: another state gives the same statement other features
    assert not torch.allclose(together[0], together[3], atol=1e-3)


def test_state_room_does_not_depend_on_the_statement_and_positions_fit_the_backbone():
    enc = _encoder(SharedStateEncoder)
    assert enc.reserve(3) == enc.reserve(60) == SharedStateEncoder.STATEMENT_ROOM + 1
    packed = enc.pack_ids([(list(range(1000, 1600)), [[2000] * 100, [2001] * 5])])
    assert int(packed.inputs["position_ids"].max()) < enc.model.config.max_position_embeddings
    (row, a, b), (_, c, d) = packed.segments
    assert b - a == SharedStateEncoder.STATEMENT_ROOM and d - c == 7  # a long statement keeps its start
