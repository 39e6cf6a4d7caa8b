"""The llama.cpp runtime on a real small GGUF (SmolLM2-135M, the embedded default)."""

import pytest

from soma_local.errors import ModelFileError
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import (ChatMessage, ThinkingFormat, detect_thinking, prompt_for, render_prompt, system_prompt,
                                   with_system)
from soma_local.s2.formats import prompt_ids as ids_of
from soma_local.s2.llama_cpp import LlamaCppS2
from soma_local.engine.pauses import PauseRule
from soma_local.engine.session import Session

QUESTION = "List the first twenty prime numbers and explain for each why it is prime."


def prompt_ids(s2, question=QUESTION):
    fmt = detect_thinking(s2.chat_template, s2.is_single_token("</think>"))
    return ids_of(s2, prompt_for(s2, question, fmt=fmt, system=system_prompt(fmt, True)))


def fresh(s2, seed):
    s2.set_sampling(SamplingParams(temperature=0.8, top_p=0.95, seed=seed))
    s2.load_prompt(prompt_ids(s2))


def test_prompted_thinking_is_detected_and_prefilled(s2):
    fmt = detect_thinking(s2.chat_template, s2.is_single_token("</think>"))
    assert fmt.mode == "prompted"  # SmolLM2 has no <think> token
    text = render_prompt(s2.chat_template, model_path="m", messages=[ChatMessage("user", "hi")], fmt=fmt).text
    assert text.endswith("<|im_start|>assistant\n<think>\n")
    assert detect_thinking("{{ '<think>' }}", True).mode == "native"


def test_prompt_for_renders_the_prompts_the_call_sites_rendered_by_hand(s2):
    """Six call sites once passed a backend's template, name, bos and eos to ``render_prompt`` by hand;
    ``prompt_for`` does it for them and must give the same prompt byte for byte (the demo transcript and
    the paper's tables depend on it): the hand-written expression, and SmolLM2's ChatML spelled out."""
    prompted = ThinkingFormat("prompted")
    for fmt in (prompted, ThinkingFormat("native"), ThinkingFormat("prompted", close="</never>")):
        for system in (None, system_prompt(fmt, True), system_prompt(fmt, False, extra="Be brief.")):
            by_hand = render_prompt(s2.chat_template, model_path=s2.name,
                                    messages=with_system(system, [ChatMessage("user", QUESTION)]),
                                    fmt=fmt, bos_token=s2.bos_token, eos_token=s2.eos_token)
            assert prompt_for(s2, QUESTION, fmt=fmt, system=system) == by_hand
    supervised = prompt_for(s2, "What is 2+2?", fmt=prompted, system=system_prompt(prompted, True))
    assert supervised.parts == (
        ("<|im_start|>system\n", True),
        ("Think step by step inside <think> and </think> tags before answering. After </think>, give the final "
         "answer within \\boxed{}. While you think, a monitor may insert a <reminder>. When you see one, follow "
         "its instruction briefly inside your reasoning, then continue as you judge best.", False),
        ("<|im_end|>\n<|im_start|>user\n", True),
        ("What is 2+2?", False),
        ("<|im_end|>\n<|im_start|>assistant\n<think>\n", True),
    )
    bare = prompt_for(s2, "What is 2+2?", fmt=prompted)  # the template's own default system text
    assert bare.parts == (
        ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
         "<|im_start|>user\n", True),
        ("What is 2+2?", False),
        ("<|im_end|>\n<|im_start|>assistant\n<think>\n", True),
    )


def test_missing_chat_template_and_missing_file_are_named():
    with pytest.raises(ModelFileError, match="no chat template"):
        render_prompt(None, model_path="x.gguf", messages=[ChatMessage("user", "q")], fmt=ThinkingFormat("prompted"))
    with pytest.raises(ModelFileError, match="not found"):
        LlamaCppS2("/nonexistent/model.gguf")


def test_not_a_gguf_gives_a_clear_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all" * 100)
    with pytest.raises(ModelFileError, match="could not load"):
        LlamaCppS2(bad)


