"""The shipped classifier S1 with its real backbone (all-MiniLM-L6-v2 from its PyPI package)."""

import shutil

import pytest

from soma_local.errors import ModelFileError
from soma_local.engine.monitors import resolve_monitors
from soma_local.s1.base import S1Query
from soma_local.s1.classifier import ClassifierS1
from soma_local.s1.factory import DEFAULT_S1, SERVE_DEFAULT_S1, load_s1
from soma_local.s1.model_folders import DEFAULT_S1_MODEL, S1_MODELS_DIR, resolve_s1_model
from soma_local.s1.state import parse_state

TASK = "A shop sells pens at $2 each. Tom buys 7 pens. How much does he pay?"
CONFIRMED = (
    "Each pen costs $2 and Tom buys 7, so 7 * 2 = 14. So the answer is 14.\n"
    "Wait, let me double-check: 2 + 2 + 2 + 2 + 2 + 2 + 2 = 14. Yes, 14.\n"
    "Let me verify once more another way: 7 * 2 = 14. Hmm, let me check again, 14.\n"
)
FRESH = "Let me read the problem carefully. We need the price per pen and the number of pens."


@pytest.fixture(scope="module")
def classifier():
    s1 = load_s1(None)
    yield s1
    s1.close()


@pytest.fixture(scope="module")
def monitors():
    return {m.name: m for m in resolve_monitors(["overthinking", "unanswerable"])}


def test_default_s1_is_the_statement_reader(classifier):
    assert DEFAULT_S1 == "classifier" and DEFAULT_S1_MODEL == "minilm-statements"
    assert isinstance(classifier, ClassifierS1)
    assert classifier.name == "classifier:minilm-statements"
    assert classifier.encoder.max_length == 384  # the encoder reads the newest 384 tokens...
    assert classifier.input_limit == 2048  # ...of a state the cue heads read whole
    assert set(classifier.cue_heads) == {m.statement for m in resolve_monitors(["overthinking", "unanswerable"])}


def test_minilm_reader_stays_loadable_by_name():
    reader = load_s1("classifier:minilm-reader")
    assert reader.name == "classifier:minilm-reader" and reader.encoder.max_length == 512 and reader.input_limit == 2048
    assert reader.version == "97acffac188f"  # the version its calibrations, adapters and result files key on
    reader.close()


def test_soma_serve_keeps_minilm_reader_by_default(monkeypatch):
    """Served states are not reasoning; there the statement reader breaks the option-set rule more
    (python -m benchmarks.serve_rules), so serve keeps minilm-reader unless --s1 says otherwise."""
    import soma_local.serve.app as app
    from soma_local.cli.main import main

    served = []
    monkeypatch.setattr(app, "serve", lambda s1, **kw: served.append(s1.name))
    assert SERVE_DEFAULT_S1 == "classifier:minilm-reader"
    assert main(["serve", "--threads", "1"]) == 0 and served == ["classifier:minilm-reader"]
    assert main(["serve", "--threads", "1", "--s1", "classifier"]) == 0 and served[-1] == "classifier:minilm-statements"


def test_answers_for_both_monitors_in_one_batch(classifier, monitors):
    queries = [S1Query(m.statement, TASK, CONFIRMED) for m in monitors.values()]
    probs = classifier.score(queries)
    assert len(probs) == 2 and all(0.0 < p < 1.0 for p in probs)


def test_overthinking_rises_once_the_answer_is_confirmed_and_rechecked(classifier, monitors):
    statement = monitors["overthinking"].statement
    fresh, confirmed = classifier.score([S1Query(statement, TASK, FRESH), S1Query(statement, TASK, CONFIRMED)])
    assert confirmed > fresh


def test_truncation_keeps_the_task_and_the_newest_reasoning(classifier, monitors):
    statements = [m.statement for m in monitors.values()]
    reasoning = " ".join(f"step{i} adds pens." for i in range(2000)) + " FINAL LINE"
    state = classifier.state_for(TASK, reasoning, statements)
    assert state.startswith(f"Task: {TASK}\n\nReasoning so far: ")
    assert "final line" in state.lower() and "step0 " not in state
    assert len(classifier.tokenizer.encode(state)) <= classifier.input_limit
    short = classifier._encoder_state(state, parse_state(state), classifier.reserve(statements))
    assert short.startswith(f"Task: {TASK}\n\nReasoning so far: ") and short.lower().endswith("final line")
    assert len(short) < len(state)
    encoded = classifier.encoder.tok(max(statements, key=len), short)["input_ids"]
    assert len(encoded) <= classifier.encoder.max_length


def test_cue_heads_see_what_the_encoder_no_longer_reads(classifier, monitors):
    """A doubt voiced early, then an assumption, far more than 512 tokens back: only the cues hold it."""
    statement = monitors["unanswerable"].statement
    task = "Anna has some apples and buys 5 more. How many apples does she have now?"
    filler = "".join(f"Line {i}: we add the apples step by step and keep the running total.\n" for i in range(80))
    early = "The problem doesn't say how many apples she had at first, so I will assume she had 10.\n"
    plain, doubted = classifier.score([S1Query(statement, task, "Let me start.\n" + filler),
                                       S1Query(statement, task, early + filler)])
    assert doubted > plain


def shipped_copy(tmp_path, name: str, config_edit: tuple[str, str] | None = None):
    """A copy of the shipped S1's folder, its config.json optionally edited (old text, new text)."""
    folder = tmp_path / name
    shutil.copytree(S1_MODELS_DIR / DEFAULT_S1_MODEL, folder)
    if config_edit:
        config = folder / "config.json"
        assert config_edit[0] in config.read_text()
        config.write_text(config.read_text().replace(*config_edit))
    return folder


