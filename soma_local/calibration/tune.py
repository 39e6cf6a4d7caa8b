"""Fitting a monitor adapter (``s1.adapter``) on labels of its statement: pure, no I/O.

The labels are split by group (a question's states stay together), a share held out. On the rest a
logistic head z' = a * logit(p) + w . standardised features + b is fitted on soft labels, with a
penalty that pulls it toward the S1 as it is (a = 1, w = 0) and whose strength is chosen by
cross-validation by question within those labels. The held-out labels then say whether it helps: AUROC, ECE and
log loss with and without it. An adapter is kept only when it is better than none beyond the noise of
the held-out questions: AUROC no lower, and the lower bound of its log-loss gain (a paired bootstrap
over held-out questions) above 0; otherwise ``soma tune`` refuses to save it.

SetFit's finding is the model here: with 8-64 labels per class a light head over a good encoder comes
close to full fine-tuning. The head is lighter still (one weight per number), so it fits in well under
a second and cannot memorise 25 labels.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from soma_local.errors import DataError
from soma_local.s1.adapter import HeldOutFigures
from soma_local.s1.temperature import auroc, ece

MIN_LABELS = 20  # fewer cannot be split into a fit and a held-out part that says anything
MIN_PER_CLASS = 4  # states on each side of p = 0.5, in all and in each part
C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)  # inverse strength of the pull toward the S1 as it is
FOLDS = 5


@dataclass(frozen=True)
class Fitted:
    columns: tuple[int, ...]  # the columns of x it reads: 0 (the S1's logit) and the chosen features
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    c: float

    def logits(self, x: np.ndarray) -> np.ndarray:
        return ((x[:, self.columns] - self.mean) / self.scale) @ self.weights + self.bias


@dataclass(frozen=True)
class TuneResult:
    fitted: Fitted
    n_fit: int
    n_held: int
    questions: int  # distinct groups: below MIN_GROUPS the split was by label, not by question
    without: HeldOutFigures
    with_adapter: HeldOutFigures
    gain_low: float  # lower bound of the log-loss gain over the S1 alone (paired bootstrap by question)

    @property
    def better(self) -> bool:
        """Better than no adapter on held-out labels: no lower AUROC, and a log-loss gain whose lower
        bound is above 0, so a gain within the noise of a few held-out questions is not shipped."""
        w, a = self.without, self.with_adapter
        same_or_better_rank = math.isnan(w.auroc) or a.auroc >= w.auroc - 1e-9
        return same_or_better_rank and self.gain_low > 0


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
    one instead, and their held-out figures are optimistic (``TuneResult.questions`` tells which it was)."""
    hard = y >= 0.5
    if len(set(groups)) < MIN_GROUPS:
        groups = [str(i) for i in range(len(groups))]
    size = Counter(groups)
    names = sorted(size)
    for attempt in range(50):
        rng = random.Random(seed + attempt)
        order = names[:]
        rng.shuffle(order)
        held_groups, n_held = set(), 0
        for g in order:
            if n_held >= held_share * len(groups):
                break
            held_groups.add(g)
            n_held += size[g]
        held = np.array([g in held_groups for g in groups])
        if all(min(hard[m].sum(), (~hard[m]).sum()) >= 2 for m in (held, ~held)):
            return np.flatnonzero(~held), np.flatnonzero(held)
    raise DataError(f"could not hold out {held_share:.0%} of the labels by question with both classes on each "
                    f"side ({len(names)} question(s)): label states of more questions")


def _anchored_fit(z: np.ndarray, x: np.ndarray, y: np.ndarray, c: float) -> tuple[float, np.ndarray, float]:
    """(a, w, b) minimising the soft-label log loss of a * z + x @ w + b plus (|w|^2 + (a - 1)^2) / (2 c).

    The prior is the S1 as it is (a = 1, w = 0): with few labels the adapter stays close to the S1, and
    it moves only as far as the labels carry it. (Logistic regression on a standardised logit would
    shrink the S1's own weight toward 0 instead, throwing away what it knows.)"""
    from scipy.optimize import minimize

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, w, b = theta[0], theta[1:-1], theta[-1]
        out = a * z + x @ w + b
        value = float(np.sum(_losses(out, y))) + (float(w @ w) + (a - 1) ** 2) / (2 * c)
        r = 1 / (1 + np.exp(-out)) - y  # d loss / d out
        grad = np.r_[r @ z + (a - 1) / c, x.T @ r + w / c, r.sum()]
        return value, grad

    theta = minimize(loss, np.r_[1.0, np.zeros(x.shape[1]), 0.0], jac=True, method="L-BFGS-B",
                     options={"maxiter": 2000}).x
    return float(theta[0]), theta[1:-1], float(theta[-1])


