"""The reader-labelled S1 training set: which states, drawn how, and how their text is rebuilt.

Gold (``s1_labels/``) was made by a strong LLM reader following ``LABELLING.md``; training labels of the
same kind come from the same kind of reader, on states drawn the way the engine would show them to S1:
cut at the scan schedule (``training.states.cuts.scan_cuts``), formatted as gold (``Task: Q\\n\\nReasoning so
far: H``, H the last 7,000 characters cut at a line break). The repo stores only references
(dataset, model, question_id, cut_char, monitor) and the reader's label; the text is rebuilt from the
data directory, so no trace text is ever committed.

The question split is fixed and seeded: within each (dataset, answerable) group, the half of the
questions with the smallest seeded hash may train; the other half never does, so replay and threshold
calibration keep it. Reserved (gold) questions are never drawn, whichever half they fall in.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import AbstractSet, Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from soma_local.calibration.recorded import RecordedTrace
from soma_local.errors import DataError
from soma_local.s1.cues import window as limit_h  # as gold: H limited to its last 7,000 characters
from soma_local.s2.model_files import GgufVocab
from training.states.cuts import scan_cuts

SPLIT_SEED = "soma-s1-split-v1"
MONITORS = ("overthinking", "unanswerable")


class StateRef(BaseModel):
    """One state by reference: enough to rebuild its text from the data directory."""

    model_config = ConfigDict(frozen=True)

    sid: str
    dataset: str
    model: str
    question_id: str
    answerable: bool
    cut_char: int  # offset into the trace's ``output`` where H ends (as gold's ``cut_char``)
    monitor: str


def short_model(model: str) -> str:
    return model.split("/")[-1]


def _draw(qid: str) -> str:
    return hashlib.sha256(f"{SPLIT_SEED}\0{qid}".encode()).hexdigest()


def training_half(questions: Iterable[tuple[str, bool, str]]) -> set[str]:
    """The question ids that may train: per (dataset, answerable) group, the floor(n/2) smallest draws.

    ``questions`` are (dataset, answerable, question_id) triples; duplicates (one per S2 model) are fine.
    """
    groups: dict[tuple[str, bool], set[str]] = defaultdict(set)
    for dataset, answerable, qid in questions:
        groups[(dataset, answerable)].add(qid)
    out: set[str] = set()
    for ids in groups.values():
        out.update(sorted(ids, key=_draw)[: len(ids) // 2])
    return out


def trace_key(dataset: str, model: str, question_id: str) -> tuple[str, str, str]:
    return dataset, short_model(model), question_id


def gold_state(task: str, thinking: str) -> str:
    """A state as gold formats it: the reasoning trimmed of newlines at both ends, then limited to its
    last 7,000 characters (cut at a line break)."""
    return f"Task: {task}\n\nReasoning so far: {limit_h(thinking.strip(chr(10)))}"


def render_state(trace: RecordedTrace, cut_char: int) -> str:
    """The gold-format state of a cut at ``cut_char`` into the trace's output."""
    start = trace.thinking_start
    if not start <= cut_char <= len(trace.output):
        raise DataError(f"{trace.question_id}: cut_char {cut_char} outside the thinking")
    return gold_state(trace.question, trace.output[start:cut_char])


def _weighted_sample(rng: random.Random, items: Sequence[int], weights: Sequence[float], k: int) -> list[int]:
    """k distinct items drawn with probability proportional to weight (Efraimidis-Spirakis keys)."""
    keyed = sorted(items, key=lambda i: -(rng.random() ** (1.0 / weights[i])))
    return sorted(keyed[:k])


def draw_states(
    traces: Sequence[RecordedTrace],
    vocab: GgufVocab,
    reserved: AbstractSet[str],
    per_monitor: int,
    per_trace: int = 40,
    seed: int = 0,
) -> list[StateRef]:
    """States for the reader, ``per_monitor`` for each monitor, from the training half only.

    Overthinking: answerable traces, cuts drawn with weight growing with the cut's position, so late
    cuts (after an answer, where the statement can hold) are common. Unanswerable: half of the states
    from unanswerable questions and half from answerable ones, cuts drawn uniformly.
    """
    train = training_half((t.dataset, t.answerable, t.question_id) for t in traces)
    rng = random.Random(seed)
    pools: dict[tuple[str, bool], list[tuple[RecordedTrace, int]]] = defaultdict(list)
    for trace in traces:
        if trace.question_id not in train or trace.question_id in reserved:
            continue
        offsets = [o for o in scan_cuts(trace.thinking, vocab) if trace.thinking[:o].strip()]
        if not offsets:
            continue
        base = trace.thinking_start
        for monitor in MONITORS:
            if monitor == "overthinking" and not trace.answerable:
                continue
            weights = [float(i + 1) if monitor == "overthinking" else 1.0 for i in range(len(offsets))]
            for i in _weighted_sample(rng, range(len(offsets)), weights, min(per_trace, len(offsets))):
                pools[(monitor, trace.answerable)].append((trace, base + offsets[i]))
    out: list[StateRef] = []
    for monitor in MONITORS:
        shares = {True: per_monitor} if monitor == "overthinking" else {False: per_monitor // 2, True: per_monitor - per_monitor // 2}
        for answerable, n in shares.items():
            pool = pools[(monitor, answerable)]
            if len(pool) < n:
                raise DataError(f"{monitor}: only {len(pool)} cuts from {'answerable' if answerable else 'unanswerable'} traces, {n} wanted")
            for trace, cut in rng.sample(pool, n):
                out.append(StateRef(sid="", dataset=trace.dataset, model=short_model(trace.model),
                                    question_id=trace.question_id, answerable=trace.answerable,
                                    cut_char=cut, monitor=monitor))
    rng.shuffle(out)
    return [r.model_copy(update={"sid": f"r{i:05d}"}) for i, r in enumerate(out)]


def read_refs(path: Path) -> list[StateRef]:
    with path.open(encoding="utf-8") as fh:
        return [StateRef.model_validate_json(line) for line in fh if line.strip()]


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
