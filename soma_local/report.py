"""Tables and the Pareto plot for calibration and replay results (tokens against quality over h)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

from soma_local.metrics import Metrics

# Paper Table 3 (unanswerable, SOMA with Jev as S1; §5 text): abstention on unanswerable questions,
# per benchmark and averaged, vanilla -> SOMA, and token change. The shared traces are greedy with a
# 7,000-token cap, the paper's runs sampled with a 32,768-token limit: compare trends, not digits.
PAPER_UNANSWERABLE = {
    ("sum", "Qwen3-8B"): "Abs 60% -> 87%",
    ("umwp", "Qwen3-8B"): "Abs 81% -> 88%",
    ("avg", "Qwen3-8B"): "Abs 70.5% -> 87.2%, FA 2.4% -> 8.0%, tokens -32%",
    ("sum", "DeepSeek-R1-Distill-Llama-8B"): "Abs 28% -> 70%",
    ("umwp", "DeepSeek-R1-Distill-Llama-8B"): "Abs 48% -> 49%, tokens -59%",
    ("avg", "DeepSeek-R1-Distill-Llama-8B"): "Abs 38.2% -> 59.4%, FA 2.1% -> 4.8%, tokens -48%",
}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def quality(m: Metrics, monitor: str) -> float:
    """The plot's y axis: accuracy for overthinking; abstention minus false abstention otherwise
    (a missing group counts 0, so an answerable-only set shows -FA)."""
    if monitor == "overthinking":
        return m.accuracy or 0.0
    return (m.abstention or 0.0) - (m.false_abstention or 0.0)


def quality_label(monitor: str) -> str:
    return "accuracy" if monitor == "overthinking" else "abstention - false abstention"


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


def pareto_plot(
    series: Mapping[str, Mapping[float, Metrics]],
    vanilla: Mapping[str, Metrics],
    monitor: str,
    path: Path,
    title: str,
) -> Path:
    """One line per series over h (each point labelled with its h), vanilla as a star of the same
    colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    for i, (label, grid) in enumerate(series.items()):
        colour = f"C{i}"
        hs = sorted(grid)
        xs = [grid[h].tokens for h in hs]
        ys = [quality(grid[h], monitor) for h in hs]
        ax.plot(xs, ys, "o-", color=colour, label=f"{label} (SOMA over h)")
        points: dict[tuple[float, float], list[float]] = {}  # thresholds that land on the same point
        for h, x, y in zip(hs, xs, ys):
            points.setdefault((x, y), []).append(h)
        for (x, y), same in points.items():
            text = h_label(same[0]) if len(same) == 1 else f"{h_label(same[0])}..{h_label(same[-1])}"
            ax.annotate(f"h={text}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=colour)
        if label in vanilla:
            v = vanilla[label]
            ax.plot([v.tokens], [quality(v, monitor)], "*", color=colour, markersize=15, label=f"{label} vanilla")
    ax.set_xlabel("mean S2 tokens")
    ax.set_ylabel(quality_label(monitor))
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
