"""`soma calibrate` and `soma replay` end to end on the embedded GGUF (S2 and the LLM-judge S1), tiny."""

import json
import math

from soma_local.calibration.thresholds import load_calibration
from soma_local.cli.main import main


def test_calibrate_writes_results_plot_and_a_calibration_entry_soma_run_reads(tmp_path, smollm_path):
    data = tmp_path / "calib.jsonl"
    data.write_text(json.dumps({"id": "c1", "question": "What is 12 times 3? Check it twice.", "answer": "36"}) + "\n")
    cal = tmp_path / "thresholds.json"
    out = tmp_path / "out"
    args = ["calibrate", "--monitor", "overthinking", "--data", str(data), "--max-tokens", "160", "--scan-interval",
            "48", "--line-break-slack", "16", "--threads", "2", "--n-ctx", "2048", "--grid", "0.5,2",
            "--out", str(out), "--calibration", str(cal)]
    assert main(args) == 0
    assert not cal.exists(), "one question is too few to set h for later runs"
    args.append("--save-anyway")
    assert main(args) == 0
    results = json.loads((out / "calibration_results.json").read_text())
    assert set(results["items"]) == {"0.5", "2", "inf"}
    assert (out / "pareto.png").stat().st_size > 0 and len(list((out / "traces").glob("*.jsonl"))) == 1
    (entry,) = load_calibration(cal).entries
    assert (entry.monitor, entry.mode, entry.s2) == ("overthinking", "soma", smollm_path.name)
    # Keyed by the S1 that scored the runs: the default S1, the statement reader.
    assert entry.threshold in (0.5, 2.0, math.inf) and entry.s1 == "classifier:minilm-statements"
    # A rerun finds the finished trace and does not run S2 again.
    before = (out / "traces" / "c1.jsonl").read_text()
    assert main(args) == 0 and (out / "traces" / "c1.jsonl").read_text() == before


def test_replay_scans_recorded_traces_with_a_cached_s1(tmp_path):
    line = {"dataset": "umwp", "model": "Org/M-8B", "question_id": "umwp-1", "answerable": False,
            "prompt": "Tom has some apples. How many apples does he have? Let's think step by step and output the "
                      "final answer within \\boxed{}.", "ground_truth": "I don't know.", "think_closed": True,
            "output": "<think>\n" + "Tom has some apples, but the count is not given.\n" * 30 + "</think>\n"
                      "\\boxed{I don't know.}"}
    traces = tmp_path / "t.jsonl"
    traces.write_text(json.dumps(line) + "\n")
    args = ["replay", "--traces", str(traces), "--threads", "2", "--scan-interval", "128", "--out",
            str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--grid", "1,3"]
    assert main(args) == 0
    results = json.loads((tmp_path / "out" / "replay_results.json").read_text())
    (trace,) = results["traces"]
    assert len(trace["probs"]) == len(trace["pause_tokens"]) >= 2 and all(0 < p < 1 for p in trace["probs"])
    assert results["groups"]["umwp / M-8B"]["vanilla"]["abstention"] == 1.0
    (cache,) = (tmp_path / "cache").glob("*.jsonl")
    assert len(cache.read_text().splitlines()) == len(trace["probs"])
    assert main(args) == 0  # every score now comes from the cache
    assert len(cache.read_text().splitlines()) == len(trace["probs"])


def test_replay_calibrates_on_one_share_and_reports_the_other(tmp_path):
    """A share of the questions picks h per S2; the rest are reported at it. The calibration half's
    thinking is calm (no takeover at any h) and vanilla already abstains where it should, so nothing
    beats h = inf, which must then be written as such."""
    def row(qid, answerable, thinking, answer):
        return {"dataset": "umwp", "model": "Org/M-8B", "question_id": qid, "answerable": answerable,
                "prompt": "Tom has 5 apples. How many apples does he have? Let's think step by step and output the "
                          "final answer within \\boxed{}.", "ground_truth": "5" if answerable else "I don't know.",
                "output": f"<think>\n{thinking * 30}</think>\n\\boxed{{{answer}}}"}

    traces = tmp_path / "t.jsonl"
    traces.write_text("\n".join(json.dumps(r) for r in [
        row("umwp-1", False, "Tom has some apples, but the count is not given.\n", "I don't know."),
        row("umwp-5", True, "Tom has 5 apples, so the answer is 5.\n", "5"),  # umwp-5 and umwp-6 draw into
        row("umwp-6", False, "Tom has 5 apples, so the answer is 5.\n", "I don't know."),  # the calibration half
    ]) + "\n")
    args = ["replay", "--traces", str(traces), "--threads", "2", "--scan-interval", "128", "--out",
            str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--grid", "1,3", "--calibrate-share", "0.5"]
    assert main(args) == 0
    results = json.loads((tmp_path / "out" / "replay_results.json").read_text())
    assert results["calibration_ids"] == ["umwp-5", "umwp-6"] and results["calibration"]["M-8B"]["n"] == 2
    group = results["groups"]["umwp / M-8B"]
    assert group["h"] == "inf" and group["h_source"] == "calibrated on 2 other traces"
    assert group["vanilla"]["n"] == 1  # only the reported half


def test_replay_takes_a_typed_h_then_the_calibration_file_then_the_monitor_default(tmp_path, monkeypatch):
    """soma replay passes --threshold and --calibration as typed; calibration.thresholds picks h (its no_reminder
    entry for this S1 and recorded S2). A scripted S1 stands in for a model: the argument path is under test."""
    import soma_local.s1.factory
    from conftest import ScriptedS1
    from soma_local.calibration.thresholds import CalibrationEntry, Objective, save_entry

    monkeypatch.setattr(soma_local.s1.factory, "load_s1", lambda *a, **kw: ScriptedS1([0.9]))
    line = {"dataset": "umwp", "model": "Org/M-8B", "question_id": "umwp-1", "answerable": False,
            "prompt": "Tom has some apples. How many apples does he have?", "ground_truth": "I don't know.",
            "output": "<think>\n" + "Tom has some apples, but the count is not given.\n" * 30 + "</think>\n"
                      "\\boxed{I don't know.}"}
    traces, cal = tmp_path / "t.jsonl", tmp_path / "thresholds.json"
    traces.write_text(json.dumps(line) + "\n")
    base = dict(s1="scripted", s2="M-8B", monitor="unanswerable", objective=Objective(kind="abstention"),
                scan_interval=128, datasets=["c.jsonl"], n_questions=50, results="r.json", created="2026-01-02")
    save_entry(cal, CalibrationEntry(threshold=5.0, **base))  # soma's h: not replay's
    save_entry(cal, CalibrationEntry(mode="no_reminder", threshold=2.0, **base))

    def replayed(*extra):
        out = tmp_path / "out"
        assert main(["replay", "--traces", str(traces), "--scan-interval", "128", "--out", str(out), "--cache-dir",
                     str(tmp_path / "cache"), "--grid", "1", "--calibration", str(cal), *extra]) == 0
        group = json.loads((out / "replay_results.json").read_text())["groups"]["umwp / M-8B"]
        return group["h"], group["h_source"]

    assert replayed() == ("2", f"calibration {cal}, 50 questions, 2026-01-02")
    assert replayed("--threshold", "7") == ("7", "--threshold")
    cal.write_text('{"version": 1, "entries": []}')
    assert replayed() == ("3", "monitor default")  # unanswerable.toml's default_threshold
