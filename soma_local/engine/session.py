"""A reasoning session: S2's thinking, paused on the paper's schedule, with token accounting.

Backend-independent: the same pause rule and bookkeeping serve llama.cpp in-process and HTTP engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from soma_local.engine.events import Listener, Piece, TextStream, ThinkingClosed, cut_at
from soma_local.engine.pauses import PauseRule
from soma_local.s2.base import Cancelled, Chunk, S2Backend
from soma_local.s2.formats import Prompt, ThinkingFormat, prompt_ids
from soma_local.engine.trace import TokenCounts


@dataclass
class Pause:
    at_line_break: bool
    closed: bool  # S2 closed thinking itself in this stretch
    ended: bool  # end-of-generation or the generation limit was reached
    limit: bool
    cancelled: bool = False  # the run's cancel was set: it ends here


@dataclass
class BranchResult:
    text: str
    inserted: int
    generated: int


@dataclass
class Session:
    """Holds one question's run on a backend. ``thinking`` is S2's own text only (no reminders).

    ``emit`` hears the run's text as ``Piece``s and the start of the answer (``ThinkingClosed``), in
    that order: the session alone knows where thinking ends, so it alone streams. ``stop`` are the
    answer's stop strings (the answer ends before the first); ``cancel`` is asked between tokens."""

    backend: S2Backend
    fmt: ThinkingFormat
    max_tokens: int = 32768
    emit: Listener | None = None
    stop: Sequence[str] = ()
    cancel: Cancelled | None = None
    tokens: TokenCounts = field(default_factory=TokenCounts)
    # Bytes, not text: a token may end mid-character, and chunks split wherever a pause falls.
    _thinking: bytearray = field(default_factory=bytearray)
    _answer: bytearray = field(default_factory=bytearray)
    _output: bytearray = field(default_factory=bytearray)
    _prefill: int = 0  # bytes of the answer the engine wrote: stop strings are looked for after them
    s2_decode: float = 0.0
    s2_prefill: float = 0.0
    closed: bool = False
    cancelled: bool = False  # a chunk ended on ``cancel``

    def __post_init__(self) -> None:
        self._emit: Listener = self.emit or (lambda event: None)
        self._thinking_text = TextStream("thinking", [self.fmt.close], self._emit)
        self._answer_text = TextStream("answer", self.stop, self._emit)

    @property
    def thinking(self) -> str:
        return self._thinking.decode("utf-8", errors="replace")

    @property
    def answer(self) -> str:
        """The engine's prefill, then S2's answer up to its first stop string."""
        written = self._answer[self._prefill :].decode("utf-8", errors="replace")
        return self._answer[: self._prefill].decode("utf-8", errors="replace") + cut_at(written, self.stop)

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
        if first.stop in ("stop_text", "eos", "cancelled") or self.remaining <= 0:
            return self._pause(first)
        if rule.slack == 0:
            return Pause(at_line_break=first.data.endswith(b"\n"), closed=False, ended=False, limit=False)
        second = self._think(min(rule.slack, self.remaining), stop_at_newline=True)
        if second.stop in ("stop_text", "eos", "cancelled") or self.remaining <= 0:
            return self._pause(second)
        return Pause(at_line_break=second.stop == "newline", closed=False, ended=False, limit=False)

    def _pause(self, chunk: Chunk) -> Pause:
        closed, cancelled = chunk.stop == "stop_text", chunk.stop == "cancelled"
        limit = self.remaining <= 0 and not closed and not cancelled and chunk.stop != "eos"
        return Pause(at_line_break=False, closed=closed, ended=chunk.stop == "eos" or limit, limit=limit,
                     cancelled=cancelled)

    def _generate(self, n: int, **kw) -> Chunk:
        chunk = self.backend.generate(n, cancelled=self.cancel, **kw)
        self.s2_decode += chunk.seconds
        self.cancelled |= chunk.stop == "cancelled"
        self._output += chunk.data
        return chunk

    def _think(self, n: int, *, stop_at_newline: bool) -> Chunk:
        close = self.fmt.close.encode()
        chunk = self._generate(n, stop_at_newline=stop_at_newline, stop_text=close, on_piece=self._thinking_text.feed)
        self.tokens.thinking += len(chunk.ids)
        if chunk.stop != "stop_text":
            self._thinking += chunk.data
            return chunk
        # The tag may have begun in an earlier chunk (a pause can fall inside it), never before an insertion.
        head, _, tail = (bytes(self._thinking) + chunk.data).rpartition(close)
        self._thinking = bytearray(head)
        self.closed = True
        self._emit(ThinkingClosed("s2"))
        self._answer += tail
        self._answer_text.feed(tail)
        return chunk

    # ---- insertions --------------------------------------------------------------------------
    def insert(self, text: str) -> int:
        """Feed text S2 did not write (a reminder). Returns its token count."""
        self._thinking_text.flush()  # no closing tag can span the insertion
        ids = self.backend.tokenize(text, special=False)
        self.s2_prefill += self.backend.feed(ids)
        self.tokens.inserted += len(ids)
        self._output += text.encode()
        return len(ids)

    def _takeover_parts(self, conclusion: str, prefill: str) -> tuple[str, str]:
        """The text around the closing tag: ``conclusion`` ends the thinking, ``prefill`` starts the answer."""
        return ("\n" + conclusion if conclusion else "") + "\n", "\n\n" + prefill

    def takeover_text(self, conclusion: str, prefill: str) -> str:
        """The text ``close_thinking`` feeds S2 (a takeover record holds it)."""
        before, after = self._takeover_parts(conclusion, prefill)
        return before + self.fmt.close + after

    def _takeover_ids(self, conclusion: str, prefill: str) -> list[int]:
        before, after = self._takeover_parts(conclusion, prefill)
        special = self.backend.is_single_token(self.fmt.close)
        return (
            self.backend.tokenize(before)
            + self.backend.tokenize(self.fmt.close, special=special)
            + self.backend.tokenize(after)
        )

    def close_thinking(self, conclusion: str, prefill: str,
                       by: Literal["takeover", "engine"] = "takeover") -> str:
        """Close thinking with the monitor's text; the answer section starts with ``prefill``, streamed as
        the first answer piece. Returns the text fed to S2."""
        self._thinking_text.flush()
        ids = self._takeover_ids(conclusion, prefill)
        self.s2_prefill += self.backend.feed(ids)
        self.tokens.inserted += len(ids)
        text = self.takeover_text(conclusion, prefill)
        self._output += text.encode()
        self._answer += prefill.encode()
        self._prefill = len(self._answer)
        self.closed = True
        self._emit(ThinkingClosed(by, prefill))
        if prefill:
            self._emit(Piece(prefill, "answer"))
        return text

    def takeover(self, conclusion: str, prefill: str, max_tokens: int) -> str:
        """Close thinking with the monitor's text and let S2 write at most ``max_tokens``."""
        text = self.close_thinking(conclusion, prefill)
        self.write_answer(max_tokens)
        return text

    def branch_takeover(self, conclusion: str, prefill: str, max_tokens: int) -> BranchResult:
        """The takeover's continuation, produced on a branch: the main run is left untouched."""
        ids = self._takeover_ids(conclusion, prefill)
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
        stops = [s.encode() for s in self.stop]
        chunk = self._generate(n, stop_text=stops, on_piece=self._answer_text.feed)
        self.tokens.answer += len(chunk.ids)
        self._answer += chunk.data

    def end_streams(self) -> None:
        """Release text held back in case it began a closing tag or a stop string: the run is over."""
        self._thinking_text.flush()
        self._answer_text.flush()

