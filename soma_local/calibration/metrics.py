"""Per-question outcomes and the paper's aggregate metrics (§4: Acc, Abs, FA, Tok).

Pure: calibration, readout reports and trace replay all reduce to lists of ``ItemResult``.
"""

from __future__ import annotations

from typing import Sequence

from pydantic import BaseModel, ConfigDict


class ItemResult(BaseModel):
    """One question under one setting (a threshold, or vanilla)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    answerable: bool
    abstained: bool
    correct: bool
    tokens: int  # S2 tokens as the paper counts them for this setting
    takeover: bool = False


class Metrics(BaseModel):
    """Rates are fractions (0..1). Accuracy and false abstention are over answerable questions,
    abstention over unanswerable ones; a rate over an empty group is None, not 0."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="strings")

    n: int
    n_answerable: int
    n_unanswerable: int
    accuracy: float | None
    abstention: float | None
    false_abstention: float | None
    tokens: float
    takeovers: float  # share of questions where a takeover happened


def _rate(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def summarize(items: Sequence[ItemResult]) -> Metrics:
    if not items:
        raise ValueError("no questions to summarize")
    answerable = [i for i in items if i.answerable]
    unanswerable = [i for i in items if not i.answerable]
    return Metrics(
        n=len(items),
        n_answerable=len(answerable),
        n_unanswerable=len(unanswerable),
        accuracy=_rate([i.correct for i in answerable]),
        abstention=_rate([i.abstained for i in unanswerable]),
        false_abstention=_rate([i.abstained for i in answerable]),
        tokens=sum(i.tokens for i in items) / len(items),
        takeovers=sum(i.takeover for i in items) / len(items),
    )
