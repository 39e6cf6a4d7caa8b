"""A monitor that is not shipped goes through `soma bench run` and `soma bench report` as a user
would call them: its file's objective picks the table, its calibration_data tune h, its benchmarks
are the test sets, and its results never mix with another monitor's on the same questions."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soma_local.bench.results import read_results

ROOT = Path(__file__).resolve().parents[1]

QUESTIONS = [
    ("a", "What is 3 + 4?", "7"),
    ("b", "What is 10 - 6?", "4"),
    ("c", "What is 2 * 5?", "10"),
    ("d", "What is 9 / 3?", "3"),
]


def _questions(path: Path, items) -> Path:
    path.write_text("".join(json.dumps({"id": i, "question": q, "answer": a}) + "\n" for i, q, a in items))
    return path


def _toy_monitor(tmp_path: Path) -> Path:
    calib = _questions(tmp_path / "toy_calib.jsonl", QUESTIONS[:2])
    test = _questions(tmp_path / "toy_test.jsonl", QUESTIONS[2:])
    path = tmp_path / "counting.toml"
    path.write_text(
        'name = "counting"\n'
        'statement = "The reasoning counts on its fingers instead of computing."\n'
        'reminder = "Compute directly."\n'
        'objective = "fewest_tokens"\n'
        f'calibration_data = ["{calib}"]\n'
        f'benchmarks = ["{test}"]\n'
        'prompt_suffix = " Answer within \\\\boxed{}."\n'
        '[takeover]\nprefill = "**Final Answer**"\nmax_tokens = 16\n'
    )
    return path


def soma(*args: str, data_dir: Path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), SOMA_DATA_DIR=str(data_dir))
    return subprocess.run([sys.executable, "-m", "soma_local.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def test_a_toy_monitor_runs_and_reports_through_the_bench_commands(tmp_path):
    monitor = _toy_monitor(tmp_path)
    out = tmp_path / "results"
    common = ["--max-tokens", "48", "--scan-interval", "16", "--line-break-slack", "8", "--threads", "2",
              "--n-ctx", "1024", "--out", str(out)]
    # budget_forcing is reported for a fewest-tokens objective, abstention_prompt only for abstention.
    r = soma("bench", "run", "--monitor", str(monitor), "--method", "vanilla", "--method", "soma",
             "--method", "budget_forcing", "--method", "abstention_prompt", "--budgets", "16", *common,
             data_dir=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]

    folder = out / "smollm2-135m" / "counting"  # a set outside the catalogue files under its monitor
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.jsonl")) == [
        f"{s}/{m}.jsonl" for s in ("toy_calib", "toy_test") for m in ("budget_forcing", "soma", "vanilla")]
    soma_lines = list(read_results(folder / "toy_test" / "soma.jsonl"))
    assert [line.id for line in soma_lines] == ["c", "d"]
    assert all(line.scenario == "counting" and line.prompt.endswith(" Answer within \\boxed{}.") for line in soma_lines)
    start = soma_lines[0].outcome.records[0]
    assert start["type"] == "run_start" and [m["name"] for m in start["monitors"]] == ["counting"]

    r = soma("bench", "report", str(out / "smollm2-135m"), "--out", str(tmp_path / "tables"), data_dir=tmp_path)
    assert r.returncode == 2 and "--monitor" in r.stderr and "counting" in r.stderr  # its file is not shipped

    r = soma("bench", "report", str(out / "smollm2-135m"), "--monitor", str(monitor), "--out", str(tmp_path / "tables"),
             data_dir=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    text = (tmp_path / "tables" / "tables.md").read_text()
    assert "### smollm2-135m: Table 2 (counting)" in text
    header = next(line for line in text.splitlines() if line.startswith("| Method"))
    assert "toy_test Acc (n=2)" in header and "toy_calib" not in header  # calibration sets tune, tests report
    for row in ("| Vanilla |", "| BF (B=", "| SOMA (h=", "| Remind-only (h=inf) |"):
        assert row in text
    assert "AbstentionBench" not in text
    assert "SOMA h = " in text and "calibrated on 2 questions" in text
    parameters = next(line for line in text.splitlines() if line.startswith("Parameters: "))
    assert "Dynasor" not in parameters and "No-reminder" not in parameters  # only of the methods that ran
    assert (tmp_path / "tables" / "pareto.png").read_bytes()[:4] == b"\x89PNG"


def test_bench_run_needs_a_set_or_a_monitor_and_a_path_needs_its_monitor(tmp_path):
    r = soma("bench", "run", "--method", "vanilla", "--out", str(tmp_path), data_dir=tmp_path)
    assert r.returncode == 2 and "--benchmark" in r.stderr and "--monitor" in r.stderr
    questions = _questions(tmp_path / "mine.jsonl", QUESTIONS)
    r = soma("bench", "run", "--method", "vanilla", "--benchmark", str(questions), "--out", str(tmp_path),
             data_dir=tmp_path)
    assert r.returncode == 2 and "name the monitor" in r.stderr and "Traceback" not in r.stderr


def test_a_set_measured_with_another_monitor_reuses_its_baseline_runs(tmp_path, data_dir):
    """Vanilla gives the same run for the same prompt whatever monitor reads the table: measuring GSM8K
    with looping (same prompt suffix as overthinking) takes the overthinking run's lines, in one command
    or from an earlier one, and runs only what depends on the monitor."""
    from soma_local.bench.runner import HarnessSpec, run_bench
    from soma_local.engine.monitors import resolve_monitors

    spec = HarnessSpec(s2_model="smollm2-135m", max_tokens=24, threads=2, n_ctx=1024)
    overthinking, looping = resolve_monitors(["overthinking", "looping"])
    kw = dict(limit=2, data_root=data_dir, progress=False)
    assert run_bench(spec, ["vanilla"], ["gsm8k"], tmp_path, monitors=[overthinking, looping], **kw) == 4
    flat = list(read_results(tmp_path / "smollm2-135m" / "gsm8k" / "vanilla.jsonl"))
    copied = list(read_results(tmp_path / "smollm2-135m" / "looping" / "gsm8k" / "vanilla.jsonl"))
    assert [line.scenario for line in flat] == ["overthinking"] * 2 and [line.scenario for line in copied] == ["looping"] * 2
    assert [line.model_copy(update={"scenario": "overthinking"}) for line in copied] == flat  # the same runs

    (tmp_path / "smollm2-135m" / "looping" / "gsm8k" / "vanilla.jsonl").unlink()
    assert run_bench(spec, ["vanilla"], ["gsm8k"], tmp_path, monitors=[looping], **kw) == 2  # from the files
    again = list(read_results(tmp_path / "smollm2-135m" / "looping" / "gsm8k" / "vanilla.jsonl"))
    assert again == copied
    # A monitor with another prompt suffix (guessing: Liu et al.'s) gets other runs: nothing is taken.
    guessing = resolve_monitors(["guessing"])[0]
    assert run_bench(spec, ["vanilla"], ["gsm8k"], tmp_path, monitors=[guessing], **dict(kw, limit=1)) == 1
    (own,) = read_results(tmp_path / "smollm2-135m" / "guessing" / "gsm8k" / "vanilla.jsonl")
    assert own.prompt != flat[0].prompt and own.prompt.endswith("Reason{your explanation here}")


def test_a_question_asked_with_another_prompt_is_refused_not_resumed(tmp_path, data_dir):
    """Another file under the same set name, or an edited prompt_suffix, asks the same ids otherwise:
    resuming would report the old answers as this prompt's."""
    from soma_local.bench.runner import HarnessSpec, run_bench
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.errors import DataError

    spec = HarnessSpec(s2_model="smollm2-135m", max_tokens=8, threads=2, n_ctx=1024)
    (looping,) = resolve_monitors(["looping"])
    kw = dict(limit=1, data_root=data_dir, progress=False)
    questions = _questions(tmp_path / "mine.jsonl", QUESTIONS)
    assert run_bench(spec, ["vanilla"], [str(questions)], tmp_path / "out", monitors=[looping], **kw) == 1
    reworded = looping.model_copy(update={"prompt_suffix": " Be brief."})
    with pytest.raises(DataError, match="asked with another prompt"):
        run_bench(spec, ["vanilla"], [str(questions)], tmp_path / "out", monitors=[reworded], **kw)


