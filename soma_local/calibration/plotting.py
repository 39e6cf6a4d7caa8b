"""What every token-quality plot needs so a reader can trust it at a glance.

The frontier and the axis span are pure; ``place_labels`` asks matplotlib how big each label is and
keeps only labels that overlap neither an earlier label nor the panel's edge, so text never
overprints or spills into a neighbouring panel. A label that does not fit is dropped, not moved far
from its point: which point it named would otherwise be a guess.
"""

from __future__ import annotations

import math
from typing import Sequence


def pareto_front(points: Sequence[tuple[float, float]], higher_is_better: bool = True) -> list[int]:
    """Indices of the points no other point beats on both axes (fewer tokens on x, better y), by x.
    Equal points are all kept: they are the same trade-off."""

    def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
        better_y = a[1] >= b[1] if higher_is_better else a[1] <= b[1]
        return a[0] <= b[0] and better_y and a != b

    front = [i for i, p in enumerate(points) if not any(beats(q, p) for q in points)]
    return sorted(front, key=lambda i: (points[i][0], -points[i][1] if higher_is_better else points[i][1]))


def axis_span(values: Sequence[float], lo: float | None = None, hi: float | None = None,
              min_span: float = 10.0) -> tuple[float, float]:
    """Limits that show every value with a margin and never collapse: points that all share one
    value get ``min_span`` around it, kept inside ``lo``..``hi`` (a rate's natural bounds) but for a
    sliver of padding, so a marker on a bound is drawn whole."""
    vmin, vmax = min(values), max(values)
    margin = max(0.06 * (vmax - vmin), (min_span - (vmax - vmin)) / 2)
    low, high = vmin - margin, vmax + margin
    if lo is not None and low < lo:
        low, high = lo, max(high, lo + min_span)
    if hi is not None and high > hi:
        low, high = max(min(low, hi - min_span), lo if lo is not None else -math.inf), hi
    pad = 0.03 * (high - low)
    return low - pad, high + pad


# Offsets (points) tried around a marker, in order: right-above, right-below, left-above, left-below.
_OFFSETS = ((5, 4), (5, -11), (-5, 4), (-5, -11))


def place_labels(ax, labels: Sequence[tuple[float, float, str, str]], avoid: Sequence[tuple[float, float]] = (),
                 fontsize: float = 7) -> list[str]:
    """Annotate (x, y, text, colour) in priority order, clear of the markers at ``avoid`` (data
    coordinates); returns the texts that found no free place. Call after the axis limits are final."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    r = 3.5 * fig.dpi / 72  # a marker's half-width in pixels
    taken = [Bbox.from_extents(px - r, py - r, px + r, py + r) for px, py in ax.transData.transform(list(avoid))] \
        if avoid else []
    dropped = []
    for x, y, text, colour in labels:
        for dx, dy in _OFFSETS:
            note = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize,
                               color=colour, ha="left" if dx > 0 else "right", annotation_clip=True)
            box = note.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in taken):
                taken.append(box.expanded(1.05, 1.15))
                break
            note.remove()
        else:
            dropped.append(text)
    return dropped
