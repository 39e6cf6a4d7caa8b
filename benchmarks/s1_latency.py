"""S1 scan latency and its cost relative to S2 decoding, on this machine.

    python -m benchmarks.s1_latency [--s1 classifier] [--repeats 30]

Prints p50 / p95 of one scan (a batch of the demo's three monitors by default, state filled to the S1's
input limit from a real trace) and the ratio of that time to the time the default S2 takes to write
256 tokens, the scan interval: the share of a run S1 adds when it scans at every pause.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from soma_local.calibration.recorded import load_traces
from soma_local.data_dir import data_dir
from soma_local.engine.monitors import resolve_monitors
from soma_local.s1.base import S1Query
from soma_local.s1.factory import load_s1
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat, prompt_for, prompt_ids
from soma_local.s2.llama_cpp import LlamaCppS2
from soma_local.s2.model_files import resolve_gguf

INTERVAL = 256


def s1_latency(spec: str | None, monitors: list[str], repeats: int, task: str, reasoning: str) -> tuple[list[float], str, int]:
    s1 = load_s1(spec)
    queries = [S1Query(m.statement, task, reasoning) for m in resolve_monitors(monitors)]
    s1.score(queries)  # warm-up: first call pays one-time allocation
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        s1.score(queries)
        times.append(time.perf_counter() - t0)
    state_tokens = len(s1.tokenizer.encode(s1.state_for(task, reasoning, [q.statement for q in queries])))
    name = s1.name
    s1.close()
    return times, name, state_tokens


def s2_seconds_per_token(threads: int | None, question: str, runs: int = 3) -> tuple[float, str]:
    s2 = LlamaCppS2(resolve_gguf(None), n_ctx=2048, n_threads=threads, sampling=SamplingParams(seed=0))
    prompt = prompt_for(s2, question, fmt=ThinkingFormat("prompted"))
    rates = []
    for _ in range(runs):
        s2.load_prompt(prompt_ids(s2, prompt))
        chunk = s2.generate(INTERVAL)
        rates.append(chunk.seconds / max(len(chunk.ids), 1))
    name = s2.name
    s2.close()
    return float(np.median(rates)), name


def main() -> int:
    data = data_dir()
    ap = argparse.ArgumentParser(prog="python -m benchmarks.s1_latency", description=__doc__.split("\n")[0])
    ap.add_argument("--s1", default=None, help="S1 spec (default: the shipped classifier)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--monitor", action="append", default=None,
                    help="monitors scored in one scan, repeatable (default: overthinking, unanswerable, looping)")
    ap.add_argument("--threads", type=int, default=None, help="S2 threads (default: all cores)")
    args = ap.parse_args()
    trace = max(load_traces(data / "traces" / "umwp_Qwen3-8B_unanswerable.jsonl")[:20], key=lambda t: len(t.thinking))
    monitors = args.monitor or ["overthinking", "unanswerable", "looping"]
    times, s1_name, state_tokens = s1_latency(args.s1, monitors, args.repeats, trace.question, trace.thinking)
    per_token, s2_name = s2_seconds_per_token(args.threads, trace.question)
    p50, p95 = np.percentile(times, 50), np.percentile(times, 95)
    s2_interval = per_token * INTERVAL
    print(f"S1 {s1_name}: scan of {len(monitors)} monitors, state {state_tokens} tokens, {args.repeats} repeats")
    print(f"  p50 {p50 * 1000:.0f} ms   p95 {p95 * 1000:.0f} ms")
    print(f"S2 {s2_name}: {1 / per_token:.1f} tok/s, {INTERVAL} tokens in {s2_interval:.2f} s")
    print(f"S1 / S2 time per scan interval: {p50 / s2_interval:.2f} (p50)   {p95 / s2_interval:.2f} (p95)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
