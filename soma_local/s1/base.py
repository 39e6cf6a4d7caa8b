"""The S1 interface: a batch of (statement, task, reasoning) in, calibrated probabilities out.

Every backend (local classifier, LLM judge, Jev over HTTP) measures the input limit in its own
tokenizer, so state building lives here and backends only score finished states.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

from soma_local.s1.state import TaskCut, TokenCounter, build_state, longest_tokens, task_cut


@dataclass(frozen=True)
class S1Query:
    statement: str
    task: str
    reasoning: str


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    ez = math.exp(z)
    return ez / (1.0 + ez)


class S1(ABC):
    """Base class of S1 backends.

    A backend that can fail per scan (a remote S1) returns ``None`` for what it could not score and
    says why in ``last_error``; the controller treats ``None`` as no evidence and the supervise loop
    records the scan as failed, so S1 trouble never stops S2.
    """

    name: str = "s1"
    last_error: str | None = None  # why the last ``score_states`` call left a probability None
    input_limit: int = 2048
    # Tokens of text one scored pair reads when that text is not an S1 state (``state.format_state``),
    # where it is fewer than ``input_limit``: the Jev server reads longer text in windows of this size.
    reads_at_once: int | None = None
    # Tokens the backend adds around the state and statement (prompt template, special tokens).
    template_tokens: int = 0
    # Question ids whose states this S1 was trained on: trace replay leaves them out.
    trained_questions: frozenset[str] = frozenset()
    # What tells two S1s of one name apart (a retrained model's weights, a temperature given in place
    # of the fitted one); None where the name says it all.
    version: str | None = None

    @property
    def identity(self) -> str:
        """The name, and the version where there is one: what score caches and calibration key on."""
        return self.name if self.version is None else f"{self.name}@{self.version}"

    @property
    @abstractmethod
    def tokenizer(self) -> TokenCounter: ...

    @abstractmethod
    def score_states(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """Probabilities that each (statement, state) holds, in order."""

    def version_for(self, statement: str) -> str | None:
        """The version a calibrated h for this statement keys on: the S1's, and a monitor adapter's where
        one changes this statement's p (``s1.adapter.AdaptedS1``)."""
        return self.version

    def reserve(self, statements: Sequence[str]) -> int:
        """Tokens of the input limit a state leaves for these statements and the backend's template."""
        return longest_tokens(statements, self.tokenizer) + self.template_tokens

    def state_for(self, task: str, reasoning: str, statements: Sequence[str]) -> str:
        return build_state(task, reasoning, self.tokenizer, self.input_limit, self.reserve(statements))

    def task_cut(self, task: str, statements: Sequence[str]) -> TaskCut | None:
        """Whether this S1 reads the task cut (see ``s1.state``), so a run can say so up front."""
        return task_cut(task, self.tokenizer, self.input_limit, self.reserve(statements))

    def score(self, queries: Sequence[S1Query]) -> list[float | None]:
        statements = [q.statement for q in queries]
        states: dict[tuple[str, str], str] = {}
        pairs = []
        for q in queries:
            key = (q.task, q.reasoning)
            if key not in states:
                states[key] = self.state_for(q.task, q.reasoning, statements)
            pairs.append((q.statement, states[key]))
        return self.score_states(pairs)

    def close(self) -> None:
        """Release models or connections."""
