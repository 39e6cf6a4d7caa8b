"""Recorded S2 runs: the one trace model that calibration, replay and training read.

Two kinds of file hold a finished run: the shared traces (``<data>/traces/*.jsonl``, one run a line,
format in ``traces/PROMPT_NOTE.md``) and a trace our own engine writes (``soma run --trace``). Both
become a ``RecordedTrace``, so replay's scans, the reader's states and training's cuts are taken from
the same text, decided by the same rules:

- **thinking** is what follows ``<think>`` verbatim, up to ``</think>`` (its leading newline included):
  replay's cuts, token counts and S1 inputs and every committed state reference are measured on it.
  A state rendered in the gold format trims newlines at both ends of its reasoning; that is the state
  format's rule, not the trace's.
- **closed**: the thinking ended and an answer section follows (``</think>`` in the output): S2 closed
  it, or the engine closed it for S2 (a takeover, or S2 stopping inside its thinking). A run stopped at
  the token limit is not closed, and an interrupted one (Ctrl-C) is not read at all.
- **gold** is the logged answer as the dataset files write it (UMWP logs some as ``[14.0]``: ``"14"``).

The reserved (gold) questions are loaded here too, by the one loader every reader of them uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from pydantic import BaseModel, ConfigDict

from soma_local.calibration.runs import Question
from soma_local.calibration.scoring import after_thinking
from soma_local.engine.trace import RunEnd, RunStart, first_record, read_trace
from soma_local.errors import DataError
from soma_local.jsonl import read_models

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# The instruction every shared trace's prompt begins with after its question (traces/PROMPT_NOTE.md:
# question + this + Liu et al.'s abstention sentences, which the unanswerable monitor's prompt_suffix
# carries whole). S1's task is the question alone, as in the S1 gold labels; the embedded-S2 runs of
# training.states.s2_runs are prompted with this instruction alone.
BASE_INSTRUCTION = " Let's think step by step and output the final answer within \\boxed{}."
RESERVED_LIST = Path("s1_labels") / "reserved_questions.txt"


class RecordedTrace(BaseModel):
    """One finished S2 run: a line of ``traces/*.jsonl``, or one of our own run traces."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    dataset: str
    model: str
    question_id: str
    answerable: bool | None  # None: unknown (our own run on a question of no dataset)
    prompt: str
    output: str
    ground_truth: str | float | list[float | str] | None = None  # UMWP logs some golds as [14.0]
    trace_id: str = ""  # unique across files: "<file stem>:<question id>", or "engine:<file stem>"

    @property
    def question(self) -> str:
        head, sep, _ = self.prompt.partition(BASE_INSTRUCTION)
        return head.strip() if sep else self.prompt.strip()

    @property
    def gold(self) -> str | None:
        if not self.answerable or self.ground_truth is None:
            return None
        value = self.ground_truth
        if isinstance(value, list):
            if not value:
                return None
            value = value[0]
        if isinstance(value, float):  # as the dataset files write them: 15.0 -> "15", exact otherwise
            return str(int(value)) if value.is_integer() else repr(value)
        return str(value)

    @property
    def thinking_start(self) -> int:
        """Where the thinking starts in ``output`` (after an opening ``<think>``)."""
        return len(THINK_OPEN) if self.output.startswith(THINK_OPEN) else 0

    @property
    def thinking(self) -> str:
        return self.output[self.thinking_start :].split(THINK_CLOSE, 1)[0]

    @property
    def answer(self) -> str | None:
        """What the run wrote after its thinking; None when the thinking never closed."""
        return after_thinking(self.output)

    @property
    def closed(self) -> bool:
        return self.answer is not None


def load_traces(path: str | Path) -> list[RecordedTrace]:
    """The rows of one shared trace file."""
    stem = Path(path).stem
    return [t.model_copy(update={"trace_id": f"{stem}:{t.question_id}"}) for t in read_models(path, RecordedTrace)]


def trace_files(root: Path) -> list[Path]:
    """The shared trace files of a data directory (an error when there are none)."""
    files = sorted((root / "traces").glob("*.jsonl"))
    if not files:
        raise DataError(f"{root / 'traces'}: no trace files (is SOMA_DATA_DIR right? soma replay also takes --traces FILE)")
    return files


def load_all(root: Path) -> list[RecordedTrace]:
    """Every shared trace of a data directory."""
    return [t for f in trace_files(root) for t in load_traces(f)]


class InterruptedRun(DataError):
    """An engine trace of a run stopped by Ctrl-C: its reasoning ends where the user stopped it, so
    replaying it, or training on it, would take a cut-off run for a finished one."""


def from_engine_trace(records: Iterable[BaseModel], questions: dict[str, Question] | None, source: str) -> RecordedTrace:
    """One of our own run traces as a recorded trace. With ``questions`` (keyed by question text), its
    answerability and gold come from the dataset item with the same question, which must exist; without,
    the question stands alone (answerability unknown), as training reads a user's runs. Best replayed
    from vanilla or remind-only runs, which are not cut short by a takeover."""
    records = list(records)
    start = next((r for r in records if isinstance(r, RunStart)), None)
    end = next((r for r in records if isinstance(r, RunEnd)), None)
    if start is None or end is None:
        raise DataError(f"{source}: not a finished run trace (needs run_start and run_end)")
    if end.stop == "interrupted":
        raise InterruptedRun(f"{source}: the run was interrupted (stop=interrupted), so its reasoning is incomplete")
    trace_id = f"engine:{Path(source).stem}"
    closed = end.stop != "limit"
    output = THINK_OPEN + end.thinking + (THINK_CLOSE + end.answer if closed else "")
    if questions is None:
        return RecordedTrace(dataset="engine", model=start.s2_model, question_id=trace_id, answerable=None,
                             prompt=start.question, output=output, trace_id=trace_id)
    q = questions.get(start.question.strip())
    if q is None:
        raise DataError(f"{source}: its question is in none of the --questions files")
    return RecordedTrace(dataset=q.source or "engine", model=start.s2_model, question_id=q.id,
                         answerable=q.answerable, prompt=q.question, output=output, ground_truth=q.answer,
                         trace_id=trace_id)


def load_trace_files(paths: Iterable[Path]) -> list[RecordedTrace]:
    """Every trace under the given files or folders; a file is read as an engine run trace or as shared
    trace rows by its first record's shape."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.glob("*.jsonl")) if path.is_dir() else [path])
    traces: list[RecordedTrace] = []
    for file in files:
        if not file.is_file():
            raise DataError(f"{file}: no such trace file")
        first = first_record(file)
        if first is not None and first.get("type") == "run_start":
            try:
                traces.append(from_engine_trace(read_trace(file), None, str(file)))
            except ValueError as exc:
                raise DataError(str(exc)) from None
        else:
            traces.extend(load_traces(file))
    return traces


def reserved_questions(root: Path) -> frozenset[str]:
    """The questions the S1 gold splits draw from: nothing fitted (an S1, an adapter, an h) may see one.

    A missing list is an error, never an empty set: without it no reader can tell a gold question from
    any other, and a silent empty list would let one through.
    """
    path = root / RESERVED_LIST
    if not path.is_file():
        raise DataError(f"{path}: missing (the reserved-question list guards gold; nothing is fitted without it)")
    return frozenset(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
