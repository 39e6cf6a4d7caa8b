"""Append-only result files: one JSON line per (method, model, benchmark, question).

Crash safety is the point: each line is written whole with one ``write`` followed by flush and fsync,
so a kill leaves at most one torn last line. Opening a file for a run drops that torn tail and
returns the ids already done, so a rerun continues where the killed one stopped with nothing lost
and nothing written twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, ConfigDict, ValidationError

from soma_local.bench.datasets import Benchmark
from soma_local.bench.methods.base import Outcome
from soma_local.errors import DataError


class ResultLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    benchmark: str
    scenario: str
    method: str
    model: str
    prompt: str
    gold: str | None
    answerable: bool
    choices: bool = False
    settings: dict  # engine and method settings: a file only ever holds one setting's results
    seconds: float
    outcome: Outcome


def model_label(s2_model: str) -> str:
    """How results name an S2: a GGUF file by its stem, an embedded model by its name (whose dots,
    as in qwen2.5-0.5b, are not a file suffix)."""
    path = Path(s2_model)
    return path.stem if path.suffix.lower() == ".gguf" else path.name


def result_path(out: Path, s2_model: str, bench: Benchmark, method: str) -> Path:
    """``out/<model>/<set>/<method>.jsonl`` for a set measured with the monitor it was chosen for (the
    paper's layout), else ``out/<model>/<monitor>/<set>/<method>.jsonl``: a set may be measured with
    several monitors, and their SOMA runs must not share a file."""
    folder = out / model_label(s2_model)
    if not bench.home:
        folder = folder / bench.scenario
    return folder / bench.name / f"{method}.jsonl"


def read_results(path: Path) -> Iterator[ResultLine]:
    """Every complete line of a result file (a torn last line from a kill is skipped)."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.endswith(b"\n"):
                return  # torn tail: the run was killed mid-write; the next run rewrites it
            try:
                yield ResultLine.model_validate_json(raw)
            except ValidationError as exc:
                raise DataError(f"{path}:{lineno}: not a result line: {exc}") from None


class ResultFile:
    """One results file opened for appending; ``prompts`` maps each id already in it to the prompt it
    was asked with (``done``: those ids)."""

    def __init__(self, path: Path, settings: dict):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()
        self.prompts: dict[str, str] = {}
        if path.exists():
            for line in read_results(path):
                if not _same_settings(line.settings, settings):
                    raise DataError(
                        f"{path}: holds results made with other settings ({_diff(line.settings, settings)}); "
                        "use another --out or remove the file"
                    )
                self.prompts[line.id] = line.prompt
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @property
    def done(self) -> set[str]:
        return set(self.prompts)

    def _drop_torn_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            with self.path.open("r+b") as fh:
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())

    def append(self, line: ResultLine) -> None:
        if line.id in self.done:
            raise DataError(f"{self.path}: question {line.id} is already recorded")
        data = (line.model_dump_json() + "\n").encode("utf-8")
        written = os.write(self._fd, data)
        while written < len(data):  # a short write (signals, full pipes) must not tear the line
            written += os.write(self._fd, data[written:])
        os.fsync(self._fd)
        self.prompts[line.id] = line.prompt

    def close(self) -> None:
        os.close(self._fd)


def _same_settings(stored: dict, wanted: dict) -> bool:
    """Lines recorded before result files named the monitor a run used are taken as made with the
    monitor of the file's place (its name is in the path)."""
    if "monitor" not in stored:
        wanted = {k: v for k, v in wanted.items() if k != "monitor"}
    return stored == wanted


def _diff(old: dict, new: dict) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k}: {json.dumps(old.get(k))} vs {json.dumps(new.get(k))}" for k in keys)
