"""Benchmark methods, registered in one table (``METHODS``): how each is built and which monitor
objectives it is reported for. Tunable parameters come from ``params`` (the CLI) or, for SES, from
vanilla runs on the monitor's calibration sets, which must therefore exist first."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from soma_local.bench.methods.base import Method
from soma_local.bench.methods.budget import BudgetForcing
from soma_local.bench.methods.deer import Deer
from soma_local.bench.methods.dynasor import DynasorSweep
from soma_local.bench.methods.ses import ConformalRate, RenewalStats, StatisticalEarlyStop, lazy_interval
from soma_local.bench.methods.soma import NoReminder, SomaReadout
from soma_local.bench.methods.vanilla import AbstentionPrompt, Vanilla
from soma_local.engine.monitors import Monitor, ObjectiveKind
from soma_local.errors import DataError

Build = Callable[[dict, "MethodContext"], Method]


@dataclass(frozen=True)
class MethodContext:
    """What a method may be fitted on: the result directory, the S2 model and the monitor measured."""

    out: Path
    model: str
    monitor: Monitor


@dataclass(frozen=True)
class Registered:
    build: Build
    objectives: tuple[ObjectiveKind, ...] | None = None  # None: reported for every monitor
    uses_s1: bool = False
    uses_monitor: bool = False  # its run depends on the monitor beyond the prompt (SOMA runs it, SES takes over with it)

    def applies(self, objective: ObjectiveKind | None) -> bool:
        return self.objectives is None or objective in self.objectives


def _ses(params: dict, ctx: MethodContext) -> Method:
    """SES's answerable-question statistics, from the vanilla runs on the monitor's calibration sets."""
    from soma_local.bench.datasets import get_benchmark
    from soma_local.bench.results import read_results, result_path

    alpha, rule = params.get("ses_alpha", 0.05), params.get("ses_rule", "parametric")
    paths = [result_path(ctx.out, ctx.model, get_benchmark(ref, ctx.monitor), "vanilla")
             for ref in ctx.monitor.calibration_data]
    texts, lengths = [], []
    for path in paths:
        if path.exists():
            for line in read_results(path):
                if line.answerable:
                    texts.append(line.outcome.thinking)
                    lengths.append(line.outcome.tokens.thinking)
    if len(texts) < 2:
        if not paths:
            raise DataError(f"SES is fitted on vanilla runs of monitor '{ctx.monitor.name}''s calibration sets, "
                            "and its file lists no calibration_data")
        first = get_benchmark(ctx.monitor.calibration_data[0], ctx.monitor)
        monitor = "" if first.home else f" --monitor {ctx.monitor.file or ctx.monitor.name}"
        raise DataError(
            f"SES is fitted on vanilla runs of the answerable calibration questions of monitor "
            f"'{ctx.monitor.name}'; run `soma bench run --method vanilla --benchmark {first.name}{monitor}` "
            f"first (looked in {paths[0]})"
        )
    median_len = int(statistics.median(lengths))
    if rule == "conformal":
        fitted = ConformalRate.fit(texts, alpha, lazy_interval(median_len))
    else:
        try:
            fitted = RenewalStats.fit(texts)
        except ValueError as exc:
            raise DataError(f"SES: {exc} ({len(texts)} answerable vanilla calibration runs under {ctx.out}); run "
                            "vanilla on more calibration questions, or use --ses-rule conformal") from None
    return StatisticalEarlyStop(fitted, median_len, alpha)


METHODS: dict[str, Registered] = {
    "vanilla": Registered(lambda params, ctx: Vanilla()),
    "soma": Registered(lambda params, ctx: SomaReadout(), uses_s1=True, uses_monitor=True),
    "no_reminder": Registered(lambda params, ctx: NoReminder(), uses_s1=True, uses_monitor=True),
    "budget_forcing": Registered(lambda params, ctx: BudgetForcing(params.get("budgets") or [1024, 2048, 4096, 8192, 16384]),
                                 objectives=("fewest_tokens",)),
    "deer": Registered(lambda params, ctx: Deer(params.get("deer_threshold", 0.95))),
    "dynasor": Registered(lambda params, ctx: DynasorSweep(params.get("dynasor_interval", 32))),
    "abstention_prompt": Registered(lambda params, ctx: AbstentionPrompt(), objectives=("abstention",)),
    "ses": Registered(_ses, objectives=("abstention",), uses_monitor=True),
}


def make_method(name: str, params: dict, ctx: MethodContext) -> Method:
    try:
        registered = METHODS[name]
    except KeyError:
        raise DataError(f"unknown method '{name}' (known: {', '.join(METHODS)})") from None
    return registered.build(params, ctx)
