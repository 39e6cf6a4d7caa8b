"""Learning curve of monitor adapters: how many labels of a statement it takes to sharpen an S1 on it.

For bank families held out of every S1's training (no S1 here was trained, fitted or chosen on them),
an adapter is fitted on N reader labels of the training half (the family's statement in its first
wording; its other wordings and flipped negations count as labels of it, ``training/labels/adapters.py``)
and measured on every label of the eval half (questions no S1 and no adapter saw), against the S1 alone.
Each N is drawn ``--repeats`` times (seeded); figures are the mean and the spread.

    SOMA_DATA_DIR=../shared/datasets python -m benchmarks.adapter_curve \\
        --s1 classifier:minilm-reader --s1 classifier:minilm-statements --cache-dir training/runs/adapter_scores
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from soma_local.calibration.tune import fit_head
from soma_local.s1.adapter import adapter_inputs
from soma_local.s1.cache import CachedS1, ScoreCache
from soma_local.s1.factory import load_s1
from soma_local.s1.temperature import auroc
from training.bank.statement_bank import load_bank
from training.labels.adapters import family_pairs, label_rows
from training.labels.pairs import all_pairs

FAMILIES = ("guessing", "self_contradiction", "case_enumeration")


def draw(y: np.ndarray, n: int, rng: random.Random) -> list[int]:
    """n label indices with at least two of each class (a fit needs both)."""
    idx = list(range(len(y)))
    for _ in range(1000):
        pick = rng.sample(idx, min(n, len(idx)))
        hard = y[pick] >= 0.5
        if 2 <= hard.sum() <= len(pick) - 2:
            return pick
    raise ValueError(f"no draw of {n} labels has both classes")


def shipped(s1, monitor_family: str, pairs, bank) -> dict:
    """A monitor's shipped adapter for this S1 on the eval half of its family's reader labels, against the S1
    alone: AUROC and ECE (the adapters were fitted on the training half only)."""
    from soma_local.engine.adapters import attach_adapters
    from soma_local.engine.monitors import resolve_monitors
    from soma_local.s1.base import S1Query
    from soma_local.s1.temperature import evaluate

    name, _, family = monitor_family.partition("=")
    (monitor,) = resolve_monitors([name])
    rows = label_rows(family_pairs(pairs, family or name, "eval"), monitor.statement)
    adapted, used, refused = attach_adapters(s1, [monitor])
    if not used:
        raise SystemExit(f"no adapter of {name} for {s1.identity}: {refused or 'none beside the monitor'}")
    y = np.array([r["p"] for r in rows])
    out = {"eval_labels": len(rows), "eval_positives": int((y >= 0.5).sum())}
    for label, scorer in (("s1_alone", s1), ("with_adapter", adapted)):
        p = np.array([scorer.score([S1Query(monitor.statement, r["task"], r["reasoning"])])[0] for r in rows])
        out[label] = evaluate(p, y).as_dict()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.adapter_curve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--s1", action="append", required=True, help="S1 spec, repeatable")
    ap.add_argument("--family", action="append", help=f"bank family (default: {', '.join(FAMILIES)})")
    ap.add_argument("--sizes", default="25,50,100,200", help="labels per fit, comma-separated")
    ap.add_argument("--repeats", type=int, default=5, help="draws per size")
    ap.add_argument("--cache-dir", type=Path, help="S1 score cache (as soma tune --cache-dir)")
    ap.add_argument("--shipped", action="append", metavar="MONITOR[=FAMILY]",
                    help="instead of the curve: the monitor's shipped adapter on its family's eval half, repeatable")
    ap.add_argument("--json", type=Path, help="also write every figure here")
    args = ap.parse_args()
    bank = load_bank()
    pairs = all_pairs(bank)
    sizes = [int(n) for n in args.sizes.split(",")]
    held = {f.id for f in bank.held_out}
    out: dict = {}
    for spec in args.s1:
        s1 = load_s1(spec)
        if args.cache_dir:
            s1 = CachedS1(s1, ScoreCache(args.cache_dir, s1.identity))
        for monitor_family in args.shipped or []:
            row = out.setdefault(spec, {})[monitor_family] = shipped(s1, monitor_family, pairs, bank)
            print(f"{spec} | {monitor_family} eval ({row['eval_labels']} states, {row['eval_positives']}+) | S1 alone "
                  f"{row['s1_alone']} | with adapter {row['with_adapter']}", flush=True)
        for family in [] if args.shipped else args.family or FAMILIES:
            if family not in held:
                raise SystemExit(f"{family} is not held out of the bank's training: its figures would not be zero-shot")
            statement = bank.statement(f"{family}.0")
            train = label_rows(family_pairs(pairs, family, "training"), statement)
            test = label_rows(family_pairs(pairs, family, "eval"), statement)
            xs = {name: adapter_inputs(s1, statement, [(r["task"], r["reasoning"]) for r in rows])
                  for name, rows in (("train", train), ("eval", test))}
            y_train = np.array([r["p"] for r in train])
            y_eval = np.array([r["p"] for r in test]) >= 0.5
            base = auroc(xs["eval"][:, 0], y_eval)
            row = {"statement": statement, "train_labels": len(train), "eval_labels": len(test),
                   "eval_positives": int(y_eval.sum()), "s1_alone": round(base, 4), "adapter": {}}
            for n in sizes:
                if n > len(train):
                    continue
                rng = random.Random(f"{family}-{n}")
                scores = []
                for _ in range(args.repeats):
                    pick = draw(y_train, n, rng)
                    head = fit_head(xs["train"][pick], y_train[pick], [train[i]["group"] for i in pick])
                    scores.append(auroc(head.logits(xs["eval"]), y_eval))
                row["adapter"][n] = {"mean": round(float(np.mean(scores)), 4), "sd": round(float(np.std(scores)), 4)}
            out.setdefault(spec, {})[family] = row
            curve = "  ".join(f"{n}: {v['mean']:.3f}±{v['sd']:.3f}" for n, v in row["adapter"].items())
            print(f"{spec} | {family} (eval {len(test)} states, {row['eval_positives']}+) | S1 alone {base:.3f} | "
                  f"adapter {curve}", flush=True)
        s1.close()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
