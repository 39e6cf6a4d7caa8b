"""Does a calibrated h hold on new questions? Calibrate on half, report on the other half, many times.

    .venv/bin/python -m benchmarks.calibration_splits                 # the shipped replay, 100 splits
    .venv/bin/python -m benchmarks.calibration_splits --results runs/replay/replay_results.json

One calibrate-on-half split (``soma replay --calibrate-share 0.5``) is one draw: whether the h it picks
holds on the other half depends on which questions fell where. This script repeats that split with
many seeds, exactly as replay makes it (``calibration.replay.calibration_ids``: a seeded per-question
draw; reserved gold questions never calibrate; h per S2 over the calibration half of every dataset of
that S2, reported per (dataset, S2) group), and chooses h each time with both rules of
``thresholds.choose_threshold``: the paper's point selection and the confidence bound (``selection``).
For each group and rule it prints the distribution over splits of what the chosen h did on the
reported half against vanilla (no takeover): abstention gain, false-abstention change and token
change, and the share of splits where false abstention rose by more than 2 points.

No model runs: a replay result file holds every scanned trace with S1's p at every pause, so any h is
an outcome read off (``replay_item``). The input is an argument because the figures belong to the S1
that scored that file; a replay with another S1 gives its own.

A second table sweeps the confidence level of the bound rule: the largest share of FA > +2 splits over
the groups, against the abstention gain kept, which is how the default level was chosen.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from soma_local.calibration.metrics import ItemResult, summarize
from soma_local.calibration.recorded import reserved_questions
from soma_local.calibration.replay import ScannedTrace, calibration_ids, group_key, replay_item
from soma_local.calibration.report import h_label
from soma_local.calibration.scoring import is_abstention
from soma_local.calibration.selection import Selection
from soma_local.calibration.thresholds import H_GRID, Objective, choose_threshold
from soma_local.data_dir import data_dir
from soma_local.engine.monitors import resolve_monitors

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "replay_classifier_calibrated" / "replay_results.json"
FA_RISE = 0.02  # "false abstention rose by more than 2 points"


@dataclass(frozen=True)
class Outcome:
    """What one split's h did on one group's reported half, against vanilla."""

    h: float
    d_abstention: float | None  # None: no unanswerable question in the group's reported half
    d_false_abstention: float
    d_accuracy: float
    d_tokens: float  # relative change of mean tokens


def load(path: Path) -> tuple[dict, list[ScannedTrace]]:
    import json

    results = json.loads(path.read_text(encoding="utf-8"))
    return results, [ScannedTrace(**t) for t in results["traces"]]


def read_offs(traces: list[ScannedTrace], grid: list[float], abstaining: bool, answer_tokens: int) -> list[dict[float, ItemResult]]:
    """Every trace's outcome at every h, once: a split only picks which traces count."""
    return [{h: replay_item(t, h, abstaining, answer_tokens) for h in grid} for t in traces]


def against_vanilla(items: list[ItemResult], vanilla: list[ItemResult], h: float) -> Outcome:
    m, v = summarize(items), summarize(vanilla)
    d_abs = None if m.abstention is None else m.abstention - v.abstention
    return Outcome(h, d_abs, (m.false_abstention or 0.0) - (v.false_abstention or 0.0),
                   (m.accuracy or 0.0) - (v.accuracy or 0.0), m.tokens / v.tokens - 1.0)


@dataclass
class Splits:
    """What the splits gave: (rule, group) -> one Outcome per split; (h, group) -> the same for every fixed
    h of the grid (what any rule could have had); the calibration-half sizes (per split and S2) and each
    group's reported-half sizes (per split)."""

    outcomes: dict[tuple[str, str], list[Outcome]]
    fixed: dict[tuple[float, str], list[Outcome]]
    calibration_sizes: list[int]
    reported_sizes: dict[str, list[int]]


