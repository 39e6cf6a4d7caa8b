"""The arguments of one run, checked before S2 starts: each mistake is one ``RequestError`` that names
it (the chat server answers it with a 4xx, the CLI with one line)."""

from __future__ import annotations

import math
from typing import Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from soma_local.engine.conversation import Task
from soma_local.engine.supervise import MODES
from soma_local.errors import RequestError
from soma_local.jsonl import field_errors
from soma_local.s2.formats import ChatMessage


class Message(BaseModel):
    """One chat message as an OpenAI client sends it: a role and plain-text content."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class RunRequest(BaseModel):
    """What ``Supervisor.run`` and ``stream`` take besides their callbacks; None keeps the supervisor's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str | None = None
    messages: list[Message] | None = None
    seed: int | None = None
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0)
    stop: list[str] = Field(default_factory=list)
    monitors: list[str] | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)
    mode: str | None = None

    @field_validator("stop", mode="before")
    @classmethod
    def _one_or_more(cls, value):
        return [value] if isinstance(value, str) else [] if value is None else value

    @field_validator("stop")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if any(not s for s in value):
            raise ValueError("a stop string must not be empty")
        return value

    @field_validator("thresholds", mode="before")
    @classmethod
    def _none_is_empty(cls, value):
        return {} if value is None else value

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str | None) -> str | None:
        if value is not None and value not in MODES:
            raise ValueError(f"unknown mode '{value}' (known: {', '.join(MODES)})")
        return value

    @model_validator(mode="after")
    def _one_prompt(self) -> "RunRequest":
        if (self.question is None) == (self.messages is None):
            raise ValueError("give either a question or messages, not both and not neither")
        if self.question is not None and not self.question.strip():
            raise ValueError("the question is empty")
        if self.messages is not None and (not self.messages or self.messages[-1].role != "user"):
            raise ValueError("messages must end with the user's message")
        return self

    @classmethod
    def of(cls, **fields) -> "RunRequest":
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise RequestError(field_errors(exc)) from None

    @property
    def task(self) -> Task:
        """The question, or the conversation as the engine takes it."""
        if self.question is not None:
            return self.question
        return [ChatMessage(m.role, m.content) for m in self.messages or []]


def check_thresholds(thresholds: Mapping[str, float], monitors: Sequence[str]) -> dict[str, float]:
    """h per monitor of the run: a number above 0 (inf: never take over), for a monitor the run has."""
    for name, h in thresholds.items():
        if name not in monitors:
            raise RequestError(f"thresholds: no monitor '{name}' in this run (monitors: {', '.join(monitors)})")
        if math.isnan(h) or not h > 0:
            raise RequestError(f"thresholds: h for '{name}' must be a number > 0 (inf: never take over), got {h}")
    return dict(thresholds)


def pick_monitors(names: Sequence[str] | None, known: Sequence[str]) -> list[str]:
    """The run's monitors by name, a subset of the supervisor's (None: all of them)."""
    if names is None:
        return list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise RequestError(f"monitors: unknown monitor '{unknown[0]}' (this supervisor has: {', '.join(known) or 'none'})")
    return [n for n in known if n in names]
