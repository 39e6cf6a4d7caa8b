"""Rule labels from a trace's structure: soft P(statement holds) at a cut, with no model involved.

DESIGN.md ("Where S1 labels come from") explains why: the gold set is too small to train on and the
local LLM readouts are no better than chance, so labels at scale come from what the text shows.
Each rule reads only the thinking up to the cut (plus, for overthinking, the answer the trace finally
gave, to know which value to look for), like the gold reader who judges only the visible text.

Overthinking: the final answer's first appearance, its restatement (reached and confirmed), and a
re-check phrase after that. Unanswerable: the first voiced doubt about missing or contradictory
information, and whether an assumption or another attempt at a definite answer follows it.
"""

from __future__ import annotations

import re

from soma_local.calibration.recorded import RecordedTrace
from soma_local.s1.cues import ATTEMPT, BOXED, DOUBT, RECHECK

# Soft labels: a rule is evidence, not certainty, so no label is 0 or 1 (keeps the head calibrated).
LOW, UNSURE, LEAN, HIGH = 0.05, 0.3, 0.65, 0.9

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def final_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (brace-matched), or None."""
    starts = [m.end() for m in BOXED.finditer(text)]
    if not starts:
        return None
    i = start = starts[-1]
    depth = 1
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1].strip() if depth == 0 else None


def final_answer(trace: RecordedTrace) -> str | None:
    """The answer a trace ended on, the value the overthinking rule looks for: its last boxed answer
    after thinking, else in its thinking, else the gold one."""
    return final_boxed(trace.answer or "") or final_boxed(trace.thinking) or trace.gold


def answer_pattern(answer: str) -> re.Pattern[str] | None:
    """How the answer would appear in running text: a number with its own boundaries, or the literal."""
    answer = answer.strip().strip("$").replace("\\dfrac", "\\frac").replace("\\!", "").strip()
    if not answer or "know" in answer.lower():
        return None
    if _NUMBER.match(answer.replace(",", "")):
        value = answer.replace(",", "")
        if "." in value:
            value = value.rstrip("0").rstrip(".")
        # Thousands separators and trailing ".0" are common in the traces.
        digits = re.escape(value).replace(r"\-", "-")
        return re.compile(rf"(?<![\d.]){digits}(?:\.0+)?(?![\d]|\.\d)")
    if len(answer) < 2:
        return None
    return re.compile(re.escape(answer))


def overthinking_label(thinking_so_far: str, answer: str | None) -> float:
    """P(the final answer is reached, confirmed and still being re-checked) at the end of the text."""
    pattern = answer_pattern(answer) if answer else None
    if pattern is None:
        return LOW
    hits = [m.end() for m in pattern.finditer(thinking_so_far.replace("\\dfrac", "\\frac").replace(",", ""))]
    # Offsets above index the comma-free text; the re-check search below uses the same text.
    text = thinking_so_far.replace("\\dfrac", "\\frac").replace(",", "")
    if not hits:
        return LOW
    if len(hits) < 2:
        return UNSURE
    confirmed = hits[1]
    if RECHECK.search(text, confirmed):
        return HIGH
    return LEAN


def unanswerable_label(thinking_so_far: str) -> float:
    """P(a doubt about missing/contradictory information is voiced and S2 still pushes for an answer)."""
    doubt = DOUBT.search(thinking_so_far)
    if doubt is None:
        return LOW
    if ATTEMPT.search(thinking_so_far, doubt.end()):
        return HIGH
    return LEAN


def rule_label(monitor: str, thinking_so_far: str, final_answer: str | None) -> float:
    if monitor == "overthinking":
        return overthinking_label(thinking_so_far, final_answer)
    if monitor == "unanswerable":
        return unanswerable_label(thinking_so_far)
    raise ValueError(f"no rule labeller for monitor '{monitor}' (rules exist for overthinking, unanswerable)")
