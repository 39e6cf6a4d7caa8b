"""Text cues (pure): one number per name, read over the reader's window, moved by what the rubric names."""

from soma_local.s1.cues import NAMES, WINDOW_CHARS, text_cues, window


def cue(text: str, name: str) -> float:
    return text_cues(text)[NAMES.index(name)]


def test_one_value_per_name_and_empty_text_is_fine():
    assert len(text_cues("")) == len(NAMES) == len(set(NAMES))
    assert all(v == v for v in text_cues(""))  # no NaN


def test_window_keeps_the_newest_text_from_a_line_break():
    text = "old line\n" * 2000 + "newest"
    cut = window(text)
    assert len(cut) <= WINDOW_CHARS and cut.endswith("newest") and cut.startswith("old line")
    assert window("short") == "short"


def test_a_restated_result_and_rechecks_after_it_are_counted():
    fresh = "We need the total. Let me set up the equation."
    confirmed = "So the total is 14. Let me verify: 7 * 2 = 14. Wait, let me double-check once more, total is 14."
    assert cue(confirmed, "result_repeats") > cue(fresh, "result_repeats")
    assert cue(confirmed, "recheck_after_second") > 0 == cue(fresh, "recheck_after_second")
    assert cue(confirmed, "result_in_last500") == 1.0


def test_a_doubt_then_an_assumption_differs_from_a_doubt_then_giving_up():
    assuming = "The problem doesn't say how many she had. Let's assume she had 10."
    giving_up = "The problem doesn't say how many she had, so it cannot be determined."
    assert cue(assuming, "attempt_after_doubt") > cue(giving_up, "attempt_after_doubt")
    assert cue(giving_up, "give_up_after_doubt") > cue(assuming, "give_up_after_doubt")


def test_a_doubt_beyond_the_window_is_not_seen():
    old = "The problem doesn't say the price.\n" + "x = x + 1\n" * (WINDOW_CHARS // 10 + 10)
    assert cue(old, "doubt_all") == 0.0
