import numpy as np
import pytest

from soma_local.s1.temperature import auroc, brier, ece, evaluate, fit_temperature, nll, scaled_probs


def _synthetic(true_t: float, n: int = 20000, seed: int = 0):
    """Labels drawn from sigmoid(z / true_t): the NLL-optimal temperature is true_t."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 4.0, n)
    y = (rng.random(n) < scaled_probs(z, true_t)).astype(float)
    return z, y


@pytest.mark.parametrize("true_t", [0.5, 1.0, 2.5, 6.0])
def test_fit_recovers_known_temperature(true_t):
    z, y = _synthetic(true_t)
    assert fit_temperature(z, y) == pytest.approx(true_t, rel=0.08)


def test_fit_lowers_nll_and_ece_of_overconfident_logits():
    z, y = _synthetic(3.0)
    t = fit_temperature(z, y)
    assert nll(z, y, t) < nll(z, y, 1.0)
    assert ece(scaled_probs(z, t), y) < ece(scaled_probs(z, 1.0), y) / 3


def test_fit_takes_soft_labels():
    rng = np.random.default_rng(1)
    z = rng.normal(0, 3, 5000)
    assert fit_temperature(z, scaled_probs(z, 2.0)) == pytest.approx(2.0, rel=0.01)


def test_fit_rejects_mismatched_input():
    with pytest.raises(ValueError, match="equal, non-empty"):
        fit_temperature([1.0, 2.0], [1.0])


def test_auroc_known_values():
    assert auroc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert auroc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    assert auroc([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1]) == 0.5
    # one of the four (pos, neg) pairs is mis-ordered
    assert auroc([0.1, 0.6, 0.5, 0.9], [0, 0, 1, 1]) == 0.75
    assert np.isnan(auroc([0.1, 0.2], [1, 1]))


def test_ece_and_brier_known_values():
    assert ece([0.9] * 10, [1] * 9 + [0]) == pytest.approx(0.0)
    assert ece([0.9] * 10, [1] * 5 + [0] * 5) == pytest.approx(0.4)
    assert brier([1.0, 0.0], [1, 0]) == 0.0
    assert brier([0.5, 0.5], [1, 0]) == 0.25


def test_evaluate_counts_soft_labels_at_one_half():
    result = evaluate([0.2, 0.7, 0.9], [0.35, 0.5, 0.95])
    assert (result.n, result.positives) == (3, 2)
