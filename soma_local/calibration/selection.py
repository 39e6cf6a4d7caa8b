"""How sure the calibration questions are about a setting: a paired, stratified bootstrap.

Calibration sets are small (the paper uses 200 questions, a user often has 20 to 100), so one question
moves a rate by 0.5 to 5 points, and a setting that wins by a question or two on the calibration set is
as likely to lose on the next questions. Choosing by the point estimate cannot tell that noise from a
gain; this module measures how far each setting's effect could move under resampling of the questions,
so that ``thresholds.choose_threshold`` can choose by a confidence bound instead.

The scheme, and why:

- **Paired**: every resample draws one multiset of questions and scores every setting, the reference
  (h = inf) included, on that same multiset. The effect of a takeover is a difference between two
  settings on the same questions; resampling them apart would add the spread of the questions' own
  difficulty, which the difference does not have, and drown every real gain.
- **Stratified**: answerable and unanswerable questions are resampled apart, each stratum keeping its
  size. Accuracy and false abstention are rates over the answerable questions, abstention over the
  unanswerable ones; a resample with fewer unanswerable questions than the set would change what a
  rate is over, not just which questions count.
- **Percentile bounds**: each bound is an order statistic of the resampled effects, taken on the
  cautious side (``method="lower"`` for a lower bound, ``"higher"`` for an upper one), so a bound is
  always an effect some resample really had and never an interpolation between two atoms that would
  turn "no change in 10 % of resamples" into a tiny positive gain.
- **Seeded**: the same questions give the same bounds, so a rerun of ``soma calibrate`` gives the same h.

The bootstrap cannot see a loss that no calibration question showed (a rate observed at 0 resamples to
0); a setting that lost nothing on the calibration set passes the accuracy guard whatever the level.
What keeps such a setting out is its gain: a gain of one or two questions is not above 0 at a useful
level, so a setting whose only merit is a question or two stays out.

Pure (numpy, no I/O), over per-question outcomes aligned by question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Mapping, Sequence, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from soma_local.calibration.metrics import ItemResult
from soma_local.errors import DataError

K = TypeVar("K")
Rule = Literal["bound", "point"]

# Where a bound counts as above 0: outcome rates are sums of whole questions over a fixed count, so a
# true 0 is exact and anything above this is at least one question.
EPS = 1e-9


class Selection(BaseModel):
    """How a setting is chosen from its calibration outcomes.

    ``bound`` (the default): the best lower confidence bound on the objective's gain over the reference,
    among settings whose upper bound on accuracy lost stays within the tolerance; a setting must beat the
    reference with confidence (a lower bound above 0), else the reference is the answer. ``point``: the
    paper's rule (§3.4), the best point estimate under the point accuracy guard.

    ``confidence`` is the one-sided level of each bound: at 0.9 a gain's lower bound is the 10th percentile
    of its resampled gains. ``benchmarks/calibration_splits.py`` measures what a level does on new questions
    (docs/calibration.md).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: Rule = "bound"
    confidence: float = Field(default=0.9, gt=0.5, lt=1.0)
    resamples: int = Field(default=2000, ge=100)
    seed: int = 0

    def describe(self) -> str:
        level = f"{100 * self.confidence:g} %"
        if self.rule == "point":
            return f"point estimate (intervals: {level} bounds, paired bootstrap)"
        return f"{level} lower bound on the gain (paired bootstrap, {self.resamples} resamples)"


