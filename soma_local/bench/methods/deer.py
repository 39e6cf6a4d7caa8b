"""DEER (Yang et al., 2026): at each "Wait" transition S2 writes a trial answer on a branch; thinking
ends once the trial answer's mean token probability exceeds the paper's threshold (0.95).

A transition is the point where S2 is about to write "Wait". To find it without changing S2's path,
the next tokens are peeked on a branch at each line break: the branch clones the sampler, so what it
samples is exactly what the main line will sample next. Peek and trial tokens both count as probes.
"""

from __future__ import annotations

import numpy as np

from soma_local.bench.methods.base import Harness, Method, Outcome, conclude, finish, outcome_of
from soma_local.engine.monitors import Monitor
from soma_local.errors import SomaError
from soma_local.engine.pauses import PauseRule
from soma_local.engine.session import Session

TRIAL_SUFFIX = "\n**Final Answer**\n\\boxed"  # DEER's answer inducer
_LINE = PauseRule(interval=1, slack=1 << 30)  # generate to the next line break


def trial_confidence(session: Session, max_tokens: int) -> tuple[str, float]:
    """DEER's trial answer on a branch: mean probability of its tokens from the second one on, up to
    the brace that closes the box."""
    backend = session.backend
    if backend.next_logits() is None:
        raise SomaError(f"DEER needs next-token probabilities, which S2 backend {backend.name} does not expose")
    probs, text, depth = [], "", 0
    with backend.branch():
        backend.feed(backend.tokenize(TRIAL_SUFFIX))
        for _ in range(max_tokens):
            logits = np.asarray(backend.next_logits(), dtype=np.float64)
            chunk = backend.generate(1)
            session.s2_decode += chunk.seconds
            if not chunk.ids:
                break
            session.tokens.probe += 1
            z = logits - logits.max()
            probs.append(float(np.exp(z[chunk.ids[0]]) / np.exp(z).sum()))
            text += chunk.text
            depth += chunk.text.count("{") - chunk.text.count("}")
            if "}" in chunk.text and depth <= 0:
                break
    body = probs[1:] or probs
    return text, float(np.mean(body)) if body else 0.0


class Deer(Method):
    name = "deer"

    def __init__(self, threshold: float = 0.95, trial_tokens: int = 20, max_checks: int = 10, peek_tokens: int = 2):
        self.threshold = threshold
        self.trial_tokens = trial_tokens
        self.max_checks = max_checks
        self.peek_tokens = peek_tokens

    def _next_is_wait(self, session: Session) -> bool:
        backend = session.backend
        with backend.branch():
            chunk = backend.generate(self.peek_tokens)
        session.tokens.probe += len(chunk.ids)
        return chunk.text.lstrip().startswith("Wait")

    def run(self, prompt: str, monitor: Monitor, harness: Harness) -> Outcome:
        session = harness.session(prompt)
        checks: list[dict] = []
        while len(checks) < self.max_checks:
            stop = conclude(session, session.think_to_pause(_LINE))
            if stop:
                return outcome_of(session, stop, checks=checks)
            if not self._next_is_wait(session):
                continue
            text, confidence = trial_confidence(session, self.trial_tokens)
            checks.append({"thinking_tokens": session.tokens.thinking, "trial": text, "confidence": confidence})
            if confidence > self.threshold:
                session.takeover("", "", max_tokens=max(0, session.remaining))
                return outcome_of(session, "early_exit", checks=checks)
        return outcome_of(session, finish(session), checks=checks)

    def settings(self) -> dict:
        return {"threshold": self.threshold, "trial_tokens": self.trial_tokens, "max_checks": self.max_checks}
