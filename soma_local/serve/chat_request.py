"""A chat request body into the arguments of one supervised run, or the 4xx that says what is wrong.

Everything a request can get wrong is found here, before it takes a place in the queue: a body that is
not JSON or not the schema (400, naming the field), a feature this server does not support (400), a
model it does not serve (404), an empty user message, a monitor the server does not run, an h for a
monitor not in the run, and a prompt (or prompt plus ``max_tokens``) longer than S2's context (400,
``context_length_exceeded``, with both numbers). The Supervisor checks its own arguments too and raises
``SomaError``; the server answers those 400 as well, but a request refused here never waits.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from pydantic import ValidationError

from soma_local.serve.chat_wire import ChatRequest

_SURROGATE = re.compile("[\ud800-\udfff]")


class ChatError(Exception):
    """A refusal in OpenAI's error shape: status, message, and the request field at fault."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.headers = status, message, param, code, headers


def _where(loc: Sequence[str | int]) -> str:
    """A pydantic location as a client writes it: ``messages[0].content``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _lone_surrogates(value: object, where: str) -> str | None:
    """Where (a field path, "" for the top) a string holds a lone surrogate: valid as a JSON escape, but
    not text S2 could read (UTF-8 cannot carry it). Keys count too."""
    if isinstance(value, str):
        return where if _SURROGATE.search(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        name = key.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(key, str) else key
        here = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{name}" if where else name
        found = _lone_surrogates(key, here) if isinstance(key, str) else None
        found = found if found is not None else _lone_surrogates(item, here)
        if found is not None:
            return found
    return None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def read_chat_request(body: bytes) -> ChatRequest:
    """The request in ``body``: UTF-8 JSON (no NaN, no lone surrogates) of the schema, or a 400 naming
    what is wrong."""
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as exc:
        raise ChatError(400, f"The body is not UTF-8 (byte {exc.start} is 0x{body[exc.start]:02x}).",
                        code="invalid_json") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a constant, too deep
        raise ChatError(400, f"The body is not valid JSON: {exc}.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ChatError(400, f"The body must be a JSON object (a chat completion request), not {type(data).__name__}.")
    found = _lone_surrogates(data, "")
    if found is not None:
        raise ChatError(400, f"{found or 'body'} holds a lone UTF-16 surrogate, which is not text.", param=found or None)
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        text = "; ".join(f"{_where(e['loc']) or 'body'}: {e['msg']}" for e in errors[:5])
        raise ChatError(400, f"Invalid request: {text}.", param=_where(errors[0]["loc"]) or None) from None
    except RecursionError:
        raise ChatError(400, "Invalid request: the body is nested too deeply.") from None


def check_request(request: ChatRequest, *, models: Sequence[str], monitors: Sequence[str]) -> list[str]:
    """Refuse what the server cannot do for this request; returns the monitors the run uses."""
    refused = request.refusals()
    if refused:
        param, message = refused[0]
        raise ChatError(400, message, param=param, code="unsupported")
    if request.model is not None and request.model not in models:
        raise ChatError(404, f"The model {request.model!r} does not exist; this server serves {list(models)}.",
                        param="model", code="model_not_found")
    if request.messages[-1].role != "user":
        raise ChatError(400, f"The last message is the {request.messages[-1].role}'s: a chat completion answers "
                        "the user's last message, so messages must end with one.", param="messages")
    for i, message in enumerate(request.messages):
        if message.role == "user" and not message.text.strip():
            raise ChatError(400, f"messages[{i}] is a user message with empty content.", param=f"messages[{i}].content")
    options = request.soma
    chosen = list(options.monitors) if options and options.monitors else list(monitors)
    unknown = [m for m in chosen if m not in monitors]
    if unknown:
        raise ChatError(400, f"Unknown monitor {unknown[0]!r} in soma.monitors: this server runs "
                        f"{', '.join(monitors) or 'no monitors'}.", param="soma.monitors", code="unknown_monitor")
    stray = [m for m in (options.thresholds or {}) if m not in chosen] if options else []
    if stray:
        raise ChatError(400, f"soma.thresholds names {stray[0]!r}, which is not a monitor of this run "
                        f"({', '.join(chosen)}).", param="soma.thresholds", code="unknown_monitor")
    return chosen


def run_messages(request: ChatRequest) -> list[dict[str, str]]:
    """The conversation as the Supervisor takes it: role and plain text (OpenAI's newer ``developer``
    role is a system message to every chat template)."""
    return [{"role": "system" if m.role == "developer" else m.role, "content": m.text} for m in request.messages]


def check_context(prompt_tokens: int, limit: int | None, context: int) -> None:
    if prompt_tokens >= context:
        raise ChatError(400, f"This model's maximum context length is {context} tokens, and the messages take "
                        f"{prompt_tokens} tokens (with the chat template and soma's system prompt), leaving no room "
                        "to think or answer. Shorten the messages.", param="messages", code="context_length_exceeded")
    if limit is not None and prompt_tokens + limit > context:
        raise ChatError(400, f"This model's maximum context length is {context} tokens. However, you requested "
                        f"{prompt_tokens + limit} tokens ({prompt_tokens} in the messages, {limit} in the completion). "
                        f"Lower max_tokens to at most {context - prompt_tokens}.", param="max_tokens",
                        code="context_length_exceeded")
