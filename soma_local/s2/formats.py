"""Chat templates and thinking formats.

Native reasoning models (Qwen3, R1 distills) carry ``<think>``/``</think>`` as tokens and mention them
in their chat template. Instruct models are asked to think inside the same tags ("prompted"), which
is how the small embedded models demonstrate the loop. Either way the prompt ends with the opening
tag pre-filled, so thinking starts at the first generated token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from soma_local.errors import ModelFileError

SOMA_SYSTEM_PROMPT = (
    "While you think, a monitor may insert a <reminder>. When you see one, follow its instruction "
    "briefly inside your reasoning, then continue as you judge best."
)

PROMPTED_THINKING_INSTRUCTION = (
    "Think step by step inside <think> and </think> tags before answering. After </think>, give the "
    "final answer within \\boxed{}."
)

ThinkingMode = Literal["native", "prompted"]


@dataclass(frozen=True)
class ThinkingFormat:
    mode: ThinkingMode
    open: str = "<think>"
    close: str = "</think>"


def detect_thinking(chat_template: str, close_is_single_token: bool) -> ThinkingFormat:
    """Native when the template knows ``<think>`` and ``</think>`` is one token of the vocabulary."""
    native = close_is_single_token and "<think>" in chat_template
    return ThinkingFormat("native" if native else "prompted")


def system_prompt(fmt: ThinkingFormat, supervised: bool, extra: str | None = None) -> str | None:
    parts = []
    if fmt.mode == "prompted":
        parts.append(PROMPTED_THINKING_INSTRUCTION)
    if supervised:
        parts.append(SOMA_SYSTEM_PROMPT)
    if extra:
        parts.append(extra)
    return " ".join(parts) if parts else None


def render_prompt(
    chat_template: str | None,
    *,
    model_path: str,
    user: str,
    system: str | None,
    fmt: ThinkingFormat,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    """Apply the GGUF's chat template and pre-fill the opening thinking tag."""
    if not chat_template:
        raise ModelFileError(
            f"{model_path}: the GGUF has no chat template (metadata 'tokenizer.chat_template'); "
            "pass one with --chat-template FILE"
        )
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(
        template=chat_template, eos_token=eos_token, bos_token=bos_token, add_generation_prompt=True
    )
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user}
    ]
    try:
        prompt = formatter(messages=messages).prompt
    except Exception as exc:  # jinja2 errors carry no file name
        raise ModelFileError(f"{model_path}: chat template failed to render: {exc}") from None
    stripped = prompt.rstrip()
    if stripped.endswith(fmt.open):
        return stripped + "\n"
    return prompt + fmt.open + "\n"
