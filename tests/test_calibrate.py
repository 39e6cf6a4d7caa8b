"""Threshold choice and the calibration file: pure, over per-question outcomes (the paper's point rule
here; the confidence-bound rule in test_selection.py)."""

import json
import math

import pytest

from soma_local.calibration.thresholds import (
    CalibrationEntry,
    Objective,
    choose_threshold,
    monitor_objective,
    load_calibration,
    resolve_thresholds,
    save_entry,
)
from soma_local.calibration.selection import Selection
from soma_local.errors import DataError
from soma_local.calibration.metrics import ItemResult, summarize
from soma_local.engine.monitors import resolve_monitors

POINT = Selection(rule="point")


def _items(spec):
    """spec: (answerable, abstained, correct, tokens) per question."""
    return [ItemResult(id=str(i), answerable=a, abstained=b, correct=c, tokens=t) for i, (a, b, c, t) in enumerate(spec)]


def test_metrics_follow_the_papers_definitions():
    m = summarize(_items([(True, False, True, 100), (True, True, False, 50), (False, True, False, 30),
                          (False, False, False, 20)]))
    assert (m.accuracy, m.false_abstention, m.abstention, m.tokens) == (0.5, 0.5, 0.5, 50)
    only_answerable = summarize(_items([(True, False, True, 10)]))
    assert only_answerable.abstention is None


def test_overthinking_takes_the_fewest_tokens_among_thresholds_that_keep_accuracy():
    grid = {
        0.25: _items([(True, False, False, 100), (True, False, True, 100)]),  # loses a question
        1.0: _items([(True, False, True, 300), (True, False, True, 200)]),
        2.0: _items([(True, False, True, 400), (True, False, True, 300)]),
        math.inf: _items([(True, False, True, 900), (True, False, True, 800)]),
    }
    choice = choose_threshold(grid, Objective(kind="fewest_tokens"), POINT)
    assert choice.threshold == 1.0
    assert [c.eligible for c in choice.candidates] == [False, True, True, True]
    assert choice.refused() == ("refused h=0.25 (100 vs 250 mean tokens): accuracy 100.0 -> 50.0 %, "
                                "1 of 2 answerable question(s); --delta 0.500 would admit it")
    # A tolerance of one question in two lets the cheapest threshold in, and nothing better is refused.
    relaxed = choose_threshold(grid, Objective(kind="fewest_tokens", delta=0.5), POINT)
    assert relaxed.threshold == 0.25 and relaxed.refused() is None


def test_the_refused_setting_named_is_the_guards_nearest_miss():
    """Two settings beat never taking over but lose accuracy: the note names the one a smaller delta admits."""
    ok = (True, False, True, 100)
    grid = {
        0.5: _items([(True, True, False, 10)] * 2 + [ok] * 8 + [(False, True, False, 10)] * 4),  # -2 questions
        1.0: _items([(True, True, False, 10)] + [ok] * 9 + [(False, True, False, 10)] * 3 + [(False, False, False, 10)]),
        math.inf: _items([ok] * 10 + [(False, False, False, 10)] * 4),
    }
    choice = choose_threshold(grid, Objective(kind="abstention"), POINT)
    assert choice.threshold == math.inf
    assert choice.refused() == ("refused h=1 (Abs - FA 65.0 vs 0.0 points): accuracy 100.0 -> 90.0 %, "
                                "1 of 10 answerable question(s); --delta 0.100 would admit it")


def test_unanswerable_maximises_abstention_minus_weighted_false_abstention():
    # (answerable, abstained, correct, tokens): two answerable then two unanswerable questions.
    grid = {
        1.0: _items([(True, True, False, 50), (True, False, True, 90), (False, True, False, 40), (False, True, False, 40)]),
        3.0: _items([(True, True, False, 80), (True, False, True, 90), (False, True, False, 60), (False, False, False, 99)]),
        math.inf: _items([(True, False, False, 90), (True, False, True, 90), (False, False, False, 99), (False, False, False, 99)]),
    }
    assert choose_threshold(grid, Objective(kind="abstention"), POINT).threshold == 1.0  # 1.0 - 0.5 beats 0.5 - 0.5
    # Weighting false abstentions 3x makes taking over not worth it at all.
    assert choose_threshold(grid, Objective(kind="abstention", fa_weight=3.0), POINT).threshold == math.inf


