"""From result lines to per-question outcomes, at any operating point a sweep recorded.

Abstention is checked before grading (DESIGN.md). Tokens follow the paper's accounting: thinking +
answer + anything extra a method generated (probes). The sweeps (SOMA's readout, budget forcing,
Dynasor) carry every operating point in one run; reading one off counts only what that operating
point would have generated, never the other points' branches. Outcomes are ``metrics.ItemResult``
and h is chosen by ``thresholds.choose_threshold``, the function ``soma calibrate`` and ``soma replay``
choose it with; the baselines' parameters by the paper's point rule (``thresholds.choose_setting``).
"""

from __future__ import annotations

import math
from typing import Callable, Hashable, Iterable, Sequence

from soma_local.bench.methods.dynasor import EXIT_CONCLUSION, exit_prefill
from soma_local.bench.results import ResultLine
from soma_local.calibration.selection import Selection
from soma_local.calibration.thresholds import H_GRID, Choice, Objective, choose_setting, choose_threshold
from soma_local.calibration.metrics import ItemResult, summarize
from soma_local.calibration.readout import ReadoutRun
from soma_local.calibration.scoring import extract_answer, grade, is_abstention
from soma_local.engine.trace import parse_record


def judge(line: ResultLine, answer_text: str, tokens: int, takeover: bool = False) -> ItemResult:
    abstained = is_abstention(answer_text)
    correct = False
    if line.answerable and not abstained and line.gold is not None:
        answer = extract_answer(answer_text)
        if line.choices:
            correct = answer is not None and answer.strip().strip("()").upper() == line.gold.strip().upper()
        else:
            correct = grade(line.gold, answer)
    return ItemResult(id=line.id, answerable=line.answerable, abstained=abstained, correct=correct,
                      tokens=tokens, takeover=takeover)


def main_line_tokens(line: ResultLine) -> int:
    """What the run itself generated, without the sweep's branches."""
    t = line.outcome.tokens
    return t.thinking + t.answer


def plain(line: ResultLine) -> ItemResult:
    """Methods whose run is their result (vanilla, DEER, SES, prompts)."""
    return judge(line, line.outcome.answer, line.outcome.tokens.generated)


# ---- SOMA and the no-reminder ablation: single-run readouts -------------------------------------------
def readout_at(line: ResultLine, h: float) -> ItemResult:
    """The run at threshold h, read off a readout trace (``soma_local.calibration.readout``); h = inf is
    remind-only for ``soma`` lines and vanilla-with-scans for ``no_reminder`` lines."""
    run = ReadoutRun((parse_record(r) for r in line.outcome.records), f"{line.method}/{line.id}")
    off = run.read_off({run.monitors[0]: h})
    return judge(line, off.answer, off.tokens, takeover=off.takeover is not None)


# ---- budget forcing -----------------------------------------------------------------------------
def budget_at(line: ResultLine, budget: int | None) -> ItemResult:
    """Budget forcing at ``budget`` thinking tokens (None: no forcing, the plain run)."""
    for forced in line.outcome.extras.get("forced", []):
        if forced["budget"] == budget:
            return judge(line, forced["text"], budget + forced["generated"], takeover=True)
    return judge(line, line.outcome.answer, main_line_tokens(line))


# ---- Dynasor-CoT ------------------------------------------------------------------------------
def dynasor_at(line: ResultLine, interval: int, k: int, same: Callable[[str, str], bool] | None = None) -> ItemResult:
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
            return judge(line, text, p["thinking_tokens"] + spent, takeover=True)
    return judge(line, line.outcome.answer, main_line_tokens(line) + spent)


# ---- choosing parameters on the calibration sets ------------------------------------------------
K_GRID = (2, 3, 5)


def choose(
    lines: Sequence[ResultLine],
    options: Iterable[Hashable],
    read: Callable[[ResultLine, Hashable], ItemResult],
    reference: Callable[[ResultLine], ItemResult],
    objective: Objective,
):
    """The option whose calibration outcomes are best by ``objective``, against the untuned run."""
    grid = {o: summarize([read(line, o) for line in lines]) for o in options}
    return choose_setting(grid, objective, summarize([reference(line) for line in lines]))


def h_choice(lines: Sequence[ResultLine], objective: Objective, selection: Selection = Selection()) -> Choice:
    """SOMA's (or the no-reminder ablation's) h on the calibration lines, with its evidence."""
    return choose_threshold({h: [readout_at(line, h) for line in lines] for h in (*H_GRID, math.inf)}, objective,
                            selection)


def calibrate_h(lines: Sequence[ResultLine], objective: Objective, selection: Selection = Selection()) -> float:
    return h_choice(lines, objective, selection).threshold


def calibrate_budget(lines: Sequence[ResultLine], objective: Objective) -> int | None:
    budgets = sorted({b for line in lines for b in line.settings["method"].get("budgets", [])})
    if not budgets:
        return None
    return choose(lines, budgets, budget_at, lambda line: budget_at(line, None), objective)


def calibrate_dynasor(lines: Sequence[ResultLine], objective: Objective) -> tuple[int, int]:
    base = lines[0].settings["method"]["interval"]
    options = [(base * m, k) for m in (1, 2, 4) for k in K_GRID]
    return choose(lines, options, lambda line, o: dynasor_at(line, *o),
                  lambda line: judge(line, line.outcome.answer, main_line_tokens(line)), objective)
