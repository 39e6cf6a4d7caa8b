"""The Jev (TypeSafe "System One") wire format, as the official SDK ``typesafe-sdk`` 0.7.5 speaks it.

Both sides of our Jev support use these models: the HTTP S1 adapter (``s1/jev.py``) builds requests
and reads answers with them, and ``soma serve`` validates requests and writes answers with them, so a
round trip cannot drift between two hand-written copies of the format. Limits follow the documented
ones (255 choice options, 2-10 score levels); the confidence formulas are TypeSafe's, as jevcompat
checks them (reference: ``../shared/reference/jev-api.md`` sections 1.2-1.4).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A "text" field: a string, or a JSON object or array that carries data (Jev's `state`,
# `instructions` and option descriptions).
Text = Union[str, dict[str, Any], list[Any]]

MAX_CHOICE_OPTIONS = 255
MIN_SCORE_LEVELS, MAX_SCORE_LEVELS = 2, 10
MODEL_ALIASES = ("jev-latest", "jev-preview")


def as_text(value: Text) -> str:
    """The text an S1 reads for a Jev text field: strings as they are, data as compact JSON.

    JSON keeps the caller's key order, so the same request always yields the same text.
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# ---- requests ----------------------------------------------------------------------------------
class _Question(BaseModel):
    model_config = ConfigDict(extra="ignore")
    instructions: Text | None = None


class NoulCriteria(BaseModel):
    model_config = ConfigDict(extra="forbid")
    true: Text | None = None
    false: Text | None = None


class NoulQuestion(_Question):
    type: Literal["noul"]
    criteria: NoulCriteria | None = None

    @model_validator(mode="after")
    def _has_something_to_judge(self) -> "NoulQuestion":
        sides = self.criteria and (self.criteria.true is not None or self.criteria.false is not None)
        if self.instructions is None and not sides:
            raise ValueError("a noul question needs instructions or a described criteria side")
        return self


class ChoiceQuestion(_Question):
    type: Literal["choice"]
    criteria: dict[str, Text | None] = Field(min_length=1, max_length=MAX_CHOICE_OPTIONS)


class ScoreQuestion(_Question):
    type: Literal["score"]
    criteria: list[Text] = Field(min_length=MIN_SCORE_LEVELS, max_length=MAX_SCORE_LEVELS)


Question = Annotated[Union[NoulQuestion, ChoiceQuestion, ScoreQuestion], Field(discriminator="type")]


class SystemOneRequest(BaseModel):
    """``POST /v1/systemone``. Unknown top-level fields are ignored, as the official server does."""

    model_config = ConfigDict(extra="ignore")
    model: str
    state: Text
    questions: dict[str, Question] = Field(min_length=1)


# ---- responses ---------------------------------------------------------------------------------
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class NoulAnswer(BaseModel):
    type: Literal["noul"] = "noul"
    noul: Probability


class ChoiceAnswer(BaseModel):
    type: Literal["choice"] = "choice"
    choice: str
    probabilities: dict[str, Probability]
    confidence: Probability


class ScoreAnswer(BaseModel):
    type: Literal["score"] = "score"
    score: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
    legend: dict[str, Text]
    probabilities: dict[str, Probability]
    confidence: Probability


Answer = Union[NoulAnswer, ChoiceAnswer, ScoreAnswer]


class Usage(BaseModel):
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)


class SystemOneResponse(BaseModel):
    model: str
    answers: dict[str, Answer]
    usage: Usage


class ModelInfo(BaseModel):
    name: str
    description: str
    release_date: str  # YYYY-MM-DD


class ModelList(BaseModel):
    models: list[ModelInfo]


class ErrorDetail(BaseModel):
    """The body of every non-validation error: ``{"detail": {"error_type", "message"}}``."""

    error_type: str
    message: str


class ErrorBody(BaseModel):
    detail: ErrorDetail


# ---- TypeSafe's confidence formulas (jevcompat SPEC 4.5) ------------------------------------------
def choice_confidence(probs: list[float]) -> float:
    """How far the top option stands above uniform: (m - 1/n) / (1 - 1/n); 1 for a single option."""
    n = len(probs)
    if n <= 1:
        return 1.0
    return min(1.0, max(0.0, (max(probs) - 1 / n) / (1 - 1 / n)))


def score_confidence(probs: list[float]) -> float:
    """1 - (expected distance from the modal level) / (that distance under a uniform distribution)."""
    n = len(probs)
    if n <= 1:
        return 1.0
    mode = max(range(n), key=lambda i: probs[i])
    spread = sum(p * abs(i - mode) for i, p in enumerate(probs))
    uniform = sum(abs(i - (n - 1) / 2) for i in range(n)) / n
    return min(1.0, max(0.0, 1 - spread / uniform))


def is_probability(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1