def run_splits(traces: list[ScannedTrace], outcomes: list[dict[float, ItemResult]], rules: dict[str, Selection],
               objective: Objective, share: float, splits: int, reserved: frozenset[str]) -> Splits:
    ids = {t.id for t in traces}
    by_model: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(traces):
        by_model[group_key(t)[1]].append(i)
    out = Splits(defaultdict(list), defaultdict(list), [], defaultdict(list))
    grid = list(outcomes[0])
    for seed in range(splits):
        held = calibration_ids(ids, share, seed, reserved)
        for model, members in sorted(by_model.items()):
            cal = [i for i in members if traces[i].id in held]
            out.calibration_sizes.append(len(cal))
            per_h = {h: [outcomes[i][h] for i in cal] for h in grid}
            chosen = {name: choose_threshold(per_h, objective, rule).threshold for name, rule in rules.items()}
            groups: dict[str, list[int]] = defaultdict(list)
            for i in members:
                if traces[i].id not in held:
                    groups[f"{traces[i].dataset} / {model}"].append(i)
            for group, test in groups.items():
                out.reported_sizes[group].append(len(test))
                vanilla = [traces[i].vanilla for i in test]
                for name, h in chosen.items():
                    out.outcomes[(name, group)].append(against_vanilla([outcomes[i][h] for i in test], vanilla, h))
                for h in grid:
                    out.fixed[(h, group)].append(against_vanilla([outcomes[i][h] for i in test], vanilla, h))
    return out


def signed(x: float, digits: int = 1) -> str:
    """``+1.2``; a value that rounds to zero is ``+0.0`` (never ``-0.0``)."""
    return f"{round(float(x), digits) + 0.0:+.{digits}f}"


