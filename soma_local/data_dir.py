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