def test_soma_runs_use_and_record_the_monitor_adapter_as_soma_run_does(tmp_path, data_dir):
    """looping ships an adapter for the default S1: bench's SOMA runs score through it and key their
    file on the adapted version; --no-adapters runs the S1 alone under its own version."""
    from soma_local.bench.runner import HarnessSpec, run_bench
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.s1.factory import load_s1

    plain = load_s1(None).version
    (looping,) = resolve_monitors(["looping"])
    kw = dict(limit=1, data_root=data_dir, progress=False, monitors=[looping])
    for adapters, out in ((True, tmp_path / "a"), (False, tmp_path / "b")):
        spec = HarnessSpec(s2_model="smollm2-135m", max_tokens=40, scan_interval=16, line_break_slack=4, threads=2,
                           n_ctx=1024, adapters=adapters)
        assert run_bench(spec, ["soma"], ["gsm8k"], out, **kw) == 1
        (line,) = read_results(out / "smollm2-135m" / "looping" / "gsm8k" / "soma.jsonl")
        version = line.settings["s1_version"]
        assert version.startswith(f"{plain}+adapter-") if adapters else version == plain
        assert line.settings["monitor"] == looping.run_identity()
        assert line.settings["engine"] == spec.identity() and "adapters" not in spec.identity()
