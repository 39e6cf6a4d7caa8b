"""BatchedS1: scans from concurrent runs share forward passes and each run gets its own answer."""

from __future__ import annotations

import threading
from typing import Callable

from soma_local.s1.base import S1, S1Query
from soma_local.s1.batched import BatchedS1

from conftest import WordTokenizer
from waiting import wait_for


class LengthS1(S1):
    """p = a function of the state's length; each forward pass is recorded. ``hold``, when set, is
    called at the start of the first pass with its pairs and returns when that pass may go on: the
    test's way of having scans arrive while the model is busy, however the threads are scheduled."""

    name = "length"

    def __init__(self, fail_on: str | None = None):
        self.passes: list[int] = []
        self.fail_on = fail_on
        self.hold: Callable[[list], object] | None = None
        self._tok = WordTokenizer()

    @property
    def tokenizer(self):
        return self._tok

    def score_states(self, pairs):
        if self.hold is not None and not self.passes:
            self.hold(pairs)
        self.passes.append(len(pairs))
        if self.fail_on and any(self.fail_on in s for _, s in pairs):
            raise RuntimeError("S1 broke")
        return [1 / (1 + len(s)) for _, s in pairs]


def _score_all(s1: S1, tasks: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}

    def one(task: str) -> None:
        try:
            out[task] = s1.score([S1Query("stmt", task, f"reasoning of {task}"), S1Query("other", task, "r")])
        except RuntimeError as exc:
            out[task] = exc

    threads = [threading.Thread(target=one, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_scans_share_passes_and_get_their_own_probabilities():
    tasks = [f"task number {i}" for i in range(8)]
    alone = {t: LengthS1().score([S1Query("stmt", t, f"reasoning of {t}"), S1Query("other", t, "r")])
             for t in tasks}
    inner = LengthS1()
    batched = BatchedS1(inner)
    # The first pass waits until every other scan is queued behind it (two pairs each), so the next pass
    # carries them all: the test does not depend on which thread the machine happens to run when.
    inner.hold = lambda first: wait_for(
        lambda: len(first) + sum(len(job.pairs) for job in batched._queue) == 2 * len(tasks),
        "the other scans to queue while the first pass runs")
    assert _score_all(batched, tasks) == alone
    assert len(inner.passes) < len(tasks) and max(batched.batch_sizes) > 1
    assert sum(inner.passes) == 2 * len(tasks)


def test_a_failing_pass_fails_each_of_its_scans_not_the_next_ones():
    inner = LengthS1(fail_on="task 0")
    batched = BatchedS1(inner)
    out = _score_all(batched, ["task 0"])
    assert isinstance(out["task 0"], RuntimeError)
    assert _score_all(batched, ["task 1"]) == _score_all(LengthS1(), ["task 1"])


def test_wrappers_forward_the_whole_s1_interface(tmp_path):
    """A cache or batcher changes how scores are got, never what the S1 says about itself (the server's
    planner reads reads_at_once through them, replay trained_questions, calibration version)."""
    from soma_local.s1.cache import CachedS1, ScoreCache

    inner = LengthS1()
    inner.input_limit, inner.reads_at_once, inner.template_tokens = 123, 77, 3
    inner.trained_questions, inner.version = frozenset({"q1"}), "v1"
    for wrapper in (BatchedS1(inner), CachedS1(inner, ScoreCache(tmp_path, "length"))):
        seen = (wrapper.name, wrapper.input_limit, wrapper.reads_at_once, wrapper.template_tokens,
                wrapper.trained_questions, wrapper.version, wrapper.tokenizer)
        assert seen == ("length", 123, 77, 3, frozenset({"q1"}), "v1", inner.tokenizer)
