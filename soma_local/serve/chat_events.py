"""A supervised run's events as chat completion chunks, and the same run as one whole completion.

One fold serves both modes: ``Transcript.chunks(event)`` turns each event of ``Supervisor.stream`` into
the chunks a streaming client gets, and keeps the reasoning and content it sent, so the whole message
of a non-streaming response is, by construction, the concatenation of the stream.

What S2 read while thinking goes into ``reasoning_content``: its own thinking, each reminder as the
inserted paragraph (``<reminder>...</reminder>``), and a takeover's conclusion. Scans, reminders and
takeovers also go out as their trace records in the chunk's ``soma`` field, and the last chunk's
``soma`` summarises the run. Token counts come from the run's own ``run_end`` record, so ``usage``
always agrees with the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from soma_local.s2.formats import ThinkingFormat
from soma_local.serve.chat_wire import (
    AssistantMessage, ChatCompletion, ChatCompletionChunk, Choice, ChunkChoice, Delta, InsertedTokens,
    ReasoningTokens, RunSummary, TakeoverAt, Usage,
)
from soma_local.supervisor import Piece, Reminder, RunEnd, RunStart, Takeover

CLOSE = ThinkingFormat("prompted").close  # every thinking format closes with the same tag
# soma's stops that are not a finished answer; every other stop (an answer, a takeover's answer, thinking
# that ended and was closed) is "stop", unless the answer used up the tokens asked for.
FINISH = {"limit": "length", "cancelled": "stop"}


def finish_reason(stop: str, generated: int, limit: int | None) -> str:
    if stop in FINISH:
        return FINISH[stop]
    return "length" if limit is not None and generated >= limit else "stop"


@dataclass
class Transcript:
    id: str
    model: str
    created: int
    limit: int | None  # max_tokens as the client asked (None: what the context leaves)
    include_usage: bool = False
    ignored_fields: list[str] = field(default_factory=list)
    trace: str | None = None
    reasoning: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    start: RunStart | None = None
    takeover: Takeover | None = None
    end: RunEnd | None = None

    def _chunk(self, delta: Delta | None = None, *, soma: BaseModel | None = None,
               finish: str | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=self.id, created=self.created, model=self.model,
            choices=[ChunkChoice(delta=delta or Delta(), finish_reason=finish)],
            soma=soma.model_dump(mode="json") if soma is not None else None,
        )

    def _think(self, text: str, soma: BaseModel | None = None) -> ChatCompletionChunk:
        self.reasoning.append(text)
        return self._chunk(Delta(reasoning_content=text, reasoning=text), soma=soma)

    def _say(self, text: str) -> ChatCompletionChunk:
        self.content.append(text)
        return self._chunk(Delta(content=text))

    def chunks(self, event: object) -> list[ChatCompletionChunk]:
        """The chunks one event of the run sends (none for most records)."""
        if isinstance(event, Piece):
            if not event.text:
                return []
            return [self._think(event.text) if event.section == "thinking" else self._say(event.text)]
        if isinstance(event, RunStart):
            self.start = event
            return [self._chunk(Delta(role="assistant", content=""))]
        if isinstance(event, RunEnd):
            self.end = event
            return self._last()
        if isinstance(event, Reminder):
            return [self._think(event.text, event)]
        if isinstance(event, Takeover):
            self.takeover = event
            return [self._think(event.text.rpartition(CLOSE)[0] or event.text, event)]
        if isinstance(event, BaseModel) and getattr(event, "type", None) in ("scan", "branch"):
            return [self._chunk(soma=event)]
        return []  # ThinkingClosed (a takeover's prefill follows as an answer piece), the result itself

    @property
    def usage(self) -> Usage:
        tokens = self.end.tokens
        completion = tokens.thinking + tokens.answer
        return Usage(prompt_tokens=tokens.prompt, completion_tokens=completion,
                     total_tokens=tokens.prompt + completion,
                     completion_tokens_details=ReasoningTokens(reasoning_tokens=tokens.thinking))

    @property
    def finish_reason(self) -> str:
        return finish_reason(self.end.stop, self.end.tokens.thinking + self.end.tokens.answer, self.limit)

    @property
    def summary(self) -> RunSummary:
        end, start, took = self.end, self.start, self.takeover
        return RunSummary(
            stop=end.stop,
            takeover=TakeoverAt(monitor=took.monitor, scan_index=took.scan_index,
                                thinking_tokens=took.thinking_tokens) if took else None,
            scans=end.scans, reminders=end.reminders,
            mode=start.settings.get("mode", "") if start else "",
            thresholds=start.thresholds if start else {},
            tokens=InsertedTokens(inserted=end.tokens.inserted, probe=end.tokens.probe),
            ignored_fields=self.ignored_fields, trace=self.trace,
        )

    def _last(self) -> list[ChatCompletionChunk]:
        """The finishing chunk with the summary, then (if asked) OpenAI's usage chunk with no choices."""
        out = [self._chunk(soma=self.summary, finish=self.finish_reason)]
        if self.include_usage:
            out.append(ChatCompletionChunk(id=self.id, created=self.created, model=self.model, choices=[],
                                           usage=self.usage))
        return out

    def completion(self) -> ChatCompletion:
        """The whole run as one response: the stream's reasoning and content, joined."""
        reasoning = "".join(self.reasoning)
        message = AssistantMessage(content="".join(self.content), reasoning_content=reasoning, reasoning=reasoning)
        return ChatCompletion(id=self.id, created=self.created, model=self.model,
                              choices=[Choice(message=message, finish_reason=self.finish_reason)],
                              usage=self.usage, soma=self.summary.model_dump(mode="json"))
