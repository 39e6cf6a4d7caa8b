"""An S1 around another one (a score cache, a batcher): every part of the S1 interface it does not
change is the inner S1's, forwarded here once, so no wrapper copies attributes by hand and none can
drop one the engine or the server relies on."""

from __future__ import annotations

from typing import Sequence

from soma_local.s1.base import S1
from soma_local.s1.state import TokenCounter


def _inner(attribute: str) -> property:
    return property(lambda self: getattr(self.inner, attribute), doc=f"The inner S1's ``{attribute}``.")


class WrappedS1(S1):
    name = _inner("name")
    input_limit = _inner("input_limit")
    reads_at_once = _inner("reads_at_once")
    template_tokens = _inner("template_tokens")
    trained_questions = _inner("trained_questions")
    version = _inner("version")
    last_error = _inner("last_error")

    def __init__(self, inner: S1):
        self.inner = inner

    @property
    def tokenizer(self) -> TokenCounter:
        return self.inner.tokenizer

    def version_for(self, statement: str) -> str | None:
        return self.inner.version_for(statement)

    def reserve(self, statements: Sequence[str]) -> int:
        return self.inner.reserve(statements)

    def state_for(self, task: str, reasoning: str, statements: Sequence[str]) -> str:
        return self.inner.state_for(task, reasoning, statements)

    def score_states(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        return self.inner.score_states(pairs)

    def close(self) -> None:
        self.inner.close()
