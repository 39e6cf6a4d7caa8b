"""Fitting a monitor adapter (``s1.adapter``) on labels of its statement: pure, no I/O.

The labels are split by group (a question's states stay together), a share held out. On the rest a
logistic regression over [logit(p), text features], standardised, is fitted on soft labels (each state
once as positive with weight p, once as negative with weight 1 - p), its L2 strength chosen by
cross-validation within those labels. The held-out labels then say whether it helps: AUROC, ECE and
log loss with and without it. An adapter no better than none (lower AUROC or higher log loss on
held-out labels) is not worth keeping, and ``soma tune`` refuses to save it.

SetFit's finding is the model here: with 8-64 labels per class a light head over a good encoder comes
close to full fine-tuning. The head is lighter still (one weight per number), so it fits in well under
a second and cannot memorise 25 labels.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from soma_local.errors import DataError
from soma_local.s1.adapter import HeldOutFigures
from soma_local.s1.temperature import auroc, ece

MIN_LABELS = 20  # fewer cannot be split into a fit and a held-out part that says anything
MIN_PER_CLASS = 4  # states on each side of p = 0.5, in all and in each part
C_GRID = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
FOLDS = 5


@dataclass(frozen=True)
class Fitted:
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    c: float

    def logits(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.scale) @ self.weights + self.bias


@dataclass(frozen=True)
class TuneResult:
    fitted: Fitted
    n_fit: int
    n_held: int
    questions: int  # distinct groups: below MIN_GROUPS the split was by label, not by question
    without: HeldOutFigures
    with_adapter: HeldOutFigures

    @property
    def better(self) -> bool:
        """Better than no adapter on held-out labels: no lower AUROC and a lower log loss."""
        w, a = self.without, self.with_adapter
        same_or_better_rank = math.isnan(w.auroc) or a.auroc >= w.auroc - 1e-9
        return same_or_better_rank and a.log_loss < w.log_loss


def check_labels(y: np.ndarray) -> None:
    """Enough labels of both kinds to fit and to measure; a clear error otherwise."""
    hard = y >= 0.5
    if len(y) < MIN_LABELS:
        raise DataError(f"too few labels: {len(y)}; an adapter needs at least {MIN_LABELS} (with >= {MIN_PER_CLASS} "
                        "on each side of p = 0.5)")
    if hard.all() or not hard.any():
        side = "hold (p >= 0.5)" if hard.all() else "do not hold (p < 0.5)"
        raise DataError(f"only one class: all {len(y)} labels say the statement does {side}. An adapter learns "
                        "from both: label states where it holds and states where it does not")
    if min(hard.sum(), (~hard).sum()) < MIN_PER_CLASS:
        raise DataError(f"too few labels of one class: {int(hard.sum())} hold, {int((~hard).sum())} do not; "
                        f"need >= {MIN_PER_CLASS} of each")


MIN_GROUPS = 4  # fewer questions than this cannot be split by question; their labels are split one by one


def split_groups(groups: Sequence[str], y: np.ndarray, held_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (fit, held): whole groups held out, about ``held_share`` of the labels, both classes on each
    side. Labels of fewer than ``MIN_GROUPS`` questions (a user's hand labels of one run) are split one by
    one instead, and their held-out figures are optimistic: ``grouped_split`` says which it was."""
    hard = y >= 0.5
    names = sorted(set(groups))
    if len(names) < MIN_GROUPS:
        groups = [str(i) for i in range(len(groups))]
        names = sorted(set(groups))
    for attempt in range(50):
        rng = random.Random(seed + attempt)
        order = names[:]
        rng.shuffle(order)
        held_groups, n_held = set(), 0
        for g in order:
            if n_held >= held_share * len(groups):
                break
            held_groups.add(g)
            n_held += sum(1 for x in groups if x == g)
        held = np.array([g in held_groups for g in groups])
        if all(min(hard[m].sum(), (~hard[m]).sum()) >= 2 for m in (held, ~held)):
            return np.flatnonzero(~held), np.flatnonzero(held)
    raise DataError(f"could not hold out {held_share:.0%} of the labels by question with both classes on each "
                    f"side ({len(names)} question(s)): label states of more questions")


def _soft_fit(x: np.ndarray, y: np.ndarray, c: float):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, max_iter=5000)
    return model.fit(np.vstack([x, x]), np.r_[np.ones(len(y)), np.zeros(len(y))], sample_weight=np.r_[y, 1 - y])


def _log_loss(z: np.ndarray, y: np.ndarray) -> float:
    """Mean cross-entropy of soft labels under sigmoid(z)."""
    return float(np.mean(y * np.logaddexp(0, -z) + (1 - y) * np.logaddexp(0, z)))


def _choose_c(x: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> float:
    from sklearn.model_selection import GroupKFold

    names = np.array(groups)
    k = min(FOLDS, len(set(groups)))
    if k < 2:
        return 0.1
    loss = {}
    for c in C_GRID:
        z = np.zeros(len(y))
        for fit, test in GroupKFold(n_splits=k).split(x, y, names):
            z[test] = _soft_fit(x[fit], y[fit], c).decision_function(x[test])
        loss[c] = _log_loss(z, y)
    return min(C_GRID, key=lambda c: (round(loss[c], 6), c))  # ties: the stronger regularisation


def fit_head(x: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> Fitted:
    """The standardised logistic regression over the rows of ``x`` (column 0: the S1's logit)."""
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0  # a number that never varies here gets no weight anyway
    xs = (x - mean) / scale
    c = _choose_c(xs, y, groups)
    model = _soft_fit(xs, y, c)
    return Fitted(mean, scale, model.coef_[0].copy(), float(model.intercept_[0]), c)


def figures(z: np.ndarray, y: np.ndarray) -> HeldOutFigures:
    p = 1 / (1 + np.exp(-z))
    hard = y >= 0.5
    return HeldOutFigures(n=len(y), positives=int(hard.sum()), auroc=round(auroc(p, hard), 4),
                          ece=round(ece(p, y), 4), log_loss=round(_log_loss(z, y), 4))


def tune(x: np.ndarray, y: np.ndarray, groups: Sequence[str], held_share: float = 0.3, seed: int = 0) -> TuneResult:
    """Fit on all but a held-out share of the groups and measure on that share. ``x[:, 0]`` is logit(p) of
    the S1 alone, so "without" is the S1 as it serves."""
    check_labels(y)
    fit, held = split_groups(groups, y, held_share, seed)
    fitted = fit_head(x[fit], y[fit], [groups[i] for i in fit])
    return TuneResult(fitted, len(fit), len(held), len(set(groups)), figures(x[held, 0], y[held]), figures(fitted.logits(x[held]), y[held]))