def test_pauses_land_on_line_breaks_or_at_slack(s2):
    fresh(s2, seed=3)
    session = Session(s2, ThinkingFormat("prompted", close="</never-closes>"), max_tokens=2000)
    rule = PauseRule(interval=64, slack=16)
    last = 0
    pauses = []
    for _ in range(12):
        pause = session.think_to_pause(rule)
        if pause.ended:
            break
        n = session.tokens.thinking - last
        pauses.append((n, pause.at_line_break))
        if pause.at_line_break:
            assert 64 < n <= 64 + 16
            assert "\n" in s2.decode(s2._ids[-1:])
        else:
            assert n == 64 + 16
        last = session.tokens.thinking
    assert pauses, "the model wrote nothing"
    assert any(at for _, at in pauses), f"no pause at a line break: {pauses}"


def test_branch_rolls_back_kv_and_sampler_exactly(s2):
    fresh(s2, seed=11)
    straight = s2.generate(120).ids
    fresh(s2, seed=11)
    first = s2.generate(40).ids
    with s2.branch():
        s2.feed(s2.tokenize("\nSomething else entirely, to disturb the cache.\n"))
        side = s2.generate(30).ids
    rest = s2.generate(80).ids
    assert side, "the branch generated nothing"
    assert first + rest == straight[: len(first) + len(rest)]


def test_same_seed_same_tokens_and_seed_matters(s2):
    fresh(s2, seed=5)
    a = s2.generate(50).ids
    fresh(s2, seed=5)
    b = s2.generate(50).ids
    fresh(s2, seed=6)
    c = s2.generate(50).ids
    assert a == b and a != c


def test_a_prompt_gets_the_same_logits_whatever_ran_before(s2):
    """A run must not depend on the previous one: a bench process runs many methods and questions
    in turn, and a resumed run starts from a different history."""
    shared = "Tom has 3 apples and buys some more apples at the market, paying 2 dollars for each."
    prompt = s2.tokenize(shared + " How many apples does he have now?")
    s2.load_prompt(s2.tokenize("Something else entirely."))
    s2.load_prompt(prompt)
    fresh_logits = s2.next_logits().copy()
    s2.load_prompt(s2.tokenize(shared))  # the shared prefix, decoded in other batches than above
    s2.generate(20)
    s2.load_prompt(prompt)
    assert (s2.next_logits() == fresh_logits).all()  # bit for bit


def test_the_speed_benchmark_measures_through_public_methods(s2):
    """``benchmarks/s2_speed.py`` reads llama.cpp's own decode counters and runs llama-cpp-python's
    completion on the same context through these methods, not through the runtime's private fields."""
    s2.set_sampling(SamplingParams(temperature=0))
    ids = prompt_ids(s2)
    s2.load_prompt(ids)
    s2.reset_decode_counters()
    chunk = s2.generate(8)
    seconds, tokens = s2.decode_counters()
    assert 0 < tokens <= len(chunk.ids) and seconds > 0  # the single-token decodes of this chunk
    s2.clear_context()
    assert s2.position == 0
    s2.llm.eval(ids[:-1])
    assert s2.llm.create_completion(ids, max_tokens=8, temperature=0)["usage"]["completion_tokens"] > 0
    s2.clear_context()
    s2.load_prompt(ids)
    assert s2.generate(8).ids == chunk.ids, "after llm's own run, the context starts clean"


def test_the_native_loop_gives_our_loops_tokens_and_keeps_them(s2):
    """The speed benchmark's baseline (C calls only) samples with the runtime's own chain: from the
    same seed it gives the tokens ``generate`` gives, timed or not, and leaves the context as
    ``generate`` would, so generation goes on from there exactly as after ``generate``."""
    ids = prompt_ids(s2)
    fresh(s2, seed=21)
    straight = s2.generate(40).ids
    for timed in (False, True):
        fresh(s2, seed=21)
        native, wall, decode, sample = s2.native_loop(24, timed=timed)
        assert native == straight[:24] and s2.position == len(ids) + 24 and wall > 0
        assert (decode > 0 and sample > 0 and decode + sample <= wall) if timed else decode == sample == 0
        assert s2.generate(16).ids == straight[24:]
    s2.load_prompt(ids)
    s2.reset_decode_counters()
    s2.native_loop(8, idle_after_decode=0.01)
    seconds, tokens = s2.decode_counters()
    # Each of the 7 decodes followed by a sample is counted up to that sample's logits read, sleep included.
    assert seconds >= 7 * 0.01, "llama.cpp's eval time runs on to the next logits read"


