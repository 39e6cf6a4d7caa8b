"""AUROC / ECE / Brier of S1 backends on labelled S1 states, side by side (default: s1_labels/gold_dev.jsonl).

    python -m benchmarks.s1_eval                                   # the shipped classifier
    python -m benchmarks.s1_eval --s1 classifier --s1 classifier:minilm-rules --s1 keywords
    python -m benchmarks.s1_eval --s1 readout                      # the SmolLM2 yes/no readout (slow on a CPU)

Each state is scored for the monitor it was labelled for, with that monitor's statement from
``monitors/``; labels are the reader's probabilities (p >= 0.5 counts as positive for AUROC).
``keywords`` is the untrained baseline every S1 must beat: the number of monitor keywords (re-check
phrases for overthinking, doubt and assumption phrases for unanswerable) in the last 2,000 characters
of the reasoning. It ranks but is not a probability, so it has no ECE or Brier.

With two S1s or more, each one after the first is compared with the first: the difference of AUROC and
ECE (it minus the first) per monitor with a 95 % interval from resampling the states, the same resample
for both, so the interval is paired by state (``--resamples``, ``--seed``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from soma_local.data_dir import data_dir
from soma_local.engine.adapters import attach_adapters
from soma_local.engine.monitors import resolve_monitors
from soma_local.s1.base import S1Query
from soma_local.s1.cues import ATTEMPT, DOUBT, RECHECK
from soma_local.s1.factory import load_s1
from soma_local.s1.temperature import auroc, ece, evaluate
from training.labels.examples import Example, read_labelled

KEYWORDS = "keywords"
_PATTERNS = {"overthinking": [RECHECK], "unanswerable": [DOUBT, ATTEMPT]}


def keyword_scores(examples: list[Example]) -> np.ndarray:
    return np.array([float(sum(len(p.findall(e.reasoning[-2000:])) for p in _PATTERNS[e.monitor])) for e in examples])


def s1_scores(spec: str, examples: list[Example], statements: dict[str, str], adapters: list | None = None
              ) -> tuple[str, np.ndarray, float]:
    """(name, p per state with NaN for a failed scan, seconds per state); with the adapters beside these
    monitors where ``adapters`` lists them."""
    s1 = load_s1(spec)
    name = s1.name
    if adapters:
        s1, used, refused = attach_adapters(s1, adapters)
        for why in refused:
            print(f"warning: {why}", file=sys.stderr)
        name += f" + adapters ({', '.join(used) or 'none'})"
    probs, t0 = [], time.perf_counter()
    for i, e in enumerate(examples, 1):
        (p,) = s1.score([S1Query(statements[e.monitor], e.task, e.reasoning)])
        probs.append(np.nan if p is None else p)
        if i % 40 == 0:
            print(f"  {s1.name}: {i}/{len(examples)} states, {(time.perf_counter() - t0) / i:.2f} s/state", file=sys.stderr)
    s1.close()
    return name, np.array(probs), (time.perf_counter() - t0) / max(len(examples), 1)


def paired_differences(first: np.ndarray, other: np.ndarray, y: np.ndarray, resamples: int, seed: int,
                       probabilities: bool = True) -> dict[str, tuple[float, float, float]]:
    """AUROC (and ECE, for two probabilities) of ``other`` minus ``first`` on the same states: the point
    difference and a 95 % bootstrap interval, states resampled once for both (paired)."""
    keep = ~(np.isnan(first) | np.isnan(other))
    a, b, y = first[keep], other[keep], y[keep]
    metrics = {"AUROC": lambda p, t: auroc(p, t >= 0.5)}
    if probabilities:
        metrics["ECE"] = ece
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(y), size=(resamples, len(y)))
    out = {}
    for name, f in metrics.items():
        diffs = np.array([f(b[i], y[i]) - f(a[i], y[i]) for i in idx])
        lo, hi = np.nanpercentile(diffs, [2.5, 97.5])
        out[name] = (f(b, y) - f(a, y), float(lo), float(hi))
    return out


def main() -> int:
    data = data_dir()
    ap = argparse.ArgumentParser(prog="python -m benchmarks.s1_eval", description=__doc__.split("\n")[0])
    ap.add_argument("--s1", action="append", default=None,
                    help=f"S1 spec, repeatable; '{KEYWORDS}' for the keyword baseline (default: the shipped classifier)")
    ap.add_argument("--labels", type=Path, default=data / "s1_labels" / "gold_dev.jsonl")
    ap.add_argument("--adapters", action="store_true", help="score through the monitors' adapters (soma tune); "
                    "zero-shot and S1 figures are always without")
    ap.add_argument("--limit", type=int, default=0, help="score only the first N states (0 = all)")
    ap.add_argument("--json", type=Path, help="also write the per-state probabilities here")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the paired differences")
    ap.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    args = ap.parse_args()
    examples = read_labelled(args.labels)
    if args.limit:
        examples = examples[: args.limit]
    monitors_used = resolve_monitors(sorted({e.monitor for e in examples}))
    statements = {m.name: m.statement for m in monitors_used}
    y = np.array([e.label for e in examples])
    monitors = np.array([e.monitor for e in examples])
    names = ["all", *sorted(set(monitors))]
    print(f"{args.labels.name}: {len(examples)} states; "
          + ", ".join(f"{n} {int((monitors == n).sum())} ({int(((monitors == n) & (y >= 0.5)).sum())} positive)" for n in names[1:]))
    print(f"{'S1':<34}{'monitor':<14}{'AUROC':>7}{'ECE':>7}{'Brier':>7}{'s/state':>9}")
    dump, scored = {}, []
    for spec in args.s1 or [None]:
        if spec == KEYWORDS:
            name, p, per = "keyword count (last 2,000 chars)", keyword_scores(examples), 0.0
        else:
            name, p, per = s1_scores(spec, examples, statements, monitors_used if args.adapters else None)
        dump[name] = p.tolist()
        scored.append((name, p, spec != KEYWORDS))
        for n in names:
            mask = (np.ones_like(y, dtype=bool) if n == "all" else monitors == n) & ~np.isnan(p)
            if spec == KEYWORDS:
                cells = f"{auroc(p[mask], y[mask] >= 0.5):>7.3f}{'-':>7}{'-':>7}"
            else:
                m = evaluate(p[mask], y[mask])
                cells = f"{m.auroc:>7.3f}{m.ece:>7.3f}{m.brier:>7.3f}"
            print(f"{name if n == 'all' else '':<34}{n:<14}{cells}{per if n == 'all' else float('nan'):>9.2f}".replace(" nan", "    "))
    if len(scored) > 1:
        base_name, base, base_prob = scored[0]
        print(f"\ndifference against {base_name}, each S1 minus it [95 % interval, {args.resamples} bootstrap "
              "resamples of the states, paired]")
        for name, p, prob in scored[1:]:
            for n in names:
                mask = np.ones_like(y, dtype=bool) if n == "all" else monitors == n
                diffs = paired_differences(base[mask], p[mask], y[mask], args.resamples, args.seed, prob and base_prob)
                cells = "  ".join(f"{k} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for k, (d, lo, hi) in diffs.items())
                print(f"{name if n == 'all' else '':<34}{n:<14}{cells}")
    if args.json:
        args.json.write_text(json.dumps({"states": [{"key": e.key, "monitor": e.monitor, "label": e.label} for e in examples],
                                         "scores": dump}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
