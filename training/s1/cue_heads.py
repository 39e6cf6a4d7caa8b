"""Fit each monitor's cue head: text cues weighed on the training split, joined to the encoder on held-out.

Two stages, so that no weight is fitted where the encoder's logit is optimistic:
1. per monitor, logistic regression over the standardised cues (``soma_local.s1.cues``) on the
   training split's reader labels (soft labels: each state counts as p positive and 1 - p negative);
2. on the held-out split, which the encoder never trained on, a two-input logistic regression over
   (encoder logit, cue logit) sets how much each is trusted and calibrates the sum, in the place of a
   temperature. Its held-out figures are cross-validated by question, so the report is not the fit.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from soma_local.s1.cues import CUE_SET, text_cues
from soma_local.s1.model_folders import CueHead
from training.labels.examples import Example

CUE_C = 0.1  # L2 strength over ~60 correlated cues (chosen on held-out reader labels, not on gold)
JOIN_C = 10.0  # two inputs, hundreds of states: barely regularised
FOLDS = 5


def _soft_fit(x: np.ndarray, y: np.ndarray, c: float) -> LogisticRegression:
    """Logistic regression on soft labels: every row once as positive with weight p, once as negative."""
    model = LogisticRegression(C=c, max_iter=5000)
    return model.fit(np.vstack([x, x]), np.r_[np.ones(len(y)), np.zeros(len(y))], sample_weight=np.r_[y, 1 - y])


def cue_matrix(examples: Sequence[Example]) -> np.ndarray:
    return np.array([text_cues(e.reasoning) for e in examples])


def joined_cross_validated(z_encoder: np.ndarray, z_cues: np.ndarray, y: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    """Held-out logits of the join, each from a fit that did not see its question."""
    x = np.c_[z_encoder, z_cues]
    out = np.zeros(len(y))
    for fit, test in GroupKFold(n_splits=min(FOLDS, len(set(groups)))).split(x, y, groups):
        out[test] = _soft_fit(x[fit], y[fit], JOIN_C).decision_function(x[test])
    return out


def fit_cue_head(train: Sequence[Example], held: Sequence[Example], z_held: np.ndarray,
                 temperature: float) -> tuple[CueHead, np.ndarray]:
    """One monitor's head, and its cross-validated held-out logits (already calibrated: no T applies).

    The stored numbers are multiplied by ``temperature`` because serving divides every logit by it.
    """
    x_train = cue_matrix(train)
    mean, scale = x_train.mean(0), x_train.std(0)
    scale[scale == 0] = 1.0  # a cue that never varies in training gets no weight anyway
    cues = _soft_fit((x_train - mean) / scale, np.array([e.label for e in train]), CUE_C)
    w, w0 = cues.coef_[0], float(cues.intercept_[0])
    z_cues = ((cue_matrix(held) - mean) / scale) @ w + w0
    y_held = np.array([e.label for e in held])
    join = _soft_fit(np.c_[z_held, z_cues], y_held, JOIN_C)
    (a, b), c = join.coef_[0], float(join.intercept_[0])
    head = CueHead(cue_set=CUE_SET, mean=mean.tolist(), scale=scale.tolist(), weights=(temperature * b * w).tolist(),
                   bias=temperature * (b * w0 + c), encoder_weight=temperature * a)
    return head, joined_cross_validated(z_held, z_cues, y_held, [e.question_id for e in held])
