"""The paper's tables from result files, for any monitor: Table 2 (a monitor whose objective is
fewest tokens: the paper's overthinking), Table 3 (objective abstention: unanswerable), Table 4
(ablations) as Markdown and CSV, and Figure 3 (token-quality Pareto plot) as PNG.

A table is one monitor's (the results' *scenario*): its file's objective picks the metrics and which
baselines are reported, its ``calibration_data`` are the sets parameters are tuned on, and every other
set measured with it is a test set. Tuned parameters (SOMA's h, the BF budget, Dynasor's interval and k)
are chosen on the calibration sets' results of the same S2 model, then read off the test runs. Within a
benchmark only questions that every row has are compared, so a partial run still gives a fair table; n
says how many.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from soma_local.bench import score
from soma_local.bench.datasets import check_objective, question_set
from soma_local.bench.methods import METHODS
from soma_local.bench.results import ResultLine, read_results
from soma_local.calibration.selection import Selection
from soma_local.calibration.thresholds import monitor_objective
from soma_local.calibration.metrics import ItemResult, Metrics, summarize
from soma_local.engine.monitors import Monitor, ObjectiveKind, resolve_monitors
from soma_local.errors import DataError, MonitorFileError


# How to read the tables, written above them.
READING_KEY = [
    "How to read these tables (all figures in %, except token counts):",
    "",
    "- **Acc**: accuracy, the share of answerable questions answered correctly.",
    "- **Abs**: abstention, the share of unanswerable questions answered \"I don't know\" (higher is better).",
    "- **FA**: false abstention, the share of answerable questions the method abstained on (lower is better).",
    "- **Tok**: mean S2 tokens generated per question (thinking, answer and any probe tokens). The Vanilla row "
    "gives the count; every other row gives its change against Vanilla on the same questions "
    "(-24% = 24% fewer tokens).",
    "- **n**: questions compared; a benchmark's table keeps only the questions every row has.",
    "- **Avg**: over all questions, each rate over its own questions (Acc and FA over answerable ones, Abs over "
    "unanswerable ones). **Avg/bench**: the plain mean of the per-benchmark figures.",
    "- **Parameters** (SOMA's threshold h, the BF budget B, Dynasor's interval and k) are chosen on the "
    "calibration sets, as stated under each table; `pareto.png` plots the same averages.",
]


@dataclass(frozen=True)
class Row:
    name: str
    method: str  # the result file it is read from
    read: Callable[[ResultLine], ItemResult]
    ablation: bool = False


# What a table reports, by the monitor's objective: its number in the paper and its metrics.
TABLES: dict[ObjectiveKind, tuple[int, list[str]]] = {
    "fewest_tokens": (2, ["accuracy", "tokens"]),
    "abstention": (3, ["abstention", "accuracy", "false_abstention", "tokens"]),
}


def load(results: Path) -> dict[str, dict[str, dict[str, dict[str, list[ResultLine]]]]]:
    """model -> scenario (the monitor) -> benchmark -> method -> lines."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for path in sorted(results.rglob("*.jsonl")):
        lines = list(read_results(path))
        if lines:
            first = lines[0]
            out[first.model][first.scenario][first.benchmark][first.method] = lines
    return out


def scenario_monitors(scenarios: Iterable[str], given: Iterable[Monitor] = ()) -> dict[str, Monitor]:
    """The monitor of each scenario in the results: one the user passed (``--monitor``), else the
    shipped one of that name."""
    given = {m.name: m for m in given}
    out = {}
    for name in scenarios:
        if name not in given:
            try:
                (given[name],) = resolve_monitors([name])
            except MonitorFileError as exc:
                raise DataError(f"results measured with monitor '{name}': pass its file with --monitor FILE.toml "
                                f"({exc})") from None
        check_objective(given[name])
        out[name] = given[name]
    return out


def calibration_sets(monitor: Monitor) -> set[str]:
    """The sets a monitor's parameters are tuned on: its file's ``calibration_data``, by set name."""
    return {question_set(ref).name for ref in monitor.calibration_data}


def _calibration(by_bench: dict, monitor: Monitor, method: str) -> list[ResultLine]:
    names = calibration_sets(monitor)
    return [line for name, methods in by_bench.items() if name in names for line in methods.get(method, [])]


