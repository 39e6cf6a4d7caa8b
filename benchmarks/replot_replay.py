"""Re-render the Pareto plot of finished replays from their results files (no S1, no traces needed).

  python -m benchmarks.replot_replay benchmarks/results/replay_*/replay_results.json

Writes ``pareto.png`` beside each ``replay_results.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from soma_local.calibration.report import replay_plot


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.replot_replay", description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="+", help="replay_results.json files")
    for path in ap.parse_args().results:
        print(replay_plot(json.loads(path.read_text(encoding="utf-8")), path.with_name("pareto.png")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
