"""Monitor adapters: the statistics they read, the file beside the monitor, which adapter a run takes,
the fit on held-out labels, and ``soma tune``'s refusals of bad labels and files."""

import json
import shutil

import numpy as np
import pytest

from soma_local.calibration.tune import check_labels, tune
from soma_local.cli.main import main
from soma_local.engine.adapters import attach_adapters
from soma_local.engine.monitors import resolve_monitors
from soma_local.errors import DataError, ModelFileError
from soma_local.s1.adapter import (DEFAULT_FEATURES, Adapter, AdapterReport, HeldOutFigures, feature_names,
                                   read_adapter_file, save_adapter)
from soma_local.s1.base import S1Query
from soma_local.s1.cache import CachedS1, ScoreCache
from soma_local.s1.state import format_state
from soma_local.s1.stats import NAMES, state_stats

from conftest import ScriptedS1

LOOP = "It took 23 days to make 126 cookies.\n" * 30
PROGRESS = "\n".join(f"Step {i}: {i} * 7 = {i * 7}, carry on with the next part of the problem." for i in range(30))


def _adapter(monitor, s1_identity: str, weight_on_repeats: float = 0.0) -> Adapter:
    n = 1 + len(feature_names(DEFAULT_FEATURES))
    weights = [1.0] + [0.0] * (n - 1)
    weights[1 + len(feature_names(DEFAULT_FEATURES[:1])) + NAMES.index("repeated_lines_share")] = weight_on_repeats
    figures = HeldOutFigures(n=10, positives=5, auroc=0.5, ece=0.1, log_loss=0.7)
    return Adapter(monitor=monitor.name, statement=monitor.statement, s1=s1_identity, features=list(DEFAULT_FEATURES),
                   mean=[0.0] * n, scale=[1.0] * n, weights=weights, bias=0.0,
                   report=AdapterReport(labels=["x"], n_fit=7, n_held=3, without=figures, with_adapter=figures, c=0.1,
                                               gain_low=0.0))


@pytest.fixture
def looping(tmp_path):
    path = tmp_path / "looping.toml"
    shutil.copy(resolve_monitors(["looping"])[0].file, path)
    return resolve_monitors([str(path)])[0]


def test_statistics_see_a_verbatim_loop_that_steady_progress_lacks():
    loop, progress = dict(zip(NAMES, state_stats("q", LOOP))), dict(zip(NAMES, state_stats("q", PROGRESS)))
    assert loop["repeated_lines_share"] > 0.9 and progress["repeated_lines_share"] == 0
    assert loop["recent_distinct_lines_share"] < 0.1 < progress["recent_distinct_lines_share"]
    assert len(state_stats("", "")) == len(NAMES)


def test_an_adapter_moves_only_its_statement_and_keys_h_on_itself(looping):
    s1 = ScriptedS1([0.5])
    s1.version = "v1"
    save_adapter(looping.file.with_name("looping.adapters.json"), _adapter(looping, s1.identity, weight_on_repeats=4.0))
    adapted, used, refused = attach_adapters(s1, [looping])
    assert used == ["looping"] and not refused
    loop, other = adapted.score([S1Query(looping.statement, "q", LOOP), S1Query("Another statement.", "q", LOOP)])
    assert loop > 0.95 and other == 0.5  # 4 * (share of repeated lines ~ 1) on logit(0.5) = 0
    assert adapted.score([S1Query(looping.statement, "q", PROGRESS)]) == [pytest.approx(0.5)]
    assert adapted.version_for(looping.statement).startswith("v1+adapter-") and adapted.version_for("x") == "v1"


def test_the_adapter_applies_over_a_score_cache_that_keeps_the_s1s_own_p(looping, tmp_path):
    s1 = ScriptedS1([0.5])
    save_adapter(looping.file.with_name("looping.adapters.json"), _adapter(looping, s1.identity, weight_on_repeats=4.0))
    cached = CachedS1(s1, ScoreCache(tmp_path / "cache", s1.identity))
    adapted, _, _ = attach_adapters(cached, [looping])
    query = S1Query(looping.statement, "q", LOOP)
    first, second = adapted.score([query]), adapted.score([query])
    assert first == second and first[0] > 0.95 and len(s1.seen) == 1 and cached.cache.get(query) == 0.5


def test_an_adapter_for_another_s1_version_or_statement_is_refused_with_a_reason(looping):
    s1 = ScriptedS1([0.5])
    s1.version = "new"
    path = looping.file.with_name("looping.adapters.json")
    save_adapter(path, _adapter(looping, "scripted@old"))
    adapted, used, refused = attach_adapters(s1, [looping])
    assert adapted is s1 and not used
    assert refused == [f"{path}: its adapter was fitted for another version of scripted (scripted@old, this S1 is "
                       "scripted@new); not used: run soma tune again"]
    changed = looping.model_copy(update={"statement": "The reasoning repeats itself."})
    changed._file = looping.file
    save_adapter(path, _adapter(looping, "scripted@new"))
    assert "fitted for another statement" in attach_adapters(s1, [changed])[2][0]
    other = ScriptedS1([0.5])
    other.name = "jev"
    assert attach_adapters(other, [looping])[1:] == ([], [])  # another S1 altogether: nothing to say


def test_a_corrupt_adapter_file_is_named(looping):
    path = looping.file.with_name("looping.adapters.json")
    path.write_text('{"format": 1, "adapters": [{"monitor": "looping"}]}')
    with pytest.raises(ModelFileError, match="looping.adapters.json: not a monitor adapter file: field 'adapters.0.statement'"):
        attach_adapters(ScriptedS1([0.5]), [looping])
    path.write_text("{not json")
    with pytest.raises(ModelFileError, match="not a monitor adapter file"):
        read_adapter_file(path)


