"""Throughput of supervised runs on one vLLM server, at N = 1, 4, 8 runs in flight, against vanilla.

The same questions at every N: supervised runs (classifier S1, both monitors, reminders and takeovers
as ``soma run`` does them) and vanilla runs (no S1). Each N keeps N runs in flight on threads, each
run its own ``VllmS2`` session on the one server, the scans of all runs through one ``BatchedS1``.
Prints per setting: generated tokens/s, questions per minute, the server's prefix-cache hit rate
(cached / prompt tokens over all requests), S1 forward passes and scans per pass, and the
supervised/vanilla ratios of wall time and of seconds per generated token (supervised runs generate
different text, reminders included, so both are shown). Goals (issue 11): N=8 at least 4x the
tokens/s of N=1, supervision at most 1.10x vanilla at N=8.

Starts its own server (``.venv-vllm``, the embedded SmolLM2, bf16 as in serving) unless ``--url``:

  SOMA_DATA_DIR=../shared/datasets python -m benchmarks.s2_vllm_throughput --questions 8 --max-tokens 256
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from soma_local.bench.datasets import get_benchmark, load_items
from soma_local.calibration.runs import sample
from soma_local.engine.monitors import resolve_monitors
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.s1.batched import BatchedS1
from soma_local.s1.factory import load_s1
from soma_local.s2.base import SamplingParams
from soma_local.s2.model_files import hf_folder
from soma_local.s2.vllm import ServerStats, VllmS2
from soma_local.s2.vllm_server import local_vllm


def run_setting(url: str, model: str, questions: list[str], n: int, s1: BatchedS1 | None, args) -> dict:
    sampling = SamplingParams(args.temperature, 0.95, 0, 0.0, args.seed)
    monitors = resolve_monitors(["overthinking", "unanswerable"]) if s1 is not None else []
    config = RunConfig(pause=PauseRule(args.scan_interval, args.line_break_slack), max_tokens=args.max_tokens,
                       sampling=sampling, thresholds={m.name: m.default_threshold for m in monitors})
    backends = [VllmS2(url, model, sampling=sampling) for _ in range(n)]
    passes_before = len(s1.batch_sizes) if s1 is not None else 0

    def one(i: int):
        s2 = backends[i % n]  # question i runs on slot i mod n; at most n at once (pool of n threads)
        return supervise(questions[i], s2, s1, monitors, config).end

    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        ends = list(pool.map(one, range(len(questions))))
    wall = time.perf_counter() - t0
    stats = ServerStats()
    for b in backends:
        stats.add(b.stats)
    generated = sum(e.tokens.thinking + e.tokens.answer + e.tokens.probe for e in ends)
    batches = s1.batch_sizes[passes_before:] if s1 is not None else []
    return {
        "wall": wall,
        "generated": generated,
        "tok_s": generated / wall,
        "q_min": 60 * len(questions) / wall,
        "cache_hit": stats.cached_tokens / max(1, stats.prompt_tokens),
        "requests": stats.requests,
        "scans": sum(e.scans for e in ends),
        "reminders": sum(e.reminders for e in ends),
        "takeovers": sum(e.takeover is not None for e in ends),
        "s1_passes": len(batches),
        "s1_batch_mean": statistics.mean(batches) if batches else 0.0,
        "s1_batch_max": max(batches, default=0),
    }


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.s2_vllm_throughput", description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="an already running vLLM server (default: start one)")
    ap.add_argument("--model", default="smollm2-135m", help="served model / its Hugging Face folder")
    ap.add_argument("--dtype", default="bfloat16", help="for the server this script starts")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--questions", type=int, default=8, help="GSM8K test questions, the same at every N")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--scan-interval", type=int, default=64)
    ap.add_argument("--line-break-slack", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--s1", help="S1 spec (default: the shipped classifier)")
    args = ap.parse_args()

    bench = get_benchmark("gsm8k")
    questions = [bench.prompt(q) for q in sample(load_items(bench), args.questions, args.seed)]
    s1 = BatchedS1(load_s1(args.s1))
    if args.url:
        return report(args.url, questions, s1, args)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "vllm.log"
        print(f"starting vLLM ({args.dtype}) on the embedded model; log {log}", flush=True)
        with local_vllm(hf_folder(args.model), args.model, log=log, dtype=args.dtype) as url:
            return report(url, questions, s1, args)


def report(url: str, questions: list[str], s1: BatchedS1, args) -> int:
    # Warm-up: the first requests compile; no setting should pay for that.
    s2 = VllmS2(url, args.model)
    s2.http.post("/v1/completions", json={"model": s2.served, "prompt": [1, 2, 3], "max_tokens": 8})
    print(f"{len(questions)} GSM8K questions, max {args.max_tokens} tokens, scan every {args.scan_interval}; "
          f"server {url}")
    head = (f"{'N':>3} {'run':<10} {'wall s':>7} {'gen tok':>7} {'tok/s':>7} {'q/min':>6} {'cache':>6} "
            f"{'scans':>5} {'S1 passes':>9} {'scans/pass':>10} {'max':>4}")
    print(head)
    rows: dict[tuple[int, str], dict] = {}
    for n in args.concurrency:
        for kind in ("vanilla", "supervised"):
            r = run_setting(url, args.model, questions, n, s1 if kind == "supervised" else None, args)
            rows[(n, kind)] = r
            print(f"{n:>3} {kind:<10} {r['wall']:>7.1f} {r['generated']:>7} {r['tok_s']:>7.1f} {r['q_min']:>6.2f} "
                  f"{100 * r['cache_hit']:>5.0f}% {r['scans']:>5} {r['s1_passes']:>9} {r['s1_batch_mean']:>10.2f} "
                  f"{r['s1_batch_max']:>4}", flush=True)
    print()
    base = args.concurrency[0]
    for n in args.concurrency:
        sup, van = rows[(n, "supervised")], rows[(n, "vanilla")]
        per_tok = (sup["wall"] / max(1, sup["generated"])) / (van["wall"] / max(1, van["generated"]))
        print(f"N={n}: supervised/vanilla wall {sup['wall'] / van['wall']:.2f}x, per generated token {per_tok:.2f}x; "
              f"tokens/s vs N={base}: supervised {sup['tok_s'] / rows[(base, 'supervised')]['tok_s']:.2f}x, "
              f"vanilla {van['tok_s'] / rows[(base, 'vanilla')]['tok_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
