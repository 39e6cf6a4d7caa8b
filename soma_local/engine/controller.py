"""Control layer: remind first, take over on persistent evidence (paper §3.3, Algorithm 1).

A one-sided CUSUM over per-scan log-odds. Pure: no I/O, no models, so the paper's case arithmetic is
checked exactly in tests and the single-run readout can replay it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

_P_EPS = 1e-6


class Action(str, Enum):
    NONE = "none"
    REMIND = "remind"
    TAKEOVER = "takeover"


def evidence(p: float) -> float:
    """logit(p) - logit(0.5): one scan's log-odds for the statement against even odds."""
    p = min(max(p, _P_EPS), 1.0 - _P_EPS)
    return math.log(p / (1.0 - p))


@dataclass(frozen=True)
class Decision:
    action: Action
    evidence: float | None
    score: float  # S after this scan, before any reset a reminder causes
    in_episode: bool  # after this scan


@dataclass
class Controller:
    """One monitor's state.

    ``threshold`` is h; ``math.inf`` gives remind-only. ``remind=False`` is the no-reminder ablation:
    evidence accumulates from the first pause and S >= h takes over directly.
    """

    threshold: float
    remind: bool = True
    score: float = 0.0
    in_episode: bool = False

    def __post_init__(self) -> None:
        if not self.threshold > 0:
            raise ValueError(f"threshold h must be > 0, got {self.threshold}")

    def update(self, p: float | None) -> Decision:
        """Fold in one scan. ``p=None`` is a failed scan: no evidence, no action."""
        if p is None or math.isnan(p):
            return Decision(Action.NONE, None, self.score, self.in_episode)
        e = evidence(p)
        self.score = max(0.0, self.score + e)
        reported = self.score
        if not self.remind:
            action = Action.TAKEOVER if self.score >= self.threshold else Action.NONE
        elif not self.in_episode:
            action = Action.NONE
            if self.score > 0:
                action = Action.REMIND
                self.in_episode = True
                self.score = 0.0
        elif self.score >= self.threshold:
            action = Action.TAKEOVER
        else:
            action = Action.NONE
            if self.score == 0.0:
                self.in_episode = False
        return Decision(action, e, reported, self.in_episode)
