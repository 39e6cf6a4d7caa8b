"""Labels of one monitor's statement, from any of the files ``soma tune`` reads.

- **Label JSONL** (a reader's labels, the trace viewer's hand labels, ``s1_labels``-style files): one
  state per line with ``p`` (the probability that the statement holds; 0 or 1 for a hand label), the
  state as ``state`` (``Task: ...\\n\\nReasoning so far: ...``) or as ``task`` and ``reasoning``, and the
  statement it was written for as ``statement`` (or, in ``s1_labels`` files, the monitor's ``monitor``
  name). ``group`` or ``question_id`` keeps one question's states on one side of a split.
- **A recorded trace** (``soma run --trace``): each scan's p for this monitor from the S1 that run
  used, on the state as it was at that scan: another S1's judgement distilled into this one's adapter.

Labels written for another statement are refused, never mixed in: an adapter fitted to them would
sharpen the wrong monitor.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from soma_local.engine.monitors import Monitor
from soma_local.engine.trace import RunEnd, RunStart, Scan, first_record, read_trace
from soma_local.errors import DataError
from soma_local.jsonl import field_errors
from soma_local.s1.state import parse_state


@dataclass(frozen=True)
class Label:
    task: str
    reasoning: str
    p: float
    group: str  # states of one question share a group: a split never cuts through one
    origin: str  # file:line, for messages


class LabelLine(BaseModel):
    """One line of a label file; other fields (a reader's note, provenance) are kept by the file, not here."""

    model_config = ConfigDict(extra="ignore")

    p: float = Field(ge=0.0, le=1.0)
    statement: str | None = None
    monitor: str | None = None
    state: str | None = None
    task: str | None = None
    reasoning: str | None = None
    group: str | None = None
    question_id: str | None = None

    @model_validator(mode="after")
    def _has_state(self) -> "LabelLine":
        if self.state is None and (self.task is None or self.reasoning is None):
            raise ValueError("needs 'state', or 'task' and 'reasoning'")
        if self.statement is None and self.monitor is None:
            raise ValueError("needs 'statement' (the statement it was labelled for) or 'monitor'")
        return self


def _group(task: str) -> str:
    return "task-" + hashlib.sha256(task.encode()).hexdigest()[:12]


def _other_statement(path: Path, where: str, theirs: str, monitor: Monitor) -> DataError:
    return DataError(f"{path}{where}: labelled for another statement ('{theirs}'); monitor '{monitor.name}' states "
                     f"'{monitor.statement}'. Labels must be written for this exact statement")


def _from_label_file(path: Path, monitor: Monitor) -> list[Label]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = LabelLine.model_validate_json(line)
            except ValidationError as exc:
                raise DataError(f"{path}:{lineno}: {field_errors(exc)}") from None
            if row.statement is not None and row.statement.strip() != monitor.statement:
                raise _other_statement(path, f":{lineno}", row.statement, monitor)
            if row.statement is None and row.monitor != monitor.name:
                raise DataError(f"{path}:{lineno}: labelled for monitor '{row.monitor}', not '{monitor.name}'")
            if row.state is not None:
                parts = parse_state(row.state)
                if parts is None:
                    raise DataError(f"{path}:{lineno}: field 'state' is not 'Task: ...\\n\\nReasoning so far: ...'")
                task, reasoning = parts
            else:
                task, reasoning = row.task, row.reasoning
            out.append(Label(task, reasoning, row.p, row.group or row.question_id or _group(task), f"{path}:{lineno}"))
    return out


def trace_states(path: Path) -> tuple[RunStart, RunEnd, list[Scan]]:
    """A recorded run: its start, its end and its scans, each scan with the length of the thinking it read."""
    try:
        records = list(read_trace(path))
    except ValueError as exc:
        raise DataError(str(exc)) from None
    start = next((r for r in records if isinstance(r, RunStart)), None)
    end = next((r for r in records if isinstance(r, RunEnd)), None)
    if start is None or end is None:
        raise DataError(f"{path}: the run has no {'run_start' if start is None else 'run_end'} record (killed "
                        "before it ended?): its scans' text is written at the end")
    scans = [r for r in records if isinstance(r, Scan)]
    if any(s.thinking_chars is None for s in scans):
        raise DataError(f"{path}: recorded by a soma-local that did not note each scan's text (no "
                        "'thinking_chars'); record the run again")
    return start, end, scans


def _from_trace(path: Path, monitor: Monitor) -> list[Label]:
    start, end, scans = trace_states(path)
    theirs = next((m.get("statement", "") for m in start.monitors if m.get("name") == monitor.name), None)
    if theirs is None:
        raise DataError(f"{path}: the run had no monitor '{monitor.name}' "
                        f"(it had {', '.join(m.get('name', '?') for m in start.monitors) or 'none'})")
    if theirs.strip() != monitor.statement:
        raise _other_statement(path, "", theirs, monitor)
    group = _group(start.question)
    return [Label(start.question, end.thinking[: s.thinking_chars], s.monitors[monitor.name].p, group,
                  f"{path}: scan {s.index + 1}")
            for s in scans if monitor.name in s.monitors and s.monitors[monitor.name].p is not None]


def read_labels(paths: list[Path], monitor: Monitor) -> list[Label]:
    """Every label of ``monitor``'s statement in these files (each a label JSONL or a recorded trace)."""
    out = []
    for path in paths:
        if not path.exists():
            raise DataError(f"{path}: no such label file")
        first = first_record(path)
        if first is None:
            raise DataError(f"{path}: empty label file")
        out += _from_trace(path, monitor) if first.get("type") == "run_start" else _from_label_file(path, monitor)
    return out
