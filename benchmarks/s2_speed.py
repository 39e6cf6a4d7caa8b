"""S2 speed: our decode loop against llama.cpp's own decode time and llama-cpp-python's completion
path, then the same prompts with and without supervision in one process.

Prints:
  decode tok/s  native (llama.cpp's C-side eval time only), our loop, create_completion
  per scan      S1 seconds, loop seconds; wall-time shares of S2, S1 and the loop

"native" is what llama.cpp's own perf counters say the decodes cost (no sampling, no Python): the
ceiling any loop can reach with this build. Usage:

  .venv/bin/python -m benchmarks.s2_speed                       # embedded SmolLM2, 2 threads
  .venv/bin/python -m benchmarks.s2_speed --model M.gguf --n-gpu-layers -1 --flash-attn
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from soma_local.engine.monitors import resolve_monitors
from soma_local.engine.pauses import PauseRule
from soma_local.engine.supervise import RunConfig, supervise
from soma_local.s1.factory import load_s1
from soma_local.s2.base import SamplingParams
from soma_local.s2.formats import ThinkingFormat, detect_thinking, prompt_for, prompt_ids, system_prompt
from soma_local.s2.llama_cpp import LlamaCppS2
from soma_local.s2.model_files import resolve_gguf

PROMPTS = [
    "List the first twenty prime numbers and explain for each why it is prime.",
    "Explain step by step how to compute 37 * 48 by hand, then check the result two different ways.",
    "A train leaves at 9:40 and arrives at 13:15 after two stops of 12 minutes each. How long was it "
    "moving? Show all the steps.",
    "Write out the multiplication table of 7 from 1 to 20 and explain any patterns you see.",
]


def bench_decode(s2: LlamaCppS2, prompts: list[str], tokens: int, sampling: SamplingParams) -> dict[str, float]:
    fmt = detect_thinking(s2.chat_template or "", s2.is_single_token("</think>"))
    ours_tok = ours_s = native_s = 0.0
    native_tok = 0
    cc_tok = cc_s = 0.0
    for i, question in enumerate(prompts):
        ids = prompt_ids(s2, prompt_for(s2, question, fmt=fmt, system=system_prompt(fmt, False)))
        # Our loop.
        s2.set_sampling(replace(sampling, seed=sampling.seed + i))
        s2.load_prompt(ids)
        s2.reset_decode_counters()
        chunk = s2.generate(tokens)
        ns, nt = s2.decode_counters()
        ours_tok += len(chunk.ids)
        ours_s += chunk.seconds
        native_s += ns
        native_tok += nt
        # llama-cpp-python's completion path on the same context (prefix reused, so timing is decode).
        s2.clear_context()
        s2.llm.eval(ids[:-1])
        t0 = time.perf_counter()
        out = s2.llm.create_completion(
            ids, max_tokens=tokens, temperature=sampling.temperature, top_p=sampling.top_p,
            top_k=sampling.top_k, min_p=sampling.min_p, seed=sampling.seed + i,
        )
        cc_s += time.perf_counter() - t0
        cc_tok += out["usage"]["completion_tokens"]
        s2.clear_context()
    return {
        "native": native_tok / native_s if native_s else float("nan"),
        "ours": ours_tok / ours_s,
        "create_completion": cc_tok / cc_s,
        "tokens": ours_tok,
    }


def bench_supervised(s2, s1, prompts, tokens, interval, sampling: SamplingParams) -> dict[str, float]:
    monitors = resolve_monitors(["overthinking", "unanswerable"])
    rows = {"vanilla": [], "supervised": []}
    scans, s1_per_scan, loop_per_scan = 0, [], []
    for i, question in enumerate(prompts):
        for name, s1_used in (("vanilla", None), ("supervised", s1)):
            config = RunConfig(
                takeovers="never",  # never cut the run short: equal work with and without S1
                pause=PauseRule(interval, 128),
                max_tokens=tokens,
                thinking=ThinkingFormat("prompted", close="</never>"),  # think for the whole budget
                sampling=replace(sampling, seed=sampling.seed + i),
            )
            end = supervise(question, s2, s1_used, monitors, config).end
            rows[name].append(end)
            if s1_used is not None and end.scans:
                scans += end.scans
                s1_per_scan.append(end.timings.s1 / end.scans)
                loop_per_scan.append(end.timings.loop / end.scans)
    sup = rows["supervised"]
    wall = sum(e.timings.wall for e in sup)
    return {
        "scans": scans,
        "s1_s_per_scan": statistics.mean(s1_per_scan) if s1_per_scan else float("nan"),
        "loop_ms_per_scan": 1000 * statistics.mean(loop_per_scan) if loop_per_scan else float("nan"),
        "share_s2": sum(e.timings.s2_decode + e.timings.s2_prefill for e in sup) / wall,
        "share_s1": sum(e.timings.s1 for e in sup) / wall,
        "share_loop": sum(e.timings.loop for e in sup) / wall,
        "vanilla_tok_s": sum(e.tokens.thinking + e.tokens.answer for e in rows["vanilla"])
        / sum(e.timings.s2_decode for e in rows["vanilla"]),
        "supervised_tok_s": sum(e.tokens.thinking + e.tokens.answer for e in sup)
        / sum(e.timings.s2_decode for e in sup),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.s2_speed", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--model", help="S2 GGUF path or embedded name")
    ap.add_argument("--s1", default="readout", help="S1 spec for the supervised runs ('none' skips them)")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS))
    ap.add_argument("--scan-interval", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-gpu-layers", type=int, default=0)
    ap.add_argument("--flash-attn", action="store_true")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--top-k", type=int, default=0, help="20 for Qwen3; 0 (off) is the R1 setting")
    args = ap.parse_args()

    path = resolve_gguf(args.model)
    s2 = LlamaCppS2(path, n_ctx=args.n_ctx, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers,
                    flash_attn=args.flash_attn)
    prompts = PROMPTS[: args.prompts]
    sampling = SamplingParams(args.temperature, args.top_p, args.top_k, 0.0, args.seed)
    print(f"model {path.name} | threads {args.threads} | n_gpu_layers {args.n_gpu_layers} | "
          f"{len(prompts)} prompts x {args.tokens} tokens | {sampling}")
    d = bench_decode(s2, prompts, args.tokens, sampling)
    print(f"decode tok/s: native {d['native']:.1f} | our loop {d['ours']:.1f} "
          f"({100 * d['ours'] / d['native']:.1f}% of native) | create_completion "
          f"{d['create_completion']:.1f} ({100 * d['create_completion'] / d['native']:.1f}% of native)")
    if args.s1 != "none":
        s1 = load_s1(args.s1, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
        r = bench_supervised(s2, s1, prompts, args.tokens, args.scan_interval, sampling)
        print(f"supervised ({s1.name}, 2 monitors, X={args.scan_interval}): {r['scans']} scans | "
              f"S1 {r['s1_s_per_scan']:.3f} s/scan | loop {r['loop_ms_per_scan']:.2f} ms/scan | "
              f"wall shares S2 {100 * r['share_s2']:.1f}% S1 {100 * r['share_s1']:.1f}% "
              f"loop {100 * r['share_loop']:.2f}%")
        print(f"S2 decode tok/s vanilla {r['vanilla_tok_s']:.1f} | supervised {r['supervised_tok_s']:.1f}")
        s1.close()
    s2.close()


if __name__ == "__main__":
    main()