@pytest.mark.parametrize("rule", ["point", "bound"])
def test_ties_go_to_fewer_tokens_then_to_the_larger_threshold(rule):
    same = _items([(True, False, True, 100)] * 3)
    choice = choose_threshold({1.0: same, 2.0: same, math.inf: _items([(True, False, True, 500)] * 3)},
                              Objective(kind="fewest_tokens"), Selection(rule=rule))
    assert choice.threshold == 2.0


def test_objectives_need_a_reference_and_a_known_monitor():
    with pytest.raises(DataError, match="h = inf"):
        choose_threshold({1.0: _items([(True, False, True, 1)])}, Objective(kind="fewest_tokens"))
    (unanswerable,) = resolve_monitors(["unanswerable"])
    with pytest.raises(DataError, match="names no objective"):
        monitor_objective(unanswerable.model_copy(update={"objective": None}))
    assert monitor_objective(unanswerable, delta=0.02) == Objective(kind="abstention", delta=0.02)


def test_calibration_file_round_trip_keyed_by_s1_s2_monitor_and_mode(tmp_path):
    path = tmp_path / "cal" / "thresholds.json"
    base = dict(s1="readout:a.gguf", s2="b.gguf", objective=Objective(kind="fewest_tokens"), scan_interval=256,
                datasets=["calib_easy.jsonl"], n_questions=10, results="r.json")
    save_entry(path, CalibrationEntry(monitor="overthinking", threshold=1.5, **base))
    save_entry(path, CalibrationEntry(monitor="overthinking", threshold=0.5, **base))  # replaces
    save_entry(path, CalibrationEntry(monitor="overthinking", mode="no_reminder", threshold=math.inf, **base))
    cal = load_calibration(path)
    assert len(cal.entries) == 2
    (monitor,) = resolve_monitors(["overthinking"])

    def h(s1, mode):
        return resolve_thresholds([monitor], {}, cal, path, s1, "b.gguf", mode)["overthinking"]

    assert h("readout:a.gguf", "soma").h == 0.5 and h("readout:a.gguf", "no_reminder").h == math.inf
    assert h("other", "soma").source == "monitor default"
    path.write_text("{\"version\": 2}")
    with pytest.raises(DataError, match="thresholds.json"):
        load_calibration(path)


def test_an_h_calibrated_on_another_version_of_the_s1_is_not_used(tmp_path):
    """A retrained S1 keeps its name but not its probability scale: its predecessor's h would mislead."""
    base = dict(s1="classifier:m", s2="b.gguf", monitor="unanswerable", objective=Objective(kind="abstention"),
                scan_interval=256, datasets=["c.jsonl"], n_questions=50, results="r.json", threshold=4.0)
    cal = load_calibration(tmp_path / "none.json")
    cal.entries = [CalibrationEntry(s1_version="aaa", **base)]
    (monitor,) = resolve_monitors(["unanswerable"])
    args = ([monitor.model_copy(update={"default_threshold": 1.5})], {}, cal, tmp_path / "t.json", "classifier:m",
            "b.gguf", "soma")
    same, other = resolve_thresholds(*args, "aaa")["unanswerable"], resolve_thresholds(*args, "bbb")["unanswerable"]
    assert (same.h, same.warning) == (4.0, None)
    assert other.h == 1.5 and other.source == "monitor default"
    assert "another version of classifier:m (aaa, now bbb)" in other.warning
    cal.entries = [CalibrationEntry(**base)]  # written before versions were recorded: taken as it is
    assert resolve_thresholds(*args, "bbb")["unanswerable"].h == 4.0


