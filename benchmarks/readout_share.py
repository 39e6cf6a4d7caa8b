"""What the single-run readout cost inside a finished bench run: branch tokens against main-line
tokens of every SOMA and no-reminder result line (each line is one readout run).

  python -m benchmarks.readout_share benchmarks/results/cpu
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from soma_local.bench.results import read_results


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.readout_share", description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a bench output folder (DIR or DIR/<model>)")
    args = ap.parse_args()
    print(f"{'model':<16}{'method':<13}{'lines':>6}{'branches':>9}{'main tok':>10}{'branch tok':>11}  ratio")
    for model_dir in sorted(p for p in [args.results, *args.results.iterdir()] if p.is_dir()):
        for method in ("soma", "no_reminder"):
            lines = [line for path in sorted(model_dir.glob(f"*/{method}.jsonl")) for line in read_results(path)]
            if not lines:
                continue
            main_tok = sum(line.outcome.tokens.thinking + line.outcome.tokens.answer for line in lines)
            probe = sum(line.outcome.tokens.probe for line in lines)
            branches = sum(r["type"] == "branch" for line in lines for r in line.outcome.records)
            print(f"{model_dir.name:<16}{method:<13}{len(lines):>6}{branches:>9}{main_tok:>10}{probe:>11}"
                  f"  {(main_tok + probe) / main_tok:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