def rows_for(monitor: Monitor, by_bench: dict, delta: float, selection: Selection = Selection()) -> tuple[list[Row], dict]:
    """The table's rows and the parameters chosen for them (with where each came from). Every
    parameter is chosen on the calibration sets by the monitor's objective (``soma calibrate``'s); h by
    ``selection``, as ``soma calibrate`` chooses it, the baselines' parameters by the paper's point rule.
    A baseline is a row where the method table reports it for this objective."""
    chosen: dict = {}  # the parameter line under the table: only of methods that have results
    objective = monitor_objective(monitor, delta)
    ran = {method for methods in by_bench.values() for method in methods}

    def reported(method: str) -> bool:
        return METHODS[method].applies(monitor.objective)

    def tuned(label: str, method: str, calibrate, fallback, fallback_why: str):
        cal = _calibration(by_bench, monitor, method)
        value = calibrate(cal, objective) if cal else fallback
        if method in ran:
            chosen[label] = (value, f"calibrated on {len(cal)} questions" if cal else fallback_why)
        return value

    def tuned_h(label: str, method: str) -> float:
        cal = _calibration(by_bench, monitor, method)
        if not cal:
            if method in ran:
                chosen[label] = (monitor.default_threshold, "monitor default (no calibration runs)")
            return monitor.default_threshold
        choice = score.h_choice(cal, objective, selection)
        chosen[label] = (choice.threshold, f"calibrated on {len(cal)} questions; {choice.evidence()}")
        return choice.threshold

    h = tuned_h("SOMA h", "soma")
    h_nr = tuned_h("No-reminder h", "no_reminder")
    rows = [Row("Vanilla", "vanilla", score.plain)]
    if reported("budget_forcing"):
        budget = tuned("BF budget", "budget_forcing", score.calibrate_budget, None, "no calibration runs: unforced")
        rows.append(Row(f"BF (B={budget})", "budget_forcing", lambda line, b=budget: score.budget_at(line, b)))
    rows.append(Row("DEER", "deer", score.plain))
    interval, k = tuned("Dynasor (interval, k)", "dynasor", score.calibrate_dynasor, (None, 3),
                        "defaults (no calibration runs): base interval, k=3")
    rows.append(
        Row(
            "Dynasor-CoT",
            "dynasor",
            lambda line, i=interval, k=k: score.dynasor_at(line, i or line.settings["method"]["interval"], k),
        )
    )
    if reported("abstention_prompt"):
        rows.append(Row("AbstentionBench prompt", "abstention_prompt", score.plain))
    if reported("ses"):
        rows.append(Row("SES", "ses", score.plain))
    rows.append(Row(f"SOMA (h={h:g})", "soma", lambda line, h=h: score.readout_at(line, h)))
    rows.append(Row("Remind-only (h=inf)", "soma", lambda line: score.readout_at(line, math.inf), ablation=True))
    rows.append(Row(f"No reminder (h={h_nr:g})", "no_reminder", lambda line, h=h_nr: score.readout_at(line, h),
                    ablation=True))
    return rows, chosen


