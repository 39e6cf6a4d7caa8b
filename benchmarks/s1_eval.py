"""AUROC / ECE / Brier of an S1 backend on the labelled S1 states (default: s1_labels/gold_dev.jsonl).

    python benchmarks/s1_eval.py --s1 classifier
    python benchmarks/s1_eval.py --s1 readout          # the SmolLM2 yes/no readout (slow on a CPU)

Each state is scored for the monitor it was labelled for, with that monitor's statement from
``monitors/``; labels are the reader's probabilities (p >= 0.5 counts as positive for AUROC).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soma_local.data_dir import data_dir  # noqa: E402
from soma_local.monitors import resolve_monitors  # noqa: E402
from soma_local.s1.base import S1Query  # noqa: E402
from soma_local.s1.factory import load_s1  # noqa: E402
from soma_local.temperature import evaluate  # noqa: E402
from training.examples import read_labelled  # noqa: E402


def main() -> int:
    data = data_dir()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--s1", default=None, help="S1 spec (default: the shipped classifier)")
    ap.add_argument("--labels", type=Path, default=data / "s1_labels" / "gold_dev.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="score only the first N states (0 = all)")
    ap.add_argument("--json", type=Path, help="also write the per-state probabilities here")
    args = ap.parse_args()
    examples = read_labelled(args.labels)
    if args.limit:
        examples = examples[: args.limit]
    statements = {m.name: m.statement for m in resolve_monitors(sorted({e.monitor for e in examples}))}
    s1 = load_s1(args.s1)
    probs, t0 = [], time.perf_counter()
    for i, e in enumerate(examples, 1):
        (p,) = s1.score([S1Query(statements[e.monitor], e.task, e.reasoning)])
        probs.append(np.nan if p is None else p)
        if i % 20 == 0:
            print(f"  {i}/{len(examples)} states, {(time.perf_counter() - t0) / i:.2f} s/state", file=sys.stderr)
    s1.close()
    p, y = np.array(probs), np.array([e.label for e in examples])
    monitors = np.array([e.monitor for e in examples])
    print(f"S1 {s1.name} on {args.labels.name} ({len(examples)} states, {(time.perf_counter() - t0) / len(examples):.2f} s/state)")
    print(f"{'monitor':<14}{'n':>5}{'pos':>5}{'AUROC':>8}{'ECE':>8}{'Brier':>8}")
    for name in ["all", *sorted(set(monitors))]:
        mask = (np.ones_like(y, dtype=bool) if name == "all" else monitors == name) & ~np.isnan(p)
        m = evaluate(p[mask], y[mask])
        print(f"{name:<14}{m.n:>5}{m.positives:>5}{m.auroc:>8.3f}{m.ece:>8.3f}{m.brier:>8.3f}")
    if args.json:
        args.json.write_text(json.dumps([{"key": e.key, "monitor": e.monitor, "label": e.label, "p": q}
                                         for e, q in zip(examples, probs)], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
