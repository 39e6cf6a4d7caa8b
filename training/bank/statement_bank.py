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

Besides its declarative wordings, each family carries the forms users write (``FORMS``): a yes/no
``question``, an ``instruction`` ("Flag when ..."), a short ``label`` and, where it makes sense, a
``contrast`` in the paper monitors' pattern ("X has appeared in the reasoning, but it is still doing Y",
X being the family named by its ``after``). The first three hold exactly when the family's wordings hold
(``GENERAL_RUBRIC.md``, "Questions, instructions and labels"); a contrast holds when both parts do. They
are named ``family.question``, ``family.instruction``, ``family.label`` and ``family.contrast``. Every
family has a ``category``, and ``[[minimal_pair]]`` tables name two statements of different families
that differ in one condition (answer confirmed or not, still checking or stopped, ...), to test later
that an S1 reads the condition and not the topic.
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
# What a statement is about: what the reasoning does, where it is in the solution, its mistakes, its
# checks, how it is written, what it works with.
Category = Literal["behaviour", "stage", "errors", "checks", "style", "content"]
CATEGORIES: tuple[str, ...] = Category.__args__
# The forms users write besides a declarative statement; ``contrast`` is optional.
FORMS = ("question", "instruction", "label", "contrast")
LABEL_WORDS = 6  # a label is a short noun phrase, not a sentence