def _losses(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each label's cross-entropy under sigmoid(z), for soft labels."""
    return y * np.logaddexp(0, -z) + (1 - y) * np.logaddexp(0, z)


def _log_loss(z: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(_losses(z, y)))


def _cv_loss(z: np.ndarray, x: np.ndarray, y: np.ndarray, groups: np.ndarray, c: float) -> float:
    from sklearn.model_selection import GroupKFold

    out = np.zeros(len(y))
    for fit, test in GroupKFold(n_splits=min(FOLDS, len(set(groups)))).split(x, y, groups):
        a, w, b = _anchored_fit(z[fit], x[fit], y[fit], c)
        out[test] = a * z[test] + x[test] @ w + b
    return _log_loss(out, y)


def fit_head(x: np.ndarray, y: np.ndarray, groups: Sequence[str],
             candidates: Sequence[Sequence[int]] | None = None) -> Fitted:
    """The head over column 0 of ``x`` (the S1's logit, kept as it is) and, standardised, the feature
    columns of one candidate (default: all). The candidate and the pull's strength are chosen together by
    cross-validated log loss, by group; ties go to fewer features, then to the stronger pull."""
    names = np.array(groups)
    options = [tuple(c) for c in candidates] if candidates else [tuple(range(1, x.shape[1]))]
    if len(set(groups)) < 2:
        columns, c = max(options, key=len), C_GRID[len(C_GRID) // 2]
    else:
        scores = {}
        for cols in options:
            xs = _standardised(x[:, list(cols)])[0] if cols else np.zeros((len(y), 0))
            for c in C_GRID:
                scores[(cols, c)] = (round(_cv_loss(x[:, 0], xs, y, names, c), 6), len(cols), c)
        columns, c = min(scores, key=scores.get)
    xs, mean, scale = _standardised(x[:, list(columns)]) if columns else (np.zeros((len(y), 0)), np.zeros(0), np.ones(0))
    a, w, b = _anchored_fit(x[:, 0], xs, y, c)
    return Fitted((0, *columns), np.r_[0.0, mean], np.r_[1.0, scale], np.r_[a, w], b, c)


def _standardised(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0  # a number that never varies here gets no weight anyway
    return (x - mean) / scale, mean, scale


BOOTSTRAP = 2000
CONFIDENCE = 0.95


def gain_lower_bound(z_without: np.ndarray, z_with: np.ndarray, y: np.ndarray, groups: Sequence[str],
                     seed: int = 0) -> float:
    """The one-sided ``CONFIDENCE`` lower bound of the mean log-loss gain of ``z_with`` over ``z_without``,
    resampling whole groups (a question's states rise and fall together)."""
    gain = _losses(z_without, y) - _losses(z_with, y)
    names = sorted(set(groups))
    index = {g: i for i, g in enumerate(names)}
    of = np.array([index[g] for g in groups])
    sums, counts = np.bincount(of, gain, len(names)), np.bincount(of, minlength=len(names))
    draws = np.random.default_rng(seed).integers(0, len(names), size=(BOOTSTRAP, len(names)))
    means = sums[draws].sum(1) / counts[draws].sum(1)
    return float(np.quantile(means, 1 - CONFIDENCE))


def figures(z: np.ndarray, y: np.ndarray) -> HeldOutFigures:
    p = 1 / (1 + np.exp(-z))
    hard = y >= 0.5
    return HeldOutFigures(n=len(y), positives=int(hard.sum()), auroc=round(auroc(p, hard), 4),
                          ece=round(ece(p, y), 4), log_loss=round(_log_loss(z, y), 4))


def tune(x: np.ndarray, y: np.ndarray, groups: Sequence[str], held_share: float = 0.3, seed: int = 0,
         candidates: Sequence[Sequence[int]] | None = None) -> TuneResult:
    """Fit on all but a held-out share of the groups and measure on that share. ``x[:, 0]`` is logit(p) of
    the S1 alone, so "without" is the S1 as it serves."""
    check_labels(y)
    fit, held = split_groups(groups, y, held_share, seed)
    fitted = fit_head(x[fit], y[fit], [groups[i] for i in fit], candidates)
    z_without, z_with = x[held, 0], fitted.logits(x[held])
    bound = gain_lower_bound(z_without, z_with, y[held], [groups[i] for i in held], seed)
    return TuneResult(fitted, len(fit), len(held), len(set(groups)), figures(z_without, y[held]),
                      figures(z_with, y[held]), bound)
