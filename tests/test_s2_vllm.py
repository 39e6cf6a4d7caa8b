"""VllmS2 against a real vLLM server on this CPU (the ``vllm_url`` fixture), with the embedded SmolLM2.

What must hold over HTTP as in-process: the pieces of a paused run are the tokens one plain request
gives, a reminded and taken-over run's transcript is exactly its ids, and the single-run readout
equals real runs. Runs are kept short: vLLM on two shared cores decodes a few dozen tokens a second.
"""

from __future__ import annotations

import httpx
import pytest

from soma_local.errors import SomaError
from soma_local.engine.monitors import resolve_monitors
from soma_local.calibration.readout import ReadoutRun
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat
from soma_local.engine.pauses import PauseRule
from soma_local.s2.vllm import VllmS2, request_seed
from soma_local.engine.supervise import RunConfig, supervise

from conftest import ScriptedS1

QUESTION = "List the first twenty prime numbers and explain for each why it is prime."
FMT = ThinkingFormat("prompted", close="</think>")
GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture()
def vs2(vllm_url):
    return VllmS2(vllm_url, "smollm2-135m", sampling=GREEDY)


def _plain(url: str, ids: list[int], n: int) -> list[int]:
    body = {"model": "smollm2-135m", "prompt": ids, "max_tokens": n, "temperature": 0.0, "return_token_ids": True}
    return httpx.post(f"{url}/v1/completions", json=body, timeout=600).json()["choices"][0]["token_ids"]


def test_a_paused_greedy_run_is_the_tokens_of_one_plain_request(vs2, vllm_url):
    """Vanilla supervise pauses every 40 tokens (+16 to a line break); no pause changes a token."""
    result = supervise(QUESTION, vs2, None, [], RunConfig(pause=PauseRule(40, 16), max_tokens=150, thinking=FMT,
                                                        sampling=GREEDY))
    prompt = result.end.tokens.prompt
    generated = vs2.ids[prompt:]
    assert len(generated) == result.end.tokens.thinking + result.end.tokens.answer > 40
    plain = _plain(vllm_url, vs2.ids[:prompt], len(generated))
    assert plain[: len(generated)] == generated
    assert vs2.stats.requests >= 3  # it really was paused


def test_a_reminded_and_taken_over_run_has_a_token_exact_transcript(vs2):
    """Remind at the first scan, take over at the third: S2's context is exactly prompt, its own tokens,
    the reminder's ids and the takeover's ids, and the output text is those ids' bytes."""
    (m,) = resolve_monitors(["overthinking"])
    s1 = ScriptedS1([0.8, 0.9, 0.9, 0.9])
    config = RunConfig(pause=PauseRule(32, 8), max_tokens=300, thinking=FMT, sampling=GREEDY,
                       thresholds={m.name: 1.5})
    result = supervise(QUESTION, vs2, s1, [m], config)
    end = result.end
    assert end.reminders == 1 and end.stop == "takeover"
    prompt = end.tokens.prompt
    transcript = vs2.ids[prompt:]
    t = end.tokens
    assert len(transcript) == t.thinking + t.inserted + t.answer
    assert vs2.decode(transcript) == end.output
    reminder = next(r for r in result.records if type(r).__name__ == "Reminder")
    scan0 = next(r for r in result.records if type(r).__name__ == "Scan")
    at = scan0.position - prompt
    assert transcript[at : at + reminder.tokens] == vs2.tokenize(reminder.text)


def test_the_readout_equals_real_runs_at_two_thresholds(vllm_url):
    """Sampled (temperature 0.8): the branches are requests of their own, seeded by position, so the
    main line of the readout run is the main line of every real run up to its takeover."""
    (m,) = resolve_monitors(["overthinking"])
    sampling = SamplingParams(0.8, 0.95, 0, 0.0, 21)
    probs = [0.8, 0.7, 0.8, 0.8]

    def run(**kw):
        s2 = VllmS2(vllm_url, "smollm2-135m", sampling=sampling)
        config = RunConfig.of_mode(kw.pop("mode", "soma"), pause=PauseRule(32, 8), max_tokens=200, thinking=FMT,
                                   sampling=sampling, **kw)
        return supervise(QUESTION, s2, ScriptedS1(probs), [m], config)

    readout = run(mode="readout")
    grid = ReadoutRun(readout.records).grid(m.name, [0.5, 2.0])
    assert [o.scan_index for o in grid] == [1, 2]
    for h, out in zip([0.5, 2.0], grid):
        real = run(thresholds={m.name: h}).end
        assert (out.stop, out.answer) == (real.stop, real.answer)
        assert out.tokens == real.tokens.thinking + real.tokens.answer


def test_request_seeds_differ_by_position_and_run_seed():
    assert request_seed(1, 100) == request_seed(1, 100)
    assert len({request_seed(1, 100), request_seed(1, 101), request_seed(2, 100)}) == 3


def test_a_dead_server_is_one_clear_error_after_retries():
    from soma_local.s2.vllm_server import free_port

    with pytest.raises(SomaError, match=r"failed after 2 tries: ConnectError"):
        VllmS2(f"http://127.0.0.1:{free_port()}", "smollm2-135m", retries=1, backoff=0.01)


def test_a_wrong_model_name_is_one_clear_error(vllm_url):
    with pytest.raises(SomaError, match="refused the request|serves"):
        s2 = VllmS2(vllm_url, "smollm2-135m", sampling=GREEDY)
        s2.served = "no-such-model"
        s2.load_prompt([1, 2, 3])
        s2.generate(4)


def test_the_hf_folder_tokenizes_as_the_gguf_it_was_converted_from(vllm_folder):
    """Same ids and the same bytes per id as llama.cpp's tokenizer of the embedded GGUF, so prompts,
    reminders and stop texts mean the same tokens on both runtimes."""
    from soma_local.s2.model_files import GgufVocab, resolve_gguf
    from soma_local.s2.hf_tokens import load_hf_tokenizer

    hf = load_hf_tokenizer(str(vllm_folder))
    gguf = GgufVocab.from_path(resolve_gguf(None))
    texts = ["Think step by step.\n\n<reminder>Stop.</reminder>\n\n", "x = 3·4 → 12; naïve 😀\n\n\n", "</think>"]
    for text in texts:
        ids = hf.encode(text)
        assert ids == gguf.encode(text)
        assert b"".join(hf.pieces[i] for i in ids) == text.encode()
    prompt = "<|im_start|>user\nhi<|im_end|>\n"
    assert hf.encode(prompt, special=True) == gguf._llm.tokenize(prompt.encode(), add_bos=False, special=True)
    assert len(hf.encode("<|im_end|>", special=True)) == 1 < len(hf.encode("<|im_end|>"))
    assert all(b"\n" in hf.pieces[i] for i in hf.newline_ids) and hf.eog_ids == {2}
