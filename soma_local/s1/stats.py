"""Statistics of a whole S1 state that no statement names: how much it repeats itself, how long it is,
how many lines read like an answer, how much of it still speaks of the task.

An encoder reads a window of tokens and is poor at counting: a verbatim loop of one line looks to it
like any other arithmetic, and whether the newest lines share words with the task is spread over the
whole row. These numbers say it directly, for a monitor adapter (``soma_local.s1.adapter``) to weigh
against the S1's own logit. Pure functions of the text, no I/O. ``STATS_SET`` names this exact set:
changing any statistic here means a new name, so an adapter never weighs numbers it was not fitted to.
"""

from __future__ import annotations

import math
import re
from collections import Counter

STATS_SET = "stats-v1"
WINDOW_CHARS = 7000  # as the text cues: the part of the reasoning a reader of the state judges
RECENT_CHARS = 1500  # "now": the newest part, where a loop or a drift shows

_WORD = re.compile(r"[A-Za-z]{3,}|\d+(?:\.\d+)?")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_ANSWER_LINE = re.compile(r"answer|\\boxed|therefore|thus|so the|=\s*\$?-?\d[\d,.]*\s*\W*$", re.I)
_STOP = frozenset("the and that this with for are was were has have had not but you your its from then than "
                  "there their they them what which will would could should how many much each into also only "
                  "let's let just now some more most other".split())

NAMES = (
    "log_chars", "log_lines",
    "repeated_lines_share", "recent_repeated_lines_share", "log_top_line_count", "recent_distinct_lines_share",
    "recent_repeated_6grams_share", "recent_repeated_12grams_share",
    "log_answer_lines", "log_recent_answer_lines", "log_distinct_answer_numbers",
    "recent_task_word_share", "task_word_share", "recent_number_share", "recent_non_ascii_share",
)


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()).lower() for line in text.splitlines() if len(line.strip()) >= 8]


def _repeated_share(items: list, before: Counter) -> float:
    """The share of ``items`` already seen: in ``before`` or earlier in ``items`` itself."""
    if not items:
        return 0.0
    seen, repeats = Counter(before), 0
    for item in items:
        repeats += seen[item] > 0
        seen[item] += 1
    return repeats / len(items)


def _grams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def _content_words(text: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOP]


def _word_share(words: list[str], vocabulary: set[str]) -> float:
    return sum(w in vocabulary for w in words) / len(words) if words else 0.0


def state_stats(task: str, reasoning: str) -> list[float]:
    """The statistics of one state (``NAMES`` in order), over the last ``WINDOW_CHARS`` of its reasoning."""
    text = reasoning[-WINDOW_CHARS:]
    cut = max(0, len(text) - RECENT_CHARS)
    older, recent = text[:cut], text[cut:]
    lines, recent_lines = _lines(text), _lines(recent)
    counts = Counter(lines)
    words, older_words = _content_words(recent), _content_words(older)
    out = [math.log1p(len(text)), math.log1p(len(lines)),
           _repeated_share(lines, Counter()),
           _repeated_share(recent_lines, Counter(_lines(older))),
           math.log1p(max(counts.values(), default=0)),
           len(set(recent_lines)) / len(recent_lines) if recent_lines else 1.0]
    for n in (6, 12):
        out.append(_repeated_share(_grams(words, n), Counter(_grams(older_words, n))))
    answer_lines = [line for line in text.splitlines() if _ANSWER_LINE.search(line)]
    numbers = {m.group(0).replace(",", "") for line in answer_lines for m in _NUMBER.finditer(line)}
    out += [math.log1p(len(answer_lines)),
            math.log1p(sum(bool(_ANSWER_LINE.search(line)) for line in recent.splitlines())),
            math.log1p(len(numbers))]
    task_words = set(_content_words(task))
    out += [_word_share(words, task_words), _word_share(older_words + words, task_words),
            sum(c.isdigit() for c in recent) / max(len(recent), 1),
            sum(ord(c) > 127 for c in recent) / max(len(recent), 1)]
    return out
