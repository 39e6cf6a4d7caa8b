"""What S1 reads as the task of a run: the question, or for a conversation its last user message with
the turns before it kept as context.

S1 judges what S2 is doing about the request in front of it, so the last user message is the task. The
earlier turns can change what that request means ("and for 12?"), so they go before it, as a transcript.
System messages are instructions to S2, not part of the task, and are left out. A long conversation is
cut the way any long task is (``S1.task_cut``: its beginning and its end kept, the middle left out), so
the last message survives whole unless it alone is too long. A conversation of one user message gives
exactly that message, so it is the same run as the question alone.
"""

from __future__ import annotations

from typing import Sequence, Union

from soma_local.s2.formats import ChatMessage

# A question, or a conversation that ends with the user's message.
Task = Union[str, Sequence[ChatMessage]]

SPEAKERS = {"user": "User", "assistant": "Assistant"}


def s1_task(question: Task) -> str:
    """The task text S1 reads (and the trace records as the run's question)."""
    if isinstance(question, str):
        return question
    turns = [m for m in question if m.role != "system"]
    if len(turns) == 1:
        return turns[0].content
    return "\n\n".join(f"{SPEAKERS[m.role]}: {m.content}" for m in turns)
