"""Scenario layer: a monitor is plain text (statement, reminder, takeover action) in a TOML file.

Only the statement is shown to S1; the reminder and the takeover text only ever reach S2. A user adds a
scenario by dropping one more file into ``monitors/`` or passing its path, so loading must say exactly
which file and which field is wrong.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from soma_local.errors import MonitorFileError

MONITORS_DIR = Path(__file__).resolve().parent.parent / "monitors"


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


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        field = ".".join(str(x) for x in item["loc"]) or "(file)"
        parts.append(f"field '{field}': {item['msg']}")
    return "; ".join(parts)


def load_monitor(path: str | Path) -> Monitor:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MonitorFileError(f"{path}: monitor file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MonitorFileError(f"{path}: not valid TOML: {exc}") from None
    try:
        return Monitor.model_validate(raw)
    except ValidationError as exc:
        raise MonitorFileError(f"{path}: {_describe(exc)}") from None


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
