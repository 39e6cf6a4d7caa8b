"""Reader labels as ``soma tune`` label files: one monitor statement, the states a reader judged for it.

A bank family's wordings say one thing in different words, and its negations hold exactly when the
wordings do not (``statement_bank.toml``); so every label of the family is a label of the monitor's
statement, a negation's with p flipped. Each line keeps what the reader actually judged (``judged``)
and whether it was flipped. The paper's two monitors take their readers' labels as they are
(``reader_labels.jsonl``, labelled for their exact statements).

Halves: ``training`` (the bank's train, dev and test questions; what the shipped adapters are fitted
on, with ``soma tune`` holding out its own share by question) and ``eval`` (the other half of the shared
traces: measuring only). Gold and reserved questions are never here (``labels.pairs.all_pairs`` checks).

    python -m training.labels.adapters looping --family looping --half training --out FILE

minilm-reader was trained on every question of the paper monitors' reader labels, its encoder on 80 %
of them; ``--finetune-held-out`` keeps the other 20 % (where only its temperature and cue-head join, three
numbers, were fitted), so an adapter for it learns how far its p can be trusted where it was not trained.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

from soma_local.engine.monitors import resolve_monitors
from soma_local.s1.model_folders import read_trained_questions, resolve_s1_model
from training.bank.statement_bank import load_bank
from training.labels.examples import split_by_question
from training.labels.pairs import Pair, all_pairs

Half = Literal["training", "eval"]
FINETUNE_HELD_OUT, FINETUNE_SEED = 0.2, 0  # training.s1.finetune's defaults, with which minilm-reader was made


@dataclass(frozen=True)
class _Q:
    question_id: str


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
    ap = argparse.ArgumentParser(
        prog="python -m training.labels.adapters", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("monitor", help="the monitor whose statement the labels are written for")
    ap.add_argument("--family", required=True, help="bank family id, or paper_overthinking / paper_unanswerable")
    ap.add_argument("--half", choices=["training", "eval"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--finetune-held-out", action="store_true",
                    help="keep only states of the questions training.s1.finetune held out of the encoder's training (its "
                    "seeded 20 %% split of the paper monitors' reader labels): minilm-reader's encoder never trained on them")
    ap.add_argument("--exclude-trained", metavar="S1_MODEL",
                    help="leave out states of questions this S1 model folder was trained on (trained_questions.json): "
                    "its p there is optimistic, and an adapter fitted on them would trust it too much")
    args = ap.parse_args(argv)
    (monitor,) = resolve_monitors([args.monitor])
    pairs = family_pairs(all_pairs(load_bank()), args.family, args.half)
    if args.finetune_held_out:
        questions = sorted({p.question_id for p in all_pairs(load_bank()) if p.source == "paper"})
        held = {p.question_id for p in split_by_question(
            [_Q(q) for q in questions], FINETUNE_HELD_OUT, FINETUNE_SEED)[1]}
        pairs = [p for p in pairs if p.question_id in held]
    if args.exclude_trained:
        trained = read_trained_questions(resolve_s1_model(args.exclude_trained))
        pairs = [p for p in pairs if p.question_id not in trained]
    rows = label_rows(pairs, monitor.statement)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"{args.out}: {len(rows)} states, {sum(r['p'] >= 0.5 for r in rows)} holding")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
