"""Trace records: every run writes one JSONL file that can be replayed, read off and rendered.

One record per line with a ``type`` tag. A run's file is written as it goes (flushed per record), so a
killed run leaves every scan up to the kill readable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Annotated, Iterator, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from soma_local.errors import DataError


class _Record(BaseModel):
    # A remind-only or readout run has h = inf: JSON has no infinity, so write it as "Infinity" (the
    # default, null, would not read back as a float).
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class RunStart(_Record):
    type: Literal["run_start"] = "run_start"
    question: str
    s2_model: str
    s1: str
    monitors: list[dict]
    thresholds: dict[str, float]
    settings: dict
    started_at: str


class MonitorScan(_Record):
    p: float | None  # None: the scan failed and added no evidence
    evidence: float | None
    score: float
    action: str
    in_episode: bool


class Scan(_Record):
    type: Literal["scan"] = "scan"
    index: int
    thinking_tokens: int  # thinking tokens written so far (the paper's t)
    # Characters of run_end's thinking that S1 read at this scan, so a scan's state can be rebuilt (to
    # label it by hand, or to distil its p); None in traces recorded before it was written.
    thinking_chars: int | None = None
    position: int  # S2 context position at the pause
    at_line_break: bool
    monitors: dict[str, MonitorScan]
    s1_seconds: float
    error: str | None = None


class Reminder(_Record):
    type: Literal["reminder"] = "reminder"
    monitor: str
    thinking_tokens: int
    text: str
    tokens: int


class Branch(_Record):
    """A takeover continuation produced off the main line (readout) and rolled back."""

    type: Literal["branch"] = "branch"
    monitor: str
    scan_index: int
    thinking_tokens: int
    text: str
    inserted_tokens: int
    generated_tokens: int


class Takeover(_Record):
    type: Literal["takeover"] = "takeover"
    monitor: str
    scan_index: int
    thinking_tokens: int
    text: str  # the takeover text inserted into S2's context


class TokenCounts(_Record):
    thinking: int = 0  # generated while thinking
    answer: int = 0  # generated after thinking closed (incl. after a takeover)
    inserted: int = 0  # reminders and takeover text fed to S2, never generated
    probe: int = 0  # generated on branches (readout continuations, baseline probes)
    prompt: int = 0

    @property
    def generated(self) -> int:
        """S2 tokens as the paper counts them: thinking + answer + extra generated tokens."""
        return self.thinking + self.answer + self.probe


class Timings(_Record):
    wall: float = 0.0
    s2_prefill: float = 0.0
    s2_decode: float = 0.0
    s1: float = 0.0

    @property
    def loop(self) -> float:
        return max(0.0, self.wall - self.s2_prefill - self.s2_decode - self.s1)


class RunEnd(_Record):
    type: Literal["run_end"] = "run_end"
    # "answer" | "takeover" | "limit" | "eos_in_thinking" | "interrupted" (Ctrl-C) | "cancelled" (the caller's cancel)
    stop: str
    thinking: str  # S2's own thinking text, reminders excluded
    answer: str  # everything S2 wrote after thinking closed, takeover prefill included
    output: str  # the full S2 text as S2 saw it (reminders and takeover text included)
    takeover: str | None
    scans: int
    failed_scans: int
    reminders: int
    tokens: TokenCounts
    timings: Timings


TraceRecord = Annotated[
    Union[RunStart, Scan, Reminder, Branch, Takeover, RunEnd], Field(discriminator="type")
]
_adapter: TypeAdapter = TypeAdapter(TraceRecord)


class TraceWriter:
    """Appends records to a JSONL file (or nowhere when ``path`` is None)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._fh: IO[str] | None = None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self.records: list[BaseModel] = []

    def write(self, record: BaseModel) -> None:
        self.records.append(record)
        if self._fh:
            self._fh.write(record.model_dump_json() + "\n")
            self._fh.flush()

    def close(self) -> None:
        if self._fh:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def parse_record(raw: dict) -> BaseModel:
    """One record from its JSON form, as ``TraceWriter`` writes it or a bench result line keeps it."""
    return _adapter.validate_python(raw)


def first_record(path: str | Path) -> dict | None:
    """The first record of a JSONL file as plain JSON (None for an empty file): enough to tell a run trace
    (``type`` run_start) from a result or label file before reading it whole."""
    with Path(path).open(encoding="utf-8") as fh:
        first = next((line for line in fh if line.strip()), None)
    if first is None:
        return None
    try:
        return json.loads(first)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: first line is not JSON: {exc}") from None


def read_trace(path: str | Path) -> Iterator[BaseModel]:
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield parse_record(json.loads(line))
            except Exception as exc:  # noqa: BLE001 - re-raised with the location
                raise ValueError(f"{path}:{lineno}: not a trace record: {exc}") from None