def _table(rows: list[Row], methods: dict[str, list[ResultLine]]) -> dict[str, list[ItemResult]]:
    """Points per row on the questions that every available row has."""
    present = [r for r in rows if r.method in methods]
    if not present:
        return {}
    common = set.intersection(*({line.id for line in methods[r.method]} for r in present))
    return {
        r.name: [r.read(line) for line in methods[r.method] if line.id in common] for r in present
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _tok(x: float | None, base: float | None) -> str:
    if x is None:
        return "-"
    if base is None:
        return f"{x:.0f}"
    return "-" if not base else f"{100 * (x - base) / base:+.0f}%"


def scenario_report(model: str, monitor: Monitor, by_bench: dict, delta: float, selection: Selection = Selection()):
    """Markdown lines, CSV rows and plot points for one model and one monitor's results (``by_bench``)."""
    scenario = monitor.name
    rows, chosen = rows_for(monitor, by_bench, delta, selection)
    calibration = calibration_sets(monitor)
    per_bench = {b: _table(rows, by_bench[b]) for b in by_bench if b not in calibration}
    per_bench = {b: t for b, t in per_bench.items() if t}
    if not per_bench:
        return [], [], {}
    names = [r.name for r in rows if any(r.name in t for t in per_bench.values())]
    number, metrics = TABLES[monitor.objective]
    label = {"accuracy": "Acc", "tokens": "Tok", "abstention": "Abs", "false_abstention": "FA"}
    csv_rows, plot = [], {}

    # A question-weighted average weights each rate by the questions it is a rate over.
    group = {"accuracy": "n_answerable", "false_abstention": "n_answerable", "abstention": "n_unanswerable",
             "tokens": "n"}

    def cells(name: str, summaries: list[Metrics], base: list[Metrics] | None, by_questions: bool):
        out = []
        for metric in metrics:
            weights = [getattr(s, group[metric]) if by_questions else 1 for s in summaries]
            vals = [getattr(s, metric) for s in summaries]
            ws = [w for w, v in zip(weights, vals) if v is not None]
            vs = [v for v in vals if v is not None]
            value = sum(w * v for w, v in zip(ws, vs)) / sum(ws) if ws and sum(ws) else None
            if metric == "tokens":
                bvals = [getattr(s, "tokens") for s in base] if base else None
                bval = sum(w * v for w, v in zip(weights, bvals)) / sum(weights) if bvals else None
                out.append((metric, value, _tok(value, None if name == "Vanilla" else bval)))
            else:
                out.append((metric, value, _pct(value)))
        return out

    header = ["Method"]
    for b in per_bench:
        n = len(next(iter(per_bench[b].values())))
        header += [f"{b} {label[m]} (n={n})" for m in metrics]
    header += [f"Avg {label[m]}" for m in metrics] + [f"Avg/bench {label[m]}" for m in metrics]
    md = [
        f"### {model}: Table {number} ({scenario})",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    ablation_md = []
    for name in names:
        row = next(r for r in rows if r.name == name)
        sums = [summarize(per_bench[b][name]) if name in per_bench[b] else None for b in per_bench]
        base = [summarize(per_bench[b]["Vanilla"]) if "Vanilla" in per_bench[b] else None for b in per_bench]
        line = [name]
        for b, s, vb in zip(per_bench, sums, base):
            if s is None:
                line += ["-"] * len(metrics)
                continue
            for metric, value, text in cells(name, [s], [vb] if vb else None, by_questions=True):
                line.append(text)
                csv_rows.append([model, scenario, name, b, metric, value, s.n])
        present = [(s, vb) for s, vb in zip(sums, base) if s is not None]
        have_base = all(vb is not None for _, vb in present)
        q_weighted = cells(name, [s for s, _ in present], [vb for _, vb in present] if have_base else None,
                           by_questions=True)
        b_weighted = cells(name, [s for s, _ in present], [vb for _, vb in present] if have_base else None,
                           by_questions=False)
        line += [t for _, _, t in q_weighted] + [t for _, _, t in b_weighted]
        for (metric, value, _), (_, bvalue, _) in zip(q_weighted, b_weighted):
            csv_rows.append([model, scenario, name, "avg_questions", metric, value, sum(s.n for s, _ in present)])
            csv_rows.append([model, scenario, name, "avg_benchmarks", metric, bvalue, len(present)])
        if not row.ablation:  # Table 4 holds the ablations; the figure compares methods
            plot[name] = dict((m, v) for m, v, _ in q_weighted)
        target = ablation_md if row.ablation or name.startswith(("SOMA", "Vanilla")) else None
        if not row.ablation:
            md.append("| " + " | ".join(line) + " |")
        if target is not None:
            target.append("| " + " | ".join([name] + [t for _, _, t in q_weighted]) + " |")
    md += ["", "Parameters: " + "; ".join(f"{k} = {v[0]} ({v[1]})" for k, v in chosen.items()), ""]
    ab = [
        f"### {model}: Table 4 (ablations, {scenario}, question-weighted)",
        "",
        "| Variant | " + " | ".join(label[m] for m in metrics) + " |",
        "|" + "---|" * (len(metrics) + 1),
        *ablation_md,
        "",
    ]
    return md + ab, csv_rows, plot


# One look per method in every panel: hollow markers of distinct shapes stay visible when two methods
# land on the same point (SOMA at h = inf and Remind-only always do).
_STYLE = {
    "Vanilla": ("black", "o"), "BF": ("C1", "s"), "DEER": ("C2", "^"), "Dynasor-CoT": ("C9", "v"),
    "AbstentionBench prompt": ("C4", "D"), "SES": ("C5", "P"), "SOMA": ("C3", "*"),
}
_PANELS: dict[ObjectiveKind, list[tuple[str, str, bool, str]]] = {  # (field, y label, higher is better, title)
    "fewest_tokens": [("accuracy", "accuracy (%)", True, "accuracy")],
    "abstention": [("abstention", "abstention on unanswerable (%)", True, "abstention"),
                   ("false_abstention", "false abstention on answerable (%)", False, "false abstention")],
}


def method_of(row_name: str) -> str:
    """The method a table row is, without its tuned parameter: 'SOMA (h=0.5)' -> 'SOMA'."""
    return row_name.split(" (", 1)[0]


def pareto_plot(points: dict, objectives: dict[str, ObjectiveKind], path: Path) -> None:
    """Figure 3: quality against token change relative to Vanilla, one row of panels per S2 model and
    a column per monitor's quality measure (fewest tokens: accuracy; abstention: abstention and false
    abstention), the Pareto frontier drawn in each. Methods are told apart by marker, named once in a
    legend below the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from soma_local.calibration.plotting import axis_span, pareto_front

    columns = [(sc, panel) for sc in sorted(objectives) for panel in _PANELS[objectives[sc]]
               if any(points[m].get(sc) for m in points)]
    models = [m for m in points if any(points[m].values())]
    if not columns or not models:
        columns, models = [("any monitor", _PANELS["fewest_tokens"][0])], list(points) or ["(no results)"]
    fig, axes = plt.subplots(len(models), len(columns), figsize=(4.6 * len(columns), 3.7 * len(models) + 0.9),
                             squeeze=False)
    seen: dict[str, None] = {}
    for r, model in enumerate(models):
        for c, (scenario, (field, ylabel, higher, title)) in enumerate(columns):
            ax = axes[r][c]
            rows = points.get(model, {}).get(scenario, {})
            base = rows.get("Vanilla", {}).get("tokens")
            xy = {
                name: (100 * (v["tokens"] - base) / base if base else 0.0, 100 * v[field])
                for name, v in rows.items()
                if v.get(field) is not None and v.get("tokens") is not None
            }
            if not xy:
                ax.axis("off")
                ax.text(0.5, 0.5, f"{model}\nno {scenario} results", ha="center", va="center", transform=ax.transAxes)
                continue
            names = list(xy)
            front = [names[i] for i in pareto_front([xy[n] for n in names], higher_is_better=higher)]
            ax.plot([xy[n][0] for n in front], [xy[n][1] for n in front], "--", color="0.45", lw=1, zorder=1)
            ax.plot([xy[n][0] for n in front], [xy[n][1] for n in front], "o", ms=15, mfc="none", mec="0.7",
                    mew=1, zorder=1)
            for name, (x, y) in xy.items():
                method = method_of(name)
                colour, marker = _STYLE.get(method, ("grey", "x"))
                ax.plot(x, y, marker, ms=11 if marker == "*" else 8, mfc="none", mec=colour, mew=1.6, zorder=3)
                seen[method] = None
            ys = [y for _, y in xy.values()]
            ax.set_ylim(*axis_span(ys, lo=0, hi=100))
            ax.set_xlim(*axis_span([x for x, _ in xy.values()], min_span=10))
            if max(ys) == min(ys):
                ax.text(0.5, 0.92, f"every method at {ys[0]:.0f}%", ha="center", transform=ax.transAxes, fontsize=8,
                        color="0.3")
            ax.axvline(0, color="0.85", lw=0.8, zorder=0)
            ax.set_xlabel("tokens vs Vanilla (%)", fontsize=9)
            ax.set_ylabel(ylabel + ("\nhigher is better" if higher else "\nlower is better"), fontsize=9)
            ax.set_title(f"{model} · {scenario}: {title}", fontsize=9)
            ax.tick_params(labelsize=8)
            ax.grid(alpha=0.3)
    handles = [Line2D([], [], ls="", marker=_STYLE.get(m, ("grey", "x"))[1], ms=9 if m != "SOMA" else 11, mfc="none",
                      mec=_STYLE.get(m, ("grey", "x"))[0], mew=1.6, label=m) for m in seen]
    handles.append(Line2D([], [], ls="--", color="0.45", lw=1, marker="o", ms=13, mfc="none", mec="0.7", mew=1,
                          label="Pareto frontier (no other method has fewer tokens and better quality)"))
    ncol = min(len(handles), 4, 2 * len(columns) - 1)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    legend_rows = -(-len(handles) // ncol)
    fig.tight_layout(rect=(0, (0.3 + 0.22 * legend_rows) / fig.get_figheight(), 1, 1))
    fig.savefig(path, dpi=130, bbox_inches="tight")  # the legend whole, however narrow the figure
    plt.close(fig)


def write_reports(results: Path, out: Path, delta: float = 0.0, selection: Selection = Selection(),
                  monitors: Iterable[Monitor] = ()) -> list[Path]:
    """Tables and plot of every model and monitor under ``results``; ``monitors``: the files of
    monitors that are not shipped (results name their monitor)."""
    data = load(results)
    by_name = scenario_monitors({sc for by_scenario in data.values() for sc in by_scenario}, monitors)
    out.mkdir(parents=True, exist_ok=True)
    md, csv_rows, plot = ["# Benchmark tables", "", *READING_KEY, ""], [], defaultdict(dict)
    for model, by_scenario in data.items():
        for scenario in sorted(by_scenario):
            lines, rows, points = scenario_report(model, by_name[scenario], by_scenario[scenario], delta, selection)
            md += lines
            csv_rows += rows
            plot[model][scenario] = points
    paths = [out / "tables.md", out / "tables.csv", out / "pareto.png"]
    paths[0].write_text("\n".join(md) + "\n", encoding="utf-8")
    with paths[1].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["model", "scenario", "method", "benchmark", "metric", "value", "n"])
        writer.writerows(csv_rows)
    pareto_plot(plot, {name: m.objective for name, m in by_name.items()}, paths[2])
    return paths
