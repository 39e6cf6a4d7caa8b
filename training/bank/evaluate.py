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
from training.bank.statement_bank import FORM_ORDER, Bank, form_of
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
    forms = np.array([form_of(q.key) for q in pairs])
    out["forms"] = {}
    for form in FORM_ORDER:
        for name, mask in (("trained", ~held & ok & (forms == form)), ("held_out", held & ok & (forms == form))):
            if mask.any():
                out["forms"].setdefault(form, {})[name] = {"n": int(mask.sum()), "positives": int(y[mask].sum()),
                                                           "auroc": _auroc(p[mask], y[mask])}
    out["minimal_pairs"] = minimal_pairs(pairs, p, bank)
    high, low = ok & (soft >= 0.8), ok & (soft <= 0.2)
    out["middle"] = {"median_p_reader_ge_0.8": float(np.median(p[high])) if high.any() else None,
                     "median_p_reader_le_0.2": float(np.median(p[low])) if low.any() else None,
                     "n_high": int(high.sum()), "n_low": int(low.sum())}
    return out


def minimal_pairs(pairs: Sequence[Pair], p: np.ndarray, bank: Bank) -> dict:
    """On states where the readers put a minimal pair's two statements on opposite sides of 0.5, the share
    the S1 orders the same way: it reads the one condition they differ in, not their shared topic."""
    declared = {frozenset((m.a, m.b)) for m in bank.minimal_pair}
    at = {(q.sid, q.key): i for i, q in enumerate(pairs)}
    right = n = 0
    for (sid, key), i in at.items():
        for m in declared:
            if key in m and key == min(m):
                other = at.get((sid, max(m)))
                if other is None or np.isnan(p[i]) or np.isnan(p[other]):
                    continue
                ya, yb = pairs[i].p >= 0.5, pairs[other].p >= 0.5
                if ya != yb:
                    n += 1
                    right += (p[i] > p[other]) == ya
    return {"n": n, "ordered": float(right / n) if n else None}


def consistency(s1: S1, pairs: Sequence[Pair], bank: Bank, progress: str = "") -> tuple[np.ndarray, dict, dict]:
    """p of each pair, and two rules a reader of meaning obeys, in one pass over the states (a state is
    encoded once for all its statements): a statement and its negation, mean |p(s) + p(not s) - 1| (s the
    pair's family wording, not s its negation), and two wordings of one family, mean |p(w1) - p(w2)|."""
    bank_only = [i for i, q in enumerate(pairs) if q.family in bank.by_id and not q.key.endswith(".contrast")]
    families = [pairs[i].family for i in bank_only]
    index = [int(i) if (i := pairs[j].key.split(".")[1]).isdigit() else 0 for j in bank_only]  # a form: wording 0
    base = [f"{f}.{i}" for f, i in zip(families, index)]
    other = [f"{f}.{(i + 1) % len(bank.by_id[f].wordings)}" for f, i in zip(families, index)]
    rows = list(pairs) + [pairs[i] for i in bank_only] * 3
    texts = ([q.statement for q in pairs] + [bank.statement(k) for k in base] + [bank.statement(k + ".not") for k in base]
             + [bank.statement(k) for k in other])
    p = score(s1, rows, texts, progress)
    n, m = len(pairs), len(bank_only)
    p_pos, p_neg, p_alt = p[n : n + m], p[n + m : n + 2 * m], p[n + 2 * m :]
    held = np.isin(families, [f.id for f in bank.held_out])

    def summary(gap: np.ndarray) -> dict:
        return {"mean_abs_gap": float(np.nanmean(gap)) if m else None,
                "trained": float(np.nanmean(gap[~held])) if (~held).any() else None,
                "held_out": float(np.nanmean(gap[held])) if held.any() else None, "n": int((~np.isnan(gap)).sum())}

    return p[:n], summary(np.abs(p_pos + p_neg - 1)), summary(np.abs(p_pos - p_alt))


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


def form_table(sets: dict[str, dict]) -> str:
    """Markdown: AUROC (n, positives) per form of statement, trained and held-out families, in each set."""
    rows = ["| set | form | trained families | held-out families |", "|---|---|---:|---:|"]
    cell = lambda c: "-" if not c else f"{c['auroc']:.3f} ({c['n']}, {c['positives']}+)" if c["auroc"] is not None else f"n/a ({c['n']})"  # noqa: E731
    for name, s in sets.items():
        for form, g in s.get("forms", {}).items():
            rows.append(f"| {name} | {form} | {cell(g.get('trained'))} | {cell(g.get('held_out'))} |")
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
