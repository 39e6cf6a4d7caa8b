from soma_local.s1.state import REASONING_SHARE, build_state, format_state, task_cut

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


def test_a_task_that_fits_beside_a_share_of_reasoning_is_kept_whole():
    """The paper's rule wherever it leaves S1 something to judge."""
    short = "q" * 40  # of a 73-token budget: the reasoning still gets more than its third
    assert task_cut(short, Chars(), limit=100) is None
    state = build_state(short, "r" * 500, Chars(), limit=100)
    assert state.startswith(f"Task: {short}\n\nReasoning so far: ") and len(state) == 100


def test_long_task_is_cut_so_the_newest_reasoning_keeps_its_share():
    """A task that alone fills S1's input used to leave S1 no reasoning at all (issue 12, item 7)."""
    task = "".join(f"[{i:05d}]" for i in range(30000))  # ~210k characters
    reasoning = "\n".join(f"line {i} of the reasoning" for i in range(300))
    limit, reserve = 600, 50
    cut = task_cut(task, Chars(), limit, reserve)
    assert cut is not None and cut.task_tokens == len(task) and cut.kept_tokens < cut.budget
    state = build_state(task, reasoning, Chars(), limit, reserve)
    assert len(state) <= limit - reserve
    shown_task, body = state[len("Task: "):].split("\n\nReasoning so far: ", 1)
    assert shown_task.startswith("[00000]") and shown_task.endswith("[29999]"), "its beginning and end"
    assert "tokens of the task left out" in shown_task
    assert body.endswith("line 299 of the reasoning")
    assert len(body) >= REASONING_SHARE * (limit - reserve - len("Task: \n\nReasoning so far: ")) - 64


def test_real_tokenizer_truncation(s2):
    task = "Q: how many apples?"
    reasoning = " ".join(f"step{i}" for i in range(3000))
    state = build_state(task, reasoning, s2, limit=512, reserve=64)
    assert len(s2.encode(state)) <= 512 - 64 + 2
    assert state.startswith("Task: Q: how many apples?") and state.endswith("step2999")
