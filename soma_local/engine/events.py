"""What a run tells its listener besides the trace records: S2's text as it is written, and where the
answer section starts.

A listener (the CLI's live view, the Python API's ``stream``) gets one ordered stream: ``Piece`` and
``ThinkingClosed`` here, and every trace record (``engine.trace``) as it is written. The order is the
run's: thinking pieces, never holding the closing tag; ``ThinkingClosed``; answer pieces, a takeover's
prefill first; ``run_end`` last.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

Section = Literal["thinking", "answer"]


@dataclass(frozen=True)
class Piece:
    """Text S2 wrote (or, for a takeover's prefill, the engine wrote into its answer), whole characters
    only: a character split across tokens comes out in the piece that completes it."""

    text: str
    section: Section


@dataclass(frozen=True)
class ThinkingClosed:
    """Not a trace record: the answer section starts now. ``by`` is "s2" (S2 wrote the closing tag),
    "takeover" or "engine" (S2 stopped without closing thinking, so the engine closed it); ``prefill``
    is the answer text the engine wrote, which follows as the first answer ``Piece``."""

    by: Literal["s2", "takeover", "engine"]
    prefill: str = ""


Listener = Callable[[object], None]


def _held(text: str, ends: Sequence[str]) -> int:
    """Characters at the end of ``text`` that may be the start of one of ``ends``."""
    for n in range(min(len(text), max(map(len, ends), default=1) - 1), 0, -1):
        if any(end.startswith(text[-n:]) for end in ends):
            return n
    return 0


class TextStream:
    """One section's bytes, as S2 generates them, into ``Piece``s: decoded incrementally (UTF-8 safe),
    with text held back while it may be the start of a string that ends the section (thinking's closing
    tag, the answer's stop strings), and nothing from the first such string on."""

    def __init__(self, section: Section, ends: Sequence[str], emit: Listener) -> None:
        self.section, self.ends, self.emit = section, [e for e in ends if e], emit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self.ended = False

    def feed(self, data: bytes) -> None:
        if self.ended:
            return
        text = self._held + self._decoder.decode(data)
        end = first_end(text, self.ends)
        if end >= 0:
            self.ended = True
            self._send(text[:end])
            return
        keep = _held(text, self.ends)
        self._held = text[len(text) - keep :]
        self._send(text[: len(text) - keep])

    def flush(self) -> None:
        """Release what is held: nothing can complete it now (an insertion follows, or the run ends)."""
        if not self.ended:
            text, self._held = self._held + self._decoder.decode(b"", final=True), ""
            self._send(text)

    def _send(self, text: str) -> None:
        if text:
            self.emit(Piece(text, self.section))


def first_end(text: str, ends: Sequence[str]) -> int:
    """Where the first of ``ends`` found in ``text`` starts, or -1."""
    found = [i for i in (text.find(end) for end in ends if end) if i >= 0]
    return min(found, default=-1)


def cut_at(text: str, ends: Sequence[str]) -> str:
    """``text`` up to the first of ``ends`` in it: what a ``TextStream`` with these ends streams of it."""
    end = first_end(text, ends)
    return text if end < 0 else text[:end]
