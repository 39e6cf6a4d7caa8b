"""Temperature scaling and the calibration metrics S1 models are judged by (pure numpy, no I/O).

An S1 returns a logit z and the controller adds logit(p) as evidence, so p = sigmoid(z / T) must be
calibrated: a too-sharp S1 would cross the takeover threshold on noise. T is the one parameter fitted
on held-out data by minimising the negative log-likelihood; it never changes the ranking (AUROC), only
the confidence (ECE, Brier).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

_EPS = 1e-7


def scaled_probs(logits: ArrayLike, temperature: float) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64) / temperature
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow warnings


def nll(logits: ArrayLike, labels: ArrayLike, temperature: float) -> float:
    """Mean binary cross-entropy; labels may be soft (probabilities in [0, 1])."""
    p = np.clip(scaled_probs(logits, temperature), _EPS, 1 - _EPS)
    y = np.asarray(labels, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def fit_temperature(
    logits: ArrayLike, labels: ArrayLike, bounds: tuple[float, float] = (0.05, 50.0), iterations: int = 100
) -> float:
    """The T minimising NLL, by golden-section search over log T.

    NLL is unimodal in log T for a fixed set of logits, so a bracketing search is exact enough
    and has no step size to tune; the bounds keep a degenerate set (all one class) finite.
    """
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if z.shape != y.shape or z.size == 0:
        raise ValueError(f"need equal, non-empty logits and labels (got {z.shape} and {y.shape})")
    lo, hi = np.log(bounds[0]), np.log(bounds[1])
    ratio = (np.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = nll(z, y, np.exp(a)), nll(z, y, np.exp(b))
    for _ in range(iterations):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = nll(z, y, np.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = nll(z, y, np.exp(b))
    return float(np.exp((lo + hi) / 2))


def auroc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve (ties count half); NaN when only one class is present."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    neg = np.sort(neg)
    below = np.searchsorted(neg, pos, side="left")
    at_or_below = np.searchsorted(neg, pos, side="right")
    return float((below + 0.5 * (at_or_below - below)).sum() / (pos.size * neg.size))


def ece(probs: ArrayLike, labels: ArrayLike, bins: int = 10) -> float:
    """Expected calibration error over equal-width confidence bins; labels may be soft."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    index = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        mask = index == b
        if mask.any():
            total += mask.sum() * abs(p[mask].mean() - y[mask].mean())
    return float(total / max(p.size, 1))


def brier(probs: ArrayLike, labels: ArrayLike) -> float:
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    return float(np.mean((p - y) ** 2))


@dataclass(frozen=True)
class Calibration:
    """AUROC against hard labels (soft >= 0.5), ECE and Brier against the labels as given."""

    n: int
    positives: int
    auroc: float
    ece: float
    brier: float

    def as_dict(self) -> dict[str, float | int]:
        return {"n": self.n, "positives": self.positives, "auroc": round(self.auroc, 4),
                "ece": round(self.ece, 4), "brier": round(self.brier, 4)}


def evaluate(probs: ArrayLike, labels: ArrayLike) -> Calibration:
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    hard = y >= 0.5
    return Calibration(int(p.size), int(hard.sum()), auroc(p, hard), ece(p, y), brier(p, y))