def test_bfloat16_and_float32_give_the_same_judgement(classifier, monitors):
    """bfloat16 autocast (auto where the CPU has it natively) is a speed choice, not a different S1."""
    queries = [S1Query(m.statement, TASK, CONFIRMED * 20) for m in monitors.values()]
    exact = ClassifierS1(precision="float32")
    fast = ClassifierS1(precision="bfloat16")
    assert not exact.encoder.bf16 and fast.encoder.bf16
    z_exact, z_fast = (s1.logits([(q.statement, s1.state_for(q.task, q.reasoning, [q.statement])) for q in queries])
                       for s1 in (exact, fast))
    assert abs(z_exact - z_fast).max() < 0.1


def test_the_version_tells_a_retrained_or_rescaled_s1_apart(classifier, tmp_path, monkeypatch):
    """Score caches and calibration key on the version: a retrained S1 under the same name has another."""
    from safetensors.torch import load_file, save_file

    from soma_local.s1.factory import load_s1

    assert classifier.identity == f"{classifier.name}@{classifier.version}"
    assert load_s1(None).version == classifier.version == load_s1(f"classifier:{DEFAULT_S1_MODEL}").version
    assert load_s1("classifier", temperature=0.5).version == f"{classifier.version}-T0.5"
    retrained = shipped_copy(tmp_path, "retrained")
    head = load_file(str(retrained / "head.safetensors"))
    save_file({k: v + 0.01 for k, v in head.items()}, str(retrained / "head.safetensors"))
    assert load_s1(f"classifier:{shipped_copy(tmp_path, 'copied')}").version == classifier.version
    assert load_s1(f"classifier:{retrained}").version not in (None, classifier.version)
    monkeypatch.setenv("TYPESAFE_API_KEY", "k")  # built, never called
    assert load_s1("jev").version is None


def test_an_unknown_precision_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("SOMA_S1_PRECISION", "fp8")
    with pytest.raises(ModelFileError, match="S1 precision 'fp8' is not one of auto, float32, bfloat16"):
        ClassifierS1()


def test_a_cue_head_from_another_cue_set_is_refused(tmp_path):
    folder = shipped_copy(tmp_path, "oldcues", ('"cue_set": "cues-v1"', '"cue_set": "cues-v0"'))
    with pytest.raises(ModelFileError, match="fitted to cue set 'cues-v0'"):
        ClassifierS1(folder)


def test_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ModelFileError, match="S1 model 'no-such-model' not found"):
        resolve_s1_model("no-such-model")
    with pytest.raises(ModelFileError, match="config.json: missing"):
        ClassifierS1(tmp_path)


def test_corrupt_weights_are_a_clear_error(tmp_path):
    folder = shipped_copy(tmp_path, "broken")
    (folder / "head.safetensors").write_bytes(b"\x00\x01 not a safetensors file")
    with pytest.raises(ModelFileError, match="broken/head.safetensors: corrupt safetensors"):
        ClassifierS1(folder)


def test_corrupt_config_names_the_field(tmp_path):
    folder = shipped_copy(tmp_path, "badconfig", ('"temperature": ', '"temperature": -'))
    with pytest.raises(ModelFileError, match="field 'temperature'"):
        ClassifierS1(folder)


def test_the_shipped_s1_lists_its_training_questions_and_a_broken_list_is_a_clear_error(classifier, tmp_path):
    assert len(classifier.trained_questions) == 442
    assert all(q.startswith(("umwp-", "sum-")) for q in classifier.trained_questions)
    folder = shipped_copy(tmp_path, "badlist")
    (folder / "trained_questions.json").write_text('{"not": "a list"}')
    with pytest.raises(ModelFileError, match="trained_questions.json: expected a JSON list"):
        ClassifierS1(folder)


def test_engine_run_with_the_default_s1_writes_a_trace_training_can_cut(s2, classifier, monitors, tmp_path):
    """Our own runs are training material too: the trace written with the classifier S1 reads back."""
    from soma_local.s2.base import SamplingParams
    from soma_local.s2.formats import ThinkingFormat
    from soma_local.engine.pauses import PauseRule
    from soma_local.engine.supervise import RunConfig, supervise
    from soma_local.engine.trace import Scan, TraceWriter
    from soma_local.calibration.recorded import load_trace_files

    question = "List the first twenty prime numbers and explain for each why it is prime."
    path = tmp_path / "run.jsonl"
    # mode "soma": a remind_only trace stores its infinite thresholds as null and cannot be read back
    # (soma_local/engine/trace.py RunStart.thresholds), a trunk issue reported separately.
    config = RunConfig(pause=PauseRule(64, 32), max_tokens=200,
                       thresholds={m.name: m.default_threshold for m in monitors.values()},
                       sampling=SamplingParams(0.8, 0.95, 0, 0.0, 3), thinking=ThinkingFormat("prompted", close="</think>"))
    with TraceWriter(path) as trace:
        result = supervise(question, s2, classifier, list(monitors.values()), config, trace)
    scans = [r for r in result.records if isinstance(r, Scan)]
    assert scans and all(0 < s.monitors[name].p < 1 for s in scans for name in monitors)
    (loaded,) = load_trace_files([path])
    assert loaded.question == question and loaded.thinking == result.end.thinking


def test_soma_run_uses_the_classifier_by_default(tmp_path, capsys):
    from soma_local.cli.main import main

    rc = main(["run", "What is 2 + 3?", "--max-tokens", "64", "--scan-interval", "32", "--threads", "2",
               "--trace", str(tmp_path / "t.jsonl")])
    assert rc == 0
    assert f"S1 classifier:{DEFAULT_S1_MODEL}" in capsys.readouterr().out
