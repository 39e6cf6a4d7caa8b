"""The S2 interface: the few token-level primitives the supervise loop needs.

A backend holds one sequence: it can load a prompt, append text it did not generate (a reminder, a
takeover), generate a chunk that stops at a count, a line break, a stop text or end-of-generation,
and branch: produce a side continuation and return to exactly where it was, sampler state included.
Everything SOMA-specific (pause rule, token accounting) lives in ``session.py`` on top of these.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal

StopReason = Literal["length", "newline", "stop_text", "eos"]


@dataclass(frozen=True)
class SamplingParams:
    """Paper A.1 defaults (Qwen3 adds top_k=20); ``temperature=0`` is greedy."""

    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 0  # 0 = off
    min_p: float = 0.0
    seed: int = 0


@dataclass
class Chunk:
    ids: list[int] = field(default_factory=list)
    data: bytes = b""
    stop: StopReason = "length"
    seconds: float = 0.0

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class StopScan:
    """Where a chunk stops, token by token, the same for every runtime: after the token that
    completes ``stop_text`` (it may span tokens, and chunks: ``tail`` carries the last bytes over),
    or after a token holding a line break when asked."""

    __slots__ = ("stop_text", "newline", "tail", "keep")

    def __init__(self, stop_text: bytes | None, stop_at_newline: bool, tail: bytes = b""):
        self.stop_text, self.newline, self.tail = stop_text, stop_at_newline, tail
        self.keep = len(stop_text) + 32 if stop_text else 0

    def step(self, piece: bytes) -> StopReason | None:
        if self.stop_text is not None:
            self.tail = (self.tail + piece)[-self.keep :]
            if self.stop_text in self.tail:
                self.tail = b""
                return "stop_text"
        if self.newline and b"\n" in piece:
            return "newline"
        return None


# Called with each generated token's bytes as it is produced (for streaming to a terminal).
OnPiece = Callable[[bytes], None]


# Room kept free in the context for a takeover's text and its answer.
CONTEXT_MARGIN = 16


class S2Backend(ABC):
    """A runtime holds the run's context as token ids (``_ids``); position and room left follow
    from them and the context size, the same for every runtime."""

    name: str
    _ids: list[int]  # tokens in the context, in order
    chat_template: str | None
    bos_token: str
    eos_token: str
    # Called as (tokens loaded, prompt tokens) while a long prompt loads, if the backend can tell.
    prompt_progress: Callable[[int, int], None] | None = None

    @abstractmethod
    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]: ...

    def is_single_token(self, text: str) -> bool:
        """Whether ``text`` is one special/added token (e.g. a native ``</think>``)."""
        return len(self.tokenize(text, special=True)) == 1

    @abstractmethod
    def load_prompt(self, ids: list[int]) -> float:
        """Make ``ids`` the whole context (reusing a common prefix); return seconds spent."""

    @abstractmethod
    def feed(self, ids: list[int]) -> float:
        """Append tokens that S2 did not generate; return seconds spent."""

    @abstractmethod
    def generate(
        self,
        max_tokens: int,
        *,
        stop_at_newline: bool = False,
        stop_text: bytes | None = None,
        on_piece: OnPiece | None = None,
    ) -> Chunk:
        """Sample up to ``max_tokens``; stop after a token containing a line break (if asked), after
        the token that completes ``stop_text``, or at end-of-generation (that token is not kept)."""

    @abstractmethod
    def set_sampling(self, params: SamplingParams) -> None:
        """(Re)build the sampler chain once; the same chain and RNG serve the whole run."""

    @property
    @abstractmethod
    def context_size(self) -> int:
        """Tokens the context holds in all (prompt and generation)."""

    @property
    def position(self) -> int:
        return len(self._ids)

    @property
    def context_left(self) -> int:
        """Tokens that can still be generated before the context is full."""
        return self.context_size - len(self._ids) - CONTEXT_MARGIN

    @abstractmethod
    @contextmanager
    def branch(self) -> Iterator[None]:
        """Inside the block, anything may be fed or generated; on exit the context, the next-token
        logits and the sampler state are exactly as they were on entry."""

    def close(self) -> None:
        pass
