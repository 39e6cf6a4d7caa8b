"""`soma run` as a user calls it: clear one-line errors, exit code 2, nothing half-written."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def soma(*args, cwd=ROOT, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "soma_local.cli.main", *args],
        cwd=cwd, capture_output=True, text=True, input=stdin, timeout=600,
    )


def test_broken_monitor_file_is_named(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nstatement = ""\nreminder = "r"\n[takeover]\nmax_tokens = 5\n')
    r = soma("run", "q", "--monitor", str(bad), "--s1", "none")
    assert r.returncode == 2
    assert str(bad) in r.stderr and "'statement'" in r.stderr and "Traceback" not in r.stderr


def test_missing_model_and_bad_threshold(tmp_path):
    r = soma("run", "q", "--s2-model", str(tmp_path / "nope.gguf"))
    assert r.returncode == 2 and "no such GGUF file" in r.stderr
    r = soma("run", "q", "--threshold", "overthinking")
    assert r.returncode == 2 and "NAME=H" in r.stderr


def test_empty_stdin_question():
    r = soma("run", "-", stdin="")
    assert r.returncode == 2 and "no question" in r.stderr


def test_supervised_run_streams_scans_and_writes_trace(tmp_path):
    trace = tmp_path / "t.jsonl"
    r = soma(
        "run", "List the first twenty prime numbers and explain each.", "--max-tokens", "160",
        "--scan-interval", "48", "--line-break-slack", "16", "--threads", "2", "--seed", "3",
        "--trace", str(trace),
    )
    assert r.returncode == 0, r.stderr
    assert "[scan 1 @" in r.stdout and "stop=" in r.stdout and "\033[" not in r.stdout  # no colour off a TTY
    lines = trace.read_text().splitlines()
    assert '"run_start"' in lines[0] and '"run_end"' in lines[-1] and any('"scan"' in x for x in lines)


def _options(parser, name="soma"):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                yield from _options(p, f"{name} {sub}")
        elif action.option_strings and action.dest not in ("help", "version"):
            yield name, parser, action


def test_help_has_every_option_explained_with_its_default_and_no_markup():
    from soma_local.cli.main import build_parser

    parser = build_parser()
    assert "``" not in parser.format_help()
    for name, sub, action in _options(parser):
        assert action.help, f"{name} {action.option_strings[0]} has no help"
        text = sub.format_help()
        assert "``" not in text
        shown = f"(default: {action.default})" in " ".join(text.split())
        if action.nargs == 0:  # a switch (--no-adapters stores False, so its default is True) takes no value
            assert not shown, (name, action.option_strings)
        elif action.default is not None and action.default is not False:
            assert shown, (name, action.option_strings)


def test_version():
    r = soma("--version")
    assert r.returncode == 0 and r.stdout.strip().startswith("soma 0.")


def test_live_view_shows_the_end_of_thinking_and_the_answer_once():
    import io

    from soma_local.cli.view import LiveView
    from soma_local.engine.events import Piece, ThinkingClosed
    from soma_local.supervisor import SupervisedRun

    out, err = io.StringIO(), io.StringIO()
    view = LiveView(out, err)
    view.on_event(Piece("2 + 2 is 4.\n", "thinking"))  # S2's closing tag is no thinking piece...
    view.on_event(ThinkingClosed("s2"))  # ...the view writes it here
    for text in ("\n\n", "The answer is \\boxed{4}."):
        view.on_event(Piece(text, "answer"))
    view.summary(SupervisedRun(stop="answer", thinking="2 + 2 is 4.\n", answer="\n\nThe answer is \\boxed{4}."))
    text = out.getvalue()
    assert "</think>\nanswer: The answer is \\boxed{4}.\nfinal answer: 4\nno monitor acted; S2 concluded at 0 tokens" in text
    assert text.count("\\boxed{4}") == 1 and err.getvalue() == ""


def test_the_summary_says_in_words_what_supervision_did():
    from soma_local.engine.trace import Reminder, Takeover, TokenCounts
    from soma_local.supervisor import SupervisedRun

    reminded = Reminder(monitor="looping", thinking_tokens=640, text="<reminder>...</reminder>", tokens=30)
    run = SupervisedRun(stop="answer", thinking="", answer="", reminders=[reminded],
                        tokens=TokenCounts(thinking=850, answer=20))
    assert run.story() == "looping reminded at 640 tokens; S2 concluded at 850 tokens and answered in 20"
    taken = Takeover(monitor="looping", scan_index=9, thinking_tokens=1373, text="...")
    run = run.model_copy(update={"stop": "takeover", "takeover": taken, "tokens": TokenCounts(thinking=1373)})
    assert run.story() == ("looping reminded at 640 tokens; looping took over at 1373 tokens; "
                           "S2 wrote nothing after the takeover")
    assert SupervisedRun(stop="limit", thinking="", answer="", tokens=TokenCounts(thinking=2048)).story() == (
        "no monitor acted; S2 reached the 2048-token limit without an answer")


def test_quiet_json_run_and_calibration_source_in_the_header(tmp_path, smollm_path):
    import json

    from soma_local.calibration.thresholds import CalibrationEntry, Objective, save_entry
    from soma_local.s1.model_folders import DEFAULT_S1_MODEL

    cal = tmp_path / "thresholds.json"
    save_entry(cal, CalibrationEntry(s1=f"classifier:{DEFAULT_S1_MODEL}", s2=smollm_path.name, monitor="overthinking",
                                     threshold=0.5, objective=Objective(kind="fewest_tokens"), scan_interval=256,
                                     datasets=["x.jsonl"], n_questions=1, results="r.json"))
    base = ["run", "What is 2+2?", "--max-tokens", "8", "--calibration", str(cal), "--trace", str(tmp_path / "t.jsonl")]
    r = soma(*base)
    assert r.returncode == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if line.startswith("takeover thresholds h:"))
    assert f"overthinking 0.5 (calibration {cal}, 1 questions" in header
    assert "unanswerable 3 (monitor default)" in header
    assert "calibrated on only 1 question" in r.stderr and "Loading weights" not in r.stderr
    r = soma(*base, "--threshold", "overthinking=2", "--quiet", "--json")
    assert r.returncode == 0 and "calibrated on only" not in r.stderr
    *answer, last = r.stdout.splitlines()
    summary = json.loads(last)
    assert summary["thresholds"]["overthinking"] == {"h": "2", "source": "--threshold"}
    assert summary["stop"] in ("limit", "answer", "eos_in_thinking") and summary["tokens"]["thinking"] <= 8
    assert "question:" not in r.stdout and "[scan" not in r.stdout
