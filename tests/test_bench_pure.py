"""Pure bench logic: sampling, result files, read-offs of the sweeps, calibration choice, SES."""

import json
import math

import pytest

from soma_local.bench import score
from soma_local.bench.datasets import get_benchmark, load_items
from soma_local.calibration.runs import sample
from soma_local.bench.methods.base import Outcome
from soma_local.bench.methods.ses import ConformalRate, RenewalStats, arrivals, critical_z, words
from soma_local.bench.results import ResultFile, ResultLine, read_results
from soma_local.errors import DataError
from soma_local.calibration.metrics import ItemResult
from soma_local.engine.trace import TokenCounts


# The unanswerable prompt of Liu et al. (2026), exactly as every released trace has it.
LIU_2026_SUFFIX = (
    "Let's think step by step and output the final answer within \\boxed{}. Please solve the problem "
    "strictly based on the information provided. Do not introduce any additional assumptions. If you "
    "believe the problem lacks sufficient information or is unsolvable, first reply with "
    "\\boxed{I don't know.}, and provide your corresponding reason in the format:  "
    "Reason{your explanation here}"
)

def line(id="q1", *, gold="18", answerable=True, answer="", tokens=None, records=(), extras=None, settings=None, method="m"):
    return ResultLine(
        id=id, benchmark="gsm8k", scenario="overthinking", method=method, model="m", prompt="p", gold=gold,
        answerable=answerable, settings=settings or {}, seconds=0.0,
        outcome=Outcome(stop="answer", thinking="t", answer=answer, tokens=tokens or TokenCounts(),
                        records=list(records), extras=extras or {}),
    )


def test_datasets_prompts_and_nested_balanced_sampling(data_dir):
    umwp = get_benchmark("umwp")
    items = load_items(umwp, data_dir)
    assert len(items) == 600
    small, large = sample(items, 6, seed=0), sample(items, 10, seed=0)
    assert [i.answerable for i in small] == [True, False] * 3  # alternating: a partial run has both
    assert {i.id for i in small} <= {i.id for i in large}
    assert umwp.prompt(items[0]) == f"{items[0].question} {LIU_2026_SUFFIX}"  # from monitors/unanswerable.toml
    assert get_benchmark("gsm8k").prompt(items[0]).endswith("within \\boxed{}.")
    with pytest.raises(DataError, match="SOMA_GPQA_FILE"):
        load_items(get_benchmark("gpqa"), data_dir)


def test_result_file_drops_torn_tail_and_refuses_duplicates_and_other_settings(tmp_path):
    path = tmp_path / "r.jsonl"
    f = ResultFile(path, {"a": 1})
    f.append(line("q1", settings={"a": 1}))
    with pytest.raises(DataError, match="already recorded"):
        f.append(line("q1", settings={"a": 1}))
    f.close()
    with path.open("ab") as fh:
        fh.write(b'{"id": "q2", "bench')  # a kill in the middle of a write
    assert [r.id for r in read_results(path)] == ["q1"]
    f = ResultFile(path, {"a": 1})
    assert f.done == {"q1"} and path.read_bytes().endswith(b"}\n")
    f.append(line("q2", settings={"a": 1}))
    f.close()
    assert [r.id for r in read_results(path)] == ["q1", "q2"]
    with pytest.raises(DataError, match="other settings"):
        ResultFile(path, {"a": 2})


