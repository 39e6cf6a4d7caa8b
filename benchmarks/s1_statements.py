"""How well S1s read statements they were and were not trained on: the statement bank's test and eval
pairs, per family, with negation agreement and whether p leaves the middle.

    python -m benchmarks.s1_statements --s1 classifier:minilm-statements --s1 classifier:minilm-reader

`eval` states come from the half of the questions no S1 was trained on (replay's half); `test` from the
training half's test questions. Held-out families (`held_out = true` in the bank) were never trained on,
fitted or chosen on by the bank's trainer. Every pair is scored through the S1 interface, as a run would
score it. Figures: `training/bank/evaluate.py`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from soma_local.s1.factory import load_s1
from training.bank import evaluate as bank_eval
from training.bank.statement_bank import load_bank
from training.labels.pairs import all_pairs, whole_states
from training.s1.statement_reader import limit_states


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.s1_statements", description=__doc__.split("\n\n")[0])
    ap.add_argument("--s1", action="append", required=True, help="S1 spec, repeatable (e.g. classifier:minilm-reader)")
    ap.add_argument("--splits", default="eval,test", help="comma-separated bank splits to score")
    ap.add_argument("--limit", type=int, default=0, help="the first N states of each split (0 = all)")
    ap.add_argument("--no-negations", dest="negations", action="store_false",
                    help="skip the negation and wording agreement (each state's statements are read four times with them)")
    ap.add_argument("--json", type=Path, help="also write every figure here")
    args = ap.parse_args()
    bank = load_bank()
    pairs = whole_states(all_pairs(bank))
    out = {}
    for spec in args.s1:
        s1 = load_s1(spec)
        sets = {}
        for split in args.splits.split(","):
            chosen = limit_states([p for p in pairs if p.split == split], args.limit)
            if args.negations:
                p, negation, wording = bank_eval.consistency(s1, chosen, bank, progress=f"{s1.name} {split}")
                sets[split] = bank_eval.figures(chosen, p, bank) | {"negation": negation, "wording": wording}
            else:
                sets[split] = bank_eval.figures(chosen, bank_eval.score(s1, chosen, progress=f"{s1.name} {split}"), bank)
        s1.close()
        out[s1.name] = sets
        print(f"\n## {s1.name}\n")
        print(bank_eval.pooled_table(sets))
        for split, s in sets.items():
            mid, neg = s["middle"], s.get("negation", {})
            print(f"{split}: median p {mid['median_p_reader_ge_0.8']:.3f} where readers >= 0.8 ({mid['n_high']}), "
                  f"{mid['median_p_reader_le_0.2']:.3f} where <= 0.2 ({mid['n_low']})"
                  + (f"; |p(s) + p(not s) - 1| {neg['mean_abs_gap']:.3f}, |p(w1) - p(w2)| {s['wording']['mean_abs_gap']:.3f} "
                     f"({neg['n']})" if neg else "")
                  + f"; minimal pairs ordered {s['minimal_pairs']['ordered']} of {s['minimal_pairs']['n']}")
    names = list(out)
    print("\n## Per family\n")
    print(bank_eval.family_table({f"{n} {split}": out[n][split] for split in args.splits.split(",") for n in names}))
    print("\n## Per form\n")
    print(bank_eval.form_table({f"{n} {split}": out[n][split] for split in args.splits.split(",") for n in names}))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
