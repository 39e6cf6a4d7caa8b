"""A toy S2 runtime: it writes a fixed script of token pieces, whatever it is fed.

Everything a runtime must write to join the engine is here; the loop, stop scanning, streaming,
branching and accounting come from ``S2Backend``. The tests use it to check the pause schedule
against the live loop and to show that a new runtime is its own file plus one registry line.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

from soma_local.s2.base import END, S2Backend, SamplingParams

TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"


class ToyS2(S2Backend):
    def __init__(self, script: Sequence[bytes], context: int = 1 << 16):
        super().__init__()
        self.name, self.chat_template, self.bos_token, self.eos_token = "toy", TEMPLATE, "", ""
        self.script, self._context, self._next = list(script), context, 0
        self.sampling = SamplingParams()

    # Token ids below 256 are bytes of fed text; the script's i-th piece is id 256 + i.
    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        return list(text.encode())

    def piece(self, token: int) -> bytes:
        return bytes([token]) if token < 256 else self.script[token - 256]

    def is_end(self, token: int) -> bool:
        return False

    @property
    def context_size(self) -> int:
        return self._context

    def _load(self, ids: list[int]) -> float:
        self._ids, self._next = list(ids), 0
        return 0.0

    def _append(self, ids: list[int]) -> float:
        self._ids.extend(ids)
        return 0.0

    def set_sampling(self, params: SamplingParams) -> None:
        self.sampling = params

    def _sample(self, max_tokens: int, stop_at_newline: bool) -> Iterator[int]:
        for _ in range(max_tokens):
            # END once the script is over, as a model would write its end-of-text token next
            yield 256 + self._next if self._next < len(self.script) else END

    def _keep(self, token: int) -> None:
        self._next += 1

    @contextmanager
    def _branch_sampler(self) -> Iterator[None]:
        mark = self._next
        yield
        self._next = mark
