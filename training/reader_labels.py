"""Reader labels as data: merged from the readers' outputs, stored by reference, rebuilt into examples.

    python -m training.reader_labels merge --from DIR     # readers' BATCH.READER.jsonl -> the label file
    python -m training.reader_labels agreement            # reader vs reader on the doubly labelled states

Each row of ``training/data/reader_labels.jsonl`` is one reader's judgement of one state: the state's
reference (``training.reader_set.StateRef`` fields), the label (``p``, ``why``) and its provenance
(``reader``, ``batch``, ``pass``: 1 for the first label of a state, 2 for the independent second one).
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

from soma_local.calibration.recorded import load_all
from soma_local.data_dir import data_dir
from soma_local.errors import DataError
from soma_local.s1.temperature import evaluate
from training.examples import Example
from training.reader_set import StateRef, read_refs, render_state, trace_key, write_jsonl

HERE = Path(__file__).resolve().parent
LABELS = HERE / "data" / "reader_labels.jsonl"
REFS = HERE / "data" / "reader_states.jsonl"
SCALE = (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95)
_STATE_PREFIX = "Task: "
_SEP = "\n\nReasoning so far: "


class LabelRow(StateRef):
    model_config = ConfigDict(frozen=True)

    p: float
    why: str
    reader: str
    batch: str
    pass_: int
    labelled_on: str

    def model_dump_row(self) -> dict:
        row = self.model_dump()
        row["pass"] = row.pop("pass_")
        return row


class _ReaderOut(BaseModel):
    sid: str
    p: float
    why: str


def read_labels(path: Path = LABELS) -> list[LabelRow]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                raw = json.loads(line)
                raw["pass_"] = raw.pop("pass")
                row = LabelRow.model_validate(raw)
                if row.p not in SCALE:
                    raise DataError(f"{path}:{n}: p {row.p} is not on the rubric's scale")
                rows.append(row)
    return rows


def merge(out_dir: Path, refs: Sequence[StateRef], existing: Sequence[LabelRow]) -> list[LabelRow]:
    """Existing rows plus every new (state, reader) label in ``out_dir``; a state's first reader is pass 1.

    Files are ``BATCH.READER.jsonl``; batches named ``D*`` hold second labels, so a D label is pass 2
    whenever the state already has a label from another reader.
    """
    by_sid = {r.sid: r for r in refs}
    rows = list(existing)
    seen = {(r.sid, r.reader) for r in rows}
    first = {r.sid for r in rows if r.pass_ == 1}
    files = sorted(out_dir.glob("*.jsonl"), key=lambda f: (f.name.startswith("D"), f.name))  # B before D
    today = date.today().isoformat()
    for f in files:
        batch, reader = f.name.split(".")[:2]
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            out = _ReaderOut.model_validate_json(line)
            ref = by_sid.get(out.sid)
            if ref is None:
                raise DataError(f"{f}: sid {out.sid} is not in {REFS.name}")
            if (out.sid, reader) in seen:
                continue
            pass_ = 2 if out.sid in first else 1
            first.add(out.sid)
            seen.add((out.sid, reader))
            rows.append(LabelRow(**ref.model_dump(), p=out.p, why=out.why, reader=reader, batch=batch,
                                 pass_=pass_, labelled_on=today))
    return rows


def examples(rows: Sequence[LabelRow], root: Path | None = None) -> list[Example]:
    """One training example per labelled state (the mean p where two readers labelled it), its text
    rebuilt from the data directory."""
    traces = {trace_key(t.dataset, t.model, t.question_id): t for t in load_all(root or data_dir())}
    labels: dict[str, list[float]] = defaultdict(list)
    refs: dict[str, LabelRow] = {}
    for r in rows:
        labels[r.sid].append(r.p)
        refs.setdefault(r.sid, r)
    out = []
    for sid, ref in refs.items():
        trace = traces.get(trace_key(ref.dataset, ref.model, ref.question_id))
        if trace is None:
            raise DataError(f"{sid}: no trace {ref.dataset}/{ref.model}/{ref.question_id} in the data directory")
        state = render_state(trace, ref.cut_char)
        task, reasoning = state[len(_STATE_PREFIX) :].split(_SEP, 1)
        out.append(Example(sid, ref.question_id, ref.monitor, task, reasoning, float(np.mean(labels[sid]))))
    return out


def agreement(rows: Sequence[LabelRow]) -> dict[str, dict[str, float]]:
    """Reader vs reader on states with two labels: AUROC of the second reader's p against the first's
    binary label (p >= 0.5), binary agreement, Cohen's kappa, exact-scale agreement, mean |dp|."""
    pairs: dict[str, dict[int, LabelRow]] = defaultdict(dict)
    for r in rows:
        pairs[r.sid][r.pass_] = r
    both = [(v[1], v[2]) for v in pairs.values() if 1 in v and 2 in v]
    out = {}
    for name in ["all", *sorted({a.monitor for a, _ in both})]:
        sel = [(a, b) for a, b in both if name == "all" or a.monitor == name]
        if not sel:
            continue
        p1, p2 = np.array([a.p for a, _ in sel]), np.array([b.p for _, b in sel])
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training.reader_labels", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="add the readers' new labels to the label file")
    m.add_argument("--from", dest="src", type=Path, required=True, help="folder of BATCH.READER.jsonl files")
    sub.add_parser("agreement", help="reader-vs-reader figures on the doubly labelled states")
    args = ap.parse_args(argv)
    if args.cmd == "merge":
        rows = merge(args.src, read_refs(REFS), read_labels() if LABELS.is_file() else [])
        write_jsonl(LABELS, (r.model_dump_row() for r in rows))
        firsts = [r for r in rows if r.pass_ == 1]
        by_m = defaultdict(lambda: [0, 0])
        for r in firsts:
            by_m[r.monitor][0] += 1
            by_m[r.monitor][1] += r.p >= 0.5
        print(f"{len(rows)} labels ({len(firsts)} states, {len(rows) - len(firsts)} second labels) -> {LABELS.relative_to(HERE.parent)}")
        for name, (n, pos) in sorted(by_m.items()):
            print(f"  {name}: {n} states, {pos} positive ({pos / n:.0%})")
    else:
        print(json.dumps(agreement(read_labels()), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
