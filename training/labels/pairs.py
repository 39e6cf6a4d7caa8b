"""Labelled (state, statement) pairs as text: the statement bank's and the paper monitors' reader labels.

One place turns label references into what an S1 reads, for training (``training.s1.statement_reader``) and for
measuring (``benchmarks/s1_statements.py``), so both see the same states, statements and labels.

- Bank pairs: ``training/data/bank_labels.jsonl`` over ``bank_states.jsonl``; a pair's label is the mean
  of its readers' p (two readers on the doubly labelled pairs), its split the state's.
- Paper pairs: ``training/data/reader_labels.jsonl`` (the gold rubric, ``LABELLING.md``) for the shipped
  ``overthinking`` and ``unanswerable`` monitors, as families ``paper_overthinking`` and
  ``paper_unanswerable`` whose one wording is the monitor's statement; split by the bank's question hash.

No pair of a reserved question is ever returned: the reserved list is checked here, where every
consumer passes, and a hit is an error rather than a silent drop (it would mean a draw broke its rule).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from soma_local.calibration.recorded import reserved_questions
from soma_local.data_dir import data_dir
from soma_local.engine.monitors import resolve_monitors
from soma_local.errors import DataError
from soma_local.s1.state import parse_state
from training.bank.statement_bank import Bank, Split, bank_split, family_of, is_negation
from training.labels.readers import BankLabel, StateLabel, examples as reader_examples, read_labels
from training.states.bank_batches import Texts, read_states

PAPER_MONITORS = ("overthinking", "unanswerable")


@dataclass(frozen=True)
class Pair:
    sid: str  # the state
    question_id: str
    split: Split
    source: str  # trace, run (an embedded S2's run) or paper (reader_labels.jsonl)
    family: str
    key: str  # bank key (family.i or family.i.not), or the paper monitor's name
    statement: str
    task: str
    reasoning: str
    p: float  # the readers' mean probability that the statement holds

    @property
    def negated(self) -> bool:
        return is_negation(self.key)


def bank_pairs(bank: Bank, texts: Texts | None = None) -> list[Pair]:
    labels: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in read_labels(BankLabel):
        labels[(row.sid, row.key)].append(row.p)
    states = {s.sid: s for s in read_states()}
    texts = texts or Texts()
    parsed: dict[str, tuple[str, str]] = {}
    out = []
    for (sid, key), ps in labels.items():
        ref = states[sid]
        if sid not in parsed:
            parts = parse_state(texts.state(ref))
            if parts is None:
                raise DataError(f"{sid}: its rebuilt state is not 'Task: ...\\n\\nReasoning so far: ...'")
            parsed[sid] = parts
        task, reasoning = parsed[sid]
        out.append(Pair(sid, ref.question_id, ref.split, ref.source, family_of(key), key, bank.statement(key),
                        task, reasoning, sum(ps) / len(ps)))
    return out


def paper_pairs(root: Path | None = None) -> list[Pair]:
    statements = {m.name: m.statement for m in resolve_monitors(list(PAPER_MONITORS))}
    return [Pair(e.key, e.question_id, bank_split(e.question_id), "paper", f"paper_{e.monitor}", e.monitor,
                 statements[e.monitor], e.task, e.reasoning, e.label)
            for e in reader_examples(read_labels(StateLabel), root) if e.monitor in statements]


def all_pairs(bank: Bank, root: Path | None = None) -> list[Pair]:
    """Every labelled pair, checked against the reserved questions."""
    root = root or data_dir()
    pairs = bank_pairs(bank) + paper_pairs(root)
    reserved = reserved_questions(root)
    leaked = sorted({p.question_id for p in pairs if p.question_id in reserved})
    if leaked:
        raise DataError(f"labelled pairs of reserved questions: {', '.join(leaked[:5])}: fix the draw that made them")
    return pairs


def whole_states(pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs less those of "newest half" states (``bank_batches halves``): a measure of their own
    (``benchmarks.s1_early_evidence``), which would count their whole states' statements twice elsewhere."""
    halves = {s.sid for s in read_states() if s.keep_chars is not None}
    return [p for p in pairs if p.sid not in halves]


def trainable(pairs: Sequence[Pair], bank: Bank, split: Split) -> list[Pair]:
    """Pairs of ``split`` whose family may be trained on, fitted or chosen on (never a held-out one)."""
    held = {f.id for f in bank.held_out}
    return [p for p in pairs if p.split == split and p.family not in held]


# Forms that hold exactly when their family's wordings hold (GENERAL_RUBRIC.md), so a label carries over.
SAME_TRUTH_FORMS = ("question", "instruction", "label")


def reworded(pair: Pair, bank: Bank, rng: random.Random, share: float, negation_share: float,
             form_share: float = 0.0) -> Pair:
    """With probability ``share``, the same judgement in another wording of its family, or (with
    ``negation_share`` of those) as a negation with label 1 - p: wordings of a family mean the same
    thing and a negation holds exactly when its wording does not (``statement_bank.toml``). With
    ``form_share`` of the rest, it is shown as the family's question, instruction or label instead. A
    contrast is never reworded: it holds when both of its parts do, not when its family's wording does."""
    family = bank.by_id.get(pair.family)
    if family is None or pair.key.endswith(".contrast") or rng.random() >= share:
        return pair
    i = rng.randrange(len(family.wordings))
    negate = rng.random() < negation_share
    key = f"{family.id}.{i}" + (".not" if negate else "")
    if not negate and form_share and rng.random() < form_share:
        key = f"{family.id}.{rng.choice(SAME_TRUTH_FORMS)}"
    p = pair.p if negate == pair.negated else 1.0 - pair.p
    return replace(pair, key=key, statement=bank.statement(key), p=p)