class Interval(BaseModel):
    """A change measured on the calibration questions: the point estimate and its two bounds, each a
    one-sided bound at the selection's confidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    point: float
    low: float
    high: float

    def text(self, scale: float = 100.0, digits: int = 1) -> str:
        """``+5.2 [+1.1, +9.8]``, in points for a rate (``scale`` 100) or as is for tokens (1, 0 digits)."""
        f = lambda x: f"{scale * x + 0.0:+.{digits}f}"  # noqa: E731 - (+ 0.0: no "-0.0")
        return f"{f(self.point)} [{f(self.low)}, {f(self.high)}]"


class Effects(BaseModel):
    """One setting against the reference on the calibration questions. ``gain`` is the objective's gain
    (a fraction for the abstention objective, mean tokens saved for fewest tokens); ``accuracy`` and
    ``false_abstention`` are the changes of those rates (fractions; None without answerable questions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gain: Interval
    accuracy: Interval | None = None
    false_abstention: Interval | None = None

    def describe(self, objective: str) -> str:
        """``gain +5.2 [+1.1, +9.8] points, FA +0.0 [-1.5, +1.5]`` (fewest tokens: the gain in tokens per
        question, and the accuracy change, the rate its guard protects)."""
        if objective == "fewest_tokens":
            parts = [f"gain {self.gain.text(1.0, 0)} tokens/question"]
            if self.accuracy is not None:
                parts.append(f"Acc {self.accuracy.text()}")
        else:
            parts = [f"gain {self.gain.text()} points"]
        if self.false_abstention is not None:
            parts.append(f"FA {self.false_abstention.text()}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Changes:
    """Rates' changes against the reference, one value per (resample, setting): what an objective's gain
    is computed from. The objectives are linear in the rates, so the gain is the objective at the changes."""

    abstention: np.ndarray | None
    false_abstention: np.ndarray | None
    accuracy: np.ndarray | None
    tokens: np.ndarray


def aligned(outcomes: Mapping[K, Sequence[ItemResult]], reference: Sequence[ItemResult]) -> None:
    """Pairing needs every setting scored on the same questions in the same order."""
    ids = [i.id for i in reference]
    for key, items in outcomes.items():
        if [i.id for i in items] != ids:
            raise DataError(f"setting {key}: its outcomes are not the reference's questions in the same order")


def resample_weights(answerable: np.ndarray, selection: Selection) -> np.ndarray:
    """How often each question is drawn, per resample: (resamples + 1, questions). Row 0 is the set
    itself (every question once), so the point estimates come out of the same arithmetic as the bounds."""
    rng = np.random.default_rng(selection.seed)
    n = len(answerable)
    weights = np.ones((selection.resamples + 1, n))
    for stratum in (np.flatnonzero(answerable), np.flatnonzero(~answerable)):
        if len(stratum):
            weights[1:, stratum] = rng.multinomial(len(stratum), np.full(len(stratum), 1 / len(stratum)),
                                                   size=selection.resamples)
    return weights


def effects(
    outcomes: Sequence[Sequence[ItemResult]],
    reference: Sequence[ItemResult],
    gain: Callable[[Changes], np.ndarray],
    selection: Selection,
) -> list[Effects]:
    """Each setting's effects against ``reference`` with their bounds; ``gain`` turns rate changes into
    the objective's gain (vectorised). Settings and reference must be aligned by question (``aligned``)."""
    answerable = np.array([i.answerable for i in reference], dtype=bool)
    n_ans, n_un = int(answerable.sum()), int((~answerable).sum())
    w = resample_weights(answerable, selection)

    def change(field: str, mask: np.ndarray | None, count: int) -> np.ndarray | None:
        """(resamples + 1, settings) change of a per-question rate against the reference."""
        if count == 0:
            return None
        ref = np.array([getattr(i, field) for i in reference], dtype=float)
        diff = np.array([[getattr(i, field) for i in items] for items in outcomes], dtype=float).T - ref[:, None]
        if mask is not None:
            diff = diff * mask[:, None]
        return (w @ diff) / count

    changes = Changes(
        abstention=change("abstained", ~answerable, n_un),
        false_abstention=change("abstained", answerable, n_ans),
        accuracy=change("correct", answerable, n_ans),
        tokens=change("tokens", None, len(reference)),
    )
    gains = gain(changes)
    alpha = 1.0 - selection.confidence

    def intervals(values: np.ndarray | None) -> list[Interval | None]:
        if values is None:
            return [None] * len(outcomes)
        low = np.quantile(values[1:], alpha, axis=0, method="lower")
        high = np.quantile(values[1:], 1.0 - alpha, axis=0, method="higher")
        # (+ 0.0: a gain of -0 tokens is written 0.0, not -0.0)
        return [Interval(point=float(p) + 0.0, low=float(lo) + 0.0, high=float(hi) + 0.0)
                for p, lo, hi in zip(values[0], low, high)]

    return [
        Effects(gain=g, accuracy=a, false_abstention=fa)
        for g, a, fa in zip(intervals(gains), intervals(changes.accuracy), intervals(changes.false_abstention))
    ]

