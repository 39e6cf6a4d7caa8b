"""Reasoning traces as training material: the shared real traces and the JSONL traces our engine writes.

Both become one record type so the state cutter and the labellers never care where a trace came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel

from soma_local.errors import DataError
from soma_local.calibration.replay import load_traces as load_recorded
from soma_local.engine.trace import RunEnd, RunStart, read_trace
from training.labels import final_boxed

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


class Trace(BaseModel):
    """One S2 run: the task, S2's own thinking (reminders excluded) and what it wrote after thinking."""

    trace_id: str
    question_id: str
    question: str
    thinking: str
    answer_text: str
    closed: bool
    answerable: bool | None = None  # None: unknown (our own runs on user questions)
    ground_truth: str | float | list[float] | None = None
    model: str = ""

    def gold_answer(self) -> str | None:
        """The logged gold answer as text (UMWP logs some as ``[14.0]``)."""
        value = self.ground_truth
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, float):
            value = f"{value:g}"
        return value

    def final_answer(self) -> str | None:
        """The answer this trace ended on: its last boxed answer, else the gold one."""
        return final_boxed(self.answer_text) or final_boxed(self.thinking) or self.gold_answer()


def split_output(output: str) -> tuple[str, str, bool]:
    """(thinking, text after thinking, whether thinking closed) of a ``<think>...`` completion."""
    body = output[len(THINK_OPEN) :] if output.startswith(THINK_OPEN) else output
    body = body.lstrip("\n")
    head, sep, tail = body.partition(THINK_CLOSE)
    return head, tail, bool(sep)


def thinking_offset(output: str) -> int:
    """Where the thinking starts inside ``output`` (gold ``cut_char`` values index ``output``)."""
    body = output[len(THINK_OPEN) :] if output.startswith(THINK_OPEN) else output
    return len(output) - len(body.lstrip("\n"))


def read_shared_traces(path: Path) -> Iterator[Trace]:
    """Rows of ``datasets/traces/*.jsonl`` (format in traces/PROMPT_NOTE.md), parsed by replay's reader."""
    for row in load_recorded(path):
        thinking, tail, closed = split_output(row.output)
        yield Trace(
            trace_id=f"{path.stem}:{row.question_id}",
            question_id=row.question_id,
            question=row.question,
            thinking=thinking,
            answer_text=tail,
            closed=closed,
            answerable=row.answerable,
            ground_truth=row.ground_truth if row.answerable else None,
            model=row.model,
        )


def read_engine_trace(path: Path) -> Trace:
    """A ``soma run`` trace file: the question from ``run_start``, the thinking from ``run_end``."""
    start = end = None
    for record in read_trace(path):
        if isinstance(record, RunStart):
            start = record
        elif isinstance(record, RunEnd):
            end = record
    if start is None or end is None:
        raise DataError(f"{path}: an engine trace needs run_start and run_end records")
    return Trace(
        trace_id=f"engine:{path.stem}",
        question_id=f"engine:{path.stem}",
        question=start.question,
        thinking=end.thinking,
        answer_text=end.answer,
        closed=end.stop != "limit" and end.stop != "eos_in_thinking",
        model=start.s2_model,
    )


def load_traces(paths: list[Path]) -> list[Trace]:
    """Every trace under the given files or folders; a JSONL file is read by its first record's shape."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.jsonl")) if path.is_dir() else [path])
    traces: list[Trace] = []
    for file in files:
        if not file.is_file():
            raise DataError(f"{file}: no such trace file")
        first = file.open(encoding="utf-8").readline()
        try:
            is_engine = json.loads(first).get("type") == "run_start"
        except json.JSONDecodeError:
            raise DataError(f"{file}: first line is not JSON") from None
        traces.extend([read_engine_trace(file)] if is_engine else read_shared_traces(file))
    return traces
