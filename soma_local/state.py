"""The S1 state: ``Task: Q\n\nReasoning so far: H`` cut to the S1's input limit (paper A.2).

The task is always kept whole and the OLDEST reasoning is dropped, because what S1 must judge is what
S2 is doing now. Room for the longest monitor statement is reserved so every monitor of a pause sees
the same state. Reminders never enter H: the caller passes only S2's own thinking.
"""

from __future__ import annotations

from typing import Protocol, Sequence

PREFIX = "Task: {task}\n\nReasoning so far: "


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


def build_state(
    task: str,
    reasoning: str,
    tokenizer: TokenCounter,
    limit: int,
    reserve: int = 0,
) -> str:
    """Format the state, keeping the task and as much of the newest reasoning as fits.

    ``limit`` is the S1 input limit in tokens and ``reserve`` the room kept for the statement (and any
    template tokens the S1 adds). If the task alone does not fit, the task is still kept whole and the
    reasoning is dropped entirely: cutting the question would make S1 judge a different problem.
    """
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
