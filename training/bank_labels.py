"""Statement-bank labels as data: merged from the readers' outputs, stored by reference.

    python -m training.bank_labels merge --from DIR     # readers' BATCH.READER.jsonl -> bank_labels.jsonl
    python -m training.bank_labels agreement            # reader vs reader on the doubly labelled pairs

A reader's output line is ``{"sid", "key", "p", "why"}`` with the batch's opaque statement key (a, b,
...); ``training/data/bank_states.jsonl`` maps it to the bank statement it showed (``family.i`` or
``family.i.not``). Each row of ``training/data/bank_labels.jsonl`` is one reader's judgement of one
(state, statement) pair with its provenance: ``reader``, ``batch``, ``pass`` (1 for the first label of a
pair, 2 for the independent second one of a ``D`` batch) and ``labelled_on``. No state text is stored.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from soma_local.errors import DataError
from soma_local.s1.temperature import evaluate
from training.bank_batches import REFS, BankState, read_states
from training.reader_labels import SCALE
from training.reader_set import write_jsonl
from training.statement_bank import family_of, is_negation

HERE = Path(__file__).resolve().parent
LABELS = HERE / "data" / "bank_labels.jsonl"


class BankLabel(BaseModel):
    model_config = ConfigDict(frozen=True)

    sid: str
    key: str  # the bank statement: family.i or family.i.not
    p: float
    why: str
    reader: str
    batch: str
    pass_: int
    labelled_on: str

    def row(self) -> dict:
        out = self.model_dump()
        out["pass"] = out.pop("pass_")
        return out


class _ReaderOut(BaseModel):
    sid: str
    key: str
    p: float
    why: str


def read_labels(path: Path = LABELS) -> list[BankLabel]:
    rows = []
    if not path.is_file():
        return rows
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            raw = json.loads(line)
            raw["pass_"] = raw.pop("pass")
            row = BankLabel.model_validate(raw)
            if row.p not in SCALE:
                raise DataError(f"{path}:{n}: p {row.p} is not on the rubric's scale")
            rows.append(row)
    return rows


def merge(out_dirs: Sequence[Path], states: Sequence[BankState], existing: Sequence[BankLabel]) -> list[BankLabel]:
    """Existing rows plus every new (pair, reader) label in ``out_dirs``; D batches hold second labels."""
    by_sid = {s.sid: s for s in states}
    rows = list(existing)
    seen = {(r.sid, r.key, r.reader) for r in rows}
    first = {(r.sid, r.key) for r in rows if r.pass_ == 1}
    today = date.today().isoformat()
    files = sorted((f for d in out_dirs for f in d.glob("*.jsonl")), key=lambda f: (f.name.startswith("D"), f.name))
    for f in files:
        batch, reader = f.name.split(".")[:2]
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            out = _ReaderOut.model_validate_json(line)
            state = by_sid.get(out.sid)
            if state is None or out.key not in state.statements:
                raise DataError(f"{f}:{n}: no statement {out.key!r} of state {out.sid} in {REFS.name}")
            if out.p not in SCALE:
                raise DataError(f"{f}:{n}: p {out.p} is not on the rubric's scale")
            key = state.statements[out.key]
            if (out.sid, key, reader) in seen:
                continue
            pass_ = 2 if (out.sid, key) in first else 1
            first.add((out.sid, key))
            seen.add((out.sid, key, reader))
            rows.append(BankLabel(sid=out.sid, key=key, p=out.p, why=out.why, reader=reader, batch=batch,
                                  pass_=pass_, labelled_on=today))
    return rows


def agreement(rows: Sequence[BankLabel]) -> dict[str, float]:
    """Reader vs reader on pairs with two labels, in the positive statement's terms (a negation's p
    counted as 1 - p): AUROC of the second reader's p against the first's binary label, binary
    agreement, Cohen's kappa, mean |dp|."""
    pairs: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for r in rows:
        pairs[(r.sid, r.key)][r.pass_] = 1 - r.p if is_negation(r.key) else r.p
    both = [(v[1], v[2]) for v in pairs.values() if 1 in v and 2 in v]
    if not both:
        return {}
    p1, p2 = np.array([a for a, _ in both]), np.array([b for _, b in both])
    y1, y2 = p1 >= 0.5, p2 >= 0.5
    agree = float((y1 == y2).mean())
    chance = float(y1.mean() * y2.mean() + (1 - y1.mean()) * (1 - y2.mean()))
    return {"pairs": len(both), "auroc_second_vs_first": evaluate(p2, p1).auroc, "auroc_first_vs_second": evaluate(p1, p2).auroc,
            "binary_agreement": agree, "cohen_kappa": (agree - chance) / (1 - chance) if chance < 1 else float("nan"),
            "mean_abs_diff": float(np.abs(p1 - p2).mean())}


def summary(rows: Sequence[BankLabel]) -> dict[str, dict[str, int]]:
    """First labels per family: pairs and positives (in the positive statement's terms)."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"pairs": 0, "positive": 0})
    for r in rows:
        if r.pass_ == 1:
            p = 1 - r.p if is_negation(r.key) else r.p
            out[family_of(r.key)]["pairs"] += 1
            out[family_of(r.key)]["positive"] += p >= 0.5
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.bank_labels", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="add the readers' new labels to the label file")
    m.add_argument("--from", dest="src", type=Path, nargs="+", required=True, help="folders of BATCH.READER.jsonl files")
    sub.add_parser("agreement", help="reader-vs-reader figures on the doubly labelled pairs")
    args = ap.parse_args(argv)
    if args.cmd == "merge":
        rows = merge(args.src, read_states(), read_labels())
        write_jsonl(LABELS, (r.row() for r in rows))
        firsts = sum(r.pass_ == 1 for r in rows)
        print(f"{len(rows)} labels ({firsts} pairs, {len(rows) - firsts} second labels) -> {LABELS.relative_to(HERE.parent)}")
        for family, c in summary(rows).items():
            print(f"  {family}: {c['pairs']} pairs, {c['positive']} positive ({c['positive'] / c['pairs']:.0%})")
    else:
        print(json.dumps(agreement(read_labels()), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
