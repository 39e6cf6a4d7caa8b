"""S1 scan latency and its cost relative to S2 decoding, on this machine.

    python -m benchmarks.s1_latency [--s1 classifier] [--repeats 30]

Prints p50 / p95 of one scan (a batch of the demo's three monitors by default, state filled to the S1's
input limit from a real trace) and the ratio of that time to the time the default S2 takes to write
256 tokens, the scan interval: the share of a run S1 adds when it scans at every pause.

An S1 that keeps encodings between scans (whole-state reading, ``soma_local.s1.chunked``) gets two
figures: cold, its cache emptied before every scan (what a first scan of a 2,048-token state costs),
and incremental, the trace's own pauses in order with the cache kept, as in a run (each scan re-encodes
only the reasoning's newest chunk or two).
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
from soma_local.engine.pauses import pause_cuts
from soma_local.s2.model_files import GgufVocab, resolve_gguf

INTERVAL = 256


def chunk_cache(s1):
    """The S1's cache of encodings between scans, where it keeps one."""
    return getattr(getattr(s1, "encoder", None), "cache", None)


def s1_latency(s1, monitors: list[str], repeats: int, task: str, reasoning: str) -> tuple[list[float], int]:
    """A scan of this state, ``repeats`` times; with a chunk cache, emptied before each (cold)."""
    statements = [m.statement for m in resolve_monitors(monitors)]
    queries = [S1Query(s, task, reasoning) for s in statements]
    s1.score(queries)  # warm-up: first call pays one-time allocation
    cache = chunk_cache(s1)
    times = []
    for _ in range(repeats):
        if cache is not None:
            cache.clear()
        t0 = time.perf_counter()
        s1.score(queries)
        times.append(time.perf_counter() - t0)
    state = s1.state_for(task, reasoning, statements)
    tokens = len(s1.tokenizer.encode(state))
    return times, min(tokens, s1.input_limit)


def incremental_latency(s1, monitors: list[str], repeats: int, task: str, reasoning: str) -> list[float]:
    """The last ``repeats`` pauses of the trace (the engine's schedule, SmolLM2 tokens) scanned in order,
    the cache kept from the pause before them on, as a run keeps it."""
    pieces = GgufVocab.from_path(resolve_gguf(None)).pieces(reasoning)
    _, texts = pause_cuts(reasoning, pieces)
    texts = texts[-(repeats + 1):]
    statements = [m.statement for m in resolve_monitors(monitors)]
    chunk_cache(s1).clear()
    s1.score([S1Query(s, task, texts[0]) for s in statements])
    times = []
    for text in texts[1:]:
        t0 = time.perf_counter()
        s1.score([S1Query(s, task, text) for s in statements])
        times.append(time.perf_counter() - t0)
    return times


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
    s1 = load_s1(args.s1)
    times, state_tokens = s1_latency(s1, monitors, args.repeats, trace.question, trace.thinking)
    incremental = (incremental_latency(s1, monitors, args.repeats, trace.question, trace.thinking)
                   if chunk_cache(s1) is not None else None)
    s1_name = s1.name
    s1.close()
    per_token, s2_name = s2_seconds_per_token(args.threads, trace.question)
    p50, p95 = np.percentile(times, 50), np.percentile(times, 95)
    s2_interval = per_token * INTERVAL
    print(f"S1 {s1_name}: scan of {len(monitors)} monitors, state {state_tokens} tokens, {args.repeats} repeats")
    print(f"  {'cold ' if incremental else ''}p50 {p50 * 1000:.0f} ms   p95 {p95 * 1000:.0f} ms")
    if incremental:
        print(f"  incremental (the trace's last {len(incremental)} pauses in order, encodings kept): "
              f"p50 {np.percentile(incremental, 50) * 1000:.0f} ms   p95 {np.percentile(incremental, 95) * 1000:.0f} ms")
    print(f"S2 {s2_name}: {1 / per_token:.1f} tok/s, {INTERVAL} tokens in {s2_interval:.2f} s")
    print(f"S1 / S2 time per scan interval: {p50 / s2_interval:.2f} (p50)   {p95 / s2_interval:.2f} (p95)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
