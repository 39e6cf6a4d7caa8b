"""SOMA through the engine's own loop, as single-run readouts (paper §4.1).

``SomaReadout`` runs ``supervise(mode="readout")`` once: reminders go in, no takeover happens, and
every possible takeover continuation is produced on a branch. ``NoReminder`` does the same without
reminders (``readout_no_reminder``: its S2 text differs, so it needs its own run and its own h). The
trace records are kept whole (run_end included), so ``bench.score.readout_at`` reads off any h with
``soma_local.calibration.readout``, and the report picks each mode's h on the calibration sets.
"""

from __future__ import annotations

import json

from soma_local.bench.methods.base import Harness, Method, Outcome
from soma_local.engine.monitors import Monitor
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.errors import SomaError


def _run(prompt: str, monitor: Monitor, harness: Harness, config: RunConfig) -> Outcome:
    if harness.s1 is None:
        raise SomaError("SOMA methods need an S1 (--s1)")
    result = supervise(prompt, harness.s2, harness.s1, [monitor], config)
    end = result.end
    records = [json.loads(r.model_dump_json()) for r in result.records]  # h = inf kept as "Infinity"
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
    mode = "readout"

    def run(self, prompt: str, monitor: Monitor, harness: Harness) -> Outcome:
        config = RunConfig.of_mode(
            self.mode,
            pause=harness.pause,
            max_tokens=harness.max_tokens,
            thinking=harness.thinking,
            sampling=harness.sampling,
        )
        return _run(prompt, monitor, harness, config)


class NoReminder(SomaReadout):
    name = "no_reminder"
    mode = "readout_no_reminder"
