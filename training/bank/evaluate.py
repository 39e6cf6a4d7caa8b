"""How well an S1 reads statements: figures over labelled bank pairs, for the trainer's card and for
``benchmarks/s1_statements.py``.

Every pair is scored through the S1 interface (``S1.score``), so an S1 is measured as it serves: the
same state cutting, temperature and batching (all statements of one state in one call, as the
monitors of one pause). Figures, in the positive statement's terms where that matters:

- AUROC / ECE / Brier pooled over trained and over held-out families, and AUROC per family;
- negation agreement: mean |p(s) + p(not s) - 1| over the pairs' states, s and not s scored apart;
- whether p leaves the middle: median p on pairs the readers put at >= 0.8 and at <= 0.2.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from typing import Sequence

import numpy as np

from soma_local.s1.base import S1, S1Query
from soma_local.s1.temperature import auroc, evaluate
from training.bank.statement_bank import Bank
from training.labels.pairs import Pair


def score(s1: S1, pairs: Sequence[Pair], statements: Sequence[str] | None = None, progress: str = "") -> np.ndarray:
    """p for each pair (``statements[i]`` in place of pair i's statement where given); NaN for a failed scan."""
    texts = list(statements) if statements is not None else [p.statement for p in pairs]
    by_state: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_state[p.sid].append(i)
    out = np.full(len(pairs), np.nan)
    t0 = time.perf_counter()
    for n, idx in enumerate(by_state.values(), 1):
        probs = s1.score([S1Query(texts[i], pairs[i].task, pairs[i].reasoning) for i in idx])
        out[idx] = [np.nan if p is None else p for p in probs]
        if progress and n % 50 == 0:
            print(f"  {progress}: {n}/{len(by_state)} states, {(time.perf_counter() - t0) / n:.2f} s/state", file=sys.stderr)
    return out


def _auroc(p: np.ndarray, y: np.ndarray) -> float | None:
    """AUROC, or None where one class is missing (a family with no positive cannot be ranked)."""
    return auroc(p, y) if 0 < y.sum() < len(y) else None


def figures(pairs: Sequence[Pair], p: np.ndarray, bank: Bank) -> dict:
    """Pooled and per-family figures of one set of pairs."""
    y = np.array([q.p for q in pairs]) >= 0.5
    soft = np.array([q.p for q in pairs])
    fam = np.array([q.family for q in pairs])
    held = np.isin(fam, [f.id for f in bank.held_out])
    ok = ~np.isnan(p)
    out: dict = {}
    for name, mask in (("trained", ~held & ok), ("held_out", held & ok), ("all", ok)):
        if mask.any():
            cal = evaluate(p[mask], y[mask].astype(float))
            out[name] = {"n": int(mask.sum()), "positives": int(y[mask].sum()), "auroc": _auroc(p[mask], y[mask]),
                         "ece": cal.ece, "brier": cal.brier}
    out["families"] = {f: {"n": int(((fam == f) & ok).sum()), "positives": int(y[(fam == f) & ok].sum()),
                           "held_out": bool(held[fam == f][0]), "auroc": _auroc(p[(fam == f) & ok], y[(fam == f) & ok])}
                       for f in sorted(set(fam))}
    high, low = ok & (soft >= 0.8), ok & (soft <= 0.2)
    out["middle"] = {"median_p_reader_ge_0.8": float(np.median(p[high])) if high.any() else None,
                     "median_p_reader_le_0.2": float(np.median(p[low])) if low.any() else None,
                     "n_high": int(high.sum()), "n_low": int(low.sum())}
    return out


def negation_gap(s1: S1, pairs: Sequence[Pair], bank: Bank, progress: str = "") -> dict:
    """Mean |p(s) + p(not s) - 1| with s each bank pair's wording and not s its negation, on its state."""
    bank_only = [q for q in pairs if q.family in bank.by_id]
    positive = [bank.statement(q.key.removesuffix(".not")) for q in bank_only]
    negative = [bank.statement(q.key.removesuffix(".not") + ".not") for q in bank_only]
    p_pos = score(s1, bank_only, positive, progress and f"{progress} (wordings)")
    p_neg = score(s1, bank_only, negative, progress and f"{progress} (negations)")
    gap = np.abs(p_pos + p_neg - 1)
    held = np.isin([q.family for q in bank_only], [f.id for f in bank.held_out])
    return {"mean_abs_gap": float(np.nanmean(gap)), "trained": float(np.nanmean(gap[~held])) if (~held).any() else None,
            "held_out": float(np.nanmean(gap[held])) if held.any() else None, "n": int((~np.isnan(gap)).sum())}


def family_table(sets: dict[str, dict]) -> str:
    """Markdown: one row per family, AUROC (n, positives) in each named set of figures."""
    names = list(sets)
    families = sorted({f for s in sets.values() for f in s["families"]},
                      key=lambda f: (not any(s["families"].get(f, {}).get("held_out") for s in sets.values()), f))
    rows = ["| family | held out | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
    for f in families:
        cells = []
        for s in sets.values():
            c = s["families"].get(f)
            cells.append("-" if c is None else f"{c['auroc']:.3f} ({c['n']}, {c['positives']}+)" if c["auroc"] is not None
                         else f"n/a ({c['n']}, {c['positives']}+)")
        held = any(s["families"].get(f, {}).get("held_out") for s in sets.values())
        rows.append(f"| {f} | {'yes' if held else ''} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def pooled_table(sets: dict[str, dict]) -> str:
    rows = ["| set | families | n | pos | AUROC | ECE | Brier |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, s in sets.items():
        for group in ("trained", "held_out"):
            g = s.get(group)
            if g:
                a = "-" if g["auroc"] is None else f"{g['auroc']:.3f}"
                rows.append(f"| {name} | {group.replace('_', '-')} | {g['n']} | {g['positives']} | {a} | {g['ece']:.3f} | {g['brier']:.3f} |")
    return "\n".join(rows)
