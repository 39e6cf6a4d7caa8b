"""Two S1s' trace replays of the same traces, compared question by question with a paired bootstrap.

``soma replay --calibrate-share 0.5 --out DIR`` writes ``DIR/replay_results.json`` with every trace's S1 p
at each pause and the h it chose per S2 on the calibration half. Given two such files over the same traces
and the same calibration half (two S1s, the same seed and share), this replays the reported half of each
(dataset, S2) group at each file's own h and prints, per group, abstention, false abstention, accuracy and
the objective (Abs - FA) of both, and the second minus the first with a 95 % interval from resampling
the questions (answerable and unanswerable apart, the same questions for both S1s). No model is loaded.

    python -m benchmarks.replay_compare benchmarks/results/replay_classifier_calibrated/replay_results.json \\
        benchmarks/results/replay_statements_calibrated/replay_results.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np


def load(path: Path) -> dict:
    from soma_local.calibration.replay import ScannedTrace

    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["traces"] = {t["id"] + "|" + t["model"]: ScannedTrace.model_validate(t) for t in raw["traces"]}
    return raw


def outcomes(results: dict, keys: list[str], h: float, abstaining: bool) -> dict[str, np.ndarray]:
    from soma_local.calibration.replay import replay_item

    items = [replay_item(results["traces"][k], h, abstaining) for k in keys]
    return {"answerable": np.array([i.answerable for i in items]), "abstained": np.array([i.abstained for i in items]),
            "correct": np.array([i.correct for i in items]), "takeover": np.array([i.takeover for i in items])}


def rates(o: dict[str, np.ndarray], una: np.ndarray, ans: np.ndarray) -> dict[str, float]:
    """Abstention over unanswerable rows ``una``, FA and accuracy over answerable rows ``ans`` (index arrays)."""
    abs_ = o["abstained"][una].mean() if len(una) else math.nan
    fa = o["abstained"][ans].mean() if len(ans) else math.nan
    acc = o["correct"][ans].mean() if len(ans) else math.nan
    return {"Abs": abs_, "FA": fa, "Acc": acc, "Abs-FA": (0.0 if len(una) == 0 else abs_) - fa}


def main(argv: list[str] | None = None) -> int:
    from soma_local.calibration.scoring import is_abstention
    from soma_local.engine.monitors import resolve_monitors

    ap = argparse.ArgumentParser(prog="python -m benchmarks.replay_compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("first", type=Path, help="replay_results.json of the first S1")
    ap.add_argument("second", type=Path, help="replay_results.json of the second S1 (differences are second - first)")
    ap.add_argument("--resamples", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    a, b = load(args.first), load(args.second)
    for field in ("monitor", "scan_interval", "calibrate_share", "seed"):
        if a[field] != b[field]:
            raise SystemExit(f"the two replays differ in {field}: {a[field]} vs {b[field]}")
    if set(a["traces"]) != set(b["traces"]) or set(a["calibration_ids"]) != set(b["calibration_ids"]):
        raise SystemExit("the two replays are not over the same traces and calibration half")
    (monitor,) = resolve_monitors([a["monitor"]])
    abstaining = is_abstention(monitor.takeover.prefill)
    calib = set(a["calibration_ids"])
    rng = np.random.default_rng(args.seed)
    print(f"first: {a['s1']} ({a['s1_version']}); second: {b['s1']} ({b['s1_version']}); monitor {a['monitor']}; "
          f"reported half only, each at its own calibrated h")
    print(f"{'group':<40}{'n':>5}{'h':>6}" + "".join(f"{c:>20}" for c in ("Abs%", "FA%", "Acc%", "Abs-FA")) + f"{'TO':>5}")
    for group in sorted(a["groups"]):
        dataset, model = group.split(" / ")
        keys = sorted(k for k, t in a["traces"].items()
                      if t.dataset == dataset and t.model.split("/")[-1] == model and t.id not in calib)
        ha, hb = (float(r["groups"][group]["h"]) for r in (a, b))
        oa, ob = outcomes(a, keys, ha, abstaining), outcomes(b, keys, hb, abstaining)
        ans, una = np.flatnonzero(oa["answerable"]), np.flatnonzero(~oa["answerable"])
        ra, rb = rates(oa, una, ans), rates(ob, una, ans)
        diffs = {m: [] for m in ra}
        for _ in range(args.resamples):
            i_una = rng.choice(una, len(una)) if len(una) else una
            i_ans = rng.choice(ans, len(ans))
            sa, sb = rates(oa, i_una, i_ans), rates(ob, i_una, i_ans)
            for m in ra:
                diffs[m].append(sb[m] - sa[m])
        cell = lambda r, m: "-" if math.isnan(r[m]) else f"{100 * r[m]:.1f}"
        print(f"{group:<40}{len(keys):>5}{ha:>6g}" + "".join(f"{cell(ra, m):>20}" for m in ra) + f"{oa['takeover'].sum():>5}")
        print(f"{'':<40}{'':>5}{hb:>6g}" + "".join(f"{cell(rb, m):>20}" for m in ra) + f"{ob['takeover'].sum():>5}")
        row = ""
        for m in ra:
            if math.isnan(ra[m]):
                row += f"{'-':>20}"
                continue
            lo, hi = np.percentile(diffs[m], [2.5, 97.5])
            row += f"{100 * (rb[m] - ra[m]):+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]".rjust(20)
        print(f"{'  second - first [95 %]':<51}" + row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