def test_an_h_calibrated_for_minilm_reader_is_not_used_with_the_default_s1(tmp_path):
    """The default S1 changed from minilm-reader to minilm-statements: entries key on the S1's name, so a
    minilm-reader h (even one from before versions were recorded) never reaches a run with the new default."""
    from soma_local.s1.model_folders import DEFAULT_S1_MODEL

    base = dict(s2="b.gguf", monitor="unanswerable", objective=Objective(kind="abstention"), scan_interval=256,
                datasets=["c.jsonl"], n_questions=50, results="r.json", threshold=4.0)
    cal = load_calibration(tmp_path / "none.json")
    cal.entries = [CalibrationEntry(s1="classifier:minilm-reader", **base)]
    (monitor,) = resolve_monitors(["unanswerable"])
    args = ([monitor.model_copy(update={"default_threshold": 1.5})], {}, cal, tmp_path / "t.json")
    default = resolve_thresholds(*args, f"classifier:{DEFAULT_S1_MODEL}", "b.gguf", "soma", "2612609d1e10")
    assert DEFAULT_S1_MODEL != "minilm-reader" and default["unanswerable"].h == 1.5
    assert default["unanswerable"].source == "monitor default" and default["unanswerable"].warning is None
    assert resolve_thresholds(*args, "classifier:minilm-reader", "b.gguf", "soma", "97acffac188f")["unanswerable"].h == 4.0


def test_an_h_calibrated_without_a_monitors_adapter_is_not_used_with_it(tmp_path):
    """An adapter changes its monitor's p, so its h keys on S1.version_for(statement); the others' do not move."""
    base = dict(s1="classifier:m", s2="b.gguf", objective=Objective(kind="abstention"), scan_interval=256,
                datasets=["c.jsonl"], n_questions=50, results="r.json", threshold=4.0, s1_version="aaa")
    cal = load_calibration(tmp_path / "none.json")
    cal.entries = [CalibrationEntry(monitor=m, **base) for m in ("unanswerable", "looping")]
    monitors = resolve_monitors(["unanswerable", "looping"])
    versions = {"unanswerable": "aaa", "looping": "aaa+adapter-1234abcd"}
    got = resolve_thresholds(monitors, {}, cal, tmp_path / "t.json", "classifier:m", "b.gguf", "soma", versions)
    assert got["unanswerable"].h == 4.0 and got["looping"].source == "monitor default"
    assert "(aaa, now aaa+adapter-1234abcd)" in got["looping"].warning


def test_h_is_a_typed_flag_then_the_calibration_file_then_the_monitor_default_per_monitor(tmp_path):
    """The one precedence every command's h comes from (soma run and soma replay; soma calibrate writes the
    entries it reads). Each monitor resolves on its own, and an adapted monitor's entry keys on its version."""
    from soma_local.calibration.thresholds import ThresholdSource

    base = dict(s1="classifier:m", s2="b.gguf", objective=Objective(kind="abstention"), scan_interval=256,
                datasets=["c.jsonl"], n_questions=50, results="r.json")
    cal = load_calibration(tmp_path / "none.json")
    cal.entries = [CalibrationEntry(monitor="unanswerable", threshold=4.0, s1_version="aaa", **base),
                   CalibrationEntry(monitor="looping", threshold=6.0, s1_version="aaa+adapter-1", **base),
                   CalibrationEntry(monitor="unanswerable", mode="no_reminder", threshold=8.0, **base)]
    monitors = resolve_monitors(["unanswerable", "looping", "overthinking"])
    defaults = {m.name: m.default_threshold for m in monitors}
    versions = {"unanswerable": "aaa", "looping": "aaa+adapter-1", "overthinking": "aaa"}

    def resolve(flags, mode="soma", s1_version=versions, chosen=None):
        got = resolve_thresholds(monitors, flags, cal, tmp_path / "t.json", "classifier:m", "b.gguf", mode,
                                 s1_version, chosen)
        return {name: (t.h, t.source.split(",")[0]) for name, t in got.items()}

    calibration = f"calibration {tmp_path / 't.json'}"
    # No flag: the file where it has this monitor's h (the adapted looping's under its adapter's version),
    # else the monitor file's default.
    assert resolve({}) == {"unanswerable": (4.0, calibration), "looping": (6.0, calibration),
                           "overthinking": (defaults["overthinking"], "monitor default")}
    # A typed h beats the file and the default, for its own monitor only.
    assert resolve({"unanswerable": 1.5, "overthinking": 2.5}) == {
        "unanswerable": (1.5, "--threshold"), "looping": (6.0, calibration), "overthinking": (2.5, "--threshold")}
    # Without its adapter, looping's p is another S1's: the h calibrated with the adapter is not used.
    plain = resolve({}, s1_version="aaa")
    assert plain["looping"] == (defaults["looping"], "monitor default") and plain["unanswerable"] == (4.0, calibration)
    # An h the command chose itself (replay --calibrate-share) ranks after a flag and before the file.
    here = {"unanswerable": ThresholdSource(h=12.0, source="calibrated on 9 other traces")}
    assert resolve({}, chosen=here)["unanswerable"] == (12.0, "calibrated on 9 other traces")
    assert resolve({"unanswerable": 1.5}, chosen=here)["unanswerable"] == (1.5, "--threshold")
    # A run mode takes the h of the entry its reminders key on: readout runs soma's, no-reminder runs their own.
    assert resolve({}, mode="readout")["unanswerable"] == (4.0, calibration)
    for mode in ("no_reminder", "readout_no_reminder"):
        assert resolve({}, mode=mode)["unanswerable"] == (8.0, calibration)
        assert resolve({}, mode=mode)["looping"] == (defaults["looping"], "monitor default")


