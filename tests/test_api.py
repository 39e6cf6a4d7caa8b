"""The Python API as docs/python-api.md shows it: ``Supervisor`` on the embedded SmolLM2 and the default S1
(the run must be ``soma run``'s), and on the toy runtime (tests/toy_runtime.py) where an exact order of
events is asserted."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from soma_local import Supervisor
from soma_local.engine.trace import read_trace
from soma_local.errors import MonitorFileError, PromptTooLong, RequestError, SomaError
from soma_local.s1.model_folders import DEFAULT_S1_MODEL
from soma_local.s2.build import RUNTIMES, Runtime
from soma_local.supervisor import Branch, Piece, RunEnd, RunStart, Scan, SupervisedRun, ThinkingClosed

from conftest import CharTokenizer, ScriptedS1
from toy_runtime import ToyS2

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "List the first twenty prime numbers and explain for each why it is prime."
SETTINGS = dict(scan_interval=32, line_break_slack=8, max_tokens=160, threads=2)


@pytest.fixture(scope="module")
def sup():
    """The embedded S2 under the default S1 (with looping's adapter), loaded once for the module."""
    with Supervisor("smollm2-135m", monitors=["looping"], **SETTINGS) as sup:
        yield sup


def _toy(monkeypatch, script):
    monkeypatch.setitem(RUNTIMES, "toy", Runtime(build=lambda options, target: ToyS2(script), targets=lambda rest: []))


def _split(events):
    """(thinking pieces, the ThinkingClosed, answer pieces, the other events' type names)."""
    closed = next(i for i, e in enumerate(events) if isinstance(e, ThinkingClosed))
    pieces = lambda part: [e for e in part if isinstance(e, Piece)]  # noqa: E731
    return pieces(events[:closed]), events[closed], pieces(events[closed:]), \
        [type(e).__name__ for e in events if not isinstance(e, Piece)]


# ---- on the embedded models ------------------------------------------------------------------------

def test_a_run_is_the_run_soma_run_makes_for_the_same_seed(sup, tmp_path):
    trace = tmp_path / "cli.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "soma_local.cli.main", "run", QUESTION, "--s2-model", "smollm2-135m", "--monitor", "looping",
         "--scan-interval", "32", "--line-break-slack", "8", "--max-tokens", "160", "--threads", "2", "--seed", "3",
         "--json", "--quiet", "--trace", str(trace)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout.splitlines()[-1])
    run = sup.run(QUESTION, seed=3, trace=tmp_path / "api.jsonl")
    assert isinstance(run, SupervisedRun) and run.trace == str(tmp_path / "api.jsonl")
    assert (run.stop, run.answer.strip(), run.tokens.model_dump()) == (cli["stop"], cli["answer"], cli["tokens"])
    cli_records = list(read_trace(trace))
    cli_scans = [r for r in cli_records if isinstance(r, Scan)]
    assert len(run.scans) == len(cli_scans) == cli["scans"] >= 3
    assert [s.monitors["looping"].p for s in run.scans] == pytest.approx(
        [s.monitors["looping"].p for s in cli_scans], abs=1e-4)
    assert run.thinking == cli_records[-1].thinking and run.s2 == cli_records[0].s2_model
    assert run.threshold_sources["looping"].source == cli["thresholds"]["looping"]["source"]


def test_a_forced_takeover_streams_its_prefill_and_a_stop_string_cuts_the_answer():
    with Supervisor("smollm2-135m", s1=ScriptedS1([0.95]), monitors=["overthinking"], thresholds={"overthinking": 0.5},
                    scan_interval=16, line_break_slack=4, threads=2) as sup:
        events = list(sup.stream(QUESTION, seed=5))
        run = events[-1]
        thinking, closed, answer, kinds = _split(events)
        assert run.stop == "takeover" and kinds == ["RunStart", "Scan", "Reminder", "Scan", "Takeover", "ThinkingClosed",
                                                    "RunEnd", "SupervisedRun"]
        assert closed == ThinkingClosed("takeover", "**Final Answer**")
        assert answer[0] == Piece("**Final Answer**", "answer"), "the prefill is the first answer piece"
        assert "".join(p.text for p in thinking) == run.thinking and "</think>" not in run.thinking
        assert "".join(p.text for p in answer) == run.answer and {p.section for p in answer} == {"answer"}
        written = run.answer.removeprefix("**Final Answer**")
        assert len(written.strip()) > 8, written
        stop = written.strip()[4:8]
        cut = sup.run(QUESTION, seed=5, stop=[stop, "never written"])
    assert cut.answer == "**Final Answer**" + written[: written.find(stop)] and stop not in cut.answer
    assert cut.stop == "takeover" and cut.tokens.answer < run.tokens.answer, "generation stopped at the stop string"


