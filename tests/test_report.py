"""The Pareto plot and the text table render from metrics alone."""

import math

from soma_local.metrics import Metrics
from soma_local.report import pareto_plot, quality, table


def _m(tokens, acc, abst, fa):
    return Metrics(n=4, n_answerable=2, n_unanswerable=2, accuracy=acc, abstention=abst, false_abstention=fa,
                   tokens=tokens, takeovers=0.5)


def test_quality_and_table():
    m = _m(100, 0.5, 0.75, 0.25)
    assert quality(m, "overthinking") == 0.5 and quality(m, "unanswerable") == 0.5
    text = table([("vanilla", _m(200, 1, 0.5, 0)), ("h=1", m)], baseline=_m(200, 1, 0.5, 0))
    assert "h=1" in text and "-50" in text and "75.0" in text


def test_pareto_plot_writes_a_png(tmp_path):
    grid = {1.0: _m(100, 0.5, 0.75, 0.25), 2.0: _m(150, 0.5, 0.6, 0.1), math.inf: _m(200, 1, 0.5, 0)}
    path = pareto_plot({"umwp / M": grid}, {"umwp / M": _m(210, 1, 0.5, 0)}, "unanswerable", tmp_path / "p.png", "t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
