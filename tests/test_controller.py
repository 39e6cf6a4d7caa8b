"""The paper's Appendix F case arithmetic, number for number."""

import math

import pytest

from soma_local.engine.controller import Action, Controller, evidence


def run(h, probs, **kw):
    c = Controller(h, **kw)
    return [c.update(p) for p in probs]


def test_case1_umwp_r1_takeover_after_two_post_reminder_scans():
    d = run(3, [0.22, 0.75, 0.87, 0.90])
    assert d[0].action is Action.NONE and d[0].score == 0
    assert d[1].action is Action.REMIND and d[1].score == pytest.approx(1.10, abs=0.005)
    assert d[2].action is Action.NONE and d[2].score == pytest.approx(1.90, abs=0.005)
    assert d[3].action is Action.TAKEOVER and d[3].score == pytest.approx(4.10, abs=0.005)


def test_case2_sum_qwen_takeover_at_h4():
    d = run(4, [0.63, 0.85, 0.88, 0.94])
    assert d[0].action is Action.REMIND and d[0].score == pytest.approx(0.53, abs=0.005)
    assert [round(x.score, 2) for x in d[1:]] == [1.73, 3.73, 6.48]
    assert [x.action for x in d[1:]] == [Action.NONE, Action.NONE, Action.TAKEOVER]


def test_case3_low_scans_absorbed_then_reminder_only():
    d = run(3, [0.49, 0.35, 0.67])
    assert [x.score for x in d[:2]] == [0, 0]
    assert d[2].action is Action.REMIND and d[2].score == pytest.approx(0.71, abs=0.005)


def test_case4_math_r1_takeover_at_h15():
    d = run(1.5, [0.03, 0.66, 0.91])
    assert d[1].action is Action.REMIND and d[1].score == pytest.approx(0.66, abs=0.005)
    assert d[2].action is Action.TAKEOVER and d[2].score == pytest.approx(2.31, abs=0.005)


def test_case5_counterfactual_scan_would_have_lowered_s():
    # Without the takeover (h = inf, remind-only), the next scan p=0.19 drops S to 0.28.
    d = run(math.inf, [0.08, 0.62, 0.85, 0.19])
    assert d[1].action is Action.REMIND and d[1].score == pytest.approx(0.49, abs=0.005)
    assert d[2].score == pytest.approx(1.73, abs=0.005) and d[2].action is Action.NONE
    assert d[3].score == pytest.approx(0.28, abs=0.005) and d[3].in_episode
    assert run(1.5, [0.08, 0.62, 0.85])[2].action is Action.TAKEOVER


def test_case6_sum_qwen_false_refusal_five_moderate_scans():
    d = run(4, [0.43, 0.47, 0.64, 0.66, 0.70, 0.69, 0.71, 0.72])
    assert d[2].action is Action.REMIND and d[2].score == pytest.approx(0.58, abs=0.005)
    assert [round(x.score, 2) for x in d[3:]] == [0.66, 1.51, 2.31, 3.21, 4.15]
    assert d[-1].action is Action.TAKEOVER and all(x.action is Action.NONE for x in d[3:-1])


def test_episode_ends_at_zero_and_a_new_rise_reminds_again():
    d = run(10, [0.8, 0.2, 0.7])
    assert d[0].action is Action.REMIND
    assert d[1].score == 0 and not d[1].in_episode and d[1].action is Action.NONE
    assert d[2].action is Action.REMIND


def test_failed_scan_adds_no_evidence():
    c = Controller(3)
    c.update(0.75)
    before = c.score
    d = c.update(None)
    assert d.action is Action.NONE and d.evidence is None and c.score == before and c.in_episode


def test_no_reminder_mode_takes_over_directly():
    d = run(2, [0.75, 0.75], remind=False)
    assert [x.action for x in d] == [Action.NONE, Action.TAKEOVER]
    assert d[1].score == pytest.approx(2 * evidence(0.75))


def test_threshold_must_be_positive():
    with pytest.raises(ValueError):
        Controller(0)
