"""A reasoning session: S2's thinking, paused on the paper's schedule, with token accounting.

Backend-independent: the same pause rule and bookkeeping serve llama.cpp in-process and HTTP engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from soma_local.engine.pauses import PauseRule
from soma_local.s2.base import Chunk, OnPiece, S2Backend
from soma_local.s2.formats import Prompt, ThinkingFormat, prompt_ids
from soma_local.engine.trace import TokenCounts


@dataclass
class Pause:
    at_line_break: bool
    closed: bool  # S2 closed thinking itself in this stretch
    ended: bool  # end-of-generation or the generation limit was reached
    limit: bool


@dataclass
class BranchResult:
    text: str
    inserted: int
    generated: int


@dataclass
class Session:
    """Holds one question's run on a backend. ``thinking`` is S2's own text only (no reminders)."""

    backend: S2Backend
    fmt: ThinkingFormat
    max_tokens: int = 32768
    on_piece: OnPiece | None = None
    tokens: TokenCounts = field(default_factory=TokenCounts)
    # Bytes, not text: a token may end mid-character, and chunks split wherever a pause falls.
    _thinking: bytearray = field(default_factory=bytearray)
    _answer: bytearray = field(default_factory=bytearray)
    _output: bytearray = field(default_factory=bytearray)
    s2_decode: float = 0.0
    s2_prefill: float = 0.0
    closed: bool = False

    @property
    def thinking(self) -> str:
        return self._thinking.decode("utf-8", errors="replace")

    @property
    def answer(self) -> str:
        return self._answer.decode("utf-8", errors="replace")

    @property
    def output(self) -> str:
        return self._output.decode("utf-8", errors="replace")

    # ---- setup -------------------------------------------------------------------------------
    def start(self, prompt: Prompt) -> None:
        ids = prompt_ids(self.backend, prompt)
        self.tokens.prompt = len(ids)
        self.s2_prefill += self.backend.load_prompt(ids)

    @property
    def remaining(self) -> int:
        """Generation left: the run's limit, or a full context, whichever comes first."""
        left = self.max_tokens - self.tokens.thinking - self.tokens.answer
        return min(left, self.backend.context_left)

    # ---- thinking --------------------------------------------------------------------------
    def think_to_pause(self, rule: PauseRule) -> Pause:
        """Generate thinking up to the next pause, or until thinking closes or the limit is hit."""
        first = self._think(min(rule.interval, self.remaining), stop_at_newline=False)
        if first.stop in ("stop_text", "eos") or self.remaining <= 0:
            return self._pause(first)
        if rule.slack == 0:
            return Pause(at_line_break=first.data.endswith(b"\n"), closed=False, ended=False, limit=False)
        second = self._think(min(rule.slack, self.remaining), stop_at_newline=True)
        if second.stop in ("stop_text", "eos") or self.remaining <= 0:
            return self._pause(second)
        return Pause(at_line_break=second.stop == "newline", closed=False, ended=False, limit=False)

    def _pause(self, chunk: Chunk) -> Pause:
        closed = chunk.stop == "stop_text"
        limit = self.remaining <= 0 and not closed and chunk.stop != "eos"
        return Pause(at_line_break=False, closed=closed, ended=chunk.stop == "eos" or limit, limit=limit)

    def _think(self, n: int, *, stop_at_newline: bool) -> Chunk:
        close = self.fmt.close.encode()
        chunk = self.backend.generate(
            n, stop_at_newline=stop_at_newline, stop_text=close, on_piece=self.on_piece
        )
        self.s2_decode += chunk.seconds
        self.tokens.thinking += len(chunk.ids)
        self._output += chunk.data
        if chunk.stop == "stop_text":
            head, _, tail = chunk.data.rpartition(close)
            self._thinking += head
            self._answer += tail
            self.closed = True
        else:
            self._thinking += chunk.data
        return chunk

    # ---- insertions --------------------------------------------------------------------------
    def insert(self, text: str) -> int:
        """Feed text S2 did not write (a reminder). Returns its token count."""
        ids = self.backend.tokenize(text, special=False)
        self.s2_prefill += self.backend.feed(ids)
        self.tokens.inserted += len(ids)
        self._output += text.encode()
        return len(ids)

    def _takeover_ids(self, conclusion: str, prefill: str) -> tuple[list[int], str]:
        before = ("\n" + conclusion if conclusion else "") + "\n"
        after = "\n\n" + prefill
        special = self.backend.is_single_token(self.fmt.close)
        ids = (
            self.backend.tokenize(before)
            + self.backend.tokenize(self.fmt.close, special=special)
            + self.backend.tokenize(after)
        )
        return ids, before + self.fmt.close + after

    def close_thinking(self, conclusion: str, prefill: str) -> str:
        """Close thinking with the monitor's text; the answer section starts with ``prefill``.
        Returns the text fed to S2 (a live view shows it before the answer streams)."""
        ids, text = self._takeover_ids(conclusion, prefill)
        self.s2_prefill += self.backend.feed(ids)
        self.tokens.inserted += len(ids)
        self._output += text.encode()
        self._answer += prefill.encode()
        self.closed = True
        return text

    def takeover(self, conclusion: str, prefill: str, max_tokens: int) -> str:
        """Close thinking with the monitor's text and let S2 write at most ``max_tokens``."""
        text = self.close_thinking(conclusion, prefill)
        self.write_answer(max_tokens)
        return text

    def branch_takeover(self, conclusion: str, prefill: str, max_tokens: int) -> BranchResult:
        """The takeover's continuation, produced on a branch: the main run is left untouched."""
        ids, text = self._takeover_ids(conclusion, prefill)
        with self.backend.branch():
            self.backend.feed(ids)
            chunk = self.backend.generate(max_tokens)
        self.s2_decode += chunk.seconds
        self.tokens.probe += len(chunk.ids)
        return BranchResult(text=prefill + chunk.text, inserted=len(ids), generated=len(chunk.ids))

    # ---- answer ---------------------------------------------------------------------------
    def write_answer(self, max_tokens: int | None = None) -> None:
        """The answer after thinking closed: ``max_tokens`` (a takeover's allowance), else whatever
        the generation limit leaves."""
        self._write_answer(self.remaining if max_tokens is None else max_tokens)

    def _write_answer(self, n: int) -> None:
        if n <= 0:
            return
        chunk = self.backend.generate(n, on_piece=self.on_piece)
        self.s2_decode += chunk.seconds
        self.tokens.answer += len(chunk.ids)
        self._answer += chunk.data
        self._output += chunk.data