def _readout_records(mode="readout", scale=1.0):
    """A readout trace as a bench result line keeps it (JSON form, run_start to run_end)."""
    from soma_local.engine.trace import Branch, MonitorScan, RunEnd, RunStart, Scan, Timings

    def scan(i, t, score_, action="none"):
        m = MonitorScan(p=0.5, evidence=0.0, score=score_, action=action, in_episode=True)
        return Scan(index=i, thinking_tokens=t, position=t, at_line_break=True, monitors={"m": m}, s1_seconds=0.0)

    records = [
        RunStart(question="q", s2_model="s2", s1="s1", monitors=[{"name": "m"}], thresholds={"m": math.inf},
                 settings={"mode": mode}, started_at="now"),
        scan(0, 100, 0.8 * scale, "remind"),
        scan(1, 200, 1.2 * scale),
        Branch(monitor="m", scan_index=1, thinking_tokens=200, text="\\boxed{17}", inserted_tokens=5, generated_tokens=7),
        scan(2, 300, 3.4 * scale),
        Branch(monitor="m", scan_index=2, thinking_tokens=300, text="\\boxed{18}", inserted_tokens=5, generated_tokens=9),
        RunEnd(stop="answer", thinking="t", answer="so \\boxed{18}", output="", takeover=None, scans=3, failed_scans=0,
               reminders=1, tokens=TokenCounts(thinking=500, answer=20, probe=16), timings=Timings()),
    ]
    return [json.loads(r.model_dump_json()) for r in records]


def test_readout_lines_read_off_with_soma_local_readout():
    r = line(answer="so \\boxed{18}", tokens=TokenCounts(thinking=500, answer=20, probe=16), records=_readout_records())
    assert score.readout_at(r, 1.0) == ItemResult(id="q1", answerable=True, abstained=False, correct=False,
                                                  tokens=207, takeover=True)
    assert score.readout_at(r, 3.0).correct and score.readout_at(r, 3.0).tokens == 309
    remind_only = score.readout_at(r, math.inf)
    assert remind_only.correct and not remind_only.takeover and remind_only.tokens == 520  # branches not counted
    assert score.readout_at(r, 0.5).tokens == 207  # the reminder's own pause never takes over
    unfinished = line(records=_readout_records()[:-1])
    with pytest.raises(DataError, match="run_end"):
        score.readout_at(unfinished, 1.0)


def test_calibrated_h_follows_the_objective():
    from soma_local.calibration.thresholds import Objective

    right_late = line("a", answer="\\boxed{18}", tokens=TokenCounts(thinking=500, answer=20), records=_readout_records())
    # h <= 1.2 takes over at scan 1 with a wrong answer: fewest tokens, but accuracy falls below h = inf's
    assert score.calibrate_h([right_late], Objective(kind="fewest_tokens")) == 3.0
    assert score.calibrate_h([right_late], Objective(kind="fewest_tokens", delta=1.0)) == 1.0


def test_calibration_tries_h_past_where_a_confident_s1_takes_over():
    """Evidence 12 at the wrong pause, 34 at the right one: only an h above 12 keeps accuracy, and the
    grid must reach it rather than jump from 8 to never taking over."""
    from soma_local.calibration.thresholds import Objective

    right_late = line("a", answer="\\boxed{18}", tokens=TokenCounts(thinking=500, answer=20),
                      records=_readout_records(scale=10.0))
    assert score.calibrate_h([right_late], Objective(kind="fewest_tokens")) == 32.0


def test_budget_and_dynasor_read_offs_count_only_their_own_tokens():
    forced = [{"budget": 64, "text": "Final Answer: 12", "generated": 4}]
    r = line(answer="\\boxed{18}", tokens=TokenCounts(thinking=300, answer=10, probe=4), extras={"forced": forced})
    assert score.budget_at(r, 64) == ItemResult(id="q1", answerable=True, abstained=False, correct=False, tokens=68,
                                                takeover=True)
    assert score.budget_at(r, None).correct and score.budget_at(r, None).tokens == 310
    probes = [
        {"thinking_tokens": 32, "answer": "18", "certain": True, "generated": 3},
        {"thinking_tokens": 64, "answer": "18", "certain": False, "generated": 5},
        {"thinking_tokens": 96, "answer": "18", "certain": True, "generated": 3},
        {"thinking_tokens": 128, "answer": "18", "certain": True, "generated": 3},
    ]
    r = line(answer="\\boxed{7}", tokens=TokenCounts(thinking=300, answer=10), extras={"probes": probes})
    exit_ = score.dynasor_at(r, 32, 2)  # 64 hesitates, so 96+128 is the first agreeing certain pair
    assert exit_.correct and exit_.tokens == 128 + 14
    wider = score.dynasor_at(r, 64, 2)  # probes at 64 and 128 only; 64 hesitates: no exit
    assert not wider.correct and wider.tokens == 310 + 8