def test_stop_text_split_across_tokens_is_found(s2):
    s2.set_sampling(SamplingParams(temperature=0))
    s2.load_prompt(prompt_ids(s2))
    ref = s2.generate(40)
    pieces = [s2.decode([t]).encode() for t in ref.ids]
    # A stop text that starts inside token 20 and ends inside token 22.
    start = sum(len(p) for p in pieces[:20]) + max(0, len(pieces[20]) - 2)
    end = sum(len(p) for p in pieces[:22]) + min(1, len(pieces[22]))
    stop = ref.data[start:end]
    s2.load_prompt(prompt_ids(s2))
    chunk = s2.generate(40, stop_text=stop)
    assert chunk.stop == "stop_text"
    assert chunk.ids == ref.ids[: 23] or stop in b"".join(pieces[: len(chunk.ids)])
    assert stop not in b"".join(pieces[: len(chunk.ids) - 1])


def test_extra_buffer_types_follow_the_override_and_the_cpu(monkeypatch):
    from soma_local.s2.llama_cpp import extra_buffer_types_allowed

    monkeypatch.setenv("SOMA_LLAMA_EXTRA_BUFTS", "1")
    assert extra_buffer_types_allowed()
    monkeypatch.setenv("SOMA_LLAMA_EXTRA_BUFTS", "0")
    assert not extra_buffer_types_allowed()
    monkeypatch.delenv("SOMA_LLAMA_EXTRA_BUFTS")
    amx = " amx_tile" in open("/proc/cpuinfo").read()
    assert extra_buffer_types_allowed() is not amx


def test_a_long_prompt_decodes_in_batches(s2):
    """A prompt longer than one ubatch runs the batched matmuls (where AMX kernels die on some VMs)."""
    s2.load_prompt(s2.tokenize("Hello world, this is a long prompt. " * 60))
    assert s2.generate(8).ids


