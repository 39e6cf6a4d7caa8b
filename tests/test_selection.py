"""Choosing h knowing how few questions decided it: the confidence-bound rule on synthetic per-question
outcomes (no model), the calibration file's evidence, and the run header that shows it."""

import io
import math
import re

import numpy as np
import pytest

from soma_local.calibration.metrics import ItemResult
from soma_local.calibration.report import effects_table
from soma_local.calibration.selection import Selection, aligned, resample_weights
from soma_local.calibration.thresholds import (
    CalibrationEntry, Objective, choose_threshold, load_calibration, resolve_thresholds, save_entry,
)
from soma_local.engine.monitors import resolve_monitors
from soma_local.errors import DataError

ABSTENTION = Objective(kind="abstention")
POINT = Selection(rule="point")


def _set(n_answerable: int, n_unanswerable: int, *, abstain_unanswerable: int = 0, abstain_answerable: int = 0,
         tokens: int = 1000) -> list[ItemResult]:
    """A calibration set under one h: the first ``abstain_*`` questions of each kind abstain (a takeover,
    which also stops early: fewer tokens); every other answerable question is answered right."""
    out = []
    for i in range(n_answerable):
        abstained = i < abstain_answerable
        out.append(ItemResult(id=f"a{i}", answerable=True, abstained=abstained, correct=not abstained,
                              tokens=tokens // 4 if abstained else tokens, takeover=abstained))
    for i in range(n_unanswerable):
        abstained = i < abstain_unanswerable
        out.append(ItemResult(id=f"u{i}", answerable=False, abstained=abstained, correct=False,
                              tokens=tokens // 4 if abstained else tokens, takeover=abstained))
    return out


def test_a_gain_of_one_question_in_68_is_not_taken():
    """One more unanswerable question abstained on, nothing lost: the point rule takes it, the bound rule
    sees that a resample without that question (about a third of them) gains nothing."""
    grid = {2.0: _set(34, 34, abstain_unanswerable=1), math.inf: _set(34, 34)}
    assert choose_threshold(grid, ABSTENTION, POINT).threshold == 2.0
    choice = choose_threshold(grid, ABSTENTION)
    assert choice.threshold == math.inf
    gain = choice.candidates[0].effects.gain
    assert gain.point == pytest.approx(1 / 34) and gain.low == 0.0
    assert choice.evidence().startswith("no h beats h=inf with 90 % confidence on these 68 questions (the best, h=2: "
                                        "gain +2.9 [+0.0, +5.9] points, FA +0.0 [+0.0, +0.0]")


def test_a_gain_of_15_in_68_is_taken():
    choice = choose_threshold({2.0: _set(34, 34, abstain_unanswerable=15), math.inf: _set(34, 34)}, ABSTENTION)
    assert choice.threshold == 2.0 and choice.why_reference() is None
    gain = choice.chosen.effects.gain
    assert gain.point == pytest.approx(15 / 34) and 0.25 < gain.low < gain.point < gain.high
    assert re.fullmatch(r"gain \+44\.1 \[\+\d\d\.\d, \+\d\d\.\d\] points, FA \+0\.0 \[\+0\.0, \+0\.0\] \(90 % bounds\)",
                        choice.evidence())


def test_the_accuracy_guard_uses_the_bound_not_the_point():
    """h=1 loses 2 of 40 answerable questions (5 points, exactly --delta 0.05): the point guard admits it, but
    resamples that draw those questions more often lose more, so the bound guard keeps it out and takes
    the h that loses nothing; the tolerance the refusal names admits it."""
    objective = Objective(kind="abstention", delta=0.05)
    grid = {1.0: _set(40, 28, abstain_answerable=2, abstain_unanswerable=20),
            4.0: _set(40, 28, abstain_unanswerable=10), math.inf: _set(40, 28)}
    assert choose_threshold(grid, objective, POINT).threshold == 1.0
    choice = choose_threshold(grid, objective)
    assert choice.threshold == 4.0
    refused = choice.refused()
    assert refused.startswith("refused h=1 (gain ") and "2 of 40 answerable question(s), up to " in refused
    assert "points lost at the 90 % bound; --delta" in refused
    table = effects_table(choice).splitlines()
    assert table[3].startswith("h=1 ") and table[3].endswith("out") and table[4].startswith("h=4 *")
    upper = float(re.search(r"--delta (\d\.\d+) would admit it", refused).group(1))
    assert upper > 0.05
    assert choose_threshold(grid, objective.model_copy(update={"delta": upper})).threshold == 1.0


def test_the_confidence_level_decides_how_much_evidence_is_enough():
    """Three more of 34 unanswerable questions: a resample misses all three about 4 % of the time, so a
    90 % bound is above 0 and a 97.5 % bound is not."""
    grid = {3.0: _set(34, 34, abstain_unanswerable=3), math.inf: _set(34, 34)}
    assert choose_threshold(grid, ABSTENTION, Selection(confidence=0.9)).threshold == 3.0
    assert choose_threshold(grid, ABSTENTION, Selection(confidence=0.975)).threshold == math.inf


def test_false_abstentions_are_charged_in_every_resample_they_are_drawn():
    """A gain that costs as many false abstentions as it wins abstentions is no gain at any level, and its
    FA interval shows the cost."""
    choice = choose_threshold({1.0: _set(34, 34, abstain_answerable=5, abstain_unanswerable=5),
                               math.inf: _set(34, 34)}, ABSTENTION)
    assert choice.threshold == math.inf
    fa = choice.candidates[0].effects.false_abstention
    assert fa.point == pytest.approx(5 / 34) and fa.low > 0
    assert choice.refused() is None  # the guard refused it, but it never beat h=inf by the bound either


def test_resampling_is_paired_stratified_and_seeded():
    answerable = np.array([True] * 30 + [False] * 10)
    w = resample_weights(answerable, Selection(resamples=500))
    assert w.shape == (501, 40) and (w[0] == 1).all()  # row 0: the set itself
    assert (w[1:, :30].sum(axis=1) == 30).all() and (w[1:, 30:].sum(axis=1) == 10).all()
    assert (w == resample_weights(answerable, Selection(resamples=500))).all()
    assert not (w == resample_weights(answerable, Selection(resamples=500, seed=1))).all()
    # Paired: an h that changes nothing has no spread at all, however much the questions differ.
    same = _set(34, 34, abstain_unanswerable=12)
    choice = choose_threshold({2.0: same, math.inf: same}, ABSTENTION)
    assert choice.candidates[0].effects.gain.model_dump() == {"point": 0.0, "low": 0.0, "high": 0.0}


def test_outcomes_must_be_aligned_by_question():
    ref = _set(3, 3)
    with pytest.raises(DataError, match="same order"):
        aligned({2.0: list(reversed(ref))}, ref)
    with pytest.raises(DataError, match="same order"):
        choose_threshold({2.0: ref[:-1], math.inf: ref}, ABSTENTION)


def test_fewest_tokens_gain_is_tokens_saved_with_the_accuracy_change_beside_it():
    right = [ItemResult(id=str(i), answerable=True, abstained=False, correct=True, tokens=900) for i in range(30)]
    early = [r.model_copy(update={"tokens": 300, "takeover": True}) for r in right]
    choice = choose_threshold({1.0: early, math.inf: right}, Objective(kind="fewest_tokens"))
    assert choice.threshold == 1.0
    assert choice.evidence() == ("gain +600 [+600, +600] tokens/question, Acc +0.0 [+0.0, +0.0], "
                                 "FA +0.0 [+0.0, +0.0] (90 % bounds)")


def _entry() -> dict:
    """Where a calibration was made: what ``CalibrationEntry.from_choice`` adds to the choice."""
    return dict(s1="classifier:m", s2="b.gguf", monitor="unanswerable", scan_interval=256, datasets=["c.jsonl"],
                n_questions=68, results="r.json")


def test_the_calibration_file_keeps_the_evidence_and_old_files_still_load(tmp_path):
    path = tmp_path / "thresholds.json"
    old = ('{"version": 1, "entries": [{"s1": "classifier:m", "s2": "b.gguf", "monitor": "unanswerable", '
           '"threshold": 4.0, "objective": {"kind": "abstention", "delta": 0.0, "fa_weight": 1.0}, '
           '"scan_interval": 256, "datasets": ["c.jsonl"], "n_questions": 68, "results": "r.json", '
           '"created": "2025-01-01T00:00:00"}]}')
    path.write_text(old)
    (entry,) = load_calibration(path).entries
    assert entry.threshold == 4.0 and entry.selection is None and entry.evidence is None

    choice = choose_threshold({4.0: _set(34, 34, abstain_unanswerable=15), math.inf: _set(34, 34)}, ABSTENTION)
    save_entry(path, CalibrationEntry.from_choice(choice, **_entry()))
    (entry,) = load_calibration(path).entries
    assert entry.threshold == 4.0 and entry.selection == Selection() and entry.effects == choice.chosen.effects
    assert entry.evidence == choice.evidence()

    (monitor,) = resolve_monitors(["unanswerable"])
    source = resolve_thresholds([monitor], {}, load_calibration(path), path, "classifier:m", "b.gguf", "soma")["unanswerable"]
    assert source.h == 4.0 and source.evidence == choice.evidence()
    assert source.describe() == f"{source.source}; {choice.evidence()}"


def test_the_run_header_shows_the_evidence_beside_h_and_its_source():
    from soma_local.calibration.thresholds import ThresholdSource
    from soma_local.cli.view import LiveView  # what soma run prints its header with

    out, err = io.StringIO(), io.StringIO()
    sources = {"unanswerable": ThresholdSource(h=4.0, source="calibration t.json, 68 questions, 2025-01-01",
                                               evidence="gain +5.2 [+1.1, +9.8] points, FA +0.0 [-1.5, +1.5] (90 % bounds)"),
               "overthinking": ThresholdSource(h=1.5, source="monitor default")}
    LiveView(out, err).header("q?", "S2 x", sources, None)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("takeover thresholds h:"))
    assert line == ("takeover thresholds h: unanswerable 4 (calibration t.json, 68 questions, 2025-01-01; gain +5.2 "
                    "[+1.1, +9.8] points, FA +0.0 [-1.5, +1.5] (90 % bounds)) | overthinking 1.5 (monitor default)")
