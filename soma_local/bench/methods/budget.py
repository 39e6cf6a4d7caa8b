"""Budget forcing (Muennighoff et al., 2025), as a sweep over thinking budgets in one run.

Cutting thinking at B tokens does not change anything S2 wrote before B, and branches leave the
sampler untouched, so one run that produces the forced answer on a branch at every budget of the grid
gives the outcome under each budget exactly: where thinking ended before B, BF at B is the plain run.
The budget itself is chosen on the calibration sets (``bench.score.choose_budget``).
"""

from __future__ import annotations

from soma_local.bench.methods.base import Harness, Method, Outcome, conclude, finish, outcome_of
from soma_local.engine.monitors import Monitor
from soma_local.engine.pauses import PauseRule

# s1's forced end ("...thinking_end + '\nFinal Answer:'"), mapped to </think> for Qwen3 / R1 distills.
FORCED_PREFILL = "Final Answer:"


class BudgetForcing(Method):
    name = "budget_forcing"

    def __init__(self, budgets: list[int], answer_tokens: int = 512):
        if not budgets or any(b <= 0 for b in budgets):
            raise ValueError("budget forcing needs positive budgets")
        self.budgets = sorted(set(budgets))
        self.answer_tokens = answer_tokens

    def run(self, prompt: str, monitor: Monitor, harness: Harness) -> Outcome:
        session = harness.session(prompt)
        forced = []
        stop = None
        for budget in self.budgets:
            need = budget - session.tokens.thinking
            if need <= 0 or budget >= harness.max_tokens:
                break
            stop = conclude(session, session.think_to_pause(PauseRule(interval=need, slack=0)))
            if stop:
                break
            room = min(self.answer_tokens, harness.max_tokens - budget)
            result = session.branch_takeover("", FORCED_PREFILL, room)
            forced.append({"budget": budget, "text": result.text, "generated": result.generated})
        if stop is None:
            stop = finish(session)
        return outcome_of(session, stop, forced=forced)

    def settings(self) -> dict:
        return {"budgets": self.budgets, "answer_tokens": self.answer_tokens}