class Contrast(BaseModel):
    """The paper monitors' pattern: ``after``'s condition has appeared, but the family's holds now."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    after: str = Field(pattern=r"^[a-z_]+$")
    text: str = Field(min_length=1)


class Family(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z_]+$")
    about: str
    held_out: bool = False
    wordings: list[str] = Field(min_length=2)
    negations: list[str]
    category: Category
    question: str = Field(min_length=1)
    instruction: str = Field(min_length=1)
    label: str = Field(min_length=1)
    contrast: Contrast | None = None

    @model_validator(mode="after")
    def _paired(self) -> "Family":
        if len(self.negations) != len(self.wordings):
            raise ValueError(f"family {self.id}: one negation per wording")
        return self

    @model_validator(mode="after")
    def _forms(self) -> "Family":
        if not self.question.endswith("?"):
            raise ValueError(f"family {self.id}: question: a yes/no question ends with '?': {self.question!r}")
        if self.instruction.endswith("?"):
            raise ValueError(f"family {self.id}: instruction: an instruction, not a question: {self.instruction!r}")
        if len(self.label.split()) > LABEL_WORDS or self.label.endswith("."):
            raise ValueError(f"family {self.id}: label: at most {LABEL_WORDS} words and no full stop: {self.label!r}")
        if self.contrast is not None and self.contrast.after == self.id:
            raise ValueError(f"family {self.id}: contrast: 'after' names another family than its own")
        return self

    def form(self, name: str) -> str | None:
        """The text of one of ``FORMS`` (None for a family without a contrast)."""
        if name not in FORMS:
            raise KeyError(name)
        if name == "contrast":
            return self.contrast.text if self.contrast else None
        return getattr(self, name)

    def keys(self) -> list[str]:
        """Every statement of the family: wordings, negations, then its forms."""
        return ([f"{self.id}.{i}" for i in range(len(self.wordings))] + [f"{self.id}.{i}.not" for i in range(len(self.negations))]
                + [f"{self.id}.{name}" for name in FORMS if self.form(name) is not None])


class MinimalPair(BaseModel):
    """Two statements of different families that differ in one condition (named by ``condition``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a: str
    b: str
    condition: str = Field(min_length=1)


class Bank(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    family: list[Family]
    minimal_pair: list[MinimalPair] = []

    @model_validator(mode="after")
    def _consistent(self) -> "Bank":
        seen: dict[str, str] = {}
        for f in self.family:
            if f.id in seen:
                raise ValueError(f"family {f.id}: id used twice")
            seen[f.id] = f.id
        ids = set(seen)
        texts: dict[str, str] = {}
        for f in self.family:
            if f.contrast is not None and f.contrast.after not in ids:
                raise ValueError(f"family {f.id}: contrast: 'after' is not a family of the bank: {f.contrast.after!r}")
            for key in f.keys():
                text = " ".join(self.statement(key).lower().split())
                if text in texts:
                    raise ValueError(f"family {f.id}: {key.split('.', 1)[1]}: the same text as {texts[text]}: {text!r}")
                texts[text] = key
        pairs = set()
        for n, pair in enumerate(self.minimal_pair):
            where = f"minimal_pair {n + 1} ({pair.a} / {pair.b})"
            for side in (pair.a, pair.b):
                try:
                    self.statement(side)
                except (KeyError, ValueError, IndexError):
                    raise ValueError(f"{where}: {side!r} is not a statement of the bank") from None
            if family_of(pair.a) == family_of(pair.b):
                raise ValueError(f"{where}: both statements are of family {family_of(pair.a)}; a minimal pair spans two families")
            if frozenset((pair.a, pair.b)) in pairs:
                raise ValueError(f"{where}: declared twice")
            pairs.add(frozenset((pair.a, pair.b)))
        return self

    def statement(self, key: str) -> str:
        """The text of ``family.i``, ``family.i.not`` or ``family.FORM`` (one of ``FORMS``)."""
        fam, _, rest = key.partition(".")
        index, _, neg = rest.partition(".")
        family = self.by_id[fam]
        if index in FORMS:
            text = family.form(index)
            if text is None or neg:
                raise KeyError(key)
            return text
        return (family.negations if neg == "not" else family.wordings)[int(index)]

    def statements(self) -> dict[str, str]:
        """Every statement of the bank by key: each family's wordings, negations and forms."""
        return {key: self.statement(key) for f in self.family for key in f.keys()}

    def category(self, name: str) -> list[Family]:
        return [f for f in self.family if f.category == name]

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
    """The bank at ``path``; a broken one is a ``DataError`` naming the family (or minimal pair) and field."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"{path}: not a statement bank: {exc}") from None
    families = raw.get("family") if isinstance(raw, dict) else None
    if isinstance(families, list):  # each family on its own first, so an error names it
        for n, entry in enumerate(families):
            try:
                Family.model_validate(entry)
            except ValidationError as exc:
                name = entry.get("id", "?") if isinstance(entry, dict) else "?"
                raise DataError(f"{path}: family {name} (#{n + 1}): {_fields(exc, f'family {name}: ')}") from None
    try:
        return Bank.model_validate(raw)
    except ValidationError as exc:
        raise DataError(f"{path}: not a statement bank: {_fields(exc)}") from None


def _fields(exc: ValidationError, known: str = "") -> str:
    """A validation error as 'field: message' lines (a model check's message names its own field;
    ``known``, the family already named, is dropped from it)."""
    out = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ").removeprefix(known)
        out.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(out)


def family_of(key: str) -> str:
    return key.split(".", 1)[0]


def is_negation(key: str) -> bool:
    return key.endswith(".not")


FORM_ORDER = ("wording", "negation", "question", "instruction", "label", "contrast", "paper")


def form_of(key: str) -> str:
    """How a statement is written: a family's wording, its negation, one of its forms, or a paper monitor."""
    parts = key.split(".")
    if len(parts) == 1:
        return "paper"
    if key.endswith(".not"):
        return "negation"
    return "wording" if parts[1].isdigit() else parts[1]


def bank_split(question_id: str) -> Split:
    """Which side of the bank's split a question is on (seeded, stable under any subset)."""
    draw = int.from_bytes(hashlib.sha256(f"{SPLIT_SEED}\0{question_id}".encode()).digest()[:8], "big") / 2**64
    return "train" if draw < 0.70 else "dev" if draw < 0.85 else "test"
