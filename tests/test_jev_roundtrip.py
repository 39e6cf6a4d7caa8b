"""Jev end to end: our adapter pointed at our own server equals the local S1 called directly, and a
supervised run with the ``jev`` S1 against a faulty jevcompat mock completes with the failed scans in
its trace (``python -m benchmarks.jev_faults`` runs the CLI under every fault)."""

import pytest
from jevcompat.mock import MockConfig
from jevcompat.mock import Running as MockRunning

from soma_local.s2.model_files import GgufVocab
from soma_local.engine.monitors import resolve_monitors
from soma_local.s1.base import S1Query
from soma_local.s1.factory import load_s1
from soma_local.s1.jev import JevS1
from soma_local.s1.llm_judge import LlmJudgeS1
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat
from soma_local.engine.pauses import PauseRule
from soma_local.serve.app import Running, create_app
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.engine.trace import RunEnd, RunStart, Scan, TraceWriter, read_trace

TASK = "A shop sells pens at $2 and notebooks at $5. Ana buys 3 pens and some notebooks for $26. How many notebooks?"
REASONING = (
    "3 pens cost 3 * 2 = 6 dollars, so the notebooks cost 26 - 6 = 20 dollars, and 20 / 5 = 4 notebooks.\n"
    "Let me verify: 3 * 2 + 4 * 5 = 6 + 20 = 26. Correct.\n"
) * 6  # over 1 KiB, so the zstd path is taken when compression is on
KEY = "roundtrip-key-0f3c"


def test_jev_adapter_through_soma_serve_equals_the_local_s1(smollm_path):
    monitors = resolve_monitors(["overthinking", "unanswerable"])
    queries = [S1Query(m.statement, TASK, REASONING) for m in monitors]
    served, local = LlmJudgeS1(smollm_path, n_threads=1), LlmJudgeS1(smollm_path, n_threads=1)
    direct = local.score(queries)
    via = {}
    with Running(create_app(served, api_key=KEY)) as server:
        for compress in (False, True):
            jev = JevS1(server.url, GgufVocab.from_path(smollm_path), api_key=KEY, compress=compress, timeout=300)
            via[compress] = jev.score(queries)
            assert jev.last_error is None and jev.requests == 1
            jev.close()
    served.close(), local.close()
    # Same states, same statements, same model, fed in the same order to a fresh instance: identical.
    assert via[False] == pytest.approx(direct, abs=1e-9) and via[True] == pytest.approx(direct, abs=1e-9)


QUESTION = "List the first twenty prime numbers and explain for each why it is prime."
# The embedded model rarely closes thinking; a stop text it never writes keeps it thinking (as in
# test_supervise), so every run reaches several scans.
CONFIG = dict(pause=PauseRule(64, 32), max_tokens=320, sampling=SamplingParams(0.8, 0.95, 0, 0.0, 21),
              thinking=ThinkingFormat("prompted", close="</think>"))


def test_supervised_run_with_jev_survives_mock_faults_and_traces_missing_scans(s2, tmp_path):
    monitors = resolve_monitors(["overthinking", "unanswerable"])
    for fault, broken in (("xssi-200", {"overthinking", "unanswerable"}), ("first-question-only", {"unanswerable"})):
        path = tmp_path / f"{fault}.jsonl"
        with MockRunning(MockConfig(faults=frozenset({fault}))) as mock:
            s1 = load_s1(f"jev:{mock.url}", tokenizer=s2)  # what `soma run --s1 jev:URL` builds
            with TraceWriter(path) as trace:
                config = RunConfig(**CONFIG, thresholds={m.name: m.default_threshold for m in monitors})
                supervise(QUESTION, s2, s1, monitors, config, trace)
        records = list(read_trace(path))
        start, end = records[0], records[-1]
        scans = [r for r in records if isinstance(r, Scan)]
        assert isinstance(start, RunStart) and start.s1 == f"jev:{mock.url}"
        assert isinstance(end, RunEnd) and end.scans == len(scans) >= 2
        assert end.failed_scans == end.scans  # every scan lost at least one monitor
        if len(broken) == 2:  # no evidence at all: nothing to remind about or take over on
            assert end.stop == "limit" and end.reminders == 0 and end.takeover is None
        for scan in scans:
            assert {name for name, m in scan.monitors.items() if m.p is None} == broken
            assert scan.error.startswith(f"jev {mock.url}: ")
            assert all(m.evidence is None for name, m in scan.monitors.items() if name in broken)