def test_label_checks_say_what_is_wrong():
    with pytest.raises(DataError, match="too few labels: 5"):
        check_labels(np.array([0.9, 0.1, 0.9, 0.1, 0.9]))
    with pytest.raises(DataError, match="only one class: all 30 labels say the statement does hold"):
        check_labels(np.full(30, 0.9))
    with pytest.raises(DataError, match="too few labels of one class: 1 hold, 29 do not"):
        check_labels(np.r_[np.full(29, 0.1), 0.9])


def test_a_feature_the_s1_misses_is_learnt_and_measured_on_held_out_questions():
    rng = np.random.default_rng(0)
    n = 200
    signal = rng.normal(size=n)
    y = (signal + 0.3 * rng.normal(size=n) > 0).astype(float)
    x = np.c_[rng.normal(size=n), signal, rng.normal(size=(n, 3))]  # column 0 (the S1's logit) is noise
    groups = [f"q{i // 4}" for i in range(n)]  # four states per question
    result = tune(x, y, groups, held_share=0.3, seed=1)
    assert result.with_adapter.auroc > 0.9 > 0.7 > result.without.auroc and result.better
    assert 50 <= result.n_held <= 70 and result.n_fit + result.n_held == n and result.questions == 50
    noise = tune(np.c_[signal, rng.normal(size=(n, 4))], y, groups, seed=1)  # the S1 already knows
    assert noise.without.auroc > 0.9


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_tune_refuses_bad_labels_before_any_model_loads(looping, tmp_path, capsys):
    row = lambda p, i=0: {"statement": looping.statement, "task": f"q{i}", "reasoning": f"r{i}", "p": p}
    cases = {
        "too few labels: 3": [row(0.9), row(0.1), row(0.9)],
        "only one class": [row(0.1, i) for i in range(40)],
        "labelled for another statement": [row(0.9), {**row(0.1), "statement": "The reasoning is guessing."}],
        "needs 'state', or 'task' and 'reasoning'": [{"statement": looping.statement, "p": 0.5}],
        "field 'p'": [{**row(0.5), "p": 1.5}],
        "labelled for monitor 'overthinking', not 'looping'": [
            {"monitor": "overthinking", "state": format_state("q", "r"), "p": 0.5}],
    }
    for message, rows in cases.items():
        assert main(["tune", str(looping.file), "--labels", str(_write(tmp_path / "l.jsonl", rows))]) == 2
        assert message in capsys.readouterr().err
    adapters = looping.file.with_name("looping.adapters.json")
    adapters.write_text("[]")
    good = _write(tmp_path / "g.jsonl", [row(i % 2, i) for i in range(40)])
    assert main(["tune", str(looping.file), "--labels", str(good)]) == 2
    assert "looping.adapters.json: not a monitor adapter file" in capsys.readouterr().err
    assert adapters.read_text() == "[]"  # never overwritten blind


def test_the_shared_formula_leaves_a_released_cue_heads_json_and_so_its_version_alone():
    from soma_local.s1.model_folders import CueHead

    assert list(CueHead.model_fields) == ["cue_set", "mean", "scale", "weights", "bias", "encoder_weight"]


def _recorded_run(tmp_path, monitors, probs):
    from soma_local.engine.pauses import PauseRule
    from soma_local.engine.supervise import RunConfig, supervise
    from soma_local.engine.trace import TraceWriter
    from toy_runtime import ToyS2

    path = tmp_path / "run.jsonl"
    with TraceWriter(path) as trace:
        result = supervise("How many cookies per day?", ToyS2([b"It took 23 days to make 126 cookies.", b"\n"] * 100),
                           ScriptedS1(probs), monitors, RunConfig.of_mode("scan_only", pause=PauseRule(16, 8),
                                                                          max_tokens=300), trace)
    return path, result


def test_a_recorded_runs_scans_are_labels_of_its_monitors_p_on_the_state_of_each_scan(looping, tmp_path):
    from soma_local.calibration.labels import read_labels

    path, result = _recorded_run(tmp_path, [looping], [0.2, 0.4, 0.9])
    labels = read_labels([path], looping)
    assert len(labels) == result.end.scans >= 10
    assert [lab.p for lab in labels[:4]] == [0.2, 0.4, 0.9, 0.9]
    assert all(result.thinking.startswith(lab.reasoning) for lab in labels)
    assert labels[0].reasoning.count("126 cookies") < labels[-1].reasoning.count("126 cookies")
    assert {lab.task for lab in labels} == {"How many cookies per day?"} and len({lab.group for lab in labels}) == 1

    (guessing,) = resolve_monitors(["guessing"])
    with pytest.raises(DataError, match="the run had no monitor 'guessing' \\(it had looping\\)"):
        read_labels([path], guessing)
    changed = looping.model_copy(update={"statement": "The reasoning repeats itself."})
    with pytest.raises(DataError, match="labelled for another statement"):
        read_labels([path], changed)
    lines = path.read_text().splitlines()
    killed = tmp_path / "killed.jsonl"
    killed.write_text("\n".join(line for line in lines if '"run_end"' not in line) + "\n")
    with pytest.raises(DataError, match="no run_end record"):
        read_labels([killed], looping)
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "thinking_chars"})
                             for line in lines) + "\n")
    with pytest.raises(DataError, match="did not note each scan's text"):
        read_labels([old], looping)
