"""SOMA through the engine's own loop: the single-run readout, and the no-reminder ablation.

``SomaReadout`` runs ``supervise(mode="readout")`` once: reminders go in, no takeover happens, and
every possible takeover continuation is produced on a branch. Its trace records are kept whole, so
SOMA at any h and remind-only (h = infinity) are read off afterwards (``bench.score``).
``NoReminder`` cannot be read off that way (without reminders S2's text differs), so it is a real
run at a given h.
"""

from __future__ import annotations

from soma_local.bench.methods.base import Engine, Method, Outcome
from soma_local.supervise import RunConfig, supervise
from soma_local.errors import SomaError


def _run(prompt: str, scenario: str, engine: Engine, config: RunConfig) -> Outcome:
    if engine.s1 is None:
        raise SomaError("SOMA methods need an S1 (--s1)")
    monitor = engine.monitors[scenario]
    result = supervise(prompt, engine.s2, engine.s1, [monitor], config)
    end = result.end
    records = [r.model_dump() for r in result.records if r.type not in ("run_end",)]
    return Outcome(
        stop=end.stop,
        thinking=end.thinking,
        answer=end.answer,
        tokens=end.tokens,
        records=records,
        extras={"monitor": monitor.name, "output": end.output},  # output: reminders in place
    )


class SomaReadout(Method):
    name = "soma"

    def run(self, prompt: str, scenario: str, engine: Engine) -> Outcome:
        config = RunConfig(
            mode="readout",
            pause=engine.pause,
            max_tokens=engine.max_tokens,
            thinking=engine.thinking,
            sampling=engine.sampling,
        )
        return _run(prompt, scenario, engine, config)


class NoReminder(Method):
    name = "no_reminder"

    def __init__(self, thresholds: dict[str, float] | None = None):
        self.thresholds = dict(thresholds or {})

    def run(self, prompt: str, scenario: str, engine: Engine) -> Outcome:
        config = RunConfig(
            mode="no_reminder",
            thresholds=self.thresholds,
            pause=engine.pause,
            max_tokens=engine.max_tokens,
            thinking=engine.thinking,
            sampling=engine.sampling,
        )
        outcome = _run(prompt, scenario, engine, config)
        start = next(r for r in outcome.records if r["type"] == "run_start")
        outcome.extras["threshold"] = start["thresholds"][outcome.extras["monitor"]]
        return outcome

    def settings(self) -> dict:
        return {"thresholds": self.thresholds}
