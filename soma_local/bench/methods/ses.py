"""Statistical early stopping (Xie et al., 2026), renewal rule, with SOMA's refusal takeover.

Uncertainty keywords arrive in the thinking text as a renewal process. Inter-arrival statistics
(mean mu, variance sigma^2, in words) are fitted on answerable calibration traces; every
``lazy_interval`` thinking tokens the count X_t after t words is tested with
Z_t = (X_t - t/mu) / sqrt(t sigma^2 / mu^3) against a Sidak-corrected normal quantile. The paper
gives no action after stopping, so SOMA's paper uses its refusal takeover; so do we.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from statistics import NormalDist

from soma_local.bench.methods.base import Engine, Method, Outcome, conclude, outcome_of
from soma_local.s2.session import PauseRule

# The lexicon's categories as our reference notes list them (llama-cpp-and-baselines.md §2.8).
KEYWORDS = (
    "maybe", "perhaps", "possibly", "uncertain", "not sure", "could be", "might be",
    "not entirely sure", "not completely sure", "not fully sure", "not absolutely sure",
    "maybe i missed", "unless there",
    "reread", "try again", "another angle", "another way", "another thought",
    "another interpretation", "another possibility", "another approach",
    "wait", "hold on", "let me think", "give me a moment", "let's see", "um", "uh",
    "mistakenly", "there's a typo",
    "doubt the question", "doubt the problem", "doubt the answer",
    "don't have information", "don't have enough information", "lack information", "missing information",
    "missing details", "missing data", "lack the details", "lack context", "not enough information",
    "can't answer", "cannot answer", "unable to answer", "can't determine", "cannot determine",
    "unable to determine", "can't compute", "cannot compute", "unable to compute",
    "but maybe", "alternatively maybe", "but perhaps",
    "assume", "assuming", "presume", "user might",
)
_PHRASES = sorted((tuple(k.split()) for k in KEYWORDS), key=len, reverse=True)


def words(text: str) -> list[str]:
    """Lower-cased words with punctuation removed (apostrophes kept: "don't", "let's")."""
    return re.sub(r"[^\w\s']", " ", text.lower().replace("\u2019", "'")).split()


def arrivals(tokens: list[str]) -> list[int]:
    """Word positions where a keyword starts, matched greedily, longest phrases first."""
    out, i = [], 0
    while i < len(tokens):
        for phrase in _PHRASES:
            if tuple(tokens[i : i + len(phrase)]) == phrase:
                out.append(i)
                i += len(phrase)
                break
        else:
            i += 1
    return out


@dataclass(frozen=True)
class RenewalStats:
    mu: float
    sigma2: float

    @classmethod
    def fit(cls, texts: list[str]) -> "RenewalStats":
        gaps = []
        for text in texts:
            tokens = words(text)
            marks = [-1] + arrivals(tokens)
            gaps += [b - a for a, b in zip(marks, marks[1:])]
        if len(gaps) < 2:
            raise ValueError("too few keyword arrivals in the calibration traces to fit SES")
        return cls(mu=statistics.fmean(gaps), sigma2=statistics.pvariance(gaps))

    def z(self, text: str) -> float:
        tokens = words(text)
        t = len(tokens)
        if t == 0 or self.sigma2 <= 0:
            return 0.0
        return (len(arrivals(tokens)) - t / self.mu) / math.sqrt(t * self.sigma2 / self.mu**3)


def critical_z(alpha: float, checks: int) -> float:
    """Sidak-corrected one-sided threshold for ``checks`` looks at the data."""
    return NormalDist().inv_cdf((1 - alpha) ** (1 / max(1, checks)))


class StatisticalEarlyStop(Method):
    name = "ses"
    scenarios = ("unanswerable",)

    def __init__(self, stats: RenewalStats, median_len: int, alpha: float = 0.05):
        self.stats = stats
        self.lazy_interval = max(1, min(100, median_len // 3))
        self.threshold = critical_z(alpha, math.ceil(median_len / self.lazy_interval))
        self.alpha = alpha
        self.median_len = median_len

    def run(self, prompt: str, scenario: str, engine: Engine) -> Outcome:
        session = engine.session(prompt)
        while True:
            stop = conclude(session, session.think_to_pause(PauseRule(interval=self.lazy_interval, slack=0)))
            if stop:
                return outcome_of(session, stop)
            z = self.stats.z(session.thinking)
            if z > self.threshold:
                t = engine.monitors["unanswerable"].takeover
                session.takeover(t.conclusion, t.prefill, t.max_tokens)
                return outcome_of(session, "takeover", z=z, stop_at=session.tokens.thinking)

    def settings(self) -> dict:
        return {
            "mu": round(self.stats.mu, 6),
            "sigma2": round(self.stats.sigma2, 6),
            "median_len": self.median_len,
            "alpha": self.alpha,
        }
