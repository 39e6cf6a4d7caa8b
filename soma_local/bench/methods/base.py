"""The method interface: one question in, one ``Outcome`` out, all on the same harness.

Every method gets the same S2 backend, decoding settings, scan schedule and generation limit
(``Harness``); only what it does while S2 thinks differs. Probes (trial answers, Dynasor probes,
readout continuations) run on the backend's branch primitive and their tokens land in
``TokenCounts.probe``, so they count in the totals.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from soma_local.engine.monitors import Monitor
from soma_local.s1.base import S1
from soma_local.s2.base import S2Backend, SamplingParams
from soma_local.s2.formats import ThinkingFormat, backend_thinking, prompt_for, system_prompt
from soma_local.engine.pauses import PauseRule
from soma_local.engine.session import Pause, Session
from soma_local.engine.trace import TokenCounts


@dataclass
class Harness:
    """What every method shares: S2, S1 (only SOMA uses it), the scan schedule and limits."""

    s2: S2Backend
    sampling: SamplingParams
    s1: S1 | None = None
    pause: PauseRule = field(default_factory=PauseRule)
    max_tokens: int = 32768
    thinking: ThinkingFormat | None = None

    def fmt(self) -> ThinkingFormat:
        return self.thinking or backend_thinking(self.s2)

    def session(self, prompt: str, *, extra_system: str | None = None) -> Session:
        """A fresh unsupervised session on ``prompt`` (the baselines' starting point), same seed."""
        fmt = self.fmt()
        text = prompt_for(self.s2, prompt, fmt=fmt, system=system_prompt(fmt, supervised=False, extra=extra_system))
        self.s2.set_sampling(self.sampling)
        session = Session(self.s2, fmt, max_tokens=self.max_tokens)
        session.start(text)
        return session


class Outcome(BaseModel):
    """What a method produced for one question; scored later from ``answer`` (or ``records``)."""

    model_config = ConfigDict(extra="forbid")

    stop: str
    thinking: str
    answer: str  # everything after thinking closed, prefills included
    tokens: TokenCounts
    records: list[dict] = []  # SOMA's trace records (scans, reminders, branches), baseline events
    extras: dict = {}


def outcome_of(session: Session, stop: str, records: list[dict] | None = None, **extras) -> Outcome:
    return Outcome(
        stop=stop,
        thinking=session.thinking,
        answer=session.answer,
        tokens=session.tokens.model_copy(),
        records=records or [],
        extras=extras,
    )


def conclude(session: Session, pause: Pause) -> str | None:
    """End the run the way the supervise loop does if this pause ended thinking; None otherwise.
    S2 closed thinking: it answers. Limit: nothing more. It stopped without closing thinking (small
    prompted models do): thinking is closed for it, so every run has an answer section."""
    if pause.closed:
        session.write_answer()
        return "answer"
    if pause.limit:
        return "limit"
    if pause.ended:
        session.takeover("", "", max_tokens=max(0, session.remaining))
        return "eos_in_thinking"
    return None


def finish(session: Session) -> str:
    """Let S2 run to its own end."""
    while True:
        stop = conclude(session, session.think_to_pause(PauseRule(interval=max(1, session.remaining), slack=0)))
        if stop:
            return stop


def probe(session: Session, text: str, max_tokens: int) -> str:
    """Feed ``text`` and generate on a branch: the main run is untouched, the tokens are counted."""
    backend = session.backend
    with backend.branch():
        backend.feed(backend.tokenize(text))
        chunk = backend.generate(max_tokens)
    session.tokens.probe += len(chunk.ids)
    session.s2_decode += chunk.seconds
    return chunk.text


class Method(ABC):
    """A named way of running S2 on one question of a benchmark measured with ``monitor`` (SOMA runs
    it; a method that takes over, as SES does, ends with its takeover)."""

    name: str

    @abstractmethod
    def run(self, prompt: str, monitor: Monitor, harness: Harness) -> Outcome: ...

    def settings(self) -> dict:
        """The parameters that identify this method's results (recorded in every result line)."""
        return {}
