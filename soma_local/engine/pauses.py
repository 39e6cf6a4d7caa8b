"""The scan schedule (paper A.2), defined once: the live loop, trace replay and S1 training all pause here.

After ``interval`` thinking tokens S2 runs on to the next token that holds a line break and pauses
after it; if none comes within ``slack`` more tokens it pauses after those. The ``interval``-th token
itself never ends the wait for a line break: the live loop generates ``interval`` tokens first and only
then starts looking. ``pause_points`` replays that rule over a finished text's token pieces, so replay
scores, and the S1 trains on, exactly the states the live loop shows S1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class PauseRule:
    """Pause after ``interval`` thinking tokens at the next line break, or ``slack`` tokens later."""

    interval: int = 256
    slack: int = 128

    def __post_init__(self) -> None:
        if self.interval <= 0 or self.slack < 0:
            raise ValueError("scan interval must be > 0 and line-break slack >= 0")


def pause_points(pieces: Sequence[bytes], rule: PauseRule = PauseRule()) -> list[int]:
    """Thinking-token counts at which the live loop would pause on a text with these token pieces.

    Where a stretch reaches the end of the text, the next token the loop asks for closes thinking (S1
    stops scanning then), so there is no pause; a stretch that ends exactly at the end of the text, with
    no token left to ask for, still pauses there.
    """
    n, pos, out = len(pieces), 0, []
    while True:
        start = pos + rule.interval
        if start > n or (start == n and rule.slack > 0):
            return out
        newline = next((j for j in range(start, min(start + rule.slack, n)) if b"\n" in pieces[j]), None)
        if newline is not None:
            pos = newline + 1
        elif rule.slack == 0:
            pos = start
        elif start + rule.slack <= n:
            pos = start + rule.slack
        else:
            return out
        out.append(pos)


def cut_offsets(pieces: Sequence[bytes], points: Sequence[int]) -> list[int]:
    """Byte offsets into the text at the given token counts."""
    offsets, total, i = [], 0, 0
    for point in points:
        while i < point:
            total += len(pieces[i])
            i += 1
        offsets.append(total)
    return offsets


def pause_cuts(text: str, pieces: Sequence[bytes], rule: PauseRule = PauseRule()) -> tuple[list[int], list[str]]:
    """The token count at each pause and the text up to it: what S1 reads there."""
    points = pause_points(pieces, rule)
    raw = text.encode("utf-8")
    return points, [raw[:offset].decode("utf-8", errors="replace") for offset in cut_offsets(pieces, points)]
