"""Ctrl-C ends a run cleanly: a run_end with stop "interrupted" that readout reads and replay skips."""

import json

import pytest

from soma_local.cli.main import main
from soma_local.engine.monitors import resolve_monitors
from soma_local.calibration.readout import ReadoutRun
from soma_local.calibration.recorded import InterruptedRun, from_engine_trace
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.engine.trace import RunEnd, TraceWriter, read_trace

from conftest import ScriptedS1


QUESTION = "List the first twenty prime numbers and explain for each why it is prime."


class CtrlCAtScan(ScriptedS1):
    """Scores like ScriptedS1, and the user presses Ctrl-C during scan ``at`` (1-based)."""

    def __init__(self, probs, at: int):
        super().__init__(probs)
        self.at = at

    def score_states(self, pairs):
        if len(self.seen) + 1 == self.at:
            raise KeyboardInterrupt
        return super().score_states(pairs)


def test_an_interrupted_readout_run_ends_its_trace_and_reads_off(s2, tmp_path):
    (m,) = resolve_monitors(["overthinking"])
    config = RunConfig.of_mode("readout", pause=PauseRule(32, 8), max_tokens=400,
                       sampling=SamplingParams(0.8, 0.95, 0, 0.0, 21), thinking=ThinkingFormat("prompted", close="</never>"))
    path = tmp_path / "t.jsonl"
    s1 = CtrlCAtScan([0.9, 0.8], at=3)  # remind at scan 1, S = 1.39 at scan 2 (a branch), Ctrl-C in scan 3
    with TraceWriter(path) as trace, pytest.raises(KeyboardInterrupt):
        supervise(QUESTION, s2, s1, [m], config, trace)
    records = list(read_trace(path))
    end = records[-1]
    assert isinstance(end, RunEnd) and end.stop == "interrupted"
    assert end.scans == 2 and end.reminders == 1 and end.tokens.thinking >= 64, "the counts up to Ctrl-C"
    run = ReadoutRun(records, str(path))
    assert run.read_off({"overthinking": 1.0}).stop == "takeover", "a takeover before Ctrl-C reads off"
    assert run.read_off({"overthinking": 2.0}).stop == "interrupted", "beyond it, the outcome says so"
    with pytest.raises(InterruptedRun, match="interrupted"):
        from_engine_trace(records, {}, str(path))


def test_ctrl_c_in_soma_run_prints_one_clean_line_and_exits_130(tmp_path, monkeypatch, capsys):
    import soma_local.cli.view as view

    real = view.LiveView.on_piece
    count = []

    def on_piece(self, piece):
        count.append(1)
        if len(count) == 20:
            raise KeyboardInterrupt
        real(self, piece)

    monkeypatch.setattr(view.LiveView, "on_piece", on_piece)
    trace = tmp_path / "t.jsonl"
    code = main(["run", "What is 17 * 23?", "--s1", "none", "--max-tokens", "200", "--trace", str(trace)])
    out, err = capsys.readouterr()
    assert code == 130
    assert err.strip() == f"soma: interrupted (Ctrl-C); the trace ends with run_end stop=interrupted: {trace}"
    assert out.endswith("\n"), "the cursor is left at the start of a line"
    last = json.loads(trace.read_text().splitlines()[-1])
    assert last["type"] == "run_end" and last["stop"] == "interrupted"


def test_soma_run_closes_s2_and_s1_on_ctrl_c_and_on_an_error(tmp_path, monkeypatch, capsys):
    """Whatever ends a run (here Ctrl-C in the live view, then S2 failing mid-run), S2 and S1 are closed."""
    import soma_local.cli.view as view
    import soma_local.s1.factory
    from soma_local.s2.build import RUNTIMES, Runtime
    from toy_runtime import ToyS2

    closed = []

    class Closing(ToyS2):
        def close(self):
            closed.append("s2")

    class ClosingS1(ScriptedS1):
        def close(self):
            closed.append("s1")

    monkeypatch.setitem(RUNTIMES, "toy", Runtime(build=lambda o, t: Closing([b"Some thought.", b"\n"] * 40),
                                                 targets=lambda rest: []))
    monkeypatch.setattr(soma_local.s1.factory, "load_s1", lambda *a, **kw: ClosingS1([0.1]))
    argv = ["run", "Q", "--s2", "toy", "--monitor", "overthinking", "--scan-interval", "8", "--max-tokens", "60",
            "--trace", str(tmp_path / "t.jsonl")]

    def ctrl_c(self, piece):
        raise KeyboardInterrupt

    monkeypatch.setattr(view.LiveView, "on_piece", ctrl_c)
    assert main(argv) == 130 and sorted(closed) == ["s1", "s2"]
    monkeypatch.undo()
    monkeypatch.setitem(RUNTIMES, "toy", Runtime(build=lambda o, t: Closing([b"x"]), targets=lambda rest: []))
    monkeypatch.setattr(soma_local.s1.factory, "load_s1", lambda *a, **kw: ClosingS1([0.1]))

    def broken(self, max_tokens, stop_at_newline):
        raise RuntimeError("the S2 runtime failed")
        yield

    monkeypatch.setattr(Closing, "_sample", broken)
    closed.clear()
    with pytest.raises(RuntimeError, match="the S2 runtime failed"):
        main(argv)
    assert sorted(closed) == ["s1", "s2"]
