"""The S2 interface: the few token-level primitives the supervise loop needs.

A backend holds one sequence: it can load a prompt, append text it did not generate (a reminder, a
takeover), generate a chunk that stops at a count, a line break, a stop text or end-of-generation,
and branch: produce a side continuation and return to exactly where it was, sampler state included.
Everything SOMA-specific (pause rule, token accounting) lives in ``engine.session`` on top of these.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal, Sequence

import numpy as np

StopReason = Literal["length", "newline", "stop_text", "eos", "cancelled"]
# What ``generate`` asks between tokens: True ends the chunk (stop "cancelled") after the token just kept.
Cancelled = Callable[[], bool]


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
    completes one of ``stop_texts`` (it may span tokens, and chunks: ``tail`` carries the last bytes
    over), or after a token holding a line break when asked."""

    __slots__ = ("stop_texts", "newline", "tail", "keep")

    def __init__(self, stop_texts: Sequence[bytes], stop_at_newline: bool, tail: bytes = b""):
        self.stop_texts, self.newline, self.tail = tuple(stop_texts), stop_at_newline, tail
        self.keep = max(map(len, self.stop_texts), default=0) + 32

    def step(self, piece: bytes) -> StopReason | None:
        if self.stop_texts:
            self.tail = (self.tail + piece)[-self.keep :]
            if any(stop in self.tail for stop in self.stop_texts):
                self.tail = b""
                return "stop_text"
        if self.newline and b"\n" in piece:
            return "newline"
        return None


# Called with each generated token's bytes as it is produced (for streaming to a terminal).
OnPiece = Callable[[bytes], None]

# Room kept free in the context for a takeover's text and its answer.
CONTEXT_MARGIN = 16
# What ``_sample`` yields when generation ended without an end-of-generation id the runtime can name.
END = -1


class S2Backend(ABC):
    """What the supervise loop, S1 and the baselines use of an S2 runtime, and the parts every runtime
    shares: the context as token ids (``_ids``), the token loop of ``generate`` (stop scanning,
    streaming, accounting) and S2 as a tokenizer (``encode``/``decode``, so S1 can measure its input in
    S2 tokens). A runtime writes only what differs: tokenizing, a token's bytes, end-of-generation ids,
    putting tokens into its context, sampling, branching."""

    name: str
    chat_template: str | None
    bos_token: str
    eos_token: str
    sampling: SamplingParams  # as last set by ``set_sampling``: a run's trace records it
    # Called as (tokens loaded, prompt tokens) while a long prompt loads, where the runtime can tell;
    # a live view sets it to show progress.
    prompt_progress: Callable[[int, int], None] | None = None

    def __init__(self) -> None:
        self._ids: list[int] = []  # tokens in the context, in order
        self._tail = b""  # last bytes generated: a stop text may span tokens and chunks

    # ---- tokens ------------------------------------------------------------------------------
    @abstractmethod
    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]: ...

    @abstractmethod
    def piece(self, token: int) -> bytes:
        """The token's bytes as generated (special tokens rendered)."""

    @abstractmethod
    def is_end(self, token: int) -> bool:
        """Whether the token ends generation (end-of-generation ids are never kept)."""

    def is_single_token(self, text: str) -> bool:
        """Whether ``text`` is one special/added token (e.g. a native ``</think>``)."""
        return len(self.tokenize(text, special=True)) == 1

    def encode(self, text: str) -> list[int]:
        """Plain-text tokens: the ``TokenCounter`` protocol the S1 state builder measures with."""
        return self.tokenize(text)

    def decode(self, ids: Sequence[int]) -> str:
        return b"".join(self.piece(t) for t in ids).decode("utf-8", errors="replace")

    # ---- context -----------------------------------------------------------------------------
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

    def load_prompt(self, ids: list[int]) -> float:
        """Make ``ids`` the whole context; return seconds spent."""
        self._tail = b""
        return self._load(ids)

    def feed(self, ids: list[int]) -> float:
        """Append tokens that S2 did not generate; return seconds spent."""
        self._tail = b""
        return self._append(ids) if ids else 0.0

    @abstractmethod
    def _load(self, ids: list[int]) -> float: ...

    @abstractmethod
    def _append(self, ids: list[int]) -> float: ...

    # ---- generation --------------------------------------------------------------------------
    @abstractmethod
    def set_sampling(self, params: SamplingParams) -> None:
        """(Re)build the sampler once; the same sampler and RNG serve the whole run."""

    @abstractmethod
    def _sample(self, max_tokens: int, stop_at_newline: bool) -> Iterator[int]:
        """Sampled tokens, one at a time, at most ``max_tokens``: each one that is not an end is kept
        (``_keep``) before the next is asked for. ``stop_at_newline`` is a hint a runtime may use to stop
        early on a line break (the loop stops there anyway); ``END`` ends generation."""

    def _keep(self, token: int) -> None:
        """Put a sampled token into the runtime's context (a server already has it)."""

    def next_logits(self) -> np.ndarray | None:
        """The next-token logits where the runtime exposes them (in-process), else None."""
        return None

    def generate(
        self,
        max_tokens: int,
        *,
        stop_at_newline: bool = False,
        stop_text: bytes | Sequence[bytes] | None = None,
        on_piece: OnPiece | None = None,
        cancelled: Cancelled | None = None,
    ) -> Chunk:
        """Sample up to ``max_tokens``; stop after a token containing a line break (if asked), after
        the token that completes ``stop_text`` (or any of several), at end-of-generation (that token is
        not kept), or when ``cancelled()`` says so: it is asked before the first token and after each."""
        chunk = Chunk()
        max_tokens = min(max_tokens, self.context_left)
        if cancelled is not None and cancelled():
            chunk.stop = "cancelled"
            return chunk
        if max_tokens <= 0:
            return chunk
        out = bytearray()
        stops = [stop_text] if isinstance(stop_text, bytes) else list(stop_text or [])
        scan = StopScan(stops, stop_at_newline, self._tail)
        # The per-token path, looked up once (it runs once a token, between a decode and the next
        # sample): a scan with nothing to find is skipped, since its step returns None and keeps the tail.
        step = scan.step if stops or stop_at_newline else None
        is_end, keep, piece_of, kept = self.is_end, self._keep, self.piece, chunk.ids.append
        t0 = time.perf_counter()
        for token in self._sample(max_tokens, stop_at_newline):
            if token == END or is_end(token):
                chunk.stop = "eos"
                break
            keep(token)
            self._ids.append(token)
            kept(token)
            piece = piece_of(token)
            out += piece
            if on_piece is not None:
                on_piece(piece)
            reason = step(piece) if step is not None else None
            if reason is None and cancelled is not None and cancelled():
                reason = "cancelled"
            if reason is not None:
                chunk.stop = reason
                break
        chunk.seconds = time.perf_counter() - t0
        chunk.data = bytes(out)
        self._tail = scan.tail
        return chunk

    @contextmanager
    def branch(self) -> Iterator[None]:
        """Inside the block, anything may be fed or generated; on exit the context, the next-token
        logits and the sampler state are exactly as they were on entry."""
        mark, tail = len(self._ids), self._tail
        try:
            with self._branch_sampler():
                yield
        finally:
            self._tail = tail
            self._rewind(mark)

    @contextmanager
    def _branch_sampler(self) -> Iterator[None]:
        """A sampler for the branch that leaves the main line's RNG untouched (a server's requests
        carry their own seeds, so it needs nothing)."""
        yield

    def _rewind(self, n: int) -> None:
        """Forget every token after the first ``n``."""
        del self._ids[n:]

    def close(self) -> None:
        pass
