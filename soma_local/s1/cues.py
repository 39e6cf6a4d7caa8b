"""Text cues: what a reader of the whole reasoning notices, as numbers a linear head can weigh.

The encoder reads only the newest 512 tokens (about 2,000 characters); the reader whose labels an S1
learns from judges up to 7,000, and both monitor statements have a first part that may lie far back
("has already reached and confirmed a final answer", "has noticed that the problem may be missing
information"). Counting phrases over the whole window, and over its newest parts, carries that part
at no model cost: on held-out reader labels these cues alone rank states about as well as the
fine-tuned encoder (``s1_models/minilm-reader/README.md`` has the figures), and the two together better.

Pure functions of the text, no I/O. A released S1 names the cue set it was trained on
(``CUE_SET``); changing any pattern, window or cue here means a new name, so an old head never
weighs cues it was not fitted to.
"""

from __future__ import annotations

import math
import re
from collections import Counter

CUE_SET = "cues-v1"
WINDOW_CHARS = 7000  # what the gold reader sees of H: its last 7,000 characters, cut at a line break
TAILS = (2000, 1000, 500)  # the newest parts, in characters: what is going on at the present moment

RECHECK = re.compile(
    r"let me (?:double[- ]?)?check|double[- ]check|verify|let me make sure|let me confirm|re-?examine"
    r"|another way|alternatively|let me think again|let me re-?(?:calculate|compute|do|read)|just to be sure"
    r"|wait,|but wait|hold on|is there (?:any|another)",
    re.I,
)
DOUBT = re.compile(
    r"doesn'?t (?:say|specify|mention|give|tell|state)|does not (?:say|specify|mention|give|tell|state)"
    r"|(?:isn'?t|is not|aren'?t|are not|wasn'?t|not) (?:given|specified|mentioned|provided|stated)"
    r"|missing|insufficient|not enough information|without (?:knowing|more information|that information)"
    r"|no information|can'?t (?:be )?(?:determine|answer|know|compute|find|solve)|cannot (?:be )?(?:determine|answer|know|compute|find|solve)"
    r"|unsolvable|contradict|inconsisten|ambiguous|unclear|lacks?|don'?t know (?:the|how many|what)",
    re.I,
)
ATTEMPT = re.compile(
    r"\bassum(?:e|ing|ption)|let'?s say|suppose|maybe the problem|perhaps the problem|maybe (?:it|they|there|i|we)"
    r"|perhaps (?:it|they|there|i|we)|typo|meant to|intended|the answer (?:is|would be)|so the answer",
    re.I,
)
# A re-check that names what worries it is not overthinking (LABELLING.md).
CONCERN = re.compile(
    r"mistake|wrong|error|incorrect|miscalculat|misread|typo|that can'?t be|doesn'?t make sense|not possible"
    r"|impossible|negative",
    re.I,
)
# Concluding that it cannot be answered is not "still trying" (LABELLING.md).
GIVE_UP = re.compile(
    r"cannot be (?:determined|answered|solved)|can'?t be (?:determined|answered|solved)|not enough information to"
    r"|insufficient information|impossible to (?:determine|answer)|no way to (?:determine|know)"
    r"|the answer is (?:that )?(?:it )?(?:cannot|can'?t)|i don'?t know|unanswerable",
    re.I,
)
BOXED = re.compile(r"\\boxed\{")
FINAL = re.compile(r"final answer|\*\*answer|so the answer|therefore, the answer|thus, the answer|the answer is", re.I)
HESITATE = re.compile(r"\bwait\b|\bhmm\b|\bactually\b", re.I)
CONFIRM = re.compile(
    r"that (?:checks out|matches|makes sense|seems right|seems correct|'s correct|is correct|confirms)"
    r"|same (?:answer|result)|consistent|i'?m confident|seems solid|double-checked|confirmed",
    re.I,
)
# A number stated as a result ("the answer is 12", "= 12", "total is $12"): the candidate answer is the
# one stated most often, and its second statement is where it was confirmed.
RESULT = re.compile(
    r"(?:answer is|answer would be|answer:|total is|\\boxed\{|=|equals|is|are|gets?|makes?|has|have|earns?"
    r"|costs?|pays?|needs?|left|remain\w*)\s*:?\s*\**\$?\\?\$?(-?\d[\d,]*(?:\.\d+)?)",
    re.I,
)

PATTERNS = {"recheck": RECHECK, "doubt": DOUBT, "attempt": ATTEMPT, "concern": CONCERN, "give_up": GIVE_UP,
            "boxed": BOXED, "final": FINAL, "hesitate": HESITATE, "confirm": CONFIRM}


def window(reasoning: str, limit: int = WINDOW_CHARS) -> str:
    """The last ``limit`` characters of the reasoning, starting after a line break when it had to be cut."""
    if len(reasoning) <= limit:
        return reasoning
    tail = reasoning[-limit:]
    nl = tail.find("\n")
    return tail[nl + 1 :] if nl >= 0 else tail


def _names() -> tuple[str, ...]:
    names = ["log_chars"]
    for p in PATTERNS:
        names += [f"{p}_all", *(f"{p}_last{t}" for t in TAILS), f"{p}_chars_since"]
    names += ["result_repeats", "result_chars_since_first", "result_chars_since_second", "recheck_after_second",
              "hesitate_after_second", "result_in_last500", "result_in_last2000", "result_count_last2000",
              "doubt_chars_since_first", "attempt_after_doubt", "give_up_after_doubt"]
    return tuple(names)


NAMES = _names()


def _log_count(pattern: re.Pattern[str], text: str) -> float:
    return math.log1p(len(pattern.findall(text)))


def _log_since_last(pattern: re.Pattern[str], text: str) -> float:
    """log of the characters since the pattern last matched (a long way back when it never did)."""
    ends = [m.end() for m in pattern.finditer(text)]
    return math.log1p(len(text) - ends[-1] if ends else len(text) + TAILS[0])


def text_cues(reasoning: str) -> list[float]:
    """The cues of one reasoning (``NAMES`` in order), over its last ``WINDOW_CHARS`` characters."""
    r = window(reasoning)
    n = len(r)
    out = [math.log1p(n)]
    for pattern in PATTERNS.values():
        out += [_log_count(pattern, r), *(_log_count(pattern, r[-t:]) for t in TAILS), _log_since_last(pattern, r)]
    results = [(m.group(1).replace(",", ""), m.end()) for m in RESULT.finditer(r)]
    if results:
        top, repeats = Counter(v for v, _ in results).most_common(1)[0]
        at = [end for v, end in results if v == top]
        second = at[1] if len(at) > 1 else n
        after = r[second:]
        out += [math.log1p(repeats), math.log1p(n - at[0]), math.log1p(n - second), _log_count(RECHECK, after),
                _log_count(HESITATE, after), float(top in r[-500:]), float(top in r[-2000:]),
                math.log1p(r[-2000:].count(top))]
    else:
        out += [0.0] * 8
    doubt = DOUBT.search(r)
    if doubt:
        after = r[doubt.end() :]
        out += [math.log1p(n - doubt.end()), _log_count(ATTEMPT, after), _log_count(GIVE_UP, after)]
    else:
        out += [0.0] * 3
    return out