# Tokens the token loop gave before it was made faster (commit 6c15bb9, recorded on this project's 2-core
# AMD EPYC machine, portable x86-64-v3 build, at 1 and at 2 threads alike), with the prompt's logits
# digest they came from. A faster loop must give the same tokens from the same seed.
PINNED_LOGITS = "8982775885799bb4"
PINNED = {
    "t08_seed5": [
        198, 15423, 253, 4369, 9552, 1230, 28, 15418, 8362, 582, 28, 3346, 1991, 357, 314, 9552, 355, 441,
        30, 1094, 346, 3525, 253, 1230, 351, 582, 1767, 3501, 28, 975, 282, 253, 896, 1230, 338, 314, 1181,
        670, 253, 9552, 28, 965, 346, 1251, 3525, 582, 338, 314, 441, 253, 9552, 30, 17199, 28, 346, 1251,
        3525, 253, 896, 1230, 338, 314, 441, 253, 9552, 30, 198, 198, 2193, 1183, 28, 1771, 216, 34, 28,
        216, 35, 28, 284, 216, 37, 28, 1876, 9552, 2966, 338, 359, 441, 260, 1867, 9552, 2966, 30, 3569,
        28, 1398,
    ],
    "default_seed0": [
        198, 30921, 2966, 416, 325, 983, 281, 260, 9552, 2966, 28, 564, 9552, 2966, 359, 4355, 347, 2731,
        23313, 338, 359, 46522, 805, 411, 216, 33, 284, 2253, 30, 378, 808, 7522, 9552, 2966, 359, 216, 34,
        28, 216, 35, 28, 216, 37, 28, 216, 39, 28, 216, 33, 33, 28, 216, 33, 35, 28, 284, 216, 33, 39, 30,
        198, 198, 504, 2166, 2893, 260, 5278, 282, 9552, 2966, 314, 338, 502, 359, 4355, 347, 23313, 338,
        359, 2267, 2852, 670, 216, 33, 355, 1181, 670, 216, 34, 30, 669, 5278, 314, 441, 805, 1552,
    ],
    "topk_minp_seed123": [
        33, 30, 216, 33, 198, 198, 504, 808, 9552, 1230, 314, 216, 33, 30, 216, 198, 504, 1796, 9552, 1230,
        314, 216, 34, 30, 216, 198, 504, 3464, 9552, 1230, 314, 216, 35, 30, 216, 198, 504, 8629, 9552,
        1230, 314, 216, 37, 30, 216, 198, 504, 11397, 9552, 1230, 314, 216, 39, 30, 216, 198, 504, 15708,
        9552, 1230, 314, 216, 33, 33,
    ],
    "greedy": [
        198, 504, 808, 216, 34, 32, 9552, 2966, 359, 216, 34, 28, 216, 35, 28, 216, 37, 28, 216, 39, 28,
        216, 33, 33, 28, 216, 33, 35, 28, 216, 33, 39, 28, 216, 33, 41, 28, 216, 34, 35, 28, 216, 34, 41,
        28, 216, 35, 33, 28, 216, 35, 39, 28, 216, 36, 33, 28, 216, 36, 35, 28, 216, 36, 39,
    ],
}
PINNED_SESSION = [  # (ids, stop) of each call in test_the_loop_gives_the_pinned_tokens
    ([
        198, 1348, 314, 915, 253, 1398, 282, 808, 7522, 9552, 2966, 30, 339, 1135, 634, 4975, 2972, 1833,
        29, 1717, 29, 5528, 30, 339, 3413, 346, 288, 1042, 511, 260,
    ], "length"),
    ([
        198, 2931, 787, 28, 339, 5248, 915, 253, 1398, 282, 808, 7522, 9552, 2966, 30, 3361, 1085, 1685,
        314, 915,
    ], "length"),
    ([
        694, 1014, 429, 216, 34, 288, 216, 33, 32, 32, 30, 339, 1137, 339, 736, 1464, 253, 2545, 4810,
        1867, 288, 897, 1230, 429, 216, 33, 288, 216, 33, 32, 32, 338, 3247, 982, 46522, 411, 216, 35, 30,
        1644,
    ], "length"),
    ([
        339, 3413,
    ], "stop_text"),
    ([
        346, 288, 1188, 253, 1230, 284, 2545, 357, 1523, 260, 1695, 1920, 42, 365, 89, 25, 357, 1251, 325,
        46522, 411, 216, 35, 43, 365, 4877, 25, 357, 1251, 457,
    ], "length"),
]


def test_the_loop_gives_the_pinned_tokens(s2):
    """The same seed gives the same tokens as the loop did before it was made faster: plain runs at
    several sampling settings, then a session's calls (chunks, a branch that is rolled back, a stop at a
    line break, a stop text). Skipped where llama.cpp computes other logits for the prompt (another CPU
    or build): the pinned tokens then say nothing about the loop."""
    import hashlib

    ids = prompt_ids(s2)
    s2.set_sampling(SamplingParams(temperature=0.8, top_p=0.95, seed=5))
    s2.load_prompt(ids)
    if hashlib.sha256(s2.next_logits().tobytes()).hexdigest()[:16] != PINNED_LOGITS:
        pytest.skip("this machine's llama.cpp build computes other prompt logits than the pinned ones")
    got = {"t08_seed5": s2.generate(96).ids}
    for name, params, n in (
        ("default_seed0", SamplingParams(seed=0), 96),
        ("topk_minp_seed123", SamplingParams(temperature=0.7, top_p=0.8, top_k=20, min_p=0.05, seed=123), 64),
        ("greedy", SamplingParams(temperature=0), 64),
    ):
        s2.set_sampling(params)
        s2.load_prompt(ids)
        got[name] = s2.generate(n).ids
    assert got == PINNED
    s2.set_sampling(SamplingParams(temperature=0.8, top_p=0.95, seed=11))
    s2.load_prompt(ids)
    calls = [s2.generate(30)]
    with s2.branch():
        s2.feed(s2.tokenize("\nSomething else entirely, to disturb the cache.\n"))
        calls.append(s2.generate(20))
    calls += [s2.generate(40, stop_at_newline=True), s2.generate(40, stop_text=b"e"), s2.generate(30)]
    assert [(c.ids, c.stop) for c in calls] == PINNED_SESSION
