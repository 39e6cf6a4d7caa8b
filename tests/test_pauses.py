"""The scan schedule is defined once (``engine.pauses``) and it is the live loop's: replayed over a
text's token pieces it pauses exactly where ``Session.think_to_pause`` pauses on the same tokens."""

import random

from soma_local.engine.pauses import PauseRule, cut_offsets, pause_cuts, pause_points
from soma_local.engine.session import Session
from soma_local.s2.formats import Prompt, ThinkingFormat
from toy_runtime import ToyS2

NEVER_CLOSES = ThinkingFormat("prompted", close="</never>")


def _pieces(layout: str) -> list[bytes]:
    """One token per character: 'n' is a token holding a line break, '.' any other token."""
    return [b"x\n" if c == "n" else b"ab" for c in layout]


def live_pauses(pieces: list[bytes], rule: PauseRule) -> list[int]:
    """Where the live loop pauses on a toy S2 that writes these pieces, in thinking tokens."""
    session = Session(ToyS2(pieces), NEVER_CLOSES)
    session.start(Prompt((("q", True),)))
    out = []
    while not session.think_to_pause(rule).ended:
        out.append(session.tokens.thinking)
    return out


def test_pauses_follow_the_live_schedule():
    rule = PauseRule(interval=4, slack=3)
    # interval 4, then the next line-break token within 3 (index 5 -> pause after 6 tokens);
    # from 6: 4 more = 10, no line break in 10..12 -> pause at 13; from 13: 17 >= 16 tokens -> no pause.
    layout = "....." + "n" + "...." + "..." + "..."
    assert pause_points(_pieces(layout), rule) == [6, 13]
    # A stretch that runs into the end of thinking closes it: no pause there.
    assert pause_points(_pieces("......"), rule) == []
    # A line break as the last thinking token still pauses (the live loop stops at it first).
    assert pause_points(_pieces("....n"), rule) == [5]


def test_the_interval_th_token_never_ends_the_wait_for_a_line_break():
    # The 4th token holds a line break, but the live loop only starts looking after it: the pause is
    # at the next line break (token 7), not after token 4. The old training cutter paused at 4.
    layout = "...n..n....."
    assert pause_points(_pieces(layout), PauseRule(interval=4, slack=8)) == [7]
    assert live_pauses(_pieces(layout), PauseRule(interval=4, slack=8)) == [7]


def test_replayed_pauses_equal_the_live_loops_on_random_layouts():
    rng = random.Random(0)
    for _ in range(300):
        layout = "".join(rng.choice("n....") for _ in range(rng.randrange(5, 90)))
        rule = PauseRule(interval=rng.randrange(1, 9), slack=rng.randrange(0, 6))
        assert pause_points(_pieces(layout), rule) == live_pauses(_pieces(layout), rule), (layout, rule)


def test_cuts_are_the_text_up_to_each_pause():
    pieces = [b"ab", b"c\n", "é".encode(), b"d"]
    assert cut_offsets(pieces, [1, 3, 4]) == [2, 6, 7]
    text = b"".join(pieces).decode()
    assert pause_cuts(text, pieces, PauseRule(interval=1, slack=1)) == ([2, 4], ["abc\n", "abc\néd"])
