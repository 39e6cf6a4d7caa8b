"""The statement bank (``training/data/statement_bank.toml``) and the question split it is labelled on.

A statement-reading S1 must judge statements it never saw. So the bank holds many families of
statements, each written several ways with a negation, and whole families are held out: they are
labelled only on states of the bank's test questions and never reach training, the temperature or the
choice of a model. Statements are named ``family.i`` and their negations ``family.i.not``.

The bank's questions are the training half of the shared traces
(``training.states.reader_set.training_half``), never a reserved one; within that half a seeded hash
sends each question to ``train`` (70 %), ``dev`` (15 %: model choice and temperature) or ``test``
(15 %: every reported figure), so all of a question's states sit on one side. ``eval`` states come from the other half, which no S1 was ever trained on: the
cleanest measure of statements and questions never seen.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from soma_local.errors import DataError
from training.paths import STATEMENT_BANK

SPLIT_SEED = "soma-statement-bank-v1"
# "eval": a question of the other half (replay's), labelled for measuring only: no model was trained,
# fitted or chosen on any state of it, the shipped S1's predecessors included.
Split = Literal["train", "dev", "test", "eval"]


class Family(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z_]+$")
    about: str
    held_out: bool = False
    wordings: list[str] = Field(min_length=2)
    negations: list[str]

    @model_validator(mode="after")
    def _paired(self) -> "Family":
        if len(self.negations) != len(self.wordings):
            raise ValueError(f"family {self.id}: one negation per wording")
        return self


class Bank(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    family: list[Family]

    def statement(self, key: str) -> str:
        """The text of ``family.i`` or ``family.i.not``."""
        fam, _, rest = key.partition(".")
        index, _, neg = rest.partition(".")
        family = self.by_id[fam]
        return (family.negations if neg == "not" else family.wordings)[int(index)]

    @property
    def by_id(self) -> dict[str, Family]:
        return {f.id: f for f in self.family}

    @property
    def trained(self) -> list[Family]:
        return [f for f in self.family if not f.held_out]

    @property
    def held_out(self) -> list[Family]:
        return [f for f in self.family if f.held_out]


def load_bank(path: Path = STATEMENT_BANK) -> Bank:
    try:
        return Bank.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise DataError(f"{path}: not a statement bank: {exc}") from None


def family_of(key: str) -> str:
    return key.split(".", 1)[0]


def is_negation(key: str) -> bool:
    return key.endswith(".not")


def bank_split(question_id: str) -> Split:
    """Which side of the bank's split a question is on (seeded, stable under any subset)."""
    draw = int.from_bytes(hashlib.sha256(f"{SPLIT_SEED}\0{question_id}".encode()).digest()[:8], "big") / 2**64
    return "train" if draw < 0.70 else "dev" if draw < 0.85 else "test"
