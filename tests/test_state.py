from soma_local.state import build_state, format_state

from conftest import WordTokenizer


class Chars:
    """One token per character: exact, reversible, model-free."""

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


def test_format():
    assert format_state("Q?", "H") == "Task: Q?\n\nReasoning so far: H"


def test_fits_unchanged():
    assert build_state("Q", "a b c", WordTokenizer(), limit=100) == format_state("Q", "a b c")


def test_truncation_keeps_task_whole_and_newest_reasoning():
    task = "What is the sum of the first 100 integers?"
    reasoning = "\n".join(f"line {i} of the reasoning" for i in range(200))
    state = build_state(task, reasoning, Chars(), limit=600, reserve=50)
    assert state.startswith(f"Task: {task}\n\nReasoning so far: ")
    assert len(state) <= 600 - 50
    assert state.endswith("line 199 of the reasoning")
    assert "line 0 of" not in state
    body = state.split("Reasoning so far: ", 1)[1]
    assert body.startswith("line "), "cut starts at a line boundary"


def test_task_kept_even_when_it_alone_exceeds_the_limit():
    task = "x" * 500
    state = build_state(task, "some reasoning", Chars(), limit=100)
    assert state == format_state(task, "")


def test_real_tokenizer_truncation(s2):
    task = "Q: how many apples?"
    reasoning = " ".join(f"step{i}" for i in range(3000))
    state = build_state(task, reasoning, s2, limit=512, reserve=64)
    assert len(s2.encode(state)) <= 512 - 64 + 2
    assert state.startswith("Task: Q: how many apples?") and state.endswith("step2999")
