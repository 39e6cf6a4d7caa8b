"""Benchmark methods by name. Tunable parameters come from ``params`` (the CLI) or, for SES, from
vanilla runs on the calibration sets, which must therefore exist first."""

from __future__ import annotations

import statistics
from pathlib import Path

from soma_local.bench.methods.base import Method
from soma_local.errors import DataError

METHODS = ("vanilla", "soma", "no_reminder", "budget_forcing", "deer", "dynasor", "abstention_prompt", "ses")
SES_CALIBRATION = ("calib_unans_easy", "calib_unans_hard")


def make_method(name: str, params: dict, *, out: Path, model: str) -> Method:
    from soma_local.bench.methods import budget, deer, dynasor, soma, vanilla

    if name == "vanilla":
        return vanilla.Vanilla()
    if name == "abstention_prompt":
        return vanilla.AbstentionPrompt()
    if name == "soma":
        return soma.SomaReadout()
    if name == "no_reminder":
        return soma.NoReminder()
    if name == "budget_forcing":
        return budget.BudgetForcing(params.get("budgets") or [1024, 2048, 4096, 8192, 16384])
    if name == "deer":
        return deer.Deer(params.get("deer_threshold", 0.95))
    if name == "dynasor":
        return dynasor.DynasorSweep(params.get("dynasor_interval", 32))
    if name == "ses":
        return _ses(out, model, params.get("ses_alpha", 0.05), params.get("ses_rule", "parametric"))
    raise DataError(f"unknown method '{name}' (known: {', '.join(METHODS)})")


def _ses(out: Path, model: str, alpha: float, rule: str) -> Method:
    """SES's answerable-question statistics, from the vanilla runs on the calibration sets."""
    from soma_local.bench.methods.ses import ConformalRate, RenewalStats, StatisticalEarlyStop, lazy_interval
    from soma_local.bench.results import read_results, result_path

    texts, lengths = [], []
    for bench in SES_CALIBRATION:
        path = result_path(out, model, bench, "vanilla")
        if path.exists():
            for line in read_results(path):
                if line.answerable:
                    texts.append(line.outcome.thinking)
                    lengths.append(line.outcome.tokens.thinking)
    if len(texts) < 2:
        raise DataError(
            f"SES is fitted on vanilla runs of the answerable calibration questions; run "
            f"`soma bench run --method vanilla --benchmark {SES_CALIBRATION[0]}` first (looked in "
            f"{result_path(out, model, SES_CALIBRATION[0], 'vanilla')})"
        )
    median_len = int(statistics.median(lengths))
    if rule == "conformal":
        fitted = ConformalRate.fit(texts, alpha, lazy_interval(median_len))
    else:
        try:
            fitted = RenewalStats.fit(texts)
        except ValueError as exc:
            raise DataError(f"SES: {exc} ({len(texts)} answerable vanilla calibration runs under {out}); run "
                            "vanilla on more calibration questions, or use --ses-rule conformal") from None
    return StatisticalEarlyStop(fitted, median_len, alpha)
