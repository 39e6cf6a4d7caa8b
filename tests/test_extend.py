"""Extending the engine: a new S2 runtime is its own file plus one registry line, and a new monitor is
its own TOML file and nothing else. Shown with the toy runtime (tests/toy_runtime.py) and a toy monitor
written here, through the same entry points a user has."""

import json

from conftest import ScriptedS1
from soma_local.cli.main import main
from soma_local.engine.monitors import resolve_monitors
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.s2.build import RUNTIMES, Runtime, S2Options, build_s2
from toy_runtime import ToyS2

LOOP = [b"The total is 16 * 21 = 224.", b"\n"] * 200
TOY_MONITOR = '''
# Toy: fires on anything; here only to show that the file is the whole monitor.
name = "toy"
statement = "The reasoning repeats the same line."
reminder = "TOY REMINDER: stop repeating yourself."
default_threshold = 2.0

[takeover]
conclusion = "TOY TAKEOVER."
prefill = "**Final Answer**"
max_tokens = 8
'''


def _register_toy(monkeypatch):
    # The one registry line a new runtime needs (here through monkeypatch, so it is undone after the test).
    monkeypatch.setitem(RUNTIMES, "toy", Runtime(build=lambda options, target: ToyS2(LOOP), targets=lambda rest: []))


def test_a_toy_runtime_and_a_toy_monitor_run_supervised_from_their_own_files(tmp_path, monkeypatch):
    _register_toy(monkeypatch)
    (tmp_path / "toy.toml").write_text(TOY_MONITOR)
    s2 = build_s2(S2Options(s2="toy"))
    (monitor,) = resolve_monitors([str(tmp_path / "toy.toml")])
    config = RunConfig(pause=PauseRule(16, 8), max_tokens=400, thresholds={monitor.name: monitor.default_threshold})
    result = supervise("Q", s2, ScriptedS1([0.9]), [monitor], config)
    assert result.stop == "takeover" and "TOY TAKEOVER." in result.takeover
    assert "TOY REMINDER: stop repeating yourself." in result.end.output  # the file's reminder reached S2
    assert "TOY TAKEOVER." in result.end.output and result.answer.startswith("**Final Answer**")
    assert result.end.reminders == 1 and result.end.scans == 2  # h = 2.0 from the file: logit(0.9) = 2.2


def test_the_cli_runs_a_registered_runtime_and_a_monitor_file(tmp_path, monkeypatch, capsys):
    _register_toy(monkeypatch)
    (tmp_path / "toy.toml").write_text(TOY_MONITOR)
    trace = tmp_path / "run.jsonl"
    code = main(["run", "Q", "--s2", "toy", "--monitor", str(tmp_path / "toy.toml"), "--mode", "scan_only",
                 "--max-tokens", "300", "--scan-interval", "64", "--trace", str(trace), "--quiet"])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    start = records[0]
    assert start["s2_model"] == "toy" and [m["name"] for m in start["monitors"]] == ["toy"]
    scans = [r for r in records if r["type"] == "scan"]
    assert scans and all(0 <= s["monitors"]["toy"]["p"] <= 1 for s in scans)  # the real S1 judged it
