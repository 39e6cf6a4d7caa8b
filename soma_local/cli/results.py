"""What the calibration and replay commands write: a progress bar, JSON results."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel


def progress(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", dynamic_ncols=True)


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def jsonable(obj: BaseModel):
    """Through pydantic's JSON encoder, which writes h = inf as "Infinity" (plain json cannot)."""
    return json.loads(obj.model_dump_json())
