"""Readout runs over a calibration set, and their outcomes under each threshold of a grid.

One readout run per question is the whole S2 cost of calibrating any number of thresholds (paper
App. B). Runs are written one trace file per question and a finished one is never run again, so an
interrupted calibration resumes where it stopped.
"""

from __future__ import annotations

import queue
import random
from concurrent.futures import ThreadPoolExecutor
from itertools import zip_longest
from pathlib import Path
from typing import Callable, Sequence

from pydantic import BaseModel, ConfigDict, model_validator

from soma_local.jsonl import read_models
from soma_local.calibration.metrics import ItemResult
from soma_local.engine.monitors import Monitor
from soma_local.calibration.readout import ReadoutRun
from soma_local.s1.base import S1
from soma_local.s2.base import S2Backend
from soma_local.calibration.scoring import judge
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.engine.trace import RunEnd, TraceWriter, read_trace


class Question(BaseModel):
    """A benchmark or calibration item (``../shared/datasets/*/*.jsonl``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    question: str
    answer: str | None = None  # None: unanswerable
    answerable: bool = True
    source: str = ""

    @model_validator(mode="after")
    def _gold_where_answerable(self) -> "Question":
        if self.answerable and self.answer is None:
            raise ValueError(f"answerable question '{self.id}' has no answer")
        return self


def load_questions(path: str | Path) -> list[Question]:
    return read_models(path, Question)


def sample(items: Sequence[Question], limit: int | None, seed: int = 0) -> list[Question]:
    """The seeded ``limit`` questions of a set that ``soma calibrate`` and ``soma bench`` both run, so
    the same ``--limit`` and ``--seed`` give the same questions in each.

    A set with answerable and unanswerable questions is drawn per label, half each, so a small run
    still measures abstention and false abstention. Draws nest: a larger limit extends a smaller one's
    questions (a run can be grown and resumed). Within a label the questions keep file order, and the
    labels alternate, so a run stopped part-way has both.
    """
    if limit is None or limit >= len(items):
        return list(items)
    groups = [[i for i, q in enumerate(items) if q.answerable], [i for i, q in enumerate(items) if not q.answerable]]
    groups = [g for g in groups if g]
    quotas = [limit // len(groups) + (k < limit % len(groups)) for k in range(len(groups))]
    picked = []
    for group, quota in zip(groups, quotas):
        order = list(group)
        random.Random(seed).shuffle(order)  # a shuffled prefix, so a larger limit extends a smaller one's draw
        picked.append(sorted(order[:quota]))
    return [items[i] for rank in zip_longest(*picked) for i in rank if i is not None]


def trace_file(out_dir: Path, question: Question) -> Path:
    return out_dir / (question.id.replace("/", "_") + ".jsonl")


def _finished(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        return any(isinstance(r, RunEnd) for r in read_trace(path))
    except ValueError:
        return False


def run_readouts(
    questions: Sequence[Question],
    s2: S2Backend | Sequence[S2Backend],
    s1: S1,
    monitors: Sequence[Monitor],
    config: RunConfig,
    out_dir: Path,
    prompt_of: Callable[[Question], str] = lambda q: q.question,
    on_done: Callable[[Question], None] = lambda q: None,
) -> list[Path]:
    """One readout trace per question under ``out_dir`` (finished ones are kept, not rerun). Several
    backends (sessions on an S2 server) keep that many questions in flight, one per backend; each
    trace is written by its own run, so concurrency changes neither the files nor their order here."""
    if config.takeovers != "branch":
        raise ValueError(f"calibration needs a readout mode, got '{config.mode}'")
    backends = [s2] if isinstance(s2, S2Backend) else list(s2)
    free: queue.SimpleQueue[S2Backend] = queue.SimpleQueue()
    for backend in backends:
        free.put(backend)

    def run(q: Question) -> Path:
        path = trace_file(out_dir, q)
        if not _finished(path):
            path.unlink(missing_ok=True)  # a killed run's partial trace
            backend = free.get()
            try:
                with TraceWriter(path) as trace:
                    supervise(prompt_of(q), backend, s1, monitors, config, trace)
            finally:
                free.put(backend)
        on_done(q)
        return path

    if len(backends) == 1:
        return [run(q) for q in questions]
    with ThreadPoolExecutor(len(backends), thread_name_prefix="soma-readout") as pool:
        return list(pool.map(run, questions))


def grid_results(
    runs: Sequence[tuple[Question, ReadoutRun]], monitor: str, grid: Sequence[float]
) -> dict[float, list[ItemResult]]:
    """Each question's scored outcome at each h (pure over the readout records)."""
    out: dict[float, list[ItemResult]] = {h: [] for h in grid}
    for q, run in runs:
        for h, read in zip(grid, run.grid(monitor, grid)):
            abstained, correct = judge(read.answer, q.answer if q.answerable else None)
            out[h].append(ItemResult(id=q.id, answerable=q.answerable, abstained=abstained, correct=correct,
                                     tokens=read.tokens, takeover=read.takeover is not None))
    return out
