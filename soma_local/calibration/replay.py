"""Trace replay: S1 and the controller over recorded S2 traces, with no S2 compute.

This is how an S1 is judged on a CPU: the real Qwen3-8B and R1-Distill-Llama-8B traces are cut at the
paper's pause schedule, S1 scores each cut, and the controller decides. A recorded trace cannot react
to a reminder, so replay uses the no-reminder controller (evidence from the first pause, takeover at
S >= h). Outcomes (DESIGN.md): a takeover whose prefill is an abstention is an abstention; any other
takeover answers with the last answer the trace had stated before the takeover point.

Tokens are counted with the embedded SmolLM2 GGUF's tokenizer (loaded vocabulary-only, so it costs
no weights): the recorded S2s' own tokenizers are not available offline, and the same counter for
vanilla and SOMA keeps the comparison fair even where absolute counts differ from the S2's.

Pure parts (``takeover_pause``, ``replay_item``) are tested without
models; the pause schedule is the live loop's own (``engine.pauses``); ``scan`` is the only place that calls S1, normally through ``CachedS1`` (an on-disk cache).
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from soma_local.calibration.metrics import ItemResult
from soma_local.calibration.recorded import RecordedTrace
from soma_local.calibration.scoring import extract_answer, grade, is_abstention, judge
from soma_local.engine.controller import Action, Controller
from soma_local.engine.monitors import Monitor
from soma_local.engine.pauses import PauseRule, pause_cuts
from soma_local.s1.base import S1, S1Query
from soma_local.s2.model_files import GgufVocab


# ---- controller and outcome (pure) ----------------------------------------------------------------------

# The run mode replay plays (``engine.supervise.MODES``): a recorded trace cannot react to a reminder, so
# evidence counts from the first pause and h is the no_reminder mode's.
MODE = "no_reminder"


def takeover_pause(probs: Sequence[float | None], h: float) -> int | None:
    """Index of the pause where the no-reminder controller at h takes over, if any."""
    if math.isinf(h):
        return None
    controller = Controller(h, remind=False)
    for i, p in enumerate(probs):
        if controller.update(p).action is Action.TAKEOVER:
            return i
    return None


class ScannedTrace(BaseModel):
    """A trace cut at its pauses and scored by S1: everything replay needs, S1-free from here on."""

    model_config = ConfigDict(extra="forbid")

    id: str
    dataset: str
    model: str
    answerable: bool
    gold: str | None
    pause_tokens: list[int]  # thinking tokens at each pause
    stated: list[str | None]  # the last answer stated in the thinking up to each pause
    probs: list[float | None]  # S1's p at each pause
    vanilla: ItemResult


def replay_item(trace: ScannedTrace, h: float, abstaining_takeover: bool, takeover_answer_tokens: int = 0) -> ItemResult:
    """The outcome under the no-reminder controller at h. Tokens: thinking up to the takeover pause plus
    ``takeover_answer_tokens`` (the takeover's answer is not generated in replay)."""
    k = takeover_pause(trace.probs, h)
    if k is None:
        return trace.vanilla
    if abstaining_takeover:
        abstained, correct = True, False
    else:
        answer = trace.stated[k]
        abstained = answer is not None and is_abstention(f"\\boxed{{{answer}}}")
        correct = not abstained and trace.gold is not None and grade(trace.gold, answer)
    return ItemResult(
        id=trace.id,
        answerable=trace.answerable,
        abstained=abstained,
        correct=correct,
        tokens=trace.pause_tokens[k] + takeover_answer_tokens,
        takeover=True,
    )


# ---- S1 over the cuts ----------------------------------------------------------------------------

def scan(
    trace: RecordedTrace,
    monitor: Monitor,
    s1: S1,
    vocab: GgufVocab,
    rule: PauseRule,
) -> ScannedTrace:
    """Cut one trace at the pause schedule and score every cut (pass a ``CachedS1`` to keep scores).
    A failing S1 call is a missing scan (None), as in the live loop."""
    points, cuts = pause_cuts(trace.thinking, vocab.pieces(trace.thinking), rule)
    probs: list[float | None] = []
    for reasoning in cuts:
        try:
            (p,) = s1.score([S1Query(monitor.statement, trace.question, reasoning)])
        except Exception:  # noqa: BLE001 - as in the live loop, S1 trouble is a missing scan
            p = None
        probs.append(p)
    answer = trace.answer
    abstained, correct = judge(answer, trace.gold) if answer is not None else (False, False)
    total = len(vocab.tokenize(trace.output[trace.thinking_start :]))
    return ScannedTrace(
        id=trace.question_id,
        dataset=trace.dataset,
        model=trace.model,
        answerable=trace.answerable,
        gold=trace.gold,
        pause_tokens=points,
        stated=[extract_answer(c) for c in cuts],
        probs=probs,
        vanilla=ItemResult(id=trace.question_id, answerable=trace.answerable, abstained=abstained,
                           correct=correct, tokens=total),
    )


def sample_traces(traces: Sequence[RecordedTrace], limit: int | None, seed: int) -> list[RecordedTrace]:
    """A seeded subset of one trace file, in file order (the LLM-judge S1 is too slow for whole files
    on a CPU). Questions for ``soma calibrate`` and ``soma bench`` are drawn by ``calibration.runs.sample``;
    this draw stays as it was so the committed ``--limit`` replay table (``replay_umwp_readout_s1``)
    reproduces."""
    if limit is None or limit >= len(traces):
        return list(traces)
    keep = sorted(random.Random(seed).sample(range(len(traces)), limit))
    return [traces[i] for i in keep]


def calibration_ids(ids: Iterable[str], share: float, seed: int, reserved: frozenset[str] = frozenset()) -> set[str]:
    """The questions that calibrate h; the rest are reported. Decided per question by a seeded hash,
    so a question stays on its side whatever subset or S2 it comes with (both S2s' traces of one
    question land together, and a larger --limit only adds questions to each side). A reserved (gold)
    question never calibrates: gold must stay independent of every fitted number."""

    def draw(qid: str) -> float:
        digest = hashlib.sha256(f"{seed}\0{qid}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    return {q for q in ids if draw(q) < share and q not in reserved}


def group_key(trace: ScannedTrace | RecordedTrace) -> tuple[str, str]:
    return trace.dataset, trace.model.split("/")[-1]


def grouped(items: Iterable[ScannedTrace]) -> dict[tuple[str, str], list[ScannedTrace]]:
    out: dict[tuple[str, str], list[ScannedTrace]] = {}
    for t in items:
        out.setdefault(group_key(t), []).append(t)
    return out
