"""The paper's tables from result files: Table 2 (overthinking), Table 3 (unanswerable), Table 4
(ablations) as Markdown and CSV, and Figure 3 (token-quality Pareto plot) as PNG.

Tuned parameters (SOMA's h, the BF budget, Dynasor's interval and k) are chosen on the calibration
sets' results of the same S2 model, then read off the test runs. Within a benchmark only questions
that every row has are compared, so a partial run still gives a fair table; n says how many.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from soma_local.bench import score
from soma_local.bench.datasets import BENCHMARKS
from soma_local.bench.results import ResultLine, read_results
from soma_local.calibrate import default_objective
from soma_local.metrics import ItemResult, Metrics, summarize
from soma_local.monitors import resolve_monitors


@dataclass(frozen=True)
class Row:
    name: str
    method: str  # the result file it is read from
    read: Callable[[ResultLine], ItemResult]
    ablation: bool = False


def load(results: Path) -> dict[str, dict[str, dict[str, list[ResultLine]]]]:
    """model -> benchmark -> method -> lines."""
    out: dict = defaultdict(lambda: defaultdict(dict))
    for path in sorted(results.rglob("*.jsonl")):
        lines = list(read_results(path))
        if lines:
            out[lines[0].model][lines[0].benchmark][lines[0].method] = lines
    return out


def _calibration(by_bench: dict, scenario: str, method: str) -> list[ResultLine]:
    return [
        line
        for name, methods in by_bench.items()
        if BENCHMARKS[name].calibration and BENCHMARKS[name].scenario == scenario
        for line in methods.get(method, [])
    ]


def rows_for(scenario: str, by_bench: dict, delta: float) -> tuple[list[Row], dict]:
    """The table's rows and the parameters chosen for them (with where each came from). Every
    parameter is chosen on the calibration sets by the scenario's objective (``soma calibrate``'s)."""
    chosen: dict = {}
    objective = default_objective(scenario, delta)
    monitor = {m.name: m for m in resolve_monitors([scenario])}[scenario]

    def tuned(label: str, method: str, calibrate, fallback, fallback_why: str):
        cal = _calibration(by_bench, scenario, method)
        value = calibrate(cal, objective) if cal else fallback
        chosen[label] = (value, f"calibrated on {len(cal)} questions" if cal else fallback_why)
        return value

    h = tuned("SOMA h", "soma", score.calibrate_h, monitor.default_threshold, "monitor default (no calibration runs)")
    h_nr = tuned("No-reminder h", "no_reminder", score.calibrate_h, monitor.default_threshold,
                 "monitor default (no calibration runs)")
    rows = [Row("Vanilla", "vanilla", score.plain)]
    if scenario == "overthinking":
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
    if scenario == "unanswerable":
        rows.append(Row("AbstentionBench prompt", "abstention_prompt", score.plain))
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


def scenario_report(model: str, scenario: str, by_bench: dict, delta: float):
    """Markdown lines, CSV rows and plot points for one model and scenario."""
    rows, chosen = rows_for(scenario, by_bench, delta)
    tests = [b for b in by_bench if not BENCHMARKS[b].calibration and BENCHMARKS[b].scenario == scenario]
    per_bench = {b: _table(rows, by_bench[b]) for b in tests}
    per_bench = {b: t for b, t in per_bench.items() if t}
    if not per_bench:
        return [], [], {}
    names = [r.name for r in rows if any(r.name in t for t in per_bench.values())]
    metrics = ["accuracy", "tokens"] if scenario == "overthinking" else ["abstention", "accuracy", "false_abstention", "tokens"]
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
        f"### {model}: {'Table 2 (overthinking)' if scenario == 'overthinking' else 'Table 3 (unanswerable)'}",
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
        vals = dict((m, v) for m, v, _ in q_weighted)
        plot[name] = vals
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


def pareto_plot(points: dict, path: Path) -> None:
    """Figure 3: quality against token change relative to Vanilla, the frontier drawn per panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(m, s) for m in points for s in points[m] if points[m][s]]
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(5 * max(1, len(panels)), 4), squeeze=False)
    for ax, (model, scenario) in zip(axes[0], panels):
        rows = points[model][scenario]
        base = rows.get("Vanilla", {}).get("tokens")
        quality = "accuracy" if scenario == "overthinking" else "abstention"
        xy = {
            name: (100 * (v["tokens"] - base) / base if base else 0.0, 100 * v[quality])
            for name, v in rows.items()
            if v.get(quality) is not None
        }
        front = sorted(
            (n for n, (x, y) in xy.items() if not any(x2 <= x and y2 >= y and (x2, y2) != (x, y) for x2, y2 in xy.values())),
            key=lambda n: xy[n][0],
        )
        for name, (x, y) in xy.items():
            ax.scatter(x, y, s=40, marker="*" if name.startswith("SOMA") else "o", zorder=3)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.plot([xy[n][0] for n in front], [xy[n][1] for n in front], "k--", lw=0.8, label="Pareto frontier")
        ax.set_xlabel("tokens vs Vanilla (%)")
        ax.set_ylabel("accuracy (%)" if quality == "accuracy" else "abstention on unanswerable (%)")
        ax.set_title(f"{model} · {scenario}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def write_reports(results: Path, out: Path, delta: float = 0.0) -> list[Path]:
    data = load(results)
    out.mkdir(parents=True, exist_ok=True)
    md, csv_rows, plot = ["# Benchmark tables", ""], [], defaultdict(dict)
    for model, by_bench in data.items():
        for scenario in ("overthinking", "unanswerable"):
            lines, rows, points = scenario_report(model, scenario, by_bench, delta)
            md += lines
            csv_rows += rows
            plot[model][scenario] = points
    paths = [out / "tables.md", out / "tables.csv", out / "pareto.png"]
    paths[0].write_text("\n".join(md) + "\n", encoding="utf-8")
    with paths[1].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["model", "scenario", "method", "benchmark", "metric", "value", "n"])
        writer.writerows(csv_rows)
    pareto_plot(plot, paths[2])
    return paths
