"""Where the benchmarks, calibration sets and recorded traces live: one rule for every command.

Nothing is copied into the repository (``../shared/datasets/MANIFEST.md`` gives sources and
licences); a user points ``SOMA_DATA_DIR`` at their own copy.
"""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """``$SOMA_DATA_DIR`` when set (and not empty), else ``shared/datasets`` beside the checkout."""
    return Path(os.environ.get("SOMA_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "datasets")


def shareable_path(path: str | Path) -> str:
    """``path`` as it may be written into a file that leaves this machine (results, model cards).

    A file under the data directory becomes ``$SOMA_DATA_DIR/<relative path>`` (any reader can point
    the variable at their own copy), one under the working directory its relative path, anything else
    its bare name: the build machine's absolute paths (home, user name, checkout layout) never leak.
    """
    full = Path(path).resolve()
    data = data_dir().resolve()
    if full == data or data in full.parents:
        rel = full.relative_to(data).as_posix()
        return "$SOMA_DATA_DIR" if rel == "." else f"$SOMA_DATA_DIR/{rel}"
    cwd = Path.cwd().resolve()
    if cwd in full.parents:
        return full.relative_to(cwd).as_posix()
    return full.name
