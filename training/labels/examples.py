"""Labelled S1 examples: (monitor, task, reasoning so far, soft label), from traces or a labelled file.

Teachers: ``rules`` (training.labels.rules, free and at scale), ``s1:SPEC`` (any S1 backend, e.g. the LLM
readout or Jev when a key is set), or ``file:PATH`` (already labelled states in the s1_labels format).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from pydantic import BaseModel, ValidationError

from soma_local.errors import DataError
from soma_local.engine.monitors import Monitor
from soma_local.s1.base import S1, S1Query
from training.labels.rules import final_answer, rule_label
from training.states.cuts import Cut

_STATE = re.compile(r"^Task: (?P<task>.*?)\n\nReasoning so far: (?P<reasoning>.*)$", re.S)


@dataclass(frozen=True)
class Example:
    key: str
    question_id: str
    monitor: str
    task: str
    reasoning: str
    label: float


class LabelledState(BaseModel):
    """One row of an ``s1_labels``-style file."""

    question_id: str
    monitor: str
    state: str
    p: float


def read_labelled(path: Path) -> list[Example]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            try:
                row = LabelledState.model_validate_json(line)
            except ValidationError as exc:
                raise DataError(f"{path}:{line_no}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None
            match = _STATE.match(row.state)
            if match is None:
                raise DataError(f"{path}:{line_no}: field 'state' is not 'Task: ...\\n\\nReasoning so far: ...'")
            out.append(Example(f"{path.name}:{line_no}", row.question_id, row.monitor,
                               match["task"], match["reasoning"], row.p))
    return out


def sample_cuts(cuts: Sequence[Cut], per_trace: int, total: int, seed: int) -> list[Cut]:
    """At most ``per_trace`` cuts of each trace, then ``total`` of those, both drawn with ``seed``."""
    rng = random.Random(seed)
    by_trace: dict[str, list[Cut]] = {}
    for cut in cuts:
        by_trace.setdefault(cut.trace.trace_id, []).append(cut)
    pool = [c for trace_id in sorted(by_trace) for c in rng.sample(by_trace[trace_id], min(per_trace, len(by_trace[trace_id])))]
    rng.shuffle(pool)
    return pool[:total]


def label_with_rules(cuts: Iterable[Cut], monitor: Monitor) -> list[Example]:
    return [
        Example(c.key, c.trace.question_id, monitor.name, c.trace.question, c.reasoning,
                rule_label(monitor.name, c.reasoning, final_answer(c.trace)))
        for c in cuts
    ]


def label_with_s1(cuts: Sequence[Cut], monitor: Monitor, teacher: S1) -> list[Example]:
    """Soft labels from a teacher S1 (its calibrated p); a failed scan drops that example."""
    out = []
    for c in cuts:
        (p,) = teacher.score([S1Query(monitor.statement, c.trace.question, c.reasoning)])
        if p is not None:
            out.append(Example(c.key, c.trace.question_id, monitor.name, c.trace.question, c.reasoning, p))
    return out


def gold_question_ids(labels_dir: Path) -> set[str]:
    """Every question any gold file draws states from: kept out of training to avoid leakage."""
    ids: set[str] = set()
    for path in sorted(labels_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            ids.update(json.loads(line)["question_id"] for line in fh if line.strip())
    return ids


def split_by_question(examples: Sequence[Example], held_out: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Train / held-out split over questions, so no question's states sit on both sides."""
    questions = sorted({e.question_id for e in examples})
    random.Random(seed).shuffle(questions)
    held = set(questions[: int(round(len(questions) * held_out))])
    return [e for e in examples if e.question_id not in held], [e for e in examples if e.question_id in held]