def test_ses_renewal_statistics():
    assert words("Wait, let's see... Maybe I'm wrong!") == ["wait", "let's", "see", "maybe", "i'm", "wrong"]
    assert arrivals(words("wait let's see maybe not sure")) == [0, 1, 3, 4]  # longest phrase first
    stats = RenewalStats.fit(["a b c wait d e f g maybe h i j k l perhaps", "x y wait z z z z z z assume"])
    calm = " ".join(["word"] * 60)
    doubtful = " ".join(["maybe wait perhaps"] * 20)
    assert stats.z(doubtful) > critical_z(0.05, 5) > stats.z(calm)
    assert critical_z(0.05, 1) == pytest.approx(1.6449, abs=1e-3)


def test_ses_conformal_rule_fits_without_keywords():
    calm = ["word " * 50, "no doubt here at all " * 10, "maybe " + "word " * 99]
    rule = ConformalRate.fit(calm, alpha=0.05, step=10)  # n=3: rank ceil(0.95*4)=4 > 3, nothing ever stops
    assert rule.threshold == math.inf
    rule = ConformalRate.fit(calm * 10, alpha=0.05, step=10)  # n=30: rank 30, the largest peak
    assert rule.threshold == pytest.approx(1 / 10)  # "maybe" at word 0, first checkpoint at 10 words
    quiet = ConformalRate.fit(["word " * 50] * 30, alpha=0.05, step=10)
    assert quiet.threshold == 0.0 and quiet.rate("so wait maybe") > 0.0 and quiet.rate("word word") == 0.0
    assert ConformalRate.peak_rate("a b wait c maybe d", step=2) == pytest.approx(2 / 6)  # 0/2, 1/4, 2/6


def test_result_files_key_soma_runs_on_the_monitor_they_used(tmp_path):
    """A SOMA run records which monitor it ran (name and a digest of what the run reads): an edited
    monitor, or another file of the same name, never resumes its file; lines from before the key are
    taken as made with the monitor of their place."""
    from soma_local.engine.monitors import resolve_monitors

    (monitor,) = resolve_monitors(["looping"])
    edited = monitor.model_copy(update={"statement": monitor.statement + " Really."})
    assert monitor.run_identity().startswith("looping@") and monitor.run_identity() != edited.run_identity()
    assert monitor.run_identity() == monitor.model_copy(update={"default_threshold": 9.0}).run_identity()

    path = tmp_path / "soma.jsonl"
    f = ResultFile(path, {"a": 1})  # recorded before result files named the monitor
    f.append(line("q1", settings={"a": 1}))
    f.close()
    f = ResultFile(path, {"a": 1, "monitor": monitor.run_identity()})
    assert f.done == {"q1"}
    f.append(line("q2", settings={"a": 1, "monitor": monitor.run_identity()}))
    f.close()
    with pytest.raises(DataError, match="other settings.*monitor"):
        ResultFile(path, {"a": 1, "monitor": edited.run_identity()})


def test_bench_plans_refuse_what_would_mix_or_cannot_be_tabled(tmp_path):
    from soma_local.bench.datasets import plan_benchmarks
    from soma_local.engine.monitors import resolve_monitors

    (looping,) = resolve_monitors(["looping"])
    with pytest.raises(DataError, match="two question files named 'test'"):
        plan_benchmarks([str(tmp_path / "a" / "test.jsonl"), str(tmp_path / "b" / "test.jsonl")], [looping])
    with pytest.raises(DataError, match="names no objective"):
        plan_benchmarks(["gsm8k"], [looping.model_copy(update={"objective": None})])