def spread(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    """``mean [p5, p95]`` of a distribution over splits."""
    a = scale * np.array(values)
    return f"{signed(a.mean(), digits)} [{signed(np.percentile(a, 5), digits)}, {signed(np.percentile(a, 95), digits)}]"


def fa_rise_share(rows: list[Outcome]) -> float:
    return float(np.mean([r.d_false_abstention > FA_RISE + 1e-9 for r in rows]))


def markdown(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def rules_table(s: Splits, groups: list[str], rules: list[str]) -> str:
    """Both rules side by side, per group: the distribution over splits of the reported half's changes."""
    head = ["group", "n reported", "rule", "h: median [p10, p90], inf share", "dAbs", "dFA", "dAcc", "dTok %",
            "FA > +2 pts"]
    rows = []
    for group in groups:
        sizes = s.reported_sizes[group]
        for name in rules:
            rs = s.outcomes[(name, group)]
            hs = np.array([r.h for r in rs])
            hq = lambda q: h_label(float(np.percentile(hs, q, method="lower")))  # noqa: E731 - a grid value
            d_abs = [r.d_abstention for r in rs if r.d_abstention is not None]
            rows.append([group, f"{min(sizes)}-{max(sizes)}", name,
                         f"{hq(50)} [{hq(10)}, {hq(90)}], {100 * np.mean(np.isinf(hs)):.0f} %",
                         spread(d_abs) if d_abs else "-", spread([r.d_false_abstention for r in rs]),
                         spread([r.d_accuracy for r in rs]), spread([r.d_tokens for r in rs], digits=0),
                         f"{100 * fa_rise_share(rs):.0f} %"])
    return markdown(head, rows)


def summary_cells(rs: list[Outcome]) -> str:
    """``mean dAbs / mean dFA / FA > +2 share`` of one group under one rule (or one fixed h)."""
    d_abs = [r.d_abstention for r in rs if r.d_abstention is not None]
    abs_text = signed(100 * np.mean(d_abs)) if d_abs else "-"
    return f"{abs_text} / {signed(100 * np.mean([r.d_false_abstention for r in rs]))} / {100 * fa_rise_share(rs):.0f} %"


def levels_table(s: Splits, groups: list[str], rules: dict[str, Selection]) -> str:
    """Per rule (point, then the bound at each level): the worst group's share of FA > +2 splits, and
    each group's mean dAbs / dFA: what a level buys in safety and costs in gain."""
    head = ["rule", "worst FA > +2", *(f"{g}: dAbs / dFA / FA > +2" for g in groups)]
    rows = []
    for name in sorted(rules, key=lambda n: (rules[n].rule == "bound", rules[n].confidence)):
        label = "point" if rules[name].rule == "point" else f"bound {100 * rules[name].confidence:g} %"
        worst = max(fa_rise_share(s.outcomes[(name, g)]) for g in groups)
        rows.append([label, f"{100 * worst:.0f} %", *(summary_cells(s.outcomes[(name, g)]) for g in groups)])
    return markdown(head, rows)


def fixed_table(s: Splits, groups: list[str]) -> str:
    """Every h of the grid held fixed over the same splits: the most any rule choosing one h per S2 could
    reach in each group (no rule sees the reported half)."""
    hs = sorted({h for h, _ in s.fixed})
    head = ["fixed h", *(f"{g}: dAbs / dFA / FA > +2" for g in groups)]
    return markdown(head, [[f"h={h_label(h)}", *(summary_cells(s.fixed[(h, g)]) for g in groups)] for h in hs])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.calibration_splits", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=RESULTS,
                    help="a replay result file (soma replay ... --out DIR writes DIR/replay_results.json)")
    ap.add_argument("--splits", type=int, default=100, help="seeded splits (seeds 0..N-1; seed 0 is replay's own)")
    ap.add_argument("--share", type=float, default=0.5, help="calibration share of the questions")
    ap.add_argument("--confidence", type=float, default=Selection().confidence, help="the bound rule's level")
    ap.add_argument("--resamples", type=int, default=Selection().resamples, help="bootstrap resamples")
    ap.add_argument("--sweep", default="0.8,0.85,0.9,0.95,0.975",
                    help="confidence levels for the level table (empty: no sweep)")
    ap.add_argument("--delta", type=float, default=0.0, help="accuracy tolerance (replay's default)")
    ap.add_argument("--fa-weight", type=float, default=1.0, help="abstention objective: Abs - w*FA")
    args = ap.parse_args(argv)
    if args.splits < 1 or not 0 < args.share < 1 or not 0.5 < args.confidence < 1:
        ap.error("--splits must be >= 1, --share in (0, 1) and --confidence in (0.5, 1)")

    results, traces = load(args.results)
    (monitor,) = resolve_monitors([results["monitor"]])
    objective = Objective(kind=results.get("objective") or monitor.objective, delta=args.delta, fa_weight=args.fa_weight)
    outcomes = read_offs(traces, [*H_GRID, math.inf], is_abstention(monitor.takeover.prefill),
                         results.get("takeover_answer_tokens", 0))
    reserved = reserved_questions(data_dir())
    bound = Selection(confidence=args.confidence, resamples=args.resamples)
    rules = {"point": Selection(rule="point"), "bound": bound}
    sweep = [float(x) for x in args.sweep.split(",") if x.strip()]
    rules |= {f"bound {lv:g}": Selection(confidence=lv, resamples=args.resamples) for lv in sweep if lv != args.confidence}
    s = run_splits(traces, outcomes, rules, objective, args.share, args.splits, reserved)
    groups = sorted(s.reported_sizes)

    print("# " + shlex.join(["python", "-m", "benchmarks.calibration_splits", *(sys.argv[1:] if argv is None else argv)]))
    print(f"# {args.results.parent.name}/{args.results.name}: S1 {results['s1']} {results.get('s1_version') or ''}, "
          f"monitor {results['monitor']}, {len(traces)} traces; {objective.describe()}; grid "
          f"{h_label(H_GRID[0])}-{h_label(H_GRID[-1])} and inf")
    sizes = s.calibration_sizes
    print(f"# {args.splits} splits (seeds 0-{args.splits - 1}), calibration share {args.share:g}: h per S2 on "
          f"{min(sizes)}-{max(sizes)} traces (mean {np.mean(sizes):.0f}), reported on the rest; {len(reserved)} "
          "reserved gold questions ($SOMA_DATA_DIR/s1_labels/reserved_questions.txt) never calibrate, as in replay")
    print(f"# point: the paper's rule; bound: {bound.describe()}, each bound at {100 * args.confidence:g} %, "
          "the accuracy guard on the upper bound of the accuracy lost")
    print("# every figure: the reported half at the chosen h against vanilla (no takeover), in points (tokens in %), "
          "as mean [5th, 95th percentile] over the splits; FA > +2 pts: share of splits where false abstention rose "
          "by more than 2 points")
    print()
    print(rules_table(s, groups, ["point", "bound"]))
    if sweep:
        print()
        print("the bound rule's confidence level: the worst group's share of splits with FA > +2 points, and each "
              "group's mean dAbs / dFA (points)")
        print()
        print(levels_table(s, groups, rules))
    print()
    print("every h held fixed over the same splits (what a rule choosing h could have had): mean dAbs / mean dFA "
          "(points) / share of splits with FA > +2 points")
    print()
    print(fixed_table(s, groups))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
