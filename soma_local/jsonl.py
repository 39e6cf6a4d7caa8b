"""Reading user files into pydantic models, with errors that name the file, the line and the field."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from soma_local.errors import DataError

M = TypeVar("M", bound=BaseModel)


def field_errors(error: ValidationError) -> str:
    """``field 'a.b': message; ...`` for every field a validation refused (a check of the whole record:
    its message alone)."""
    parts = []
    for e in error.errors():
        where, message = ".".join(str(x) for x in e["loc"]), e["msg"].removeprefix("Value error, ")
        parts.append(f"field '{where}': {message}" if where else message)
    return "; ".join(parts)


def read_models(path: str | Path, model: type[M]) -> list[M]:
    """Every non-blank line of a JSONL file as ``model``; the first bad line is one ``DataError``."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(model.model_validate_json(line))
                except ValidationError as exc:
                    raise DataError(f"{path}:{lineno}: {field_errors(exc)}") from None
    return out
