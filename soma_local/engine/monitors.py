"""Scenario layer: a monitor is plain text (statement, reminder, takeover action) in a TOML file.

Only the statement is shown to S1; the reminder and the takeover text only ever reach S2. A user adds a
scenario by dropping one more file into ``monitors/`` or passing its path, so the file is the whole
monitor: what calibration optimises and how its benchmark questions are prompted are fields too, and
no code anywhere branches on a monitor's name. Loading says exactly which file and field is wrong.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from soma_local.errors import MonitorFileError
from soma_local.jsonl import field_errors

MONITORS_DIR = Path(__file__).resolve().parents[2] / "monitors"


ObjectiveKind = Literal["fewest_tokens", "abstention"]


class Takeover(BaseModel):
    """What ends thinking: ``conclusion`` closes the reasoning, ``prefill`` starts the answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conclusion: str = ""
    prefill: str = ""
    max_tokens: int = Field(gt=0, description="tokens S2 may write after the prefill")


class Monitor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    statement: str
    reminder: str
    takeover: Takeover
    default_threshold: float = Field(default=3.0, gt=0)
    objective: ObjectiveKind | None = Field(
        default=None, description="what `soma calibrate` optimises: fewest_tokens (the lowest mean token count) "
                                  "or abstention (abstention minus false abstention); none: pass --objective")
    calibration_data: list[str] = Field(
        default_factory=list, description="`soma calibrate`'s default question files, relative to the data directory")
    benchmarks: list[str] = Field(
        default_factory=list, description="the test sets `soma bench run --monitor` measures this monitor on "
                                          "when no --benchmark is named: shipped set names or JSONL files "
                                          "relative to the data directory")
    prompt_suffix: str = Field(
        default="", description="appended to each calibration and benchmark question of this monitor's scenario, "
                                "so h is calibrated on the prompts it is tested with")

    _file: Path | None = PrivateAttr(default=None)  # where it was read from: its adapters lie beside it

    @property
    def file(self) -> Path | None:
        return self._file

    def run_identity(self) -> str:
        """The name and a digest of what a supervised run reads from this file (the statement, the
        reminder, the takeover, the prompt suffix): result files key on it, so a run of an edited monitor,
        or of another file with the same name, never resumes one made with this one."""
        fields = self.model_dump_json(include={"statement", "reminder", "takeover", "prompt_suffix"})
        return f"{self.name}@{hashlib.sha256(fields.encode()).hexdigest()[:12]}"

    def prompt(self, question: str) -> str:
        """The user message for a calibration or benchmark question of this monitor's scenario."""
        return question + self.prompt_suffix

    @field_validator("statement", "reminder")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @field_validator("default_threshold")
    @classmethod
    def _finite(cls, value: float) -> float:
        if math.isnan(value):
            raise ValueError("must be a number")
        return value


def load_monitor(path: str | Path) -> Monitor:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MonitorFileError(f"{path}: monitor file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MonitorFileError(f"{path}: not valid TOML: {exc}") from None
    try:
        monitor = Monitor.model_validate(raw)
    except ValidationError as exc:
        raise MonitorFileError(f"{path}: {field_errors(exc)}") from None
    monitor._file = path
    return monitor


def resolve_monitors(specs: Iterable[str], directory: Path = MONITORS_DIR) -> list[Monitor]:
    """Each spec is a path to a TOML file or the name of one in ``monitors/``."""
    monitors = []
    for spec in specs:
        path = Path(spec)
        if not path.suffix and not path.exists():
            path = directory / f"{spec}.toml"
            if not path.exists():
                known = ", ".join(sorted(p.stem for p in directory.glob("*.toml")))
                raise MonitorFileError(f"unknown monitor '{spec}' (known: {known}; or pass a .toml path)")
        monitors.append(load_monitor(path))
    names = [m.name for m in monitors]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise MonitorFileError(f"monitor names must be unique, repeated: {', '.join(sorted(duplicates))}")
    return monitors
