"""Reader labels as data, one pipeline for the paper monitors' states and the statement bank's pairs:
merged from the readers' outputs, stored by reference, checked reader against reader.

    python -m training.labels.readers merge reader --from DIR    # BATCH.READER.jsonl -> reader_labels.jsonl
    python -m training.labels.readers merge bank --from DIR...   # BATCH.READER.jsonl -> bank_labels.jsonl
    python -m training.labels.readers agreement reader|bank      # reader vs reader on what two readers judged

A reader's output line is ``{"sid", "p", "why"}`` for a paper batch (one statement per state) and
``{"sid", "key", "p", "why"}`` for a bank batch (the statement under its batch's opaque key a, b, ...).
A row of a label file is one reader's judgement of one thing with its provenance (``reader``,
``batch``, ``labelled_on``, and ``pass``: 1 for the first label, 2 for an independent second one):

- ``training/data/reader_labels.jsonl``: a state of ``reader_states.jsonl``, its reference
  (``training.states.reader_set.StateRef`` fields) written out whole;
- ``training/data/bank_labels.jsonl``: a (state, statement) pair, the state's ``sid`` in
  ``bank_states.jsonl`` and the bank ``key`` the batch's opaque key showed (``family.i`` or
  ``family.i.not``).

No state text is stored; ``examples`` rebuilds the paper states from the data directory.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Callable, ClassVar, Hashable, Sequence, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from soma_local.calibration.recorded import load_all
from soma_local.data_dir import data_dir
from soma_local.errors import DataError
from soma_local.s1.state import parse_state
from soma_local.s1.temperature import evaluate
from training.bank.statement_bank import FORM_ORDER, family_of, form_of, is_negation
from training.labels.examples import Example
from training.paths import BANK_LABELS, BANK_STATES, READER_LABELS, READER_STATES, shown
from training.states.bank_batches import read_states
from training.states.reader_set import StateRef, read_refs, render_state, trace_key, write_jsonl

SCALE = (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95)  # the rubric's seven points
PROVENANCE = ("p", "why", "reader", "batch", "labelled_on", "pass")  # after what was judged, in this order


class ReaderOut(BaseModel):
    """One line a reader wrote: the state, the statement's batch key (bank batches), the label."""

    sid: str
    key: str | None = None
    p: float
    why: str


# What a reader's line judged, as the label row's own fields; ``where`` names the line for errors.
Judged = Callable[[ReaderOut, str], dict]


class Judgement(BaseModel):
    """One reader's label of one thing, with provenance; a subclass says what was judged."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)
    FILE: ClassVar[Path]
    WHAT: ClassVar[str]  # what one row judges, in messages

    p: float
    why: str
    reader: str
    batch: str
    labelled_on: str
    pass_: int = Field(alias="pass")

    @property
    def judged(self) -> Hashable:
        """What two readers' labels must share to count as a double."""
        raise NotImplementedError

    @property
    def positive(self) -> float:
        """p in the positive statement's terms (a negation's label flipped)."""
        return self.p

    @property
    def group(self) -> str:
        """The monitor or bank family a label is counted under."""
        raise NotImplementedError

    @classmethod
    def judged_fields(cls) -> Judged:
        """Reads the references a reader's lines point into, and turns a line into this row's fields."""
        raise NotImplementedError

    def row(self) -> dict:
        out = self.model_dump(by_alias=True)
        return {**{k: v for k, v in out.items() if k not in PROVENANCE}, **{k: out[k] for k in PROVENANCE}}


class StateLabel(StateRef, Judgement):
    """A paper monitor's label of one state (``reader_labels.jsonl``)."""

    FILE = READER_LABELS
    WHAT = "states"

    @property
    def judged(self) -> Hashable:
        return self.sid

    @property
    def group(self) -> str:
        return self.monitor

    @classmethod
    def judged_fields(cls, refs: Sequence[StateRef] | None = None) -> Judged:
        by_sid = {r.sid: r for r in (read_refs(READER_STATES) if refs is None else refs)}

        def fields(out: ReaderOut, where: str) -> dict:
            ref = by_sid.get(out.sid)
            if ref is None:
                raise DataError(f"{where}: sid {out.sid} is not in {READER_STATES.name}")
            return ref.model_dump()

        return fields


class BankLabel(Judgement):
    """A statement-bank label of one (state, statement) pair (``bank_labels.jsonl``)."""

    FILE = BANK_LABELS
    WHAT = "pairs"

    sid: str
    key: str  # the bank statement: family.i or family.i.not

    @property
    def judged(self) -> Hashable:
        return self.sid, self.key

    @property
    def positive(self) -> float:
        return 1 - self.p if is_negation(self.key) else self.p

    @property
    def group(self) -> str:
        return family_of(self.key)

    @classmethod
    def judged_fields(cls) -> Judged:
        by_sid = {s.sid: s for s in read_states()}

        def fields(out: ReaderOut, where: str) -> dict:
            state = by_sid.get(out.sid)
            if state is None or out.key not in state.statements:
                raise DataError(f"{where}: no statement {out.key!r} of state {out.sid} in {BANK_STATES.name}")
            return {"sid": out.sid, "key": state.statements[out.key]}

        return fields


J = TypeVar("J", bound=Judgement)
KINDS: dict[str, type[Judgement]] = {"reader": StateLabel, "bank": BankLabel}


def read_labels(model: type[J], path: Path | None = None) -> list[J]:
    """A label file's rows (none while the file does not exist yet), every p on the rubric's scale."""
    path = path or model.FILE
    rows: list[J] = []
    if not path.is_file():
        return rows
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            row = model.model_validate_json(line)
            if row.p not in SCALE:
                raise DataError(f"{path}:{n}: p {row.p} is not on the rubric's scale")
            rows.append(row)
    return rows


