"""Tables and the Pareto plot for calibration and replay results (tokens against quality over h)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from soma_local.calibration.metrics import Metrics

if TYPE_CHECKING:
    from soma_local.calibration.thresholds import Choice

# Paper Table 3 (unanswerable, SOMA with Jev as S1; §5 text): abstention on unanswerable questions,
# per benchmark and averaged, vanilla -> SOMA, and token change. The shared traces are greedy with a
# 7,000-token cap, the paper's runs sampled with a 32,768-token limit: compare trends, not digits.
# Replay prints them beside a monitor with the statement they were measured with (DESIGN.md's).
PAPER_UNANSWERABLE_STATEMENT = (
    "The reasoning has noticed that the problem may be missing information or have contradictory conditions, "
    "but it is still trying to reach a definite answer, for example by making an assumption."
)
PAPER_UNANSWERABLE = {
    ("sum", "Qwen3-8B"): "Abs 60% -> 87%",
    ("umwp", "Qwen3-8B"): "Abs 81% -> 88%",
    ("avg", "Qwen3-8B"): "Abs 70.5% -> 87.2%, FA 2.4% -> 8.0%, tokens -32%",
    ("sum", "DeepSeek-R1-Distill-Llama-8B"): "Abs 28% -> 70%",
    ("umwp", "DeepSeek-R1-Distill-Llama-8B"): "Abs 48% -> 49%, tokens -59%",
    ("avg", "DeepSeek-R1-Distill-Llama-8B"): "Abs 38.2% -> 59.4%, FA 2.1% -> 4.8%, tokens -48%",
}


# Printed once under the tables (``table``) of a replay or calibration run.
TABLE_KEY = """\
columns: n questions; Acc% accuracy on the answerable ones; Abs% abstention, the share of unanswerable
questions answered "I don't know" (higher is better); FA% false abstention, the share of answerable
questions abstained on (lower is better); TO% share of questions S1 took over; Tok mean S2 tokens
generated per question; dTok% change of Tok against the baseline: vanilla, or h=inf (no takeover) in a
calibration grid; "-": no such questions in the set"""


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def table(rows: Sequence[tuple[str, Metrics]], baseline: Metrics | None = None) -> str:
    """Fixed-width text table; token change is relative to ``baseline`` when given."""
    head = f"{'setting':<22}{'n':>5}{'Acc%':>7}{'Abs%':>7}{'FA%':>7}{'TO%':>6}{'Tok':>8}{'dTok%':>7}"
    lines = [head, "-" * len(head)]
    for name, m in rows:
        change = "-" if baseline is None or not baseline.tokens else f"{100 * (m.tokens / baseline.tokens - 1):+.0f}"
        lines.append(
            f"{name:<22}{m.n:>5}{pct(m.accuracy):>7}{pct(m.abstention):>7}{pct(m.false_abstention):>7}"
            f"{100 * m.takeovers:>6.0f}{m.tokens:>8.0f}{change:>7}"
        )
    return "\n".join(lines)


def h_label(h: float) -> str:
    return "inf" if math.isinf(h) else f"{h:g}"


def effects_table(choice: Choice) -> str:
    """Every h's effects against h = inf on the calibration questions, with their bounds: what the rule
    saw. ``*`` marks the chosen h; "out" in the guard column an h whose accuracy loss (its upper bound,
    under the bound rule) exceeds --delta."""
    tokens = choice.objective.kind == "fewest_tokens"
    gain = "gain (tok/question)" if tokens else "gain (points)"
    head = f"{'setting':<12}{gain:<24}{'dAcc (points)':<24}{'dFA (points)':<24}guard"
    lines = [f"effects against h=inf, each bound at {choice.level}; rule: {choice.selection.describe()}", head,
             "-" * len(head)]
    for c in choice.candidates:
        e = c.effects
        cells = [e.gain.text(1.0, 0) if tokens else e.gain.text()]
        cells += ["-" if x is None else x.text() for x in (e.accuracy, e.false_abstention)]
        mark = " *" if c.threshold == choice.threshold else ""
        row = f"{'h=' + h_label(c.threshold) + mark:<12}" + "".join(f"{x:<24}" for x in cells)
        lines.append(row + "out" if not c.eligible else row.rstrip())
    return "\n".join(lines)


def _panels(objective: str) -> list[tuple[str, str, bool]]:
    """(Metrics field, y label, higher is better) per panel: a monitor calibrated for abstention gets
    abstention and, beside it, the false abstention it costs on answerable questions."""
    if objective == "fewest_tokens":
        return [("accuracy", "accuracy (%)", True)]
    return [("abstention", "abstention on unanswerable (%)", True),
            ("false_abstention", "false abstention on answerable (%)", False)]


def _h_labels(hs: Sequence[float], points: Sequence[tuple[float, float]], marked: float | None) -> list[tuple[int, str]]:
    """(index of a point, label) per distinct point, thresholds that land on one point joined
    (``h=1..3``); the marked h first, then the ends of the line, then the rest."""
    same: dict[tuple[float, float], list[int]] = {}
    for i, point in enumerate(points):
        same.setdefault(point, []).append(i)
    out = []
    for members in same.values():
        text = h_label(hs[members[0]]) if len(members) == 1 else f"{h_label(hs[members[0]])}..{h_label(hs[members[-1]])}"
        out.append((members[-1], f"h={text}"))
    first = {i for i, _ in out if marked is not None and any(hs[j] == marked for j in same[points[i]])}
    ends = {out[0][0], out[-1][0]}
    return sorted(out, key=lambda item: (item[0] not in first, item[0] not in ends, item[0]))


def pareto_plot(
    series: Mapping[str, Mapping[float, Metrics]],
    vanilla: Mapping[str, Metrics],
    objective: str,
    path: Path,
    title: str,
    chosen: Mapping[str, float] | None = None,
) -> Path:
    """Quality against mean S2 tokens over h, one coloured line per series (vanilla as a star of its
    colour, the ``chosen`` h ringed). Points are labelled with their h where a label fits clear of
    the others; the legend sits below the panels so it covers no point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from soma_local.calibration.plotting import axis_span, place_labels

    panels = _panels(objective)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 5.2), squeeze=False)
    chosen = chosen or {}
    handles, to_label = [], []
    for ax, (field, ylabel, higher) in zip(axes[0], panels):
        labels, drawn = [], []
        for i, (label, grid) in enumerate(series.items()):
            colour = f"C{i}"
            hs = [h for h in sorted(grid) if getattr(grid[h], field) is not None]
            if not hs:
                continue  # e.g. no unanswerable questions in this series
            pts = [(grid[h].tokens, 100 * getattr(grid[h], field)) for h in hs]
            ax.plot(*zip(*pts), "o-", color=colour, ms=4, lw=1.3, zorder=2)
            drawn += pts
            mark = chosen.get(label)
            if mark in grid and getattr(grid[mark], field) is not None:
                ax.plot([grid[mark].tokens], [100 * getattr(grid[mark], field)], "o", ms=11, mfc="none",
                        mec=colour, mew=1.6, zorder=3)
            v = vanilla.get(label)
            at_vanilla = v is not None and getattr(v, field) is not None and (v.tokens, 100 * getattr(v, field))
            labels += [(*pts[j], text + (" = vanilla" if pts[j] == at_vanilla else ""), colour)
                       for j, text in _h_labels(hs, pts, mark)]
            if v is not None and getattr(v, field) is not None:
                ax.plot([v.tokens], [100 * getattr(v, field)], "*", color=colour, ms=13, mec="black", mew=0.6, zorder=4)
                drawn.append((v.tokens, 100 * getattr(v, field)))
        if not drawn:
            ax.set_visible(False)
            continue
        ax.set_ylim(*axis_span([y for _, y in drawn], lo=0, hi=100))
        ax.set_xlim(*axis_span([x for x, _ in drawn], lo=0, min_span=0.1 * max(x for x, _ in drawn) or 1))
        ax.set_xlabel("mean S2 tokens per question")
        ax.set_ylabel(ylabel + ("\nhigher is better" if higher else "\nlower is better"), fontsize=9)
        ax.grid(alpha=0.3)
        to_label.append((ax, labels, drawn))
    for i, label in enumerate(series):
        handles.append(Line2D([], [], color=f"C{i}", marker="o", ms=4, label=label))
    handles.append(Line2D([], [], color="grey", marker="o", ms=4, label="SOMA at each threshold h (labelled h=...)"))
    if vanilla:
        handles.append(Line2D([], [], ls="", marker="*", ms=12, color="grey", mec="black", mew=0.6,
                              label="vanilla (no monitor), same colour as its line"))
    if chosen:
        handles.append(Line2D([], [], ls="", marker="o", ms=11, mfc="none", mec="grey", mew=1.6, label="chosen h"))
    fig.suptitle(title, fontsize=11)
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=8, frameon=False)
    rows = math.ceil(len(handles) / 2)
    fig.tight_layout(rect=(0, 0.035 * rows + 0.02, 1, 0.96))
    for ax, labels, drawn in to_label:  # after the layout, so the overlap check sees final positions
        place_labels(ax, labels, avoid=drawn)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")  # the legend whole, however long the series names
    plt.close(fig)
    return path


def replay_plot(results: dict, path: Path) -> Path:
    """The plot of one replay from the content of its ``replay_results.json``, so a committed result
    re-renders without running S1 again (``benchmarks/replot_replay.py``)."""
    groups = results["groups"]
    series = {label: {float(h): Metrics.model_validate(m) for h, m in g["grid"].items()} for label, g in groups.items()}
    vanilla = {label: Metrics.model_validate(g["vanilla"]) for label, g in groups.items()}
    chosen = {label: float(g["h"]) for label, g in groups.items()}
    title = f"replay: {results['monitor']} monitor, S1 {results['s1']}, {results['controller']} controller"
    return pareto_plot(series, vanilla, results["objective"], path, title, chosen)
