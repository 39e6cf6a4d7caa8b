"""Chat templates and thinking formats.

Native reasoning models (Qwen3, R1 distills) carry ``<think>``/``</think>`` as tokens and mention them
in their chat template. Instruct models are asked to think inside the same tags ("prompted"), which
is how the small embedded models demonstrate the loop. Either way the prompt ends with the opening
tag pre-filled, so thinking starts at the first generated token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, Sequence

from soma_local.errors import ModelFileError

if TYPE_CHECKING:
    from soma_local.s2.base import S2Backend

SOMA_SYSTEM_PROMPT = (
    "While you think, a monitor may insert a <reminder>. When you see one, follow its instruction "
    "briefly inside your reasoning, then continue as you judge best."
)

PROMPTED_THINKING_INSTRUCTION = (
    "Think step by step inside <think> and </think> tags before answering. After </think>, give the "
    "final answer within \\boxed{}."
)

ThinkingMode = Literal["native", "prompted"]
Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    """One turn of a conversation; ``content`` is plain text, whoever wrote it (see ``Prompt``)."""

    role: Role
    content: str


@dataclass(frozen=True)
class ThinkingFormat:
    mode: ThinkingMode
    open: str = "<think>"
    close: str = "</think>"


def detect_thinking(chat_template: str, close_is_single_token: bool) -> ThinkingFormat:
    """Native when the template knows ``<think>`` and ``</think>`` is one token of the vocabulary."""
    native = close_is_single_token and "<think>" in chat_template
    return ThinkingFormat("native" if native else "prompted")


def backend_thinking(backend: S2Backend) -> ThinkingFormat:
    """The thinking format a backend's own chat template and vocabulary imply."""
    return detect_thinking(backend.chat_template or "", backend.is_single_token("</think>"))


def system_prompt(fmt: ThinkingFormat, supervised: bool, extra: str | None = None) -> str | None:
    parts = []
    if fmt.mode == "prompted":
        parts.append(PROMPTED_THINKING_INSTRUCTION)
    if supervised:
        parts.append(SOMA_SYSTEM_PROMPT)
    if extra:
        parts.append(extra)
    return " ".join(parts) if parts else None


@dataclass(frozen=True)
class Prompt:
    """A rendered chat prompt kept in pieces: ``(text, is_template)``.

    Only the chat template's own text may become control tokens (``<|im_start|>``, a native
    ``</think>``); message content (the user's question, a system text, an S1 state with S2's
    reasoning in it) is always tokenized as plain text. Otherwise a question containing
    ``<|im_end|>\n<|im_start|>assistant`` would open a real turn that the model obeys.
    """

    parts: tuple[tuple[str, bool], ...]

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.parts)

    def without_suffix(self, suffix: str) -> "Prompt":
        """The prompt with ``suffix`` removed from the end of its last (template) part."""
        *head, (last, template) = self.parts
        if not (template and last.endswith(suffix)):
            raise ValueError(f"prompt does not end with template text {suffix!r}")
        return Prompt((*head, (last[: len(last) - len(suffix)], True)))


class Tokenizes(Protocol):
    bos_token: str

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]: ...


def prompt_ids(backend: Tokenizes, prompt: Prompt) -> list[int]:
    """Token ids of a prompt: template parts with special tokens parsed, content parts without."""
    add_bos = bool(backend.bos_token) and not prompt.text.startswith(backend.bos_token)
    ids: list[int] = []
    for text, template in prompt.parts:
        if text:
            ids += backend.tokenize(text, special=template, add_bos=add_bos and not ids)
    return ids


# Private-use code points: no template writes them, so they mark exactly where content went.
_MARK = "\ue000{}\ue001"
_MARKS = re.compile("\ue000(\\d+)\ue001")


def with_system(system: str | None, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The conversation with the run's system text first: merged into a leading system message (most
    chat templates take one system message, at the start), else as one of its own."""
    messages = list(messages)
    if not system:
        return messages
    if messages and messages[0].role == "system":
        return [ChatMessage("system", f"{system}\n\n{messages[0].content}"), *messages[1:]]
    return [ChatMessage("system", system), *messages]


def render_prompt(
    chat_template: str | None,
    *,
    model_path: str,
    messages: Sequence[ChatMessage],
    fmt: ThinkingFormat,
    bos_token: str = "",
    eos_token: str = "",
) -> Prompt:
    """Apply the GGUF's chat template to a conversation that ends with the user's message, and pre-fill
    the opening thinking tag.

    The template is rendered with a marker in place of each message's content, then the markers
    are replaced by the content as separate plain-text parts (see ``Prompt``)."""
    if not chat_template:
        raise ModelFileError(
            f"{model_path}: the GGUF has no chat template (metadata 'tokenizer.chat_template'); "
            "pass one with --chat-template FILE"
        )
    if not messages or messages[-1].role != "user":
        raise ValueError("a prompt's conversation ends with the user's message")
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(
        template=chat_template, eos_token=eos_token, bos_token=bos_token, add_generation_prompt=True
    )
    marked = [{"role": m.role, "content": _MARK.format(i)} for i, m in enumerate(messages)]
    try:
        rendered = formatter(messages=marked).prompt
    except Exception as exc:  # jinja2 errors carry no file name
        raise ModelFileError(f"{model_path}: chat template failed to render: {exc}") from None
    pieces = _MARKS.split(rendered)  # template, index, template, index, ..., template
    placed = set(pieces[1::2])
    if any(str(i) not in placed for i, m in enumerate(messages) if m.role == "user"):
        raise ModelFileError(f"{model_path}: the chat template does not place every user message")
    parts = [(piece, True) if i % 2 == 0 else (messages[int(piece)].content, False) for i, piece in enumerate(pieces)]
    last = parts[-1][0]
    stripped = last.rstrip()
    if stripped.endswith(fmt.open):
        parts[-1] = (stripped + "\n", True)
    else:
        parts[-1] = (last + fmt.open + "\n", True)
    return Prompt(tuple(parts))


def prompt_for(backend: S2Backend, user: str | Sequence[ChatMessage], *, fmt: ThinkingFormat,
               system: str | None = None) -> Prompt:
    """The prompt ``backend`` reads for ``user`` (a question, or a conversation ending with the user's
    message) after the ``system`` text: its own chat template and bos/eos texts, errors named after it.
    Every prompt a backend is given (a supervised run, a baseline, the LLM-judge S1's prompt, a
    benchmark) is rendered here, so it depends only on the backend, the messages and the format."""
    messages = [ChatMessage("user", user)] if isinstance(user, str) else user
    return render_prompt(
        backend.chat_template,
        model_path=backend.name,
        messages=with_system(system, messages),
        fmt=fmt,
        bos_token=backend.bos_token,
        eos_token=backend.eos_token,
    )
