"""From result lines to per-question points, at any operating point a sweep recorded.

Abstention is checked before grading (DESIGN.md). Tokens follow the paper's accounting: thinking +
answer + anything extra a method generated (probes). The sweeps (SOMA readout, budget forcing,
Dynasor) carry every operating point in one run; reading one off counts only what that operating
point would have generated, never the other points' branches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from soma_local.bench.methods.dynasor import EXIT_CONCLUSION, exit_prefill
from soma_local.bench.results import ResultLine
from soma_local.scoring import extract_answer, grade, is_abstention


@dataclass(frozen=True)
class Point:
    """One question under one method setting."""

    id: str
    benchmark: str
    answerable: bool
    correct: bool  # answerable and right (never for an abstention)
    abstained: bool
    tokens: int

    @property
    def success(self) -> bool:
        """Right answer where there is one, abstention where there is none."""
        return self.correct if self.answerable else self.abstained


def judge(line: ResultLine, answer_text: str, tokens: int) -> Point:
    abstained = is_abstention(answer_text)
    correct = False
    if line.answerable and not abstained and line.gold is not None:
        answer = extract_answer(answer_text)
        if line.choices:
            correct = answer is not None and answer.strip().strip("()").upper() == line.gold.strip().upper()
        else:
            correct = grade(line.gold, answer)
    return Point(line.id, line.benchmark, line.answerable, correct, abstained, tokens)


def main_line_tokens(line: ResultLine) -> int:
    """What the run itself generated, without the sweep's branches."""
    t = line.outcome.tokens
    return t.thinking + t.answer


def plain(line: ResultLine) -> Point:
    """Methods whose run is their result (vanilla, DEER, SES, prompts, no-reminder)."""
    return judge(line, line.outcome.answer, line.outcome.tokens.generated)


# ---- SOMA: the single-run readout ---------------------------------------------------------------
def soma_at(line: ResultLine, h: float) -> Point:
    """SOMA at threshold h from a ``mode="readout"`` trace: the takeover happens at the first
    post-reminder pause whose evidence S reaches h, and its continuation is the branch recorded there.
    h = infinity is remind-only. (Local stand-in: switch to ``soma_local.readout`` once merged.)"""
    records = line.outcome.records
    scores = {r["index"]: r["monitors"] for r in records if r["type"] == "scan"}
    for r in records:
        if r["type"] == "branch" and scores[r["scan_index"]][r["monitor"]]["score"] >= h:
            return judge(line, r["text"], r["thinking_tokens"] + r["generated_tokens"])
    return judge(line, line.outcome.answer, main_line_tokens(line))


# ---- budget forcing -----------------------------------------------------------------------------
def budget_at(line: ResultLine, budget: int | None) -> Point:
    """Budget forcing at ``budget`` thinking tokens (None: no forcing, the plain run)."""
    for forced in line.outcome.extras.get("forced", []):
        if forced["budget"] == budget:
            return judge(line, forced["text"], budget + forced["generated"])
    return judge(line, line.outcome.answer, main_line_tokens(line))


# ---- Dynasor-CoT ------------------------------------------------------------------------------
def dynasor_at(line: ResultLine, interval: int, k: int, same: Callable[[str, str], bool] | None = None) -> Point:
    """Dynasor-CoT probing every ``interval`` tokens, exiting on ``k`` agreeing, certain answers."""
    same = same or (lambda a, b: a == b or grade(a, b))
    probes = [p for p in line.outcome.extras.get("probes", []) if p["thinking_tokens"] % interval == 0]
    spent = 0
    for j, p in enumerate(probes):
        spent += p["generated"]
        window = probes[j - k + 1 : j + 1] if j + 1 >= k else []
        if window and all(w["answer"] and w["certain"] for w in window) and all(
            same(window[0]["answer"], w["answer"]) for w in window[1:]
        ):
            text = f"{EXIT_CONCLUSION}</think>\n{exit_prefill(p['answer'])}"
            return judge(line, text, p["thinking_tokens"] + spent)
    return judge(line, line.outcome.answer, main_line_tokens(line) + spent)


# ---- aggregation and the choice of parameters on the calibration sets ------------------------
@dataclass(frozen=True)
class Summary:
    n: int
    n_answerable: int
    n_unanswerable: int
    acc: float  # on answerable questions
    fa: float  # false abstention on answerable questions
    abs: float  # abstention on unanswerable questions
    tokens: float
    success: float

    @classmethod
    def of(cls, points: Sequence[Point]) -> "Summary":
        ans = [p for p in points if p.answerable]
        una = [p for p in points if not p.answerable]
        mean = lambda xs: sum(xs) / len(xs) if xs else math.nan
        return cls(
            n=len(points),
            n_answerable=len(ans),
            n_unanswerable=len(una),
            acc=mean([p.correct for p in ans]),
            fa=mean([p.abstained for p in ans]),
            abs=mean([p.abstained for p in una]),
            tokens=mean([p.tokens for p in points]),
            success=mean([p.success for p in points]),
        )


def choose(options: dict, reference: Sequence[Point], delta: float = 0.0):
    """The calibration rule used for every tuned parameter here: among the options whose success
    rate (accuracy; abstention on unanswerable items) is at least the reference's minus ``delta``,
    the one with the best success rate, then the fewest tokens. ``options`` maps a parameter value to
    its calibration points. (Local rule; SOMA's h should come from ``soma_local.calibrate`` once
    merged.)"""
    floor = Summary.of(reference).success - delta
    scored = [(Summary.of(points), key) for key, points in options.items()]
    allowed = [(s, key) for s, key in scored if s.success >= floor - 1e-12] or scored
    return min(allowed, key=lambda sk: (-sk[0].success, sk[0].tokens))[1]


H_GRID = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
K_GRID = (2, 3, 5)


def calibrate_h(lines: Iterable[ResultLine], delta: float = 0.0) -> float:
    lines = list(lines)
    options = {h: [soma_at(line, h) for line in lines] for h in H_GRID}
    return choose(options, [soma_at(line, math.inf) for line in lines], delta)


def calibrate_budget(lines: Iterable[ResultLine], delta: float = 0.0) -> int | None:
    lines = list(lines)
    budgets = sorted({b for line in lines for b in line.settings["method"].get("budgets", [])})
    options = {b: [budget_at(line, b) for line in lines] for b in budgets}
    return choose(options, [budget_at(line, None) for line in lines], delta) if options else None


def calibrate_dynasor(lines: Iterable[ResultLine], delta: float = 0.0) -> tuple[int, int]:
    lines = list(lines)
    base = lines[0].settings["method"]["interval"]
    options = {
        (base * m, k): [dynasor_at(line, base * m, k) for line in lines] for m in (1, 2, 4) for k in K_GRID
    }
    return choose(options, [judge(line, line.outcome.answer, main_line_tokens(line)) for line in lines], delta)
