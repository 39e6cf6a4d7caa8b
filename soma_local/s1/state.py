"""The S1 state: ``Task: Q\n\nReasoning so far: H`` cut to the S1's input limit (paper A.2).

The OLDEST reasoning is dropped, because what S1 must judge is what S2 is doing now. Room for the
longest monitor statement is reserved so every monitor of a pause sees the same state. Reminders
never enter H: the caller passes only S2's own thinking.

The paper keeps the task whole. We do too, except when the task alone would leave less than
``REASONING_SHARE`` of the budget for the reasoning: the paper's rule would then leave S1 judging
little or none of what S2 is doing (a 200 KB task left it nothing at all). Such a task is cut to the
rest of the budget, keeping its beginning and its end around a mark that says how much was left out,
and the caller is told (``task_cut``) so a run can say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

PREFIX = "Task: {task}\n\nReasoning so far: "
# The share of the state budget a long task must leave to the newest reasoning.
REASONING_SHARE = 1 / 3
CUT_MARK = " [... {n} tokens of the task left out ...] "


class TokenCounter(Protocol):
    """The tokenizer whose units the input limit is measured in."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def format_state(task: str, reasoning: str) -> str:
    return PREFIX.format(task=task) + reasoning


def parse_state(text: str) -> tuple[str, str] | None:
    """(task, reasoning) of a text ``format_state`` wrote, or None for any other text."""
    head, _, tail = PREFIX.partition("{task}")
    if not text.startswith(head) or tail not in text:
        return None
    task, _, reasoning = text[len(head) :].partition(tail)
    return task, reasoning


@dataclass(frozen=True)
class TaskCut:
    """A task too long for the S1 budget: how many of its tokens S1 reads."""

    task_tokens: int
    kept_tokens: int
    budget: int  # tokens for task + reasoning in this S1's state


def _budget(tokenizer: TokenCounter, limit: int, reserve: int) -> int:
    return limit - reserve - len(tokenizer.encode(PREFIX.format(task="")))


def _task_room(budget: int) -> int:
    return int(budget * (1 - REASONING_SHARE))


def task_cut(task: str, tokenizer: TokenCounter, limit: int, reserve: int = 0) -> TaskCut | None:
    """How ``build_state`` will cut this task, or None when it keeps the task whole (the paper's rule)."""
    budget = _budget(tokenizer, limit, reserve)
    n = len(tokenizer.encode(task))
    room = _task_room(budget)
    return TaskCut(n, room, budget) if n > room else None


def _shorten(task: str, tokenizer: TokenCounter, room: int) -> str:
    """The task's beginning and end within ``room`` tokens, around a mark naming what went."""
    ids = tokenizer.encode(task)
    mark = CUT_MARK.format(n=len(ids) - room)
    keep = max(0, room - len(tokenizer.encode(mark)))
    head, tail = keep - keep // 2, keep // 2
    return tokenizer.decode(ids[:head]) + mark + (tokenizer.decode(ids[len(ids) - tail :]) if tail else "")


def build_state(
    task: str,
    reasoning: str,
    tokenizer: TokenCounter,
    limit: int,
    reserve: int = 0,
) -> str:
    """Format the state, keeping the task (whole unless ``task_cut`` says otherwise) and as much of
    the newest reasoning as fits.

    ``limit`` is the S1 input limit in tokens and ``reserve`` the room kept for the statement (and any
    template tokens the S1 adds).
    """
    if task_cut(task, tokenizer, limit, reserve) is not None:
        task = _shorten(task, tokenizer, _task_room(_budget(tokenizer, limit, reserve)))
    head = PREFIX.format(task=task)
    budget = limit - reserve - len(tokenizer.encode(head))
    if budget <= 0 or not reasoning:
        return head
    ids = tokenizer.encode(reasoning)
    if len(ids) <= budget:
        return head + reasoning
    return head + from_boundary(tokenizer.decode(ids[len(ids) - budget :]))


BOUNDARY_REACH = 64  # characters searched for a line or word boundary at a cut


def from_boundary(text: str) -> str:
    """Text cut out of a longer one, begun at its first line or word boundary when one is near.

    Decoding a cut token sequence can start mid-character or mid-word, and S1 should not read a
    fragment as a statement.
    """
    for sep in ("\n", " "):
        cut = text.find(sep)
        if 0 <= cut < BOUNDARY_REACH:
            return text[cut + 1 :]
    return text


def to_boundary(text: str) -> str:
    """``from_boundary`` for the end of a cut: ended at its last line or word boundary when near."""
    for sep in ("\n", " "):
        cut = text.rfind(sep)
        if cut >= 0 and len(text) - cut <= BOUNDARY_REACH:
            return text[:cut]
    return text


def longest_tokens(texts: Sequence[str], tokenizer: TokenCounter) -> int:
    return max((len(tokenizer.encode(t)) for t in texts), default=0)
