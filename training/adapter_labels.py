"""Reader labels as ``soma tune`` label files: one monitor statement, the states a reader judged for it.

A bank family's wordings say one thing in different words, and its negations hold exactly when the
wordings do not (``statement_bank.toml``); so every label of the family is a label of the monitor's
statement, a negation's with p flipped. Each line keeps what the reader actually judged (``judged``)
and whether it was flipped. The paper's two monitors take their readers' labels as they are
(``reader_labels.jsonl``, labelled for their exact statements).

Halves: ``training`` (the bank's train, dev and test questions; what the shipped adapters are fitted
on, with ``soma tune`` holding out its own share by question) and ``eval`` (the other half of the shared
traces: measuring only). Gold and reserved questions are never here (``bank_pairs.all_pairs`` checks).

    python -m training.adapter_labels looping --family looping --half training --out FILE
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Literal, Sequence

from soma_local.engine.monitors import resolve_monitors
from training.bank_pairs import Pair, all_pairs
from training.statement_bank import load_bank

Half = Literal["training", "eval"]


def family_pairs(pairs: Sequence[Pair], family: str, half: Half) -> list[Pair]:
    in_half = (lambda s: s == "eval") if half == "eval" else (lambda s: s != "eval")
    return [p for p in pairs if p.family == family and in_half(p.split)]


def label_rows(pairs: Sequence[Pair], statement: str) -> list[dict]:
    """One line per state: the mean over its labels in the statement's terms (a negation's flipped)."""
    by_state: dict[str, list[Pair]] = defaultdict(list)
    for p in pairs:
        by_state[p.sid].append(p)
    rows = []
    for sid, group in by_state.items():
        ps = [1.0 - p.p if p.negated else p.p for p in group]
        first = group[0]
        rows.append({"statement": statement, "task": first.task, "reasoning": first.reasoning,
                     "p": round(sum(ps) / len(ps), 4), "group": first.question_id, "sid": sid,
                     "judged": sorted(p.key for p in group), "source": f"reader labels ({first.source})"})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("monitor", help="the monitor whose statement the labels are written for")
    ap.add_argument("--family", required=True, help="bank family id, or paper_overthinking / paper_unanswerable")
    ap.add_argument("--half", choices=["training", "eval"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    (monitor,) = resolve_monitors([args.monitor])
    rows = label_rows(family_pairs(all_pairs(load_bank()), args.family, args.half), monitor.statement)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"{args.out}: {len(rows)} states, {sum(r['p'] >= 0.5 for r in rows)} holding")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