def test_grid_results_score_each_threshold_from_the_readout_records(tmp_path):
    from soma_local.calibration.runs import Question, grid_results, load_questions
    from soma_local.calibration.readout import ReadoutRun
    from test_readout import _records

    records = [r.model_copy(update={"text": "\\boxed{I don't know.}"}) if r.type == "branch" else r for r in _records()]
    records[-1] = records[-1].model_copy(update={"answer": "So \\boxed{12}"})
    run = ReadoutRun(records)
    answerable, unanswerable = Question(id="a", question="q", answer="12"), Question(id="u", question="q", answer=None,
                                                                                      answerable=False)
    out = grid_results([(answerable, run), (unanswerable, run)], "m", [0.5, math.inf])
    early, never = out[0.5], out[math.inf]
    assert [(i.abstained, i.correct, i.takeover, i.tokens) for i in early] == [(True, False, True, 211)] * 2
    assert [(i.abstained, i.correct, i.takeover) for i in never] == [(False, True, False), (False, False, False)]
    m = summarize(early)
    assert (m.abstention, m.false_abstention, m.accuracy) == (1.0, 1.0, 0.0)
    bad = tmp_path / "calib.jsonl"
    bad.write_text('{"id": "x", "question": "q", "answer": "1"}\n{"id": "y", "question": "q", "answer": null, "answerable": true}\n')
    with pytest.raises(DataError, match="calib.jsonl:2: answerable question 'y' has no answer"):
        load_questions(bad)


def test_a_calibration_file_from_before_mode_was_named_mode_still_loads(tmp_path):
    """Entries were keyed by "variant" before the one word for a run mode became "mode": such a file keeps its
    h for each mode, and saving into it rewrites the old entries under the new name."""
    path = tmp_path / "thresholds.json"
    entry = {"s1": "classifier:m", "s2": "b.gguf", "monitor": "unanswerable", "threshold": 4.0,
             "objective": {"kind": "abstention", "delta": 0.0, "fa_weight": 1.0}, "scan_interval": 256,
             "datasets": ["c.jsonl"], "n_questions": 50, "results": "r.json", "created": "2025-01-01T00:00:00"}
    path.write_text(json.dumps({"version": 1, "entries": [{**entry, "variant": "no_reminder"}]}))
    (old,) = load_calibration(path).entries
    assert old.mode == "no_reminder" and old.key == ("classifier:m", "b.gguf", "unanswerable", "no_reminder")
    save_entry(path, CalibrationEntry.model_validate({**entry, "threshold": 2.0}))  # soma's, beside it
    saved = json.loads(path.read_text())["entries"]
    assert [(e["mode"], e["threshold"]) for e in saved] == [("no_reminder", 4.0), ("soma", 2.0)]
    assert all("variant" not in e for e in saved)
    path.write_text(json.dumps({"version": 1, "entries": [{**entry, "variant": "readout"}]}))
    with pytest.raises(DataError, match="thresholds.json"):  # a mode with no h of its own is still refused
        load_calibration(path)