def test_cancel_ends_a_run_at_the_next_token_with_a_complete_trace(sup, tmp_path):
    cancel = threading.Event()
    heard = []

    def on_event(event):
        heard.append(event)
        if isinstance(event, Scan):
            cancel.set()

    path = tmp_path / "t.jsonl"
    run = sup.run(QUESTION, seed=1, max_tokens=4000, trace=path, on_event=on_event, cancel=cancel)
    assert run.stop == "cancelled" and len(run.scans) == 1
    assert run.tokens.thinking == run.scans[0].thinking_tokens, "not one token after the cancel"
    records = list(read_trace(path))
    assert isinstance(records[0], RunStart) and isinstance(records[-1], RunEnd) and records[-1].stop == "cancelled"
    assert records == [e for e in heard if not isinstance(e, Piece)]
    # Leaving a stream early cancels its run too.
    path = tmp_path / "stream.jsonl"
    stream = sup.stream(QUESTION, seed=1, max_tokens=4000, trace=path)
    next(e for e in stream if isinstance(e, Scan))
    stream.close()
    end = list(read_trace(path))[-1]
    assert isinstance(end, RunEnd) and end.stop == "cancelled" and end.scans == 1


def test_a_conversation_reaches_s2_whole_and_s1_reads_its_last_message_after_the_turns(tmp_path):
    s1 = ScriptedS1([0.1])
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 6 * 7?"},
                {"role": "assistant", "content": "6 * 7 = 42."}, {"role": "user", "content": "And 6 * 8?"}]
    transcript = "User: What is 6 * 7?\n\nAssistant: 6 * 7 = 42.\n\nUser: And 6 * 8?"
    # A scan every 4 tokens: SmolLM2 may answer this one in a dozen.
    with Supervisor("smollm2-135m", s1=s1, monitors=["overthinking"], scan_interval=4, line_break_slack=0,
                    max_tokens=40, threads=2) as sup:
        alone = sup.prompt_tokens("And 6 * 8?")
        assert sup.prompt_tokens(messages=messages) >= alone + 20, "the earlier turns and the system text are in it"
        run = sup.run(messages=messages, seed=0, trace=tmp_path / "t.jsonl")
        assert next(read_trace(tmp_path / "t.jsonl")).question == transcript
        assert run.scans and all(pairs[0][1].startswith(f"Task: {transcript}\n\nReasoning so far: ") for pairs in s1.seen)
        one = sup.run(messages=[{"role": "user", "content": "What is 6 * 7?"}], seed=0)
        same = sup.run("What is 6 * 7?", seed=0)
    assert (one.thinking, one.answer, one.tokens) == (same.thinking, same.answer, same.tokens), \
        "one user message is the question alone"


