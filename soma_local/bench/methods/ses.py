"""Statistical early stopping (Xie et al., 2026) with SOMA's refusal takeover.

Uncertainty keywords arrive in the thinking text; every ``lazy_interval`` thinking tokens the count
X_t after t words is tested against statistics of answerable calibration traces. Two rules, both
the paper's:

- ``parametric`` (renewal process): inter-arrival mean mu and variance sigma^2 in words;
  Z_t = (X_t - t/mu) / sqrt(t sigma^2 / mu^3) against a Sidak-corrected normal quantile. It needs
  at least two arrivals in the calibration traces.
- ``conformal`` (maxwise): M_i = max_t X_t/t per calibration trace; stop when X_t/t exceeds the
  (1 - alpha)(n + 1)/n empirical quantile of the M_i. It is defined even when the calibration traces
  hold no keyword at all (then any keyword stops), which is what a small model gives.

The paper gives no action after stopping, so SOMA's paper uses its refusal takeover; so do we.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from statistics import NormalDist

from soma_local.bench.methods.base import Harness, Method, Outcome, conclude, outcome_of
from soma_local.engine.monitors import Monitor
from soma_local.engine.pauses import PauseRule

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


def lazy_interval(median_len: int) -> int:
    """Thinking tokens between checks: min(100, median calibration length / 3)."""
    return max(1, min(100, median_len // 3))


@dataclass(frozen=True)
class ConformalRate:
    """The maxwise conformal rule. The live checks fall every ``lazy_interval`` *tokens*; calibration
    texts carry no token offsets, so their checkpoints are every ``step`` *words* (the same number):
    a word count is at most the token count, so these lie no earlier in the text than the live ones."""

    threshold: float

    @staticmethod
    def peak_rate(text: str, step: int) -> float:
        tokens = words(text)
        marks = arrivals(tokens)
        checkpoints = list(range(step, len(tokens) + 1, step)) or ([len(tokens)] if tokens else [])
        return max((sum(m < t for m in marks) / t for t in checkpoints), default=0.0)

    @classmethod
    def fit(cls, texts: list[str], alpha: float, step: int) -> "ConformalRate":
        peaks = sorted(cls.peak_rate(t, step) for t in texts)
        n = len(peaks)
        rank = math.ceil((1 - alpha) * (n + 1))  # the (1-alpha)(n+1)/n quantile, as a 1-based rank
        return cls(threshold=math.inf if rank > n else peaks[rank - 1])

    def rate(self, text: str) -> float:
        tokens = words(text)
        return len(arrivals(tokens)) / len(tokens) if tokens else 0.0


def critical_z(alpha: float, checks: int) -> float:
    """Sidak-corrected one-sided threshold for ``checks`` looks at the data."""
    return NormalDist().inv_cdf((1 - alpha) ** (1 / max(1, checks)))


class StatisticalEarlyStop(Method):
    name = "ses"

    def __init__(self, rule: RenewalStats | ConformalRate, median_len: int, alpha: float = 0.05):
        self.rule = rule
        self.lazy_interval = lazy_interval(median_len)
        self.alpha = alpha
        self.median_len = median_len
        if isinstance(rule, RenewalStats):
            self.threshold = critical_z(alpha, math.ceil(median_len / self.lazy_interval))
            self.statistic = rule.z
        else:
            self.threshold = rule.threshold
            self.statistic = rule.rate

    def run(self, prompt: str, monitor: Monitor, harness: Harness) -> Outcome:
        session = harness.session(prompt)
        while True:
            stop = conclude(session, session.think_to_pause(PauseRule(interval=self.lazy_interval, slack=0)))
            if stop:
                return outcome_of(session, stop)
            value = self.statistic(session.thinking)
            if value > self.threshold:
                t = monitor.takeover
                session.takeover(t.conclusion, t.prefill, t.max_tokens)
                return outcome_of(session, "takeover", statistic=value, stop_at=session.tokens.thinking)

    def settings(self) -> dict:
        fitted = (
            {"rule": "parametric", "mu": round(self.rule.mu, 6), "sigma2": round(self.rule.sigma2, 6)}
            if isinstance(self.rule, RenewalStats)
            else {"rule": "conformal", "threshold": self.rule.threshold}
        )
        return {**fitted, "median_len": self.median_len, "alpha": self.alpha}
