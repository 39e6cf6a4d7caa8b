"""Statements whose evidence sits only in the older half of a long state: whole-state reading against
the newest window.

    python -m benchmarks.s1_early_evidence --s1 classifier:minilm-whole --s1 classifier:minilm-statements

The set comes from reader labels, not from guesses about where evidence sits: every long test or eval
state of the ``y`` draw (``training.states.bank_batches halves``) was labelled twice by different
readers, once whole and once as only the newest half of its reasoning, with the same statements. A
positive is a statement readers found true of the whole state but not of its newest half (its evidence
is only in the older half); a negative is one found false of the whole state. Each S1 is scored on the
whole state, and again on the same state cut to its newest ``--window`` tokens (what a reader of the
newest window alone sees). Questions are the bank's test and eval ones, which no S1 trained on.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from soma_local.s1.temperature import auroc
from soma_local.s1.base import S1Query
from soma_local.s1.factory import load_s1
from soma_local.s1.state import build_state, parse_state
from training.bank.statement_bank import load_bank
from training.labels.pairs import Pair, all_pairs
from training.states.bank_batches import read_states


def early_evidence_set(pairs: list[Pair]) -> tuple[list[Pair], np.ndarray]:
    """(whole-state pairs, binary labels): positives true of the whole state only through its older
    half, negatives false of the whole state."""
    halves = {s.sid: s.of_sid for s in read_states() if s.of_sid}
    half_p = {(halves[p.sid], p.key): p.p for p in pairs if p.sid in halves}
    chosen, labels = [], []
    for p in pairs:
        newest = half_p.get((p.sid, p.key))
        if newest is None:
            continue
        if p.p >= 0.5 and newest < 0.5:
            chosen.append(p)
            labels.append(1)
        elif p.p < 0.5:
            chosen.append(p)
            labels.append(0)
    return chosen, np.array(labels)


def scores(spec: str, chosen: list[Pair], window: int | None) -> np.ndarray:
    s1 = load_s1(spec)
    out = np.full(len(chosen), np.nan)
    by_state: dict[str, list[int]] = {}
    for i, p in enumerate(chosen):
        by_state.setdefault(p.sid, []).append(i)
    for idx in by_state.values():
        task, reasoning = chosen[idx[0]].task, chosen[idx[0]].reasoning
        if window:
            task, reasoning = parse_state(build_state(task, reasoning, s1.tokenizer, window))
        probs = s1.score([S1Query(chosen[i].statement, task, reasoning) for i in idx])
        out[idx] = [np.nan if q is None else q for q in probs]
    s1.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.s1_early_evidence", description=__doc__.split("\n\n")[0])
    ap.add_argument("--s1", action="append", default=None, help="S1 specs, repeatable (default: the shipped classifier)")
    ap.add_argument("--window", type=int, default=384, help="tokens of the newest-window reading (minilm-statements reads 384)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    bank = load_bank()
    held = {f.id for f in bank.held_out}
    chosen, y = early_evidence_set([p for p in all_pairs(bank) if p.split in ("test", "eval")])
    if not y.sum() or y.all():
        raise SystemExit("no early-evidence set yet: label the y draw's halves and merge them (training/data/README.md)")
    fam = np.array([p.family in held for p in chosen])
    print(f"{len(chosen)} pairs on {len({p.sid for p in chosen})} long states: {int(y.sum())} with evidence only in the "
          f"older half, {int((1 - y).sum())} negatives; {int(fam.sum())} pairs of held-out families")
    rows = {}
    for spec in args.s1 or ["classifier"]:
        for reading, window in (("whole state", None), (f"newest {args.window} tokens", args.window)):
            p = scores(spec, chosen, window)
            ok = ~np.isnan(p)
            rows[f"{spec} | {reading}"] = {
                "auroc": auroc(p[ok], y[ok]),
                "trained": auroc(p[ok & ~fam], y[ok & ~fam]) if 0 < y[ok & ~fam].sum() < (ok & ~fam).sum() else None,
                "held_out": auroc(p[ok & fam], y[ok & fam]) if 0 < y[ok & fam].sum() < (ok & fam).sum() else None,
            }
    if args.json:
        print(json.dumps(rows, indent=1))
    print("| S1 | reading | AUROC | trained families | held-out families |\n|---|---|---:|---:|---:|")
    for name, r in rows.items():
        spec, reading = name.split(" | ")
        cells = [f"{r[k]:.3f}" if r[k] is not None else "-" for k in ("auroc", "trained", "held_out")]
        print(f"| {spec} | {reading} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
