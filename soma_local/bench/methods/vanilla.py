"""Vanilla (thinking mode), and the AbstentionBench system prompt, which is vanilla plus one prompt."""

from __future__ import annotations

from soma_local.bench.methods.base import Harness, Method, Outcome, finish, outcome_of
from soma_local.engine.monitors import Monitor

# Kirichenko et al. (2025), AbstentionBench ``recipe/system_prompt.py``; the repository is CC-BY-NC 4.0,
# so only the two key sentences quoted in our reference notes are used here, not the whole prompt.
ABSTENTIONBENCH_SYSTEM = (
    "If a question is unanswerable, because there is insufficient evidence to definitively provide an "
    "answer, don't provide a guess and respond \u201cI don't know\u201d. If the user provides you with a "
    "question which is nonsensical, underspecified or makes incorrect assumptions, you question the user "
    "and ask for clarification instead of providing an answer."
)


class Vanilla(Method):
    name = "vanilla"

    def __init__(self, extra_system: str | None = None):
        self.extra_system = extra_system

    def run(self, prompt: str, monitor: Monitor, harness: Harness) -> Outcome:
        session = harness.session(prompt, extra_system=self.extra_system)
        return outcome_of(session, finish(session))


class AbstentionPrompt(Vanilla):
    name = "abstention_prompt"

    def __init__(self) -> None:
        super().__init__(ABSTENTIONBENCH_SYSTEM)
