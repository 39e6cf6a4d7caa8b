"""Where training's files live: the committed data (references and labels, never trace text), the
scratch folder for batches, caches and checkpoints, and the gold files of the data directory.

Every training module takes its paths from here, so a file is named once.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAINING = REPO / "training"
DATA = TRAINING / "data"  # committed
RUNS = TRAINING / "runs"  # scratch: reader batches, feature caches, checkpoints

READER_STATES = DATA / "reader_states.jsonl"  # the paper monitors' states by reference
READER_LABELS = DATA / "reader_labels.jsonl"
BANK_STATES = DATA / "bank_states.jsonl"  # the statement bank's states by reference
BANK_LABELS = DATA / "bank_labels.jsonl"
STATEMENT_BANK = DATA / "statement_bank.toml"
S2_RUNS = DATA / "s2_runs.jsonl"  # the embedded S2s' own thinking

READER_BATCHES = RUNS / "reader_batches"
BANK_BATCHES = RUNS / "bank_batches"


def gold_labels(root: Path) -> Path:
    """The folder of the S1 gold labels in a data directory (never trained, fitted or chosen on)."""
    return root / "s1_labels"


def gold_dev(root: Path) -> Path:
    return gold_labels(root) / "gold_dev.jsonl"


def shown(path: Path) -> str:
    """A path as a message names it: relative to the repository."""
    return str(path.relative_to(REPO))
