"""Scoring S2 outputs: abstention (Liu et al. 2026's rule), answer extraction, Math-Verify grading.

Abstention is checked before grading: ``\\boxed{I don't know.}`` does not parse as math, and an
abstention must never count as a wrong numeric answer's lucky match.
"""

from __future__ import annotations

import re

_THINK_CLOSE = "</think>"


def after_thinking(output: str) -> str | None:
    """The text after the first ``</think>``; None when thinking never closed."""
    if _THINK_CLOSE not in output:
        return None
    return output.split(_THINK_CLOSE, 1)[1]


def is_abstention(answer_text: str) -> bool:
    """Liu et al.'s rule on the post-thinking text: "don't know" anywhere, or a ``\\boxed{}`` that
    contains both "don't" and "know". Curly apostrophes count too (models write both)."""
    text = answer_text.lower().replace("\u2019", "'")
    if "don't know" in text:
        return True
    return any("don't" in box and "know" in box for box in boxed_contents(text))


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{...}`` / ``\\fbox{...}``, braces matched, in order."""
    out = []
    for match in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[match.end() : i - 1])
    return out


_ANSWER_IS = re.compile(r"(?:final answer|answer)\s*(?:is|:)\s*\$?([^\n$]+?)\$?\s*(?:\.|$)", re.I | re.M)


def extract_answer(text: str) -> str | None:
    """The last stated answer: the last ``\\boxed{}``, else the last "answer is X"."""
    boxes = boxed_contents(text)
    if boxes:
        return boxes[-1].strip()
    matches = _ANSWER_IS.findall(text)
    return matches[-1].strip() if matches else None


def grade(gold: str, answer: str | None) -> bool:
    """Math-Verify, gold first (``verify`` is asymmetric). Safe in threads (no signal timeouts)."""
    if answer is None or not answer.strip():
        return False
    import logging

    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    # Timeouts are off on purpose (signals do not work in threads); its warning about that is noise.
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    config = [LatexExtractionConfig(), ExprExtractionConfig()]
    gold_parsed = parse(f"${gold}$", extraction_config=config, parsing_timeout=None)
    pred_parsed = parse(f"${answer}$", extraction_config=config, parsing_timeout=None)
    if not gold_parsed or not pred_parsed:
        return _normalise(gold) == _normalise(answer)
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=None))


def _normalise(text: str) -> str:
    return re.sub(r"[\s$]|\\text\{|\}|\\!|,", "", text).lower()


def judge(answer_text: str, gold: str | None) -> tuple[bool, bool]:
    """(abstained, correct) for one answer section. ``gold=None`` marks an unanswerable question,
    which no answer gets right; an abstention is never correct."""
    abstained = is_abstention(answer_text)
    correct = not abstained and gold is not None and grade(gold, extract_answer(answer_text))
    return abstained, correct
