"""The Pareto plots and the text tables render from metrics alone, and read as a reader needs."""

import math

import pytest

from soma_local.calibration.metrics import Metrics
from soma_local.calibration.plotting import axis_span, pareto_front, place_labels
from soma_local.calibration.report import TABLE_KEY, pareto_plot, replay_plot, table


def _m(tokens, acc, abst, fa):
    return Metrics(n=4, n_answerable=2, n_unanswerable=2, accuracy=acc, abstention=abst, false_abstention=fa,
                   tokens=tokens, takeovers=0.5)


def test_table():
    m = _m(100, 0.5, 0.75, 0.25)
    text = table([("vanilla", _m(200, 1, 0.5, 0)), ("h=1", m)], baseline=_m(200, 1, 0.5, 0))
    assert "h=1" in text and "-50" in text and "75.0" in text


def test_pareto_plot_writes_a_png(tmp_path):
    grid = {1.0: _m(100, 0.5, 0.75, 0.25), 2.0: _m(150, 0.5, 0.6, 0.1), math.inf: _m(200, 1, 0.5, 0)}
    path = pareto_plot({"umwp / M": grid}, {"umwp / M": _m(210, 1, 0.5, 0)}, "unanswerable", tmp_path / "p.png", "t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_replay_plot_renders_from_the_results_file_content(tmp_path):
    grid = {"1": _m(100, 0.5, 0.75, 0.25).model_dump(), "inf": _m(200, 1, 0.5, 0).model_dump()}
    results = {"s1": "classifier:x", "monitor": "unanswerable", "objective": "abstention", "controller": "no_reminder",
               "groups": {"umwp / M": {"h": "1", "vanilla": _m(200, 1, 0.5, 0).model_dump(), "grid": grid}}}
    path = replay_plot(results, tmp_path / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_key_explains_every_column():
    for column in ("Acc%", "Abs%", "FA%", "TO%", "Tok", "dTok%"):
        assert column in TABLE_KEY


def test_pareto_front_keeps_the_undominated_points_by_tokens():
    points = [(0, 40), (-1, 30), (2, 70), (13, 40), (25, 70)]
    assert pareto_front(points) == [1, 0, 2]  # (25, 70) is beaten by (2, 70)
    assert pareto_front([(0, 70), (-1, 80), (25, 50)], higher_is_better=False) == [1, 0, 2]
    assert pareto_front([(3, 5)]) == [0]


@pytest.mark.parametrize("values", [[0, 0, 0], [100, 100], [42.0]])
def test_axis_span_never_collapses_and_keeps_points_inside(values):
    low, high = axis_span(values, lo=0, hi=100)
    assert high - low >= 10
    assert low < min(values) and max(values) < high
    assert low > -1 and high < 101  # only a sliver of padding past a rate's bounds


def test_place_labels_drops_labels_that_would_overprint(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    labels = [(5, 5 + 0.01 * i, f"h={i}", "k") for i in range(12)] + [(9.9, 9.9, "wider than the whole panel " * 3, "k")]
    dropped = place_labels(ax, labels)
    kept = [t for t in ax.texts]
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in kept]
    frame = ax.get_window_extent(renderer)
    assert 1 <= len(kept) <= 4 and len(kept) + len(dropped) == len(labels)  # four free corners at most
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    assert "wider than the whole panel " * 3 in dropped
    plt.close(fig)