def merge(out_dirs: Sequence[Path], existing: Sequence[J], model: type[J], judged: Judged) -> list[J]:
    """Existing rows plus every new (judged, reader) label in ``out_dirs``; the first reader of a thing
    is pass 1. Files are ``BATCH.READER.jsonl``; batches named ``D*`` hold second labels and are read
    after the others, so a D label is pass 2 whenever another reader already labelled the same thing."""
    rows = list(existing)
    seen = {(r.judged, r.reader) for r in rows}
    first = {r.judged for r in rows if r.pass_ == 1}
    today = date.today().isoformat()
    files = sorted((f for d in out_dirs for f in d.glob("*.jsonl")), key=lambda f: (f.name.startswith("D"), f.name))
    for f in files:
        batch, reader = f.name.split(".")[:2]
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            out = ReaderOut.model_validate_json(line)
            if out.p not in SCALE:
                raise DataError(f"{f}:{n}: p {out.p} is not on the rubric's scale")
            row = model(**judged(out, f"{f}:{n}"), p=out.p, why=out.why, reader=reader, batch=batch,
                        labelled_on=today, pass_=1)
            if (row.judged, reader) in seen:
                continue
            if row.judged in first:
                row = row.model_copy(update={"pass_": 2})
            first.add(row.judged)
            seen.add((row.judged, reader))
            rows.append(row)
    return rows


def agreement(rows: Sequence[Judgement]) -> dict[str, dict[str, float]]:
    """Reader vs reader on what two readers labelled, all together and per monitor or bank family, in the
    positive statements' terms: AUROC of each reader's p against the other's binary label (p >= 0.5),
    binary agreement, Cohen's kappa, exact-scale agreement, mean |dp|."""
    doubles: dict[Hashable, dict[int, Judgement]] = defaultdict(dict)
    for r in rows:
        doubles[r.judged][r.pass_] = r
    both = [(v[1], v[2]) for v in doubles.values() if 1 in v and 2 in v]
    out = {}
    for name in ["all", *sorted({a.group for a, _ in both})]:
        sel = [(a, b) for a, b in both if name == "all" or a.group == name]
        if not sel:  # nothing labelled twice: no agreement to report
            continue
        p1, p2 = np.array([a.positive for a, _ in sel]), np.array([b.positive for _, b in sel])
        y1, y2 = p1 >= 0.5, p2 >= 0.5
        agree = float((y1 == y2).mean())
        chance = float(y1.mean() * y2.mean() + (1 - y1.mean()) * (1 - y2.mean()))
        out[name] = {
            "n": len(sel),
            "positives_first": int(y1.sum()),
            "positives_second": int(y2.sum()),
            "auroc_second_vs_first": evaluate(p2, p1).auroc,
            "auroc_first_vs_second": evaluate(p1, p2).auroc,
            "binary_agreement": agree,
            "cohen_kappa": (agree - chance) / (1 - chance) if chance < 1 else float("nan"),
            "exact_agreement": float((p1 == p2).mean()),
            "mean_abs_diff": float(np.abs(p1 - p2).mean()),
        }
    return out


def examples(rows: Sequence[StateLabel], root: Path | None = None) -> list[Example]:
    """One training example per labelled state (the mean p where two readers labelled it), its text
    rebuilt from the data directory."""
    traces = {trace_key(t.dataset, t.model, t.question_id): t for t in load_all(root or data_dir())}
    labels: dict[str, list[float]] = defaultdict(list)
    refs: dict[str, StateLabel] = {}
    for r in rows:
        labels[r.sid].append(r.p)
        refs.setdefault(r.sid, r)
    out = []
    for sid, ref in refs.items():
        trace = traces.get(trace_key(ref.dataset, ref.model, ref.question_id))
        if trace is None:
            raise DataError(f"{sid}: no trace {ref.dataset}/{ref.model}/{ref.question_id} in the data directory")
        task, reasoning = parse_state(render_state(trace, ref.cut_char))
        out.append(Example(sid, ref.question_id, ref.monitor, task, reasoning, float(np.mean(labels[sid]))))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.labels.readers", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="add the readers' new labels to the label file")
    m.add_argument("kind", choices=KINDS, help="reader: the paper monitors' states; bank: the statement bank's pairs")
    m.add_argument("--from", dest="src", type=Path, nargs="+", required=True, help="folders of BATCH.READER.jsonl files")
    a = sub.add_parser("agreement", help="reader-vs-reader figures on what two readers labelled")
    a.add_argument("kind", choices=KINDS)
    a.add_argument("--draws", help="only the states of these draws, by their ids' first letter (e.g. km)")
    a.add_argument("--by-form", action="store_true", help="bank: also the figures of each form of statement")
    args = ap.parse_args(argv)
    model = KINDS[args.kind]
    if args.cmd == "agreement":
        rows = [r for r in read_labels(model) if not args.draws or r.sid[0] in args.draws]
        out = agreement(rows)
        if args.by_form:
            out["forms"] = {f: a["all"] for f in FORM_ORDER if (a := agreement([r for r in rows if form_of(r.key) == f]))}
        print(json.dumps(out, indent=2))
        return 0
    rows = merge(args.src, read_labels(model), model, model.judged_fields())
    write_jsonl(model.FILE, (r.row() for r in rows))
    firsts = [r for r in rows if r.pass_ == 1]
    print(f"{len(rows)} labels ({len(firsts)} {model.WHAT}, {len(rows) - len(firsts)} second labels) -> {shown(model.FILE)}")
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in firsts:
        counts[r.group][0] += 1
        counts[r.group][1] += r.positive >= 0.5
    for name, (n, pos) in sorted(counts.items()):
        print(f"  {name}: {n} {model.WHAT}, {pos} positive ({pos / n:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
