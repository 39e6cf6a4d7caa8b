"""Cost of calibrating a grid of thresholds by single-run readout, against one plain remind-only run.

For each question: one remind-only run and one readout run (same seed, same S1), on the default S2
unless told otherwise. The readout's main line is the remind-only run token for token; its extra cost
is the takeover continuations produced on branches. S1 answers both runs through one score cache, so
the same state gets the same p in both; S1's time is the same for both and is left out. Each run
decodes its prompt afresh, so neither is favoured by the order. Prints per question and in total: S2
generated tokens (a branch's takeover text is fed, not generated, so it shows in time only), S2 time,
wall time, branch count, and the ratios. Calibrating a grid of G
thresholds by real runs would cost about G remind-only runs; the readout costs the ratio printed.
How many branches there are depends on the S1, so the script also prints the bound for an S1 that
makes every pause after the first a branch point (each branch at most the takeover's token budget).

  python -m benchmarks.readout_cost --monitor unanswerable --limit 3 --max-tokens 512
  (add --s2 vllm:URL --s2-model NAME for the same over a vLLM server)
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from soma_local.calibration.runs import load_questions, sample
from soma_local.cli.args import add_s2_arguments, s2_options
from soma_local.data_dir import data_dir
from soma_local.engine.monitors import resolve_monitors
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.engine.trace import Branch, RunEnd
from soma_local.s1.cache import CachedS1, ScoreCache
from soma_local.s1.factory import load_s1
from soma_local.s2.build import build_s2


def _cost(end: RunEnd) -> tuple[int, float, float]:
    """Generated tokens, S2 seconds, and wall seconds without S1."""
    t, tm = end.tokens, end.timings
    return t.thinking + t.answer + t.probe, tm.s2_decode + tm.s2_prefill, tm.wall - tm.s1


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.readout_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--monitor", default="unanswerable")
    ap.add_argument("--data", help="questions JSONL (default: <data>/<monitor>/calib_easy.jsonl)")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--s1")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--scan-interval", type=int, default=256)
    add_s2_arguments(ap)  # --s2 vllm:URL measures the readout over HTTP; --seed samples questions too
    ap.set_defaults(n_ctx=4096)
    args = ap.parse_args()

    (monitor,) = resolve_monitors([args.monitor])
    questions = sample(load_questions(args.data or data_dir() / monitor.name / "calib_easy.jsonl"), args.limit, args.seed)
    options = s2_options(args)
    sampling = options.sampling
    s2 = build_s2(options)
    s1 = CachedS1(load_s1(args.s1, n_threads=args.threads), ScoreCache(tempfile.mkdtemp(), "bench"))
    print(f"S2 {s2.name} | S1 {s1.name} | monitor {monitor.name} | max_tokens {args.max_tokens} | X {args.scan_interval}")
    print(f"{'question':<28}{'branches':>9}{'tok RO':>8}{'tok RD':>8}{'S2s RO':>8}{'S2s RD':>8}{'wall RO':>9}{'wall RD':>9}  (wall: S1 excluded)")
    totals = [0.0] * 6
    bound = 0
    for q in questions:
        costs = {}
        runs = {}
        for mode in ("remind_only", "readout"):
            config = RunConfig.of_mode(mode, pause=PauseRule(args.scan_interval), max_tokens=args.max_tokens,
                               sampling=sampling)
            result = supervise(monitor.prompt(q.question), s2, s1, [monitor], config)
            costs[mode] = _cost(result.end)
            runs[mode] = result
            if mode == "remind_only":
                bound += max(0, result.end.scans - 1) * monitor.takeover.max_tokens
        (tok_ro, s2_ro, wall_ro), (tok_rd, s2_rd, wall_rd) = costs["remind_only"], costs["readout"]
        branches = sum(isinstance(r, Branch) for r in runs["readout"].records)
        if runs["readout"].end.thinking != runs["remind_only"].end.thinking:
            print(f"  warning: {q.id}: the readout's main line differs from the remind-only run")
        for j, v in enumerate((tok_ro, tok_rd, s2_ro, s2_rd, wall_ro, wall_rd)):
            totals[j] += v
        print(f"{q.id[:27]:<28}{branches:>9}{tok_ro:>8}{tok_rd:>8}{s2_ro:>8.1f}{s2_rd:>8.1f}{wall_ro:>9.1f}{wall_rd:>9.1f}")
    tok_ro, tok_rd, s2_ro, s2_rd, wall_ro, wall_rd = totals
    print(f"readout / remind-only: generated tokens {tok_rd / tok_ro:.2f}x, S2 time {s2_rd / s2_ro:.2f}x, "
          f"wall {wall_rd / wall_ro:.2f}x (a grid of G thresholds by real runs: about G x)")
    print(f"bound, a branch at every pause after the first: generated tokens <= {(tok_ro + bound) / tok_ro:.2f}x")
    s2.close()
    s1.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