def test_bad_requests_are_refused_before_s2_starts_with_errors_that_name_them(sup):
    heard = []
    with pytest.raises(RequestError, match="unknown monitor 'nope'"):
        sup.run(QUESTION, monitors=["nope"], on_event=heard.append)
    with pytest.raises(RequestError, match="h for 'looping' must be a number > 0"):
        sup.run(QUESTION, thresholds={"looping": 0}, on_event=heard.append)
    with pytest.raises(RequestError, match="no monitor 'overthinking' in this run"):
        sup.run(QUESTION, thresholds={"overthinking": 2.0})
    with pytest.raises(RequestError, match="end with the user's message"):
        sup.run(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    with pytest.raises(RequestError, match="either a question or messages"):
        sup.run()
    with pytest.raises(RequestError, match="unknown mode 'fast'"):
        sup.stream(QUESTION, mode="fast")  # refused when called, before any iteration
    with pytest.raises(RequestError, match="a stop string must not be empty"):
        sup.stream(QUESTION, stop="")
    with pytest.raises(PromptTooLong, match="leaves no room to think and answer") as too_long:
        sup.stream("word " * 9000)
    assert too_long.value.prompt_tokens > too_long.value.context == sup.context_size == 8192
    assert heard == [], "nothing ran"
    assert sup.monitor_names == ["looping"] and sup.s1_name == f"classifier:{DEFAULT_S1_MODEL}"
    with pytest.raises(MonitorFileError, match="unknown monitor 'nope'"):
        Supervisor("smollm2-135m", monitors=["nope"])
    with pytest.raises(SomaError, match="concurrency 2: runs in flight at once need an S2 server"):
        Supervisor("smollm2-135m", concurrency=2)
    with pytest.raises(SomaError, match="field 'n_cxt': Extra inputs are not permitted"):
        Supervisor("smollm2-135m", n_cxt=512)


# ---- on the toy runtime: exact orders ------------------------------------------------------------------

SCRIPT = [b"Caf", b"\xc3", b"\xa9 au lait costs 3.", b"\n", b"So it is 3. </th", b"ink>", b"\n\nThe answer is ",
          b"\xe2\x82", b"\xac3.", b" Done."]


def test_pieces_are_whole_characters_and_thinking_never_holds_the_closing_tag(monkeypatch):
    _toy(monkeypatch, SCRIPT)
    # A pause after 5 tokens falls inside the closing tag: "</th" ends one stretch, "ink>" starts the next.
    with Supervisor(s2="toy", s1=None, monitors=[], scan_interval=5, line_break_slack=0) as sup:
        events = list(sup.stream("What does it cost?"))
        cut = sup.run("What does it cost?", stop=["€3", "Done"])
    thinking, closed, answer, kinds = _split(events)
    run = events[-1]
    assert [p.text for p in thinking] == ["Caf", "é au lait costs 3.", "\n", "So it is 3. "]
    assert {p.section for p in thinking} == {"thinking"} and closed == ThinkingClosed("s2")
    assert [p.text for p in answer] == ["\n\nThe answer is ", "€3.", " Done."] and {p.section for p in answer} == {"answer"}
    assert (run.stop, run.thinking, run.answer) == ("answer", "Café au lait costs 3.\nSo it is 3. ", "\n\nThe answer is €3. Done.")
    assert kinds == ["RunStart", "ThinkingClosed", "RunEnd", "SupervisedRun"]
    assert cut.answer == "\n\nThe answer is " and cut.tokens.answer == 3, "stopped at the token completing '€3'"


def test_a_takeover_streams_its_prefill_and_readout_branches_reach_the_listener(monkeypatch):
    _toy(monkeypatch, [b"Some thought.", b"\n"] * 50)
    with Supervisor(s2="toy", s1=ScriptedS1([0.95]), monitors=["overthinking"], thresholds={"overthinking": 1.0},
                    scan_interval=4, line_break_slack=0, max_tokens=60) as sup:
        events = list(sup.stream("Q"))
        readout = list(sup.stream("Q", mode="readout"))
    thinking, closed, answer, kinds = _split(events)
    run = events[-1]
    assert kinds == ["RunStart", "Scan", "Reminder", "Scan", "Takeover", "ThinkingClosed", "RunEnd", "SupervisedRun"]
    assert closed == ThinkingClosed("takeover", "**Final Answer**") and answer[0] == Piece("**Final Answer**", "answer")
    assert run.stop == "takeover" and run.answer == "".join(p.text for p in answer) and run.takeover.monitor == "overthinking"
    assert run.reminders[0].text in run.output and run.reminders[0].text not in run.thinking
    branches = [e for e in readout if isinstance(e, Branch)]
    assert branches and readout[-1].branches == branches and readout[-1].stop == "limit"


def test_a_long_conversation_is_cut_for_s1_keeping_its_last_message(monkeypatch):
    _toy(monkeypatch, [b"Some thought.", b"\n"] * 20)
    s1 = ScriptedS1([0.1], input_limit=600)
    s1._tok = CharTokenizer()
    earlier = [{"role": r, "content": f"Turn {i}: " + "background " * 40} for i, r in
               enumerate(["user", "assistant"] * 3)]
    last = "So which of these is prime: 221 or 223?"
    with Supervisor(s2="toy", s1=s1, monitors=["overthinking"], scan_interval=8, line_break_slack=0, max_tokens=20) as sup:
        events = list(sup.stream(messages=[*earlier, {"role": "user", "content": last}]))
    start = events[0]
    assert start.settings["s1_task_cut"]["kept_tokens"] < start.settings["s1_task_cut"]["task_tokens"]
    task = s1.seen[0][0][1].split("\n\nReasoning so far: ")[0]
    assert task.startswith("Task: User: Turn 0: ") and "tokens of the task left out" in task and task.endswith(last)


def _runs_from_threads(sup, n):
    results = [None] * n

    def work(i):
        results[i] = sup.run("Q")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.parametrize("concurrent", [False, True])
def test_runs_from_many_threads_each_have_an_s2_session_of_their_own(monkeypatch, concurrent):
    """In-process S2 (one sequence): runs take turns. An HTTP S2 (``concurrent``): ``concurrency`` sessions,
    runs in flight at once, their scans through one batched S1."""
    built = []

    def build(options, target):
        built.append(ToyS2([b"Some thought.", b"\n"] * 30))
        return built[-1]

    monkeypatch.setitem(RUNTIMES, "toy", Runtime(build=build, targets=lambda rest: [], concurrent=concurrent))
    with Supervisor(s2="toy", s1=ScriptedS1([0.1]), monitors=["overthinking"], scan_interval=4, line_break_slack=0,
                    max_tokens=30, concurrency=3 if concurrent else 1) as sup:
        alone = sup.run("Q")
        results = _runs_from_threads(sup, 6)
    assert len(built) == (3 if concurrent else 1) and sup.concurrency == len(built)
    with pytest.raises(SomaError, match="closed"):
        sup.run("Q")
    assert all(r.output == alone.output and r.tokens == alone.tokens and len(r.scans) == len(alone.scans) >= 5
               for r in results), "no run saw another's tokens"
