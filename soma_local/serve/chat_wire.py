"""The wire format of ``soma serve-chat``: OpenAI's chat completions, with reasoning as vLLM and DeepSeek
send it and one extension field, ``soma``.

Requests are read the way OpenAI's own server reads them, strictly typed (``"0.5"`` is not a
temperature), with one difference: fields this server does not know are ignored, as vLLM and
llama-server ignore them, so a client written for another server still works; the response's ``soma``
object names those it ignored. Fields it knows but cannot honour (tools, ``n`` > 1, logprobs, a JSON
``response_format``) are refused instead (``refusals``), because ignoring them would return something
other than what was asked. Our own extension (``soma``) is closed: a typo there is an error.

Responses: ``reasoning_content`` (DeepSeek's name) and ``reasoning`` (vLLM's) both carry the thinking,
``content`` the answer. Every model is dumped without its None fields (``exclude_none``), so a chunk's
delta holds only what it says.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from soma_local.engine.supervise import MODES

MAX_STOP = 4  # stop sequences, as OpenAI allows


class _Wire(BaseModel):
    # JSON has no infinity; an h of inf (a mode that never takes over) goes out as "Infinity", as traces write it.
    model_config = ConfigDict(ser_json_inf_nan="strings")


# ---- request ---------------------------------------------------------------------------------------

class Message(BaseModel):
    """One chat message, its content as plain text (a string, or OpenAI's list of text parts, joined).
    An assistant message's ``reasoning_content`` (DeepSeek asks clients not to send it back) is ignored
    with the other unknown fields: S2 reads earlier answers, not earlier thinking."""

    model_config = ConfigDict(strict=True, extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts(cls, content: Any) -> Any:
        if not isinstance(content, list):
            return content
        texts = []
        for i, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            if kind != "text" or not isinstance(part.get("text"), str):
                raise ValueError(f"part [{i}] is {kind!r}, not a text part {{'type': 'text', 'text': '...'}}: "
                                 "this server reads text only")
            texts.append(part["text"])
        return "".join(texts)

    @property
    def text(self) -> str:
        return self.content or ""


class SomaOptions(BaseModel):
    """The ``soma`` extension field (``extra_body={"soma": {...}}`` in the openai client): which of the
    server's monitors watch this request, h per monitor, and the mode."""

    model_config = ConfigDict(strict=True, extra="forbid")

    monitors: list[str] | None = Field(None, min_length=1)
    thresholds: dict[str, float] | None = None
    mode: Literal[tuple(MODES)] | None = None  # type: ignore[valid-type]

    @field_validator("thresholds")
    @classmethod
    def _positive(cls, thresholds: dict[str, float] | None) -> dict[str, float] | None:
        for name, h in (thresholds or {}).items():
            if not h > 0:  # NaN fails too
                raise ValueError(f"h for {name!r} must be a number > 0, got {h}")
        return thresholds


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    include_usage: bool = False


class ResponseFormat(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    type: str


class ChatRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")

    messages: list[Message] = Field(min_length=1)
    model: str | None = None  # None: the served model (as vLLM does)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, lt=2**32)  # llama.cpp seeds are 32-bit
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    soma: SomaOptions | None = None
    # Known but not supported: read only to be refused (``refusals``).
    n: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    response_format: ResponseFormat | None = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        stops = [stop] if isinstance(stop, str) else stop or []
        if len(stops) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences")
        if any(not s for s in stops):
            raise ValueError("a stop sequence must not be empty")
        return stop

    @property
    def stops(self) -> list[str] | None:
        return [self.stop] if isinstance(self.stop, str) else self.stop

    @property
    def limit(self) -> int | None:
        """The generation limit asked for (``max_completion_tokens`` is the newer name, and wins)."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def ignored(self) -> list[str]:
        """Top-level fields this server does not know, ignored."""
        return sorted(self.model_extra or {})

    def refusals(self) -> list[tuple[str, str]]:
        """(param, message) for each feature asked for that this server does not support."""
        out = []
        if self.tools or self.functions:
            out.append(("tools", "tools and function calling are not supported by this server"))
        if self.tool_choice not in (None, "none") or self.function_call not in (None, "none"):
            out.append(("tool_choice", "tool_choice is not supported by this server (no tools)"))
        if self.n not in (None, 1):
            out.append(("n", "n > 1 is not supported: this server writes one supervised completion per request"))
        if self.logprobs or self.top_logprobs:
            out.append(("logprobs", "logprobs are not supported by this server"))
        if self.response_format is not None and self.response_format.type != "text":
            out.append(("response_format", f"response_format {self.response_format.type!r} is not supported "
                        "(only 'text')"))
        if self.stream_options is not None and not self.stream:
            out.append(("stream_options", "stream_options is only allowed when stream is true"))
        return out


# ---- responses -------------------------------------------------------------------------------------

class ReasoningTokens(_Wire):
    reasoning_tokens: int


class Usage(_Wire):
    """``completion_tokens`` counts what S2 generated (thinking and answer); reminder and takeover text
    the engine inserted was never generated, and ``soma.tokens`` counts it apart."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    completion_tokens_details: ReasoningTokens


class Delta(_Wire):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class ChunkChoice(_Wire):
    index: int = 0
    delta: Delta
    finish_reason: str | None = None


class ChatCompletionChunk(_Wire):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    soma: dict | None = None  # a trace record (scan, reminder, takeover) or the run's summary


class AssistantMessage(_Wire):
    role: Literal["assistant"] = "assistant"
    content: str
    reasoning_content: str
    reasoning: str


class Choice(_Wire):
    index: int = 0
    message: AssistantMessage
    finish_reason: str


class ChatCompletion(_Wire):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    soma: dict


class TakeoverAt(_Wire):
    monitor: str
    scan_index: int
    thinking_tokens: int


class InsertedTokens(_Wire):
    inserted: int  # reminders and takeover text fed to S2
    probe: int  # generated on side branches (readout modes), not part of the completion


class RunSummary(_Wire):
    """The ``soma`` object of the last chunk and of a whole response: how supervision went."""

    type: Literal["summary"] = "summary"
    stop: str  # soma's own stop ("answer", "takeover", "limit", ...); finish_reason maps it
    takeover: TakeoverAt | None
    scans: int
    reminders: int
    mode: str
    thresholds: dict[str, float]
    tokens: InsertedTokens
    ignored_fields: list[str]
    trace: str | None  # the trace file's name under --trace-dir


class ModelCard(_Wire):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "soma-local"


class ModelList(_Wire):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorInfo(_Wire):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(_Wire):
    error: ErrorInfo
